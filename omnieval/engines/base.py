"""The engine contract: ``score(requests) -> results``, one result per request, in order.

An engine never sees items or protocols, only instances with their media already decoded. It must not raise for
a single bad request: it returns an ``EngineResult`` with ``error`` set and the run goes on (DESIGN decision 7).

Engines are found through an open registry: ``@register_engine("name")`` on a subclass, and ``create_engine(name,
model=..., **options)`` builds one. Third-party engines register the same way (import their module first).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from omnieval.media.decoded import DecodedMedia
from omnieval.schema import Instance

_REGISTRY: dict[str, type[Engine]] = {}
# Engines whose modules import heavy stacks are registered lazily: name -> module that registers them on import.
_LAZY: dict[str, str] = {
    "simulated": "omnieval.engines.simulated",
    "hf": "omnieval.engines.hf",
    "vllm": "omnieval.engines.vllm",
}


@dataclass
class EngineRequest:
    """One model call: the instance, the decoded media of its media segments (keyed by segment ``path``) and the
    prompt style (``zs`` or ``cot``)."""

    instance: Instance
    media: dict[str, DecodedMedia] = field(default_factory=dict)
    prompt_style: str = "zs"


@dataclass
class EngineResult:
    """What an engine says about one request. ``option_logprobs`` are in label order (log-probabilities of the
    option-label tokens, before any renormalisation); ``confidence`` is in [0, 1]."""

    choice: str | None
    confidence: float | None = None
    confidence_method: str | None = None
    option_logprobs: list[float] | None = None
    raw_text: str | None = None
    error: str | None = None


@dataclass
class GenerationRequest:
    """Free-text generation (open-ended answers, judge verdicts, media descriptions): ordered prompt ``parts``
    (``prompts.PromptPart``: media by path, text), the decoded media of its media parts, and a token budget
    (None: the engine's ``max_new_tokens``). Decoding is greedy (deterministic).

    ``key`` is a stable id (instance, judge, attempt) and ``meta`` what the request is for in structured form
    (``{"task": "answer" | "judge" | "describe", ...}``): only the simulated engine reads them, to stand in for
    a model with set behaviour; real engines read the parts alone."""

    parts: list
    media: dict[str, DecodedMedia] = field(default_factory=dict)
    max_new_tokens: int | None = None
    key: str = ""
    meta: dict = field(default_factory=dict)


@dataclass
class GenerationResult:
    text: str | None
    error: str | None = None


class Engine(ABC):
    """Base class of every engine. Subclasses set ``kind`` and implement ``score``.

    ``model`` is the model name as configured (it names the predictions); ``options`` are engine-specific keyword
    arguments from the run config, validated by the subclass.
    """

    kind: str = "base"

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


def known_engines() -> list[str]:
    return sorted(set(_REGISTRY) | set(_LAZY))


def create_engine(name: str, model: str, **options) -> Engine:
    return engine_class(name)(model=model, **options)


def restricted_softmax(option_logprobs: Sequence[float]) -> list[float]:
    """Softmax over the option-label logprobs only (SPEC section 7, ``rs`` confidence). NaN/-inf entries get 0."""
    finite = [x for x in option_logprobs if x is not None and math.isfinite(x)]
    if not finite:
        return [0.0] * len(option_logprobs)
    top = max(finite)
    exps = [math.exp(x - top) if (x is not None and math.isfinite(x)) else 0.0 for x in option_logprobs]
    total = sum(exps)
    return [e / total for e in exps]


def result_from_option_logprobs(labels: Sequence[str], option_logprobs: Sequence[float],
                                raw_text: str | None = None) -> EngineResult:
    """Zero-shot scoring from logits: choice = argmax of the restricted softmax, confidence = its max (rs)."""
    probs = restricted_softmax(option_logprobs)
    if not any(probs):
        return EngineResult(choice=None, option_logprobs=list(option_logprobs), raw_text=raw_text,
                            error="no finite option-label logprob")
    best = max(range(len(probs)), key=lambda i: probs[i])
    return EngineResult(choice=labels[best], confidence=probs[best], confidence_method="rs",
                        option_logprobs=[float(x) for x in option_logprobs], raw_text=raw_text)
