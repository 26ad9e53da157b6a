"""Video-MME's official scorer against the verdicts its released ``eval_your_results.py`` gives on 58 answers models
write (``tests/data/scoring/videomme.jsonl``), and worked examples of its quirks: the first capital A-D anywhere,
glued prefixes, unextracted answers left out of the denominator."""

from __future__ import annotations

import pytest

from omnieval.datasets.omni import videomme as converter
from omnieval.scoring import ScoreItem, get_scorer
from tests.released_verdicts import disagreements, released_rows

ITEM = ScoreItem(("A", "B", "C", "D"), ("Northwest", "Southwest", "Southeast", "Northeast"), "D")


def test_every_answer_gets_the_released_codes_verdict():
    reference, rows = released_rows("videomme")
    assert reference["repository"].endswith("MME-Benchmarks/Video-MME") and len(reference["commit"]) == 40
    assert len(rows) >= 40
    assert disagreements("videomme", rows) == []


@pytest.mark.parametrize(("text", "choice", "correct", "source"), [
    ("D", "D", True, "parsed"),
    ("Based on the video, D.", "B", False, "forced"),  # the B of "Based"
    ("Best answer: D", "B", False, "forced"),  # "Best answer:" is glued to "Best option:" in the list, never removed
    ("The answer is D", "D", True, "parsed"),
    ("Answer: D", "A", False, "forced"),  # "Answer:" is not a Video-MME prefix
    ("northeast", None, None, "unparsed"),  # no capital A-D: left out of the denominator
    ("", None, None, "unparsed"),
    (None, None, None, "unparsed"),
])
def test_worked_examples(text, choice, correct, source):
    verdict = get_scorer("videomme").score(text, ITEM)
    assert (verdict.choice, verdict.correct, verdict.source) == (choice, correct, source)


def test_the_converter_names_this_scorer():
    assert get_scorer(converter.SCORER).name == "videomme"
