"""The sweep runner: checks the whole sweep, skips complete runs, runs the rest model by model (scheduling, retries
and logging: ``omnieval.sweep``'s docstring), and writes ``summary.json``, the combined ``metrics.parquet`` and each
benchmark's pooled result (``state.write_combined``)."""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, replace

from omnieval.core.schema import InputError
from omnieval.sweep.config import SweepConfig
from omnieval.sweep.expand import (
    BenchmarkPlan,
    RunSpec,
    check_sweep_engines,
    expand_runs,
    fingerprint,
    join_uri,
    plan_benchmarks,
    sweep_decode,
)
from omnieval.sweep.schedule import Demand, model_demand, next_to_start, start_order
from omnieval.sweep.state import (
    MARKER,
    completeness,
    has_files,
    num_rows,
    read_json,
    resolved_units,
    run_verdicts,
    write_combined,
    write_metrics,
)
from omnieval.sweep.status import RunOutcome, RunProgress, SweepResult, log_line


def _free_gpus() -> float:
    import ray

    return float(ray.available_resources().get("GPU", 0.0))


def _total_gpus() -> float:
    import ray

    return float(ray.cluster_resources().get("GPU", 0.0))


def _cluster_free() -> Demand:
    import ray

    free = ray.available_resources()
    return Demand(gpus=float(free.get("GPU", 0.0)), cpus=float(free.get("CPU", 0.0)))


def _cluster_total() -> Demand:
    import ray

    total = ray.cluster_resources()
    return Demand(gpus=float(total.get("GPU", 0.0)), cpus=float(total.get("CPU", 0.0)))


def _wait_for_release(baseline: float, timeout: float, model: str, log: Callable[[str], None]) -> None:
    """Wait until the free GPUs are back to ``baseline`` (free before the model started), or to all the GPUs the
    cluster still has if it lost nodes meanwhile: the model's actor pools are gone."""
    deadline = time.monotonic() + timeout
    while _free_gpus() + 1e-6 < min(baseline, _total_gpus()):
        if time.monotonic() > deadline:
            log(f"{model}: {min(baseline, _total_gpus()) - _free_gpus():g} GPUs still taken after {timeout:g} s "
                "(another job?); going on")
            return
        time.sleep(0.5)
    log(f"{model}: GPUs released ({_free_gpus():g} of {_total_gpus():g} free)")


class SweepRunner:
    """Runs a validated sweep; ``evaluate_runs`` (all of one model's runs, one model load) and ``ensure_ray`` are
    attributes so that callers (and tests) can observe or wrap the model work."""

    def __init__(self, sweep: SweepConfig, address: str | None = None, *, log: Callable[[str], None] = log_line):
        from omnieval.run import pipeline

        self.sweep, self.address, self.log = sweep, address, log
        self.evaluate_runs = pipeline.evaluate_runs
        self.ensure_ray = pipeline.ensure_ray
        self.started = time.time()
        self._writing = threading.Lock()  # models side by side: one summary write at a time
        self.model_spans: dict[str, tuple[float, float]] = {}  # model -> (start, end) of its passes, monotonic

    # -- the sweep ---------------------------------------------------------------------------------------------
    def run(self) -> SweepResult:
        """Check the whole sweep, take the output's lease (one sweep per output), run what is incomplete."""
        from omnieval.core.run_outputs import RunOutputs
        from omnieval.run.lease import OutputLease
        from omnieval.run.pipeline import check_decode_store

        plans = plan_benchmarks(self.sweep)
        check_sweep_engines(self.sweep)
        root = RunOutputs(self.sweep.output)
        root.check_writable()
        check_decode_store(sweep_decode(self.sweep).store)
        with OutputLease(root) as lease:
            root.lease = lease
            return self._run(plans, root)

    def _run(self, plans: dict[str, BenchmarkPlan], root) -> SweepResult:
        from omnieval.core.run_outputs import RunOutputs

        sweep = self.sweep
        t0 = time.monotonic()
        specs = expand_runs(sweep)
        result = SweepResult(output=sweep.output, summary_path=str(root.location("summary.json")),
                             max_error_rate=sweep.max_error_rate)
        todo = []
        for spec in specs:
            plan = plans[spec.entry.label]
            outcome = RunOutcome(key=spec.key, model=spec.model.name, protocol=spec.entry.protocol,
                                 benchmark=spec.entry.label, prompt=spec.prompt, output=spec.uri,
                                 fingerprint=fingerprint(spec.config, plan), expected=plan.n_instances)
            done, outcome.reason = completeness(RunOutputs(spec.uri), outcome.fingerprint, plan.n_instances,
                                                metrics=self._metrics_settings(), retry_errors=sweep.retry_errors)
            if done:
                outcome.status = "skipped"
                outcome.predictions = plan.n_instances
                record = read_json(RunOutputs(spec.uri), "run.json") or {}
                outcome.skipped_rows = int((record.get("skipped") or {}).get("count", 0))
                outcome.skipped_conditions = (record.get("skipped") or {}).get("conditions", {})
            else:
                todo.append(spec.index)
            result.runs.append(outcome)
        self.log(f"sweep {sweep.name!r}: {len(specs)} runs ({len(sweep.models)} models x {len(sweep.protocols)} "
                 f"protocols x {len(sweep.prompts)} prompts), {len(specs) - len(todo)} complete, {len(todo)} to run; "
                 f"checked in {time.monotonic() - t0:.1f} s; output {sweep.output}")
        if todo:
            self.ensure_ray(specs[todo[0]].config, self.address)
        by_model = {m.name: [s for s in specs if s.model.name == m.name and s.index in todo] for m in sweep.models}
        by_model = {name: mine for name, mine in by_model.items() if mine}
        if sweep.max_concurrent_models == 1:
            self._one_at_a_time(by_model, result, root, len(specs))
        elif by_model:  # nothing to run: Ray was never started, so there are no free resources to read
            self._side_by_side(by_model, result, root, len(specs))
        self._write_summary(root, result, final=True)
        self.log(f"sweep {sweep.name!r} finished in {time.monotonic() - t0:.1f} s: "
                 + ("all runs complete" if result.ok else
                    f"{sum(r.status == 'failed' for r in result.runs)} runs failed"))
        return result

    def _one_at_a_time(self, by_model: dict[str, list[RunSpec]], result: SweepResult, root, n_runs: int) -> None:
        """The sequential schedule: models in the sweep's order, each after the last one's GPUs are free again."""
        for name, mine in by_model.items():
            baseline = _free_gpus()
            self._timed_model(name, self._sized(mine, baseline), result, root, n_runs)
            if mine[0].model.as_model_config().num_gpus > 0:
                _wait_for_release(baseline, self.sweep.release_timeout_s, name, self.log)

    def _side_by_side(self, by_model: dict[str, list[RunSpec]], result: SweepResult, root, n_runs: int) -> None:
        """Up to ``max_concurrent_models`` models at once, each in its own thread (its passes are Ray work; the
        thread waits on them; the main thread keeps the books and takes the signals), largest first: a model starts
        when its demand fits what the cluster had free when the sweep started (at most what it has now, nodes may
        have left) less what the running models hold, and the next is tried as soon as one finishes."""
        limit = self.sweep.max_concurrent_models
        demands = {}
        for name, mine in by_model.items():
            demands[name] = model_demand(mine[0].model.as_model_config())
        waiting = start_order(list(by_model), demands, limit)
        baseline = _cluster_free()
        running: set[str] = set()  # models whose pass holds its replicas (in the books)
        threads: set[str] = set()  # models whose thread has not ended (a pass, or metrics after it)
        events: queue.Queue = queue.Queue()
        while waiting or threads:
            while True:
                total = _cluster_total()
                held = sum((demands[n] for n in running), Demand())
                free = Demand(min(baseline.gpus, total.gpus), min(baseline.cpus, total.cpus)) - held
                name = next_to_start(waiting, demands, free, len(running), limit)
                if name is None:
                    break
                waiting.remove(name)
                by_model[name] = self._sized(by_model[name], free.gpus)
                demands[name] = model_demand(by_model[name][0].config.models[0])
                self.log(f"{name}: starting beside {len(running)} running models ({demands[name].gpus:g} GPUs, "
                         f"{demands[name].cpus:g} CPUs of {free.gpus:g} GPUs, {free.cpus:g} CPUs free)")
                running.add(name)
                threads.add(name)
                threading.Thread(target=self._model_thread, args=(name, by_model[name], result, root, n_runs,
                                                                   events),
                                 name=f"sweep-model-{name}", daemon=True).start()
            while True:  # a timeout, so that Ctrl-C and SIGTERM reach this (main) thread at once
                try:
                    event, name, error = events.get(timeout=1.0)
                    break
                except queue.Empty:
                    continue
            running.discard(name)  # its pass ended (its pool is torn down): its replicas leave the books
            if event == "ended":
                threads.discard(name)
            if error is not None:  # a failure of the runner itself (not of a run) stops the sweep
                raise error

    def _model_thread(self, name: str, specs: list[RunSpec], result: SweepResult, root, n_runs: int,
                      events: queue.Queue) -> None:
        """One model's runs in a daemon thread (a stopped sweep does not wait for it). Tells ``events`` when its
        first pass has ended (``released``: the next model may take its GPUs while this one computes its metrics;
        a retry pass of a failed run then runs outside the books, and Ray queues its replicas) and when the thread
        ends (``ended``, with the runner's own failure if any)."""
        try:
            self._timed_model(name, specs, result, root, n_runs,
                              on_pass_end=lambda: events.put(("released", name, None)))
            events.put(("ended", name, None))
        except BaseException as exc:
            events.put(("ended", name, exc))

    def _sized(self, specs: list[RunSpec], free_gpus: float) -> list[RunSpec]:
        """A ``replicas: auto`` model's runs with the replicas the free GPUs allow now (recorded in each run's
        ``run.json`` config); other models' runs as they are. Replicas are a scaling field: the fingerprint and the
        predictions do not depend on them."""
        model = specs[0].model
        if model.replicas != "auto":
            return specs
        n = model.auto_replicas(free_gpus)
        self.log(f"{model.name}: replicas auto: {n} ({free_gpus:g} GPUs free, {model.gpus_per_replica():g} a "
                 f"replica{'' if model.max_replicas is None else f', at most {model.max_replicas}'})")
        return [replace(s, config=s.config.model_copy(update={"models": [model.as_model_config(n)]}))
                for s in specs]

    def _timed_model(self, name: str, specs: list[RunSpec], result: SweepResult, root, n_runs: int,
                     on_pass_end: Callable[[], None] | None = None) -> None:
        start = time.monotonic()
        try:
            self._run_model(specs, result, root, n_runs, on_pass_end)
        finally:
            self.model_spans[name] = (start, time.monotonic())

    # -- one model's runs --------------------------------------------------------------------------------------
    def _run_model(self, specs: list[RunSpec], result: SweepResult, root, n_runs: int,
                   on_pass_end: Callable[[], None] | None = None) -> None:
        """All of one model's incomplete runs in one pass (``pipeline.evaluate_runs``: one engine pool, one model
        load); each run keeps its own folder, resume, marker, metrics and outcome. A run that failed is tried again
        (``max_attempts``) together with the model's other failed runs, resuming from what was written."""
        from omnieval.core.run_outputs import RunOutputs

        labels = {s.index: f"run {s.index + 1}/{n_runs} {s.key}" for s in specs}
        stores = {s.index: RunOutputs(s.uri) for s in specs}
        clocks: dict[int, float] = {}
        for spec in specs:
            outcome = result.runs[spec.index]
            self._clear_stale(spec, stores[spec.index], outcome, labels[spec.index])
            self.log(f"{labels[spec.index]}: starting ({outcome.reason}; {outcome.expected} instances)")
            outcome.started = time.time()
            clocks[spec.index] = time.monotonic()
        pending = list(specs)
        while pending:
            for spec in pending:
                outcome = result.runs[spec.index]
                outcome.attempts += 1
                stores[spec.index].write_json(MARKER, self._marker(spec, outcome, "running"))
            with ExitStack() as watching:
                for spec in pending:
                    watching.enter_context(RunProgress(stores[spec.index], spec.model.name,
                                                       result.runs[spec.index].expected, labels[spec.index],
                                                       self.sweep.progress_interval_s, self.log))
                try:
                    results = self.evaluate_runs([s.config for s in pending], self.address, progress=False)
                except Exception as exc:  # evaluate_runs returns each run's failure; this is a failure of all
                    results = [exc] * len(pending)
            if on_pass_end is not None:
                on_pass_end()
            shared: dict[str, list[str]] = {}  # the pass's media work: runs of one pass share their keys
            for res in results:
                shared |= getattr(res, "decode_kinds", {})
            with self._writing:
                result.add_pass(shared)
            again = []
            for spec, res in zip(pending, results, strict=True):
                outcome = result.runs[spec.index]
                if not self._settle(spec, stores[spec.index], outcome, res, labels[spec.index]):
                    again.append(spec)
                    continue
                outcome.finished = time.time()
                outcome.seconds = time.monotonic() - clocks[spec.index]
                stores[spec.index].write_json(MARKER, self._marker(
                    spec, outcome, "complete" if outcome.status == "done" else "failed"))
                if outcome.status == "done":
                    self.log(f"{labels[spec.index]}: done in {outcome.seconds:.1f} s: {outcome.predictions} "
                             f"predictions ({outcome.scored} scored now, {outcome.resumed} resumed), "
                             f"{outcome.errors} errors, {outcome.metric_rows} metric rows" + _skipped_note(outcome))
                self._write_summary(root, result)
                self._log_overall(result)
            pending = again

    def _clear_stale(self, spec: RunSpec, store, outcome: RunOutcome, label: str) -> None:
        """A run folder holding outputs of another config (no marker, or another fingerprint) is cleared first."""
        marker = read_json(store, MARKER)
        if (marker is None or marker.get("fingerprint") != outcome.fingerprint) and has_files(store):
            runs_root = join_uri(self.sweep.output, "runs") + "/"
            if not spec.uri.startswith(runs_root) or ".." in spec.uri[len(runs_root):].split("/"):
                raise RuntimeError(f"refusing to clear {spec.uri}: not a run folder under {runs_root}")
            self.log(f"{label}: outputs of another config found, clearing {spec.uri}")
            store.fs.delete_dir_contents(store.root, missing_dir_ok=True)

    def _settle(self, spec: RunSpec, store, outcome: RunOutcome, res, label: str) -> bool:
        """Record one attempt of a run (its ``RunResult``, or the exception that stopped it): check its predictions,
        compute its metrics. False when it failed and has attempts left (an input error is not retried)."""
        try:
            if isinstance(res, Exception):
                raise res
            outcome.scored += res.n_rows
            outcome.resumed = res.n_skipped
            outcome.predictions = num_rows(store, "predictions.parquet") or 0
            outcome.errors = res.n_errors
            outcome.skipped_rows = int(res.skipped.get("count", 0))
            outcome.skipped_media = dict(sum((Counter(entry.get("by_modality", {}))
                                              for entry in res.skipped.get("by_model", {}).values()), Counter()))
            outcome.skipped_conditions = res.skipped.get("conditions", {})
            if outcome.predictions != outcome.expected:
                raise RuntimeError(f"predictions hold {outcome.predictions} rows, expected {outcome.expected}")
            settings = self._metrics_settings()
            if settings is not None:
                self.log(f"{label}: {outcome.predictions} predictions written, computing metrics")
                outcome.metric_rows = write_metrics(store, settings)
                outcome.verdicts = run_verdicts(store)
            outcome.status, outcome.failure = "done", None
        except InputError as exc:  # the input changed since the check: retrying will not help
            outcome.status, outcome.failure = "failed", f"InputError: {exc}"
            self.log(f"{label}: {outcome.failure}")
        except Exception as exc:  # a lost node, an engine that failed to load: try again, then report
            outcome.status = "failed"
            outcome.failure = f"{type(exc).__name__}: {exc}"
            self.log(f"{label}: attempt {outcome.attempts}/{self.sweep.max_attempts} failed: {outcome.failure}")
            self.log("".join(traceback.format_exception(exc, limit=6)).rstrip())
            return outcome.attempts >= self.sweep.max_attempts
        return True

    def _metrics_settings(self) -> dict | None:
        m = self.sweep.metrics
        if not m.enabled:
            return None
        return {"resamples": m.resamples, "seed": self.sweep.seed if m.seed is None else m.seed,
                "permutations": m.permutations, "cluster": resolved_units(m.cluster)}

    def _marker(self, spec: RunSpec, outcome: RunOutcome, state: str) -> dict:
        return {"state": state, "fingerprint": outcome.fingerprint, "key": spec.key, "sweep": self.sweep.name,
                "metrics": self._metrics_settings(),
                "attempts": outcome.attempts, "expected": outcome.expected, "n_predictions": outcome.predictions,
                "n_errors": outcome.errors, "started": outcome.started, "updated": time.time(),
                "failure": outcome.failure}

    # -- reporting ---------------------------------------------------------------------------------------------
    def _log_overall(self, result: SweepResult) -> None:
        finished = [r for r in result.runs if r.status in ("done", "skipped", "failed")]
        rows = sum(r.predictions for r in result.runs)
        total = sum(r.expected for r in result.runs)
        self.log(f"overall: {len(finished)}/{len(result.runs)} runs finished "
                 f"({sum(r.status == 'skipped' for r in result.runs)} were complete, "
                 f"{sum(r.status == 'failed' for r in result.runs)} failed), {rows}/{total} predictions, "
                 f"{time.time() - self.started:.0f} s")

    def _write_summary(self, root, result: SweepResult, final: bool = False) -> None:
        with self._writing:
            self._write_summary_now(root, result, final)

    def _write_summary_now(self, root, result: SweepResult, final: bool) -> None:
        runs = [asdict(r) for r in result.runs]
        totals = {"runs": len(runs), **{s: sum(r["status"] == s for r in runs)
                                        for s in ("done", "skipped", "failed", "pending")},
                  "expected_predictions": sum(r["expected"] for r in runs),
                  "predictions": sum(r["predictions"] for r in runs),
                  "scored": sum(r["scored"] for r in runs), "errors": sum(r["errors"] for r in runs),
                  "skipped_rows": sum(r["skipped_rows"] for r in runs),
                  "decodes": result.decodes, "decoded_store_hits": result.decoded_store_hits}
        root.write_json("summary.json", {"name": self.sweep.name, "output": self.sweep.output,
                                         "state": "finished" if final else "running", "started": self.started,
                                         "updated": time.time(), "totals": totals, "runs": runs,
                                         "config": self.sweep.model_dump(mode="json")})
        if final and self.sweep.metrics.enabled:
            self._write_combined_metrics(root, result)
            write_combined(root, result.runs, self._metrics_settings(), log=self.log)

    def _write_combined_metrics(self, root, result: SweepResult) -> None:
        import pyarrow as pa

        from omnieval.core.run_outputs import RunOutputs

        tables = []
        for r in result.runs:
            store = RunOutputs(r.output)
            if r.status in ("done", "skipped") and store.exists("metrics/metrics.parquet"):
                table = store.read_table("metrics/metrics.parquet").replace_schema_metadata(None)
                tables.append(table.append_column("benchmark", pa.array([r.benchmark] * table.num_rows,
                                                                        pa.string())))
        if tables:
            root.write_table("metrics.parquet", pa.concat_tables(tables, promote_options="permissive"))


def run_sweep(sweep: SweepConfig, address: str | None = None, *,
              log: Callable[[str], None] = log_line) -> SweepResult:
    """Run every incomplete run of ``sweep`` (see ``omnieval.sweep``'s docstring); the result lists each run's
    outcome."""
    return SweepRunner(sweep, address, log=log).run()


def _skipped_note(outcome: RunOutcome) -> str:
    """The end of a run's closing line: the conditions it ran on some items only, and its rows not asked (media its
    model cannot take), loud when that is all."""
    partial = "".join(f"; {condition} on {c['items']} of {c['of']} items ({c['skipped']} without a stand-in)"
                      for condition, c in outcome.skipped_conditions.items())
    return partial + _skipped_rows_note(outcome)


def _skipped_rows_note(outcome: RunOutcome) -> str:
    if not outcome.skipped_rows:
        return ""
    kinds = ", ".join(f"{m} {n}" for m, n in sorted(outcome.skipped_media.items()))
    if outcome.skipped_rows == outcome.predictions:
        return (f"; WARNING: every row skipped ({kinds}): the model takes none of the media these rows show, so "
                f"this run measured nothing (unsupported_media: note gives a text-only baseline)")
    return f"; {outcome.skipped_rows} rows skipped ({kinds}: media the model cannot take)"
