"""The pieces of MMMU's answer parser (github.com/MMMU-Benchmark/MMMU, ``eval/eval_utils.py``,
``parse_multi_choice_response``) that the OmniBench and AV-Odyssey releases adapt, each differently.

Both releases look for option letters in passes (the first pass that finds any letter decides), then, for an answer
longer than five words, for option texts; several candidates are resolved by the position of their last occurrence.
What each pass looks for differs per release (``omnibench.py``, ``av_odyssey.py``); the tie-break and the text pass
are shared and live here.
"""

from __future__ import annotations

from collections.abc import Sequence

from omnieval.scoring.base import ScoreItem


def padded(text: str) -> str:
    """The answer with one space either side, as both releases search it (so a letter at either end has a space)."""
    return f" {text} "


def option_text_candidates(response: str, item: ScoreItem) -> list[str]:
    """The labels whose option text occurs in the answer, case-insensitively, where the answer is longer than five
    whitespace-separated words (shorter answers are never read by their option texts)."""
    if len(response.split()) <= 5:
        return []
    lowered = response.lower()
    return [label for label, option in zip(item.labels, item.options) if option.lower() in lowered]


def last_candidate(response: str, candidates: Sequence[str], needles: Sequence[str]) -> str:
    """The candidate whose needle (``"(B)"``, ``" B "`` or the option text, lower-cased) occurs last in ``response``;
    a needle that never occurs counts as position -1, and ties go to the first candidate (numpy's ``argmax``), so
    where no needle occurs the earliest label wins."""
    positions = [response.rfind(needle) for needle in needles]
    return candidates[max(range(len(candidates)), key=positions.__getitem__)]
