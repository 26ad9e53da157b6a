"""Protocol ``contrastive`` (Contra4; docs/reference.md, Protocol `contrastive`): pick, among 2-4 inputs of different
modalities, the one that answers the question.

**Items**: ``question``, ``inputs`` (2-4 of ``{modality: image|audio|video|pointcloud, path, caption}``), ``answer``
(the index of the answering input), ``selection_type`` (``random`` / ``similar``: how the negatives were drawn),
``category``.

**Conditions**: ``original`` (the inputs in the item's order) and option permutations ``perm:<order>``: ``perm:CAB``
shows the item's input C first (as scene A), then A, then B. ``Options.permutations``: ``"all"`` (the ``n! - 1``
non-identity orders, in lexicographic order), or a sample size ``k`` (``min(k, n! - 1)`` distinct non-identity orders
drawn without replacement by ``omnieval.kernels.permutations`` from the counter stream keyed on the run seed and the
item id: same seed and item, same orders, whatever else is in the benchmark), or ``0`` (original only).

**Caption baseline** (``Options.captions``): the same instances with every input replaced by its caption (text only),
condition prefixed ``captions:`` (``captions:original``, ``captions:perm:CAB``) and instance ids to match. The
statistics report those rows as the model ``<model>+captions`` with the prefix removed (``derive_columns``), so the
baseline gets every metric of the media model, the prompt column stays the prompt style, and one run of one model
config yields both. ``Options.media = False`` keeps only the caption instances (text-only models, the
round-trip-consistency filter).

**Prompt**: each input as an option segment (``Instance.option_segments``), labels ``A``..; ``option_texts`` are
``Scene A``, ``Scene B``... so an answer naming the scene parses. Every instance carries the ``scenes`` prompt layout
(``PROMPT_LAYOUT``, the spec's ``prompt_layout``), which ``omnieval.core.prompts.render_prompt``, used by every
engine, draws as in docs/reference.md, Protocol `contrastive`: ``Scene A.`` <media>
``Scene B.`` <media> ... then ``Question: ...`` and the instruction of the prompt style (for captions,
``Scene A. <caption>`` lines).

**Point clouds**: ``Options.pointcloud = "views"`` (default) shows a point cloud as an ``image`` segment on the
point cloud file; the decoder renders it to the tiled fixed views (``omnieval.media.pointcloud``), so any engine that
takes images takes it. ``"native"`` keeps the ``pointcloud`` modality for engines with 3D input.

**Evidence** (for the simulated engine only): the answer's modality (``text`` for captions) supports the target, and
one *position percept* per label, ``position:A`` -> ``A``..., supports its own label. The simulated engine gives a
percept it has no reliance for probability 0, so these change nothing by default; a model configured with
``reliance={"position:A": 0.3}`` votes for A on 30% of calls: a set position preference.

**Metrics** (``metrics_spec``): ``accuracy`` on ``original`` (keys ``all``, ``n=2|3|4``, ``selection=random|similar``,
``modality=<answer modality>``); ``permutation_consistency``: share of items answered correctly under every condition
evaluated for them (an invalid answer is not correct); ``position_bias`` per label L: share of valid choices equal to L
minus the mean over the same valid instances of ``[L exists] / n_inputs`` (all conditions pooled, so with all orders
the targets are balanced over positions); ``invalid_rate``. All are cell means or differences of cell means, so the
one bootstrap pass gives every CI.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from omnieval.core.keyed import keyed_seed
from omnieval.core.metric_types import DIFFERENCE, UNIT, CellFamily, MetricRow, ProtocolMetrics, support_of
from omnieval.core.protocol_views import HeadlineTable, PairedHeadline
from omnieval.core.schema import LABELS, InputError, Instance, ItemId, Segment
from omnieval.protocols.spec import ProtocolSpec

NAME = "contrastive"
PROMPT_LAYOUT = "scenes"
"""The options are the inputs themselves, each shown after its ``Scene X.`` prefix (``core.prompts.render_scenes``)."""
MODALITIES: tuple[str, ...] = ("image", "audio", "video", "pointcloud")
SELECTION_TYPES: tuple[str, ...] = ("random", "similar")
MIN_INPUTS, MAX_INPUTS = 2, 4
ORIGINAL = "original"
PERM_PREFIX = "perm:"
CAPTIONS_PREFIX = "captions:"
CAPTIONS_SUFFIX = "+captions"
POINTCLOUD_SUFFIXES: tuple[str, ...] = (".npy", ".npz", ".ply")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Input(_Strict):
    """One scene: a media file (benchmark-relative ``path``) of a ``modality``, and its ``caption``. ``source`` and
    ``id`` record where it came from (e.g. ``coco_val`` / ``173057``) and are not used by the protocol."""

    modality: Literal["image", "audio", "video", "pointcloud"]
    path: str = Field(min_length=1)
    caption: str = Field(min_length=1)
    source: str | None = None
    id: str | None = None


class Item(_Strict):
    """A base question of the contrastive protocol (docs/reference.md, Protocol `contrastive`)."""

    item_id: ItemId
    benchmark: str = "benchmark"
    split: str = "all"
    question: str = Field(min_length=1)
    inputs: list[Input] = Field(min_length=MIN_INPUTS, max_length=MAX_INPUTS)
    answer: int
    selection_type: Literal["random", "similar"]
    category: str | None = None
    task: str | None = None

    @field_validator("answer")
    @classmethod
    def _answer_in_range(cls, v: int, info) -> int:
        inputs = info.data.get("inputs")
        if inputs is not None and not 0 <= v < len(inputs):
            raise ValueError(f"answer index {v} is out of range for {len(inputs)} inputs (0..{len(inputs) - 1})")
        return v

    @property
    def answer_modality(self) -> str:
        return self.inputs[self.answer].modality


class InstanceFields(_Strict):
    """What a contrastive instance carries of its own (``Instance.protocol_fields``): how many inputs it shows, how
    its negatives were chosen and the modality of its answer, prediction columns the accuracy is split by."""

    n_inputs: int
    selection_type: str | None = None
    answer_modality: str | None = None


class Options(_Strict):
    """``permutations``: ``"all"`` or a sample size (0 = original only); ``captions``: add the caption-baseline
    instances; ``media``: the media instances (False: captions only); ``pointcloud``: ``views`` (rendered images) or
    ``native`` (the point cloud itself, for engines with 3D input)."""

    permutations: Literal["all"] | int = "all"
    captions: bool = False
    media: bool = True
    pointcloud: Literal["views", "native"] = "views"

    @field_validator("permutations", mode="before")
    @classmethod
    def _all_or_a_count(cls, v):
        """One message for both forms (pydantic would report each member of the union apart)."""
        if v != "all" and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ValueError(f"permutations must be 'all' or a sample size (an integer >= 0), got {v!r}")
        return v

    @model_validator(mode="after")
    def _something(self) -> Options:
        if not (self.media or self.captions):
            raise ValueError("media and captions are both off: nothing to evaluate")
        return self


# ---------------------------------------------------------------------------------------------------------------
# Conditions
# ---------------------------------------------------------------------------------------------------------------

def order_name(perm: Sequence[int]) -> str:
    """``(2, 0, 1)`` -> ``perm:CAB`` (position i shows the item's input ``perm[i]``)."""
    return PERM_PREFIX + "".join(LABELS[int(i)] for i in perm)


def _all_conditions() -> tuple[str, ...]:
    base = [ORIGINAL] + [order_name(p) for n in range(MIN_INPUTS, MAX_INPUTS + 1)
                         for p in itertools.permutations(range(n))]
    return tuple(base + [CAPTIONS_PREFIX + c for c in base])


CONDITIONS: tuple[str, ...] = _all_conditions()
"""Every condition name this protocol can produce (and ``perm:`` of the identity, accepted from other tools)."""


def item_orders(item: Item, seed: int, permutations: str | int = "all") -> list[tuple[str, tuple[int, ...]]]:
    """``(condition, order)`` of every order evaluated for the item: ``original`` first, then the permutations."""
    from omnieval.kernels.permutations import all_permutations, factorial, sample_permutations

    n = len(item.inputs)
    out = [(ORIGINAL, tuple(range(n)))]
    if permutations == "all":
        perms = all_permutations(n)[1:]
    else:
        k = min(int(permutations), factorial(n) - 1)
        perms = sample_permutations(n, k, seed, keyed_seed(0, item.item_id, "permutations"), exclude_identity=True)
    out += [(order_name(p), tuple(int(i) for i in p)) for p in perms]
    return out


# ---------------------------------------------------------------------------------------------------------------
# Items -> instances
# ---------------------------------------------------------------------------------------------------------------

def media_refs(item: Item) -> list[tuple[str, str, str]]:
    return [(inp.path, inp.modality, f"inputs[{i}].path") for i, inp in enumerate(item.inputs)]


def validate_items(items: Sequence[Item], bench=None, file: str | Path | None = None) -> None:
    """A point cloud is a ``.npy`` / ``.npz`` / ``.ply`` file; an item does not show the same file twice."""
    for item in items:
        seen: dict[str, int] = {}
        for i, inp in enumerate(item.inputs):
            where = {"file": file, "item": item.item_id, "field": f"inputs[{i}].path"}
            if inp.modality == "pointcloud" and Path(inp.path).suffix.lower() not in POINTCLOUD_SUFFIXES:
                raise InputError(f"point cloud {inp.path!r} is not a {' or '.join(POINTCLOUD_SUFFIXES)} file",
                                 **where)
            if inp.path in seen:
                raise InputError(f"{inp.path!r} is also inputs[{seen[inp.path]}]: the scenes of an item must differ",
                                 **where)
            seen[inp.path] = i


def instance_id(item_id: str, condition: str, seed: int) -> str:
    return f"{item_id}|{condition}|s{seed}"


def _shown_modality(modality: str, pointcloud: str) -> str:
    return "image" if modality == "pointcloud" and pointcloud == "views" else modality


def expand(item: Item, seed: int, options: Options | None = None) -> list[Instance]:
    """The instances of one item: every order, with media and/or captions (see the module doc)."""
    options = options or Options()
    n = len(item.inputs)
    labels = list(LABELS[:n])
    variants = ([False] if options.media else []) + ([True] if options.captions else [])
    out = []
    for captions in variants:
        for condition, order in item_orders(item, seed, options.permutations):
            shown = [item.inputs[i] for i in order]
            target = labels[order.index(item.answer)]
            if captions:
                segments = [Segment(kind="text", text=inp.caption) for inp in shown]
                percept = "text"
                condition = CAPTIONS_PREFIX + condition
            else:
                segments = [Segment(kind="media", modality=_shown_modality(inp.modality, options.pointcloud),
                                    path=inp.path) for inp in shown]
                percept = item.answer_modality
            evidence: dict[str, str | None] = {percept: target}
            evidence.update({f"position:{lab}": lab for lab in labels})
            out.append(Instance(
                instance_id=instance_id(item.item_id, condition, seed), item_id=item.item_id, protocol=NAME,
                benchmark=item.benchmark, split=item.split, condition=condition, segments=[],
                question=item.question, option_labels=labels, option_texts=[f"Scene {lab}" for lab in labels],
                option_segments=segments, target=target, task=item.task, category=item.category,
                protocol_fields=SPEC.fields(n_inputs=n, selection_type=item.selection_type,
                                            answer_modality=item.answer_modality),
                simulation_hints=evidence, media_unit=item.inputs[item.answer].path, layout=PROMPT_LAYOUT,
            ))
    return out


def expand_all(items: Sequence[Item], bench, seed: int, options: Options | None = None) -> list[Instance]:
    options = options or Options()
    out: list[Instance] = []
    for item in items:
        out.extend(expand(item, seed, options))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------------------------

POSITION_LABELS: tuple[str, ...] = tuple(LABELS[:MAX_INPUTS])
UNIT_ITEM = ["model", "prompt", "split", "item_id"]


def split_caption_baseline(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``captions:<condition>`` become the model ``<model>+captions`` with condition ``<condition>``."""
    is_cap = pl.col("condition").str.starts_with(CAPTIONS_PREFIX)
    return frame.with_columns(
        model=pl.when(is_cap).then(pl.col("model") + CAPTIONS_SUFFIX).otherwise(pl.col("model")),
        condition=pl.when(is_cap).then(pl.col("condition").str.slice(len(CAPTIONS_PREFIX)))
        .otherwise(pl.col("condition")),
    )


def derive_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """The caption baseline as its own model, then the cell columns of the protocol's metrics.

    ``n_inputs`` comes from the column of that name, else ``n_options``. Accuracy cells take the valid rows of
    ``original``; position cells all valid rows; ``permutation_consistency`` one flag per item (on its first row),
    true when every row of the item is correct. Errored rows (``error`` set: never answered) are conditions not
    evaluated: they leave the item's consistency, and an item with no answered row has none."""
    frame = split_caption_baseline(frame)
    n_col = next((c for c in ("n_inputs", "n_options") if c in frame.columns), None)
    n = pl.col(n_col).cast(pl.Int64, strict=False) if n_col else pl.lit(None, dtype=pl.Int64)
    frame = frame.with_columns(_n=n)
    extra = [
        (pl.col("valid") & (pl.col("condition") == ORIGINAL)).alias("_orig_valid"),
        pl.lit("all").alias("_all_key"),
        pl.col("_n").cast(pl.Utf8).alias("_n_key"),
    ]
    if "selection_type" in frame.columns:
        extra.append(pl.col("selection_type").cast(pl.Utf8).alias("_sel_key"))
    if "answer_modality" in frame.columns:
        extra.append(pl.col("answer_modality").cast(pl.Utf8).alias("_mod_key"))
    for i, label in enumerate(POSITION_LABELS):
        extra.append((pl.col("choice") == label).fill_null(False).cast(pl.Float64).alias(f"_is_{label}"))
        extra.append(pl.when(pl.col("_n") > i).then(1.0 / pl.col("_n")).otherwise(0.0).alias(f"_exp_{label}"))
    frame = frame.with_columns(extra)
    frame = frame.with_columns(pos_valid=pl.col("valid") & pl.col("_n").is_not_null())
    per_item = (frame.filter("answered").group_by(UNIT_ITEM)
                .agg(pl.col("correct").all().cast(pl.Float64).alias("_consist")))
    marker = (pl.int_range(pl.len()).over(UNIT_ITEM) == 0).alias("_marker")
    out = frame.with_columns(marker).join(per_item, on=UNIT_ITEM, how="left")
    return out.with_columns(_consist_ok=pl.col("_marker") & pl.col("_consist").is_not_null()).drop("_marker")


KEY_PARTS = ("n_inputs", "selection_type", "answer_modality")
"""The protocol's own key parts (``ProtocolMetrics.key_parts``): the subset of the original-order answers an
``accuracy`` row is over (``n=3``, ``selection=similar``, ``modality=audio``; none set: ``all``). Each is a whole
column of the predictions, not a scope of the unit, so the paired differences compare them all."""
SUBSETS = (("acc_n", "n_inputs", "n"), ("acc_sel", "selection_type", "selection"),
           ("acc_mod", "answer_modality", "modality"))
"""Accuracy cell family per subset, its key part and the name its label gives it."""


def metric_rows(cells):
    """The metrics of docs/reference.md, Protocol `contrastive`, of one unit as ``MetricRow`` records."""
    if cells.has("acc", "all"):
        yield MetricRow("accuracy", cells.mean("acc", "all"), cells.support("acc", "all"), "all")
    for family, part, name in SUBSETS:
        for (value,) in cells.keys(family):
            yield MetricRow("accuracy", cells.mean(family, value), cells.support(family, value), f"{name}={value}",
                            {part: value})
    if cells.has("consist"):
        yield MetricRow("permutation_consistency", cells.mean("consist"), cells.support("consist"))
    for label in POSITION_LABELS:
        if cells.has(f"pos_{label}") and cells.has(f"exp_{label}"):
            expected = cells.mean(f"exp_{label}")
            if np.isfinite(expected[0]) and expected[0] > 0:
                chosen = cells.support(f"pos_{label}")
                yield MetricRow("position_bias", cells.mean(f"pos_{label}") - expected,
                                support_of(chosen, cells.support(f"exp_{label}"), n=chosen.n), label, {"leaf": label})
    if cells.has("invalid"):
        yield MetricRow("invalid_rate", cells.mean("invalid"), cells.support("invalid"))


def _families():
    out = [CellFamily("acc", "correct", "_orig_valid", ("_all_key",)),
           CellFamily("acc_n", "correct", "_orig_valid", ("_n_key",)),
           CellFamily("acc_sel", "correct", "_orig_valid", ("_sel_key",)),
           CellFamily("acc_mod", "correct", "_orig_valid", ("_mod_key",)),
           CellFamily("consist", "_consist", "_consist_ok")]
    for label in POSITION_LABELS:
        out += [CellFamily(f"pos_{label}", f"_is_{label}", "pos_valid"),
                CellFamily(f"exp_{label}", f"_exp_{label}", "pos_valid")]
    out.append(CellFamily("invalid", "invalid", "answered"))
    return tuple(out)


def _headline_rows(table: pl.DataFrame) -> pl.DataFrame:
    whole = (pl.col("selection_type") == "") & (pl.col("answer_modality") == "")
    keep = (((pl.col("metric") == "accuracy") & whole)
            | (pl.col("metric") == "permutation_consistency")
            | ((pl.col("metric") == "position_bias") & (pl.col("leaf") == "A")))
    return table.filter(keep)


def metrics_spec():
    """The cells and metric function of this protocol for ``omnieval.stats.metrics``, the metrics its paired
    differences compare and its headline table."""
    return ProtocolMetrics(
        name=NAME, families=_families(), metrics=metric_rows, derive=derive_columns, conditions=CONDITIONS,
        paired=PairedHeadline(every_key=("accuracy",), overall=("permutation_consistency",)),
        cluster="media_unit",  # the questions one input answers share it (docs/reference.md, Resampling unit)
        key_parts=KEY_PARTS,
        headlines=(HeadlineTable("Accuracy by number of inputs, permutation consistency, position bias of A",
                                 _headline_rows),),
        bounds={"accuracy": UNIT, "permutation_consistency": UNIT, "position_bias": DIFFERENCE})


# === the protocol, as the registry knows it (omnieval.protocols.spec) ===

SPEC = ProtocolSpec(
    name=NAME, item=Item, options=Options, media_refs=media_refs, validate_items=validate_items,
    expand_all=expand_all, metrics=metrics_spec, instance_fields=InstanceFields,
    item_local=True,  # an item's instances depend on that item alone
    prompt_layout=PROMPT_LAYOUT,
    paired_matrix=(("accuracy", "all"), ("permutation_consistency", "")),
    report_section="omnieval.report.contrastive:section",
    synthetic_benchmark="omnieval.datasets.synthetic_contrastive:synthetic_benchmark",
)
