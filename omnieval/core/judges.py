"""LLM judges for open-ended answers: versioned prompt templates, a strict verdict parser, one retry.

A judge is any engine that can generate text (``Engine.generate``; typically a text model on vLLM). It reads the
question, the ground truth in words and the model's final answer, and replies with one verdict:

* ``correct``: the answer means the ground truth (wording may differ);
* ``incorrect``: it gives another answer;
* ``abstained``: it declines, or says the inputs do not allow an answer (offered only where the protocol has an
  abstention option; where the ground truth *is* to abstain, the template says so and ``abstained`` is right).

**Ratings.** An open item without a reference that its benchmark scores by a rating (``Instance.rated``: VoiceBench's
``alpacaeval``, ``commoneval``, ``wildvoice``, rated 1-5 by gpt-4o-mini in its release) is rated instead: the judge
reads the spoken request's transcript and the answer (``RATING_TEMPLATE_V1``, omnieval's wording of the release's
five levels) and replies with a number 1-5, stored as the verdict's text (``"4"``). ``parse_rating`` reads the reply
as the release's ``OpenEvaluator`` does (``release_rating``), then keeps ratings on the scale only.

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

import pyarrow as pa

from omnieval.core.schema import RESULT_COLUMN, VERDICTS

JUDGEMENT_SCHEMA = pa.schema([("model", pa.string()), ("prompt", pa.string()), ("instance_id", pa.string()),
                              ("judge", pa.string()), ("verdict", pa.string()), ("raw_text", pa.string()),
                              ("attempts", pa.int32()), ("template", pa.string())])

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
RATING_TEMPLATE_V1 = """You are rating the reply a voice assistant gave to a spoken request.

Request (transcribed): {question}
Assistant's reply: {answer}

Rate the reply from 1 to 5:
1 - off-topic, wrong, or does not address the request
2 - on topic, but inaccurate or incomplete
3 - relevant and mostly accurate, but wordy or padded
4 - relevant, accurate and concise
5 - exactly what was asked for, accurate and to the point
Reply with the number only.
Rating:"""
RATING_RETRY_SUFFIX = "\n\nReply with one number from 1 to 5 only."
RATING_SCALE = (1.0, 5.0)
TEMPLATES = {"v1": TEMPLATE_V1}
RATING_TEMPLATES = {"v1": RATING_TEMPLATE_V1}
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
    rated: bool = False  # rate the answer 1-5 (no reference: module doc, Ratings)


def allowed_verdicts(case: JudgeCase) -> tuple[str, ...]:
    return VERDICTS if case.abstention else VERDICTS[:2]


def judge_prompt(case: JudgeCase, template: str = DEFAULT_TEMPLATE) -> str:
    if template not in TEMPLATES:
        raise KeyError(f"unknown judge template {template!r}; known: {', '.join(TEMPLATES)}")
    if case.rated:
        return RATING_TEMPLATES[template].format(question=case.question, answer=case.answer or "(no answer)")
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


_RELEASE_RATING = re.compile(r"\[\[(\d+)\]\]")


def release_rating(text: str | None) -> float | None:
    """A judge reply read as VoiceBench's ``OpenEvaluator.evaluate`` reads one (``src/evaluator/open.py``): Python's
    ``float`` of the whole reply, else the first ``[[<digits>]]`` in it; None where the release's
    ``extract_rating`` raises (no number). Its quirks, kept here: ``float`` takes surrounding whitespace, a decimal
    (``4.5``), an exponent (``5e-1``), ``nan`` and ``inf``, and any number off the scale (``7``); the brackets take
    digits only (``[[4.5]]`` is no rating); text around a bare number (``Rating: 4``) is no rating. The release
    strips the reply before storing it (``api_judge.py``)."""
    if text is None:
        return None
    body = text.strip()
    try:
        return float(body)
    except ValueError:
        match = _RELEASE_RATING.search(body)
        return float(match.group(1)) if match else None


def parse_rating(text: str | None) -> float | None:
    """A rating 1-5 (``RATING_SCALE``) read as the release reads it (``release_rating``), ``<think>`` blocks
    stripped first; None for anything else: no number, ``nan``/``inf``, or a number off the scale (the release
    would average a ``7`` or a ``nan`` into its score)."""
    if not text:
        return None
    body = re.sub(r"<think>.*?(</think>|$)", " ", text, flags=re.DOTALL | re.IGNORECASE)
    rating = release_rating(body)
    low, high = RATING_SCALE
    return rating if rating is not None and low <= rating <= high else None


def judge_reply(text: str | None, words: Sequence[str]) -> str | None:
    """A judge reply as the verdict column stores it: one of ``words`` (``parse_verdict``), or, for a rating request
    (``words`` the scale's ``1``..``5``), the rating's text (``"4"``, ``"4.5"``); None where unreadable."""
    if list(words) == RATING_WORDS:
        rating = parse_rating(text)
        return None if rating is None else f"{rating:g}"
    return parse_verdict(text, words)


RATING_WORDS = ["1", "2", "3", "4", "5"]
"""The ``words`` of a rating request: what the strict retry and ``JudgementRows`` know it by."""


def judge_request(judge: str, template: str, case: JudgeCase, **columns) -> dict:
    """The request row of one verdict for the run's model stage (``stages.ModelStage``): the template filled in,
    a small token budget, and the strict-verdict retry (asked once more, with ``RETRY_SUFFIX``, when the reply is
    not one allowed word). ``columns`` ride along to the judgement row (``model``, ``prompt``, ``instance_id``)."""
    words = RATING_WORDS if case.rated else list(allowed_verdicts(case))
    meta = {"task": "rate" if case.rated else "judge", "reference": case.reference, "answer": case.answer,
            "abstention": case.abstention, "reference_is_abstention": case.reference_is_abstention,
            "question": case.question}
    suffix = RATING_RETRY_SUFFIX if case.rated else RETRY_SUFFIX.format(words=", ".join(words))
    return columns | {
        "call": "generate", "media_paths": [], "max_new_tokens": MAX_VERDICT_TOKENS, "key": f"{case.key}|{judge}|1",
        "parts": [{"kind": "text", "text": judge_prompt(case, template), "modality": None, "path": None}],
        "meta": meta,
        "retry": {"suffix": suffix, "words": words,
                  "key": f"{case.key}|{judge}|2"}}


class JudgementRows:
    """The model stage's result records -> judgement rows (``JUDGEMENT_SCHEMA``): the verdict parsed strictly
    (None = invalid; the allowed words are the retry's), the last reply (or its error), the attempts it took.
    ``batch``: the request columns and, under ``schema.RESULT_COLUMN``, one result record
    (``engines.base.EngineResult``) per row."""

    def __init__(self, judge: str, template: str):
        self.judge, self.template = judge, template

    def __call__(self, batch: dict) -> pa.Table:
        rows = []
        for i, result in enumerate(batch[RESULT_COLUMN]):
            text, error = result.raw_text, result.error or None
            verdict = judge_reply(text, batch["retry"][i]["words"]) if error is None else None
            rows.append({"model": _str(batch, "model", i), "prompt": _str(batch, "prompt", i),
                         "instance_id": _str(batch, "instance_id", i), "judge": self.judge, "verdict": verdict,
                         "raw_text": text if error is None else f"error: {error}",
                         "attempts": int(result.attempts), "template": self.template})
        return pa.Table.from_pylist(rows, schema=JUDGEMENT_SCHEMA)


def _str(batch: dict, name: str, i: int) -> str | None:
    return str(batch[name][i]) if name in batch else None
