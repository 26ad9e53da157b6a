"""The vLLM engine as a ``ray.data.llm`` processor stage: vLLM's own engine actor pool (``concurrency`` replicas,
placement groups for tensor-parallel models) serves the pipeline instead of omnieval's ``EngineStage`` actors.

``vllm_processor_stage(ds, model, ...)`` takes the pipeline's rows after the media stage (``instance_json``,
``prompt`` = prompt style, ``media_paths``, ``instance_id``, ``decode_error``) and returns blocks of prediction rows
with exactly the columns, values and error conventions of ``EngineStage`` + ``engines/vllm.py`` (the in-process
engine): same prompt tokens, same option-label logprobs, same choice/confidence rules.

What runs where (``ray.data.llm.build_processor`` with ``vLLMEngineProcessorConfig``, Ray 2.60):

* **preprocess** (``RequestBuilder``, Ray Data map tasks): the instance's prompt through ``engines/chat.py`` (media
  placeholders first for omni models, text notes for text models), decoded media fetched by key from the run's
  ``MediaCache`` actor (zero-copy from the object store, a small per-process LRU) and handed to vLLM as
  ``multimodal_data`` (frames uint8 T x H x W x 3, audio ``(waveform, rate)``, images), ``multimodal_uuids`` = media
  content hashes (vLLM's multimodal and prefix caches hit across the conditions of an item),
  ``mm_processor_kwargs`` = the sampled video fps, and per-row ``sampling_params``. Ray's own chat-template,
  tokenize, detokenize and prepare-multimodal stages are all disabled: the prompt is passed complete, vLLM tokenizes
  it exactly as ``LLM.generate`` does, and Ray's multimodal preparation (which fails on CPU-only nodes and drops
  ``mm_processor_kwargs``) is never used. A row that cannot be requested (media that failed to decode, a label that
  is not one token) gets ``__inference_error__`` set here, so the engine stage skips it without a model call.
* **engine** (Ray's ``vLLMEngineStage``: ``AsyncLLMEngine`` per replica): zero-shot rows ask for
  ``SamplingParams(max_tokens=1, temperature=0, logprob_token_ids=<label ids>)``; the stage returns, for the one
  generated step, the full-vocabulary logprob of every listed label token (exact, never a top-k).
* **postprocess** (``PredictionBuilder``): option logprobs -> choice and rs confidence (SPEC section 7) ->
  ``omnieval.pipeline.prediction_row``. With ``should_continue_on_error`` (the default) a failing request comes back
  with ``__inference_error__`` and bypasses the postprocess; ``_finalize`` turns those rows into errored predictions
  (``vllm engine: <Type>: <message>``, as the in-process engine words them) and casts every block to
  ``PREDICTION_SCHEMA``.

Open-ended rows (``mode='open'``, a run with ``modes: [..., open]``) go through the *generate* processor only:
their prompt is ``prompts.render_open_prompt`` (no options), and the generate postprocess builds their finished
prediction row (``open_ended.open_prediction_row``), which rides along in a ``done_row`` column. If the run also has
multiple-choice rows, those finished rows then pass around the score processor's engine (its preprocess marks them
``__inference_error__ = DONE``, the stages' bypass for rows that need no model call) and ``_finalize`` unpacks them.

Chain-of-thought: two processors. Rows split by prompt style before any model work (a cheap re-read of the
upstream rows: decoding is once per run through the cache): ``cot`` rows go through a *generate* processor (greedy,
``max_new_tokens``), whose postprocess keeps the generated text; they are then unioned with the ``zs`` rows into the
*score* processor, where a cot row is scored at its answer position (``engines/chat.py``'s
``cot_answer_position``: the prompt + reasoning up to its last ``Answer:``) and the parsed answer wins over the
argmax, exactly as in ``engines/vllm.py``. So a run holds at most two engine pools (generate, score), one when it has
only one prompt style. Latency of a cot row is the sum of its two engine times.

Model options (the run config's ``options`` of an ``engine: vllm`` model): everything ``engines/vllm.py`` takes
(``path``, ``dtype``, ``max_model_len``, ``gpu_memory_utilization``, ``tensor_parallel_size``, ``enforce_eager``,
``max_new_tokens``, ``limit_mm_per_prompt``, ``seed``, ``engine_kwargs`` passed through to vLLM), plus
``processor`` (use this stage; on by default when ``tensor_parallel_size > 1``), ``placement_group_config``,
``accelerator_type``, ``max_concurrent_batches``, ``map_concurrency`` (pre/postprocess tasks at once),
``should_continue_on_error`` (default true) and ``runtime_env``.
The model's ``replicas`` are the processor's ``concurrency`` (a fixed pool) and its ``batch_size`` the processor's;
its ``num_gpus`` / ``num_cpus`` are not read (an engine replica's resources are its placement group's bundles).
On a cluster without GPUs the engine runs in a ``{"CPU": 1}`` bundle with ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, and
``enforce_eager`` / ``gpu_memory_utilization`` default to ``True`` / ``0.1`` (vLLM's CPU backend reads the latter as
the share of RAM for its KV cache; 0.9 fails).

Decoded arrays travel inside the rows from the preprocess tasks to the engine actors (through the object store; Ray
Data pickles the nested column): the engine stage reads ``multimodal_data`` from the row and has no hook to fetch it
by key, unlike ``EngineStage``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from omnieval.config import ModelConfig
from omnieval.engines.base import EngineResult, restricted_softmax, result_from_option_logprobs
from omnieval.engines.chat import (
    OMNI_MODALITIES,
    chat_prompt,
    cot_answer_position,
    is_omni_model,
    label_token_ids,
    omni_media_fields,
)
from omnieval.prompts import PromptPart, parse_answer, render_open_prompt, render_prompt

ERROR = "__inference_error__"  # ray.data.llm's per-row error column (set -> the engine stage and postprocess skip)
DONE = "__omnieval_done__"  # ERROR value of a finished row that passes around an engine (not an error)
CASCADE_COLUMNS = ("cascade", "intermediate_text", "stage_engines")
ENGINE_PREFIX = "vllm engine: "
CPU_DEFAULTS = {"enforce_eager": True, "gpu_memory_utilization": 0.1}


# ---------------------------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProcessorSettings:
    """A ``vllm`` model's options as the processor reads them (the in-process engine's options + processor ones)."""

    path: str
    dtype: str = "auto"
    max_model_len: int = 8192
    gpu_memory_utilization: float | None = None  # None: 0.9 on GPUs, 0.1 on a CPU-only cluster
    tensor_parallel_size: int = 1
    enforce_eager: bool | None = None  # None: False on GPUs, True on a CPU-only cluster
    max_new_tokens: int = 64
    limit_mm_per_prompt: dict | None = None
    seed: int = 0
    engine_kwargs: dict = field(default_factory=dict)
    processor: bool | None = None
    placement_group_config: dict | None = None
    accelerator_type: str | None = None
    max_concurrent_batches: int = 8
    map_concurrency: int | None = None  # pre/postprocess tasks at once; None: max(2, replicas)
    should_continue_on_error: bool = True
    runtime_env: dict | None = None


def processor_settings(model: ModelConfig, where: str = "") -> ProcessorSettings:
    """Validate a model's options for the processor path; an unknown option is an ``InputError`` that names it
    (``pipeline.make_plan`` calls this with ``where`` = ``models[0]``, ``judges[1]`` ..., so a bad option stops the
    run before Ray starts)."""
    from omnieval.schema import InputError

    prefix = f"{where}." if where else ""
    known = {f.name for f in fields(ProcessorSettings)}
    unknown = sorted(set(model.options) - known)
    if unknown:
        raise InputError(f"vllm processor ({model.name}): unknown option(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(known))}", field=f"{prefix}options")
    if "path" not in model.options:
        raise InputError(f"vllm processor ({model.name}): option 'path' (the model folder) is required",
                         field=f"{prefix}options.path")
    return ProcessorSettings(**model.options)


def uses_processor(model: ModelConfig) -> bool:
    """Whether a model runs through this stage: ``engine: vllm`` with ``processor: true``, or with
    ``tensor_parallel_size > 1`` unless ``processor: false`` says otherwise."""
    if model.engine != "vllm":
        return False
    flag = model.options.get("processor")
    return bool(flag) if flag is not None else int(model.options.get("tensor_parallel_size", 1)) > 1


def map_options(model: ModelConfig, settings: ProcessorSettings, num_cpus: float) -> dict:
    """``Dataset.map`` options of the pre/postprocess. Concurrency is capped (``map_concurrency``, default
    max(2, replicas)): each task of an uncapped map may start a fresh worker process, and each fresh process pays
    the imports and the tokenizer load again (about 3 s of CPU here), which on a small node costs more than the
    rows' own work (a few ms per row). Capped, a handful of warm processes serve every block."""
    limit = settings.map_concurrency or max(2, model.replicas)
    return {"num_cpus": num_cpus, "concurrency": int(limit)}


def cluster_has_gpus() -> bool:
    import ray

    return ray.is_initialized() and ray.cluster_resources().get("GPU", 0) > 0


def engine_kwargs(settings: ProcessorSettings, cpu: bool) -> dict:
    """The ``vllm.AsyncEngineArgs`` keywords: the named options, then ``engine_kwargs`` on top (passed through).

    ``disable_log_stats`` defaults to true: with stats on, a successful request's row carries a ``metrics`` struct
    and a failed one ``metrics: null``, and Ray 2.60 crashes when it concatenates an engine block in which every
    request failed with one holding a success (``TypeError: 'pyarrow.lib.DataType' object is not iterable`` in
    ``_backfill_missing_fields``, ray-project/ray#61656), which kills the whole run. Stats off, ``metrics`` is null
    in every row. Setting it false through ``engine_kwargs`` brings the crash back."""
    kwargs: dict[str, Any] = {"dtype": settings.dtype, "max_model_len": settings.max_model_len,
                              "tensor_parallel_size": settings.tensor_parallel_size, "seed": settings.seed,
                              "disable_log_stats": True}
    defaults = CPU_DEFAULTS if cpu else {"enforce_eager": False, "gpu_memory_utilization": 0.9}
    for key, value in defaults.items():
        kwargs[key] = getattr(settings, key) if getattr(settings, key) is not None else value
    if settings.limit_mm_per_prompt:
        kwargs["limit_mm_per_prompt"] = dict(settings.limit_mm_per_prompt)
    return kwargs | dict(settings.engine_kwargs)


def processor_config(model: ModelConfig, settings: ProcessorSettings, cpu: bool | None = None):
    """The ``vLLMEngineProcessorConfig`` of one pass. ``cpu``: None asks the connected Ray cluster."""
    from ray.data.llm import vLLMEngineProcessorConfig

    cpu = (not cluster_has_gpus()) if cpu is None else cpu
    placement = settings.placement_group_config
    runtime_env = dict(settings.runtime_env or {})
    if cpu:
        placement = placement or {"bundles": [{"CPU": 1}] * settings.tensor_parallel_size}
        env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} | dict(runtime_env.get("env_vars", {}))
        runtime_env["env_vars"] = env
    return vLLMEngineProcessorConfig(
        model_source=settings.path, engine_kwargs=engine_kwargs(settings, cpu), batch_size=model.batch_size,
        concurrency=(model.replicas, model.replicas), max_concurrent_batches=settings.max_concurrent_batches,
        placement_group_config=placement, accelerator_type=settings.accelerator_type,
        runtime_env=runtime_env or None, should_continue_on_error=settings.should_continue_on_error,
        chat_template_stage=False, tokenize_stage=False, detokenize_stage=False, prepare_multimodal_stage=False,
        log_engine_metrics=False)


# ---------------------------------------------------------------------------------------------------------------
# Pure helpers (the same rules as engines/vllm.py)
# ---------------------------------------------------------------------------------------------------------------

def vllm_request(tokenizer, parts: Sequence[PromptPart], omni: bool, media: Mapping[str, Any],
                 suffix: str = "") -> dict:
    """``prompt`` (+ ``multimodal_data``, ``multimodal_uuids``, ``mm_processor_kwargs`` for omni models) of one
    request, as ``engines/vllm.py`` builds them, under the keys ``ray.data.llm``'s engine stage reads."""
    request: dict[str, Any] = {"prompt": chat_prompt(tokenizer, parts, omni) + suffix}
    if not omni:
        return request
    request["multimodal_data"], request["multimodal_uuids"], kwargs = omni_media_fields(parts, media)
    if kwargs:
        request["mm_processor_kwargs"] = kwargs
    return request


def option_logprobs(step_logprobs: Mapping, token_ids: Sequence[int]) -> list[float]:
    """Label-token logprobs from one decoding step of the engine stage's ``logprobs`` output
    (``{token_id: {"logprob": ...}}``; keys may come back as strings after an Arrow round trip)."""
    out = []
    for t in token_ids:
        entry = step_logprobs.get(int(t), step_logprobs.get(str(int(t))))
        if entry is None:
            raise ValueError(f"the engine returned no logprob for label token {int(t)}")
        out.append(float(entry["logprob"] if isinstance(entry, Mapping) else entry.logprob))
    return out


def cot_result(labels: Sequence[str], option_texts: Sequence[str], logprobs: Sequence[float],
               text: str) -> EngineResult:
    """CoT read-out: restricted softmax at the answer position; the label parsed from the generated text wins
    over the argmax (its confidence is then that label's restricted-softmax value)."""
    res = result_from_option_logprobs(labels, logprobs, raw_text=text)
    parsed = parse_answer(text, labels, option_texts)
    if parsed is not None and parsed != res.choice:
        res.confidence = restricted_softmax(logprobs)[list(labels).index(parsed)]
        res.choice = parsed
    return res


def engine_error(message: str) -> str:
    """An engine-side error in the in-process engine's words (``vllm engine: <Type>: <message>``)."""
    return message if message.startswith((ENGINE_PREFIX, "media decode failed")) else ENGINE_PREFIX + message


# ---------------------------------------------------------------------------------------------------------------
# Per-process state of the preprocess tasks (Ray reuses worker processes: loaded once per process)
# ---------------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=4)
def _tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@lru_cache(maxsize=4)
def _is_omni(path: str) -> bool:
    return is_omni_model(path)


_MEDIA_LRU: OrderedDict[str, Any] = OrderedDict()
MEDIA_LRU_SIZE = 64


class CacheMedia:
    """Decoded media by benchmark path from the run's ``MediaCache`` actor (``specs``: path -> ``MediaSpec``), as
    ``EngineStage`` reads them; a per-process LRU keyed by content hash keeps recent payloads."""

    def __init__(self, cache_name: str, namespace: str, specs: Mapping[str, Any]):
        self.cache_name, self.namespace, self.specs = cache_name, namespace, dict(specs)

    def __call__(self, paths: Sequence[str]) -> dict[str, Any]:
        from omnieval.media.cache import CacheClient

        missing = sorted({p for p in paths if self.specs[p].key not in _MEDIA_LRU})
        if missing:
            payloads = CacheClient(self.cache_name, self.namespace).payloads([self.specs[p] for p in missing])
            for path, payload in zip(missing, payloads, strict=True):
                if payload is None:
                    raise ValueError(f"media {path} failed to decode")
                _MEDIA_LRU[self.specs[path].key] = payload
        out = {}
        for p in paths:
            _MEDIA_LRU.move_to_end(self.specs[p].key)
            out[p] = _MEDIA_LRU[self.specs[p].key]
        while len(_MEDIA_LRU) > max(MEDIA_LRU_SIZE, len(paths)):
            _MEDIA_LRU.popitem(last=False)
        return out


class GivenMedia:
    """Decoded media handed in by the caller (path -> ``DecodedMedia``), put in the object store once."""

    def __init__(self, media: Mapping[str, Any]):
        import ray

        self.refs = {p: ray.put(m) for p, m in media.items()}

    def __call__(self, paths: Sequence[str]) -> dict[str, Any]:
        import ray

        unknown = [p for p in paths if p not in self.refs]
        if unknown:
            raise ValueError(f"media not decoded for this request: {', '.join(unknown)}")
        return dict(zip(paths, ray.get([self.refs[p] for p in paths]), strict=True))


# ---------------------------------------------------------------------------------------------------------------
# Row functions (build_processor's preprocess / postprocess)
# ---------------------------------------------------------------------------------------------------------------

def _style(row: Mapping) -> str:
    return str(row.get("prompt_style") or row["prompt"])


def _mode(row: Mapping) -> str:
    return str(row.get("mode") or "mcq")


def _cascade(row: Mapping) -> dict:
    """The cascade columns of a row (null where absent: a model that is not a cascade)."""
    return {k: (str(row[k]) if row.get(k) else None) for k in CASCADE_COLUMNS}


def _media_paths(parts: Sequence[PromptPart]) -> list[str]:
    return [p.path for p in parts if p.kind == "media" and p.modality in OMNI_MODALITIES]


class RequestBuilder:
    """Preprocess: a pipeline row -> one vLLM request (``prompt``, ``multimodal_data``, ``multimodal_uuids``,
    ``mm_processor_kwargs``, ``sampling_params``) plus the columns the postprocess needs. ``mode`` is
    ``"generate"`` (the first CoT pass and open-ended answers: greedy, ``max_new_tokens``) or ``"score"`` (one
    token, label logprobs; for a CoT row after its generate pass, at the answer position). A row that already
    carries an error passes through untouched, a finished open-ended row (``done_row``) passes around the engine,
    and a row that cannot be requested gets ``__inference_error__`` (the engine then skips it)."""

    def __init__(self, path: str, mode: str, media: Callable[[Sequence[str]], dict] | None,
                 max_new_tokens: int = 64, continue_on_error: bool = True):
        if mode not in ("generate", "score"):
            raise ValueError(f"mode must be 'generate' or 'score', got {mode!r}")
        self.path, self.mode, self.media = path, mode, media
        self.max_new_tokens, self.continue_on_error = max_new_tokens, continue_on_error

    def placeholder(self) -> dict:
        """The request columns of a row that will not reach the engine, with the types of a real request.

        Every row of a block must carry ``sampling_params`` with the same fields and types: Ray Data hands the
        engine stage a struct column through pandas, where an int field with a null in some row comes back as a
        float (``max_tokens=1.0``). vLLM's engine core then fails to decode the request in its input thread, that
        thread dies, and every later request of the replica waits forever (a silent hang of the whole run)."""
        if self.mode == "generate":
            params: dict[str, Any] = {"max_tokens": int(self.max_new_tokens), "temperature": 0.0}
        else:
            params = {"max_tokens": 1, "temperature": 0.0, "logprob_token_ids": []}
        return {"prompt": "", "sampling_params": params}

    def __call__(self, row: dict) -> dict:
        from omnieval.schema import Instance

        skipped = self.placeholder() | ({"label_ids": []} if self.mode == "score" else {})
        if row.get(ERROR):
            return skipped
        if row.get("done_row"):
            return skipped | {ERROR: DONE}
        style = _style(row)
        out: dict[str, Any] = {"prompt_style": style, ERROR: ""} | skipped
        if row.get("decode_error"):
            out[ERROR] = str(row["decode_error"])
            return out
        try:
            tok, omni = _tokenizer(self.path), _is_omni(self.path)
            inst = Instance.model_validate_json(row["instance_json"])
            is_open = _mode(row) == "open"
            if is_open and self.mode != "generate":
                raise ValueError("an open-ended row reached the score pass without its generate pass")
            parts = render_open_prompt(inst, style) if is_open else render_prompt(inst, style)
            media = {}
            if omni and _media_paths(parts):
                if self.media is None:
                    raise ValueError("no media source for an omni model")
                media = self.media(_media_paths(parts))
            suffix = ""
            if self.mode == "generate":
                request = vllm_request(tok, parts, omni, media)
                if not is_open:
                    label_token_ids(tok, inst.option_labels)  # fails early, as the in-process engine does
                params = {"max_tokens": int(self.max_new_tokens), "temperature": 0.0}
            else:
                if style == "cot":
                    suffix, ids = cot_answer_position(tok, str(row["cot_text"]), inst.option_labels)
                    request = vllm_request(tok, parts, omni, media, suffix=suffix)
                else:
                    request = vllm_request(tok, parts, omni, media)
                    ids = label_token_ids(tok, inst.option_labels)
                params = {"max_tokens": 1, "temperature": 0.0, "logprob_token_ids": [int(i) for i in ids]}
                out["label_ids"] = [int(i) for i in ids]
            out |= request | {"sampling_params": params}
        except Exception as exc:
            if not self.continue_on_error:
                raise
            out[ERROR] = f"{ENGINE_PREFIX}{type(exc).__name__}: {exc}"
        return out


PASS_THROUGH = ("instance_json", "prompt_style", "media_paths", "instance_id")


class GeneratedRow:
    """Postprocess of the generate pass: the pipeline columns plus the generated text and its engine time (a CoT
    row, scored next) or the finished prediction row as JSON in ``done_row`` (an open-ended row). Every row gets
    the same columns, whatever its kind: Ray Data concatenates them into one block."""

    def __init__(self, model: ModelConfig):
        self.model = model

    def __call__(self, row: dict) -> dict:
        out = {k: row.get(k) for k in PASS_THROUGH} | {
            "mode": _mode(row), "decode_error": "", "cot_text": "", "cot_latency": 0.0, "done_row": ""}
        out |= {k: v or "" for k, v in _cascade(row).items()}
        text, latency = row.get("generated_text") or "", float(row.get("time_taken_llm") or 0.0)
        if _mode(row) == "open":
            from omnieval.engines.base import GenerationResult
            from omnieval.open_ended import open_prediction_row
            from omnieval.schema import Instance

            inst = Instance.model_validate_json(row["instance_json"])
            done = open_prediction_row(inst, _style(row), GenerationResult(text), self.model, latency)
            out["done_row"] = json.dumps(done | _cascade(row))
        else:
            out |= {"cot_text": text, "cot_latency": latency}
        return out


class PredictionBuilder:
    """Postprocess of the score pass: the engine's output row -> the predictions row (``pipeline.prediction_row``:
    choice, rs confidence, option logprobs, raw text for CoT, latency). Never raises: a row it cannot read becomes
    an errored prediction."""

    def __init__(self, model: ModelConfig):
        self.model = model

    def __call__(self, row: dict) -> dict:
        from omnieval.pipeline import prediction_row
        from omnieval.schema import Instance

        inst = Instance.model_validate_json(row["instance_json"])
        style = _style(row)
        latency = float(row.get("time_taken_llm") or 0.0) + float(row.get("cot_latency") or 0.0)
        try:
            steps = row.get("logprobs")
            if not steps:
                raise ValueError("the engine returned no logprobs")
            lp = option_logprobs(steps[0], list(row["label_ids"]))
            if style == "cot":
                res = cot_result(inst.option_labels, inst.option_texts, lp, str(row.get("cot_text") or ""))
            else:
                res = result_from_option_logprobs(inst.option_labels, lp)
        except Exception as exc:
            res = EngineResult(choice=None, error=f"{ENGINE_PREFIX}{type(exc).__name__}: {exc}")
        return prediction_row(inst, style, res, self.model, latency) | _cascade(row)


def error_prediction(row: Mapping, model: ModelConfig) -> dict:
    """A row that came out of the processor with ``__inference_error__`` -> its errored predictions row (an
    open-ended one for an open-ended row)."""
    from omnieval.pipeline import prediction_row
    from omnieval.schema import Instance

    inst = Instance.model_validate_json(row["instance_json"])
    message = engine_error(str(row[ERROR]))
    if _mode(row) == "open":
        from omnieval.engines.base import GenerationResult
        from omnieval.open_ended import open_prediction_row

        return open_prediction_row(inst, _style(row), GenerationResult(None, error=message), model, None) \
            | _cascade(row)
    return prediction_row(inst, _style(row), EngineResult(choice=None, error=message), model, None) | _cascade(row)


def _finalize(model: ModelConfig) -> Callable:
    """The last map: error rows -> errored predictions; every block cast to ``PREDICTION_SCHEMA`` (so the
    driver's Parquet parts concatenate whatever mix of rows a block holds)."""
    from omnieval.schema import PREDICTION_SCHEMA

    names = PREDICTION_SCHEMA.names
    extra = [ERROR, "instance_json", "prompt_style", "done_row", *CASCADE_COLUMNS]

    def finalize(table):
        from omnieval.store import predictions_table

        keep = [c for c in dict.fromkeys([*names, *extra]) if c in table.column_names]
        rows = []
        for row in table.select(keep).to_pylist():
            if row.get("done_row"):  # a finished open-ended row (it passed around the score engine)
                rows.append(json.loads(row["done_row"]))
            elif row.get(ERROR):
                rows.append(error_prediction(row, model))
            else:
                rows.append({k: row.get(k) for k in names})
        return predictions_table(rows)

    return finalize


# ---------------------------------------------------------------------------------------------------------------
# The stage
# ---------------------------------------------------------------------------------------------------------------

def _needs_generation(row: dict) -> bool:
    """CoT multiple-choice rows (reasoning first) and open-ended rows go through the generate pass."""
    return str(row["prompt"]) == "cot" or _mode(row) == "open"


def _scored_directly(row: dict) -> bool:
    return not _needs_generation(row)


def vllm_processor_stage(ds, model: ModelConfig, *, prompts: Sequence[str] = ("zs",),
                         modes: Sequence[str] = ("mcq",), cache_name: str | None = None,
                         namespace: str = "omnieval", specs: Mapping[str, Any] | None = None,
                         media: Mapping[str, Any] | None = None, cpu: bool | None = None,
                         map_num_cpus: float = 0.25):
    """The pipeline's rows (after the media stage) -> prediction-row blocks, through ``ray.data.llm`` processors.

    ``prompts`` / ``modes``: the prompt styles and modes the rows may carry (``mode`` column; absent = ``mcq``):
    ``cot`` or ``open`` adds the generate pass, ``mcq`` the score pass (so an open-only model holds one engine
    pool, the generate one). Media come from the run's ``MediaCache`` (``cache_name``, ``namespace``, ``specs``:
    path -> MediaSpec, as for ``EngineStage``) or from ``media`` (path -> ``DecodedMedia``, put in the object
    store once). ``cpu``: None asks the connected Ray cluster whether it has GPUs. ``map_num_cpus``: logical CPUs
    per pre/postprocess task. Ray must be initialised (``pipeline.ensure_ray``) before this is called."""
    from ray.data.llm import build_processor

    settings = processor_settings(model)
    if media is not None:
        fetch = GivenMedia(media)
    elif cache_name is not None and specs is not None:
        fetch = CacheMedia(cache_name, namespace, specs)
    else:
        fetch = None
    cpu = (not cluster_has_gpus()) if cpu is None else cpu
    config = processor_config(model, settings, cpu=cpu)
    map_kwargs = map_options(model, settings, map_num_cpus)
    cont = settings.should_continue_on_error

    styles, kinds = set(prompts), set(modes)
    finalize = _finalize(model)
    scoring = ds
    if "cot" in styles or "open" in kinds:
        generate = build_processor(
            config, preprocess=RequestBuilder(settings.path, "generate", fetch, settings.max_new_tokens, cont),
            postprocess=GeneratedRow(model), preprocess_map_kwargs=map_kwargs, postprocess_map_kwargs=map_kwargs)
        if "mcq" not in kinds:  # open-ended only: no score pass, no second engine pool
            return generate(ds).map_batches(finalize, batch_format="pyarrow", batch_size=None,
                                            num_cpus=map_num_cpus)
        if styles == {"cot"}:  # every row needs the generate pass
            scoring = generate(ds)
        else:  # the upstream is read twice (cheap: decoding goes through the run's cache once)
            scoring = ds.filter(_scored_directly).union(generate(ds.filter(_needs_generation)))
    score = build_processor(
        config, preprocess=RequestBuilder(settings.path, "score", fetch, settings.max_new_tokens, cont),
        postprocess=PredictionBuilder(model), preprocess_map_kwargs=map_kwargs, postprocess_map_kwargs=map_kwargs)
    return score(scoring).map_batches(finalize, batch_format="pyarrow", batch_size=None, num_cpus=map_num_cpus)
