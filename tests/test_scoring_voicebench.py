"""The ``voicebench`` scorer against VoiceBench's released ``MCQEvaluator`` (tests/scoring_cases.py): the verdicts in
tests/data/scoring/voicebench.jsonl were written by running its ``extract_answer``."""

from __future__ import annotations

from scoring_cases import assert_agrees_with_release

from omnieval.scoring import ScoreItem, get_scorer
from omnieval.scoring.voicebench import PHRASES

ITEM = ScoreItem(("A", "B", "C", "D"), ("jeans", "a steel spoon", "cotton candy", "a hat"), "B")


def test_every_verdict_agrees_with_the_released_code(tmp_path):
    assert_agrees_with_release("voicebench", tmp_path)


def test_the_phrase_order_decides_not_the_place_in_the_answer():
    """Worked from ``extract_answer``: ``option [CHOICE].`` is tried before ``option [CHOICE],``."""
    assert PHRASES.index("option [CHOICE].") < PHRASES.index("option [CHOICE],")
    score = get_scorer("voicebench").score
    assert score("option b, not option a.", ITEM).choice == "A"
    assert score("It is a, b or c", ITEM).choice == "A"
    assert score("<1>B.", ITEM).correct is True
    assert score("答案是B", ITEM).correct is True


def test_no_letter_is_wrong_where_the_release_draws_one_and_a_fifth_letter_is_never_read():
    score = get_scorer("voicebench").score
    verdict = score("I cannot tell", ITEM)
    assert (verdict.choice, verdict.correct, verdict.source) == (None, False, "unparsed")
    assert score("E.", ScoreItem(tuple("ABCDE"), ("1", "2", "3", "4", "5"), "E")).choice is None
    assert score(None, ITEM).correct is False
