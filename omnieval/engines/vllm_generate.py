"""Generate-only ``ray.data.llm`` passes for the text a run needs besides the answers: judge verdicts and cascade
descriptions, for a ``vllm`` judge or describer whose ``processor`` option is on (the default when
``tensor_parallel_size > 1``). They yield exactly the records of the engine actor pool path
(``open_ended.JudgeStage`` + ``judges.judge_cases``, ``cascade.DescribeStage``) with the in-process engine's
prompts and greedy decoding, so the two paths are interchangeable and resume from each other's parts.

* ``TextRequests`` (preprocess): a row -> a greedy request through ``vllm_processor.vllm_request`` (the prompt as
  ``engines/chat.py`` builds it; for an omni model the decoded media from the run's ``MediaCache``, each media part
  announced as the modality it decoded to, as ``DescribeStage`` does for point clouds shown as views). A row the
  caller marks finished passes around the engine (``__inference_error__ = DONE``, the stages' bypass).
* Judges: two chained processors, as ``judge_cases`` runs two attempts. Pass 1 asks every answer; pass 2 re-asks,
  with the reminder appended, only those whose reply did not parse or whose request failed. A verdict that is still
  unparseable is recorded as invalid (null) with ``attempts = 2``.
* Describers: one processor after the pipeline's ``MediaStage`` (so a file that fails to decode is a failed
  description, ``describe failed: media decode failed: ...``, without a model call).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from omnieval.config import ModelConfig
from omnieval.engines.vllm_processor import (
    DONE,
    ENGINE_PREFIX,
    ERROR,
    CacheMedia,
    _is_omni,
    _tokenizer,
    cluster_has_gpus,
    engine_error,
    map_options,
    processor_config,
    processor_settings,
    vllm_request,
)
from omnieval.prompts import PromptPart


class TextRequests:
    """Preprocess of a generate-only pass. ``build(row)`` gives the request's ``(parts, max_tokens)``, or None for
    a row that is already finished (it passes around the engine). ``media``: path -> decoded media (for omni
    models). Every row gets ``sampling_params`` of one shape (see ``RequestBuilder.placeholder``)."""

    def __init__(self, path: str, build: Callable[[dict], tuple[list[PromptPart], int] | None],
                 media: Callable[[Sequence[str]], dict] | None = None, continue_on_error: bool = True):
        self.path, self.build, self.media, self.continue_on_error = path, build, media, continue_on_error

    def __call__(self, row: dict) -> dict:
        out: dict[str, Any] = {"prompt": "", "sampling_params": {"max_tokens": 1, "temperature": 0.0}, ERROR: ""}
        if row.get("decode_error"):
            out[ERROR] = str(row["decode_error"])
            return out
        try:
            built = self.build(row)
            if built is None:
                out[ERROR] = DONE
                return out
            parts, max_tokens = built
            tok, omni = _tokenizer(self.path), _is_omni(self.path)
            paths = [p.path for p in parts if p.kind == "media"]
            media = {}
            if paths and (omni or self.media is not None):
                if self.media is None:
                    raise ValueError("no media source for an omni model")
                media = self.media(paths)  # each part is announced as what it decoded to (point cloud -> views)
                parts = [replace(p, modality=media[p.path].modality) if p.path in media else p for p in parts]
            out |= vllm_request(tok, parts, omni, media)
            out["sampling_params"] = {"max_tokens": int(max_tokens), "temperature": 0.0}
        except Exception as exc:
            if not self.continue_on_error:
                raise
            out[ERROR] = f"{ENGINE_PREFIX}{type(exc).__name__}: {exc}"
        return out


def generate_pass(model: ModelConfig, build: Callable, postprocess: Callable, *,
                  media: Callable[[Sequence[str]], dict] | None = None, cpu: bool | None = None,
                  map_num_cpus: float = 0.25):
    """One ``ray.data.llm`` processor that generates greedily for the rows ``build`` turns into requests."""
    from ray.data.llm import build_processor

    settings = processor_settings(model)
    cpu = (not cluster_has_gpus()) if cpu is None else cpu
    kwargs = map_options(model, settings, map_num_cpus)
    return build_processor(processor_config(model, settings, cpu=cpu),
                           preprocess=TextRequests(settings.path, build, media, settings.should_continue_on_error),
                           postprocess=postprocess, preprocess_map_kwargs=kwargs, postprocess_map_kwargs=kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Judges
# ---------------------------------------------------------------------------------------------------------------

# ``model`` and ``prompt`` name the LoRA adapter and the request prompt to ray.data.llm's engine stage: the graded
# answer's model and prompt style travel as ``answer_model`` / ``answer_style``.
JUDGE_COLUMNS = ("instance_json", "answer_model", "answer_style", "instance_id", "answer_text")


def _judge_row(row: dict) -> dict:
    return {"instance_json": row["instance_json"], "answer_model": row["model"], "answer_style": row["prompt"],
            "instance_id": row["instance_id"], "answer_text": row["answer_text"]}


def _case(row: Mapping):
    from omnieval.open_ended import judge_case
    from omnieval.schema import Instance

    return judge_case(Instance.model_validate_json(row["instance_json"]),
                      {"model": row["answer_model"], "prompt": row["answer_style"], "answer_text": row["answer_text"]})


class JudgeRequest:
    """``build`` of judge attempt 1 or 2: the versioned template (attempt 2 adds the reminder); attempt 2 skips the
    answers whose first verdict parsed."""

    def __init__(self, template: str, attempt: int):
        self.template, self.attempt = template, attempt

    def __call__(self, row: dict):
        from omnieval.judges import MAX_VERDICT_TOKENS, RETRY_SUFFIX, allowed_verdicts, judge_prompt

        if self.attempt > 1 and row.get("verdict") and not row.get(ERROR):
            return None
        case = _case(row)
        text = judge_prompt(case, self.template)
        if self.attempt > 1:
            text += RETRY_SUFFIX.format(words=", ".join(allowed_verdicts(case)))
        return [PromptPart("text", text=text)], MAX_VERDICT_TOKENS


class JudgeReply:
    """Postprocess of judge attempt ``attempt``: the reply parsed strictly (``""`` = unparseable)."""

    def __init__(self, attempt: int):
        self.attempt = attempt

    def __call__(self, row: dict) -> dict:
        from omnieval.judges import allowed_verdicts, parse_verdict

        text = row.get("generated_text") or ""
        verdict = parse_verdict(text, allowed_verdicts(_case(row))) or ""
        return {k: row.get(k) for k in JUDGE_COLUMNS} | {"verdict": verdict, "raw_text": text,
                                                         "attempts": self.attempt}


def _judgements(judge: str, template: str) -> Callable[[pa.Table], pa.Table]:
    """The last map: rows -> ``JUDGEMENT_SCHEMA`` records (an engine failure in attempt 2: invalid, ``raw_text``
    = ``error: <message>`` as ``judge_cases`` words it)."""
    from omnieval.open_ended import JUDGEMENT_SCHEMA

    def finish(table: pa.Table) -> pa.Table:
        rows = []
        for row in table.to_pylist():
            failed = row.get(ERROR) not in (None, "", DONE)
            rows.append({"model": row["answer_model"], "prompt": row["answer_style"], "instance_id": row["instance_id"],
                         "judge": judge, "verdict": None if failed else (row.get("verdict") or None),
                         "raw_text": f"error: {engine_error(str(row[ERROR]))}" if failed else row.get("raw_text"),
                         "attempts": 2 if failed else int(row["attempts"]), "template": template})
        return pa.Table.from_pylist(rows, schema=JUDGEMENT_SCHEMA)

    return finish


def judge_processor_stage(ds, judge: ModelConfig, template: str, *, cpu: bool | None = None,
                          map_num_cpus: float = 0.25):
    """Rows (``instance_json``, ``model``, ``prompt``, ``instance_id``, ``answer_text``: the graded answers) ->
    judgement blocks, through two chained processors of ``judge``."""
    ds = ds.map(_judge_row, num_cpus=map_num_cpus)
    first = generate_pass(judge, JudgeRequest(template, 1), JudgeReply(1), cpu=cpu, map_num_cpus=map_num_cpus)
    second = generate_pass(judge, JudgeRequest(template, 2), JudgeReply(2), cpu=cpu, map_num_cpus=map_num_cpus)
    return second(first(ds)).map_batches(_judgements(judge.name, template), batch_format="pyarrow",
                                         batch_size=None, num_cpus=map_num_cpus)


# ---------------------------------------------------------------------------------------------------------------
# Describers
# ---------------------------------------------------------------------------------------------------------------

class DescribeRequest:
    """``build`` of a description: the media file, then its modality's prompt (``DescribeStage``'s order)."""

    def __init__(self, prompts: Mapping[str, str], max_new_tokens: int):
        self.prompts, self.max_new_tokens = dict(prompts), max_new_tokens

    def __call__(self, row: dict):
        modality = str(row["modality"])
        return ([PromptPart("media", modality=modality, path=str(row["path"])),
                 PromptPart("text", text=self.prompts[modality])], self.max_new_tokens)


def described(row: dict) -> dict:
    return {"path": row["path"], "modality": row["modality"], "text": row.get("generated_text") or ""}


def _descriptions(describer: str, prompts: Mapping[str, str]) -> Callable[[pa.Table], pa.Table]:
    """The last map: rows -> ``DESCRIPTION_SCHEMA`` records, with ``DescribeStage``'s error wording."""
    from omnieval.cascade import DESCRIPTION_SCHEMA

    def finish(table: pa.Table) -> pa.Table:
        rows = []
        for row in table.to_pylist():
            if row.get(ERROR):
                message = str(row[ERROR])
                error = message if message.startswith("media decode failed") else engine_error(message)
            else:
                error = None if (row.get("text") or "").strip() else "the describer returned no text"
            rows.append({"path": row["path"], "modality": row["modality"], "describer": describer,
                         "prompt": prompts[row["modality"]], "text": None if error else row["text"].strip(),
                         "error": None if error is None else f"describe failed: {error}"})
        return pa.Table.from_pylist(rows, schema=DESCRIPTION_SCHEMA)

    return finish


def describe_processor_stage(ds, describer: ModelConfig, prompts: Mapping[str, str], max_new_tokens: int, *,
                             cache_name: str, namespace: str, specs: Mapping[str, Any], cpu: bool | None = None,
                             map_num_cpus: float = 0.25):
    """Rows (``path``, ``modality``, ``decode_error`` from the ``MediaStage``) -> description blocks."""
    run = generate_pass(describer, DescribeRequest(prompts, max_new_tokens), described,
                        media=CacheMedia(cache_name, namespace, specs), cpu=cpu, map_num_cpus=map_num_cpus)
    return run(ds).map_batches(_descriptions(describer.name, prompts), batch_format="pyarrow", batch_size=None,
                               num_cpus=map_num_cpus)
