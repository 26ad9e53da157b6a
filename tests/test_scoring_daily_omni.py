"""Daily-Omni's official scorer against the verdicts its released test script (``test_model/Qwen2.5-Omni``) gives
on 58 answers models write (``tests/data/scoring/daily-omni.jsonl``), and worked examples of its first-character
rule: either case, inside a word too, and nothing after a leading ``(`` or ``<think>``."""

from __future__ import annotations

import pytest

from omnieval.datasets.omni import daily_omni as converter
from omnieval.scoring import ScoreItem, get_scorer
from tests.released_verdicts import disagreements, released_rows

ITEM = ScoreItem(("A", "B", "C", "D"), ("A red car", "A blue bicycle", "A brown dog", "Two people talking"), "B")


def test_every_answer_gets_the_released_codes_verdict():
    reference, rows = released_rows("daily-omni")
    assert reference["repository"].endswith("Lliar-liar/Daily-Omni") and len(reference["commit"]) == 40
    assert len(rows) >= 40
    assert disagreements("daily-omni", rows) == []


@pytest.mark.parametrize(("text", "choice", "correct", "source"), [
    (" b", "B", True, "parsed"),
    ("Based on the video, D.", "B", True, "forced"),  # the B of "Based" is the gold letter here
    ("dog", "D", False, "forced"),
    ("(B)", None, False, "unparsed"),
    ("<think>B is right</think>B", None, False, "unparsed"),
    ("As an assistant I pick B", None, False, "unparsed"),  # read after "assistant": " I pick B" starts with I
    ("", None, False, "unparsed"),
    (None, None, False, "unparsed"),
])
def test_worked_examples(text, choice, correct, source):
    verdict = get_scorer("daily-omni").score(text, ITEM)
    assert (verdict.choice, verdict.correct, verdict.source) == (choice, correct, source)


def test_the_converter_names_this_scorer():
    assert get_scorer(converter.SCORER).name == "daily-omni"
