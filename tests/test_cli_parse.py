"""``omnieval parse``: answer texts in, the same rows with a verdict out; bad input one line naming the file, the
line and the field, exit 2, and no output written. Expected verdicts are worked by hand from the released code each
scorer reproduces (the scorers' own tests compare with that code run on 40+ texts)."""

from __future__ import annotations

import json

import pytest

from omnieval.cli import main

OPTIONS = ["Violin", "Trumpet", "Flute", "Cello"]


def _write(path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows),
                    encoding="utf-8")


def _read(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_rows_keep_their_fields_and_gain_a_verdict(tmp_path, capsys):
    """AV-Odyssey's parser reads "Based on the video, D." as B (the first capital letter) and an empty answer as A;
    a dict of options keeps its own labels; the row's other fields come back untouched."""
    rows = [{"id": "q1", "options": OPTIONS, "answer": "B", "text": "Based on the video, D.", "model": "m"},
            {"id": "q2", "options": {"A": "Violin", "B": "Trumpet", "C": "Flute", "D": "Cello"}, "answer": "A",
             "text": ""},
            {"id": "q3", "options": OPTIONS, "answer": "D", "text": "(D)"}]
    _write(tmp_path / "in.jsonl", rows)
    assert main(["parse", "--scorer", "av-odyssey", str(tmp_path / "in.jsonl"),
                 "--out", str(tmp_path / "o.jsonl")]) == 0
    out = _read(tmp_path / "o.jsonl")
    assert [{k: r[k] for k in ("choice", "correct", "source")} for r in out] == [
        {"choice": "B", "correct": True, "source": "parsed"}, {"choice": "A", "correct": True, "source": "forced"},
        {"choice": "D", "correct": True, "source": "parsed"}]
    assert [{k: v for k, v in r.items() if k not in ("choice", "correct", "source")} for r in out] == rows
    assert "3 rows by av-odyssey: accuracy 1.0000 (3 of 3 counted); parsed 2, forced 1, unparsed 0" in \
        capsys.readouterr().out


def test_robust_gives_omnieval_s_verdict_and_a_dropped_answer_leaves_the_count(tmp_path, capsys):
    rows = [{"id": "q1", "options": OPTIONS, "answer": "B", "text": "Based on the video, D."},
            {"id": "q2", "options": OPTIONS, "answer": "A", "text": ""},
            {"id": "q3", "options": OPTIONS, "answer": "B", "text": None}]
    _write(tmp_path / "in.jsonl", rows)
    assert main(["parse", "--scorer", "av-odyssey", "--robust", str(tmp_path / "in.jsonl"),
                 "--out", str(tmp_path / "r.jsonl")]) == 0
    robust = _read(tmp_path / "r.jsonl")  # the closing "D." is read; no text names no option
    assert [(r["choice"], r["source"], r["correct"]) for r in robust] == [("D", "parsed", False),
                                                                          (None, "unparsed", False),
                                                                          (None, "unparsed", False)]
    assert main(["parse", "--scorer", "mmau", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "m.jsonl")]) == 0
    assert [r["correct"] for r in _read(tmp_path / "m.jsonl")] == [False, False, None]
    assert "accuracy 0.0000 (0 of 2 counted)" in capsys.readouterr().out.splitlines()[-1]


GOOD = {"id": "q1", "options": OPTIONS, "answer": "B", "text": "B"}


@pytest.mark.parametrize("bad, item, field, says", [
    ('{"id": "q1", "options": ', "line 2", None, "not valid JSON"),
    ('["q1"]', "line 2", None, "expected a JSON object"),
    ({"id": "q2", "options": OPTIONS, "answer": "B"}, "line 2", "text", "missing field 'text'"),
    ({"id": "q2", "options": OPTIONS, "answer": "E", "text": "B"}, "line 2 (id 'q2')", "answer", "not one of"),
    ({"id": "q2", "options": "Violin, Trumpet", "answer": "B", "text": "B"}, "line 2 (id 'q2')", "options",
     "list of 1 to 26"),
    ({"id": "q2", "options": OPTIONS, "answer": "B", "text": 2}, "line 2 (id 'q2')", "text", "string or null"),
])
def test_a_bad_row_is_one_line_naming_file_line_and_field(tmp_path, capsys, bad, item, field, says):
    _write(tmp_path / "in.jsonl", [GOOD, bad])
    assert main(["parse", "--scorer", "mmau", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "in.jsonl") in err and f"item {item!r}" in err
    assert (field is None or f"field {field!r}" in err) and says in err
    assert not list(tmp_path.glob("o.jsonl*")) and not list(tmp_path.glob(".o.jsonl*"))


def test_a_scorer_that_refuses_an_item_and_an_unknown_scorer(tmp_path, capsys):
    """OmniBench's release stops where the gold text parses to no letter ("cat": no "(X)", "X ", "X." and too short
    for the text pass); omnieval names the row instead."""
    _write(tmp_path / "in.jsonl", [{"id": "q1", "options": ["dog", "cat"], "answer": "B", "text": "B"}])
    assert main(["parse", "--scorer", "omnibench", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "line 1 (id 'q1')" in err and "field 'answer'" in err and "parses to no letter" in err
    assert main(["parse", "--scorer", "nope", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown scorer 'nope'; known scorers: av-odyssey, daily-omni, jointavbench, mmar, mmau" in err
    assert main(["parse", "--scorer", "mmau", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main(["parse", "--scorer", "mmau", str(tmp_path / "in.jsonl"), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["parse", "--scorer", "mmau", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "file" / "o")]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "field '--out'" in err and len(err.strip().splitlines()) == 1
