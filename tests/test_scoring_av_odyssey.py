"""The ``av-odyssey`` scorer against AV-Odyssey's released ``evaluation.py`` (tests/scoring_cases.py), and where it
and omnieval's own rule part."""

from __future__ import annotations

from scoring_cases import assert_agrees_with_release, parsed_by_cli

from omnieval.scoring import ScoreItem, get_scorer

ITEM = ScoreItem(("A", "B", "C", "D"), ("Violin", "Trumpet", "Flute", "Cello"), "D")


def test_every_verdict_agrees_with_the_released_code(tmp_path):
    assert_agrees_with_release("av-odyssey", tmp_path)


def test_any_capital_letter_and_the_first_one_without_brackets():
    """Worked from ``parse_multi_choice_response``: every label found anywhere as a capital letter; several resolved
    by their last "(X)", else the first label found."""
    av = get_scorer("av-odyssey")
    assert av.score("Based on the video, D.", ITEM).choice == "B"
    assert av.score("I think (C), or maybe (D)", ITEM).choice == "D"
    assert av.score("Answer: D", ITEM).choice == "A"  # the "A" of "Answer"
    assert av.score("the instrument playing here sounds like a cello", ITEM).choice == "D"  # no capital: text


def test_empty_and_unparseable_answers_are_taken_as_a():
    """No candidate: the release takes A (forced), so an empty answer is right wherever the gold is A."""
    av, gold_a = get_scorer("av-odyssey"), ScoreItem(ITEM.labels, ITEM.options, "A")
    for text in ("", None, "i do not know", "cello"):  # "cello": five words or fewer are never read by text
        verdict = av.score(text, gold_a)
        assert (verdict.choice, verdict.correct, verdict.source) == ("A", True, "forced")


def test_official_and_robust_rules_disagree_on_the_issue_s_examples(tmp_path):
    """"Based on the video, D." is B officially, never B for omnieval; an empty answer is A officially, unparsed for
    omnieval."""
    official = {row["id"]: row for row in parsed_by_cli("av-odyssey", tmp_path)}
    robust = {row["id"]: row for row in parsed_by_cli("av-odyssey", tmp_path, robust=True)}
    based = [i for i, row in official.items() if row["text"] == "Based on the video, D."]
    empty = [i for i, row in official.items() if row["text"] == ""]
    assert based and all(official[i]["choice"] == "B" for i in based)
    assert empty and all((official[i]["source"], robust[i]["source"]) == ("forced", "unparsed") for i in empty)
    assert all(robust[i]["choice"] != "B" for i in based)
