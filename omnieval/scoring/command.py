"""``omnieval parse``: score a file of answer texts with one scorer, so a user can check a rule on their own outputs.

Input: JSON Lines, one object a line: ``id``, ``options`` (a list of texts, labelled ``A``, ``B``, ... in order, or
an object label -> text), ``answer`` (the gold label) and ``text`` (the answer text; null for no output). Any other
field is kept, and handed to the scorer as the item's ``extra`` (a released rule may read e.g. a task type). Output:
the same rows, in the same order, each with ``choice`` (a label or null), ``correct`` (true, false, or null where
the rule drops the answer from its denominator) and ``source`` (parsed | forced | unparsed). Every row is checked
before any is scored; a bad one stops the command with one line naming the file, the line (and id) and the field.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.scoring.base import ScoreItem, Verdict, get_scorer, labels_for, scorer_names, unavailable_reason

ROW_FIELDS = ("id", "options", "answer", "text")


def parse_command(scorer_name: str, input_path: str | Path, out: str | Path, robust: bool = False) -> int:
    """Score every row of ``input_path`` by ``scorer_name`` (or omnieval's own rule with ``robust``), write ``out``
    and print one summary line."""
    if scorer_name not in scorer_names():
        raise InputError(f"unknown scorer {scorer_name!r}; known scorers: {', '.join(scorer_names())}",
                         field="--scorer")
    name = "robust" if robust else scorer_name
    reason = unavailable_reason(get_scorer(name))
    if reason is not None:
        raise InputError(f"the official rule of {name} is not computed here ({reason}); --robust scores the answers "
                         "by omnieval's own rule", field="--scorer")
    if Path(out).is_dir():
        raise InputError("is a folder: give the file to write", file=out, field="--out")
    rows = read_rows(Path(input_path))
    verdicts = score_rows(name, rows, Path(input_path))
    write_rows(Path(out), rows, verdicts)
    print(summary(name, verdicts, out))
    return 0


def read_rows(path: Path) -> list[tuple[str, dict, ScoreItem]]:
    """(where, row, item) per non-blank line, every row checked (module doc)."""
    if not path.is_file():
        raise InputError("no such file", file=path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from None
    rows = [_row(path, n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    if not rows:
        raise InputError("no rows: the file holds no JSON objects", file=path)
    return rows


def _row(path: Path, number: int, line: str) -> tuple[str, dict, ScoreItem]:
    where = f"line {number}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", file=path, item=where) from None
    if not isinstance(row, dict):
        raise InputError(f"expected a JSON object, got a JSON {type(row).__name__}", file=path, item=where)
    for key in ROW_FIELDS:
        if key not in row:
            raise InputError(f"missing field {key!r} (each row holds {', '.join(ROW_FIELDS)})", file=path,
                             item=where, field=key)
    where = f"{where} (id {row['id']!r})"
    if row["text"] is not None and not isinstance(row["text"], str):
        raise InputError(f"expected a string or null, got {type(row['text']).__name__}", file=path, item=where,
                         field="text")
    labels, options = _options(row["options"], path, where)
    extra = {k: v for k, v in row.items() if k not in ROW_FIELDS}
    try:
        item = ScoreItem(labels, options, row["answer"], extra)
    except (ValueError, TypeError) as exc:
        raise InputError(str(exc), file=path, item=where, field="answer") from None
    return where, row, item


def _options(value, path: Path, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Labels and texts from a list (labelled A, B, ...) or an object label -> text."""
    if isinstance(value, list) and 0 < len(value) <= 26 and all(isinstance(v, str) for v in value):
        return labels_for(len(value)), tuple(value)
    if isinstance(value, dict) and value and all(isinstance(k, str) and k and isinstance(v, str)
                                                 for k, v in value.items()):
        return tuple(value), tuple(value.values())
    raise InputError("expected a list of 1 to 26 option texts or an object label -> text, e.g. "
                     '["dog", "cat"] or {"A": "dog", "B": "cat"}', file=path, item=where, field="options")


def score_rows(name: str, rows: list[tuple[str, dict, ScoreItem]], path: Path) -> list[Verdict]:
    """One verdict per row; a rule that refuses an item (e.g. OmniBench's gold text that parses to no letter) stops
    with the row named."""
    scorer = get_scorer(name)
    verdicts = []
    for where, row, item in rows:
        try:
            verdicts.append(scorer.score(row["text"], item))
        except ValueError as exc:
            raise InputError(f"{name}: {exc}", file=path, item=where, field="answer") from None
    return verdicts


def write_rows(out: Path, rows: list[tuple[str, dict, ScoreItem]], verdicts: list[Verdict]) -> None:
    """The rows with their verdicts, written beside ``out`` and moved into place once complete."""
    tmp = out.with_name(f".{out.name}.partial")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            for (_, row, _), verdict in zip(rows, verdicts, strict=True):
                scored = {**row, "choice": verdict.choice, "correct": verdict.correct, "source": verdict.source}
                f.write(json.dumps(scored, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    except OSError as exc:
        if tmp.is_file():
            tmp.unlink()
        raise InputError(f"cannot write: {exc.strerror}", file=out, field="--out") from None


def summary(name: str, verdicts: list[Verdict], out: str | Path) -> str:
    """``N rows by <rule>: accuracy X (k of n counted); parsed a, forced b, unparsed c; dropped d -> OUT``."""
    counted = [v for v in verdicts if v.correct is not None]
    right = sum(bool(v.correct) for v in counted)
    sources = Counter(v.source for v in verdicts)
    accuracy = f"{right / len(counted):.4f}" if counted else "n/a"
    return (f"{len(verdicts)} rows by {name}: accuracy {accuracy} ({right} of {len(counted)} counted); "
            f"parsed {sources['parsed']}, forced {sources['forced']}, unparsed {sources['unparsed']}; "
            f"dropped {len(verdicts) - len(counted)} -> {out}")
