"""The ``mmar`` scorer against MMAR's released ``code/evaluation.py`` (tests/scoring_cases.py), and where it and
omnieval's own rule part."""

from __future__ import annotations

from scoring_cases import assert_agrees_with_release, parsed_by_cli

from omnieval.scoring import ScoreItem, get_scorer

ITEM = ScoreItem(("A", "B", "C", "D"), ("Dog barking", "Cat meowing", "Car horn", "Bird chirping"), "A")


def test_every_verdict_agrees_with_the_released_code(tmp_path):
    assert_agrees_with_release("mmar", tmp_path)


def test_letters_are_never_read_and_words_decide(tmp_path):
    """Worked from ``string_match``: "A" holds no word of "Dog barking", so it is wrong; the gold text with words no
    option has is right; the gold letter next to another option's text is that option."""
    mmar = get_scorer("mmar")
    assert (mmar.score("A", ITEM).correct, mmar.score("(A)", ITEM).source) == (False, "unparsed")
    assert mmar.score("I am sure: a dog is barking!", ITEM).correct is True
    assert (mmar.score("(A) Car horn", ITEM).choice, mmar.score("(A) Car horn", ITEM).correct) == ("C", False)
    assert mmar.score("Dog barking, not a car horn", ITEM).correct is False  # "car", "horn" belong to C


def test_no_output_leaves_the_denominator_and_empty_is_wrong():
    """The release's loop skips a row without ``answer_prediction``; an empty one has no word and fails."""
    mmar = get_scorer("mmar")
    assert mmar.score(None, ITEM).correct is None
    assert (mmar.score("", ITEM).correct, mmar.score("...", ITEM).correct) == (False, False)


def test_official_and_robust_rules_disagree_on_a_bracketed_letter(tmp_path):
    """The issue's example: "(B)" is right by omnieval's rule and wrong by MMAR's, which never reads a letter."""
    official = {row["id"]: row for row in parsed_by_cli("mmar", tmp_path)}
    robust = {row["id"]: row for row in parsed_by_cli("mmar", tmp_path, robust=True)}
    bracketed = [i for i, row in official.items() if row["text"] == f"({row['answer']})"]
    assert bracketed and all(robust[i]["correct"] and not official[i]["correct"] for i in bracketed)
    assert sum(official[i]["correct"] != robust[i]["correct"] for i in official) > len(official) // 4
