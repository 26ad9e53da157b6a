"""The sweep runner: checks the whole sweep, skips complete runs, runs the rest model by model (scheduling, retries
and logging: ``omnieval.sweep``'s docstring), and writes ``summary.json`` and the combined ``metrics.parquet``."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict

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
)
from omnieval.sweep.state import (
    MARKER,
    completeness,
    has_files,
    num_rows,
    read_json,
    resolved_units,
    write_metrics,
)
from omnieval.sweep.status import RunOutcome, RunProgress, SweepResult, log_line


def _free_gpus() -> float:
    import ray

    return float(ray.available_resources().get("GPU", 0.0))


def _total_gpus() -> float:
    import ray

    return float(ray.cluster_resources().get("GPU", 0.0))


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

    # -- the sweep ---------------------------------------------------------------------------------------------
    def run(self) -> SweepResult:
        """Check the whole sweep, take the output's lease (one sweep per output), run what is incomplete."""
        from omnieval.core.store import RunStore
        from omnieval.run.lease import OutputLease

        plans = plan_benchmarks(self.sweep)
        check_sweep_engines(self.sweep)
        root = RunStore(self.sweep.output)
        root.check_writable()
        with OutputLease(root) as lease:
            root.lease = lease
            return self._run(plans, root)

    def _run(self, plans: dict[str, BenchmarkPlan], root) -> SweepResult:
        from omnieval.core.store import RunStore

        sweep = self.sweep
        t0 = time.monotonic()
        specs = expand_runs(sweep)
        result = SweepResult(output=sweep.output, summary_path=root.path("summary.json"),
                             max_error_rate=sweep.max_error_rate)
        todo = []
        for spec in specs:
            plan = plans[spec.entry.label]
            outcome = RunOutcome(key=spec.key, model=spec.model.name, protocol=spec.entry.protocol,
                                 benchmark=spec.entry.label, prompt=spec.prompt, output=spec.uri,
                                 fingerprint=fingerprint(spec.config, plan), expected=plan.n_instances)
            done, outcome.reason = completeness(RunStore(spec.uri), outcome.fingerprint, plan.n_instances,
                                                metrics=self._metrics_settings(), retry_errors=sweep.retry_errors)
            if done:
                outcome.status = "skipped"
                outcome.predictions = plan.n_instances
            else:
                todo.append(spec.index)
            result.runs.append(outcome)
        self.log(f"sweep {sweep.name!r}: {len(specs)} runs ({len(sweep.models)} models x {len(sweep.protocols)} "
                 f"protocols x {len(sweep.prompts)} prompts), {len(specs) - len(todo)} complete, {len(todo)} to run; "
                 f"checked in {time.monotonic() - t0:.1f} s; output {sweep.output}")
        if todo:
            self.ensure_ray(specs[todo[0]].config, self.address)
        for model in sweep.models:
            mine = [s for s in specs if s.model.name == model.name and s.index in todo]
            if not mine:
                continue
            baseline = _free_gpus()
            self._run_model(mine, result, root, len(specs))
            if model.as_model_config().num_gpus > 0:
                _wait_for_release(baseline, sweep.release_timeout_s, model.name, self.log)
        self._write_summary(root, result, final=True)
        self.log(f"sweep {sweep.name!r} finished in {time.monotonic() - t0:.1f} s: "
                 + ("all runs complete" if result.ok else
                    f"{sum(r.status == 'failed' for r in result.runs)} runs failed"))
        return result

    # -- one model's runs --------------------------------------------------------------------------------------
    def _run_model(self, specs: list[RunSpec], result: SweepResult, root, n_runs: int) -> None:
        """All of one model's incomplete runs in one pass (``pipeline.evaluate_runs``: one engine pool, one model
        load); each run keeps its own folder, resume, marker, metrics and outcome. A run that failed is tried again
        (``max_attempts``) together with the model's other failed runs, resuming from what was written."""
        from omnieval.core.store import RunStore

        labels = {s.index: f"run {s.index + 1}/{n_runs} {s.key}" for s in specs}
        stores = {s.index: RunStore(s.uri) for s in specs}
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
                             f"{outcome.errors} errors, {outcome.metric_rows} metric rows")
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
            if outcome.predictions != outcome.expected:
                raise RuntimeError(f"predictions hold {outcome.predictions} rows, expected {outcome.expected}")
            settings = self._metrics_settings()
            if settings is not None:
                self.log(f"{label}: {outcome.predictions} predictions written, computing metrics")
                outcome.metric_rows = write_metrics(store, settings)
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
        runs = [asdict(r) for r in result.runs]
        totals = {"runs": len(runs), **{s: sum(r["status"] == s for r in runs)
                                        for s in ("done", "skipped", "failed", "pending")},
                  "expected_predictions": sum(r["expected"] for r in runs),
                  "predictions": sum(r["predictions"] for r in runs),
                  "scored": sum(r["scored"] for r in runs), "errors": sum(r["errors"] for r in runs)}
        root.write_json("summary.json", {"name": self.sweep.name, "output": self.sweep.output,
                                         "state": "finished" if final else "running", "started": self.started,
                                         "updated": time.time(), "totals": totals, "runs": runs,
                                         "config": self.sweep.model_dump(mode="json")})
        if final and self.sweep.metrics.enabled:
            self._write_combined_metrics(root, result)

    def _write_combined_metrics(self, root, result: SweepResult) -> None:
        import pyarrow as pa

        from omnieval.core.store import RunStore

        tables = []
        for r in result.runs:
            store = RunStore(r.output)
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
