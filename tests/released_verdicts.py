"""The verdicts benchmarks' released evaluation code gives on answers models really write (``tests/data/scoring``).

Each ``<scorer>.jsonl`` opens with a line naming the released code (``reference``: repository, commit, path, the
functions run) and then has one row per answer, laid out as ``omnieval parse`` reads them (``id``, ``options``,
``answer``, ``text``) plus the released code's ``choice`` (the option letter it took, null for none) and
``correct`` (null where it leaves the answer out of its denominator). The rows were produced by running that code on
exactly these texts; a few carry a second released variant's verdict for comparison (e.g. ``api_tester_correct``).
"""

from __future__ import annotations

import json
from pathlib import Path

from omnieval.scoring import ScoreItem, get_scorer
from omnieval.scoring.base import labels_for

DATA = Path(__file__).resolve().parent / "data" / "scoring"


def released_rows(name: str) -> tuple[dict, list[dict]]:
    """The reference header and the rows of ``tests/data/scoring/<name>.jsonl``."""
    lines = (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    header, *rows = (json.loads(line) for line in lines)
    return header["reference"], rows


def item_of(row: dict) -> ScoreItem:
    return ScoreItem(labels_for(len(row["options"])), tuple(row["options"]), row["answer"])


def disagreements(name: str, rows: list[dict]) -> list[str]:
    """One line per row where the scorer's choice or correctness differs from the released code's."""
    scorer = get_scorer(name)
    lines = []
    for row in rows:
        verdict = scorer.score(row["text"], item_of(row))
        if (verdict.choice, verdict.correct) != (row["choice"], row["correct"]):
            lines.append(f"{row['id']} {row['text']!r}: released {row['choice']}/{row['correct']}, "
                         f"ours {verdict.choice}/{verdict.correct} ({verdict.how})")
    return lines
