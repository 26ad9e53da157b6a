"""Both verdicts of one generated answer, as the columns a prediction row carries (docs/scoring.md).

A run scores every answer whose option was read from generated text (chain-of-thought, generate-and-parse
endpoints) twice, in one place for every engine (``run.answers.PredictionRows``): by omnieval's own rule
(``robust``) and by the benchmark's released rule (``official``: the scorer named by the run's ``scorer`` or its
benchmark's ``benchmark.json``; a scorer whose rule cannot be computed here, ``base.unavailable_reason``, leaves
the official columns empty with ``official_how`` saying why). The row's ``choice`` and ``correct`` stay the robust
reading the engine made, so every other metric keeps its meaning; the official columns are null where no official
scorer is set.
"""

from __future__ import annotations

import json
from pathlib import Path

from omnieval.core.schema import VERDICT_COLUMNS, InputError, Instance
from omnieval.scoring.base import NOT_COMPUTED, ScoreItem, Verdict, get_scorer, scorer_names, unavailable_reason

SCORER_COLUMN = "scorer"
"""The request column naming a run's official scorer (a run tag: one pipeline may answer several runs)."""


def check_scorer(name: str | None, *, file: str | Path | None = None, field: str = "scorer") -> str | None:
    """``name`` when it names a registered scorer (or is None); an ``InputError`` naming the known ones otherwise."""
    if name is None:
        return None
    if not isinstance(name, str) or name not in scorer_names():
        raise InputError(f"unknown scorer {name!r}; known scorers: {', '.join(scorer_names())}", file=file,
                         field=field)
    return name


def benchmark_scorer(bench, override: str | None = None) -> str | None:
    """The official scorer of a run: its config's ``scorer`` where set, else the benchmark's (``benchmark.json``'s
    ``scorer``), else None. ``bench`` is a loaded ``datasets.benchmark.Benchmark``; its ``scorer`` attribute is read
    where it has one, else the raw ``benchmark.json`` beside its items."""
    if override is not None:
        return check_scorer(override)
    meta = Path(bench.root) / "benchmark.json"
    name = getattr(bench, "scorer", None)
    if name is None and meta.is_file():
        try:
            name = json.loads(meta.read_text(encoding="utf-8")).get("scorer")
        except (OSError, ValueError, AttributeError):  # load_benchmark has read (and checked) this file already
            name = None
    return check_scorer(name, file=meta)


def score_item(inst: Instance) -> ScoreItem | None:
    """What a scorer reads about ``inst``: its labels, option texts, gold label and breakdowns (``extra``); None
    where its gold label is not one of its labels (no rule can score it)."""
    if inst.target not in inst.option_labels:
        return None
    return ScoreItem(labels=tuple(inst.option_labels), options=tuple(inst.option_texts), answer=inst.target,
                     extra={"task": inst.task, "subtask": inst.field("subtask"), "category": inst.category,
                            **(inst.field("breakdowns") or {})})


def answer_verdicts(inst: Instance, text: str, scorer: str | None) -> dict:
    """The verdict columns of one generated answer ``text``: the robust rule's reading, and the official rule's
    where ``scorer`` names one (null columns otherwise). A scorer that fails on a text leaves that row's official
    columns null with the failure in ``official_how``: the row drops out of the official accuracy, where ``n`` shows
    it, and the answers already made are kept."""
    item = score_item(inst)
    out = dict.fromkeys(VERDICT_COLUMNS)
    if item is None:
        return out
    robust = get_scorer("robust").score(text, item)
    out.update(robust_choice=robust.choice, robust_source=robust.source)
    if scorer is not None:
        reason = unavailable_reason(get_scorer(scorer))
        if reason is not None:  # a rule omnieval cannot compute: no verdict, and why (never a stand-in number)
            out["official_how"] = NOT_COMPUTED + reason
            return out
        try:
            official = get_scorer(scorer).score(text, item)
        except Exception as exc:  # one scorer bug never loses a batch of model answers
            out["official_how"] = f"scorer {scorer} failed: {type(exc).__name__}: {exc}"
            return out
        out.update(_official(official, item))
    return out


def open_verdicts(inst: Instance, text: str | None, scorer: str | None) -> dict | None:
    """The official columns of an open instance's answer (``Instance.open_only``) where its benchmark's released rule
    is a fixed, offline verdict: the scorer's ``score_open(text, inst)`` (VoiceBench's ``advbench``: the refusal
    list), which returns None where it has no such rule for the instance; None too without a scorer, or one with no
    ``score_open``. A failing rule leaves the columns null with the failure in ``official_how``."""
    if scorer is None or not inst.open_only:
        return None
    rule = getattr(get_scorer(scorer), "score_open", None)
    if rule is None:
        return None
    out = dict.fromkeys(VERDICT_COLUMNS)
    try:
        verdict = rule(text, inst)
    except Exception as exc:  # one scorer bug never loses a batch of model answers
        out["official_how"] = f"scorer {scorer} failed: {type(exc).__name__}: {exc}"
        return out
    if verdict is None:
        return None
    return out | {"official_correct": verdict.correct, "official_source": verdict.source,
                  "official_how": verdict.how or None}


def _official(verdict: Verdict, item: ScoreItem) -> dict:
    """The official columns of a verdict; a choice outside the item's labels is no option."""
    choice = verdict.choice if verdict.choice in item.labels else None
    return {"official_choice": choice, "official_correct": verdict.correct, "official_source": verdict.source,
            "official_how": verdict.how or None}
