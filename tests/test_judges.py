"""Judges (``omnieval/core/judges.py``): the strict verdict parser, the prompt template, the one retry and the invalid
path, with the simulated engine standing in for a judge model of set behaviour."""

from __future__ import annotations

import pytest

from omnieval.core.judges import ABSTAIN_REFERENCE, JudgeCase, JudgementRows, judge_prompt, judge_request, parse_verdict
from omnieval.core.prompts import final_answer
from omnieval.engines import create_engine
from omnieval.engines.base import GenerationResult
from omnieval.run.stages import call_rows


@pytest.mark.parametrize(("text", "expected"), [
    ("correct", "correct"), ("Incorrect.", "incorrect"), ("  **abstained**  ", "abstained"), ('"CORRECT"', "correct"),
    ('{"verdict": "incorrect"}', "incorrect"), ("<think>hmm, correct?</think> incorrect", "incorrect"),
    ("correct incorrect", None), ("The answer is correct.", None), ("right", None), ("", None), (None, None),
    ('{"verdict": "correct", "why": "x"}', None), ("{not json", None),
])
def test_parse_verdict_is_strict(text, expected):
    assert parse_verdict(text) == expected


def test_abstained_only_where_offered():
    assert parse_verdict("abstained", ("correct", "incorrect")) is None


def test_prompt_names_the_reference_or_the_abstention():
    case = JudgeCase("k", "What animal is it?", "a cat", "cat", abstention=True)
    text = judge_prompt(case)
    assert "Correct answer: a cat" in text and "Model's answer: cat" in text and "abstained -" in text
    no_abstain = judge_prompt(JudgeCase("k", "q", "a cat", "cat", abstention=False))
    assert "abstained" not in no_abstain
    assert ABSTAIN_REFERENCE in judge_prompt(JudgeCase("k", "q", "I cannot answer", "x", True, True))
    with pytest.raises(KeyError, match="unknown judge template"):
        judge_prompt(case, "v0")


def test_final_answer_takes_the_last_answer_line():
    assert final_answer("<think>A?</think>It barks.\nAnswer: a dog") == "a dog"
    assert final_answer("a small dog") == "a small dog"
    assert final_answer(None) == ""


class Scripted:
    """A judge that replies from a script per (case, attempt): checks the retry really asks again."""

    model = "scripted"

    def __init__(self, replies):
        self.replies, self.prompts = replies, []

    def generate(self, requests):
        self.prompts.extend(r.parts[-1].text for r in requests)
        return [GenerationResult(self.replies[r.key]) if not self.replies[r.key].startswith("ERR")
                else GenerationResult(None, error="boom") for r in requests]


def judge_cases(engine, cases, name=None):
    """Cases graded the way a run grades them: request rows through the model stage's calls, then parsed."""
    name = name or engine.model
    batch = call_rows(engine, [judge_request(name, "v1", c) for c in cases])
    return JudgementRows(name, "v1")(batch).to_pylist()


def test_retry_once_then_invalid():
    cases = [JudgeCase(f"c{i}", "q", "a cat", "cat", abstention=False) for i in range(4)]
    replies = {"c0|scripted|1": "correct", "c1|scripted|1": "I think it is correct", "c1|scripted|2": "correct",
               "c2|scripted|1": "maybe", "c2|scripted|2": "still unsure", "c3|scripted|1": "ERR",
               "c3|scripted|2": "incorrect"}
    judge = Scripted(replies)
    records = judge_cases(judge, cases)
    assert [r["verdict"] for r in records] == ["correct", "correct", None, "incorrect"]
    assert [r["attempts"] for r in records] == [1, 2, 2, 2]
    assert records[2]["raw_text"] == "still unsure" and records[0]["template"] == "v1"
    assert len(judge.prompts) == 7 and "Reply with one word only: correct, incorrect." in judge.prompts[-1]


def test_simulated_judge_grades_and_errs_at_set_rates():
    judge = create_engine("simulated", model="judge", judge_error=0.2, judge_invalid_rate=0.1, seed=1)
    cases = [JudgeCase(f"c{i}", "q", "a cat", "It is a cat." if i % 2 else "a dog", abstention=True)
             for i in range(2000)]
    records = judge_cases(judge, cases)
    truth = ["correct" if i % 2 else "incorrect" for i in range(2000)]
    valid = [(r["verdict"], t) for r, t in zip(records, truth, strict=True) if r["verdict"] is not None]
    invalid = sum(r["verdict"] is None for r in records)
    assert 0.005 < invalid / 2000 < 0.02  # 0.1 ** 2: invalid only when the retry is unparseable too
    assert sum(r["attempts"] == 2 for r in records) / 2000 == pytest.approx(0.1, abs=0.02)
    wrong = sum(v != t for v, t in valid) / len(valid)
    assert wrong == pytest.approx(0.2, abs=0.03)
