"""The ``jointavbench`` scorer against JointAVBench's released ``extract_model_answer`` and ``eval_result.py``
(tests/scoring_cases.py): the verdicts in tests/data/scoring/jointavbench.jsonl were written by running that code."""

from __future__ import annotations

from scoring_cases import assert_agrees_with_release, parsed_by_cli

from omnieval.scoring import ScoreItem, get_scorer

ITEM = ScoreItem(("A", "B", "C", "D"), ("She laughs", "He runs away", "A door slams", "Music fades"), "B")


def test_every_verdict_agrees_with_the_released_code(tmp_path):
    rows = assert_agrees_with_release("jointavbench", tmp_path)
    # the file covers every branch: each pass alone, several letters, none, and the one-word pass
    assert {row["expected"]["correct"] for row in rows} == {True, False, None}


def test_an_answer_naming_two_letters_or_none_leaves_the_denominator():
    """Worked from ``extract_model_answer``: the passes pool their letters; two is None, and ``eval_result.py``
    counts only rows whose answer is not None."""
    score = get_scorer("jointavbench").score
    assert score("A. She laughs or B. He runs away", ITEM).correct is None  # pass 2 finds A and B
    assert score("Bad", ITEM).correct is None  # one word holding A, B and D
    assert score("Nothing fits", ITEM).correct is None
    assert score(None, ITEM).correct is None
    assert (score("B", ITEM).correct, score("Answer", ITEM).choice) == (True, "A")  # "ANSWER" holds an A


def test_the_first_phrase_takes_the_brackets_and_spaces_with_the_letter():
    score = get_scorer("jointavbench").score
    assert score("The answer is (B) because he runs", ITEM).correct is None
    assert score("the answer is b.", ITEM).choice == "B"
    assert score("I think he runs away", ITEM).choice == "B"  # the option's text


def test_robust_rule_counts_what_the_release_leaves_out(tmp_path):
    official = {row["id"]: row for row in parsed_by_cli("jointavbench", tmp_path)}
    robust = {row["id"]: row for row in parsed_by_cli("jointavbench", tmp_path, robust=True)}
    left_out = [i for i, row in official.items() if row["correct"] is None]
    assert left_out and all(robust[i]["correct"] in (True, False) for i in left_out)
