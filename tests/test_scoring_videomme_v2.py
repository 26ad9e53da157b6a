"""Video-MME-v2's official rules: the answer rule against the verdicts its released ``test_video_mme_v2.py`` gives on
51 answers (``tests/data/scoring/videomme-v2.jsonl``), worked examples of its quirks, and the grouped score on answer
sets worked by hand, one or more per group type and logic structure, the script's quirks included (an unparseable
answer's -1 summed in a relevance group, counted right in a chain)."""

from __future__ import annotations

import pytest

from omnieval.scoring import ScoreItem, get_scorer
from omnieval.scoring.videomme_v2 import chain_structure, group_score
from tests.released_verdicts import disagreements, released_rows

ITEM = ScoreItem(tuple("ABCDEFGH"), ("Malaysian", "British", "Singaporean", "German", "Canadian", "Chinese",
                                     "American", "Cannot be determined"), "F")


def test_every_answer_gets_the_released_codes_verdict():
    reference, rows = released_rows("videomme-v2")
    assert reference["repository"].endswith("MME-Benchmarks/Video-MME-v2") and len(reference["commit"]) == 40
    assert len(rows) >= 40
    assert disagreements("videomme-v2", rows) == []


@pytest.mark.parametrize(("text", "choice", "correct", "source"), [
    ("F", "F", True, "parsed"),
    ("Final Answer: F.", "F", True, "parsed"),
    ("Answer: F", "F", True, "parsed"),  # "Answer:" is one of its prefixes (Video-MME's first version had not)
    ("Based on the video, F.", "B", False, "forced"),  # the B of "Based": any capital A-H, inside a word too
    ("ANSWER: F", "A", False, "forced"),  # prefixes are removed case-sensitively
    ("H", "H", False, "parsed"),  # eight options: H is a letter of the rule
    ("chinese", None, None, "unparsed"),  # no capital A-H: -1, left out of plain accuracy
    (None, None, None, "unparsed"),
])
def test_worked_examples(text, choice, correct, source):
    verdict = get_scorer("videomme-v2").score(text, ITEM)
    assert (verdict.choice, verdict.correct, verdict.source) == (choice, correct, source)


# Each case worked by hand from the script's tables: relevance = (right / 4)^2; a chain's score is read from the
# run of right answers from question 1, by its structure's table.
@pytest.mark.parametrize(("scores", "group_type", "structure", "expected"), [
    ([1, 1, 1, 1], "relevance", "[1,2,3,4]", 1.0),
    ([1, 0, 1, 1], "relevance", "[1,2,3,4]", 9 / 16),  # three right, in any place
    ([0, 1, 0, 1], "relevance", "[1,2,3,4]", 4 / 16),
    ([0, 0, 0, 1], "relevance", "[1,2,3,4]", 1 / 16),
    ([0, 0, 0, 0], "relevance", "[1,2,3,4]", 0.0),
    ([1, 1, 1, -1], "relevance", "[1,2,3,4]", 4 / 16),  # quirk: 1 + 1 + 1 - 1 = 2 right
    ([-1, -1, 0, 1], "relevance", "[1,2,3,4]", 0.0),  # quirk: a negative sum scores 0
    ([1, 1, 1, 1], "logic", "[1, 2, 3, 4]", 1.0),
    ([1, 1, 0, 1], "logic", "[1, 2, 3, 4]", 4 / 16),  # the run stops at question 3: two
    ([0, 1, 1, 1], "logic", "[1, 2, 3, 4]", 0.0),  # three right, but the chain breaks at once
    ([1, 1, 1, 0], "logic", "[1, 2, 3, 4]", 9 / 16),
    ([1, -1, 1, 0], "logic", "[1, 2, 3, 4]", 9 / 16),  # quirk: an unparseable answer keeps the chain going
    ([1, 0, 0, 0], "logic", "[1, [2, 3], 4]", 1 / 12),
    ([1, 0, 1, 0], "logic", "[1, [2, 3], 4]", 4 / 12),  # 2 and 3 are parallel: question 3 right extends the run
    ([1, 0, 1, 1], "logic", "[1, [2, 3], 4]", 4 / 12),  # ... by one only: question 4 after it does not count
    ([1, 1, 0, 1], "logic", "[1, [2, 3], 4]", 4 / 12),
    ([1, 1, 1, 0], "logic", "[1, [2, 3], 4]", 7 / 12),
    ([1, 1, 1, 1], "logic", "[1,[2,3],4]", 1.0),
    ([0, 1, 1, 1], "logic", "[1, [2, 3], 4]", 0.0),
    ([0, 0, 0, 0], "logic", "[[1, 2], 3, 4]", 0.0),
    ([0, 1, 0, 0], "logic", "[[1, 2], 3, 4]", 1 / 10),  # 1 and 2 are parallel: question 2 alone counts as one
    ([0, 1, 1, 1], "logic", "[[1, 2], 3, 4]", 1 / 10),  # ... and the run does not go on past it
    ([1, 0, 1, 1], "logic", "[[1, 2], 3, 4]", 1 / 10),
    ([1, 1, 0, 1], "logic", "[[1, 2], 3, 4]", 2 / 10),
    ([1, 1, 1, 0], "logic", "[[1,2],3,4]", 5 / 10),
    ([1, 1, 1, 1], "logic", "[[1, 2], 3, 4]", 1.0),
])
def test_group_scores_worked_by_hand(scores, group_type, structure, expected):
    assert group_score(scores, group_type, structure) == pytest.approx(expected, abs=1e-15)


def test_the_total_is_the_mean_over_groups():
    groups = [([1, 1, 1, 0], "relevance", "[1,2,3,4]"), ([1, 0, 1, 0], "logic", "[1,[2,3],4]"),
              ([0, 1, 0, 0], "logic", "[[1,2],3,4]")]
    total = sum(group_score(*g) for g in groups) / len(groups)
    assert total == pytest.approx((9 / 16 + 4 / 12 + 1 / 10) / 3, abs=1e-15)


@pytest.mark.parametrize("bad", ["[1, 2, 4, 3]", "1234", "[1, [2, 3, 4]]", "not a list", ""])
def test_a_structure_none_of_the_three_is_refused(bad):
    with pytest.raises(ValueError, match="group_structure"):
        chain_structure(bad)
    with pytest.raises(ValueError, match="group_structure"):
        group_score([1, 1, 1, 1], "logic", bad)


def test_an_unknown_group_type_is_refused():
    with pytest.raises(ValueError, match="group_type 'coherence'"):
        group_score([1, 1, 1, 1], "coherence", "[1,2,3,4]")
