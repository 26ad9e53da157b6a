"""Run configuration: a pydantic ``RunConfig`` read from YAML with ``yaml.safe_load``.

A run is plain data: this config plus the versions and seed recorded in ``run.json`` rebuild it exactly. Every
error names the file and the field (``models[1].engine``), and is raised before any model work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from omnieval.core.prompts import PROMPT_STYLES
from omnieval.core.schema import DEFAULT_MODE, InputError


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Config):
    """One model: which engine runs it and how it is scaled."""

    name: str = Field(min_length=1)
    engine: str
    options: dict[str, Any] = Field(default_factory=dict, description="engine-specific keyword arguments")
    replicas: int = Field(default=1, ge=1, description="engine actors (each holds one model copy)")
    batch_size: int = Field(default=16, ge=1)
    num_gpus: float = Field(default=0.0, ge=0.0, description="GPUs per replica (0 on CPU machines)")
    num_cpus: float = Field(default=1.0, ge=0.0, description="CPUs per replica")
    recipe: bool | str | None = Field(
        default=None, description="whose settings decode this model's media: unset or true, its family's recipe "
                                  "(omnieval.engines.recipes, read from the model folder's config.json); a family "
                                  "name, that family's recipe (an endpoint or simulated model standing for one); "
                                  "false or omnieval-default, omnieval's own defaults. A run's decode: options and "
                                  "a benchmark's pinned settings win over it (docs/runs.md)")
    describe: DescribeConfig | None = Field(
        default=None, description="cascade: a describer turns these modalities into text before this model answers")
    modes: list[Literal["mcq", "open"]] | None = Field(
        default=None, description="this model's modes, a subset of the run's (default: all of them); e.g. open-ended "
                                  "answers only from the models worth judging")
    unsupported_media: Literal["skip", "note", "describe"] = Field(
        default="skip", description="what a prompt's media part of a modality the model cannot take becomes: skip "
                                    "(the row is marked skipped, not asked, and left out of every metric), note (a "
                                    "one-line text note in its place, recorded on the row) or describe (the "
                                    "describer of ``describe`` turns it into text)")
    samples: int = Field(
        default=1, ge=1, le=1000,
        description="repeated samples: answer every multiple-choice instance k times, each a row with its "
                    "``sample`` index (0..k-1) and its own seed derived from the run seed and the index; a "
                    "zero-shot answer is drawn from the label distribution at ``temperature`` (default 1 when "
                    "sampling), a thinking model samples its reasoning per sample. The metrics split each "
                    "interval into data and prediction noise (docs/reference.md, Repeated samples)")
    temperature: float | None = Field(
        default=None, gt=0.0, description="temperature of the label draw of repeated zero-shot samples (default 1)")
    top_p: float | None = Field(
        default=None, gt=0.0, le=1.0, description="nucleus of the label draw of repeated zero-shot samples: the "
                                                  "most probable labels holding this share (default 1: all)")
    card: str | None = Field(
        default=None, min_length=1,
        description="the model's name in the published-numbers table (omnieval cards), when its weights folder is "
                    "not named so: the report sets the card's numbers beside this model's. A label only: not part "
                    "of the run's identity")

    @field_validator("unsupported_media")
    @classmethod
    def _describer_given(cls, v: str, info: ValidationInfo) -> str:
        if v == "describe" and info.data.get("describe") is None:
            raise ValueError("unsupported_media: describe needs a describer: add describe: {model: {...}} to this "
                             "model (its prompts are optional: the modalities the model cannot take are described)")
        return v

    @model_validator(mode="before")
    @classmethod
    def _path_into_options(cls, data: Any) -> Any:
        """``path:`` beside ``engine:``, as a sweep's models write it, is ``options.path`` here: a model entry
        copied from a sweep into a run config means the same model (and the same run identity)."""
        options = data.get("options") or {} if isinstance(data, dict) else None
        if not isinstance(options, dict) or "path" not in data or "path" in cls.model_fields:
            return data  # not a mapping: the fields' own checks name what is wrong
        data = dict(data)
        path = data.pop("path")
        if "path" in options and str(options["path"]) != str(path):
            raise ValueError(f"path {path!r} and options.path {options['path']!r} disagree")
        data["options"] = {**options, "path": path}
        return data

    @field_validator("name")
    @classmethod
    def _folder_safe(cls, v: str) -> str:
        from omnieval.core.names import check_name_part

        return check_name_part(v, "model name")

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        from omnieval.core.engine_names import known_engines

        if v not in known_engines():
            raise ValueError(f"unknown engine {v!r}; known engines: {', '.join(known_engines())}")
        return v


class DescribeConfig(_Config):
    """A cascade's first stage: ``model`` (a describer; any engine that generates text) turns the media of the
    listed modalities into text, one description per distinct file with that modality's prompt; the answering
    model then receives ``[<modality> description: ...]`` in place of the media."""

    model: ModelConfig
    prompts: dict[str, str] = Field(
        default_factory=lambda: {"audio": "Describe this audio."},
        description="modality -> describe prompt (audio, video, image, pointcloud)")
    max_new_tokens: int = Field(default=96, ge=1)

    @field_validator("prompts")
    @classmethod
    def _media_modalities(cls, v: dict[str, str]) -> dict[str, str]:
        from omnieval.core.schema import MEDIA_MODALITIES

        unknown = sorted(set(v) - set(MEDIA_MODALITIES))
        if unknown or not v:
            raise ValueError(f"describe prompts are keyed by media modality ({', '.join(MEDIA_MODALITIES)}); "
                             f"got {sorted(v)}")
        return v


ModelConfig.model_rebuild()  # ModelConfig.describe refers to DescribeConfig, defined after it

DEFAULT_DESCRIBE_PROMPTS = {
    "audio": "Describe this audio.",
    "video": "Describe this set of frames. Consider the frames to be a part of the same video.",
    "image": "Describe the image.",
    "pointcloud": "Describe the 3d model.",
}


#: ``decode:`` options beyond today's ``num_frames`` / ``max_side`` (``media.sampling``).
SAMPLING_OPTIONS = ("fps", "min_frames", "max_frames", "frame_factor", "index_rule", "min_pixels", "max_pixels",
                    "size_factor", "total_pixels", "max_audio_seconds")


class DecodeConfig(_Config):
    """How media are decoded. The sampling options (``fps`` and its bounds, ``index_rule``, the pixel budget,
    ``SAMPLING_OPTIONS``) are left out of the config's dump while unset, so a config that sets none of them has the
    run identity and the decode keys it had before they existed (``media.sampling``: the rules)."""

    num_frames: int = Field(default=8, ge=1, description="video frames sampled uniformly per clip")
    max_side: int | None = Field(default=320, ge=16, description="downscale frames so the longer side fits")
    fps: float | None = Field(
        default=None, gt=0, description="sample video by rate instead of num_frames: duration * fps frames, within "
                                        "[min_frames, max_frames], a multiple of frame_factor (Qwen-Omni's rule)")
    min_frames: int | None = Field(default=None, ge=1, description="with fps: the fewest frames (default 4)")
    max_frames: int | None = Field(default=None, ge=1, description="with fps: the most frames (default 768)")
    frame_factor: int | None = Field(default=None, ge=1, description="with fps: frame counts are multiples of it "
                                                                      "(default 2)")
    index_rule: Literal["centres", "linspace", "uniform", "uniform_shifted"] | None = Field(
        default=None, description="which frames: centres (the frame on screen at each of N equal bins' centre, the "
                                  "default), linspace (frame indices round(linspace(0, frames - 1, N))), uniform "
                                  "(k * frames // N: transformers' video processors) or uniform_shifted (the "
                                  "middle frame of each of N runs: InternVL's video processor)")
    min_pixels: int | None = Field(default=None, ge=1, description="with max_pixels: the fewest pixels a frame has "
                                                                    "(default size_factor squared)")
    max_pixels: int | None = Field(
        default=None, ge=1, description="size frames by a pixel budget instead of max_side: sides multiples of "
                                        "size_factor, h * w within [min_pixels, max_pixels], aspect kept")
    size_factor: int | None = Field(default=None, ge=1, description="with max_pixels: the sides' factor (28 for "
                                                                     "Qwen2.5-Omni, 32 for Qwen3-Omni; default 28)")
    total_pixels: int | None = Field(
        default=None, ge=1, description="with max_pixels: the pixels of all a clip's frames together (each frame's "
                                        "budget is total_pixels / frames * frame_factor, as Qwen-Omni's utilities)")
    sample_rate: int = Field(default=16_000, ge=1000)
    max_audio_seconds: float | None = Field(
        default=None, gt=0, description="decode audio up to this many seconds (for models or benchmarks that take no "
                                        "more); a file shorter than that is decoded whole")
    media_check: Literal["probe", "exists", "off"] = Field(
        default="probe", description="pre-flight check of every distinct media file before model work")
    store: str | None = Field(
        default=None, min_length=1,
        description="a decoded-media store (local folder, relative to the config file, or s3:// / gs:// prefix): "
                    "media found there are read instead of decoded, media decoded are added; a sweep's runs use "
                    "<sweep output>/media unless it names one. Not part of a run's identity")

    @model_validator(mode="after")
    def _sampling_options_agree(self) -> DecodeConfig:
        """Options that would contradict each other, or that have no effect without the option they qualify."""
        given = self.model_fields_set
        if self.fps is not None and "num_frames" in given:
            raise ValueError("num_frames and fps both say how many frames to sample: give one of them")
        for option in ("min_frames", "max_frames", "frame_factor"):
            if getattr(self, option) is not None and self.fps is None:
                raise ValueError(f"{option} bounds sampling by rate: it needs fps")
        if self.min_frames and self.max_frames and self.min_frames > self.max_frames:
            raise ValueError(f"min_frames {self.min_frames} is above max_frames {self.max_frames}")
        for option in ("min_pixels", "size_factor", "total_pixels"):
            if getattr(self, option) is not None and self.max_pixels is None:
                raise ValueError(f"{option} qualifies a pixel budget: it needs max_pixels")
        if self.max_pixels is not None and "max_side" in given and self.max_side is not None:
            raise ValueError("max_side and max_pixels both size the frames: give one of them")
        if self.min_pixels and self.max_pixels and self.min_pixels > self.max_pixels:
            raise ValueError(f"min_pixels {self.min_pixels} is above max_pixels {self.max_pixels}")
        return self

    @model_serializer(mode="wrap")
    def _unset_sampling_left_out(self, handler) -> dict[str, Any]:
        """The sampling options appear in the dump (run.json's config, the run identity) only when set, and the
        defaults they replace (``num_frames`` under ``fps``, ``max_side`` under ``max_pixels``) do not: run.json
        records the rule the frames were taken by, never one that was not used."""
        data = handler(self)
        replaced = {"num_frames"} if self.fps is not None else set()
        replaced |= {"max_side"} if self.max_pixels is not None else set()
        return {k: v for k, v in data.items() if not (k in SAMPLING_OPTIONS and v is None) and k not in replaced}

    @field_validator("media_check", mode="before")
    @classmethod
    def _yaml_off(cls, v: Any) -> Any:
        """YAML 1.1 (``yaml.safe_load``) reads an unquoted ``off`` (and ``no``, ``false``) as ``False``: that is the
        documented ``off``, not a type error."""
        return "off" if v is False else v



class RayConfig(_Config):
    num_cpus: int | None = Field(
        default=None, ge=1, description="logical CPUs of the embedded local Ray (default: max(8, cores))")
    check_resources: bool = Field(
        default=True, description="refuse, before model work, a run whose actors cannot fit the cluster's CPUs and "
                                  "GPUs (turn off on an autoscaling cluster that grows on demand)")


class RunConfig(_Config):
    name: str = "run"
    protocol: str | None = Field(
        default=None, description="the benchmark's protocol (from its benchmark.json when not given; must agree)")
    protocol_options: dict[str, Any] = Field(
        default_factory=dict, description="the protocol's knobs (its ``Options`` model), checked before model work")
    benchmark: str
    scorer: str | None = Field(
        default=None, description="the official scorer of generated answers (omnieval.scoring; from the "
                                  "benchmark.json's scorer when not given; none: no official verdicts)")
    output: str = Field(min_length=1, description="a local folder (relative to the config file), or an s3:// or "
                                                  "gs:// prefix")
    seed: int = 0
    prompts: list[str] = Field(default_factory=lambda: ["zs"])
    models: list[ModelConfig] = Field(min_length=1)
    decode: DecodeConfig = Field(default_factory=DecodeConfig)
    recipes: bool = Field(
        default=True, description="decode each model's media by its family's recipe where its own decode: options "
                                  "and the benchmark's pinned settings leave a value open (false: omnieval's own "
                                  "defaults for every model but one that names a recipe)")
    ray: RayConfig = Field(default_factory=RayConfig)
    limit_items: int | None = Field(
        default=None, ge=1, description="evaluate N items drawn across splits in proportion (seeded by the run's "
                                        "seed); the run says what it kept of each split")
    modes: list[Literal["mcq", "open"]] = Field(
        default_factory=lambda: [DEFAULT_MODE], description="mcq (options shown) and/or open (free answer, judged)")
    judges: list[ModelConfig] = Field(default_factory=list, description="the judges of open-ended answers")
    judge_template: str = Field(default="v1", description="versioned judge prompt template (omnieval.core.judges)")
    allow_remote_code: bool = Field(
        default=False, description="let engines run code shipped with a model folder (trust_remote_code); logged "
                                   "and recorded in run.json")
    check_model_paths: bool = Field(
        default=True, description="check on the driver that model folders exist and hold config.json (false where "
                                  "only the workers can see the model storage)")
    max_error_rate: float = Field(
        default=0.0, ge=0.0, le=1.0, description="share of rows that may end in an error (media decode, engine) "
                                                 "before the run exits non-zero (a run where no row is an answer "
                                                 "exits non-zero whatever this allows)")

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, v: str | None) -> str | None:
        from omnieval.protocols import known_protocols

        if v is not None and v not in known_protocols():
            raise ValueError(f"unknown protocol {v!r}; known protocols: {', '.join(known_protocols())}")
        return v

    @field_validator("prompts")
    @classmethod
    def _known_prompts(cls, v: list[str]) -> list[str]:
        for p in v:
            if p not in PROMPT_STYLES:
                raise ValueError(f"unknown prompt style {p!r}; known: {', '.join(PROMPT_STYLES)}")
        if not v:
            raise ValueError("at least one prompt style")
        return v

    @model_validator(mode="after")
    def _unique_models(self) -> RunConfig:
        from omnieval.core.judges import TEMPLATES

        for kind, names in (("model", [m.name for m in self.models]), ("judge", [j.name for j in self.judges])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{kind} names must be unique, repeated: {dupes}")
        if not self.modes or len(set(self.modes)) != len(self.modes):
            raise ValueError(f"modes must be distinct and not empty, got {self.modes}")
        if "open" in self.modes and not self.judges:
            raise ValueError("open-ended mode needs at least one judge (judges: [...])")
        if "open" in self.modes and "thinking" in self.prompts:
            raise ValueError("prompt style 'thinking' answers multiple-choice questions (modes: [mcq]); an open-ended "
                             "run takes zs or cot")
        for m in self.models:
            if m.samples > 1 and "open" in modes_of(self, m):
                raise ValueError(f"model {m.name!r}: samples: {m.samples} repeats multiple-choice answers only; "
                                 "give it modes: [mcq]")
            if m.samples == 1 and (m.temperature is not None or m.top_p is not None):
                raise ValueError(f"model {m.name!r}: temperature and top_p set how repeated samples are drawn; "
                                 "give samples: k (k > 1) with them")
            if m.modes is not None and (not m.modes or len(set(m.modes)) != len(m.modes)
                                        or not set(m.modes) <= set(self.modes)):
                raise ValueError(f"model {m.name!r}: modes {m.modes} must be distinct, not empty and among the "
                                 f"run's modes {self.modes}")
        if self.judge_template not in TEMPLATES:
            raise ValueError(f"unknown judge_template {self.judge_template!r}; known: {', '.join(TEMPLATES)}")
        return self


def modes_of(config: RunConfig, model: ModelConfig) -> list[str]:
    """The modes ``model`` runs in (its own ``modes``, else the run's), in the run's order."""
    return [m for m in config.modes if model.modes is None or m in model.modes]


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validated(model: type[BaseModel], data: Any, what: str, file: str | Path | None = None):
    """``model.model_validate(data)``, with the first problem as an ``InputError`` naming the file and field."""
    if not isinstance(data, dict):
        raise InputError(f"a {what} must be a YAML mapping", file=file)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"].removeprefix("Value error, "), file=file,
                         field=_field_path(err["loc"]) or None) from None


def read_yaml(path: Path, what: str) -> Any:
    """A YAML file's data; unreadable files and syntax errors are ``InputError``s with the line and column."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror}", file=path) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(f"invalid YAML{where}: {getattr(exc, 'problem', exc)}", file=path) from None


def _relative_to(value: str, base_dir: str | Path) -> str:
    """``value`` taken relative to ``base_dir`` when it is a relative local path (URIs and absolute paths stay)."""
    if "://" in value or Path(value).is_absolute():
        return value
    return str((Path(base_dir) / value).resolve())


def _model_paths_relative_to(model: ModelConfig, base_dir: str | Path) -> ModelConfig:
    """A model's (and its describer's) ``options.path`` taken relative to the config file, like ``benchmark``, where
    it exists there (a relative path found nowhere is left as written, so the engine check can say it looks like a
    hub id)."""
    update: dict[str, Any] = {}
    path = model.options.get("path")
    if isinstance(path, str) and path and Path(_relative_to(path, base_dir)).exists():
        update["options"] = {**model.options, "path": _relative_to(path, base_dir)}
    if model.describe is not None:
        update["describe"] = model.describe.model_copy(
            update={"model": _model_paths_relative_to(model.describe.model, base_dir)})
    return model.model_copy(update=update) if update else model


def check_output_apart(output: str, benchmark: str, *, file: str | Path | None = None, field: str = "output",
                       benchmark_field: str = "benchmark") -> None:
    """An output folder is the run's alone: equal to the benchmark folder, inside it or holding it, a run (or
    ``--overwrite``) would write into or clear the benchmark's folder. Remote outputs cannot hold a local
    benchmark."""
    if "://" in output or "://" in benchmark:
        return
    out, bench = Path(output).resolve(), Path(benchmark).resolve()
    if out == bench or bench in out.parents:
        raise InputError(f"the output {out} is the benchmark folder or inside it ({benchmark_field}: {bench}): a run "
                         "writes its own folders there; name a folder outside the benchmark", file=file, field=field)
    if out in bench.parents:
        raise InputError(f"the output {out} holds the benchmark folder ({benchmark_field}: {bench}): an output "
                         "folder holds the run's files only; name a folder of its own (e.g. out/)", file=file,
                         field=field)


def parse_run_config(data: Any, *, file: str | Path | None = None, base_dir: str | Path | None = None) -> RunConfig:
    """Validate a config mapping; relative ``benchmark``/``output`` paths and model folders (``options.path``) are
    taken relative to ``base_dir`` (the config file's folder), so a config means the same from any working
    folder."""
    config = validated(RunConfig, data, "run config", file)
    if base_dir is not None:
        updates: dict[str, Any] = {key: _relative_to(getattr(config, key), base_dir) for key in ("benchmark", "output")}
        updates["models"] = [_model_paths_relative_to(m, base_dir) for m in config.models]
        updates["judges"] = [_model_paths_relative_to(j, base_dir) for j in config.judges]
        if config.decode.store:
            updates["decode"] = config.decode.model_copy(
                update={"store": _relative_to(config.decode.store, base_dir)})
        config = config.model_copy(update=updates)
    check_output_apart(config.output, config.benchmark, file=file)
    return config


def load_run_config(path: str | Path) -> RunConfig:
    path = Path(path)
    return parse_run_config(read_yaml(path, "config"), file=path, base_dir=path.parent)
