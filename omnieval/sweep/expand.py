"""A sweep expanded into runs: one ``RunConfig`` per (model, protocol entry, prompt style), model-major; each
protocol entry's benchmark planned once (no Ray) for its size and content digest; a run's fingerprint from both."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from omnieval.config import RunConfig
from omnieval.core.schema import InputError
from omnieval.run.identity import benchmark_digest, run_fingerprint
from omnieval.run.recipe import pinned_decode
from omnieval.sweep.config import ProtocolEntry, SweepConfig, SweepModel


def join_uri(base: str, *parts: str) -> str:
    """``base/part/...`` for a local path or a ``scheme://`` URI; a URI's options (``?endpoint_override=...``, read by
    pyarrow) stay at its end, after the joined path."""
    if "://" in base:
        split = urlsplit(base)
        if split.query:
            return urlunsplit(split._replace(path="/".join([split.path.rstrip("/"), *parts])))
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
    from omnieval.core.names import folder_name

    return join_uri(sweep.output, "runs", folder_name(entry.label), folder_name(model.name), prompt)


MEDIA_STORE = "media"
"""The folder of a sweep's output holding its decoded-media store (``omnieval.media.decoded_store``), unless
``decode.store`` names one."""


def sweep_decode(sweep: SweepConfig):
    """The sweep's decode settings for its runs: its own store, or ``<output>/media`` (on the same storage), so
    that each media file is decoded once over all the sweep's runs and reruns."""
    if sweep.decode.store:
        return sweep.decode
    return sweep.decode.model_copy(update={"store": join_uri(sweep.output, MEDIA_STORE)})


def run_config(sweep: SweepConfig, model: SweepModel, entry: ProtocolEntry, prompt: str) -> RunConfig:
    """The ``RunConfig`` of one (model, protocol entry, prompt style)."""
    return RunConfig(name=f"{sweep.name}/{entry.label}/{model.name}/{prompt}", protocol=entry.protocol,
                     protocol_options=entry.options, benchmark=entry.benchmark, scorer=entry.scorer,
                     output=run_uri(sweep, model, entry, prompt), seed=sweep.seed, prompts=[prompt],
                     models=[model.as_model_config()], decode=sweep_decode(sweep), recipes=sweep.recipes,
                     ray=sweep.ray,
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
    pinned: dict = field(default_factory=dict)  # the benchmark's pinned decode options (run.recipe)


def plan_benchmarks(sweep: SweepConfig) -> dict[str, BenchmarkPlan]:
    """Load, expand and media-check every protocol entry's benchmark once (no Ray); errors name the entry."""
    from omnieval.run.plan import make_plan

    plans = {}
    for i, entry in enumerate(sweep.protocols):
        config = run_config(sweep, sweep.models[0], entry, sweep.prompts[0])
        try:
            plan = make_plan(config, keep_blocks=False)  # count and digest only
        except InputError as exc:
            inner = exc.field or ""
            if inner == "protocol":
                where = f"protocols[{i}].protocol"
            elif inner.startswith("protocol_options"):
                where = f"protocols[{i}].options" + inner.removeprefix("protocol_options")
            else:
                where = f"protocols[{i}].benchmark"
            raise InputError(str(exc), field=where) from None
        plans[entry.label] = BenchmarkPlan(n_instances=plan.n_instances, digest=benchmark_digest(plan),
                                           pinned=pinned_decode(plan.source.bench))
    return plans


def check_sweep_engines(sweep: SweepConfig) -> None:
    """Every model's engine options, checked on the driver before Ray starts (the plans check only the first)."""
    from omnieval.run.preflight import check_engines

    entry, prompt = sweep.protocols[0], sweep.prompts[0]
    for i, model in enumerate(sweep.models):
        check_engines(run_config(sweep, model, entry, prompt), [(f"models[{i}]", model.as_model_config())])


def fingerprint(config: RunConfig, plan: BenchmarkPlan) -> str:
    """SHA-256 of what decides a run's predictions (not where they go, nor how many workers make them): the same
    definition a run checks its own folders against (``omnieval.run.identity``)."""
    return run_fingerprint(config, plan.digest, plan.pinned)

