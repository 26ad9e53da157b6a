"""One evaluation run as a Ray Data streaming pipeline.

The plan (what to evaluate) is made on the driver, before any model work, and fails loud on bad input:
load + validate the benchmark -> ``protocol.expand`` into instances -> pre-flight check of every distinct media file
-> anti-join with what already finished (resume). Then, per model, the rows (instance x prompt style) stream through

    media stage (makes sure each distinct media file is decoded, once, through the run's ``MediaCache``)
      -> engine stage (an actor pool: ``replicas`` actors, each ``num_gpus``/``num_cpus``, batches of ``batch_size``;
         decoded arrays are read by key from the object store, never copied into the stream's rows), or, for an
         ``engine: vllm`` model with the ``processor`` option (on by default when ``tensor_parallel_size > 1``),
         ``engines/vllm_processor.py``'s ``ray.data.llm`` stage, which yields the same prediction rows
      -> driver: prediction rows flushed as atomic Parquet parts (the resume log), progress bar

and finally all parts are consolidated into ``predictions.parquet`` sorted by (model, prompt, instance_id).
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from omnieval.config import ModelConfig, RunConfig, modes_of
from omnieval.preflight import check_engines, uses_vllm_processor
from omnieval.prompts import open_media_paths
from omnieval.schema import Instance

FLUSH_ROWS = 256
FLUSH_SECONDS = 5.0


@dataclass
class RunResult:
    output: str
    predictions_path: str
    n_instances: int
    n_rows: int
    n_skipped: int
    n_errors: int
    decode_counts: dict[str, int] = field(default_factory=dict)
    accuracy_table: str = ""
    n_predictions: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    error_examples: list[str] = field(default_factory=list)
    max_error_rate: float = 0.0

    @property
    def error_rate(self) -> float:
        return self.n_errors / self.n_predictions if self.n_predictions else 0.0

    @property
    def ok(self) -> bool:
        """False (the command exits non-zero) when more rows ended in an error than ``max_error_rate`` allows:
        an errored row is not the model's answer, and a run whose rows errored has not measured the model."""
        return self.n_predictions > 0 and self.error_rate <= self.max_error_rate

    def summary(self) -> str:
        lines = [f"predictions: {self.predictions_path}",
                 f"instances: {self.n_instances}  rows scored now: {self.n_rows}  resumed (skipped): "
                 f"{self.n_skipped}  errors: {self.n_errors}  distinct media decoded: {len(self.decode_counts)}"]
        if self.n_errors:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors_by_kind.items()))
            lines += [f"{self.n_errors} of {self.n_predictions} rows ended in an error ({100 * self.error_rate:.1f}%; "
                      f"{kinds}); they are not answers and are left out of every metric. First ones:",
                      *(f"  {e[:300]}" for e in self.error_examples[:5])]
            if not self.ok:
                lines.append(f"FAILED: error share {self.error_rate:.3f} is above max_error_rate "
                             f"{self.max_error_rate:g}; fix the cause and rerun (finished rows are kept, errored "
                             "ones are retried), or allow a share with max_error_rate in the config")
        if self.accuracy_table:
            lines += ["", "accuracy by condition (valid predictions):", self.accuracy_table]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Plan
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Plan:
    root: Path
    instances: list[Instance]
    media_specs: dict[str, object]  # relative path -> MediaSpec


def make_plan(config: RunConfig) -> Plan:
    """Everything that can fail on input fails here, before Ray or any engine starts."""
    from omnieval.datasets.benchmark import check_media, load_benchmark
    from omnieval.media.cache import MediaSpec
    from omnieval.media.decode import content_hash
    from omnieval.schema import InputError

    bench = load_benchmark(config.benchmark)
    protocol = protocol_of(config, bench)
    options = protocol_options(config, protocol)
    items = bench.items
    if config.limit_items and config.limit_items < len(items):
        items, note = sample_items(items, config.limit_items, config.seed)
        print(f"omnieval: limit_items: {note}", file=sys.stderr)
    instances = protocol.expand_all(items, bench, config.seed, options)
    if not instances:
        raise InputError("the benchmark expands to no instances: nothing to evaluate", file=bench.root)
    check_media(bench, mode=config.decode.media_check)
    check_engines(config, engine_models(config))
    check_generation(config)
    specs: dict[str, MediaSpec] = {}
    for inst in instances:
        for seg in inst.media_segments():
            if seg.path in specs:
                continue
            params = _decode_params(config, seg.modality)
            full = str(Path(bench.root) / seg.path)
            specs[seg.path] = MediaSpec(key=content_hash(full, modality=seg.modality, **dict(params)), path=full,
                                        modality=seg.modality, params=params)
    return Plan(root=Path(bench.root), instances=instances, media_specs=specs)


def sample_items(items: list, limit: int, seed: int) -> tuple[list, str]:
    """``limit`` items drawn across splits in proportion to their sizes (largest remainder; every split keeps at
    least one item where ``limit`` allows), each split's items in a seeded order keyed on the item id, returned in
    the benchmark's order; and a line that says what was kept of each split. The first N items would drop whole
    splits of a benchmark sorted by split, silently."""
    from omnieval.keyed import keyed_seed

    splits: dict[str, list] = {}
    for item in items:
        splits.setdefault(item.split, []).append(item)
    floor = 1 if limit >= len(splits) else 0
    quota = {s: max(floor, limit * len(group) // len(items)) for s, group in splits.items()}
    by_remainder = sorted(splits, key=lambda s: (-(limit * len(splits[s]) % len(items)), s))
    for name in by_remainder:
        if sum(quota.values()) >= limit:
            break
        quota[name] = min(len(splits[name]), quota[name] + 1)
    while sum(quota.values()) > limit:  # the floor of one per split can overshoot: trim the largest
        largest = max(quota, key=lambda s: (quota[s], s))
        quota[largest] -= 1
    chosen = {id(it) for name, group in splits.items()
              for it in sorted(group, key=lambda it: keyed_seed(seed, it.item_id, "limit_items"))[:quota[name]]}
    kept = [it for it in items if id(it) in chosen]
    note = f"{len(kept)} of {len(items)} items (" + ", ".join(
        f"{name} {quota[name]}/{len(group)}" for name, group in sorted(splits.items())) + ")"
    return kept, note


def engine_models(config: RunConfig) -> list[tuple[str, ModelConfig]]:
    """Every model a run starts an engine for, with where the config names it: answering models, judges and
    describers."""
    return [*((f"models[{i}]", m) for i, m in enumerate(config.models)),
            *((f"judges[{i}]", j) for i, j in enumerate(config.judges)),
            *((f"models[{i}].describe.model", m.describe.model) for i, m in enumerate(config.models) if m.describe)]


def check_generation(config: RunConfig) -> None:
    """Open-ended answers, judges and describers need engines that generate free text: say so before any model
    work."""
    from omnieval.engines.base import engine_class
    from omnieval.schema import InputError

    needs: list[tuple[str, ModelConfig]] = []
    if "open" in config.modes:
        needs += [(f"models[{i}]", m) for i, m in enumerate(config.models) if "open" in modes_of(config, m)]
        needs += [(f"judges[{i}]", j) for i, j in enumerate(config.judges)]
    needs += [(f"models[{i}].describe.model", m.describe.model) for i, m in enumerate(config.models) if m.describe]
    for where, model in needs:
        if not engine_class(model.engine).can_generate():
            raise InputError(f"engine {model.engine!r} of {model.name!r} does not generate free text (needed for "
                             "open-ended answers, judges and describers)", field=f"{where}.engine")


def protocol_of(config: RunConfig, bench):
    """The benchmark's protocol module; a config that names another protocol is an error."""
    from omnieval.protocols import get_protocol
    from omnieval.schema import InputError

    if config.protocol is not None and config.protocol != bench.protocol:
        raise InputError(f"the config asks for protocol {config.protocol!r} but benchmark {bench.root} is a "
                         f"{bench.protocol!r} benchmark", field="protocol")
    return get_protocol(bench.protocol)


def protocol_options(config: RunConfig, protocol):
    """``protocol_options`` validated by the protocol's ``Options`` model (errors name the option)."""
    from pydantic import ValidationError

    from omnieval.schema import InputError

    try:
        return protocol.Options.model_validate(config.protocol_options)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InputError(f"{err['msg']} (protocol {protocol.NAME})",
                         field=f"protocol_options.{where}" if where else "protocol_options") from None


def _decode_params(config: RunConfig, modality: str) -> tuple[tuple[str, object], ...]:
    d = config.decode
    if modality == "video":
        return (("max_side", d.max_side), ("num_frames", d.num_frames))
    if modality == "audio":
        return (("sample_rate", d.sample_rate),)
    return ()


# ---------------------------------------------------------------------------------------------------------------
# Stages
# ---------------------------------------------------------------------------------------------------------------

class MediaStage:
    """Make sure every media file of the batch is decoded (launching each distinct decode once, through the run's
    cache) and record failures per row. Rows carry media *keys* on; the arrays stay in the object store."""

    def __init__(self, cache_name: str, namespace: str, specs: dict):
        from omnieval.media.cache import CacheClient

        self.cache = CacheClient(cache_name, namespace)
        self.specs = specs

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        per_row = [json.loads(p) for p in batch["media_paths"]]
        distinct = sorted({p for paths in per_row for p in paths})
        status = dict(zip(distinct, self.cache.statuses([self.specs[p] for p in distinct]), strict=True))
        errors = ["; ".join(status[p] for p in paths if status[p]) for paths in per_row]
        batch["decode_error"] = np.array([f"media decode failed: {e}" if e else "" for e in errors], dtype=object)
        return batch


class EngineStage:
    """One engine replica. Fetches decoded media by key (zero-copy from the object store, kept in a small
    per-actor LRU); rows whose media failed to decode become errored predictions without a model call."""

    MEDIA_LRU = 512

    def __init__(self, model: dict, cache_name: str, namespace: str, specs: dict):
        from omnieval.engines.base import create_engine
        from omnieval.media.cache import CacheClient

        self.model = ModelConfig.model_validate(model)
        self.engine = create_engine(self.model.engine, model=self.model.name, **self.model.options)
        self.cache = CacheClient(cache_name, namespace)
        self.specs = specs
        self.local: OrderedDict[str, object] = OrderedDict()

    def _media(self, paths: set[str]) -> dict[str, object]:
        missing = sorted(p for p in paths if p not in self.local)
        if missing:
            for path, payload in zip(missing, self.cache.payloads([self.specs[p] for p in missing]), strict=True):
                self.local[path] = payload
        for p in paths:
            self.local.move_to_end(p)
        while len(self.local) > max(self.MEDIA_LRU, len(paths)):
            self.local.popitem(last=False)
        return {p: self.local[p] for p in paths}

    def __call__(self, batch: dict[str, np.ndarray]) -> pa.Table:
        from omnieval.engines.base import EngineRequest, EngineResult
        from omnieval.open_ended import open_prediction_row, open_request
        from omnieval.store import predictions_table

        instances = [Instance.model_validate_json(s) for s in batch["instance_json"]]
        prompts = [str(p) for p in batch["prompt"]]
        errors = [str(e) for e in batch["decode_error"]]
        modes = [str(m) for m in batch["mode"]] if "mode" in batch else ["mcq"] * len(instances)
        paths_of = [json.loads(p) for p in batch["media_paths"]]
        todo = [i for i, e in enumerate(errors) if not e]
        results: dict[int, object] = {i: EngineResult(choice=None, error=errors[i])
                                      for i in range(len(instances)) if errors[i]}
        start = time.perf_counter()
        if todo:
            media = self._media({p for i in todo for p in paths_of[i]})
            for mode in ("mcq", "open"):
                ids = [i for i in todo if modes[i] == mode]
                if ids:
                    results.update(zip(ids, self._call(mode, [
                        (open_request if mode == "open" else EngineRequest)(
                            instances[i], {p: media[p] for p in paths_of[i]}, prompts[i]) for i in ids]),
                        strict=True))
        latency = (time.perf_counter() - start) / max(1, len(todo))
        rows = []
        for i, inst in enumerate(instances):
            lat = latency if i in todo else None
            if modes[i] == "open":
                res = results[i] if not errors[i] else _generation_error(errors[i])
                row = open_prediction_row(inst, prompts[i], res, self.model, lat)
            else:
                row = prediction_row(inst, prompts[i], results[i], self.model, lat)
            rows.append(row | {k: _str_or_none(batch[k][i]) for k in CASCADE_COLUMNS if k in batch})
        return predictions_table(rows)

    def _call(self, mode: str, requests: list) -> list:
        """``score`` (multiple choice) or ``generate`` (open-ended) one sub-batch; an engine failure marks every
        request of it, the run goes on."""
        from omnieval.engines.base import EngineResult, GenerationResult

        try:
            out = self.engine.generate(requests) if mode == "open" else self.engine.score(requests)
            if len(out) != len(requests):
                raise RuntimeError(f"engine returned {len(out)} results for {len(requests)} requests")
            return out
        except Exception as exc:
            message = f"engine error: {type(exc).__name__}: {exc}"
            return [GenerationResult(None, error=message) if mode == "open" else
                    EngineResult(choice=None, error=message)] * len(requests)


CASCADE_COLUMNS = ("cascade", "intermediate_text", "stage_engines")


def _generation_error(message: str):
    from omnieval.engines.base import GenerationResult

    return GenerationResult(None, error=message)


def _str_or_none(value) -> str | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def prediction_row(inst: Instance, prompt: str, res, model: ModelConfig, latency: float | None) -> dict:
    choice = res.choice if res.choice in inst.option_labels else None
    return {
        "model": model.name, "prompt": prompt, "protocol": inst.protocol, "split": inst.split,
        "item_id": inst.item_id, "instance_id": inst.instance_id, "condition": inst.condition,
        "target": inst.target, "choice": choice, "abstain_label": inst.abstain_label,
        "confidence": res.confidence if choice is not None else None,
        "confidence_method": res.confidence_method if choice is not None else None,
        "n_options": len(inst.option_labels), "k": inst.k, "anchor": inst.anchor, "task": inst.task,
        "subtask": inst.subtask, "category": inst.category, "n_inputs": inst.n_inputs,
        "selection_type": inst.selection_type, "answer_modality": inst.answer_modality,
        "option_logprobs": res.option_logprobs, "raw_text": res.raw_text,
        "error": res.error, "latency_s": latency, "engine": model.engine,
        # Every schema column, so each engine path (EngineStage, the ray.data.llm processor) writes one row shape.
        "mode": "mcq", "answer_text": None, "reference": None, "verdicts": None,
        "cascade": None, "intermediate_text": None, "stage_engines": None,
    }


# ---------------------------------------------------------------------------------------------------------------
# Run
# ---------------------------------------------------------------------------------------------------------------

class _DropMessages:
    """A logging filter dropping the records whose message starts with ``prefix``."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def filter(self, record) -> bool:
        return not record.getMessage().startswith(self.prefix)


def _drop_messages(logger: str, prefix: str) -> None:
    import logging

    target = logging.getLogger(logger)
    if not any(isinstance(f, _DropMessages) and f.prefix == prefix for f in target.filters):
        target.addFilter(_DropMessages(prefix))


def ensure_ray(config: RunConfig, address: str | None = None) -> None:
    """Connect to ``address`` (a cluster), or start the embedded local Ray. Logical CPUs default to
    max(8, cores): engine replicas, the media stage and decode tasks each hold a CPU slot, and on a 2-core machine
    the slots, not the cores, would otherwise deadlock the pipeline."""
    import logging

    import ray
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # after import: ray.data configures its loggers
    # Two warnings that read like failures on every run and say nothing the user must act on: progress bars are
    # ours (tqdm), and token authentication being on is the safe default.
    _drop_messages("ray.data._internal.progress", "Progress bars disabled")
    _drop_messages("ray._private.authentication.authentication_token_setup", "Token authentication is enabled")
    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    else:
        ray.init(num_cpus=config.ray.num_cpus or max(8, os.cpu_count() or 1), include_dashboard=False,
                 log_to_driver=False, logging_level=logging.WARNING)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.verbose_stats_logs = False


def run_evaluation(config: RunConfig, address: str | None = None, *, progress: bool = True,
                   overwrite: bool = False) -> RunResult:
    """Plan (every input and engine option checked), take the output's lease, check that the output holds rows of
    this config only (``overwrite``: clear the folders that do not), check that the actors fit the cluster, then
    evaluate; all of it before any model work."""
    import ray

    from omnieval.lease import OutputLease
    from omnieval.preflight import check_resources, claim_folders, folder_identities
    from omnieval.store import RunStore

    plan = make_plan(config)
    store = RunStore(config.output)
    store.check_writable()
    with OutputLease(store) as lease:
        store.lease = lease
        identities = claim_folders(store, folder_identities(config, plan), overwrite=overwrite)
        ensure_ray(config, address)
        check_resources(config, engine_models(config), ray.cluster_resources())
        return _evaluate(config, plan, store, identities, progress)


def _evaluate(config: RunConfig, plan: Plan, store, identities: dict[str, str], progress: bool) -> RunResult:
    import ray

    from omnieval.media.cache import MediaCache
    from omnieval.store import consolidate

    started = time.time()
    namespace = "omnieval"
    cache_name = f"media-cache-{uuid.uuid4().hex[:12]}"
    cache = MediaCache.options(name=cache_name, namespace=namespace).remote()
    n_rows = n_skipped = 0
    try:
        for model in config.models:
            done = store.finished_ids(model.name)
            instances, extras, failed = plan.instances, {}, []
            if model.describe is not None:
                from omnieval.cascade import cascade_instances, describe_media

                descriptions = describe_media(model, plan, config, store, cache_name, namespace, progress)
                instances, extras, failed = cascade_instances(model, plan.instances, descriptions)
            rows = []
            modes = modes_of(config, model)
            for inst in instances:
                for mode in modes:
                    paths = open_media_paths(inst) if mode == "open" else [s.path for s in inst.media_segments()]
                    for prompt in config.prompts:
                        if (mode, prompt, inst.instance_id) in done:
                            n_skipped += 1
                            continue
                        rows.append({"instance_json": inst.model_dump_json(), "prompt": prompt, "mode": mode,
                                     "media_paths": json.dumps(paths), "instance_id": inst.instance_id}
                                    | extras.get(inst.instance_id, {}))  # cascade columns (all rows or none)
            if failed:  # instances whose describer failed: errored predictions, no model call
                store.append_part(model.name, [
                    row for inst, message in failed for mode in modes for prompt in config.prompts
                    if (mode, prompt, inst.instance_id) not in done
                    for row in [_failed_row(inst, mode, prompt, message, model)]])
            if rows:
                n_rows += _run_model(model, rows, plan, config, store, cache_name, namespace, progress)
        decode_counts = ray.get(cache.decode_counts.remote())
    finally:
        ray.kill(cache)
    tables = [store.read_parts(m.name) for m in config.models]
    predictions = consolidate(tables)
    if "open" in config.modes:
        from omnieval.open_ended import attach_verdicts, run_judges

        run_judges(config, store, predictions, {i.instance_id: i for i in plan.instances}, progress)
        predictions = attach_verdicts(config, store, predictions)
    store.write_table("predictions.parquet", predictions)
    n_errors = sum(e is not None for e in predictions["error"].to_pylist())
    record = run_record(config, started, plan, predictions, n_errors, decode_counts) | {"identity": identities}
    store.write_json("run.json", record)
    return RunResult(output=config.output, predictions_path=store.path("predictions.parquet"),
                     n_instances=len(plan.instances), n_rows=n_rows, n_skipped=n_skipped, n_errors=n_errors,
                     decode_counts=decode_counts, accuracy_table=accuracy_by_condition(predictions),
                     n_predictions=predictions.num_rows, errors_by_kind=record["errors"]["by_kind"],
                     error_examples=record["errors"]["examples"], max_error_rate=config.max_error_rate)


def _failed_row(inst: Instance, mode: str, prompt: str, message: str, model: ModelConfig) -> dict:
    from omnieval.engines.base import EngineResult, GenerationResult
    from omnieval.open_ended import open_prediction_row

    if mode == "open":
        return open_prediction_row(inst, prompt, GenerationResult(None, error=message), model, None)
    return prediction_row(inst, prompt, EngineResult(choice=None, error=message), model, None)


def _run_model(model: ModelConfig, rows: list[dict], plan: Plan, config: RunConfig, store, cache_name: str,
               namespace: str, progress: bool) -> int:
    import ray
    from ray.data import ActorPoolStrategy
    from tqdm import tqdm

    n_blocks = max(1, min(len(rows) // 32, 64))
    ds = ray.data.from_items(rows, override_num_blocks=n_blocks)
    ds = ds.map_batches(MediaStage, fn_constructor_kwargs={"cache_name": cache_name, "namespace": namespace,
                                                            "specs": plan.media_specs},
                        compute=ActorPoolStrategy(size=1), batch_size=config.decode.batch_size, num_cpus=0.25)
    if uses_vllm_processor(model):
        from omnieval.engines.vllm_processor import vllm_processor_stage

        # a generate pass (its own engine pool) only if cot or open rows remain, a score pass only if mcq rows do
        styles = sorted({row["prompt"] for row in rows})
        modes = sorted({row["mode"] for row in rows})
        ds = vllm_processor_stage(ds, model, prompts=styles, modes=modes, cache_name=cache_name,
                                  namespace=namespace, specs=plan.media_specs)
    else:
        engine_kwargs = {"num_cpus": model.num_cpus}
        if model.num_gpus:
            engine_kwargs["num_gpus"] = model.num_gpus
        ds = ds.map_batches(EngineStage, fn_constructor_kwargs={"model": model.model_dump(), "cache_name": cache_name,
                                                                 "namespace": namespace, "specs": plan.media_specs},
                            compute=ActorPoolStrategy(size=model.replicas), batch_size=model.batch_size,
                            **engine_kwargs)
    buffer: list[pa.Table] = []
    buffered, written, last = 0, 0, time.monotonic()
    bar = tqdm(total=len(rows), desc=f"{model.name}", unit="inst", disable=not progress, file=sys.stderr)
    for block in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        buffer.append(block)
        buffered += block.num_rows
        bar.update(block.num_rows)
        if buffered >= FLUSH_ROWS or time.monotonic() - last > FLUSH_SECONDS:
            store.append_part(model.name, pa.concat_tables(buffer).to_pylist())
            written, buffer, buffered, last = written + buffered, [], 0, time.monotonic()
    if buffer:
        store.append_part(model.name, pa.concat_tables(buffer).to_pylist())
        written += buffered
    bar.close()
    return written


def accuracy_by_condition(predictions: pa.Table) -> str:
    """A small text table: accuracy of valid predictions per model x prompt x condition (columns). Option orders
    (contrastive ``perm:CAB`` ...) are pooled into one ``perm:*`` column: there can be dozens of them."""
    import polars as pl

    if predictions.num_rows == 0:
        return ""
    df = pl.from_arrow(predictions.select(["model", "prompt", "condition", "target", "choice"]))
    df = df.with_columns(pl.col("condition").str.replace(r"perm:[A-Z]+$", "perm:*"))
    valid = df.filter(pl.col("choice").is_not_null())
    if valid.is_empty():
        return "(no valid predictions)"
    acc = (valid.group_by(["model", "prompt", "condition"])
           .agg((pl.col("choice") == pl.col("target")).mean().round(3).alias("acc"))
           .pivot(on="condition", index=["model", "prompt"], values="acc", sort_columns=True)
           .sort(["model", "prompt"]))
    with pl.Config(tbl_rows=100, tbl_cols=20, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
        text = str(acc)
    if any(re.fullmatch(r"C[01]{3}", str(c)) for c in acc.columns):
        text += ("\nC<video><audio><text>: 1 = that modality shows another anchor (corrupted), 0 = clean; C000 is "
                 "the clean item, C111 every modality replaced")
    return text


def git_commit() -> str | None:
    """The code's commit: ``OMNIEVAL_GIT_COMMIT`` (set it where the code travels without ``.git``, e.g. a Ray job's
    working dir), else ``git rev-parse HEAD`` of the package's checkout with ``-dirty`` for uncommitted changes."""
    import subprocess

    if os.environ.get("OMNIEVAL_GIT_COMMIT"):
        return os.environ["OMNIEVAL_GIT_COMMIT"]
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def run_record(config: RunConfig, started: float, plan: Plan, predictions: pa.Table, n_errors: int,
               decode_counts: dict[str, int]) -> dict:
    import importlib.metadata as md

    def version(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    errors = [e for e in predictions["error"].to_pylist() if e] if predictions.num_rows else []
    from omnieval.schema import error_kind

    kinds: dict[str, int] = {}
    for e in errors:
        kinds[error_kind(e)] = kinds.get(error_kind(e), 0) + 1
    return {
        "config": config.model_dump(), "seed": config.seed, "started": started, "finished": time.time(),
        "git_commit": git_commit(),
        "errors": {"count": n_errors, "by_kind": kinds, "examples": errors[:5]},
        "versions": {p: version(p) for p in ("omnieval", "ray", "vllm", "transformers", "torch", "numba", "av")}
        | {"python": platform.python_version()},
        "counts": {"instances": len(plan.instances), "predictions": predictions.num_rows, "errors": n_errors,
                   "distinct_media": len(plan.media_specs), "decodes": sum(decode_counts.values())},
    }
