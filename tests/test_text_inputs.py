"""A benchmark or release text file that is not UTF-8 (a Latin-1 byte) is an ``InputError`` naming the file, the
line and the byte offset, not a ``UnicodeDecodeError`` traceback; an items file without items is an error too."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.benchmark import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
LATIN1 = "café".encode("latin-1")  # b"caf\xe9": \xe9 is not UTF-8 here


def assert_names(err: InputError, path: Path, line: int, offset: int) -> None:
    message = str(err)
    assert err.file == str(path) and path.name in message
    assert f"line {line}" in message and f"byte offset {offset}" in message and "0xe9" in message, message


def latin1_json_lines(first: dict, second: dict) -> tuple[bytes, int]:
    """Two JSON lines, the second's question ending in a Latin-1 'é'; returns the bytes and the byte's offset."""
    line1 = (json.dumps(first) + "\n").encode()
    line2 = json.dumps(second).encode().replace(b"QUESTION", b"Qu' " + LATIN1) + b"\n"
    return line1 + line2, len(line1) + line2.index(b"\xe9")


def test_items_jsonl_with_a_latin1_byte(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps({"protocol": "crossmodal"}))
    data, offset = latin1_json_lines({"item_id": "a"}, {"item_id": "b", "question": "QUESTION"})
    (bench / "items.jsonl").write_bytes(data)
    with pytest.raises(InputError) as err:
        load_benchmark(bench)
    assert_names(err.value, bench / "items.jsonl", 2, offset)


def test_benchmark_json_with_a_latin1_byte(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "benchmark.json").write_bytes(b'{"protocol": "crossmodal",\n "name": "' + LATIN1 + b'"}')
    (bench / "items.jsonl").write_text("")
    with pytest.raises(InputError) as err:
        load_benchmark(bench)
    assert_names(err.value, bench / "benchmark.json", 2, 40)


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_items_file_without_items_is_an_error(tmp_path, content):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps({"protocol": "crossmodal"}))
    (bench / "items.jsonl").write_text(content)
    with pytest.raises(InputError, match="no items") as err:
        load_benchmark(bench)
    assert err.value.file == str(bench / "items.jsonl")


def test_items_parquet_without_rows_is_an_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps({"protocol": "crossmodal"}))
    pq.write_table(pa.table({"item_id": pa.array([], pa.string())}), bench / "items.parquet")
    with pytest.raises(InputError, match="no items") as err:
        load_benchmark(bench)
    assert err.value.file == str(bench / "items.parquet")


def test_xmodbench_release_json_with_a_latin1_byte(tmp_path):
    from omnieval.datasets.xmodbench import convert_xmodbench

    folder = tmp_path / "release" / "01_perception" / "instruments"
    folder.mkdir(parents=True)
    path = folder / "solos_questions_text_text.json"
    path.write_bytes(b'[\n {"question": "Qu' + LATIN1 + b'?"}\n]\n')
    with pytest.raises(InputError) as err:
        convert_xmodbench(tmp_path / "release", tmp_path / "out")
    assert_names(err.value, path, 2, 22)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "xmodbench", str(tmp_path / "release"),
                           "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "line 2" in done.stderr


def test_contra4_release_with_a_latin1_byte(tmp_path):
    from omnieval.datasets.contra4 import read_release

    path = tmp_path / "release.json"
    path.write_bytes(b'[\n\n {"id": "x", "question": "' + LATIN1 + b'"}]')
    with pytest.raises(InputError) as err:
        read_release(path)
    assert_names(err.value, path, 3, 32)


def test_mcq_tsv_with_a_latin1_byte(tmp_path):
    from omnieval.datasets.mcq import convert_mcq

    path = tmp_path / "bench.tsv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(["index", "question", "A", "B", "answer", "image_path"])
        writer.writerow([0, "Colour?", "red", "blue", "A", "x.png"])
    head = path.read_bytes()
    path.write_bytes(head + b"1\tCaf" + b"\xe9?\tred\tblue\tB\tx.png\r\n")
    with pytest.raises(InputError) as err:
        convert_mcq(path, tmp_path / "out")
    assert_names(err.value, path, 3, len(head) + 5)
