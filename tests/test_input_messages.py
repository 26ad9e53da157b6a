"""Bad input a user hits first gets one line in the user's terms, naming the file, the item and the field: a picture
cut short in an MCQ source, options that repeat the same text, a benchmark without ``benchmark.json``, an
``items.jsonl`` that is a folder, engine and protocol options of the wrong shape."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from omnieval.cli import main


def picture(colour: str, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(buffer, fmt)
    return buffer.getvalue()


def write_tsv(path: Path, rows: list[list[str]]) -> Path:
    header = ["index", "question", "A", "B", "C", "answer", "image"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(r) + "\n" for r in [header, *rows]))
    return path


def one_line_error(argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("omnieval: error: ") and "Traceback" not in err
    return err


def spectrum_bench(folder: Path, options: list[list[str]], *, meta: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    if meta is not False:
        (folder / "benchmark.json").write_text(json.dumps(meta or {"name": "b", "protocol": "spectrum"}))
    items = [{"item_id": f"q{i}", "question": "Which city?", "options": opts, "answer": "A",
              "media": {"image": f"media/{i}.png"}} for i, opts in enumerate(options)]
    (folder / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    return folder


# -- a picture cut short (datasets mcq) ----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_mcq_refuses_an_image_cut_short_naming_file_row_and_column(fmt, tmp_path, capsys):
    whole = base64.b64encode(picture("red", fmt)).decode()
    cut = base64.b64encode(picture("blue", fmt)).decode()
    cut = cut[: len(cut) * 2 // 3 // 4 * 4]  # still valid base64 (whole quads) and still starts like the format
    assert base64.b64decode(cut, validate=True)[:2] == picture("blue", fmt)[:2]
    source = write_tsv(tmp_path / "MMBench.tsv", [["1", "Colour?", "red", "blue", "green", "A", whole],
                                                  ["2", "Colour?", "red", "blue", "green", "B", cut]])
    err = one_line_error(["datasets", "mcq", str(source), "--out", str(tmp_path / "bench")], capsys)
    assert f"file '{source}'" in err and "item '2 (row 1)'" in err and "field 'image'" in err
    assert "does not decode" in err and fmt.replace("JPEG", "JPG") in err
    assert not (tmp_path / "bench").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
