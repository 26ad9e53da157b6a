"""Answering models on both sides of the seam: the request rows of a model's instances, and the prediction rows
built from what ``stages.ModelStage`` returned.

Per instance x mode x prompt style still to do (resume skips what finished without an error), a multiple-choice
row asks ``score`` (the engine renders the prompt from the instance and style) and an open-ended row asks
``generate`` with the open prompt (``prompts.render_open_prompt``: context and question, no options).
A row whose prompt shows media the model cannot take follows the model's ``media_policy.MediaPolicy``: under
``skip`` it carries ``skipped`` (the modalities) and no media paths, and the model stage passes it by without a
call; under ``note`` it carries ``media_noted`` (the engine writes the notes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from omnieval.core.keyed import keyed_seed
from omnieval.core.prompts import open_media_paths, render_open_prompt
from omnieval.core.run_outputs import predictions_table
from omnieval.core.schema import DESCRIBE_ERROR, Instance
from omnieval.engines.base import EngineResult
from omnieval.run.media_policy import MediaPolicy
from omnieval.run.predictions import Prediction
from omnieval.run.records import instance_from_record, instance_record, request_schema
from omnieval.run.stages import INSTANCE_COLUMN, RESULT_COLUMN
from omnieval.scoring.verdicts import SCORER_COLUMN, answer_verdicts, open_verdicts


def open_generation(inst: Instance, style: str) -> dict:
    """The generate columns of one open-ended answer; ``key`` and ``meta`` let the simulated engine stand in for a
    model with set behaviour (real engines read the parts alone). The instance itself is not copied here: the
    row's ``instance``, read once in the model stage, reaches the engine as the request's ``instance``."""
    parts = [{"kind": p.kind, "text": p.text, "modality": p.modality, "path": p.path}
             for p in render_open_prompt(inst, style)]
    return {"parts": parts, "max_new_tokens": None, "key": f"{inst.instance_id}|{style}",
            "meta": {"task": "answer", "style": style}}


@dataclass(frozen=True)
class SampleDraws:
    """A model's repeated samples (``ModelConfig.samples``): k rows per multiple-choice instance, sample i seeded by
    ``keyed_seed(run seed, "sample", i)``; what each row records of its draw (``Prediction.sampling``)."""

    k: int = 1
    seed: int = 0
    temperature: float | None = None
    top_p: float | None = None

    def draws(self) -> list[tuple[int, dict | None]]:
        """``(sample, sampling)`` per sample (``records.SAMPLING_TYPE``); one sample at the model's own decoding
        records none."""
        if self.k == 1:
            return [(0, None)]
        return [(i, {"seed": keyed_seed(self.seed, "sample", i), "temperature": float(self.temperature or 1.0),
                     "top_p": float(self.top_p or 1.0)}) for i in range(self.k)]


def sample_draws(model, seed: int) -> SampleDraws:
    """The draws of ``model`` (a ``ModelConfig``) in a run seeded ``seed``."""
    return SampleDraws(model.samples, seed, model.temperature, model.top_p)


REQUEST_SCHEMA = request_schema(["call", "mode", "prompt", "instance", "instance_id", "media_paths", "cascade",
                                 "parts", "max_new_tokens", "key", "meta", "skipped", "media_noted", "sample",
                                 "sampling"])
"""The columns of an answering model's request rows (``records.REQUEST_FIELDS``; the open-ended ones null on
multiple-choice rows)."""


def answer_requests(instances: Iterable[Instance], modes: list[str], prompts: list[str],
                    done: set[tuple[str, str, str, int]], cascade: dict[str, dict],
                    policy: MediaPolicy | None = None, draws: SampleDraws | None = None) -> Iterator[dict]:
    """The request rows of one model: every (instance, mode, prompt style, sample) not in ``done``; ``cascade``
    gives the cascade columns per instance id (all rows or none); ``policy`` marks rows showing media the model
    cannot take; ``draws`` its repeated samples (one where None)."""
    for inst in instances:
        record = instance_record(inst)
        for row in _requests(inst.instance_id, inst.open_only, [s.ref for s in inst.media_segments()],
                             lambda inst=inst: inst, modes, prompts, done, cascade.get(inst.instance_id),
                             policy or MediaPolicy(), (draws or SampleDraws()).draws()):
            yield row | {"instance": record}


def _requests(instance_id: str, open_only: bool, media_paths: list[str], instance, modes: list[str],
              prompts: list[str], done, cascade: dict | None, policy: MediaPolicy,
              draws: list[tuple[int, dict | None]]) -> Iterator[dict]:
    """The rows of one instance, without its ``instance`` record (the caller adds it); ``instance()`` reads it,
    asked only for open-ended rows. An open instance (no options: ``Instance.open_only``) has no multiple-choice
    row."""
    for mode in modes:
        if open_only and mode != "open":
            continue
        paths = open_media_paths(instance()) if mode == "open" else media_paths
        skipped, noted = policy.mark(paths)
        for prompt in prompts:
            for sample, sampling in draws:
                if (mode, prompt, instance_id, sample) in done:
                    continue
                row = {"call": "generate" if mode == "open" else "score", "mode": mode, "prompt": prompt,
                       "instance_id": instance_id,
                       "media_paths": [] if skipped else paths, "cascade": cascade,
                       "skipped": skipped, "media_noted": noted, "sample": sample, "sampling": sampling}
                if mode == "open":
                    row |= open_generation(instance(), prompt)
                yield row


def request_table(rows: list[dict], tags: dict | None = None) -> pa.Table:
    """Request rows as a table of ``REQUEST_SCHEMA``, plus a constant column per ``tags`` entry (the run)."""
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    for name, value in (tags or {}).items():
        table = table.append_column(name, pa.array([value] * table.num_rows))
    return table


_DONE: dict[str, frozenset] = {}


def block_requests(block: pa.Table, *, modes: list[str], prompts: list[str], done, tags: dict,
                   policy: MediaPolicy | None = None, draws: SampleDraws | None = None) -> pa.Table:
    """A Ray Data map over instance blocks (``expansion.INSTANCE_SCHEMA``): their request rows, each with the
    ``tags`` columns (its run). ``done`` is an object ref to the finished (mode, prompt, instance id, sample) keys,
    or None; a worker fetches it once; ``draws``: the model's repeated samples. ``policy``: the model's
    ``media_policy.MediaPolicy`` over the run's media."""

    finished: frozenset = frozenset()
    if done is not None:
        import ray

        key = done.hex()
        if key not in _DONE:
            _DONE.clear()
            _DONE[key] = frozenset(ray.get(done))
        finished = _DONE[key]
    rows: list[dict] = []
    taken: list[int] = []  # the block's row of each request row's instance
    parsed: dict[int, Instance] = {}
    records = block.column("instance")

    def instance(i: int) -> Instance:
        if i not in parsed:
            parsed[i] = instance_from_record(records[i].as_py())
        return parsed[i]

    samples = (draws or SampleDraws()).draws()
    n_labels = pc.list_value_length(pc.struct_field(records, "option_labels")).to_pylist()
    for i, (iid, paths) in enumerate(zip(block.column("instance_id").to_pylist(),
                                         block.column("media_paths").to_pylist(), strict=True)):
        before = len(rows)
        rows += _requests(iid, not n_labels[i], paths, lambda i=i: instance(i), modes, prompts, finished,
                          None, policy or MediaPolicy(), samples)
        taken += [i] * (len(rows) - before)
    # the instance records go from the block to the request rows in Arrow, never through Python objects
    table = request_table(rows, tags)
    return table.set_column(table.schema.get_field_index("instance"), "instance",
                            records.take(pa.array(taken, pa.int64())))


class PredictionRows:
    """Result records -> prediction rows (``PREDICTION_SCHEMA``), in the model's actor after the engine call; each
    field of the record (``engines.base.EngineResult``) is the row's column of the same name. ``carry``
    names request columns passed on beside the prediction columns (the run a row belongs to, where one pipeline
    answers several runs). An answer read from generated text gets both verdicts here, for every engine
    (``generated_answer``, ``scoring.verdicts``), by the scorer its run's ``SCORER_COLUMN`` names."""

    def __init__(self, model: str, engine: str, carry: tuple[str, ...] = ()):
        self.model, self.engine, self.carry = model, engine, tuple(carry)

    def __call__(self, batch: dict[str, list]) -> pa.Table:
        out = []
        for i, r in enumerate(batch[RESULT_COLUMN]):
            inst = batch[INSTANCE_COLUMN][i]  # parsed once for the batch, by the model stage
            cascade = batch["cascade"][i] if "cascade" in batch else None
            style, mode = batch["prompt"][i], batch["mode"][i]
            skipped = batch["skipped"][i] if "skipped" in batch else None
            if skipped:
                out.append(Prediction.skipped_row(inst, self.model, self.engine, style, mode, skipped, cascade))
                continue
            noted = batch["media_noted"][i] if "media_noted" in batch else None
            latency_s = _finite(r.latency_s)
            if mode == "open":
                answer = Prediction.generated(inst, self.model, self.engine, style, raw_text=r.raw_text,
                                              error=r.error, error_kind=r.error_kind, latency_s=latency_s,
                                              cascade=cascade, media_noted=noted, shown=r.shown or None)
                if answer.error is None:  # an open item's released rule, where it is offline (``open_verdicts``)
                    answer = replace(answer, answer_verdicts=open_verdicts(inst, answer.answer_text,
                                                                           _scorer(batch, i)))
                out.append(answer)
            else:
                logprobs = r.option_logprobs
                out.append(Prediction.scored(
                    inst, self.model, self.engine, style, choice=r.choice, confidence=_finite(r.confidence),
                    confidence_method=r.confidence_method,
                    option_logprobs=None if logprobs is None else [_logprob(x) for x in logprobs],
                    raw_text=r.raw_text, error=r.error, error_kind=r.error_kind, latency_s=latency_s,
                    cascade=cascade, media_noted=noted, answer_source=r.answer_source, shown=r.shown or None,
                    answer_verdicts=answer_verdicts(inst, r.raw_text, _scorer(batch, i)) if generated_answer(r)
                    else None, reasoning=r.reasoning, reasoning_tokens=r.reasoning_tokens))
        if "sample" in batch:  # repeated samples: which one each row is, and how it was drawn
            out = [replace(p, sample=int(batch["sample"][i] or 0), sampling=_sampling(batch, i))
                   for i, p in enumerate(out)]
        table = predictions_table(p.row() for p in out)
        for name in self.carry:
            table = table.append_column(name, pa.array(batch[name]))
        return table


def generated_answer(result: EngineResult) -> bool:
    """Whether an engine result's option was read from generated text: a reply without an error whose choice was
    parsed or forced after a reasoning (``answer_source``), or read from the text with no confidence method (a
    generate-and-parse endpoint). Zero-shot options scored from the label logits are not: no rule reads them."""
    if result.raw_text is None or result.error is not None:
        return False
    return result.answer_source is not None or result.confidence_method is None


def failed_predictions(failed: list[tuple[Instance, str]], model: str, engine: str, modes: list[str],
                       prompts: list[str], done: set[tuple[str, str, str, int]],
                       draws: SampleDraws | None = None) -> pa.Table:
    """Errored predictions (kind ``describe``), without a model call, of instances that cannot be asked (their
    describer failed: ``cascade.cascade_instances``), one per sample."""
    samples = (draws or SampleDraws()).draws()
    return predictions_table(
        replace(Prediction.failed(inst, model, engine, prompt, mode, message, DESCRIBE_ERROR), sample=sample,
                sampling=sampling).row()
        for inst, message in failed for mode in modes for prompt in prompts for sample, sampling in samples
        if (mode, prompt, inst.instance_id, sample) not in done)


def _sampling(batch: dict, i: int) -> dict | None:
    """Row ``i``'s draw (``SampleDraws``): None for one sample."""
    return batch["sampling"][i] if "sampling" in batch else None


def _scorer(batch: dict, i: int) -> str | None:
    """Row ``i``'s official scorer (its run's ``SCORER_COLUMN`` tag: blank or absent, none)."""
    return (batch[SCORER_COLUMN][i] or None) if SCORER_COLUMN in batch else None


def _logprob(x) -> float | None:
    """One option's logprob; null where the engine could not read it (a label outside an endpoint's top
    logprobs, ``confidence_method: rs_topk``)."""
    return None if x is None or x != x else float(x)


def _finite(x) -> float | None:
    """A float of the result record as the row stores it: NaN (an engine's unreadable value) as null."""
    return None if x is None or x != x else x
