"""MMAR's released scoring rule, registered as ``mmar``: MMAU's word match, unchanged.

Source: github.com/ddlBoJack/MMAR, commit 3bce090a967db576c8ad433b290a8da582d6d2a0, ``code/evaluation.py``. Its
``string_match`` is MMAU's (``omnieval.scoring.mmau``, whose docstring lists the quirks) line for line; only the
loop around it differs (it reads ``answer_prediction`` from JSON or JSONL and counts modalities and layers, not
tasks and difficulties). So MMAR keeps every MMAU quirk: letters are never read, a ``<think>`` block's words count,
an empty answer is wrong and a row without an output leaves the denominator (``correct=None`` for a ``None`` text).
"""

from __future__ import annotations

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer
from omnieval.scoring.mmau import score_by_words


@register_scorer("mmar")
class MMARScorer:
    """MMAR's ``code/evaluation.py`` word match (module doc)."""

    name = "mmar"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        return score_by_words(text, item)
