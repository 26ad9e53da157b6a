"""WorldSense's official scorer (VLMEvalKit's ``WorldSense.evaluate``, exact matching) against the verdicts that code
gives on 58 answers models write (``tests/data/scoring/worldsense.jsonl``), and worked examples of where it parts
from Video-MME's rule: ``Answer:`` and ``Option:`` removed, an unextracted answer counted as wrong."""

from __future__ import annotations

import pytest

from omnieval.datasets.omni import worldsense as converter
from omnieval.scoring import ScoreItem, get_scorer
from tests.released_verdicts import disagreements, released_rows

ITEM = ScoreItem(("A", "B", "C", "D"), ("Northwest", "Southwest", "Southeast", "Northeast"), "D")


def test_every_answer_gets_the_released_codes_verdict():
    reference, rows = released_rows("worldsense")
    assert reference["repository"].endswith("open-compass/VLMEvalKit") and len(reference["commit"]) == 40
    assert len(rows) >= 40
    assert disagreements("worldsense", rows) == []


@pytest.mark.parametrize(("text", "choice", "correct", "source"), [
    ("Answer: D", "D", True, "parsed"),
    ("answer: D", "D", True, "parsed"),  # the lowercase prefix stays, and holds no capital A-D
    ("Based on the video, D.", "B", False, "forced"),
    ("Best option: D", "B", False, "forced"),
    ("Northeast", None, False, "unparsed"),  # the option's text is never matched; counted as wrong
    ("", None, False, "unparsed"),
    (None, None, False, "unparsed"),
])
def test_worked_examples(text, choice, correct, source):
    verdict = get_scorer("worldsense").score(text, ITEM)
    assert (verdict.choice, verdict.correct, verdict.source) == (choice, correct, source)


def test_the_converter_names_this_scorer():
    assert get_scorer(converter.SCORER).name == "worldsense"
