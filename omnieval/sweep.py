"""Sweeps: models x protocols (each with its benchmark) x prompt styles, one pipeline run each, resumable.

    python jobs/sweep.py sweep.yaml                                    # embedded local Ray
    ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/sweep.py sweep.yaml

A sweep file (``yaml.safe_load``; every field validated, errors name the file and field)::

    name: nightly
    output: s3://bucket/omnieval/nightly   # or gs://..., or a local path (relative: to the sweep file)
    seed: 0
    prompts: [zs, cot]
    protocols:                             # a protocol with its benchmark; the same protocol may appear twice
      - protocol: dissonance               # with two benchmarks if each entry has its own ``name``
        benchmark: /data/omd-bench
      - protocol: crossmodal
        benchmark: /data/xmodbench
        options: {extra: [AV->T]}          # the runs' ``protocol_options``
    models:
      - name: qwen-omni-7b
        engine: vllm                       # hf and vllm need ``path`` (or ``options.path``)
        path: /models/Qwen2.5-Omni-7B
        tensor_parallel_size: 1            # > 1: vllm only; one replica then asks for that many GPUs
        replicas: 8
        num_gpus: 1
        batch_size: 16
    metrics: {resamples: 2000}

Before Ray starts, the whole sweep is checked: the config (pydantic), each model path (``check_model_paths``), and
each benchmark is loaded, expanded and media-checked once (``pipeline.make_plan``), so a typo fails in seconds
with no GPU work. The sweep is then expanded into runs, one per (model, protocol entry, prompt style), each an
ordinary ``RunConfig`` (``protocol``, ``benchmark``, ``protocol_options`` passed through) run by
``pipeline.run_evaluation`` into its own folder::

    <output>/summary.json                               every run's status, counts, timings; sweep totals
    <output>/metrics.parquet                            every run's metrics table, with a ``benchmark`` column
    <output>/runs/<protocol entry>/<model>/<prompt>/    run.json, predictions.parquet, parts/, metrics/,
                                                        sweep-run.json (this run's state and fingerprint)

**Complete.** A run is complete when its ``sweep-run.json`` says ``complete`` with the current fingerprint,
``run.json`` and ``predictions.parquet`` exist, the predictions hold exactly one row per instance, the metrics are
there (when enabled, made with the current metrics settings: other settings recompute only the metrics), and (with
``retry_errors``) no prediction ended in an error. The fingerprint is a SHA-256 over what decides the
predictions: the run config without output, Ray settings and scaling fields (replicas,
batch sizes, GPUs and CPUs do not change predictions: DESIGN decision 1), plus the expanded instances and the
content hashes of their media, so editing a benchmark, a model option or the seed redoes exactly the affected
runs. Complete runs are skipped (a resubmitted finished sweep starts no Ray work at all); an interrupted run with
the same fingerprint resumes through the pipeline's part files; a run folder whose fingerprint differs (or that
has no ``sweep-run.json``) holds predictions of another config and is cleared first.

**Scheduling.** Runs go model by model: one model's runs over all its protocols and prompt styles, then the next
model's. A run's engine replicas are a Ray Data actor pool that holds its GPUs for as long as the run's dataset
executes and is torn down when the run ends; running two models at once would let one model's replicas sit on GPUs
while they wait for decoded media or for the other model's replicas, and on a full cluster the second model's pool
would wait for GPUs that the first holds idle. So one model has the GPUs at a time, its replicas (``replicas`` x
``num_gpus``) are spread over the nodes by Ray Data's default ``SPREAD`` strategy (a model that fits one GPU runs
as independent replicas across nodes), and after a model's last run the sweep waits until the cluster's free GPUs
are back to where they were before that model started (bounded by ``release_timeout_s``) before it starts the next
model. A tensor-parallel vLLM model (``tensor_parallel_size: k``) asks for ``k`` GPUs per replica, which Ray places
on one node. The price of per-run actor pools is one model load per run; it buys runs that finish, resume and
report independently.

**Fault tolerance.** Ray restarts a lost engine actor (Ray Data actor pools retry their tasks), and rows are only
written when a batch is complete, so a node lost mid-run loses no prediction and duplicates none. If a run still
fails (its driver-side state was lost with a node), the sweep tries it again (``max_attempts``) and the pipeline's
resume scores only what was not written yet; a failed run is reported and the sweep goes on with the others.

**Observability.** Every run logs its start, its progress (rows written over expected, every
``progress_interval_s``), its end with counts, and the sweep's overall progress, to stdout (the job log under
``ray job submit``). ``summary.json`` is rewritten after every run.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from omnieval.config import DecodeConfig, ModelConfig, RayConfig, RunConfig, read_yaml, validated
from omnieval.identity import benchmark_digest, run_fingerprint
from omnieval.prompts import PROMPT_STYLES
from omnieval.schema import InputError

MODEL_PATH_ENGINES = ("hf", "vllm")
"""Engines that load a model from a folder: a sweep must name it (``path`` or ``options.path``)."""
MARKER = "sweep-run.json"


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProtocolEntry(_Config):
    """One protocol with its benchmark. ``name`` labels its runs' folder (default: the protocol's name)."""

    protocol: str
    benchmark: str
    name: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    options: dict[str, Any] = Field(default_factory=dict, description="the runs' protocol_options")
    limit_items: int | None = Field(default=None, ge=1)

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, v: str) -> str:
        from omnieval.protocols import known_protocols

        if v not in known_protocols():
            raise ValueError(f"unknown protocol {v!r}; known protocols: {', '.join(known_protocols())}")
        return v

    @field_validator("name")
    @classmethod
    def _folder_safe(cls, v: str | None) -> str | None:
        from omnieval.names import check_name_part

        return None if v is None else check_name_part(v, "protocol entry name")

    @property
    def label(self) -> str:
        return self.name or self.protocol


class SweepModel(ModelConfig):
    """A run config's model plus where its weights are and how it is split over GPUs."""

    path: str | None = Field(default=None, validate_default=True,
                             description="model folder (hf, vllm); same as options.path")
    tensor_parallel_size: int = Field(default=1, ge=1, description="vllm only: GPUs per replica")

    @field_validator("path")
    @classmethod
    def _path_given(cls, v: str | None, info: ValidationInfo) -> str | None:
        engine, given = info.data.get("engine"), (info.data.get("options") or {}).get("path")
        if v is not None and given is not None and str(given) != v:
            raise ValueError(f"path {v!r} and options.path {given!r} disagree")
        if engine in MODEL_PATH_ENGINES and not (v or given):
            raise ValueError(f"engine {engine!r} needs the model folder: set path (or options.path)")
        return v

    @model_validator(mode="after")
    def _parallelism(self) -> SweepModel:
        if self.tensor_parallel_size > 1:
            if self.engine != "vllm":
                raise ValueError(f"tensor_parallel_size > 1 needs engine 'vllm', not {self.engine!r}")
            if "num_gpus" in self.model_fields_set and self.num_gpus != self.tensor_parallel_size:
                raise ValueError(f"num_gpus ({self.num_gpus}) must equal tensor_parallel_size "
                                 f"({self.tensor_parallel_size}): each replica holds all its shards")
        device = str(self.options.get("device", ""))
        if self.engine == "hf" and device.startswith("cuda") and self.num_gpus <= 0:
            raise ValueError(f"options.device is {device!r} but num_gpus is 0: set num_gpus (GPUs per replica)")
        return self

    @property
    def model_path(self) -> str | None:
        return self.path or self.options.get("path")

    def as_model_config(self) -> ModelConfig:
        """The run config's ``ModelConfig``: ``path`` and ``tensor_parallel_size`` become engine options."""
        options = dict(self.options)
        if self.model_path is not None:
            options["path"] = self.model_path
        num_gpus = self.num_gpus
        if self.tensor_parallel_size > 1:
            options["tensor_parallel_size"] = self.tensor_parallel_size
            num_gpus = float(self.tensor_parallel_size)
        return ModelConfig(name=self.name, engine=self.engine, options=options, replicas=self.replicas,
                           batch_size=self.batch_size, num_gpus=num_gpus, num_cpus=self.num_cpus)


class MetricsSettings(_Config):
    enabled: bool = True
    resamples: int = Field(default=2000, ge=1, description="bootstrap resamples per run")
    seed: int | None = Field(default=None, description="bootstrap seed (default: the sweep's seed)")


class SweepConfig(_Config):
    name: str = "sweep"
    output: str = Field(min_length=1, description="local path, s3:// or gs:// prefix")
    seed: int = 0
    prompts: list[str] = Field(default_factory=lambda: ["zs"])
    protocols: list[ProtocolEntry] = Field(min_length=1)
    models: list[SweepModel] = Field(min_length=1)
    decode: DecodeConfig = Field(default_factory=DecodeConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    max_attempts: int = Field(default=2, ge=1, description="tries per run (a retry resumes the run)")
    retry_errors: bool = Field(default=True, description="a run with errored predictions is not complete")
    check_model_paths: bool = Field(
        default=True, description="check that local model folders hold config.json (false where the driver "
                                  "cannot see the workers' model storage)")
    progress_interval_s: float = Field(default=30.0, gt=0)
    release_timeout_s: float = Field(default=300.0, ge=0, description="wait for a model's GPUs between models")
    allow_remote_code: bool = Field(default=False, description="as in a run config: trust_remote_code allowed")
    max_error_rate: float = Field(default=0.0, ge=0.0, le=1.0,
                                  description="share of a run's rows that may end in an error (the sweep exits "
                                              "non-zero above it)")

    @field_validator("prompts")
    @classmethod
    def _known_prompts(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one prompt style")
        for p in v:
            if p not in PROMPT_STYLES:
                raise ValueError(f"unknown prompt style {p!r}; known: {', '.join(PROMPT_STYLES)}")
        if len(set(v)) != len(v):
            raise ValueError(f"prompt styles must be unique: {v}")
        return v

    @model_validator(mode="after")
    def _unique_names(self) -> SweepConfig:
        for what, names in (("model names", [m.name for m in self.models]),
                            ("protocol entries (set name: to tell them apart)", [p.label for p in self.protocols])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{what} must be unique, repeated: {dupes}")
        return self


# ---------------------------------------------------------------------------------------------------------------
# Reading a sweep file
# ---------------------------------------------------------------------------------------------------------------

def _resolve(value: str, base_dir: Path) -> str:
    if "://" in value or Path(value).is_absolute():
        return value
    return str((base_dir / value).resolve())


def parse_sweep_config(data: Any, *, file: str | Path | None = None,
                       base_dir: str | Path | None = None) -> SweepConfig:
    """Validate a sweep mapping. Relative ``output``, ``benchmark`` and model paths are taken relative to
    ``base_dir``; with ``check_model_paths`` every local model folder must hold a ``config.json``."""
    sweep = validated(SweepConfig, data, "sweep config", file)
    if base_dir is not None:
        base = Path(base_dir)
        models = [m.model_copy(update={"path": _resolve(m.model_path, base)}) if m.model_path else m
                  for m in sweep.models]
        protocols = [p.model_copy(update={"benchmark": _resolve(p.benchmark, base)}) for p in sweep.protocols]
        sweep = sweep.model_copy(update={"output": _resolve(sweep.output, base), "models": models,
                                         "protocols": protocols})
    if sweep.check_model_paths:
        for i, model in enumerate(sweep.models):
            path = model.model_path
            if path and "://" not in path and not (Path(path) / "config.json").is_file():
                raise InputError(f"no config.json in the model folder {path} (set check_model_paths: false if "
                                 "only the workers can see it)", file=file, field=f"models[{i}].path")
    return sweep


def load_sweep_config(path: str | Path) -> SweepConfig:
    path = Path(path)
    return parse_sweep_config(read_yaml(path, "sweep config"), file=path, base_dir=path.parent)


# ---------------------------------------------------------------------------------------------------------------
# Expansion: sweep -> runs
# ---------------------------------------------------------------------------------------------------------------

def join_uri(base: str, *parts: str) -> str:
    """``base/part/...`` for a local path or a ``scheme://`` URI."""
    return "/".join([base.rstrip("/"), *parts])


@dataclass
class RunSpec:
    index: int
    model: SweepModel
    entry: ProtocolEntry
    prompt: str
    config: RunConfig

    @property
    def key(self) -> str:
        return f"{self.model.name} / {self.entry.label} / {self.prompt}"

    @property
    def uri(self) -> str:
        return self.config.output


def run_uri(sweep: SweepConfig, model: SweepModel, entry: ProtocolEntry, prompt: str) -> str:
    from omnieval.names import folder_name

    return join_uri(sweep.output, "runs", folder_name(entry.label), folder_name(model.name), prompt)


def run_config(sweep: SweepConfig, model: SweepModel, entry: ProtocolEntry, prompt: str) -> RunConfig:
    """The ``RunConfig`` of one (model, protocol entry, prompt style)."""
    return RunConfig(name=f"{sweep.name}/{entry.label}/{model.name}/{prompt}", protocol=entry.protocol,
                     protocol_options=entry.options, benchmark=entry.benchmark,
                     output=run_uri(sweep, model, entry, prompt), seed=sweep.seed, prompts=[prompt],
                     models=[model.as_model_config()], decode=sweep.decode, ray=sweep.ray,
                     limit_items=entry.limit_items, allow_remote_code=sweep.allow_remote_code,
                     max_error_rate=sweep.max_error_rate, check_model_paths=sweep.check_model_paths)


def expand_runs(sweep: SweepConfig) -> list[RunSpec]:
    """Every run, model-major: all of one model's runs (protocol entries x prompts) before the next model's."""
    specs = []
    for model in sweep.models:
        for entry in sweep.protocols:
            for prompt in sweep.prompts:
                specs.append(RunSpec(len(specs), model, entry, prompt, run_config(sweep, model, entry, prompt)))
    return specs


@dataclass(frozen=True)
class BenchmarkPlan:
    """What the sweep needs from one protocol entry's plan: its size and a digest of its content."""

    n_instances: int
    digest: str


def plan_benchmarks(sweep: SweepConfig) -> dict[str, BenchmarkPlan]:
    """Load, expand and media-check every protocol entry's benchmark once (no Ray); errors name the entry."""
    from omnieval.pipeline import make_plan

    plans = {}
    for i, entry in enumerate(sweep.protocols):
        config = run_config(sweep, sweep.models[0], entry, sweep.prompts[0])
        try:
            plan = make_plan(config)
        except InputError as exc:
            inner = exc.field or ""
            if inner == "protocol":
                where = f"protocols[{i}].protocol"
            elif inner.startswith("protocol_options"):
                where = f"protocols[{i}].options" + inner.removeprefix("protocol_options")
            else:
                where = f"protocols[{i}].benchmark"
            raise InputError(str(exc), field=where) from None
        plans[entry.label] = BenchmarkPlan(n_instances=len(plan.instances), digest=benchmark_digest(plan))
    return plans


def check_sweep_engines(sweep: SweepConfig) -> None:
    """Every model's engine options, checked on the driver before Ray starts (the plans check only the first)."""
    from omnieval.preflight import check_engines

    entry, prompt = sweep.protocols[0], sweep.prompts[0]
    for i, model in enumerate(sweep.models):
        check_engines(run_config(sweep, model, entry, prompt), [(f"models[{i}]", model.as_model_config())])


def fingerprint(config: RunConfig, plan: BenchmarkPlan) -> str:
    """SHA-256 of what decides a run's predictions (not where they go, nor how many workers make them): the same
    definition a run checks its own folders against (``omnieval.identity``)."""
    return run_fingerprint(config, plan.digest)


# ---------------------------------------------------------------------------------------------------------------
# One run's state on storage
# ---------------------------------------------------------------------------------------------------------------

def _read_json(store, rel: str) -> dict | None:
    try:
        with store.fs.open_input_stream(store.path(rel)) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def _num_rows(store, rel: str) -> int | None:
    import pyarrow.parquet as pq

    try:
        with store.fs.open_input_file(store.path(rel)) as f:
            return pq.read_metadata(f).num_rows
    except (OSError, ValueError):
        return None


def completeness(store, fp: str, expected_rows: int, *, metrics: dict | None,
                 retry_errors: bool) -> tuple[bool, str]:
    """(complete?, why not) of the run stored at ``store`` (see the module docstring). ``metrics`` are the metrics
    settings (``None``: metrics off); other settings than the stored ones recompute the metrics, not the
    predictions."""
    marker = _read_json(store, MARKER)
    if marker is None:
        return False, "not run yet"
    if marker.get("fingerprint") != fp:
        return False, "config or benchmark changed"
    if marker.get("state") != "complete":
        return False, "interrupted"
    if not store.exists("run.json"):
        return False, "run.json missing"
    rows = _num_rows(store, "predictions.parquet")
    if rows is None:
        return False, "predictions missing"
    if rows != expected_rows:
        return False, f"predictions hold {rows} rows, expected {expected_rows}"
    if metrics is not None and not store.exists("metrics/metrics.parquet"):
        return False, "metrics missing"
    if metrics is not None and marker.get("metrics") != metrics:
        return False, "metrics settings changed"
    if retry_errors and marker.get("n_errors"):
        return False, f"{marker['n_errors']} errored predictions to retry"
    return True, "complete"


def _has_files(store) -> bool:
    import pyarrow.fs as pafs

    infos = store.fs.get_file_info(pafs.FileSelector(store.root, allow_not_found=True, recursive=True))
    return any(i.type == pafs.FileType.File for i in infos)


def write_metrics(store, resamples: int, seed: int) -> int:
    """``metrics/metrics.{parquet,csv,json}`` of the run's predictions (read through the store's filesystem)."""
    import tempfile

    from omnieval.metrics import metrics_table
    from omnieval.predictions import read_predictions
    from omnieval.unit_bootstrap import CONFIDENCE_LEVEL

    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "predictions.parquet"
        with store.fs.open_input_stream(store.path("predictions.parquet")) as src:
            local.write_bytes(src.read())
        table = metrics_table(read_predictions([local]), resamples=resamples, seed=seed)
    meta = {"seed": str(seed), "resamples": str(resamples), "confidence_level": str(CONFIDENCE_LEVEL)}
    arrow = table.to_arrow()
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **meta})
    store.write_table("metrics/metrics.parquet", arrow)
    store.write_bytes("metrics/metrics.csv", table.write_csv().encode())
    store.write_json("metrics/metrics.json", {
        "seed": seed, "resamples": resamples, "confidence_level": CONFIDENCE_LEVEL,
        "bootstrap": "clustered percentile bootstrap over item_id", "inputs": [store.path("predictions.parquet")],
        "metrics": table.to_dicts()})
    return len(table)


# ---------------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class RunOutcome:
    key: str
    model: str
    protocol: str
    benchmark: str
    prompt: str
    output: str
    fingerprint: str
    status: str = "pending"  # skipped | done | failed
    reason: str = ""
    expected: int = 0
    predictions: int = 0
    scored: int = 0
    resumed: int = 0
    errors: int = 0
    metric_rows: int = 0
    attempts: int = 0
    started: float | None = None
    finished: float | None = None
    seconds: float = 0.0
    failure: str | None = None


@dataclass
class SweepResult:
    output: str
    summary_path: str
    runs: list[RunOutcome] = field(default_factory=list)
    max_error_rate: float = 0.0

    @property
    def ok(self) -> bool:
        """Every run complete, and none with more errored rows than ``max_error_rate`` allows."""
        return all(r.status in ("done", "skipped") and r.errors <= self.max_error_rate * max(1, r.predictions)
                   for r in self.runs)

    def summary(self) -> str:
        lines = [f"sweep summary: {self.summary_path}",
                 f"{'run':<48} {'status':<8} {'rows':>7} {'scored':>7} {'errors':>6} {'seconds':>8}"]
        for r in self.runs:
            lines.append(f"{r.key:<48} {r.status:<8} {r.predictions:>7} {r.scored:>7} {r.errors:>6} "
                         f"{r.seconds:>8.1f}")
        counts = {s: sum(r.status == s for r in self.runs) for s in ("done", "skipped", "failed")}
        lines.append(f"{len(self.runs)} runs: {counts['done']} done, {counts['skipped']} skipped (complete), "
                     f"{counts['failed']} failed")
        return "\n".join(lines)


class _Progress:
    """Logs a run's rows written so far (from its part files' footers) every ``interval`` seconds."""

    def __init__(self, store, model: str, expected: int, label: str, interval: float, log: Callable[[str], None]):
        self.store, self.model, self.expected, self.label = store, model, expected, label
        self.interval, self.log = interval, log
        self._rows: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweep-progress", daemon=True)

    def rows(self) -> int:
        import pyarrow.parquet as pq

        for path in self.store.part_files(self.model):
            if path not in self._rows:  # parts are immutable once renamed into place
                with self.store.fs.open_input_file(path) as f:
                    self._rows[path] = pq.read_metadata(f).num_rows
        return sum(self._rows.values())

    def _loop(self) -> None:
        start = time.monotonic()
        try:
            before = self.rows()  # written by an earlier attempt: resumed, not part of this attempt's rate
        except OSError:
            before = 0
        while not self._stop.wait(self.interval):
            try:
                n = self.rows()
            except OSError:
                continue
            rate = (n - before) / max(1e-9, time.monotonic() - start)
            self.log(f"{self.label}: {min(n, self.expected)}/{self.expected} predictions "
                     f"({100 * min(n, self.expected) / max(1, self.expected):.0f}%), {rate:.1f}/s")

    def __enter__(self) -> _Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} [omnieval sweep] {message}", flush=True)


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
    """Runs a validated sweep; ``run_evaluation`` and ``ensure_ray`` are attributes so that callers (and tests)
    can observe or wrap the model work."""

    def __init__(self, sweep: SweepConfig, address: str | None = None, *, log: Callable[[str], None] = _log):
        from omnieval import pipeline

        self.sweep, self.address, self.log = sweep, address, log
        self.run_evaluation = pipeline.run_evaluation
        self.ensure_ray = pipeline.ensure_ray
        self.started = time.time()

    # -- the sweep ---------------------------------------------------------------------------------------------
    def run(self) -> SweepResult:
        """Check the whole sweep, take the output's lease (one sweep per output), run what is incomplete."""
        from omnieval.lease import OutputLease
        from omnieval.store import RunStore

        plans = plan_benchmarks(self.sweep)
        check_sweep_engines(self.sweep)
        root = RunStore(self.sweep.output)
        root.check_writable()
        with OutputLease(root) as lease:
            root.lease = lease
            return self._run(plans, root)

    def _run(self, plans: dict[str, BenchmarkPlan], root) -> SweepResult:
        from omnieval.store import RunStore

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
            for spec in mine:
                self._run_one(spec, result.runs[spec.index], len(specs))
                self._write_summary(root, result)
                self._log_overall(result)
            if model.as_model_config().num_gpus > 0:
                _wait_for_release(baseline, sweep.release_timeout_s, model.name, self.log)
        self._write_summary(root, result, final=True)
        self.log(f"sweep {sweep.name!r} finished in {time.monotonic() - t0:.1f} s: "
                 + ("all runs complete" if result.ok else
                    f"{sum(r.status == 'failed' for r in result.runs)} runs failed"))
        return result

    # -- one run -----------------------------------------------------------------------------------------------
    def _run_one(self, spec: RunSpec, outcome: RunOutcome, n_runs: int) -> None:
        from omnieval.store import RunStore

        label = f"run {spec.index + 1}/{n_runs} {spec.key}"
        store = RunStore(spec.uri)
        marker = _read_json(store, MARKER)
        if (marker is None or marker.get("fingerprint") != outcome.fingerprint) and _has_files(store):
            runs_root = join_uri(self.sweep.output, "runs") + "/"
            if not spec.uri.startswith(runs_root) or ".." in spec.uri[len(runs_root):].split("/"):
                raise RuntimeError(f"refusing to clear {spec.uri}: not a run folder under {runs_root}")
            self.log(f"{label}: outputs of another config found, clearing {spec.uri}")
            store.fs.delete_dir_contents(store.root, missing_dir_ok=True)
        self.log(f"{label}: starting ({outcome.reason}; {outcome.expected} instances)")
        outcome.started = time.time()
        t0 = time.monotonic()
        while outcome.attempts < self.sweep.max_attempts:
            outcome.attempts += 1
            store.write_json(MARKER, self._marker(spec, outcome, "running"))
            try:
                with _Progress(store, spec.model.name, outcome.expected, label, self.sweep.progress_interval_s,
                               self.log):
                    res = self.run_evaluation(spec.config, self.address, progress=False)
                outcome.scored += res.n_rows
                outcome.resumed = res.n_skipped
                outcome.predictions = _num_rows(store, "predictions.parquet") or 0
                outcome.errors = res.n_errors
                if outcome.predictions != outcome.expected:
                    raise RuntimeError(f"predictions hold {outcome.predictions} rows, expected {outcome.expected}")
                settings = self._metrics_settings()
                if settings is not None:
                    self.log(f"{label}: {outcome.predictions} predictions written, computing metrics")
                    outcome.metric_rows = write_metrics(store, settings["resamples"], settings["seed"])
                outcome.status, outcome.failure = "done", None
                break
            except InputError as exc:  # the input changed since the check: retrying will not help
                outcome.status, outcome.failure = "failed", f"InputError: {exc}"
                self.log(f"{label}: {outcome.failure}")
                break
            except Exception as exc:  # a lost node, an engine that failed to load: try again, then report
                outcome.status = "failed"
                outcome.failure = f"{type(exc).__name__}: {exc}"
                self.log(f"{label}: attempt {outcome.attempts}/{self.sweep.max_attempts} failed: {outcome.failure}")
                self.log(traceback.format_exc(limit=6).rstrip())
        outcome.finished = time.time()
        outcome.seconds = time.monotonic() - t0
        store.write_json(MARKER, self._marker(spec, outcome, "complete" if outcome.status == "done" else "failed"))
        if outcome.status == "done":
            self.log(f"{label}: done in {outcome.seconds:.1f} s: {outcome.predictions} predictions "
                     f"({outcome.scored} scored now, {outcome.resumed} resumed), {outcome.errors} errors, "
                     f"{outcome.metric_rows} metric rows")

    def _metrics_settings(self) -> dict | None:
        m = self.sweep.metrics
        return {"resamples": m.resamples, "seed": self.sweep.seed if m.seed is None else m.seed} if m.enabled else None

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

        from omnieval.store import RunStore

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
              log: Callable[[str], None] = _log) -> SweepResult:
    """Run every incomplete run of ``sweep`` (see the module docstring); the result lists each run's outcome."""
    return SweepRunner(sweep, address, log=log).run()
