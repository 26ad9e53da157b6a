"""Protocol ``crossmodal`` (XModBench; docs/reference.md, Protocol `crossmodal`): the same question in six context ->
candidate directions.

A direction ``X->Y`` shows the context in modality X and the four candidates in modality Y (A audio, V vision =
image or video, T text). Candidate media are interleaved with their labels in the prompt (``A.`` <audio> ``B.``
<audio> ...), so a model sees every candidate.

Items come in two forms (one ``Item`` model, validated either way):

* **entity form** (our own benchmarks, the built-in synthetic one): a ``context`` entity and its ``distractors``,
  each with ``audio``, ``image`` or ``video``, and ``text``. Every requested direction is built from them; options
  are shuffled per instance with keyed randomness; the question comes from ``questions[direction]`` or the
  ``question`` template (``{context}`` and ``{candidates}`` are replaced by modality nouns).
* **explicit form** (converted releases, see ``omnieval.datasets.xmodbench``): ``directions`` maps each direction
  to the entry as released: question, context inputs, options in their released order, answer label.

Both forms give one item per base question, so the bootstrap resamples an item's six directions together and
``consistency`` / ``agreement`` compare the same content across directions.

Instances carry ``simulation_hints`` for the simulated engine as a directed percept (``audio->text``: the context's
modality to the candidates'), so a simulated model can be given a per-direction skill, or per-modality reliances whose
products make a direction's skill.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from omnieval.core.keyed import keyed_rng
from omnieval.core.metric_types import DIFFERENCE, UNIT, CellFamily, MetricRow, ProtocolMetrics, support_of
from omnieval.core.protocol_views import HeadlineTable, PairedHeadline
from omnieval.core.schema import LABELS, InputError, Instance, ItemId, Segment, option_key, repeated_option
from omnieval.protocols.spec import ProtocolSpec

NAME = "crossmodal"
DIRECTIONS: tuple[str, ...] = ("A->T", "A->V", "T->A", "T->V", "V->A", "V->T")
EXTRA_CONDITIONS: tuple[str, ...] = ("AV->T", "none->T")
DISPARITY_PAIRS: tuple[tuple[str, str], ...] = (("T", "V"), ("T", "A"), ("V", "A"))
IMBALANCE_PAIRS: tuple[tuple[str, str], ...] = (("A", "T"), ("V", "T"), ("V", "A"))
AGREEMENT_PAIRS: tuple[tuple[str, str], ...] = tuple(itertools.combinations(DIRECTIONS, 2))
LETTER = {"audio": "A", "image": "V", "video": "V", "text": "T"}
NOUNS = {"audio": "audio clip", "image": "image", "video": "video", "text": "text description"}
DEFAULT_QUESTION = "Which {candidates} matches the {context}?"
NO_CONTEXT_QUESTION = "Which {candidates} is the most likely one?"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Entity(_Strict):
    """One entity in every modality: ``text`` inline, media as benchmark-relative paths (vision: image or video)."""

    text: str = Field(min_length=1)
    audio: str | None = None
    image: str | None = None
    video: str | None = None
    id: str | None = None

    @model_validator(mode="after")
    def _one_vision(self) -> Entity:
        if self.image and self.video:
            raise ValueError("an entity has one vision rendering: image or video, not both")
        return self

    @property
    def vision(self) -> str | None:
        return "image" if self.image else "video" if self.video else None


class Input(_Strict):
    """A released context or option: ``input`` is a path for media, the text itself for ``text``."""

    modality: Literal["audio", "image", "video", "text"]
    input: str


class DirectionEntry(_Strict):
    """One released question of one direction."""

    question: str
    context: list[Input] = Field(default_factory=list)
    options: list[Input] = Field(min_length=2, max_length=26)
    answer: str

    @field_validator("options")
    @classmethod
    def _options_distinct(cls, v: list[Input]) -> list[Input]:
        """Two text options that read the same, or one media file given twice, cannot be told apart."""
        keys = [(o.modality, option_key(o.input) if o.modality == "text" else o.input) for o in v]
        pair = repeated_option(keys)
        if pair is not None:
            i, j = pair
            raise ValueError(f"options[{i}] ({LABELS[i]}) and options[{j}] ({LABELS[j]}) are the same "
                             f"{v[i].modality} {v[j].input!r}: a model choosing either would be scored wrong for "
                             "one of them; make the options distinct")
        return v

    @model_validator(mode="after")
    def _answer_is_a_label(self) -> DirectionEntry:
        if self.answer not in LABELS[: len(self.options)]:
            raise ValueError(f"answer {self.answer!r} is not one of the labels A..{LABELS[len(self.options) - 1]}")
        return self


class Item(_Strict):
    """A base question of the crossmodal protocol, in the entity form or the explicit form (see module doc)."""

    item_id: ItemId
    benchmark: str = "benchmark"
    split: str = "all"
    task: str | None = None
    subtask: str | None = None
    category: str | None = None
    question: str | None = None
    questions: dict[str, str] | None = None
    context: Entity | None = None
    distractors: list[Entity] = Field(default_factory=list)
    directions: dict[str, DirectionEntry] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Item:
        known = set(DIRECTIONS) | set(EXTRA_CONDITIONS)
        if self.directions is not None:
            if self.context is not None or self.distractors:
                raise ValueError("give either directions (explicit form) or context + distractors, not both")
            bad = sorted(set(self.directions) - known)
            if bad:
                raise ValueError(f"unknown direction {bad[0]!r}; known: {', '.join(sorted(known))}")
            return self
        if self.context is None:
            raise ValueError("needs a context entity (with distractors) or released directions")
        if not 1 <= len(self.distractors) <= 25:
            raise ValueError("needs 1 to 25 distractor entities")
        bad = sorted(set(self.questions or {}) - known)
        if bad:
            raise ValueError(f"questions has an unknown direction {bad[0]!r}")
        return self


class InstanceFields(_Strict):
    """What a crossmodal instance carries of its own (``Instance.protocol_fields``): its item's subtask, a
    prediction column every metric is also given per."""

    subtask: str | None = None


class Options(_Strict):
    """``directions``: which of the six to run; ``extra``: ``AV->T`` (audio and vision together as context) and
    ``none->T`` (no context: the prior / chance baseline), entity form only."""

    directions: list[Literal["A->T", "A->V", "T->A", "T->V", "V->A", "V->T"]] = Field(
        default_factory=lambda: list(DIRECTIONS))
    extra: list[Literal["AV->T", "none->T"]] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------------
# Items -> instances
# ---------------------------------------------------------------------------------------------------------------

def media_refs(item: Item) -> list[tuple[str, str, str]]:
    refs = []
    entities = [("context", item.context)] if item.context else []
    entities += [(f"distractors[{i}]", e) for i, e in enumerate(item.distractors)]
    for where, entity in entities:
        for modality in ("audio", "image", "video"):
            if getattr(entity, modality):
                refs.append((getattr(entity, modality), modality, f"{where}.{modality}"))
    for direction, entry in (item.directions or {}).items():
        for part in ("context", "options"):
            for i, inp in enumerate(getattr(entry, part)):
                if inp.modality != "text":
                    refs.append((inp.input, inp.modality, f"directions.{direction}.{part}[{i}].input"))
    return refs


def validate_items(items: Sequence[Item], bench=None, file: str | Path | None = None) -> None:
    """Entity form: every entity has all three renderings (the six directions need them), and no two entities of an
    item share one (the candidates of a direction would be two of the same: a model choosing the one that is not
    the answer would be scored wrong for the right answer)."""
    for item in items:
        entities = [("context", item.context)] if item.context else []
        entities += [(f"distractors[{i}]", e) for i, e in enumerate(item.distractors)]
        for where, entity in entities:
            if not entity.audio:
                raise InputError("entity has no audio rendering", file=file, item=item.item_id, field=f"{where}.audio")
            if not entity.vision:
                raise InputError("entity has no image or video rendering", file=file, item=item.item_id,
                                 field=f"{where}.image")
        for rendering in ("text", "audio", "vision"):
            _distinct_renderings(item, entities, rendering, file)


def _distinct_renderings(item: Item, entities: list[tuple[str, Entity]], rendering: str, file) -> None:
    def key(entity: Entity) -> str:
        if rendering == "text":
            return option_key(entity.text)
        return (entity.audio if rendering == "audio" else getattr(entity, entity.vision or "image")) or ""

    def field(where: str, entity: Entity) -> str:
        return f"{where}.{rendering if rendering != 'vision' else entity.vision}"

    pair = repeated_option([key(e) for _, e in entities])
    if pair is not None:
        (first, a), (where, b) = entities[pair[0]], entities[pair[1]]
        value = b.text if rendering == "text" else key(b)
        raise InputError(f"{field(where, b)} {value!r} is the same as {field(first, a)}: the candidates of a "
                         f"direction showing {rendering} would be two of the same, and a model choosing the one "
                         "that is not the answer would be scored wrong; make every entity's renderings distinct",
                         file=file, item=item.item_id, field=field(where, b))


def instance_id(item_id: str, direction: str, seed: int) -> str:
    return f"{item_id}|{direction}|s{seed}"


def _segment(modality: str, value: str) -> Segment:
    if modality == "text":
        return Segment(kind="text", text=value)
    return Segment(kind="media", modality=modality, path=value)


def _render(entity: Entity, letter: str) -> tuple[str, str]:
    """(modality, path or text) of an entity in direction letter A / V / T."""
    if letter == "A":
        return "audio", entity.audio or ""
    if letter == "V":
        vision = entity.vision or "image"
        return vision, getattr(entity, vision) or ""
    return "text", entity.text


def _question(item: Item, direction: str, context_modalities: Sequence[str], candidate_modality: str) -> str:
    if item.questions and direction in item.questions:
        template = item.questions[direction]
    elif direction == "none->T":
        template = NO_CONTEXT_QUESTION
    else:
        template = item.question or DEFAULT_QUESTION
    context = " and ".join(NOUNS[m] for m in context_modalities) or "question"
    return template.replace("{context}", context).replace("{candidates}", NOUNS[candidate_modality])


def _percepts(context_modalities: Iterable[str], candidate_modality: str, target: str) -> dict[str, str | None]:
    return {f"{m}->{candidate_modality}": target for m in context_modalities}


def media_unit(item: Item) -> str | None:
    """The file an item's questions share (``Instance.media_unit``): in the entity form the context entity's vision,
    else its audio (every direction shows that entity, in one modality or another); in the explicit form the first
    media context of its directions in ``DIRECTIONS`` order (the clip the item is about, as ``A->T`` shows it).
    None: a context in text only."""
    if item.context is not None:
        return item.context.video or item.context.image or item.context.audio
    for direction in DIRECTIONS:
        entry = (item.directions or {}).get(direction)
        for inp in entry.context if entry is not None else ():
            if inp.modality != "text":
                return inp.input
    return None


def expand_entities(item: Item, directions: Sequence[str], seed: int) -> list[Instance]:
    """Entity form: one instance per direction, options shuffled with keyed randomness."""
    entities = [item.context, *item.distractors]
    out = []
    for direction in directions:
        source, cand_letter = direction.split("->")
        letters = {"none": "", "AV": "AV"}.get(source, source)
        context = [_render(item.context, letter) for letter in letters]
        order = keyed_rng(seed, item.item_id, direction, "options").permutation(len(entities))
        labels = list(LABELS[: len(entities)])
        shown = [entities[i] for i in order]
        rendered = [_render(e, cand_letter) for e in shown]
        target = labels[int(np.flatnonzero(order == 0)[0])]
        cand_modality = rendered[0][0]
        context_modalities = [m for m, _ in context]
        out.append(Instance(
            instance_id=instance_id(item.item_id, direction, seed), item_id=item.item_id, protocol=NAME,
            benchmark=item.benchmark, split=item.split, condition=direction,
            segments=[_segment(m, v if m != "text" else f"Context: {v}") for m, v in context],
            question=_question(item, direction, context_modalities, cand_modality),
            option_labels=labels, option_texts=[e.text for e in shown],
            option_segments=[_segment(m, v) for m, v in rendered], target=target,
            task=item.task, category=item.category, media_unit=media_unit(item),
            protocol_fields=SPEC.fields(subtask=item.subtask),
            simulation_hints=_percepts(context_modalities, cand_modality, target),
        ))
    return out


def expand_released(item: Item, directions: Sequence[str], seed: int) -> list[Instance]:
    """Explicit form: the released entries as they are (question, option order, answer)."""
    out = []
    for direction in directions:
        entry = (item.directions or {}).get(direction)
        if entry is None:
            continue
        labels = list(LABELS[: len(entry.options)])
        cand_modality = entry.options[0].modality
        context_modalities = [c.modality for c in entry.context]
        out.append(Instance(
            instance_id=instance_id(item.item_id, direction, seed), item_id=item.item_id, protocol=NAME,
            benchmark=item.benchmark, split=item.split, condition=direction,
            segments=[_segment(c.modality, c.input if c.modality != "text" else f"Context: {c.input}")
                      for c in entry.context],
            question=entry.question, option_labels=labels,
            option_texts=[o.input if o.modality == "text" else f"({o.modality} {lab})"
                          for o, lab in zip(entry.options, labels, strict=True)],
            option_segments=[_segment(o.modality, o.input) for o in entry.options], target=entry.answer,
            task=item.task, category=item.category, media_unit=media_unit(item),
            protocol_fields=SPEC.fields(subtask=item.subtask),
            simulation_hints=_percepts(context_modalities, cand_modality, entry.answer),
        ))
    return out


def expand_all(items: Sequence[Item], bench, seed: int, options: Options | None = None) -> list[Instance]:
    options = options or Options()
    directions = [*options.directions, *options.extra]
    out: list[Instance] = []
    for item in items:
        if item.directions is not None:
            out.extend(expand_released(item, directions, seed))
        else:
            out.extend(expand_entities(item, directions, seed))
    return out


# === metrics (cell means -> metric values) ===

def average(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    """Mean of the six direction accuracies."""
    return np.mean([acc[d] for d in DIRECTIONS], axis=0)


def std(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    """Sample standard deviation (ddof=1) of the six direction accuracies."""
    return np.std([acc[d] for d in DIRECTIONS], axis=0, ddof=1)


def disparity_directions(x: str, y: str) -> tuple[str, str, str, str]:
    """The four directions ``D(X vs Y)`` reads: ``Z->Y, Z->X, Y->Z, X->Z`` (Z the third modality)."""
    (z,) = {"A", "V", "T"} - {x, y}
    return f"{z}->{y}", f"{z}->{x}", f"{y}->{z}", f"{x}->{z}"


def disparity(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``D(X vs Y) = (Acc[Z->Y] - Acc[Z->X]) + (Acc[Y->Z] - Acc[X->Z])``, Z the third modality; keys ``X_vs_Y``."""
    out = {}
    for x, y in DISPARITY_PAIRS:
        zy, zx, yz, xz = disparity_directions(x, y)
        out[f"{x}_vs_{y}"] = (acc[zy] - acc[zx]) + (acc[yz] - acc[xz])
    return out


def imbalance(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``Acc[X->Y] - Acc[Y->X]``; keys ``X<->Y``."""
    return {f"{x}<->{y}": acc[f"{x}->{y}"] - acc[f"{y}->{x}"] for x, y in IMBALANCE_PAIRS}


SCOPES: tuple[tuple[str, tuple[str, ...]], ...] = (("", ()), ("t", ("task",)), ("s", ("task", "subtask")))
"""Cell family prefixes and their ``by`` columns: overall, per task, per task/subtask."""


def _scope_rows(cells, prefix: str, scope: tuple[str, ...]):
    """The metrics of docs/reference.md, Protocol `crossmodal`, for one scope (overall: ``scope = ()``; a task:
    ``("perception",)``; a subtask: ``("perception", "instruments")``). The key's parts are the scope's ``task`` and
    ``subtask`` and the ``leaf`` (a direction, a pair of modalities or of directions); its label is
    ``<scope>/<leaf>``, or the scope alone for metrics without a leaf."""
    label = "/".join(scope)
    scope_parts = dict(zip(("task", "subtask"), scope, strict=False))

    def row(metric: str, values, support, leaf: str = "") -> MetricRow:
        text = f"{label}/{leaf}" if label and leaf else (label or leaf)
        return MetricRow(metric, values, support, text, {**scope_parts, "leaf": leaf})

    acc = {c: cells.mean(f"{prefix}acc", *scope, c) for c in (*DIRECTIONS, *EXTRA_CONDITIONS)
           if cells.has(f"{prefix}acc", *scope, c)}
    n = {c: cells.support(f"{prefix}acc", *scope, c) for c in acc}
    for c in acc:
        yield row("accuracy", acc[c], n[c], c)
    if all(d in acc for d in DIRECTIONS):
        n_six = sum(n[d] for d in DIRECTIONS)
        yield row("average", average(acc), n_six)
        yield row("std", std(acc), n_six)
        gaps = disparity(acc)
        for x, y in DISPARITY_PAIRS:
            read = disparity_directions(x, y)
            yield row("disparity", gaps[f"{x}_vs_{y}"], support_of(*(n[d] for d in read), n=n_six.n), f"{x}_vs_{y}")
        gaps = imbalance(acc)
        for x, y in IMBALANCE_PAIRS:
            yield row("imbalance", gaps[f"{x}<->{y}"], n[f"{x}->{y}"] + n[f"{y}->{x}"], f"{x}<->{y}")
    if cells.has(f"{prefix}consist", *scope):
        yield row("consistency", cells.mean(f"{prefix}consist", *scope), cells.support(f"{prefix}consist", *scope))
    for i, (d1, d2) in enumerate(AGREEMENT_PAIRS):
        family = f"{prefix}agree{i}"
        if cells.has(family, *scope):
            yield row("agreement", cells.mean(family, *scope), cells.support(family, *scope), f"{d1}|{d2}")


def metric_rows(cells):
    """The protocol's metrics overall, then per task and per task/subtask, then the invalid rate."""
    for prefix, by in SCOPES:
        scopes = [()] if not by else cells.keys(f"{prefix}acc")
        for scope in sorted({s[:len(by)] for s in scopes}) if by else scopes:
            yield from _scope_rows(cells, prefix, scope)
    if cells.has("invalid"):
        yield MetricRow("invalid_rate", cells.mean("invalid"), cells.support("invalid"))


def derive_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Per-item columns for ``consistency`` and ``agreement``, set on one row per item (the others stay out of
    those cells), so both are item-level shares resampled with the item.

    An item counts for ``consistency`` when it has a prediction in all six directions, and is consistent when all
    six are correct (an invalid answer is not correct); a pair of directions counts for ``agreement`` when the item
    has both, and agrees when both are correct or both are not. An errored prediction (``error`` set) is no
    answer at all: its direction counts as missing."""
    keys = ["model", "prompt", "split", "item_id"]
    six = frame.filter(pl.col("condition").is_in(list(DIRECTIONS)) & pl.col("answered"))
    present = sorted(six["condition"].unique().to_list())
    if six.is_empty():
        wide = frame.select(keys).unique()
    else:
        wide = (six.group_by([*keys, "condition"]).agg(pl.col("correct").all())
                .pivot(on="condition", index=keys, values="correct"))
    wide = wide.with_columns([pl.lit(None, dtype=pl.Boolean).alias(d) for d in DIRECTIONS if d not in present])
    columns = [
        pl.all_horizontal([pl.col(d).is_not_null() for d in DIRECTIONS]).alias("_consist_ok"),
        pl.all_horizontal([pl.col(d).fill_null(False) for d in DIRECTIONS]).cast(pl.Float64).alias("_consist"),
    ]
    for i, (d1, d2) in enumerate(AGREEMENT_PAIRS):
        columns += [(pl.col(d1).is_not_null() & pl.col(d2).is_not_null()).alias(f"_agree_ok{i}"),
                    (pl.col(d1) == pl.col(d2)).fill_null(False).cast(pl.Float64).alias(f"_agree{i}")]
    wide = wide.select(*keys, *columns)
    marker = (pl.int_range(pl.len()).over(keys) == 0).alias("_marker")
    out = frame.with_columns(marker).join(wide, on=keys, how="left")
    flags = [c for c in wide.columns if c.startswith(("_consist_ok", "_agree_ok"))]
    return out.with_columns([(pl.col(c).fill_null(False) & pl.col("_marker")).alias(c) for c in flags])


def _families():
    out = []
    for prefix, by in SCOPES:
        out.append(CellFamily(f"{prefix}acc", "correct", "valid", (*by, "condition")))
        out.append(CellFamily(f"{prefix}consist", "_consist", "_consist_ok", by))
        out += [CellFamily(f"{prefix}agree{i}", f"_agree{i}", f"_agree_ok{i}", by)
                for i in range(len(AGREEMENT_PAIRS))]
    out.append(CellFamily("invalid", "invalid", "answered"))
    return tuple(out)


def _headline_rows(table: pl.DataFrame) -> pl.DataFrame:
    return table.filter(pl.col("metric").is_in(["average", "disparity", "imbalance", "consistency"])
                        & (pl.col("task") == ""))


def metrics_spec():
    """The cells and metric function of this protocol for ``omnieval.stats.metrics``, the metrics its paired
    differences compare and its headline table."""
    return ProtocolMetrics(
        name=NAME, families=_families(), metrics=metric_rows, derive=derive_columns,
        conditions=DIRECTIONS + EXTRA_CONDITIONS,
        paired=PairedHeadline(every_key=("accuracy", "disparity"), overall=("average", "consistency")),
        cluster="media_unit",  # the questions about one clip share it (docs/reference.md, Resampling unit)
        key_parts=("task", "subtask"), scope_parts=("task", "subtask"),
        headlines=(HeadlineTable("Modality disparity, direction imbalance and consistency, with the average accuracy",
                                 _headline_rows),),
        bounds={"accuracy": UNIT, "average": UNIT, "std": UNIT, "consistency": UNIT, "agreement": UNIT,
                "imbalance": DIFFERENCE, "disparity": (-2.0, 2.0)})


# === the protocol, as the registry knows it (omnieval.protocols.spec) ===

SPEC = ProtocolSpec(
    name=NAME, item=Item, options=Options, media_refs=media_refs, validate_items=validate_items,
    expand_all=expand_all, metrics=metrics_spec, instance_fields=InstanceFields,
    item_local=True,  # an item's instances depend on that item alone
    paired_matrix=(("average", ""), ("disparity", None), ("consistency", "")),
    report_section="omnieval.report.crossmodal:section",
    value_ranges={"disparity": "disparity, a sum of two differences, lies in [-2, 2]"},
    synthetic_benchmark="omnieval.datasets.synthetic_crossmodal:synthetic_benchmark",
)
