"""``omnieval metrics`` and ``omnieval stats`` refuse predictions that would give a silently wrong number: no rows,
an unknown protocol, a null target, a choice or target that is not one of the instance's option labels, the same
prediction twice (e.g. one file given twice). Each refusal names the file, the row and the column, and the command
exits with status 2 and one line on stderr, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.stats.read import read_predictions

ROOT = Path(__file__).resolve().parents[1]


def good_rows(n_items: int = 4) -> list[dict]:
    rows = []
    for i in range(n_items):
        for c in ("C000", "C100"):
            rows.append(dict(model="m", prompt="zs", protocol="dissonance", split="s", item_id=f"q{i}",
                             instance_id=f"q{i}|{c}", condition=c, target="A", choice="AB"[i % 2],
                             abstain_label="E", confidence=None, confidence_method=None, n_options=5))
    return rows


def write(rows: list[dict], path: Path) -> Path:
    frame = pl.DataFrame(rows, schema_overrides={"confidence": pl.Float64, "confidence_method": pl.Utf8,
                                                 "choice": pl.Utf8, "target": pl.Utf8})
    {".parquet": frame.write_parquet, ".jsonl": frame.write_ndjson, ".csv": frame.write_csv}[path.suffix](path)
    return path


def run_cli(command: str, paths: list[Path], out: Path) -> subprocess.CompletedProcess:
    extra = ["--resamples", "10"] if command == "metrics" else ["--permutations", "10"]
    return subprocess.run([sys.executable, "-m", "omnieval.cli", command, *map(str, paths), "--out", str(out),
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=300)


def refused(paths: list[Path], *, field: str | None, words: tuple[str, ...]) -> InputError:
    with pytest.raises(InputError) as err:
        read_predictions(paths)
    message = str(err.value)
    assert err.value.file == str(paths[-1]) and paths[-1].name in message
    assert err.value.field == field
    for word in words:
        assert word in message, (word, message)
    return err.value


def test_good_predictions_are_read(tmp_path):
    assert len(read_predictions([write(good_rows(), tmp_path / "p.parquet")])) == 8


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv"])
def test_an_input_without_rows_is_refused(tmp_path, suffix):
    path = write(good_rows()[:0], tmp_path / f"empty{suffix}")
    refused([path], field=None, words=("no predictions",))
    blank = tmp_path / f"blank{suffix}"
    blank.write_bytes(b"")
    refused([blank], field=None, words=("empty file",))


def test_an_unknown_protocol_is_refused_with_the_known_ones(tmp_path):
    rows = good_rows()
    rows[5]["protocol"] = "dissonanse"
    err = refused([write(rows, tmp_path / "p.jsonl")], field="protocol",
                  words=("row 6", "'dissonanse'", "dissonance", "crossmodal", "spectrum", "contrastive"))
    assert err.item == "row 6"


def test_a_null_target_is_refused(tmp_path):
    rows = good_rows()
    rows[2]["target"] = None
    err = refused([write(rows, tmp_path / "p.parquet")], field="target", words=("row 3", "null"))
    assert err.item == "row 3"


def test_a_choice_outside_the_option_labels_is_refused(tmp_path):
    rows = good_rows()
    rows[3]["choice"] = "F"  # 5 options: A-E
    refused([write(rows, tmp_path / "p.csv")], field="choice", words=("row 4", "'F'", "A, B, C, D, E"))
    rows[3]["choice"] = "a"  # not a label at all (lower case), even without n_options
    no_count = [{k: v for k, v in r.items() if k != "n_options"} for r in rows]
    refused([write(no_count, tmp_path / "q.csv")], field="choice", words=("row 4", "'a'"))
    rows[3]["choice"], rows[0]["target"] = "A", "G"
    refused([write(rows, tmp_path / "r.csv")], field="target", words=("row 1", "'G'"))


def test_the_same_prediction_twice_is_refused(tmp_path):
    path = write(good_rows(), tmp_path / "p.parquet")
    err = refused([path, path], field="instance_id", words=("duplicate", "q0|C000", "row 1"))
    assert "p.parquet" in str(err)
    rows = good_rows()
    rows.append(dict(rows[4]))  # one file holding one row twice
    refused([write(rows, tmp_path / "d.jsonl")], field="instance_id", words=("row 5", "row 9", "q2|C000"))
    # the same instance in another mode or prompt is no duplicate
    other = [dict(r, prompt="cot") for r in good_rows()]
    assert len(read_predictions([path, write(other, tmp_path / "cot.parquet")])) == 16


@pytest.mark.parametrize("command", ["metrics", "stats"])
def test_the_commands_exit_2_with_one_line(tmp_path, command):
    path = write(good_rows(), tmp_path / "p.parquet")
    done = run_cli(command, [path, path], tmp_path / "out")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "duplicate" in lines[0] and "p.parquet" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
    ok = run_cli(command, [path], tmp_path / "ok")
    assert ok.returncode == 0, ok.stderr
