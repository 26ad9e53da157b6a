"""The vocabulary protocols and the metrics table share: cell families, a protocol's metric spec, resampled cells.

A protocol module describes its metrics with these types only (``metrics_spec() -> ProtocolMetrics``); the bootstrap
pass (``omnieval.stats.bootstrap``) fills ``Cells`` and calls the spec's metric function. Kept below both so that the
protocols never import the module that computes the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from omnieval.core.protocol_views import ConditionTests, HeadlineTable, PairedHeadline

UNIT = (0.0, 1.0)
"""A share of rows or items, a mean of probabilities, or an average distance between two such."""
DIFFERENCE = (-1.0, 1.0)
"""A difference of two shares."""
SHARED_BOUNDS: dict[str, tuple[float, float]] = {
    "error_rate": UNIT, "open_error_rate": UNIT, "invalid_rate": UNIT, "forced_rate": UNIT, "ece": UNIT,
    "rc_auc": UNIT, "open_accuracy": UNIT, "open_abstention": UNIT, "judge_agreement": UNIT,
    "open_invalid_verdicts": UNIT, "mcq_open_gap": DIFFERENCE, "judge_kappa": DIFFERENCE,
    "official_accuracy": UNIT, "open_official_accuracy": UNIT, "unparsed_share": UNIT, "forced_share": UNIT,
    "official_forced_share": UNIT, "open_rating": (1.0, 5.0), "ifeval_prompt_strict": UNIT,
    "ifeval_instruction_strict": UNIT, "ifeval_prompt_loose": UNIT, "ifeval_instruction_loose": UNIT,
    "disagree": (0.0, np.inf)}
"""The metrics shared code adds to every protocol (``with_error_rates``, ``with_forced_rate``,
``with_answer_verdicts``, calibration, the open-ended metrics of ``stats.open_metrics``)."""


@dataclass(frozen=True, eq=False)
class Support:
    """What one metric row rests on: ``n`` rows (predictions) from the unit's items where ``items`` holds (a boolean
    mask over the unit's items, the questions of ``question_of``, in ``UnitData.item_ids`` order).

    The table's ``n_items`` is ``items.sum()``: the items behind the row, not the whole unit's, and its
    ``n_clusters`` the resampling units those items fall in, so a row of one anchor, task or category shows how few
    clusters its interval rests on. ``a + b`` adds the rows and joins the
    items (``sum()`` of supports works), the way a metric over several cells rests on all of them.
    """

    n: int
    items: np.ndarray

    @property
    def n_items(self) -> int:
        return int(np.count_nonzero(self.items))

    def __add__(self, other: Support | int) -> Support:
        if isinstance(other, int) and other == 0:  # the start of sum()
            return self
        if not isinstance(other, Support):
            return NotImplemented
        return Support(self.n + other.n, self.items | other.items)

    __radd__ = __add__


def support_of(*parts: Support, n: int | None = None) -> Support:
    """The items of all ``parts`` together, with ``n`` rows (their summed rows unless given): for a metric whose
    ``n`` counts some of the cells it reads (``ace``: the abstention rows, though it reads the human targets too)."""
    joined = sum(parts[1:], parts[0])
    return joined if n is None else Support(n, joined.items)


CLUSTER = "_cluster"
"""Column of a prepared predictions frame naming each row's resampling unit: its question (``question_of``) unless
another unit was chosen (``omnieval.stats.clusters``: an anchor, a media file, any column holding whole questions)."""

QUESTION = "_question"
"""Column of a prepared predictions frame naming each row's question (``question_of``): what ``n_items`` counts."""

ITEM_CLUSTER = "item"
"""The finest resampling unit: the question (``question_of``), every protocol's default unless its spec names
another (``ProtocolMetrics.cluster``). ``group`` names the same unit."""


def question_of(frame: pl.DataFrame) -> pl.Expr:
    """Each row's question: its ``group`` where set (the question an item is a copy of: VLMEvalKit's circular copies
    of one question are one question), else its ``item_id`` (docs/reference.md, Statistics common to all protocols:
    all instances of one base question are drawn together)."""
    if "group" not in frame.columns:
        return pl.col("item_id").alias(QUESTION)
    return pl.coalesce(pl.col("group").cast(pl.Utf8), pl.col("item_id")).alias(QUESTION)


def cluster_of(frame: pl.DataFrame) -> pl.Expr:
    """The default resampling unit of each row: its question (``question_of``), as ``CLUSTER``."""
    return question_of(frame).alias(CLUSTER)


RESERVED_COLUMNS = ("protocol", "model", "prompt", "split", "metric", "key", "value", "ci_low", "ci_high", "n",
                    "n_items", "n_clusters", "run", "comparison", "a", "b", "model_a", "model_b")
"""Columns of the metrics and paired tables that no key part may be named."""

KEY_PARTS = ("leaf", "method", "judge")
"""The key parts every protocol's rows may carry, each a column of the metrics table: ``leaf`` (what the row is
of inside its scope: a condition, direction, level, modality, anchor, option label, error kind...), ``method`` (the
confidence method of a calibration row) and ``judge`` (the judge of an open-ended row). A protocol's own parts
(a task, a category, an input count) are its ``ProtocolMetrics.key_parts``. A part a row does not set is ``""``."""

OPEN_KEY_PARTS = ("k",)
"""The open-ended metrics' own key part (``stats.open_metrics``) beside ``leaf`` (a condition) and ``judge``: the
corruption level ``k`` of a row over one level (labelled ``k=<k>``)."""


@dataclass(frozen=True, eq=False)
class MetricRow:
    """One metric row of one unit, as a protocol's metric function yields it.

    ``values``: over rows [data, resample 1, ..., resample R]; ``support``: the rows and items behind the value.
    ``parts``: the key as named parts (``KEY_PARTS`` and the protocol's ``key_parts``; parts not set are ``""``),
    what every reader selects rows by; ``key``: the same key as one label for people (``task/direction``,
    ``0@rs``), written to the table beside the parts and never read back."""

    metric: str
    values: np.ndarray
    support: Support
    key: str = ""
    parts: Mapping[str, str] = field(default_factory=dict)

    def with_metric(self, metric: str, values: np.ndarray | None = None) -> MetricRow:
        """The same key and support under another metric name (and values)."""
        return replace(self, metric=metric, values=self.values if values is None else values)


@dataclass(frozen=True)
class CellFamily:
    """Cells ``name|key``: the mean of column ``value`` over the rows where ``where`` holds, one cell per distinct
    value of the ``by`` columns. A family whose ``by`` column is absent from the input is skipped."""

    name: str
    value: str
    where: str | None = None
    by: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProtocolMetrics:
    """What the statistics need from a protocol: its cells, its metric function, its calibration, and how its
    metrics are compared and printed.

    ``derive`` adds protocol columns to the prepared frame (e.g. the corruption level from the condition);
    ``conditions``, if given, is the set of valid condition names (checked per input file);
    ``calibration``: ECE and RC-AUC per confidence method over the rows where the column ``has_conf`` holds;
    ``paired``: the metrics of the paired differences (``omnieval.stats.paired``; default accuracy per condition);
    ``headlines``: the tables ``omnieval metrics`` prints (``omnieval.stats.headlines``; default none);
    ``tests``: the significance tests on the protocol's conditions (``omnieval.stats.significance``; default none);
    ``cluster``: the resampling unit its intervals, paired differences, tests and power use unless the user names
    another (``omnieval.stats.clusters``; docs/reference.md, Statistics common to all protocols);
    ``bounds``: metric name -> the values it can take (``SHARED_BOUNDS`` adds the metrics shared code computes),
    which its intervals are clipped to (``bounds_of``). A metric not named is not clipped.
    ``key_parts``: the protocol's own key parts beyond ``KEY_PARTS`` (each a column of the metrics table, ``""`` on
    other protocols' rows); ``scope_parts``: those of them that restrict a row to part of the unit (a task, a
    category): a row with any of them set is not the unit's own, and the paired differences leave it out.
    """

    name: str
    families: tuple[CellFamily, ...]
    metrics: Callable[[Cells], Iterable[MetricRow]]
    derive: Callable[[pl.DataFrame], pl.DataFrame] | None = None
    conditions: tuple[str, ...] | None = None
    calibration: bool = False
    paired: PairedHeadline = PairedHeadline()
    headlines: tuple[HeadlineTable, ...] = ()
    tests: ConditionTests | None = None
    cluster: str = ITEM_CLUSTER
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    key_parts: tuple[str, ...] = ()
    scope_parts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        clash = [p for p in self.key_parts if p in KEY_PARTS or p in RESERVED_COLUMNS]
        if clash or not set(self.scope_parts) <= set(self.key_parts):
            raise ValueError(f"protocol {self.name!r}: key parts {self.key_parts} must not repeat a shared part or "
                             f"a table column ({', '.join(clash) or 'none'}), and scope parts {self.scope_parts} "
                             "must be among them")

    def scoped(self, parts: Mapping[str, str]) -> bool:
        """Whether a row with these key parts is restricted to part of its unit (a scope part set)."""
        return any(parts.get(p) for p in self.scope_parts)

    def compares(self, row: MetricRow) -> bool:
        """Whether the paired differences compare this row between two models or prompt styles (``paired``)."""
        return self.paired.covers(row.metric, scoped=self.scoped(row.parts), keyless=not any(row.parts.values()))

    def bounds_of(self, metric: str) -> tuple[float, float]:
        """The values ``metric`` can take: this protocol's, then the shared metrics', else unbounded."""
        return self.bounds.get(metric) or SHARED_BOUNDS.get(metric) or (-np.inf, np.inf)


@dataclass
class Cells:
    """Resampled cell sums and counts of one unit. Row 0 is the data, rows 1..R the bootstrap resamples.

    ``methods``: the confidence methods present in the protocol's input (confidence metrics carry a ``@method``
    key suffix when there are several: they are never pooled). ``present``: items x cells, True where the item has
    a row in the cell (in the data): what ``support`` reads.
    """

    sums: np.ndarray
    counts: np.ndarray
    index: dict[tuple[str, ...], int]
    present: np.ndarray
    stats: dict[tuple[str, ...], tuple[np.ndarray, Support]] = field(default_factory=dict)
    methods: tuple[str, ...] = ()

    def has(self, family: str, *key: str) -> bool:
        return (family, *key) in self.index

    def keys(self, family: str) -> list[tuple[str, ...]]:
        """Keys of a family present in this unit, sorted."""
        return sorted(k[1:] for k in self.index if k[0] == family)

    def sum(self, family: str, *key: str) -> np.ndarray:
        return self.sums[:, self.index[(family, *key)]]

    def count(self, family: str, *key: str) -> np.ndarray:
        return self.counts[:, self.index[(family, *key)]]

    def mean(self, family: str, *key: str) -> np.ndarray:
        """Cell mean on every row (NaN where a resample drew no row of the cell)."""
        c = self.count(family, *key)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(c > 0, self.sum(family, *key) / np.where(c > 0, c, 1), np.nan)

    def n(self, family: str, *key: str) -> int:
        """Rows behind the cell in the data (row 0)."""
        return int(self.count(family, *key)[0])

    def support(self, family: str, *key: str) -> Support:
        """Rows and items behind the cell in the data (``n`` with the items that have a row in it)."""
        return Support(self.n(family, *key), self.present[:, self.index[(family, *key)]])

    def stat(self, name: str, *key: str) -> tuple[np.ndarray, Support]:
        """An instance-level statistic (``ece`` / ``rc_auc`` per method): values over rows, and its support."""
        return self.stats[(name, *key)]

    def method_suffix(self, method: str) -> str:
        return f"@{method}" if len(self.methods) > 1 else ""


def with_error_rates(spec: ProtocolMetrics, kinds: Iterable[str], metric: str = "error_rate",
                     where: str | None = None) -> ProtocolMetrics:
    """``spec`` plus the error rates of its units: ``<metric>`` with key ``""`` (every kind together) and one key
    per kind in ``kinds``, each the share of the unit's rows (those where ``where`` holds) whose ``error`` is of
    that kind. They are cell means like any rate, so they get their CI from the same bootstrap pass."""
    kinds = tuple(kinds)
    families = (CellFamily("_error", "errored", where),
                *(CellFamily(f"_error_{kind}", f"_error_{kind}", where) for kind in kinds))

    def metrics(cells: Cells) -> Iterable[MetricRow]:
        yield from spec.metrics(cells)
        if cells.has("_error"):
            yield MetricRow(metric, cells.mean("_error"), cells.support("_error"))
        for kind in kinds:
            if cells.has(f"_error_{kind}"):
                yield MetricRow(metric, cells.mean(f"_error_{kind}"), cells.support(f"_error_{kind}"), kind,
                                {"leaf": kind})

    return replace(spec, families=spec.families + families, metrics=metrics)


def with_forced_rate(spec: ProtocolMetrics) -> ProtocolMetrics:
    """``spec`` plus ``forced_rate``: among a unit's chain-of-thought answers whose engine records how the choice
    was made (``answer_source``), the share the label logits made because the reasoning named no answer. Those
    choices count as answers in accuracy (the engine's rule); this says how many of them the model never gave."""
    family = CellFamily("_forced", "forced", "_cot_answer")

    def metrics(cells: Cells) -> Iterable[MetricRow]:
        yield from spec.metrics(cells)
        if cells.has("_forced"):
            yield MetricRow("forced_rate", cells.mean("_forced"), cells.support("_forced"))

    return replace(spec, families=spec.families + (family,), metrics=metrics)



VERDICT_METRICS: dict[str, tuple[str, str]] = {
    "official_accuracy": ("_official_correct", "_official_counted"),
    "disagree": ("_disagree", "_official_read"),
    "unparsed_share": ("_unparsed", "_scored"),
    "forced_share": ("forced", "_scored"),
    "official_forced_share": ("_official_forced", "_official_read"),
}
"""The metrics beside every accuracy cell of answers read from generated text (``with_answer_verdicts``): metric ->
(the row column it averages, the rows it averages over; ``stats.read.prepare`` derives both). ``disagree`` is a
count (the share times the cell's answers)."""
UNPARSED_FLAG = 0.05
"""An accuracy cell whose ``unparsed_share`` is above this is flagged (metrics, report, sweep summary)."""


def with_answer_verdicts(spec: ProtocolMetrics) -> ProtocolMetrics:
    """``spec`` plus, beside each of its ``accuracy`` rows, the ``VERDICT_METRICS`` of the same cell.

    Each accuracy family (``correct`` over ``valid`` rows) gets a twin per metric, over the same ``by`` columns, and
    the protocol's own metric function is run again on a view of the cells where the accuracy family reads its
    twin: its ``accuracy`` rows are then the twin metric under the very keys the protocol gives accuracy, with the
    same resamples and so the same kind of interval. ``official_accuracy`` counts the answers the benchmark's rule
    counts (``official_correct`` not null: a rule that drops an unextracted answer drops it from the denominator)."""
    accuracy = tuple(f for f in spec.families if f.value == "correct" and f.where == "valid")
    if not accuracy:
        return spec
    twins = tuple(CellFamily(f"{metric}:{f.name}", value, where, f.by)
                  for metric, (value, where) in VERDICT_METRICS.items() for f in accuracy)
    names = {f.name for f in accuracy}

    def metrics(cells: Cells) -> Iterable[MetricRow]:
        yield from spec.metrics(cells)
        for metric in VERDICT_METRICS:
            view = _twin_view(cells, metric, names)
            if view is None:
                continue
            for row in spec.metrics(view):
                if row.metric == "accuracy":
                    yield row.with_metric(metric, row.values * row.support.n if metric == "disagree" else None)

    return replace(spec, families=spec.families + twins, metrics=metrics)


def _twin_view(cells: Cells, metric: str, names: set[str]) -> Cells | None:
    """``cells`` with every accuracy family (``names``) reading its ``metric`` twin instead; None where the unit has
    no cell of the twin (no answer read from generated text)."""
    index = {key: i for key, i in cells.index.items() if key[0] not in names}
    twin = {(key[0].split(":", 1)[1], *key[1:]): i for key, i in cells.index.items()
            if key[0].startswith(f"{metric}:") and key[0].split(":", 1)[1] in names}
    return replace(cells, index=index | twin) if twin else None
