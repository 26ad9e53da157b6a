"""LLM judges for open-ended answers: versioned prompt templates, a strict verdict parser, one retry.

A judge is any engine that can generate text (``Engine.generate``; typically a text model on vLLM). It reads the
question, the ground truth in words and the model's final answer, and replies with one verdict:

* ``correct``: the answer means the ground truth (wording may differ);
* ``incorrect``: it gives another answer;
* ``abstained``: it declines, or says the inputs do not allow an answer (offered only where the protocol has an
  abstention option; where the ground truth *is* to abstain, the template says so and ``abstained`` is right).

Decoding is greedy with a small token budget. The reply is parsed strictly: after trimming, exactly one verdict word
(case and surrounding punctuation ignored), or a JSON object ``{"verdict": "<word>"}``. Anything else is retried once
with a reminder appended to the prompt; a second unparseable reply is recorded as an invalid verdict (null), which
the metrics leave out of that judge's denominators. Templates are versioned (``TEMPLATES``): the version is stored
with every verdict, and a changed template gets a new version, never an edit in place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from omnieval.schema import VERDICTS

TEMPLATE_V1 = """You are grading the answer a model gave to a question about some inputs (video, audio, images or text).

Question: {question}
Correct answer: {reference}
Model's answer: {answer}

Decide whether the model's answer is correct. Wording may differ from the correct answer; the meaning must match.
Reply with exactly one word:
{choices}
Verdict:"""

CHOICE_TEXT = {
    "correct": "correct - the answer means the same as the correct answer",
    "incorrect": "incorrect - the answer is different, or gives several answers",
    "abstained": "abstained - the answer declines, or says the question cannot be answered from the inputs",
}
ABSTAIN_REFERENCE = "(none: the inputs do not determine an answer; declining to answer is the right response)"
RETRY_SUFFIX = "\n\nReply with one word only: {words}."
TEMPLATES = {"v1": TEMPLATE_V1}
DEFAULT_TEMPLATE = "v1"
MAX_VERDICT_TOKENS = 12


@dataclass(frozen=True)
class JudgeCase:
    """What a judge grades: one open-ended prediction."""

    key: str  # stable id of the prediction (model|prompt|instance_id)
    question: str
    reference: str
    answer: str
    abstention: bool  # the protocol has an abstention option (offer the ``abstained`` verdict)
    reference_is_abstention: bool = False


def allowed_verdicts(case: JudgeCase) -> tuple[str, ...]:
    return VERDICTS if case.abstention else VERDICTS[:2]


def judge_prompt(case: JudgeCase, template: str = DEFAULT_TEMPLATE) -> str:
    if template not in TEMPLATES:
        raise KeyError(f"unknown judge template {template!r}; known: {', '.join(TEMPLATES)}")
    reference = ABSTAIN_REFERENCE if case.reference_is_abstention else case.reference
    choices = "\n".join(CHOICE_TEXT[v] for v in allowed_verdicts(case))
    return TEMPLATES[template].format(question=case.question, reference=reference,
                                      answer=case.answer or "(no answer)", choices=choices)


_WORD = re.compile(r"^[\s\"'`*\(\[]*([A-Za-z]+)[\s\"'`*\)\]\.\!]*$")


def parse_verdict(text: str | None, allowed: Sequence[str] = VERDICTS) -> str | None:
    """One verdict word, or ``{"verdict": "<word>"}``; anything else (two words, a sentence, an unknown word) is
    None. ``<think>`` blocks are stripped first."""
    if not text:
        return None
    body = re.sub(r"<think>.*?(</think>|$)", " ", text, flags=re.DOTALL | re.IGNORECASE).strip()
    word = None
    if body.startswith("{"):
        try:
            obj = json.loads(body)
        except json.JSONDecodeError:
            return None
        if isinstance(obj, dict) and set(obj) == {"verdict"} and isinstance(obj["verdict"], str):
            word = obj["verdict"].strip()
    else:
        match = _WORD.match(body)
        word = match.group(1) if match else None
    word = word.lower() if word else None
    return word if word in allowed else None


def judge_cases(engine, cases: Sequence[JudgeCase], template: str = DEFAULT_TEMPLATE,
                judge_name: str | None = None) -> list[dict]:
    """Grade every case with ``engine`` (one batched generate, then one batched retry of the unparseable ones).
    Returns one verdict record per case: ``judge``, ``verdict`` (None = invalid), ``raw_text`` (the last reply),
    ``attempts`` (1 or 2), ``template``."""
    from omnieval.engines.base import GenerationRequest
    from omnieval.prompts import PromptPart

    name = judge_name or engine.model

    def request(case: JudgeCase, attempt: int) -> GenerationRequest:
        text = judge_prompt(case, template)
        if attempt > 1:
            text += RETRY_SUFFIX.format(words=", ".join(allowed_verdicts(case)))
        return GenerationRequest(parts=[PromptPart("text", text=text)], max_new_tokens=MAX_VERDICT_TOKENS,
                                 key=f"{case.key}|{name}|{attempt}",
                                 meta={"task": "judge", "reference": case.reference, "answer": case.answer,
                                       "abstention": case.abstention,
                                       "reference_is_abstention": case.reference_is_abstention})

    records: list[dict] = [{} for _ in cases]
    todo = list(range(len(cases)))
    for attempt in (1, 2):
        if not todo:
            break
        results = engine.generate([request(cases[i], attempt) for i in todo])
        retry = []
        for i, res in zip(todo, results, strict=True):
            verdict = parse_verdict(res.text, allowed_verdicts(cases[i])) if res.error is None else None
            raw = res.text if res.error is None else f"error: {res.error}"
            records[i] = {"judge": name, "verdict": verdict, "raw_text": raw, "attempts": attempt,
                          "template": template}
            if verdict is None:
                retry.append(i)
        todo = retry
    return records
