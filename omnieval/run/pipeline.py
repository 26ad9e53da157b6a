"""One evaluation run: the plan (``plan.py``) streamed through Ray Data, every model call through one seam.

The plan's items are expanded by Ray tasks into instance blocks kept in the object store (``expansion.py``); per
answering model, Ray tasks turn the blocks into request rows (instance x mode x prompt style still to do:
``answers.block_requests``), which go through

    ``stages.prefetch_media`` (in one task at a time with the request maps, fused by Ray Data: starts the decode of
       each distinct media file once, through the run's ``MediaCache``, ahead of the model stage)
      -> ``stages.ModelStage`` (an actor pool of the model's engine: ``replicas`` actors, each ``num_gpus`` /
         ``num_cpus``, batches of ``batch_size``; waits for the decodes of a batch, reads the arrays by key from the
         object store, never copied into the stream's rows; the prediction rows built in the same actor by
         ``answers.PredictionRows``)
      -> ``stages.drain``: atomic Parquet parts (the resume log), progress bar

so the driver holds neither instances, request rows nor predictions: its memory does not grow with the benchmark.
Then judges grade the open answers through the same stages (``open_ended.py``), and all parts are consolidated
into ``predictions.parquet`` sorted by (model, prompt, instance_id), in a Ray task where no judge needs them on the
driver. A model with a describer has its media described first, through the same stages again (``cascade.py``).

A run is three pieces: ``prepared_run`` (plan, lease, expansion, claimed folders, resource check: everything that
can fail before model work), ``_answer`` (request rows through one engine pool) and ``finish_run`` (consolidation,
judges, ``run.json``). ``run_evaluation`` composes them for one run; ``evaluate_runs`` prepares several runs of one
model (a sweep's protocol entries x prompt styles), answers all of them in one ``_answer`` pass (one model load;
each request row carries its run, and its rows are written to that run's parts) and finishes each on its own.
"""

from __future__ import annotations

import os
import platform
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from omnieval.config import ModelConfig, RunConfig, modes_of
from omnieval.run.decode_cache import PassCache, media_cache
from omnieval.run.plan import Plan, engine_models, expand_plan, make_plan, skipped_conditions
from omnieval.run.ray_start import ensure_ray
from omnieval.run.recipe import with_recipe_options
from omnieval.scoring.verdicts import SCORER_COLUMN

if TYPE_CHECKING:
    from ray.data import Dataset

    from omnieval.core.run_outputs import RunOutputs


@dataclass
class RunResult:
    output: str
    predictions_path: str
    n_instances: int
    n_rows: int
    n_skipped: int
    n_errors: int
    decode_counts: dict[str, int] = field(default_factory=dict)  # key -> real decodes (store hits not counted)
    store_hits: int = 0  # media read from the decoded-media store instead of decoded (``decode.store``)
    store_rejected: int = 0  # store entries found cut short or corrupt: never served, decoded again
    decode_kinds: dict[str, list[str]] = field(default_factory=dict)  # key -> what each decode task for it did
    accuracy_table: str = ""
    n_predictions: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    error_examples: list[str] = field(default_factory=list)
    max_error_rate: float = 0.0
    skipped: dict = field(default_factory=dict)  # media_policy.skipped_summary; "conditions": plan.skipped_conditions
    n_answers: int = 0  # rows that neither ended in an error nor were skipped: what the metrics measure

    @property
    def measured(self) -> bool:
        """At least one row is a model's answer (an invalid answer counts: it is measured as invalid). A run where
        every row errored or was skipped has nothing for ``metrics``, ``stats`` or ``report``."""
        return self.n_answers > 0

    @property
    def error_rate(self) -> float:
        return self.n_errors / self.n_predictions if self.n_predictions else 0.0

    @property
    def ok(self) -> bool:
        """False (the command exits non-zero) when more rows ended in an error than ``max_error_rate`` allows:
        an errored row is not the model's answer, and a run whose rows errored has not measured the model; and
        always when no row is an answer (``measured``), whatever ``max_error_rate`` allows."""
        return self.measured and self.error_rate <= self.max_error_rate

    def summary(self) -> str:
        from omnieval.run.media_policy import skipped_lines
        from omnieval.run.plan import condition_lines

        lines = [f"predictions: {self.predictions_path}",
                 f"instances: {self.n_instances}  rows scored now: {self.n_rows}  resumed (skipped): "
                 f"{self.n_skipped}  errors: {self.n_errors}  distinct media decoded: {len(self.decode_counts)}"
                 + (f"  read from the decoded-media store: {self.store_hits}" if self.store_hits else "")
                 + (f"  store entries rejected: {self.store_rejected}" if self.store_rejected else ""),
                 *skipped_lines(self.skipped, self.n_predictions),
                 *condition_lines(self.skipped.get("conditions", {}))]
        if self.n_errors:
            kinds = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors_by_kind.items()))
            lines += [f"{self.n_errors} of {self.n_predictions} rows ended in an error ({100 * self.error_rate:.1f}%; "
                      f"{kinds}); they are not answers and are left out of every metric. First ones:",
                      *(f"  {e[:300]}" for e in self.error_examples[:5])]
            if self.error_rate > self.max_error_rate:
                lines.append(f"FAILED: error share {self.error_rate:.3f} is above max_error_rate "
                             f"{self.max_error_rate:g}; fix the cause and rerun (finished rows are kept, errored "
                             "ones are retried), or allow a share with max_error_rate in the config")
            if not self.measured:
                skipped = self.skipped.get("count", 0)
                lines.append(f"FAILED: nothing was measured: none of the {self.n_predictions} rows is an answer "
                             f"({self.n_errors} ended in an error" + (f", {skipped} skipped" if skipped else "")
                             + "), so there are no metrics to compute; fix the cause of the errors and rerun "
                             "(errored rows are retried)")
        if self.accuracy_table:
            lines += ["", "accuracy by condition (valid predictions):", self.accuracy_table]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Run
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class PreparedRun:
    """A run ready for model work (``prepared_run``): planned, its output's lease held, its folders claimed."""

    config: RunConfig
    plan: Plan
    store: RunOutputs
    identities: dict[str, str]


@dataclass
class _Answered:
    """What answering did for one run: rows answered now, rows skipped (finished before)."""

    n_rows: int = 0
    n_skipped: int = 0


RUN_COLUMN = "run"
"""The request and prediction column saying which run a row belongs to (its index in ``_answer``'s runs)."""


@contextmanager
def prepared_run(config: RunConfig, address: str | None = None, *,
                 overwrite: bool = False) -> Iterator[PreparedRun]:
    """Plan (every input and engine option checked), take the output's lease (held until the block ends), check that
    the output holds rows of this config only (``overwrite``: clear the folders that do not), check that the actors
    fit the cluster; all of it before any model work."""
    import ray

    from omnieval.core.run_outputs import RunOutputs
    from omnieval.run.lease import OutputLease
    from omnieval.run.preflight import check_resources, claim_folders, folder_identities

    plan = make_plan(config, expand=False)
    store = RunOutputs(config.output)
    store.check_writable()
    check_media_store(config)
    with OutputLease(store) as lease:
        store.lease = lease
        ensure_ray(config, address)
        expand_plan(plan)  # Ray tasks: the instances stay in the object store, never on the driver
        identities = claim_folders(store, folder_identities(config, plan), overwrite=overwrite)
        check_resources(config, engine_models(config), ray.cluster_resources())
        yield PreparedRun(config, plan, store, identities)


def check_media_store(config: RunConfig) -> None:
    """A ``decode.store`` URI that pyarrow cannot open (an unknown scheme or query option, no network) or a local
    store that cannot be written (a regular file, a read-only filesystem) fails here, naming the field, before any
    model work (a decode task that cannot use it would decode without it, and store nothing, without a word)."""
    check_decode_store(config.decode.store)


def check_decode_store(uri: str | None) -> None:
    """``check_media_store`` for the store at ``uri`` (a run's, or the one a sweep gives its runs)."""
    from omnieval.core.storage import filesystem
    from omnieval.media.decoded_store import DecodedStore

    if uri and "://" in uri:
        filesystem(uri, field="decode.store")
    elif uri:
        DecodedStore(uri).check_writable()


def run_evaluation(config: RunConfig, address: str | None = None, *, progress: bool = True,
                   overwrite: bool = False) -> RunResult:
    """One run: prepared (``prepared_run``), each answering model through its engine pool, then finished
    (``finish_run``: consolidation, judges, ``run.json``)."""
    with prepared_run(config, address, overwrite=overwrite) as run:
        started = time.time()
        answered = _Answered()
        with media_cache(config.decode.store) as cache:
            for model in config.models:  # each engine built with the options its recipe adds (a system prompt)
                (one,) = _answer(with_recipe_options(config, model), [run], cache, progress)
                answered.n_rows += one.n_rows
                answered.n_skipped += one.n_skipped
            kinds = cache.decode_kinds()
        return finish_run(run, started, answered, kinds, progress)


def evaluate_runs(configs: list[RunConfig], address: str | None = None, *, progress: bool = True,
                  overwrite: bool = False) -> list[RunResult | Exception]:
    """Several runs of one answering model (a sweep's runs of one model: its protocol entries x prompt styles) with
    one model load. Each run is prepared as alone (plan, lease, claimed folders, resume from its parts); the request
    rows of all of them, each tagged with its run, go through one request task and one engine pool; each finished
    block's rows are written to their own run's parts; then each run is finished as alone (consolidation, judges,
    ``run.json``). So every run's predictions are those ``run_evaluation`` writes for it (but ``latency_s``), and a
    run resumes, and is complete or not, on its own.

    Returns per config its ``RunResult``, or the exception that stopped it: a run that fails to prepare or to
    finish fails alone, the others go on; a failure of the shared pass fails every run in it (rows already written
    are kept, so a retry resumes). Only the answering model is shared: a describer (cascade) describes each run's
    media in its own pool before the shared pass, and judges grade each run's open answers in its own pool."""
    model = configs[0].models[0] if configs and configs[0].models else None
    for config in configs:
        if len(config.models) != 1 or config.models[0] != model:
            raise ValueError("evaluate_runs takes runs of one and the same answering model")
    if model is not None:  # the engine is built with the options its recipe adds (a system prompt)
        built = [with_recipe_options(config, model) for config in configs]
        if any(other != built[0] for other in built):
            raise ValueError(f"model {model.name}: its recipe's engine options differ between the runs sharing it")
        model = built[0]
    results: list[RunResult | Exception | None] = [None] * len(configs)
    with ExitStack() as stack:
        ready: list[tuple[int, PreparedRun]] = []
        for i, config in enumerate(configs):
            try:
                ready.append((i, stack.enter_context(prepared_run(config, address, overwrite=overwrite))))
            except Exception as exc:
                results[i] = exc
        if not ready:
            return results
        started = time.time()
        runs = [run for _, run in ready]
        try:
            with media_cache(shared_store(configs)) as cache:
                answered = _answer(model, runs, cache, progress)
                kinds = cache.decode_kinds()
        except Exception as exc:
            for i, _ in ready:
                results[i] = exc
            return results
        for (i, run), one in zip(ready, answered, strict=True):
            keys = {spec.key for spec in run.plan.media_specs.values()}
            keys |= {spec.key for spec in run.plan.specs_for(model.name).values()}
            try:
                results[i] = finish_run(run, started, one, {k: v for k, v in kinds.items() if k in keys}, progress)
            except Exception as exc:
                results[i] = exc
    return results


@dataclass
class _RunShare:
    """One run's share of an answering pass (``_answer``): its request rows still to do, and what the pass did."""

    run: PreparedRun
    index: int  # the run's ``RUN_COLUMN`` value and media scope
    planned: int  # the run's rows for this model: instances x modes x prompt styles
    requests: Dataset | None = None  # the request rows; None: nothing to ask the model
    n_requests: int = 0
    warm: list = field(default_factory=list)  # media to start decoding ahead, in the order the blocks need them
    n_failed: int = 0  # errored rows written without a model call (their describer failed)
    n_rows: int = 0  # rows the model answered, written to the run's parts

    @property
    def tags(self) -> dict:
        return {RUN_COLUMN: self.index, "media_scope": str(self.index), SCORER_COLUMN: self.run.plan.scorer or ""}

    def answered(self) -> _Answered:
        return _Answered(n_rows=self.n_rows, n_skipped=max(0, self.planned - self.n_rows - self.n_failed))


def _answer(model: ModelConfig, runs: list[PreparedRun], cache: PassCache, progress: bool) -> list[_Answered]:
    """One answering model over one or more runs, with one engine pool: per run its describer first if it has one,
    then the request rows still to do of every run (tagged with the run, media looked up under the run's scope:
    ``stages.media_key``) through one ``through_model`` pipeline; each block's rows are written to their own run's
    parts. Returns per run the rows answered now and skipped.

    A run's request rows are made from its instance blocks by Ray tasks (``answers.block_requests``), so the driver
    holds neither instances nor request rows; only a model with a describer has its instances on the driver (they
    are rewritten with the descriptions)."""
    shares = [_requests_of(model, index, run, cache, progress) for index, run in enumerate(runs)]
    _through_engine(model, shares, cache, progress)
    return [share.answered() for share in shares]


def _requests_of(model: ModelConfig, index: int, run: PreparedRun, cache: PassCache, progress: bool) -> _RunShare:
    """The request rows of one run still to do for ``model`` (those finished before are skipped): described first
    where the model has a describer, else made from the instance blocks by Ray tasks."""
    from omnieval.run.media_policy import answering_model, media_policy

    modes = modes_of(run.config, model)
    share = _RunShare(run, index, planned=run.plan.n_instances * len(modes) * len(run.config.prompts)
                      * model.samples)
    done = run.store.finished_ids(model.name)
    policy = media_policy(model, run.plan.expanded.media)
    answering = answering_model(model, run.plan.expanded.media)  # describe: the describer takes what it cannot
    if answering.describe is not None:
        _described_requests(share, model, answering, modes, done, policy, cache, progress)
    elif len(done) < share.planned:  # a run whose rows are all done (same identity) starts no engine pool
        _block_requests(share, model, modes, done, policy)
    return share


def _described_requests(share: _RunShare, model: ModelConfig, answering: ModelConfig, modes: list[str],
                        done: set, policy, cache: PassCache, progress: bool) -> None:
    """A model with a describer: the run's instances on the driver, rewritten with the descriptions of their media;
    an instance whose describer failed becomes errored rows at once, without a model call."""
    import ray.data

    from omnieval.run.answers import answer_requests, failed_predictions, request_table, sample_draws
    from omnieval.run.cascade import cascade_instances, describe_media

    config, plan, store = share.run.config, share.run.plan, share.run.store
    instances = plan.load_instances()
    descriptions = describe_media(answering, instances, config, store, cache.source(plan.media_specs), progress)
    instances, cascade, failed = cascade_instances(answering, instances, descriptions)
    if failed:
        table = failed_predictions(failed, model.name, model.engine, modes, config.prompts, done,
                                   sample_draws(model, config.seed))
        store.append_part(model.name, table)
        share.n_failed = table.num_rows
    rows = list(answer_requests(instances, modes, config.prompts, done, cascade, policy,
                                sample_draws(model, config.seed)))
    if rows:
        size = plan.source.max_block
        share.requests = ray.data.from_arrow([request_table(rows[i:i + size], share.tags)
                                              for i in range(0, len(rows), size)])
        share.n_requests = len(rows)


def _block_requests(share: _RunShare, model: ModelConfig, modes: list[str], done: set, policy) -> None:
    """Request rows made from the run's instance blocks by Ray tasks (``answers.block_requests``); the media the
    model takes are decoded ahead."""
    import ray

    from omnieval.run.answers import block_requests, sample_draws
    from omnieval.run.expansion import instance_dataset
    from omnieval.run.stages import REQUEST_CPUS, request_tasks

    config, plan = share.run.config, share.run.plan
    share.requests = instance_dataset(plan.expanded).map_batches(
        block_requests, fn_kwargs={"modes": modes, "prompts": list(config.prompts), "tags": share.tags,
                                   "done": ray.put(list(done)) if done else None, "policy": policy,
                                   "draws": sample_draws(model, config.seed)},
        batch_size=None, batch_format="pyarrow", num_cpus=REQUEST_CPUS, compute=request_tasks())
    share.n_requests = max(0, share.planned - len(done))
    share.warm = [spec for path, spec in plan.specs_for(model.name).items() if path not in policy.unsupported]


def _through_engine(model: ModelConfig, shares: list[_RunShare], cache: PassCache, progress: bool) -> None:
    """Every run's request rows through one engine pool (``stages.through_model``); each finished block's rows are
    written to their own run's parts (``RUN_COLUMN`` says which)."""
    import pyarrow.compute as pc

    from omnieval.run.answers import PredictionRows
    from omnieval.run.stages import RowBuilder, drain, media_key, through_model

    todo = [share for share in shares if share.requests is not None]
    if not todo:
        return
    specs = {media_key(str(share.index), path): spec for share in shares
             for path, spec in share.run.plan.specs_for(model.name).items()}

    def write(table: pa.Table) -> None:
        for index in sorted(set(table[RUN_COLUMN].to_pylist())):
            part = table.filter(pc.equal(table[RUN_COLUMN], index)).drop_columns([RUN_COLUMN])
            shares[index].run.store.append_part(model.name, part)
            shares[index].n_rows += part.num_rows

    builder = RowBuilder(PredictionRows, {"model": model.name, "engine": model.engine, "carry": (RUN_COLUMN,)})
    requests = todo[0].requests.union(*[share.requests for share in todo[1:]]) if len(todo) > 1 \
        else todo[0].requests
    answers = through_model(requests, model, cache.source(specs), rows=builder)
    cache.warm_start([spec for share in shares for spec in share.warm])
    drain(answers, sum(share.n_requests for share in todo), model.name, write, progress)


def shared_store(configs: list[RunConfig]) -> str | None:
    """The decoded-media store of a pass over several runs: theirs where they name the same one (a sweep's runs do),
    else none (each run's media are decoded as without a store)."""
    stores = {config.decode.store for config in configs}
    return stores.pop() if len(stores) == 1 else None


def decode_tally(kinds: dict[str, list[str]]) -> tuple[dict[str, int], int, int]:
    """From what each decode task of a run's media did (``MediaCache.decode_kinds``): real decodes per key (keys
    only read from the store left out), store hits, store entries rejected (each also a decode)."""
    decodes = {key: n for key, done in kinds.items() if (n := sum(kind != "hit" for kind in done))}
    hits = sum(kind == "hit" for done in kinds.values() for kind in done)
    rejected = sum(kind == "rejected" for done in kinds.values() for kind in done)
    return decodes, hits, rejected


def finish_run(run: PreparedRun, started: float, answered: _Answered, kinds: dict[str, list[str]],
               progress: bool) -> RunResult:
    """A run whose answers are all written: its parts consolidated, open answers judged, ``predictions.parquet`` and
    ``run.json`` written; the run's result.

    Without open answers the consolidation runs in a Ray task (``_consolidate_task``) that writes
    ``predictions.parquet`` and returns only the summary, so the driver never holds the predictions; judges need
    them (and the instances) on the driver."""
    config, plan, store = run.config, run.plan, run.store
    models = [m.name for m in config.models]
    if "open" in config.modes:
        from omnieval.run.open_ended import attach_verdicts, run_judges

        predictions = _consolidated_parts(store, models)
        run_judges(config, store, predictions, {i.instance_id: i for i in plan.load_instances()}, progress)
        summary = _write_predictions(store, attach_verdicts(config, store, predictions))
    else:
        summary = _consolidated(store, models)
    conditions = skipped_conditions(plan)  # items with no instance of a condition: not rows, so counted here
    if conditions:
        summary["skipped"] = summary["skipped"] | {"conditions": conditions}
    decode_counts, hits, rejected = decode_tally(kinds)
    record = run_record(config, started, plan, summary, decode_counts, hits, rejected) | {"identity": run.identities}
    store.write_json("run.json", record)
    return RunResult(output=config.output, predictions_path=store.path("predictions.parquet"),
                     n_instances=plan.n_instances, n_rows=answered.n_rows, n_skipped=answered.n_skipped,
                     n_errors=summary["n_errors"], decode_counts=decode_counts, store_hits=hits,
                     store_rejected=rejected, decode_kinds=kinds,
                     accuracy_table=summary["accuracy_table"], n_predictions=summary["n_predictions"],
                     errors_by_kind=record["errors"]["by_kind"], error_examples=record["errors"]["examples"],
                     max_error_rate=config.max_error_rate, skipped=summary["skipped"],
                     n_answers=summary["n_answers"])


def summarise(predictions: pa.Table) -> dict:
    """What a run reports of its predictions (consolidated: every column of the schema): counts, errors by kind
    (the ``error_kind`` column) with the first messages, the accuracy table."""
    from omnieval.run.media_policy import skipped_summary

    column = predictions["error"].to_pylist() if predictions.num_rows else []
    errors = [e for e in column if e]
    kinds: dict[str, int] = {}
    for kind in predictions["error_kind"].drop_null().to_pylist():
        kinds[kind] = kinds.get(kind, 0) + 1
    skipped = predictions["skipped"].to_pylist() if "skipped" in predictions.column_names else [None] * len(column)
    return {"n_predictions": predictions.num_rows, "n_errors": sum(e is not None for e in column),
            "n_answers": sum(e is None and not s for e, s in zip(column, skipped, strict=True)),
            "errors_by_kind": kinds,
            "error_examples": errors[:5], "accuracy_table": accuracy_by_condition(predictions),
            "skipped": skipped_summary(predictions)}


def _consolidated_parts(store: RunOutputs, models: list[str]) -> pa.Table:
    """Every answering model's parts as one table, one row per (model, prompt, instance, mode) (``consolidate``)."""
    from omnieval.core.run_outputs import consolidate

    return consolidate([store.read_parts(name) for name in models])


def _write_predictions(store: RunOutputs, predictions: pa.Table) -> dict:
    """``predictions.parquet`` written; its summary (``summarise``)."""
    store.write_table("predictions.parquet", predictions)
    return summarise(predictions)


def _consolidate_and_summarise(output: str, models: list[str]) -> dict:
    """The parts consolidated into ``predictions.parquet``, by the Ray task of ``_consolidated``."""
    from omnieval.core.run_outputs import RunOutputs

    store = RunOutputs(output)
    return _write_predictions(store, _consolidated_parts(store, models))


_CONSOLIDATE = None


def _consolidated(store: RunOutputs, models: list[str]) -> dict:
    """``_consolidate_and_summarise`` in a Ray task on this node (the output may be a local folder), the lease checked
    first; in this process where Ray is not up or the output is an object store (a worker may lack its
    credentials)."""
    import ray

    if not ray.is_initialized() or "://" in store.uri:
        return _write_predictions(store, _consolidated_parts(store, models))
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if store.lease is not None:
        store.lease.check()
    global _CONSOLIDATE
    if _CONSOLIDATE is None:  # made once per process: a remote function is exported to the cluster when made
        _CONSOLIDATE = ray.remote(num_cpus=0, max_retries=2)(_consolidate_and_summarise)
    task = _CONSOLIDATE.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False))
    try:
        return ray.get(task.remote(store.uri, models))
    except ray.exceptions.RayTaskError as exc:  # the task's own error, as if raised here (an unwritable output...)
        if isinstance(exc.cause, Exception):
            raise exc.cause from None
        raise


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


def git_commit(root: Path | None = None) -> str | None:
    """The code's commit: ``OMNIEVAL_GIT_COMMIT`` (set it where the code travels without ``.git``, e.g. a Ray job's
    working dir), else ``git rev-parse HEAD`` of the package's checkout (``root``) with ``-dirty`` for uncommitted
    changes. Read only: ``git status`` would otherwise refresh the checkout's index under ``.git/index.lock``, and
    a ``git commit`` the user starts meanwhile would fail on that lock."""
    import subprocess

    if os.environ.get("OMNIEVAL_GIT_COMMIT"):
        return os.environ["OMNIEVAL_GIT_COMMIT"]
    root = root or Path(__file__).resolve().parents[1]
    git = ["git", "--no-optional-locks"]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def generation_record(config: RunConfig) -> dict:
    """The sampling settings each model generated with, per prompt style (``thinking.generation_settings``: the
    model folder's ``generation_config.json`` for ``thinking``, greedy otherwise), as run.json records them."""
    from omnieval.engines.thinking import generation_settings

    return {m.name: {style: generation_settings(m.options.get("path"), style) for style in config.prompts}
            for m in config.models}


def run_record(config: RunConfig, started: float, plan: Plan, summary: dict, decode_counts: dict[str, int],
               store_hits: int = 0, store_rejected: int = 0) -> dict:
    import importlib.metadata as md

    def version(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    n_errors = summary["n_errors"]
    return {
        "config": config.model_dump(), "seed": config.seed, "started": started, "finished": time.time(),
        "git_commit": git_commit(),
        "errors": {"count": n_errors, "by_kind": summary["errors_by_kind"], "examples": summary["error_examples"]},
        "skipped": summary["skipped"], "scorer": plan.scorer,
        "recipes": {name: resolved.record() for name, resolved in plan.decodes.items()},
        "generation": generation_record(config),
        "versions": {p: version(p) for p in ("omnieval", "ray", "vllm", "transformers", "torch", "numba", "av")}
        | {"python": platform.python_version()},
        "counts": {"instances": plan.n_instances, "predictions": summary["n_predictions"], "errors": n_errors,
                   "distinct_media": len(plan.media_specs), "decodes": sum(decode_counts.values()),
                   "decoded_store_hits": store_hits, "decoded_store_rejected": store_rejected},
    }
