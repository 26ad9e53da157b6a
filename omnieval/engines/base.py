"""The engine contract: ``score(requests) -> results``, one result per request, in order.

An engine never sees items or protocols, only instances with their media already decoded. It must not raise for
a single bad request: it returns an ``EngineResult`` with ``error`` set and the run goes on (docs/architecture.md,
decision 7).

Engines are found through an open registry: ``@register_engine("name")`` on a subclass, and ``create_engine(name,
model=..., **options)`` builds one. Third-party engines register the same way (import their module first).
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from omnieval.core.engine_names import LAZY as _LAZY
from omnieval.core.engine_names import REGISTRY as _REGISTRY
from omnieval.core.keyed import keyed_seed
from omnieval.core.schema import Instance
from omnieval.kernels.softmax import restricted_softmax
from omnieval.media.decoded import DecodedMedia


@dataclass
class EngineRequest:
    """One model call: the instance, the decoded media of its media segments (keyed by segment ``path``) and the
    prompt style (``zs``, ``cot`` or ``thinking``)."""

    instance: Instance
    media: dict[str, DecodedMedia] = field(default_factory=dict)
    prompt_style: str = "zs"
    sample_seed: int | None = None  # a repeated sample's own seed (``run.answers.SampleDraws``); None for one

    def thinking_seed(self, engine_seed: int, model: str, style: str) -> int:
        """The seed of a sampled reasoning: the engine's seed and the instance, or a repeated sample's own seed
        in its place (so the k samples of one instance reason apart)."""
        base = engine_seed if self.sample_seed is None else self.sample_seed
        return keyed_seed(base, model, self.instance.instance_id, style)


@dataclass
class EngineResult:
    """What an engine says about one request, and the one result record of the run's stages: the model stage
    (``run.stages.ModelCalls``) keeps it, adding ``latency_s`` and ``attempts``, and hands it to the row builder in
    the same actor; each field keeps its name in the prediction row. ``option_logprobs`` are in label order
    (log-probabilities of the option-label tokens, before any renormalisation); ``confidence`` is in [0, 1]."""

    choice: str | None = None
    confidence: float | None = None
    confidence_method: str | None = None
    option_logprobs: list[float] | None = None
    raw_text: str | None = None
    error: str | None = None
    answer_source: str | None = None  # chain-of-thought: "parsed" (from its text) or "forced" (text had none)
    shown: dict | None = None  # what the model was shown (``shown.Shown.to_dict``); None where the engine cannot say
    error_kind: str | None = None  # the kind of ``error`` where the engine knows it (``media``: a medium was dropped)
    reasoning: str | None = None  # thinking style: the reasoning block, split off ``raw_text`` (engines/thinking.py)
    reasoning_tokens: int | None = None  # tokens the reasoning took (the thinking budget where closed by force)
    latency_s: float | None = None  # set by the model stage: the call's seconds per request of its batch
    attempts: int | None = None  # set by the model stage for generate calls: 2 where the strict retry was asked


@dataclass
class GenerationRequest:
    """Free-text generation (open-ended answers, judge verdicts, media descriptions): ordered prompt ``parts``
    (``prompts.PromptPart``: media by path, text), the decoded media of its media parts, and a token budget
    (None: the engine's ``max_new_tokens``). Decoding is greedy (deterministic).

    ``key`` is a stable id (instance, judge, attempt), ``meta`` what the request is for in structured form
    (``{"task": "answer" | "judge" | "describe", ...}``) and ``instance`` the instance an open-ended answer is
    asked about (None for judges and describers): only the simulated engine reads them, to stand in for a model
    with set behaviour; real engines read the parts alone."""

    parts: list
    media: dict[str, DecodedMedia] = field(default_factory=dict)
    max_new_tokens: int | None = None
    key: str = ""
    meta: dict = field(default_factory=dict)
    instance: Instance | None = None


@dataclass
class GenerationResult:
    """What an engine says about one free-text request: ``raw_text``, as the generated text is named from here to
    the prediction row (the model stage copies it, by name, into an ``EngineResult``)."""

    raw_text: str | None
    error: str | None = None
    shown: dict | None = None  # as ``EngineResult.shown``
    error_kind: str | None = None  # as ``EngineResult.error_kind``


class Engine(ABC):
    """Base class of every engine. Subclasses set ``kind`` and implement ``score``.

    ``model`` is the model name as configured (it names the predictions); ``options`` are engine-specific keyword
    arguments from the run config, validated by the subclass.
    """

    kind: str = "base"
    model_folder_option: str | None = None
    """The option naming a local model folder (``path``), checked on the driver unless the config says the
    driver cannot see the workers' model storage (``check_model_paths: false``)."""
    packages: tuple[str, ...] = ()
    """Python packages the engine needs beyond omnieval's own, checked on the driver before Ray starts (an engine
    replica that cannot import them would fail only after Ray and the other models started)."""
    extra: str | None = None
    """The ``omnieval[extra]`` that installs ``packages`` (named in the refusal)."""
    prompt_styles: tuple[str, ...] = ("zs", "cot")
    """The prompt styles ``score`` runs as such; a run asking another one of this engine is refused before model
    work (``plan.check_generation``): ``thinking`` needs an engine that splits a reasoning block off."""

    def __init__(self, model: str, **options):
        self.model = model
        self.options = options

    @abstractmethod
    def score(self, requests: Sequence[EngineRequest]) -> list[EngineResult]:
        """Score a batch. Must return exactly ``len(requests)`` results in the same order."""

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Greedy free-text generation, one result per request, in order (never raises for one request).
        Optional: an engine that cannot generate says so, and a run that needs it fails before model work."""
        raise NotImplementedError(f"engine {self.kind!r} does not generate free text")

    @classmethod
    def can_generate(cls) -> bool:
        return cls.generate is not Engine.generate

    @classmethod
    def check_options(cls, options: dict) -> None:
        """Check a run config's ``options`` for this engine on the driver, before Ray starts (a typo must not
        surface inside an actor after other models already ran): unknown and missing options from the
        constructor's signature, then the engine's own value checks (``validate_options``). Raises
        ``OptionError`` naming the option."""
        params = list(inspect.signature(cls.__init__).parameters.values())[2:]  # after self, model
        named = [p for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            known = {p.name for p in named}
            for name in sorted(set(options) - known):
                raise OptionError(name, f"unknown option {name!r} of engine {cls.kind!r}; known: "
                                        f"{', '.join(sorted(known))}")
        for p in named:
            if p.default is p.empty and p.name not in options:
                raise OptionError(p.name, f"engine {cls.kind!r} needs option {p.name!r}")
        cls.validate_options(options)

    @classmethod
    def validate_options(cls, options: dict) -> None:
        """Engine-specific value checks of ``options`` (cheap, no model load); raise ``OptionError``."""
        return None

    @classmethod
    def accepted_modalities(cls, options: dict) -> frozenset[str]:
        """The media modalities (of ``schema.MEDIA_MODALITIES``: ``video``, ``audio``, ``image``, ``pointcloud``)
        this engine, with these ``options``, gives the model as media; any other media part of a prompt is one
        the model cannot take, and the run's ``unsupported_media`` policy decides what happens to it (skip the
        row, a text note, or a describer's text).

        Called on the driver before any model work, with options already checked by ``check_options``: it must be
        cheap (read the model folder's ``config.json`` at most, never load a model) and must agree with what the
        engine's ``score`` / ``generate`` then do with such a part. A folder it cannot read is an ``OptionError``
        naming the option. Default: none (a text model)."""
        return frozenset()


class OptionError(ValueError):
    """A bad engine option; ``option`` names it (the run maps it to ``models[i].options.<option>``)."""

    def __init__(self, option: str, message: str):
        self.option = option
        super().__init__(message)


def missing_package(cls: type[Engine]) -> str | None:
    """The first of an engine's ``packages`` that is not installed here, or None."""
    import importlib.util

    return next((p for p in cls.packages if importlib.util.find_spec(p) is None), None)


def check_model_folder(kind: str, path: object) -> None:
    """A model folder must be a local folder holding ``config.json``: nothing is downloaded at run time, so a hub
    id (``Qwen/Qwen2.5-Omni-7B``) or a missing folder is refused here rather than inside an actor."""
    from pathlib import Path

    if not isinstance(path, str | Path) or not str(path):
        raise OptionError("path", f"{kind} engine: option 'path' must be a local model folder, got {path!r}")
    folder = Path(path)
    if not folder.is_dir():
        hint = (" (it looks like a hub id: download the model first; nothing is fetched at run time)"
                if not folder.is_absolute() and str(path).count("/") == 1 else "")
        raise OptionError("path", f"{kind} engine: no model folder at {path}{hint}")
    if not (folder / "config.json").is_file():
        raise OptionError("path", f"{kind} engine: no config.json in the model folder {path}")

    def close(self) -> None:  # noqa: B027 (an optional hook with a default, not an abstract method)
        """Release resources (GPU memory, subprocesses)."""


def register_engine(name: str) -> Callable[[type[Engine]], type[Engine]]:
    """Class decorator adding an engine to the registry under ``name``."""

    def deco(cls: type[Engine]) -> type[Engine]:
        cls.kind = name
        _REGISTRY[name] = cls
        return cls

    return deco


def engine_class(name: str) -> type[Engine]:
    """Look an engine up by name, importing its module on first use. Unknown names raise ``KeyError`` listing the
    known ones."""
    if name not in _REGISTRY and name in _LAZY:
        import importlib

        importlib.import_module(_LAZY[name])
    if name not in _REGISTRY:
        known = sorted(set(_REGISTRY) | set(_LAZY))
        raise KeyError(f"unknown engine {name!r}; known engines: {', '.join(known)}")
    return _REGISTRY[name]


def create_engine(name: str, model: str, **options) -> Engine:
    return engine_class(name)(model=model, **options)


def result_from_option_logprobs(labels: Sequence[str], option_logprobs: Sequence[float],
                                raw_text: str | None = None) -> EngineResult:
    """Zero-shot scoring from logits: choice = argmax of the restricted softmax, confidence = its max (rs)."""
    probs = restricted_softmax(option_logprobs)
    if not probs or math.isnan(probs[0]):  # NaN everywhere: no label has a finite logprob
        return EngineResult(choice=None, option_logprobs=list(option_logprobs), raw_text=raw_text,
                            error="no finite option-label logprob")
    best = max(range(len(probs)), key=lambda i: probs[i])
    return EngineResult(choice=labels[best], confidence=probs[best], confidence_method="rs",
                        option_logprobs=[float(x) for x in option_logprobs], raw_text=raw_text)


def cot_result(inst: Instance, option_logprobs: Sequence[float], text: str) -> EngineResult:
    """A chain-of-thought answer, one rule for every engine that reads the label logits after the reasoning: the
    label parsed from the text (``prompts.parse_answer``) when it parses, its confidence the restricted softmax at
    the answer position; else the argmax there, marked ``forced``: the model wrote no answer and the logits made
    one (counted in ``forced_rate``, so a reasoning that never concludes is seen, not scored as if it had)."""
    from omnieval.core.prompts import parse_answer

    res = result_from_option_logprobs(inst.option_labels, option_logprobs, raw_text=text)
    if res.error is not None:
        return res
    parsed = parse_answer(text, inst.option_labels, inst.option_texts)
    if parsed is None:
        res.answer_source = "forced"
        return res
    res.confidence = restricted_softmax(option_logprobs)[inst.option_labels.index(parsed)]
    res.choice, res.answer_source = parsed, "parsed"
    return res

