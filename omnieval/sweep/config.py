"""A sweep file's schema (pydantic) and reading it from YAML: relative paths resolved against the file's folder,
local model folders checked. The format is described in ``omnieval.sweep``'s docstring."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from omnieval.config import DecodeConfig, ModelConfig, RayConfig, check_output_apart, read_yaml, validated
from omnieval.core.prompts import PROMPT_STYLES
from omnieval.core.schema import InputError

MODEL_PATH_ENGINES = ("hf", "vllm")
"""Engines that load a model from a folder: a sweep must name it (``path`` or ``options.path``)."""


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProtocolEntry(_Config):
    """One protocol with its benchmark. ``name`` labels its runs' folder (default: the protocol's name)."""

    protocol: str
    benchmark: str
    name: str | None = Field(default=None, min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    options: dict[str, Any] = Field(default_factory=dict, description="the runs' protocol_options")
    scorer: str | None = Field(default=None, description="the runs' official scorer (default: the benchmark's)")
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
        from omnieval.core.names import check_name_part

        return None if v is None else check_name_part(v, "protocol entry name")

    @property
    def label(self) -> str:
        return self.name or self.protocol


class SweepModel(ModelConfig):
    """A run config's model plus where its weights are and how it is split over GPUs."""

    path: str | None = Field(default=None, validate_default=True,
                             description="model folder (hf, vllm); same as options.path")
    tensor_parallel_size: int = Field(default=1, ge=1, description="vllm only: GPUs per replica")
    replicas: int | Literal["auto"] = Field(
        default=1, description="engine actors (each holds one model copy); auto: as many as the cluster's free GPUs "
                               "allow when the model starts (at most max_replicas)")
    max_replicas: int | None = Field(default=None, ge=1, description="replicas: auto only: the most it takes")

    @field_validator("replicas")
    @classmethod
    def _replicas(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"replicas must be greater than or equal to 1, or auto; got {v}")
        return v

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
        if self.replicas == "auto" and self.num_gpus <= 0 and self.tensor_parallel_size == 1:
            raise ValueError("replicas: auto counts replicas by free GPUs: set num_gpus (GPUs per replica)")
        if self.max_replicas is not None and self.replicas != "auto":
            raise ValueError("max_replicas is for replicas: auto only; with a number of replicas leave it out")
        if self.tensor_parallel_size > 1:
            if self.engine != "vllm":
                raise ValueError(f"tensor_parallel_size > 1 needs engine 'vllm', not {self.engine!r}")
            if "num_gpus" in self.model_fields_set and self.num_gpus != self.tensor_parallel_size:
                raise ValueError(f"num_gpus ({self.num_gpus}) must equal tensor_parallel_size "
                                 f"({self.tensor_parallel_size}): each replica holds all its shards")
        if self.unsupported_media == "describe":
            raise ValueError("unsupported_media: describe is not available in a sweep (a sweep's models have no "
                             "describe: cascade); use skip or note, or a run config with describe:")
        # a sweep's runs have no judges and no cascades: these would be dropped without a word, and a cascade model
        # would be measured on media it never got described
        for name in ("describe", "modes"):
            if getattr(self, name) is not None:
                raise ValueError(f"{name}: is not available in a sweep (its runs have no judges and no describers); "
                                 f"run this model with a run config (omnieval run) instead")
        device = str(self.options.get("device", ""))
        if self.engine == "hf" and device.startswith("cuda") and self.num_gpus <= 0:
            raise ValueError(f"options.device is {device!r} but num_gpus is 0: set num_gpus (GPUs per replica)")
        return self

    @property
    def model_path(self) -> str | None:
        return self.path or self.options.get("path")

    def gpus_per_replica(self) -> float:
        return float(self.tensor_parallel_size) if self.tensor_parallel_size > 1 else self.num_gpus

    def auto_replicas(self, free_gpus: float) -> int:
        """``replicas: auto``: as many replicas as ``free_gpus`` hold (at least 1, at most ``max_replicas``)."""
        n = max(1, int(free_gpus / self.gpus_per_replica() + 1e-9))
        return n if self.max_replicas is None else min(n, self.max_replicas)

    def as_model_config(self, replicas: int | None = None) -> ModelConfig:
        """The run config's ``ModelConfig``: ``path`` and ``tensor_parallel_size`` become engine options;
        ``replicas`` is the count a ``replicas: auto`` model was given when it started (1 before: for checks)."""
        options = dict(self.options)
        if self.model_path is not None:
            options["path"] = self.model_path
        num_gpus = self.num_gpus
        if self.tensor_parallel_size > 1:
            options["tensor_parallel_size"] = self.tensor_parallel_size
            num_gpus = float(self.tensor_parallel_size)
        if replicas is None:
            replicas = 1 if self.replicas == "auto" else self.replicas
        return ModelConfig(name=self.name, engine=self.engine, options=options, replicas=replicas,
                           batch_size=self.batch_size, num_gpus=num_gpus, num_cpus=self.num_cpus,
                           unsupported_media=self.unsupported_media, card=self.card, recipe=self.recipe)


class MetricsSettings(_Config):
    enabled: bool = True
    resamples: int = Field(default=2000, ge=1, description="bootstrap resamples per run")
    seed: int | None = Field(default=None, description="bootstrap seed (default: the sweep's seed)")
    permutations: int = Field(default=10_000, ge=1, description="sign-flip permutations per paired difference "
                              "(paired.csv, as omnieval metrics --permutations)")
    cluster: str | dict[str, str] | None = Field(
        default=None, description="the resampling unit (as omnieval metrics --cluster): item, anchor or any column "
                                  "of the predictions, or protocol -> unit; default: each protocol's own")

    @field_validator("cluster")
    @classmethod
    def _known_units(cls, v: str | dict[str, str] | None) -> str | dict[str, str] | None:
        from omnieval.protocols import known_protocols

        if isinstance(v, dict):
            unknown = sorted(set(v) - set(known_protocols()))
            if unknown:
                raise ValueError(f"cluster names unknown protocol(s) {unknown}; known: {', '.join(known_protocols())}")
            if any(not str(unit).strip() for unit in v.values()):
                raise ValueError("cluster: every protocol needs a unit (item, anchor or a column)")
        elif v is not None and not v.strip():
            raise ValueError("cluster: give a unit (item, anchor or a column)")
        return v


class SweepConfig(_Config):
    name: str = "sweep"
    output: str = Field(min_length=1, description="local path, s3:// or gs:// prefix")
    seed: int = 0
    prompts: list[str] = Field(default_factory=lambda: ["zs"])
    protocols: list[ProtocolEntry] = Field(min_length=1)
    models: list[SweepModel] = Field(min_length=1)
    decode: DecodeConfig = Field(default_factory=DecodeConfig)
    recipes: bool = Field(default=True, description="as a run's recipes: each model decoded by its family's recipe "
                                                    "where decode: and the benchmark leave an option open")
    ray: RayConfig = Field(default_factory=RayConfig)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    max_attempts: int = Field(default=2, ge=1, description="tries per run (a retry resumes the run)")
    retry_errors: bool = Field(default=True, description="a run with errored predictions is not complete")
    check_model_paths: bool = Field(
        default=True, description="check that local model folders hold config.json (false where the driver "
                                  "cannot see the workers' model storage)")
    progress_interval_s: float = Field(default=30.0, gt=0)
    release_timeout_s: float = Field(default=300.0, ge=0, description="wait for a model's GPUs between models")
    max_concurrent_models: int = Field(
        default=1, ge=1, description="models run side by side at most (1: one at a time, in the sweep's order); "
                                     "another model starts when its replicas fit the cluster's free resources")
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
        if sweep.decode.store:
            sweep = sweep.model_copy(update={"decode": sweep.decode.model_copy(
                update={"store": _resolve(sweep.decode.store, base)})})
    for i, entry in enumerate(sweep.protocols):
        check_output_apart(sweep.output, entry.benchmark, file=file, benchmark_field=f"protocols[{i}].benchmark")
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
