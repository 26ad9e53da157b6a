"""The ``mmsu`` scorer against lmms-eval's ``mmsu`` task parser (MMSU's release has no scoring code;
tests/scoring_cases.py): the verdicts in tests/data/scoring/mmsu.jsonl were written by running that parser."""

from __future__ import annotations

from scoring_cases import assert_agrees_with_release

from omnieval.scoring import ScoreItem, get_scorer

ITEM = ScoreItem(("A", "B", "C", "D"), ("happy", "sad", "angry", "neutral"), "B")


def test_every_verdict_agrees_with_the_released_code(tmp_path):
    assert_agrees_with_release("mmsu", tmp_path)


def test_letter_passes_then_option_texts_and_the_last_one_wins():
    """Worked from ``parse_multi_choice_response``: the ends stripped, "(X)" first, the last occurrence wins, and
    option texts only past five words."""
    score = get_scorer("mmsu").score
    assert score("(B) then (A)", ITEM).choice == "A"
    assert score("B!", ITEM).choice == "B"
    assert score("sad", ITEM).choice is None  # one word: never read by its text
    assert score("The speaker sounds rather sad to me here", ITEM).choice == "B"
    verdict = score("I am not sure.", ITEM)
    assert (verdict.choice, verdict.correct, verdict.source) == (None, False, "unparsed")
