"""The ``Prediction`` type: what one model call (or a row that could not be asked) becomes in ``predictions.parquet``.

Every prediction row of a run is built here, once, from the model stage's result record
(``engines.base.EngineResult``: each of its fields the row's column of the same name): a multiple-choice answer
(``Prediction.scored``), an open-ended answer (``Prediction.generated``) or a row that never reached the model
(``Prediction.failed``: its describer failed; ``Prediction.skipped_row``: it shows media its model cannot take,
``media_policy``). Engines return results only and never build rows, so the row
shape cannot drift between engines. A row's ``error`` always comes with its ``error_kind`` (``schema.ERROR_KINDS``),
given by the stage where the error happened (``stages.ModelCalls`` for media, engine and engine-result errors,
``cascade`` for describer failures); a row cannot be built with one and not the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from omnieval.core.prompts import final_answer
from omnieval.core.schema import (
    DEFAULT_MODE,
    ERROR_KINDS,
    OPEN_MODE,
    OTHER_ERROR,
    PROTOCOL_COLUMNS,
    VERDICT_COLUMNS,
    Instance,
    breakdown_pairs,
    shown_columns,
)

CASCADE_FIELDS = ("cascade", "intermediate_text", "stage_engines")


def reference_text(inst: Instance) -> str | None:
    """The ground truth in words (what a judge compares an open answer with): the target option's text, or an open
    instance's ``reference`` (None where its release gives none)."""
    if inst.open_only:
        return inst.reference
    return inst.option_texts[inst.option_labels.index(inst.target)]


def protocol_columns(inst: Instance) -> dict:
    """The protocol's own fields of ``inst`` (``Instance.protocol_fields``) flat, as the prediction columns of the
    same names (``schema.PROTOCOL_COLUMNS``; null where the protocol sets none): the columns docs/reference.md
    names keep their place whatever protocol holds them. ``breakdowns`` becomes its ``{name, value}`` pairs."""
    columns = {name: inst.field(name) for name in PROTOCOL_COLUMNS}
    columns["breakdowns"] = breakdown_pairs(columns["breakdowns"])
    return columns


@dataclass(frozen=True)
class Prediction:
    """One row of ``predictions.parquet`` (docs/reference.md, Predictions), before it is cast to
    ``PREDICTION_SCHEMA`` (``store.predictions_table``)."""

    instance: Instance
    model: str
    engine: str
    prompt: str
    mode: str = DEFAULT_MODE
    choice: str | None = None
    confidence: float | None = None
    confidence_method: str | None = None
    option_logprobs: list[float] | None = None
    raw_text: str | None = None
    answer_text: str | None = None
    error: str | None = None
    error_kind: str | None = None  # ``schema.ERROR_KINDS``; set exactly where ``error`` is
    latency_s: float | None = None
    cascade: dict | None = None  # the cascade columns, when a describer turned media into text first
    skipped: str | None = None  # the modalities the model cannot take, when the row was not asked for them
    media_noted: str | None = None  # the modalities a text note stood in for
    answer_source: str | None = None  # chain-of-thought: "parsed" from its text, or "forced" from the logits
    answer_verdicts: dict | None = None  # an answer read from generated text: its robust and official verdict columns
    shown: dict | None = None  # what the model was shown (``engines.shown.Shown.to_dict``); None where unknown
    reasoning: str | None = None  # thinking style: the reasoning block, kept apart from ``raw_text`` (the answer)
    reasoning_tokens: int | None = None
    sample: int = 0  # which of the instance's repeated samples (``ModelConfig.samples``); 0 for one sample
    sampling: dict | None = None  # how a repeated sample was drawn: its seed, temperature and top_p

    def __post_init__(self):
        if bool(self.error) != (self.error_kind is not None) or self.error_kind not in (None, *ERROR_KINDS):
            raise ValueError(f"an error needs one of the kinds {ERROR_KINDS} and a kind needs an error: error "
                             f"{self.error!r}, error_kind {self.error_kind!r}")

    @classmethod
    def scored(cls, inst: Instance, model: str, engine: str, prompt: str, *, choice: str | None,
               confidence: float | None = None, confidence_method: str | None = None,
               option_logprobs: list[float] | None = None, raw_text: str | None = None, error: str | None = None,
               error_kind: str | None = None, latency_s: float | None = None, cascade: dict | None = None,
               media_noted: str | None = None, answer_source: str | None = None,
               answer_verdicts: dict | None = None, shown: dict | None = None, reasoning: str | None = None,
               reasoning_tokens: int | None = None) -> Prediction:
        """A multiple-choice answer. A choice that is not one of the instance's labels is no answer (invalid), and
        an answer without a choice carries no confidence. ``answer_verdicts``: the verdict columns of an answer read
        from generated text (``scoring.verdicts.answer_verdicts``); ``choice`` stays the engine's reading. A
        thinking answer's ``raw_text`` is the text after its reasoning block, the only text a scorer reads; the
        block is ``reasoning`` (``engines/thinking.py``)."""
        choice = choice if choice in inst.option_labels else None
        return cls(inst, model, engine, prompt, DEFAULT_MODE, choice,
                   confidence if choice is not None else None, confidence_method if choice is not None else None,
                   option_logprobs, raw_text, None, error, error_kind, latency_s, cascade, media_noted=media_noted,
                   answer_source=answer_source if choice is not None else None, answer_verdicts=answer_verdicts,
                   shown=shown, reasoning=reasoning,
                   reasoning_tokens=None if reasoning_tokens is None else int(reasoning_tokens))

    @classmethod
    def generated(cls, inst: Instance, model: str, engine: str, prompt: str, *, raw_text: str | None,
                  error: str | None = None, error_kind: str | None = None, latency_s: float | None = None,
                  cascade: dict | None = None, media_noted: str | None = None,
                  shown: dict | None = None) -> Prediction:
        """An open-ended answer: the full reply in ``raw_text``, the part a judge grades in ``answer_text``. A reply
        with no answer in it is an error (of kind ``other``), not an empty answer."""
        answer = final_answer(raw_text) if error is None else None
        if error is None and not answer:
            error, error_kind = "open answer: the model returned no text", OTHER_ERROR
        return cls(inst, model, engine, prompt, OPEN_MODE, raw_text=raw_text, answer_text=answer, error=error,
                   error_kind=error_kind, latency_s=latency_s, cascade=cascade, media_noted=media_noted, shown=shown)

    @classmethod
    def failed(cls, inst: Instance, model: str, engine: str, prompt: str, mode: str, error: str, error_kind: str,
               cascade: dict | None = None) -> Prediction:
        """A row that never reached the model (no latency): the error and its kind name the stage that failed."""
        return cls(inst, model, engine, prompt, OPEN_MODE if mode == OPEN_MODE else DEFAULT_MODE, error=error,
                   error_kind=error_kind, cascade=cascade)

    @classmethod
    def skipped_row(cls, inst: Instance, model: str, engine: str, prompt: str, mode: str, modalities: str,
                    cascade: dict | None = None) -> Prediction:
        """A row not asked because its prompt shows media of ``modalities`` the model cannot take
        (``unsupported_media: skip``): no choice, no error, out of every metric."""
        return cls(inst, model, engine, prompt, OPEN_MODE if mode == OPEN_MODE else DEFAULT_MODE, cascade=cascade,
                   skipped=modalities)

    def row(self) -> dict:
        inst = self.instance
        cascade = self.cascade or {}
        return {
            "model": self.model, "prompt": self.prompt, "protocol": inst.protocol, "split": inst.split,
            "item_id": inst.item_id, "instance_id": inst.instance_id, "condition": inst.condition,
            "target": inst.target, "choice": self.choice, "abstain_label": inst.abstain_label,
            "confidence": self.confidence, "confidence_method": self.confidence_method,
            "n_options": len(inst.option_labels) or None, "task": inst.task, "category": inst.category,
            **protocol_columns(inst),
            "donors": json.dumps(inst.donors, sort_keys=True) if inst.donors else None,
            "media_unit": inst.media_unit,
            "option_logprobs": self.option_logprobs, "raw_text": self.raw_text, "error": self.error,
            "error_kind": self.error_kind, "latency_s": self.latency_s, "engine": self.engine, "mode": self.mode,
            "answer_text": self.answer_text,
            "reference": reference_text(inst) if self.mode == OPEN_MODE else None, "verdicts": None,
            **{k: cascade.get(k) for k in CASCADE_FIELDS}, "skipped": self.skipped, "media_noted": self.media_noted,
            "answer_source": self.answer_source, **(self.answer_verdicts or dict.fromkeys(VERDICT_COLUMNS)),
            **shown_columns(self.shown), "reasoning": self.reasoning, "reasoning_tokens": self.reasoning_tokens,
            "sample": self.sample, "sampling": json.dumps(self.sampling, sort_keys=True) if self.sampling else None,
        }
