"""One evaluation run: the plan (``plan.py``) streamed through Ray Data, every model call through one seam.

Per answering model, the request rows (instance x mode x prompt style still to do) go through

    ``stages.MediaStage`` (each distinct media file decoded once, through the run's ``MediaCache``)
      -> ``stages.ModelStage`` (an actor pool of the model's engine: ``replicas`` actors, each ``num_gpus`` /
         ``num_cpus``, batches of ``batch_size``; decoded arrays are read by key from the object store, never copied
         into the stream's rows)
      -> ``answers.PredictionRows`` (result columns -> prediction rows)
      -> ``stages.drain``: atomic Parquet parts (the resume log), progress bar

then judges grade the open answers through the same stages (``open_ended.py``), and all parts are consolidated
into ``predictions.parquet`` sorted by (model, prompt, instance_id). A model with a describer has its media
described first, through the same stages again (``cascade.py``).
"""

from __future__ import annotations

import os
import platform
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from omnieval.config import ModelConfig, RunConfig, modes_of
from omnieval.plan import Plan, engine_models, make_plan
from omnieval.stages import MediaSource


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
    cache_name = f"media-cache-{uuid.uuid4().hex[:12]}"
    cache = MediaCache.options(name=cache_name, namespace="omnieval").remote()
    media = MediaSource(cache_name, "omnieval", plan.media_specs)
    n_rows = n_skipped = 0
    try:
        for model in config.models:
            n_rows, n_skipped = _answer(model, config, plan, store, media, progress, n_rows, n_skipped)
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


def _answer(model: ModelConfig, config: RunConfig, plan: Plan, store, media: MediaSource, progress: bool,
            n_rows: int, n_skipped: int) -> tuple[int, int]:
    """One answering model: its describer first if it has one, then every request still to do through its engine
    pool; returns the running counts of rows answered now and skipped (finished before)."""
    from omnieval.answers import PredictionRows, answer_requests, failed_predictions
    from omnieval.stages import drain, from_rows, through_model

    done = store.finished_ids(model.name)
    instances, cascade, failed = plan.instances, {}, []
    if model.describe is not None:
        from omnieval.cascade import cascade_instances, describe_media

        descriptions = describe_media(model, plan, config, store, media, progress)
        instances, cascade, failed = cascade_instances(model, plan.instances, descriptions)
    modes = modes_of(config, model)
    rows = list(answer_requests(instances, modes, config.prompts, done, cascade))
    n_skipped += sum((mode, prompt, inst.instance_id) in done
                     for inst in instances for mode in modes for prompt in config.prompts)
    if failed:  # instances whose describer failed: errored predictions, no model call
        store.append_part(model.name, failed_predictions(failed, model.name, model.engine, modes, config.prompts,
                                                         done).to_pylist())
    if rows:
        ds = through_model(from_rows(rows), model, media, decode_batch_size=config.decode.batch_size)
        ds = ds.map_batches(PredictionRows, fn_constructor_kwargs={"model": model.name, "engine": model.engine},
                            batch_size=None, batch_format="numpy", num_cpus=0.25)
        n_rows += drain(ds, len(rows), model.name, lambda table: store.append_part(model.name, table.to_pylist()),
                        progress)
    return n_rows, n_skipped


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
