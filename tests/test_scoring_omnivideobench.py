"""OmniVideoBench's official scorer against the verdicts its released ``utils/utils.py`` gives on 58 answers models
write (``tests/data/scoring/omnivideobench.jsonl``), and worked examples of its whole-answer comparison: cleaned
text equal to the gold letter, reasoning blocks and boxes unwrapped, "Error:" answers left out of the denominator."""

from __future__ import annotations

import pytest

from omnieval.datasets.omni import omnivideobench as converter
from omnieval.scoring import ScoreItem, get_scorer
from tests.released_verdicts import disagreements, released_rows

ITEM = ScoreItem(("A", "B", "C", "D"), ("Northwest", "Southwest", "Southeast", "Northeast"), "D")


def test_every_answer_gets_the_released_codes_verdict():
    reference, rows = released_rows("omnivideobench")
    assert reference["repository"].endswith("NJU-LINK/OmniVideoBench") and len(reference["commit"]) == 40
    assert len(rows) >= 40
    assert disagreements("omnivideobench", rows) == []


@pytest.mark.parametrize(("text", "choice", "correct"), [
    ("(d)", "D", True),
    ("D. Northeast", "D", True),  # a second character "." cuts the answer to its letter
    ("D) Northeast", None, False),
    ("The answer is D", None, False),
    ("<think>maybe A</think>\n**D**", "D", True),
    ("/box{D}", "D", True),
    ("B", "B", False),
    ("Error: no frames", None, None),  # taken for a failed inference: not counted
    ("", None, False),
    (None, None, False),
])
def test_worked_examples(text, choice, correct):
    verdict = get_scorer("omnivideobench").score(text, ITEM)
    assert (verdict.choice, verdict.correct) == (choice, correct)


def test_the_converter_names_this_scorer():
    assert get_scorer(converter.SCORER).name == "omnivideobench"
