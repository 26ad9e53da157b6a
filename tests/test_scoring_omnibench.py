"""The ``omnibench`` scorer against OmniBench's released ``answer_parsing.py`` as ``calculate_metrics.py`` calls it
(tests/scoring_cases.py), and where it and omnieval's own rule part."""

from __future__ import annotations

import pytest
from scoring_cases import assert_agrees_with_release, parsed_by_cli

from omnieval.scoring import ScoreItem, get_scorer

OPTIONS = ("The man is thanking the woman for the gift.", "The woman is asking the man for directions.",
           "A man is apologising to the woman for being late.", "The two are arguing about money.")


def test_every_verdict_agrees_with_the_released_code(tmp_path):
    assert_agrees_with_release("omnibench", tmp_path)


def test_the_passes_in_their_order():
    """Worked from ``parse_multi_choice_response``: "(X)" first, then a letter and a space (the end counts), then a
    letter and a dot, then an option text in an answer of more than five words; nothing found is 'N/A', wrong."""
    omnibench, item = get_scorer("omnibench"), ScoreItem(("A", "B", "C", "D"), OPTIONS, "B")
    assert omnibench.score("I pick (B), not A or C", item).choice == "B"
    assert omnibench.score("Answer: B", item).choice == "B"
    assert omnibench.score("Clearly B.", item).choice == "B"
    assert omnibench.score("**B**", item).source == "unparsed"
    assert omnibench.score("she is asking the woman is asking the man for directions.", item).choice == "B"
    assert (omnibench.score("", item).choice, omnibench.score("", item).correct) == (None, False)


def test_the_gold_letter_is_reparsed_from_the_gold_text():
    """The release compares with the letter its parser reads in the gold option's text, not with the gold label:
    "A man is apologising ..." (gold C) is read as A, so "C" is wrong and "A" right; a gold text that parses to
    nothing stops the release (its assert) and is refused here."""
    omnibench, item = get_scorer("omnibench"), ScoreItem(("A", "B", "C", "D"), OPTIONS, "C")
    assert (omnibench.score("C", item).correct, omnibench.score("A", item).correct) == (False, True)
    assert get_scorer("robust").score("C", item).correct is True
    with pytest.raises(ValueError, match="parses to no letter"):
        omnibench.score("C", ScoreItem(("A", "B", "C", "D"), ("dog", "cat", "cow", "pig"), "A"))


def test_official_and_robust_rules_disagree_where_the_gold_is_reparsed(tmp_path):
    official = {row["id"]: row for row in parsed_by_cli("omnibench", tmp_path)}
    robust = {row["id"]: row for row in parsed_by_cli("omnibench", tmp_path, robust=True)}
    bare = [i for i, row in official.items() if row["text"] == row["answer"] and row["answer"] == "C"]
    assert bare and all(robust[i]["correct"] and not official[i]["correct"] for i in bare)
