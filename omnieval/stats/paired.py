"""Paired differences: how much better model A is than model B (or cot than zs, or multiple-choice than open-ended)
on the same items, with an interval, not only a p-value.

For every pair on matched items and every headline metric (the protocol's ``ProtocolMetrics.paired``: accuracy
per condition / direction / level and its summary metrics), one row of the long ``paired`` table
(``PAIRED_COLUMNS``):

* ``estimate`` = metric(a) - metric(b) on the data, ``ci_low``/``ci_high`` its 95% interval (``stats.intervals``:
  the table's method, with the row's cluster count) from the **same resampling pass as the metrics table**: units on
  the same split and the same clusters draw the same clusters in every resample (``stats.bootstrap.shared_item_sets``),
  so ``metric_a[r] - metric_b[r]`` is the clustered bootstrap of the difference. Two units whose item sets differ are
  compared on their common items, in a pass of their own (the only case that resamples again).
* ``item_corr``: Pearson correlation over the common resampling units (the questions by default, the anchors where
  those are the unit: ``stats.clusters``) of the two sides' per-unit accuracy (in the row's condition for an
  ``accuracy`` row, over all conditions on the row's units otherwise; for ``modes``, multiple-choice correctness
  against the judges' mean verdict): how much of the two sides' unit-level noise cancels in the difference.
* ``n_items``: the items behind the row on both sides (those the metric reads in each unit, as the metrics table's
  ``n_items``; for ``modes``, the items with both a multiple-choice and a graded open answer); ``n_clusters``: the
  resampling units holding them.
* ``p_value``: for an accuracy row of one condition, the paired sign-flip permutation test (docs/reference.md,
  Statistics common to all protocols) on the per-unit differences of the two sides' accuracy in that condition
  (``p_method`` = ``permutation``); for every other metric the bootstrap p-value of the same R resamples,
  ``2 min(#(d* <= 0) + 1, #(d* >= 0) + 1) / (R + 1)`` (``p_method`` = ``bootstrap``; never 0, as for a Monte Carlo
  permutation p), below 0.05 about when the percentile interval excludes 0. ``p_adjusted``: Benjamini-Hochberg within a
  family = one protocol x comparison x context (prompt and split for model pairs, model and split for prompt pairs,
  model, prompt and split for modes).

Comparisons and orientation (the signs of ``omnieval stats``): ``models``: a, b in order of first appearance,
a - b; ``prompts`` (per model): the later style minus the earlier (``zs`` and ``cot`` first), so cot - zs;
``modes``: multiple-choice minus open-ended (the ``mcq_open_gap`` metric of ``open_metrics``, judge-averaged).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from omnieval.core.keyed import keyed_seed
from omnieval.core.metric_types import QUESTION
from omnieval.core.schema import DEFAULT_MODE, OPEN_MODE
from omnieval.kernels.permutation import sign_flip_tests
from omnieval.protocols import metric_spec
from omnieval.stats.bootstrap import CONFIDENCE_LEVEL, UNIT, protocol_rows, row_items
from omnieval.stats.clusters import ClusterChoice, with_clusters
from omnieval.stats.intervals import DEFAULT_METHOD, clipped, difference_bounds, intervals, needs_jackknife
from omnieval.stats.key_parts import key_columns
from omnieval.stats.metrics import metrics_table
from omnieval.stats.multiple_testing import bh_within
from omnieval.stats.read import prepare
from omnieval.stats.samples import SPLIT_COLUMNS, VarianceSplit, has_samples

PAIRED_COLUMNS = ("protocol", "comparison", "model", "prompt", "split", "a", "b", "metric", "key", "estimate",
                  "ci_low", "ci_high", "a_value", "b_value", "item_corr", "n_items", "n_clusters", "p_value",
                  "p_method", "p_adjusted")

_OPEN = "mcq_open_gap"


@dataclass
class UnitValues:
    """What is kept of one unit: its headline rows' values over [data, resamples], per-cluster accuracies (the
    resampling units: what item correlations and permutation tests read) and the questions behind each row."""

    protocol: str
    key: tuple[str, str, str]  # model, prompt, split
    item_ids: tuple[str, ...]  # the unit's questions
    cluster_ids: tuple[str, ...] = ()
    item_cluster: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # question -> cluster row
    values: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    per_item: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (metric, key) -> clusters
    single_cell: set[tuple[str, str]] = field(default_factory=set)  # rows that are one cell's accuracy
    items: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (metric, key) -> mask of its questions
    parts: dict[tuple[str, str], Mapping[str, str]] = field(default_factory=dict)  # (metric, key) -> its key parts

    def cluster_mask(self, items: np.ndarray) -> np.ndarray:
        """The clusters (a mask over ``cluster_ids``) holding the questions where ``items`` holds."""
        return np.bincount(self.item_cluster[items], minlength=len(self.cluster_ids)) > 0


def _cell_mean(unit, cells: list[int]) -> np.ndarray:
    """Per-cluster mean of the pooled cells (NaN for a cluster with no row in them)."""
    if not cells:
        return np.full(unit.n_clusters, np.nan)
    s = unit.sums[:, cells].sum(axis=1)
    c = unit.counts[:, cells].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > 0, s / np.where(c > 0, c, 1), np.nan)


def _nanmean_columns(columns: list[np.ndarray]) -> np.ndarray:
    stack = np.vstack(columns)
    ok = ~np.isnan(stack)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok.any(axis=0), np.nansum(stack, axis=0) / np.maximum(ok.sum(axis=0), 1), np.nan)


class Collector:
    """The ``stats.bootstrap.UnitHook`` that keeps every unit's headline values (a few per unit, not the whole
    table)."""

    def __init__(self) -> None:
        self.units: list[UnitValues] = []
        self.open_units: list[UnitValues] = []

    def __call__(self, spec, unit, rows, values) -> None:
        index = {name: j for j, name in enumerate(unit.cells)}
        is_open = any(r.metric in (_OPEN, "open_accuracy") for r in rows)
        kept = UnitValues(spec.name, unit.key, unit.item_ids, unit.cluster_ids, unit.item_cluster)
        if is_open:
            self._open(kept, unit, index, rows, values)
            return
        pooled = [j for name, j in index.items() if name[0] == "acc"]
        for j, row in enumerate(rows):
            if not spec.compares(row):
                continue
            metric, key = row.metric, row.key
            kept.values[(metric, key)] = values[j]
            kept.parts[(metric, key)] = row.parts
            items = kept.items[(metric, key)] = row_items(row.support, unit)
            if metric == "accuracy" and ("acc", key) in index:
                kept.per_item[(metric, key)] = _cell_mean(unit, [index[("acc", key)]])
                kept.single_cell.add((metric, key))
            else:  # accuracy over every condition, on the clusters behind the row (e.g. one input count's)
                kept.per_item[(metric, key)] = np.where(unit.cluster_mask(items), _cell_mean(unit, pooled), np.nan)
        self.units.append(kept)

    def _open(self, kept: UnitValues, unit, index, rows, values) -> None:
        """``mcq_open_gap`` rows: the difference is already a metric of one unit (same resamples by construction);
        kept with the per-item multiple-choice and judge-averaged open accuracies behind it."""
        tags = {"all": ("a", ()), **{name[1]: ("c", (name[1],)) for name in index if name[0] == "mcqc"},
                **{f"k={name[1]}": ("k", (name[1],)) for name in index if name[0] == "mcqk"}}
        for j, row in enumerate(rows):
            metric, key = row.metric, row.key
            if metric != _OPEN or key not in tags:
                continue
            kept.parts[("accuracy", key)] = row.parts
            tag, rest = tags[key]
            judges = [index[name] for name in index if name[0].startswith("acc") and name[0].endswith(tag)
                      and name[0][3:-1].isdigit() and name[1:] == rest]
            if (f"mcq{tag}", *rest) not in index or not judges:
                continue
            kept.values[("accuracy", key)] = values[j]
            mcq = _cell_mean(unit, [index[(f"mcq{tag}", *rest)]])
            opened = _nanmean_columns([_cell_mean(unit, [i]) for i in judges])
            kept.per_item[("accuracy", key)] = np.vstack([mcq, opened])
            kept.items[("accuracy", key)] = unit.present[:, index[(f"mcq{tag}", *rest)]] \
                & unit.present[:, judges].any(axis=1)
            kept.single_cell.add(("accuracy", key))
        if kept.values:
            self.open_units.append(kept)


def _pairs(units: list[UnitValues], model_order: dict[str, int]):
    """``(comparison, model, prompt, split, a_unit, b_unit)`` for every model pair and every prompt pair."""
    by_context: dict[tuple, list[UnitValues]] = {}
    for u in units:
        by_context.setdefault(("models", u.protocol, u.key[1], u.key[2]), []).append(u)
        by_context.setdefault(("prompts", u.protocol, u.key[0], u.key[2]), []).append(u)
    for (comparison, _, context, split), group in by_context.items():
        if comparison == "models":
            group = sorted(group, key=lambda u: (model_order.get(u.key[0], len(model_order)), u.key[0]))
            for a, b in itertools.combinations(group, 2):
                yield comparison, "", context, split, a, b
        else:
            group = sorted(group, key=lambda u: ({"zs": 0, "cot": 1}.get(u.key[1], 2), u.key[1]))
            for first, second in itertools.combinations(group, 2):
                yield comparison, context, "", split, second, first


def _bootstrap_p(diff: np.ndarray) -> float | None:
    d = diff[np.isfinite(diff)]
    if not len(d):
        return None
    if np.all(d == 0):
        return 1.0
    total = len(d) + 1
    return float(min(1.0, 2.0 * min((np.sum(d <= 0) + 1) / total, (np.sum(d >= 0) + 1) / total)))


def _corr(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r of the finite pairs; None below 3 pairs or where a side is constant. The operations of
    ``np.corrcoef`` (the same bits) without its argument handling, which cost more than the sums for thousands of
    paired rows of a few hundred items each."""
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return None
    both = np.vstack((x[ok], y[ok])).astype(np.float64)
    if np.std(both[0]) == 0 or np.std(both[1]) == 0:
        return None
    both -= both.mean(axis=1)[:, None]
    c = np.dot(both, both.T.conj())
    c *= np.true_divide(1, both.shape[1] - 1)
    sd = np.sqrt(np.diag(c))
    return float(np.clip(c[0, 1] / sd[0] / sd[1], -1, 1))


def _num(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def pair_rows(comparison: str, model: str, prompt: str, split: str, a: UnitValues, b: UnitValues | None,
              jobs: list, a_name: str, b_name: str, resamples: int) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """Rows of one pair (``b`` None: modes, where ``a`` holds the gap itself and both per-item sides), their
    differences over [data, resamples (, jackknife)] and the clusters behind each row (a mask per row). The
    intervals are filled in later, many pairs at once (``_Intervals``), and so are the permutation p-values:
    ``(row, per-cluster differences, stream)`` goes to ``jobs``."""
    keys = [k for k in a.values if b is None or k in b.values]
    if not keys:
        return [], np.zeros((0, 0)), np.zeros((0, 0), bool)
    if b is None:
        diffs = np.vstack([a.values[k] for k in keys])
    else:  # each difference written in its row (no per-row temporaries to copy)
        diffs = np.empty((len(keys), len(a.values[keys[0]])))
        for j, k in enumerate(keys):
            np.subtract(a.values[k], b.values[k], out=diffs[j])
    out = []
    masks = np.zeros((len(keys), len(a.cluster_ids)), dtype=bool)
    for j, (metric, key) in enumerate(keys):
        if b is None:
            x, y = a.per_item[(metric, key)]
        else:
            x, y = a.per_item[(metric, key)], b.per_item[(metric, key)]
        ok = np.isfinite(x) & np.isfinite(y)
        # questions behind the row on both sides (the two units hold the same questions in the same order here)
        both = a.items[(metric, key)] if b is None else a.items[(metric, key)] & b.items[(metric, key)]
        masks[j] = a.cluster_mask(both)
        n_items, n_clusters = int(np.count_nonzero(both)), int(np.count_nonzero(masks[j]))
        permuted = (metric, key) in a.single_cell and (b is None or (metric, key) in b.single_cell)
        p, method = (None, "permutation") if permuted else (_bootstrap_p(diffs[j, 1:1 + resamples]), "bootstrap")
        out.append({
            "protocol": a.protocol, "comparison": comparison, "model": model, "prompt": prompt, "split": split,
            "a": a_name, "b": b_name, "metric": metric, "key": key, "estimate": _num(diffs[j, 0]),
            "ci_low": None, "ci_high": None,
            "a_value": None if b is None else _num(a.values[(metric, key)][0]),
            "b_value": None if b is None else _num(b.values[(metric, key)][0]),
            "item_corr": _corr(x, y), "n_items": n_items, "n_clusters": n_clusters, "p_value": _num(p),
            "p_method": method,
            "p_adjusted": None,
            **a.parts.get((metric, key), {}),
        })
        if permuted:
            stream = keyed_seed(0, "paired", a.protocol, comparison, model, prompt, split, a_name, b_name, key)
            jobs.append((out[-1], x[ok] - y[ok], np.uint64(stream)))
    return out, diffs, masks


class _Intervals:
    """Intervals of many pairs' differences in one call per ``batch`` rows for the percentile interval (one kernel
    call per pair would wake the worker threads hundreds of times for a few rows each). The t interval is numpy
    row by row, so its pairs are done as they come, without copying them into a batch first (the copy cost as much
    as the interval: hundreds of MB at 10,000 resamples). BCa reads each pair's own jackknife rows (as many as its
    clusters), so its pairs are done one at a time."""

    def __init__(self, resamples: int, method: str, batch: int = 512):
        self.resamples, self.method, self.batch = resamples, method, batch
        self.rows: list[dict] = []
        self.diffs: list[np.ndarray] = []
        self.done: list[dict] = []

    def add(self, rows: list[dict], diffs: np.ndarray, masks: np.ndarray) -> None:
        if not rows:
            return
        if self.method != "percentile":
            self._fill(rows, diffs, masks if needs_jackknife(self.method) else None)
            self.done += rows
            return
        self.rows += rows
        self.diffs.append(diffs[:, :1 + self.resamples])
        if len(self.rows) >= self.batch:
            self.flush()

    def _fill(self, rows: list[dict], diffs: np.ndarray, masks: np.ndarray | None) -> None:
        clusters = np.array([row["n_clusters"] for row in rows])
        low, high = clipped(*intervals(diffs, self.resamples, self.method, clusters, CONFIDENCE_LEVEL, masks),
                            [difference_bounds(_bounds(row)) for row in rows])
        for row, lo, hi in zip(rows, low, high, strict=True):
            row["ci_low"], row["ci_high"] = _num(lo), _num(hi)

    def flush(self) -> list[dict]:
        if self.rows:
            self._fill(self.rows, np.vstack(self.diffs), None)
            self.done += self.rows
            self.rows, self.diffs = [], []
        return self.done


def adjust_p(table: pl.DataFrame) -> pl.DataFrame:
    """``p_adjusted`` within a family: protocol x comparison x model x prompt x split (the module docstring)."""
    family = pl.concat_str([pl.col(c) for c in ("protocol", "comparison", "model", "prompt", "split")],
                           separator="|")
    return bh_within(table, family)


def _common_items_pass(predictions: pl.DataFrame, protocol: str, a: UnitValues, b: UnitValues, resamples: int,
                       seed: int, cluster: ClusterChoice = None,
                       interval: str = DEFAULT_METHOD) -> tuple[UnitValues, UnitValues] | None:
    """Both units again, on their common questions only, in one pass where they draw the same clusters."""
    spec = metric_spec(protocol)  # unregistered protocols are refused when predictions are read
    common = sorted(set(a.item_ids) & set(b.item_ids))
    if not common:
        return None
    frame = with_clusters(prepare(predictions), cluster).filter(pl.col("protocol") == protocol)
    if spec.derive is not None:
        frame = spec.derive(frame)
    keys = pl.DataFrame([a.key, b.key], schema=list(UNIT), orient="row")
    frame = frame.filter(pl.col("mode") != "open").join(keys, on=list(UNIT), how="semi") \
        .filter(pl.col(QUESTION).is_in(common))
    again = Collector()
    protocol_rows(frame, spec, resamples, seed, again, interval)
    found = {u.key: u for u in again.units}
    return (found[a.key], found[b.key]) if a.key in found and b.key in found else None


def paired_rows(collector: Collector, predictions: pl.DataFrame | None, resamples: int, seed: int,
                permutations: int, cluster: ClusterChoice = None, interval: str = DEFAULT_METHOD,
                model_order: list[str] | None = None,
                comparisons: tuple[str, ...] = ("models", "prompts", "modes"),
                rows_of: Callable[[UnitValues, UnitValues], pl.DataFrame] | None = None) -> list[dict]:
    """The paired rows of the collected units (p not yet adjusted). ``model_order``: the models in order of first
    appearance in the whole input, which orients model pairs (default: this frame's; ``stats.distributed`` passes
    the whole input's to a task that holds one protocol's rows). ``comparisons``: the kinds of rows made;
    ``rows_of(a, b)``: the predictions holding two units compared on their common questions (default:
    ``predictions``; ``stats.distributed``'s prompt pairs read them when needed)."""
    if model_order is None:
        model_order = predictions["model"].unique(maintain_order=True).to_list()
    order = {m: i for i, m in enumerate(model_order)}
    pending = _Intervals(resamples, interval)
    jobs: list[tuple[dict, np.ndarray, np.uint64]] = []
    for comparison, model, prompt, split, a, b in _pairs(collector.units, order):
        if comparison not in comparisons:
            continue
        names = (a.key[0], b.key[0]) if comparison == "models" else (a.key[1], b.key[1])
        if a.item_ids != b.item_ids:
            rows = predictions if rows_of is None else rows_of(a, b)
            again = _common_items_pass(rows, a.protocol, a, b, resamples, seed, cluster, interval)
            if again is None:
                continue
            a, b = again
        pending.add(*pair_rows(comparison, model, prompt, split, a, b, jobs, *names, resamples))
    for u in collector.open_units if "modes" in comparisons else []:
        pending.add(*pair_rows("modes", u.key[0], u.key[1], u.key[2], u, None, jobs, DEFAULT_MODE, OPEN_MODE,
                               resamples))
    results = sign_flip_tests([d for _, d, _ in jobs], permutations, np.uint64(seed % 2**64),
                              [stream for _, _, stream in jobs])
    for (row, _, _), (_, p) in zip(jobs, results, strict=True):
        row["p_value"] = _num(p)
    return pending.flush()


def table_of(rows: Iterable[dict], extra: tuple[str, ...] = ()) -> pl.DataFrame:
    """The paired table of ``rows`` (``extra``: float columns after ``PAIRED_COLUMNS``, e.g. the variance split)."""
    rows = list(rows)
    floats = ("estimate", "ci_low", "ci_high", "a_value", "b_value", "item_corr", "p_value", "p_adjusted", *extra)
    parts = key_columns()
    schema = {c: pl.Float64 if c in floats else pl.Int64 if c in ("n_items", "n_clusters") else pl.Utf8
              for c in (*PAIRED_COLUMNS, *extra, *parts)}
    frame = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    return adjust_p(frame.with_columns(pl.col(*parts).fill_null("")))


def metrics_and_paired_rows(predictions: pl.DataFrame, resamples: int, seed: int, permutations: int,
                            cluster: ClusterChoice, interval: str, collector: Collector, random: str | None = None,
                            model_order: list[str] | None = None,
                            random_checked: bool = False,
                            facts=None) -> tuple[pl.DataFrame, list[dict], tuple[str, ...]]:
    """The metrics table, the paired rows (p not yet adjusted) and the paired table's extra columns of one pass:
    the body both the single process (``metrics_and_paired``) and a Ray task (``stats.distributed``) run, so a
    feature added here (repeated samples, random factors) reaches both. ``facts``: a task's whole-protocol choices
    (``metrics.metrics_table``)."""
    variance = VarianceSplit({}, resamples, seed) if has_samples(predictions) else None
    metrics = metrics_table(predictions, resamples=resamples, seed=seed, on_unit=collector, cluster=cluster,
                            interval=interval, variance=variance, random=random, random_checked=random_checked,
                            facts=facts)
    rows = paired_rows(collector, predictions, resamples, seed, permutations, cluster, interval,
                       model_order=model_order)
    if variance is None:
        return metrics, rows, ()
    # repeated samples: each difference's variance split beside its interval (``stats.samples``)
    return metrics, variance.fill_paired(rows), SPLIT_COLUMNS


def metrics_and_paired(predictions: pl.DataFrame, resamples: int = 10_000, seed: int = 0,
                       permutations: int = 10_000, cluster: ClusterChoice = None,
                       interval: str = DEFAULT_METHOD, collector: Collector | None = None,
                       random: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The metrics table and the paired table of a predictions frame, from one resampling pass (``cluster``: the
    resampling unit, ``stats.clusters``; ``interval``: the interval method, ``stats.intervals``; ``random``: a
    random factor, ``stats.factors``). ``collector`` (optional) is left holding every unit's resampled headline
    values (what ``stats.ranks`` reads)."""
    collector = Collector() if collector is None else collector
    metrics, rows, extra = metrics_and_paired_rows(predictions, resamples, seed, permutations, cluster, interval,
                                                   collector, random)
    return metrics, table_of(rows, extra)


def paired_table(predictions: pl.DataFrame, resamples: int = 10_000, seed: int = 0,
                 permutations: int = 10_000, cluster: ClusterChoice = None,
                 interval: str = DEFAULT_METHOD) -> pl.DataFrame:
    return metrics_and_paired(predictions, resamples, seed, permutations, cluster, interval)[1]


def _bounds(row: dict) -> tuple[float, float]:
    """The values the metric of a paired row can take (its protocol's ``bounds_of``)."""
    from omnieval.core.metric_types import SHARED_BOUNDS
    spec = metric_spec(row["protocol"])
    if spec is not None:
        return spec.bounds_of(row["metric"])
    return SHARED_BOUNDS.get(row["metric"], (-np.inf, np.inf))
