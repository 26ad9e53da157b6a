"""Video-Holmes' official scorer against the verdicts its released ``evaluate.py`` gives on 50 answers
(``tests/data/scoring/video-holmes.jsonl``), and worked examples of its quirks: the last ``<answer>`` pair or the
whole text, letters tried A to F in that order, a capital inside a word, no letter counted wrong."""

from __future__ import annotations

import pytest

from omnieval.datasets.omni import video_holmes as converter
from omnieval.scoring import ScoreItem, get_scorer
from tests.released_verdicts import disagreements, released_rows

ITEM = ScoreItem(tuple("ABCDEF"), ("Cleaners", "Colleagues", "Siblings", "Strangers", "Police", "Coworkers"), "C")


def test_every_answer_gets_the_released_codes_verdict():
    reference, rows = released_rows("video-holmes")
    assert reference["repository"].endswith("TencentARC/Video-Holmes") and len(reference["commit"]) == 40
    assert len(rows) >= 40
    assert disagreements("video-holmes", rows) == []


@pytest.mark.parametrize(("text", "choice", "correct", "source"), [
    ("<think>The paper slipped.</think><answer>C</answer>", "C", True, "parsed"),
    ("<answer>B</answer><answer>C</answer>", "C", True, "parsed"),  # the last pair
    ("B or C", "B", False, "parsed"),  # B is tried first and stands before a space
    ("C or B", "C", True, "parsed"),
    ("Answer: C", "A", False, "forced"),  # the A of "Answer", found before C is tried
    ("<think>A quick look</think> C", "A", False, "parsed"),  # no <answer> pair: the whole text, think block too
    ("siblings", None, False, "unparsed"),  # no letter: counted wrong
    (None, None, False, "unparsed"),
])
def test_worked_examples(text, choice, correct, source):
    verdict = get_scorer("video-holmes").score(text, ITEM)
    assert (verdict.choice, verdict.correct, verdict.source) == (choice, correct, source)


def test_the_converter_names_this_scorer():
    assert get_scorer(converter.SCORER).name == "video-holmes"
