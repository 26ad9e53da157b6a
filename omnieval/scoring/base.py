"""The scorer interface and registry.

A scorer reads one answer text against one item and returns a :class:`Verdict`. Scorers are pure functions of the
text and the item (no model, no files), so ``omnieval parse`` and the runs apply the same code, and a scorer is tested
by feeding it the outputs models really write next to the verdicts the benchmark's released code gives on them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

AnswerSource = Literal["parsed", "forced", "unparsed"]


@dataclass(frozen=True)
class ScoreItem:
    """What a scorer may read about the item: the option labels (``A``, ``B``, ...), the options' texts in the same
    order, the gold label, and any benchmark field a released scorer reads (``extra``, e.g. a task type)."""

    labels: tuple[str, ...]
    options: tuple[str, ...]
    answer: str
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.options):
            raise ValueError(f"{len(self.labels)} labels for {len(self.options)} options")
        if self.answer not in self.labels:
            raise ValueError(f"gold answer {self.answer!r} is not one of the labels {', '.join(self.labels)}")

    @property
    def answer_text(self) -> str:
        return self.options[self.labels.index(self.answer)]


@dataclass(frozen=True)
class Verdict:
    """One answer's reading under one rule.

    ``choice``: the option label the rule takes the answer to mean (None: no option). ``correct``: whether the rule
    counts it correct; None where the rule drops the answer from its denominator. ``source``: ``parsed`` (the option
    was found in the text), ``forced`` (the rule chose an option the text does not name, e.g. a default to A for an
    empty answer), ``unparsed`` (no option). ``how``: a few words naming the rule's branch that decided.
    """

    choice: str | None
    correct: bool | None
    source: AnswerSource
    how: str = ""


class Scorer(Protocol):
    name: str

    def score(self, text: str | None, item: ScoreItem) -> Verdict: ...


NOT_COMPUTED = "not computed: "
"""How an official verdict the scorer cannot compute begins (``official_how``), followed by the reason."""


def unavailable_reason(scorer: Scorer) -> str | None:
    """Why ``scorer``'s released rule cannot be computed here (its ``unavailable`` attribute: e.g. a rule that needs
    a model omnieval does not run offline), or None where it can. Such a scorer's ``score`` is never called for an
    official verdict: the verdict stays empty and says why (``scoring.verdicts``), and no number stands in for it."""
    return getattr(scorer, "unavailable", None)


_REGISTRY: dict[str, Callable[[], Scorer]] = {}
# Modules that register scorers on import; a name resolves by importing them all once.
_MODULES: tuple[str, ...] = (
    "omnieval.scoring.robust",
    "omnieval.scoring.mmau",
    "omnieval.scoring.mmar",
    "omnieval.scoring.omnibench",
    "omnieval.scoring.av_odyssey",
    "omnieval.scoring.videomme",
    "omnieval.scoring.worldsense",
    "omnieval.scoring.daily_omni",
    "omnieval.scoring.omnivideobench",
    "omnieval.scoring.voicebench", "omnieval.scoring.mmsu", "omnieval.scoring.jointavbench",
    "omnieval.scoring.videomme_v2",
    "omnieval.scoring.video_holmes", "omnieval.scoring.mmau_pro",
)


def register_scorer(name: str) -> Callable:
    """Class decorator: ``@register_scorer("mmau")`` makes ``get_scorer("mmau")`` return an instance of the class."""

    def wrap(cls):
        if name in _REGISTRY:
            raise ValueError(f"scorer {name!r} registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def _load_all() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def scorer_names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get_scorer(name: str) -> Scorer:
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(f"unknown scorer {name!r}; known scorers: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]()


def verdict_for(choice: str | None, item: ScoreItem, source: AnswerSource, how: str = "") -> Verdict:
    """The common case: correct when the chosen label is the gold one; an unparsed answer counts as wrong."""
    return Verdict(choice=choice, correct=choice == item.answer if choice is not None else False, source=source,
                   how=how)


def labels_for(n: int) -> tuple[str, ...]:
    """``A``, ``B``, ... for ``n`` options (the labels every converted benchmark uses)."""
    if not 0 < n <= 26:
        raise ValueError(f"{n} options; between 1 and 26 are labelled A-Z")
    return tuple(chr(ord("A") + i) for i in range(n))
