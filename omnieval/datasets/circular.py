"""VLMEvalKit's circular copies: one multiple-choice question asked once per rotation of its options.

In VLMEvalKit's MMBench-style TSVs (and the lmms-eval Parquet made from them) the rotations of question ``g`` are
rows of their own at ``index = g + k * 1,000,000`` (k = 1 .. n_options - 1), with the options rotated, the answer
label rotated with them, and an ``image`` cell that names row ``g`` instead of repeating its picture. VLMEvalKit's
CircularEval scores question ``g`` as correct only when every row with ``index % 1,000,000 == g`` is answered
correctly.

Converted as independent items they would be resampled as independent questions and could lend each other their
image or stem in a spectrum shuffle (the "replaced" image being the item's own). ``circular_groups`` recovers the
question each row copies, which becomes ``Item.group``; ``copy_mismatch`` checks that a copy really is its
original with the options rotated, so that ids which merely look circular are refused rather than joined.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from omnieval.core.schema import LABELS, InputError

STRIDE = 1_000_000
"""VLMEvalKit's offset between the copies of one question (``index % STRIDE`` is the original's index)."""


def circular_groups(ids: Sequence[str]) -> list[str] | None:
    """Per row id, the id of the question it copies (``index % 1,000,000``; an original is its own), when the ids
    are VLMEvalKit's circular layout: every id a non-negative integer and at least one id of 1,000,000 or more
    whose original is among the ids. None otherwise (no copies: each row is its own question)."""
    if not ids or not all(i.isascii() and i.isdigit() for i in ids):
        return None
    values = [int(i) for i in ids]
    present = set(values)
    if not any(v >= STRIDE and v % STRIDE in present for v in values):
        return None
    return [str(v % STRIDE) for v in values]


def copy_mismatch(original: dict, copy: dict) -> tuple[str, str] | None:
    """``(field, what differs)`` when ``copy`` (a converted row: ``question``, ``options``, ``answer`` label) is not
    ``original`` with its options reordered and the answer following its option; None when it is."""
    if copy["question"] != original["question"]:
        return "question", "its question differs from the original's"
    if Counter(copy["options"]) != Counter(original["options"]):
        return "options", f"its options {copy['options']} are not a reordering of the original's {original['options']}"
    mine, theirs = _correct_option(copy), _correct_option(original)
    if mine != theirs:
        return "answer", f"its answer {copy['answer']} ({mine!r}) is not the original's correct option {theirs!r}"
    return None


def _correct_option(row: dict) -> str:
    return row["options"][LABELS.index(row["answer"])]


def question_groups(records: Sequence[tuple[Any, dict]]) -> list[str | None]:
    """Per converted row of ``omnieval.datasets.mcq`` (``(source row, fields)``), the id of the question it is a
    circular copy of (an original is its own), split by split; None throughout a split whose ids are not the
    circular layout. Only an ``index`` id column (VLMEvalKit's, and lmms-eval's MMBench) is read this way. A copy
    that is not its original with the options reordered is an ``InputError`` naming the copy's file and row and
    the field that differs."""
    out: list[str | None] = [None] * len(records)
    by_split: dict[str, list[int]] = {}
    for n, (_, c) in enumerate(records):
        by_split.setdefault(c["_split"], []).append(n)
    for positions in by_split.values():
        if any(records[n][1]["_id_col"] != "index" for n in positions):
            continue
        groups = circular_groups([records[n][1]["_id"] for n in positions])
        if groups is None:
            continue
        originals = {records[n][1]["_id"]: records[n][1] for n in positions}
        for n, group in zip(positions, groups, strict=True):
            row, c = records[n]
            if group != c["_id"] and group in originals:
                bad = copy_mismatch(originals[group], c)
                if bad is not None:
                    raise InputError(f"row index {c['_id']} is a circular copy of index {group} (VLMEvalKit lays "
                                     f"copies at index + k * {STRIDE:,}) but {bad[1]}", file=row.file,
                                     item=f"{c['_id']} (row {row.number})", field=bad[0])
            out[n] = group
    return out
