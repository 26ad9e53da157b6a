"""Protocol ``spectrum`` (Multi-modal Data Spectrum; docs/reference.md, Protocol `spectrum`): which modalities a
multiple-choice benchmark really needs, measured by shuffling modalities between items.

Any multiple-choice item with one or more media (``image``, ``video``, ``audio``) plus its question text applies;
the text (the question stem, see ``text_unit``) is a modality like the others. Conditions, for the item's modalities
M (text included, in the order image, video, audio, text):

* ``normal``: every modality the item's own;
* ``<m>_only``: m the item's own, every other modality replaced by its donor's (a text-only run is ``text_only``);
* ``random``: every modality replaced, each by its own donor;
* ``no_<m>`` (three or more modalities): only m replaced. With two modalities ``no_<m>`` is the other's ``_only``
  and is not run twice;
* ``<m>_as_text`` (on the items that give a text stand-in for media modality m, ``Item.text_alternatives``: a
  transcript for the audio, a caption for the image, a video's subtitles): every modality the item's own, m shown as
  its stand-in (a text part ``Audio transcript: ...`` before the question) instead of the medium. Items without a
  stand-in have no instance of it (``condition_coverage`` counts them; a run says how many it skipped). Its
  accuracy against ``normal`` on the same items is ``as_text_gap`` (``accuracy[<m>_as_text] - accuracy[normal]``,
  normal restricted to the items with a stand-in, with its interval from the same resamples): what the model loses,
  or gains, when the medium's content arrives as text. (Against normal on every item, the gap would mix in how the
  items without a stand-in differ: Video-MME's videos without subtitles are not a random half.)

**Mixed benchmarks.** Items of one benchmark may differ in their modalities (image + audio beside video + audio):
each item gets the conditions of its own modalities, the donors of a modality come from the items that show it
(``spectrum_donors``), and each condition's accuracy is over the items that have it. The contrasts between
conditions are then given per set of modalities only (``modality_sets``, keys ``modalities=<set>/...``): overall
they would subtract an accuracy over some items from one over others. An item may show several files of one
modality (``Item.media`` lists them, ``media_files``): they are shown in order, and a shuffle replaces the whole list
with a donor's (of the same length where the donor group allows, ``spectrum_donors.size_groups``).

**Evidence labels.** An item may carry the modality its answer's evidence comes from, as the benchmark labels it
(``Item.evidence_modality``: OmniVideoBench's ``vision`` / ``audio`` reasoning steps). Every metric is then also
given per label (keys ``evidence=<label>/<condition>``): the benchmark's own labels beside what the shuffles find.

**Breakdowns.** An item may carry the release's own score breakdowns (``Item.breakdowns``: Video-MME's duration and
domain). Every metric is then also given per value of each (keys ``<name>=<value>/<condition>``, ``duration=long/
normal``), so a run shows the release's headline axes with intervals; the pairs travel in
``Instance.protocol_fields`` and the predictions' ``breakdowns`` column. Where the breakdowns carry Video-MME-v2's
``group_type`` (and ``group_structure``), the questions on one clip are also scored as its release scores them, a
group of four at a time: ``group_score`` per condition and scope (``group_score_columns``,
``scoring.videomme_v2``), resampled by clip.

**Donors.** One seeded derangement per modality (``omnieval.kernels.derangement``, stream keyed on the modality, ranks
keyed on the item id): ``donor_m[i]`` is never ``i``, and within a group the donors are a permutation of the group, so
every image (question, clip) is still shown exactly once per condition and each modality keeps its marginal
distribution. Every condition that replaces m uses the same ``donor_m``: ``image_only`` and ``random`` then differ
only in the image, so ``intra`` compares like with like (a paired contrast, lower variance). Donors are drawn
within the same ``benchmark`` and ``split`` (metrics are per split, so a split never borrows from another) and,
as configured in ``donor_within``, the same ``category`` and option count. With ``text_unit = "question+options"``
the options travel with the donor's question, and the donor then always has the item's option count, so the item's
target label exists among the options shown. A group of one item cannot be deranged: ``singletons = "error"``
(default) raises an ``InputError`` naming the item; ``"pool"`` pools such items of one benchmark and split into a
group of their own (joined to the smallest other group when alone), relaxing ``donor_within`` only for them.

**Copies of one question** (``Item.group``: VLMEvalKit's circular copies, the same image and stem with the options
rotated) are never each other's donors: a sibling's image is the item's own, so an "image replaced" instance would
show the item's own image. Likewise items whose file of a modality has the same content (several questions about one
clip, one file under two names: ``shared_media``) never lend that modality to each other. Each instance records the
item each replaced modality came from (``Instance.donors``, the ``donors`` column of the predictions). Donors then
come from ``omnieval.kernels.derangement.derange_apart`` (still a permutation of the donor group, never the item's own
question); a donor group where one question holds more than half of the items cannot be deranged that way and is
treated like a lone item (error, or pooled).

The target label stays the item's own in every condition (options are in the item's order, labels A, B, ...). Instances
carry ``simulation_hints`` for the simulated engine: each modality supports the target when shown from the item itself
and nothing (None) when shown from a donor, and each joint percept of two or more modalities (``image+text``) supports
the target only when all of them are the item's own. So a simulated model with ``{"image": 0.9}`` answers ``image_only``
like ``normal`` and ``text_only`` at chance, one with ``{"image+text": 0.9}`` needs both.
An instance's content depends on its donors, so on which items share its group: the same benchmark, options and seed
always give the same instances, in any order and split over any number of workers (``instance_id`` =
``item_id|condition|s<seed>``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from pydantic import Field, field_validator, model_validator

from omnieval.core.metric_types import (
    DIFFERENCE,
    QUESTION,
    UNIT,
    CellFamily,
    MetricRow,
    ProtocolMetrics,
    question_of,
)
from omnieval.core.protocol_views import HeadlineTable, PairedHeadline
from omnieval.core.schema import LABELS, InputError, Instance, ItemId, Segment, Strict, repeated_options_message
from omnieval.protocols.spec import ProtocolSpec
from omnieval.protocols.spectrum_donors import donors
from omnieval.scoring.videomme_v2 import UNPARSED, group_score

NAME = "spectrum"
MEDIA: tuple[str, ...] = ("image", "video", "audio")
MODALITY_ORDER: tuple[str, ...] = (*MEDIA, "text")
AS_TEXT: tuple[str, ...] = tuple(f"{m}_as_text" for m in MEDIA)
ALL_CONDITIONS: tuple[str, ...] = ("normal", *(f"{m}_only" for m in MODALITY_ORDER), "random",
                                   *(f"no_{m}" for m in MODALITY_ORDER), *AS_TEXT)
AS_TEXT_LABELS = {"image": "Image description", "video": "Video description", "audio": "Audio transcript"}
"""How a text stand-in is introduced in the prompt, per modality it stands in for."""
ENSEMBLE = "ensemble"
INTERVAL = 0.95
"""Level of the intra intervals that decide ``dependency`` (docs/reference.md, Metrics: the 95% percentile bootstrap
interval)."""


class Item(Strict):
    """One multiple-choice question, or one open-ended question (no options).

    ``answer`` is the correct option's **label**: ``"A"`` for the first of ``options``, ``"B"`` for the second, and
    so on (loaders of other formats convert indices and answer texts to labels). ``media`` maps each media modality
    to a path relative to the benchmark folder, or to a list of paths where the question shows several files of one
    kind (AV-Odyssey's four pictures to choose from, two sounds to compare: ``media_files``); the question is the
    text modality. Items of one benchmark may show different modalities (an image and a sound, a video and a
    sound): each gets the conditions its own modalities allow (``conditions_for``).

    ``group``: the ``item_id`` of the question this item is a copy of (VLMEvalKit's circular copies: the same
    question with its options rotated). Items of one group (an item without one is its own) are one question: never
    each other's donors, one resampling unit of the bootstrap, and scored together by ``circular_accuracy``.

    ``text_alternatives``: a text stand-in for some of the item's media (``{"audio": "<transcript>"}``), shown by
    the ``<m>_as_text`` conditions. ``evidence_modality``: where the item's answer evidence comes from, as the
    benchmark labels it (``vision``, ``audio``, ``vision+audio``): metrics are also given per label.

    ``breakdowns``: the release's own score breakdowns for this item, name -> value (Video-MME's
    ``{"duration": "long"}``, MMAU's ``{"difficulty": "hard"}``): the axes its authors report scores along, kept so
    metrics can be given per value as they are per ``category``.

    **Open items** (``options`` empty, no ``answer``): a question a benchmark scores from a free answer (VoiceBench's
    ``sd-qa``, ``bbh``, ``advbench``). ``reference`` is the ground truth in words where the release gives one (what a
    judge compares the answer with); an item without one is scored by its benchmark's own rule alone (the official
    scorer's ``score_open``: ``advbench``'s refusal list) or, where ``rated``, rated 1-5 by the run's judges
    (``core.judges``, Ratings: VoiceBench's ``alpacaeval``). Open items are only asked open-ended (``modes: [open]``;
    a run's multiple-choice mode passes them by) and get the same conditions as any other item.
    """

    item_id: ItemId
    benchmark: str = "benchmark"
    split: str = "all"
    question: str = Field(min_length=1)
    options: list[str] = Field(default_factory=list, max_length=26)
    answer: str | None = None
    reference: str | None = Field(default=None, min_length=1)
    rated: bool = False
    media: dict[Literal["image", "video", "audio"], str | list[str]] = Field(min_length=1)
    category: str | None = None
    task: str | None = None
    group: str | None = Field(default=None, min_length=1)
    text_alternatives: dict[Literal["image", "video", "audio"], str] | None = None
    evidence_modality: str | None = Field(default=None, min_length=1)
    breakdowns: dict[str, str] | None = None

    @field_validator("breakdowns")
    @classmethod
    def _breakdowns_named(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        for name, value in (v or {}).items():
            if not name.strip() or not value.strip():
                raise ValueError(f"breakdown {name!r} has an empty name or value")
            if "=" in name or "/" in name:  # the metric keys are <name>=<value>/<condition>
                raise ValueError(f"breakdown name {name!r} holds '=' or '/'")
        return v or None

    @field_validator("media")
    @classmethod
    def _media_listed(cls, v: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for modality, paths in v.items():
            if isinstance(paths, list):
                if not paths:
                    raise ValueError(f"the list of {modality} files is empty")
                repeated = sorted({p for p in paths if paths.count(p) > 1})
                if repeated:
                    raise ValueError(f"{modality} file {repeated[0]!r} is listed twice")
        return v

    @field_validator("text_alternatives")
    @classmethod
    def _alternatives_written(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        for modality, text in (v or {}).items():
            if not text.strip():
                raise ValueError(f"the text alternative for {modality} is empty")
        return v or None

    @field_validator("options")
    @classmethod
    def _options_distinct(cls, v: list[str]) -> list[str]:
        repeated = repeated_options_message(v)
        if repeated:
            raise ValueError(repeated)
        return v

    @model_validator(mode="after")
    def _answer_is_a_label(self) -> Item:
        if not self.options:
            if self.answer is not None:
                raise ValueError(f"answer {self.answer!r} given without options (an open item has a reference, not "
                                 "an answer label)")
        elif len(self.options) < 2:
            raise ValueError("needs at least two options (or none: an open item)")
        elif self.reference is not None:
            raise ValueError("reference given with options (a multiple-choice item's ground truth is its answer)")
        if self.rated and (self.options or self.reference is not None):
            raise ValueError("rated is for an open item without a reference (no options, no reference)")
        labels = LABELS[: len(self.options)]
        if self.options and self.answer not in labels:
            raise ValueError(f"answer {self.answer!r} must be the label of one of the {len(self.options)} options "
                             f"({labels[0]}..{labels[-1]})")
        stray = sorted(set(self.text_alternatives or {}) - set(self.media))
        if stray:
            raise ValueError(f"text_alternatives for {', '.join(stray)}, which the item does not show (media: "
                             f"{', '.join(sorted(self.media))})")
        return self

    @property
    def modalities(self) -> tuple[str, ...]:
        """The item's modalities in canonical order, text last."""
        return (*(m for m in MEDIA if m in self.media), "text")

    @property
    def is_open(self) -> bool:
        """An open item: no options (class doc)."""
        return not self.options

    @property
    def question_id(self) -> str:
        """The question this item is (a copy of): its ``group``, else its own id."""
        return self.group or self.item_id


class InstanceFields(Strict):
    """What a spectrum instance carries of its own (``Instance.protocol_fields``), each a prediction column: the
    question its item is a copy of (``group``: the bootstrap's resampling unit where set), the modality the
    benchmark says its evidence comes from, and the release's own score breakdowns (name -> value)."""

    group: str | None = None
    evidence_modality: str | None = None
    breakdowns: dict[str, str] | None = None


class Options(Strict):
    """``text_unit``: what the text donor lends, the question stem (options stay with the item: the default) or
    the question with its options. ``donor_within``: donors also share the item's ``category`` and/or option count
    (always the same benchmark and split). ``singletons``: what to do with an item alone in its donor group (see the
    module doc). ``conditions``: run only these (default: all of the benchmark's)."""

    text_unit: Literal["question", "question+options"] = "question"
    donor_within: list[Literal["category", "n_options"]] = Field(default_factory=list)
    singletons: Literal["error", "pool"] = "error"
    conditions: list[str] | None = None

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, v: list[str] | None) -> list[str] | None:
        for c in v or []:
            if c not in ALL_CONDITIONS:
                raise ValueError(f"unknown spectrum condition {c!r}; known: {', '.join(ALL_CONDITIONS)}")
        return v


def conditions_for(modalities: Sequence[str], as_text: Sequence[str] = ()) -> tuple[str, ...]:
    """The conditions of docs/reference.md, Protocol `spectrum`, for a set of modalities (text included): ``no_<m>``
    only with three or more; ``<m>_as_text`` for the media modalities ``as_text`` (those some item gives a text
    stand-in for)."""
    ordered = [m for m in MODALITY_ORDER if m in modalities]
    out = ["normal", *(f"{m}_only" for m in ordered), "random"]
    if len(ordered) >= 3:
        out += [f"no_{m}" for m in ordered]
    out += [f"{m}_as_text" for m in MEDIA if m in as_text and m in ordered]
    return tuple(out)


def as_text_modalities(items: Sequence[Item]) -> tuple[str, ...]:
    """The media modalities some item gives a text stand-in for (the ``<m>_as_text`` conditions that apply: each
    runs on the items that have the stand-in)."""
    return tuple(m for m in MEDIA if any(m in (item.text_alternatives or {}) for item in items))


def has_stand_in(item: Item, condition: str) -> bool:
    """Whether the item has an instance under ``condition``: every condition but ``<m>_as_text``, and that one where
    the item gives a text stand-in for m."""
    medium = as_text_modality(condition)
    return medium is None or medium in (item.text_alternatives or {})


def condition_coverage(items: Sequence[Item], options: Options | None = None) -> dict[str, tuple[int, int]]:
    """Per ``<m>_as_text`` condition the run will hold (all that apply, or those ``options.conditions`` names):
    ``(items with a stand-in for m, items)``, what a run reports of the items it skipped under the condition."""
    if not items:
        return {}
    named = (options or Options()).conditions
    coverage = {}
    for m in as_text_modalities(items):
        if named is None or f"{m}_as_text" in named:
            showing = [it for it in items if m in it.media]  # a mixed benchmark: the items that show m at all
            coverage[f"{m}_as_text"] = (sum(has_stand_in(it, f"{m}_as_text") for it in showing), len(showing))
    return coverage


def as_text_modality(condition: str) -> str | None:
    """The medium a ``<m>_as_text`` condition shows as text (None for any other condition)."""
    return condition[: -len("_as_text")] if condition.endswith("_as_text") else None


def replaced(condition: str, modalities: Sequence[str]) -> frozenset[str]:
    """The modalities a condition shows from a donor (none for ``normal`` and the ``_as_text`` conditions: the
    stand-in is the item's own)."""
    if condition == "normal" or as_text_modality(condition):
        return frozenset()
    if condition == "random":
        return frozenset(modalities)
    if condition.endswith("_only"):
        return frozenset(modalities) - {condition[: -len("_only")]}
    if condition.startswith("no_"):
        return frozenset({condition[len("no_"):]})
    raise ValueError(f"unknown spectrum condition {condition!r}")


def instance_id(item_id: str, condition: str, seed: int) -> str:
    return f"{item_id}|{condition}|s{seed}"


def media_files(item: Item, modality: str) -> list[str]:
    """The files the item shows for a media modality, in the order its question numbers them (one path is a list
    of one); [] for a modality the item does not show."""
    paths = item.media.get(modality)
    if paths is None:
        return []
    return list(paths) if isinstance(paths, list) else [paths]


def media_refs(item: Item) -> list[tuple[str, str, str]]:
    """Every file the item shows, with the field naming it (``media.image``, or ``media.image[2]`` in a list)."""
    return [(path, m, f"media.{m}[{k}]" if isinstance(item.media[m], list) else f"media.{m}")
            for m in MEDIA if m in item.media for k, path in enumerate(media_files(item, m))]


def validate_items(items: Sequence[Item], bench=None, file: str | Path | None = None) -> None:
    """Every benchmark split has two or more items (a lone item has no donor under any ``donor_within``). Items may
    differ in their modalities (each gets its own conditions; donors of a modality come from the items showing it,
    ``spectrum_donors``)."""
    if not items:
        return
    sizes: dict[tuple[str, str], list[str]] = {}
    for item in items:
        sizes.setdefault((item.benchmark, item.split), []).append(item.item_id)
    for (benchmark, split), ids in sizes.items():
        if len(ids) == 1:
            raise InputError(f"the only item of benchmark {benchmark!r} split {split!r}: a spectrum shuffle needs "
                             "another item to take each modality from", file=file, item=ids[0], field="split")


# ---------------------------------------------------------------------------------------------------------------
# Items -> instances
# ---------------------------------------------------------------------------------------------------------------

def evidence(modalities: Sequence[str], swapped: frozenset[str], target: str) -> dict[str, str | None]:
    """Each modality, and each joint of two or more (sorted, joined by ``+``), supports the target exactly when
    every modality in it is the item's own."""
    out: dict[str, str | None] = {}
    for size in range(1, len(modalities) + 1):
        for combo in itertools.combinations(sorted(modalities), size):
            out["+".join(combo)] = None if swapped.intersection(combo) else target
    return out


def expand(item: Item, sources: Mapping[str, Item], condition: str, seed: int, options: Options) -> Instance:
    """One instance: ``sources[m]`` is the item whose modality m is shown (the item itself or its donor). Under
    ``<m>_as_text`` the medium m is left out and its stand-in is a text segment; for the simulated engine the
    medium's percepts support nothing and the percept ``<m>_as_text`` supports the target."""
    modalities = item.modalities
    swapped = frozenset(m for m in modalities if sources[m] is not item)
    text_from = sources["text"]
    option_texts = list(text_from.options if options.text_unit == "question+options" else item.options)
    as_text = as_text_modality(condition)
    segments = [Segment(kind="media", modality=m, path=path)
                for m in modalities if m not in ("text", as_text) for path in media_files(sources[m], m)]
    target = OPEN_TARGET if item.is_open else item.answer
    clues = evidence(modalities, swapped, target)
    if as_text:
        segments.append(Segment(kind="text", text=f"{AS_TEXT_LABELS[as_text]}: {item.text_alternatives[as_text]}"))
        clues = {**evidence(modalities, frozenset({as_text}), target), condition: target}
    return Instance(
        instance_id=instance_id(item.item_id, condition, seed), item_id=item.item_id, protocol=NAME,
        benchmark=item.benchmark, split=item.split, condition=condition, segments=segments,
        question=text_from.question, option_labels=list(LABELS[: len(option_texts)]), option_texts=option_texts,
        target=target, task=item.task, category=item.category, simulation_hints=clues,
        protocol_fields=SPEC.fields(group=item.group, evidence_modality=item.evidence_modality,
                                    breakdowns=item.breakdowns),
        donors={m: sources[m].item_id for m in sorted(swapped)} or None,
        media_unit=media_unit(item), reference=item.reference,
        judge_question=judge_question(item) if item.is_open else None, rated=item.rated,
    )


OPEN_TARGET = ""
"""An open item's ``Instance.target`` (it has no option label); its ``simulation_hints`` name this for a clean
percept."""


def judge_question(item: Item) -> str:
    """The question a judge reads for an open item: the text stand-in of its medium where it has one (a spoken
    question's transcript: the written ``question`` then only says to answer the recording), else its question."""
    stand_ins = [item.text_alternatives[m] for m in MEDIA if m in (item.text_alternatives or {})]
    return stand_ins[0] if stand_ins else item.question


MEDIA_UNIT_ORDER = ("video", "image", "audio")


def media_unit(item: Item) -> str:
    """The file an item's questions share (``Instance.media_unit``): its video, else its image, else its audio. The
    questions a benchmark asks about one clip share its video (its audio is most often that clip's soundtrack), so
    the video names them together. Of several files of that modality, the first (the one the question names first,
    ``[img1]``): questions that reuse a set of pictures reuse it whole, so its first picture names the set."""
    return next(media_files(item, m)[0] for m in MEDIA_UNIT_ORDER if m in item.media)


def expand_all(items: Sequence[Item], bench=None, seed: int = 0, options: Options | None = None) -> list[Instance]:
    """Every instance of the items, item by item in ``item_id`` order, conditions in the reference's order. Each item
    gets the conditions of its own modalities (``conditions_for``): on a benchmark whose items show different
    modalities a condition runs on the items that have it, and ``conditions`` may name any condition some item
    has."""
    options = options or Options()
    file = getattr(bench, "items_file", None) or None
    validate_items(items, bench, file=file)
    if not items:
        return []
    ordered = sorted(items, key=lambda it: it.item_id)
    as_text = as_text_modalities(ordered)
    per_item = [tuple(c for c in conditions_for(it.modalities, as_text) if has_stand_in(it, c)) for it in ordered]
    available = [c for c in ALL_CONDITIONS if any(c in own for own in per_item)]
    shown = [m for m in MODALITY_ORDER if any(m in it.modalities for it in ordered)]
    wanted = None
    if options.conditions is not None:
        missing = [c for c in options.conditions if c not in available]
        lacking = as_text_modality(missing[0]) if missing else None
        if lacking in shown:  # no item has a stand-in for it
            raise InputError(f"condition {missing[0]!r} shows a text stand-in for {lacking}, and no item gives one "
                             f"(text_alternatives.{lacking}); the items' conditions: {', '.join(available)}",
                             file=file, field="protocol_options.conditions")
        if missing:
            raise InputError(f"condition {missing[0]!r} does not apply to this benchmark's modalities "
                             f"({', '.join(shown)}); available: {', '.join(available)}",
                             file=file, field="protocol_options.conditions")
        wanted = set(options.conditions)
    donor = donors(ordered, seed, options, file=file, root=getattr(bench, "root", None))
    out: list[Instance] = []
    for i, item in enumerate(ordered):
        for condition in per_item[i]:
            if wanted is not None and condition not in wanted:
                continue
            swapped = replaced(condition, item.modalities)
            sources = {m: ordered[int(donor[m][i])] if m in swapped else item for m in item.modalities}
            out.append(expand(item, sources, condition, seed, options))
    return out


# === metrics (cell means -> metric values) ===
# The metrics of docs/reference.md, Protocol `spectrum`, as functions of cell means, vectorised over bootstrap rows (row
# 0 = the data, rows 1..R the resamples). Each row's key is its parts (``leaf``: the condition / modality; a scope's
# ``scope_by``, ``scope_value``, ``breakdown``: ``scope_key``); the label prefixes a scope's leaf with ``<scope>/``
# and the metrics without a leaf (``chance``, ``inter``) take the scope alone, as crossmodal's ``task/direction``.
#
# ``dependency`` is a label, not a number: its row has ``value`` null and the label as its ``leaf`` (``image-intra``,
# ``image-intra+text-intra``, ``inter-only``; per category ``<category>/<label>``), ``n`` the predictions behind the
# intra values. The label needs the intra intervals, so the metric function computes them itself from the resample
# rows with the same percentile kernel ``omnieval metrics`` uses for every CI: a modality counts when the lower end
# of its printed ``intra`` interval is above 0. Without resamples (``resamples=0``) there is no interval and no
# ``dependency`` row.

SET_KEY = "_modality_set"
"""The column naming an item's set of modalities (``image+audio+text``; its rows' key label
``modalities=image+audio+text``), on a benchmark whose items differ in their modalities only (``modality_sets``)."""
MAX_BREAKDOWNS = 16
"""The most breakdown names a predictions frame may carry (each is a scope of its own: ``derive_columns`` gives
breakdown ``i`` of the frame, by name, its own column ``_breakdown_<i>``). WorldSense, the release with the most,
reports along eight (five axes and its three audio classes); a scope whose column the frame lacks costs nothing."""
BREAKDOWN_SCOPES = tuple((f"b{i}", (f"_breakdown_name_{i}", f"_breakdown_{i}")) for i in range(MAX_BREAKDOWNS))
SCOPES: tuple[tuple[str, tuple[str, ...]], ...] = (("", ()), ("c", ("category",)), ("e", ("_evidence_key",)),
                                                   ("s", (SET_KEY,)), *BREAKDOWN_SCOPES)
"""Cell prefix and scope columns: overall, per category, per evidence label, per set of modalities, per value of
each of the release's breakdowns (its name and value). A family whose column the frame lacks has no cells."""
SCOPE_BY = {"c": "category", "e": "evidence", "s": "modalities"} | {prefix: "breakdown" for prefix, _ in
                                                                    BREAKDOWN_SCOPES}
"""The ``scope_by`` key part of each scope's rows (cell prefix -> what the scope is a value of)."""
KEY_PARTS = ("scope_by", "scope_value", "breakdown")
"""The protocol's own key parts (``ProtocolMetrics.key_parts``): what a scoped row is restricted to (``scope_by``:
``category``, ``evidence``, ``modalities`` or ``breakdown``), the scope's value (a category, an evidence label, a set
of modalities ``image+audio+text``, a breakdown's value) and, for a breakdown, its name."""


def scope_key(prefix: str, scope: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """The label and key parts of a scope: a category stands alone (``Sports``), the others name what they are a
    value of (``evidence=audio``, ``modalities=image+text``, ``duration=long``)."""
    if not scope:
        return "", {}
    by = SCOPE_BY[prefix]
    if by == "breakdown":
        name, value = scope
        return f"{name}={value}", {"scope_by": by, "breakdown": name, "scope_value": value}
    (value,) = scope
    return (value if by == "category" else f"{by}={value}"), {"scope_by": by, "scope_value": value}


def named_modalities(conditions: Sequence[str]) -> list[str]:
    """Modalities named by the given conditions, in canonical order."""
    named = set()
    for c in conditions:
        if c.endswith("_only"):
            named.add(c[: -len("_only")])
        elif c.startswith("no_"):
            named.add(c[len("no_"):])
    return [m for m in MODALITY_ORDER if m in named]


def intra(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``accuracy[<m>_only] - accuracy[random]`` for every modality with both conditions."""
    if "random" not in acc:
        return {}
    return {m: acc[f"{m}_only"] - acc["random"] for m in named_modalities(acc) if f"{m}_only" in acc}


def inter(acc: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """``accuracy[normal] - max_m accuracy[<m>_only]`` (None unless every named modality has its ``_only``)."""
    named = named_modalities(acc)
    if "normal" not in acc or not named or any(f"{m}_only" not in acc for m in named):
        return None
    return acc["normal"] - np.max(np.vstack([acc[f"{m}_only"] for m in named]), axis=0)


def perceptual_score(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``accuracy[normal] - accuracy[no_<m>]``; with two modalities ``no_<m>`` is the other one's ``_only``."""
    if "normal" not in acc:
        return {}
    named = named_modalities(acc)
    out = {}
    for m in named:
        if f"no_{m}" in acc:
            out[m] = acc["normal"] - acc[f"no_{m}"]
        elif len(named) == 2 and not any(c.startswith("no_") for c in acc):
            (other,) = [x for x in named if x != m]
            if f"{other}_only" in acc:
                out[m] = acc["normal"] - acc[f"{other}_only"]
    return out


def dependency(intra_values: Mapping[str, np.ndarray], over_chance: np.ndarray | None = None) -> str | None:
    """The ``dependency`` label from the intra values over bootstrap rows: ``<m>-intra`` for each m whose interval lies
    above 0, joined by ``+``; where none does, ``at-chance`` when the interval of ``over_chance`` (accuracy[normal]
    minus chance) does not lie above 0 either (nothing was learned, so nothing can be said about combining modalities),
    else ``inter-only``; None without resamples or with an undefined interval."""
    from omnieval.kernels.bootstrap import percentile_interval

    if not intra_values:
        return None
    names = list(intra_values)
    columns = [np.asarray(intra_values[m], dtype=np.float64) for m in names]
    if over_chance is not None:
        columns.append(np.asarray(over_chance, dtype=np.float64))
    values = np.column_stack(columns)
    if values.shape[0] < 2:
        return None
    alpha = (1 - INTERVAL) / 2
    low, _ = percentile_interval(np.ascontiguousarray(values[1:]), alpha, 1 - alpha)
    if np.isnan(low[: len(names)]).any():
        return None
    above = [m for m, lo in zip(names, low[: len(names)], strict=True) if lo > 0]
    if above:
        return "+".join(f"{m}-intra" for m in above)
    if over_chance is not None and not low[-1] > 0:
        return "at-chance"
    return "inter-only"


def _scope_rows(cells, prefix: str, scope: tuple[str, ...], contrasts: bool = True):
    """The metrics of one scope; without ``contrasts`` only those of one condition at a time (accuracy, circular
    accuracy, chance): on a benchmark whose items differ in their modalities, two conditions of a scope other than
    a set of modalities cover different items, and their difference would compare different questions. Each row's
    key: the scope's parts (``scope_key``) and its ``leaf`` (a condition, a modality, the dependency label), labelled
    ``<scope>/<leaf>``, or the scope alone for metrics without a leaf."""
    label, scope_parts = scope_key(prefix, scope)

    def row(metric: str, values, support, leaf: str = "") -> MetricRow:
        text = f"{label}/{leaf}" if label and leaf else (label or leaf)
        return MetricRow(metric, values, support, text, {**scope_parts, "leaf": leaf})

    acc = {c: cells.mean(f"{prefix}acc", *scope, c) for c in ALL_CONDITIONS if cells.has(f"{prefix}acc", *scope, c)}
    n = {c: cells.support(f"{prefix}acc", *scope, c) for c in acc}
    for c in acc:
        yield row("accuracy", acc[c], n[c], c)
    circ = f"{prefix}circ"
    for c in ALL_CONDITIONS:
        if cells.has(circ, *scope, c):
            yield row("circular_accuracy", cells.mean(circ, *scope, c), cells.support(circ, *scope, c), c)
    for metric, family in (("group_score", f"{prefix}gscore"), ("official_group_score", f"{prefix}ogscore")):
        for c in ALL_CONDITIONS:
            if cells.has(family, *scope, c):
                yield row(metric, cells.mean(family, *scope, c), cells.support(family, *scope, c), c)
    if cells.has(f"{prefix}chance", *scope):
        yield row("chance", cells.mean(f"{prefix}chance", *scope), cells.support(f"{prefix}chance", *scope))
    if not contrasts:
        return
    gains = intra(acc)
    for m, values in gains.items():
        yield row("intra", values, n[f"{m}_only"] + n["random"], m)
    combined = inter(acc)
    if combined is not None:
        yield row("inter", combined, n["normal"] + sum(n[f"{m}_only"] for m in named_modalities(acc)))
    for m in MEDIA:  # normal on the same items as the stand-in (``_normal_with_<m>_text``)
        same = f"{prefix}{STAND_IN_NORMAL}{m}"
        if f"{m}_as_text" in acc and cells.has(same, *scope):
            yield row("as_text_gap", acc[f"{m}_as_text"] - cells.mean(same, *scope),
                      cells.support(same, *scope) + n[f"{m}_as_text"], m)
    for m, values in perceptual_score(acc).items():
        other = f"no_{m}" if f"no_{m}" in acc else next(f"{x}_only" for x in named_modalities(acc) if x != m)
        yield row("perceptual_score", values, n["normal"] + n[other], m)
    if gains and len(gains) == len(named_modalities(acc)):
        over_chance = (acc["normal"] - cells.mean(f"{prefix}chance", *scope)
                       if "normal" in acc and cells.has(f"{prefix}chance", *scope) else None)
        label_value = dependency(gains, over_chance)
        if label_value is not None:
            rows = gains[next(iter(gains))].shape[0]
            yield row("dependency", np.full(rows, np.nan), n["random"] + sum(n[f"{m}_only"] for m in gains),
                      label_value)


def metric_rows(cells):
    """The protocol's metrics overall, then per category, per evidence label and per set of modalities (where the
    items differ in their modalities: the contrasts are then given per set only, ``_scope_rows``), then the
    invalid rate."""
    mixed = len({k[0] for k in cells.keys("sacc")}) > 1  # a frame may pool benchmarks each with one set
    for prefix, by in SCOPES:
        if prefix == "s" and not mixed:
            continue
        contrasts = not mixed or prefix == "s"
        if not by:
            yield from _scope_rows(cells, prefix, (), contrasts)
            continue
        for scope in sorted({k[: len(by)] for k in cells.keys(f"{prefix}acc")}):
            yield from _scope_rows(cells, prefix, scope, contrasts)
    if cells.has("invalid"):
        yield MetricRow("invalid_rate", cells.mean("invalid"), cells.support("invalid"))


# --- the majority-vote ensemble and the chance column ----------------------------------------------------------

MATCH = ("prompt", "split", "item_id", "condition")
"""What the ensemble's voters are matched on (docs/reference.md, Protocol `spectrum`: item, condition and prompt; the
split goes with the item)."""


def model_order(frame: pl.DataFrame) -> list[str]:
    """Models in order of first appearance (the ensemble's tie order), the ensemble itself left out."""
    return [m for m in frame["model"].unique(maintain_order=True).to_list() if m != ENSEMBLE]


def ensemble_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The majority-vote model: per (prompt, split, item, condition), the label most models chose among their valid
    choices. A tie is won by the tied label whose voters are the most confident (mean ``confidence``) when every
    vote of the tie has a confidence, else by the tied label of the earliest model in order of first appearance;
    no valid choice at all is an invalid answer. Other columns (target, option count, category, ...) come from the
    earliest model's row; confidences are null (a vote has none).

    A prompt gets ensemble rows only where the vote can differ from every member (``_can_differ``): three or more
    models, or two whose every valid choice has a confidence. Two models without confidences tie on every
    disagreement, and the earliest would win them all: the "ensemble" would be that model under another name."""
    models = model_order(frame)
    rank = pl.col("model").replace_strict(models, list(range(len(models))), return_dtype=pl.Int64)
    voters = frame.filter(pl.col("model") != ENSEMBLE).with_columns(_rank=rank)
    if "confidence" not in voters.columns:
        voters = voters.with_columns(confidence=pl.lit(None, dtype=pl.Float64))
    voters = voters.filter(_can_differ(voters))
    match = list(MATCH)
    candidates = (voters.filter(pl.col("choice").is_not_null())
                  .group_by([*match, "choice"])
                  .agg(_votes=pl.len(), _first=pl.col("_rank").min(),
                       _conf=pl.when(pl.col("confidence").is_null().any()).then(None)
                       .otherwise(pl.col("confidence").mean()))
                  .filter(pl.col("_votes") == pl.col("_votes").max().over(match)))
    by_confidence = pl.col("_conf").is_not_null().all().over(match)
    winners = (candidates
               .with_columns(_key=pl.when(by_confidence).then(-pl.col("_conf")).otherwise(0.0))
               .group_by(match)
               .agg(pl.col("choice").sort_by(["_key", "_first"]).first().alias("_won")))
    base = voters.sort("_rank", maintain_order=True).filter(pl.int_range(pl.len()).over(match) == 0)
    out = base.join(winners, on=match, how="left", nulls_equal=True)
    nulls = {c: pl.lit(None, dtype=out.schema[c]).alias(c)
             for c in ("confidence", "confidence_method", "option_logprobs", "raw_text", "error", "latency_s")
             if c in out.columns}
    out = out.with_columns(pl.lit(ENSEMBLE, dtype=out.schema["model"]).alias("model"),
                           pl.col("_won").cast(out.schema["choice"]).alias("choice"), *nulls.values())
    if "engine" in out.columns:
        out = out.with_columns(pl.lit(ENSEMBLE, dtype=out.schema["engine"]).alias("engine"))
    # the row flags of ``omnieval.stats.read.prepare`` that depend on the choice, recomputed for the votes
    from omnieval.core.schema import ERROR_KINDS

    valid = pl.col("choice").is_not_null()
    flags = {"valid": valid, "invalid": ~valid, "answered": pl.lit(True), "errored": pl.lit(False),
             "error_kind": pl.lit(None, dtype=pl.Utf8), **{f"_error_{k}": pl.lit(False) for k in ERROR_KINDS},
             "correct": valid & (pl.col("choice") == pl.col("target")).fill_null(False),
             "abstained": valid & (pl.col("choice") == pl.col("abstain_label")).fill_null(False),
             "has_conf": pl.lit(False), "conf_method": pl.lit("unknown"), "forced": pl.lit(False),
             "_cot_answer": pl.lit(False), "answer_source": pl.lit(None, dtype=pl.Utf8)}
    out = out.with_columns([expr.cast(out.schema[c]).alias(c) for c, expr in flags.items() if c in out.columns])
    return out.drop("_won", "_rank").select(frame.columns)


def _can_differ(voters: pl.DataFrame) -> pl.Expr:
    """Rows of the prompts where a vote can differ from every member (``ensemble_rows``): three or more models, or
    two with a confidence on every valid choice."""
    models = pl.col("model").n_unique().over("prompt")
    confident = (pl.col("confidence").is_not_null() | pl.col("choice").is_null()).all().over("prompt")
    return (models >= 3) | ((models == 2) & confident)


def circular_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """``circular_accuracy``'s cells (VLMEvalKit's CircularEval): per model, prompt, split, mode, question (the
    question: an item's ``group``, else the item) and condition, ``_circ`` = 1 when every answered copy is
    correct (an invalid answer is not), set on one row of the question (``_circ_ok``). A question none of whose
    copies was answered (all errored) has no value. Only units where some question has two or more copies get the
    cells: elsewhere the metric would be plain accuracy under another name."""
    if QUESTION not in frame.columns:
        frame = frame.with_columns(question_of(frame))
    unit = [c for c in ("model", "prompt", "split", "mode") if c in frame.columns]
    question = [*unit, QUESTION, "condition"]
    answered = pl.col("answered") if "answered" in frame.columns else pl.lit(True)
    frame = frame.with_columns(
        _circ=pl.col("correct").filter(answered).all().over(question).cast(pl.Float64),
        _circ_answered=answered.any().over(question),
        _circ_first=pl.int_range(pl.len()).over(question) == 0,
        _circ_copies=pl.col("item_id").n_unique().over([*unit, QUESTION]) > 1,
    )
    return frame.with_columns(
        _circ_ok=pl.col("_circ_first") & pl.col("_circ_answered") & pl.col("_circ_copies").any().over(unit),
    ).drop("_circ_answered", "_circ_first", "_circ_copies")


def breakdown_value(name: str) -> pl.Expr:
    """The value of breakdown ``name`` on each row (null where the row's item has none)."""
    return pl.col("breakdowns").list.eval(
        pl.element().filter(pl.element().struct.field("name") == name).struct.field("value")).list.first()


GROUP_SIZE = 4
"""The questions of one Video-MME-v2 group."""


def group_score_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """``group_score``'s cells (Video-MME-v2's grouped score, ``scoring.videomme_v2``) on the rows whose items carry
    the breakdown ``group_type``: a group is the questions on one clip (``media_unit``) of one model, prompt,
    split, mode and condition, in the order of the number closing their ids (``001-1`` ... ``001-4``, the release's
    ``question_id``); ``_gscore`` is its score from the rows' ``correct`` (an answer naming no option is wrong),
    set on its first row (``_gscore_ok``). Where the official rule read the answers (``_official_read``, answers
    generated as text), ``_ogscore`` is the score the release's script gives: its verdicts, an answer it reads no
    letter in counted -1 (``official_group_score``). A group without exactly four answered questions numbered 1 to
    4 (an errored row, a question not run) or with an unknown type or structure gets no value: a score of three
    questions would be read from the wrong table. Frames without such rows get no columns (no cells)."""
    if ("breakdowns" not in frame.columns or "media_unit" not in frame.columns
            or frame["breakdowns"].null_count() == frame.height):
        return frame
    typed = frame.with_columns(_gtype=breakdown_value("group_type"), _gstructure=breakdown_value("group_structure"),
                               _gstep=pl.col("item_id").cast(pl.Utf8).str.extract(r"-(\d+)$").cast(pl.Int64))
    if typed["_gtype"].null_count() == typed.height:
        return frame
    official = "_official_read" in typed.columns
    if official:  # the script's scores: 1 right, 0 wrong, -1 no letter read; null: the rule did not read the answer
        typed = typed.with_columns(_gofficial=pl.when(~pl.col("_official_read")).then(None)
                                   .when(pl.col("_official_correct")).then(1)
                                   .when(pl.col("_official_counted")).then(0).otherwise(UNPARSED))
    group = [c for c in ("model", "prompt", "split", "mode") if c in typed.columns] + ["condition", "media_unit"]
    answered = pl.col("answered") if "answered" in typed.columns else pl.lit(True)
    scores = (typed.filter(pl.col("_gtype").is_not_null() & answered)
              .group_by(group).agg(pl.col("correct").sort_by("_gstep"), pl.col("_gstep").sort(),
                                   pl.col("_gtype").first(), pl.col("_gstructure").first(),
                                   *([pl.col("_gofficial").sort_by("_gstep")] if official else [])))
    rows = list(scores.iter_rows(named=True))
    values = {"_gscore": [_one_group_score([1 if c else 0 for c in r["correct"]], r) for r in rows]}
    if official:
        values["_ogscore"] = [_one_group_score(r["_gofficial"], r) for r in rows]
    scores = scores.select(*group).with_columns(pl.Series(k, v, dtype=pl.Float64) for k, v in values.items())
    out = typed.join(scores, on=group, how="left", nulls_equal=True, maintain_order="left")
    first = (pl.col("_gstep") == 1) & answered
    out = out.with_columns((first & pl.col(k).is_not_null()).fill_null(False).alias(f"{k}_ok") for k in values)
    return out.drop("_gtype", "_gstructure", "_gstep", *(["_gofficial"] if official else []))


def _one_group_score(scores: list, group: dict) -> float | None:
    """The score of one group's answered rows (``group_score_columns``: ``scores`` in question order, ``group`` its
    aggregated row); None where it has none."""
    if group["_gstep"] != list(range(1, GROUP_SIZE + 1)) or any(s is None for s in scores):
        return None
    try:
        return group_score(scores, group["_gtype"], group["_gstructure"])
    except ValueError:
        return None


def derive_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Add the ensemble's rows when two or more models are present (and no model is already called
    ``ensemble``), then ``1 / n_options`` for ``chance`` where the input has the option count, then the
    ``circular_accuracy`` cells (``circular_columns``) and Video-MME-v2's ``group_score`` cells
    (``group_score_columns``)."""
    models = frame["model"].unique().to_list()
    if ENSEMBLE not in models and len(models) >= 2:
        frame = pl.concat([frame, ensemble_rows(frame)], how="vertical")
    if "evidence_modality" in frame.columns:
        frame = frame.with_columns(_evidence_key=pl.col("evidence_modality").cast(pl.Utf8))
    frame = breakdown_columns(stand_in_columns(modality_sets(frame)))
    if "n_options" in frame.columns:
        n_options = pl.col("n_options").cast(pl.Float64)
        frame = frame.with_columns(_has_options=n_options.is_not_null() & (n_options > 0),
                                   _inv_options=pl.when(n_options > 0).then(1.0 / n_options).otherwise(None))
    return group_score_columns(circular_columns(frame))


def modality_sets(frame: pl.DataFrame) -> pl.DataFrame:
    """``SET_KEY`` per row where the items differ in their modalities: an item's set is read from its conditions
    (``<m>_only`` for each modality it has, the run's ``conditions`` aside), ``image+audio+text``. A
    frame whose items all have one set gets no column, and its metrics stay as they were."""
    needed = {"condition", "item_id"}
    if not needed <= set(frame.columns):
        return frame
    unit = [c for c in ("model", "prompt", "split", "item_id") if c in frame.columns]
    only = frame.filter(pl.col("condition").str.ends_with("_only")).group_by(unit).agg(
        _m=pl.col("condition").str.strip_suffix("_only").unique())
    if only.is_empty():
        return frame
    names = pl.concat_str([pl.when(pl.col("_m").list.contains(m)).then(pl.lit(m)) for m in MODALITY_ORDER],
                          separator="+", ignore_nulls=True)
    sets = only.select(*unit, names.alias(SET_KEY))
    if sets[SET_KEY].n_unique() < 2:
        return frame
    return frame.join(sets, on=unit, how="left", nulls_equal=True, maintain_order="left")


STAND_IN_NORMAL = "normal_with_text_"
"""Cell family prefix of the ``normal`` rows of the items with a stand-in for a medium (``stand_in_columns``)."""


def stand_in_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Per medium m with ``<m>_as_text`` rows, ``_normal_with_<m>_text``: the valid ``normal`` rows of the items that
    have an ``<m>_as_text`` row (the same model, prompt, split and mode): ``as_text_gap`` compares the stand-in's
    accuracy with normal on those items only. Every medium gets the column (false throughout without stand-ins):
    a cell family's ``where`` column must exist."""
    valid = pl.col("valid") if "valid" in frame.columns else pl.col("choice").is_not_null()
    item = [c for c in ("model", "prompt", "split", "mode", "item_id") if c in frame.columns]
    normal = (pl.col("condition") == "normal") & valid
    return frame.with_columns(**{
        f"_normal_with_{m}_text": normal & (pl.col("condition") == f"{m}_as_text").any().over(item) for m in MEDIA})


def breakdown_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Per breakdown name the rows carry (names sorted), a column ``_breakdown_<i>`` holding the row's value (null
    where the row's item has none) and ``_breakdown_name_<i>`` its name: the scopes of ``BREAKDOWN_SCOPES``. A row
    holds a value of
    every breakdown at once (a Video-MME question is ``long`` and ``Sports``), so each name needs a column of its
    own; more than ``MAX_BREAKDOWNS`` names is an ``InputError``."""
    if "breakdowns" not in frame.columns or frame["breakdowns"].null_count() == frame.height:
        return frame
    pairs = pl.col("breakdowns")
    names = sorted(frame.select(pairs.explode().struct.field("name").drop_nulls().unique()).to_series().to_list())
    if len(names) > MAX_BREAKDOWNS:
        raise InputError(f"the predictions carry {len(names)} breakdowns ({', '.join(names)}); metrics are given "
                         f"per value of at most {MAX_BREAKDOWNS}", field="breakdowns")
    return frame.with_columns(**{
        f"_breakdown_{i}": pairs.list.eval(
            pl.element().filter(pl.element().struct.field("name") == name).struct.field("value")).list.first()
        for i, name in enumerate(names)}, **{f"_breakdown_name_{i}": pl.lit(name) for i, name in enumerate(names)})


def _families():
    out = []
    for prefix, by in SCOPES:
        out.append(CellFamily(f"{prefix}acc", "correct", "valid", (*by, "condition")))
        out.append(CellFamily(f"{prefix}circ", "_circ", "_circ_ok", (*by, "condition")))
        out.append(CellFamily(f"{prefix}gscore", "_gscore", "_gscore_ok", (*by, "condition")))
        out.append(CellFamily(f"{prefix}ogscore", "_ogscore", "_ogscore_ok", (*by, "condition")))
        out.append(CellFamily(f"{prefix}chance", "_inv_options", "_has_options", by))
        out += [CellFamily(f"{prefix}{STAND_IN_NORMAL}{m}", "correct", f"_normal_with_{m}_text", by) for m in MEDIA]
    out.append(CellFamily("invalid", "invalid", "answered"))
    return tuple(out)


def _headline_rows(table: pl.DataFrame) -> pl.DataFrame:
    """Overall accuracy per condition, and chance, each labelled by itself alone (the condition, ``chance``)."""
    overall = table.filter(pl.col("scope_by") == "")
    rows = overall.filter((pl.col("metric") == "accuracy") | (pl.col("metric") == "chance"))
    return rows.with_columns(metric=pl.when(pl.col("metric") == "chance").then(pl.lit("chance"))
                             .otherwise(pl.col("leaf")), key=pl.lit(""))


def _headline_title(table: pl.DataFrame) -> str:
    """The title names each model's dependency label (a label, not a number: no cell of its own)."""
    overall = table.filter(pl.col("scope_by") == "")
    labels = overall.filter(pl.col("metric") == "dependency").select("model", "prompt", "split", "leaf").unique()
    note = "; ".join(f"{m} {p} ({s}) {d}" for m, p, s, d in labels.sort("model", "prompt", "split").iter_rows())
    return f"Accuracy per shuffling condition against chance; dependency: {note}"


def metrics_spec():
    """The cells and metric function of this protocol for ``omnieval.stats.metrics``, the metrics its paired
    differences compare and its headline table."""
    return ProtocolMetrics(name=NAME, families=_families(), metrics=metric_rows, derive=derive_columns,
                           conditions=ALL_CONDITIONS,
                           paired=PairedHeadline(every_key=("accuracy", "intra", "as_text_gap"), overall=("inter",)),
                           cluster="media_unit",  # questions about one clip share it (docs/reference.md)
                           key_parts=KEY_PARTS, scope_parts=KEY_PARTS,
                           headlines=(HeadlineTable(_headline_title, _headline_rows),),
                           bounds={"accuracy": UNIT, "circular_accuracy": UNIT, "group_score": UNIT,
                                   "official_group_score": UNIT, "chance": UNIT,
                                   "intra": DIFFERENCE, "inter": DIFFERENCE, "perceptual_score": DIFFERENCE,
                                   "as_text_gap": DIFFERENCE})


# === the protocol, as the registry knows it (omnieval.protocols.spec) ===

SPEC = ProtocolSpec(
    name=NAME, item=Item, options=Options, media_refs=media_refs, validate_items=validate_items,
    expand_all=expand_all, metrics=metrics_spec, instance_fields=InstanceFields,
    item_local=False,  # donors are drawn across all items: one expansion task holds them all
    condition_coverage=condition_coverage,
    paired_matrix=(("accuracy", "normal"), ("intra", None), ("inter", "")),
    report_section="omnieval.report.spectrum:section",
    synthetic_benchmark="omnieval.datasets.synthetic_spectrum:synthetic_benchmark",
)
