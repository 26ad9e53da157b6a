"""The ``mmau`` scorer against MMAU's released ``evaluation.py`` (tests/scoring_cases.py), and where it and
omnieval's own rule part."""

from __future__ import annotations

from scoring_cases import assert_agrees_with_release, parsed_by_cli

from omnieval.scoring import ScoreItem, get_scorer

ITEM = ScoreItem(("A", "B", "C", "D"), ("Dog barking", "Cat meowing", "Car horn", "Bird chirping"), "A")


def test_every_verdict_agrees_with_the_released_code(tmp_path):
    assert_agrees_with_release("mmau", tmp_path)


def test_letters_are_never_read_and_words_decide(tmp_path):
    """Worked from ``string_match``: "A" holds no word of "Dog barking", so it is wrong; the gold text with words no
    option has is right; the gold letter next to another option's text is that option."""
    mmau = get_scorer("mmau")
    assert (mmau.score("A", ITEM).correct, mmau.score("(A)", ITEM).source) == (False, "unparsed")
    assert mmau.score("I am sure: a dog is barking!", ITEM).correct is True
    assert (mmau.score("(A) Car horn", ITEM).choice, mmau.score("(A) Car horn", ITEM).correct) == ("C", False)
    assert mmau.score("Dog barking, not a car horn", ITEM).correct is False  # "car", "horn" belong to C


def test_no_output_leaves_the_denominator_and_empty_is_wrong():
    """The release's loop skips a row without ``model_output``; an empty one has no word and fails."""
    mmau = get_scorer("mmau")
    assert mmau.score(None, ITEM).correct is None
    assert (mmau.score("", ITEM).correct, mmau.score("...", ITEM).correct) == (False, False)


def test_official_and_robust_rules_disagree_on_a_bracketed_letter(tmp_path):
    """The issue's example: "(B)" is right by omnieval's rule and wrong by MMAU's, which never reads a letter."""
    official = {row["id"]: row for row in parsed_by_cli("mmau", tmp_path)}
    robust = {row["id"]: row for row in parsed_by_cli("mmau", tmp_path, robust=True)}
    bracketed = [i for i, row in official.items() if row["text"] == f"({row['answer']})"]
    assert bracketed and all(robust[i]["correct"] and not official[i]["correct"] for i in bracketed)
    assert sum(official[i]["correct"] != robust[i]["correct"] for i in official) > len(official) // 4
