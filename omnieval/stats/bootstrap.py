"""One unit (model x prompt x split): per-cluster cell matrix -> one clustered bootstrap pass -> metric rows with CIs.

The resampling clusters are the ``_cluster`` column of a prepared frame (``stats.clusters``: the question by default,
an item's ``group`` where set so that the rotated copies of one question are drawn together, else its ``item_id``;
an anchor, a media file or any column holding whole questions where chosen); "item" in the kernels means such a
cluster. Per unit, one bootstrap pass (``omnieval.kernels.bootstrap``) resamples clusters and yields every cell's
resampled sum and count at once; row 0 is the data itself. The protocol's metric function runs once on all rows
(vectorised over the resample axis), so adding a metric never adds a pass. ECE and RC-AUC, which depend on the ranking
of instances rather than on cell means, are evaluated on the same resamples' cluster multiplicities
(``omnieval.kernels.calibration``). The 95% interval is formed from resamples 1..R by ``stats.intervals`` (BCa also
reads the leave-one-cluster-out rows appended after them).

Randomness: resample r of a unit uses the counter stream ``(seed, hash(protocol, split), r)``, so models and prompts
on the same clusters of a split get the same resamples (paired), for any thread count: such units are always
index-resampled (``shared_item_sets``), which is what ``omnieval.stats.paired`` reads differences from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from omnieval.core.keyed import keyed_seed
from omnieval.core.metric_types import (
    CLUSTER,
    KEY_PARTS,
    QUESTION,
    CellFamily,
    Cells,
    MetricRow,
    ProtocolMetrics,
    Support,
    question_of,
)
from omnieval.kernels.bootstrap import cluster_sums, pattern_sums, resample_sums
from omnieval.kernels.calibration import calibration_weighted
from omnieval.stats.intervals import DEFAULT_METHOD, clipped, intervals, needs_jackknife

UNIT = ("model", "prompt", "split")
CONFIDENCE_LEVEL = 0.95
N_BINS = 10
_CHUNK_CELLS = 4_000_000  # resamples x items held at once as int32 multiplicities (16 MB)
_SEP = "\x1f"

UnitHook = Callable[["ProtocolMetrics", "UnitData", list[MetricRow], np.ndarray], None]
"""Called once per unit with its spec, cells, metric rows and their values (metric x row): how paired differences
(``omnieval.stats.paired``) read every unit's resamples from the same pass as the table."""


@dataclass
class UnitData:
    """Per-cluster sums and counts of every cell of one unit, the questions inside the clusters, and the instances
    behind its calibration.

    Rows of ``sums`` / ``counts`` are the resampling clusters (``cluster_ids``, sorted); ``item_ids`` are the unit's
    questions (sorted), ``item_cluster[i]`` the cluster row of question ``i`` and ``present[i, cell]`` whether it has
    a row in the cell: what a metric row's ``Support`` (a mask over questions) and its cluster count are read from.
    With the question as the unit (the default) clusters and questions are the same list."""

    key: tuple[str, ...]
    n_clusters: int
    cells: list[tuple[str, ...]]
    sums: np.ndarray  # (clusters, cells)
    counts: np.ndarray  # (clusters, cells)
    calibration: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # method -> (cluster, conf, correct)
    cluster_ids: tuple[str, ...] = ()
    item_ids: tuple[str, ...] = ()
    item_cluster: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    present: np.ndarray | None = None  # (questions, cells)
    calibration_items: dict[str, np.ndarray] = field(default_factory=dict)  # method -> mask over questions

    def __post_init__(self) -> None:
        if not self.item_ids:  # built by hand with clusters only: each cluster one question
            self.item_ids = self.cluster_ids
            self.item_cluster = np.arange(self.n_clusters, dtype=np.int64)
        if self.present is None:
            self.present = self.counts > 0

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def cluster_mask(self, items: np.ndarray) -> np.ndarray:
        """The clusters (a mask over ``cluster_ids``) holding the questions where ``items`` holds."""
        return np.bincount(self.item_cluster[items], minlength=self.n_clusters) > 0

    def clusters_of(self, items: np.ndarray) -> int:
        """How many clusters hold the questions where ``items`` holds."""
        return int(np.count_nonzero(self.cluster_mask(items)))


def _cell_rows(frame: pl.DataFrame, families: Iterable[CellFamily], same: bool = False) -> pl.DataFrame:
    """Long table ``(unit..., cluster, question, cell, s, c)`` over all families, by polars group-bys on the whole
    frame (``same``: clusters are questions, one key grouped)."""
    keys_of = ["_item"] if same else ["_item", "_q"]
    parts = []
    for fam in families:
        if any(b not in frame.columns for b in fam.by) or fam.value not in frame.columns:
            continue
        sel = frame if fam.where is None else frame.filter(pl.col(fam.where))
        keys = [pl.lit(fam.name), *(pl.col(b).cast(pl.Utf8) for b in fam.by)]
        parts.append(
            sel.group_by([*UNIT, *keys_of, *fam.by])
            .agg(s=pl.col(fam.value).cast(pl.Float64).sum(), c=pl.len().cast(pl.Float64))
            .select(*UNIT, "_item", pl.col("_item" if same else "_q").alias("_q"),
                    pl.concat_str(keys, separator=_SEP).alias("cell"), "s", "c")
            .drop_nulls("cell")
        )
    if not parts:
        return pl.DataFrame(schema={**{u: pl.Utf8 for u in UNIT}, "_item": pl.UInt32, "_q": pl.UInt32,
                                    "cell": pl.Utf8, "s": pl.Float64, "c": pl.Float64})
    return pl.concat(parts)


def unit_data(frame: pl.DataFrame, spec: ProtocolMetrics) -> list[UnitData]:
    """Split a prepared protocol frame into units with their per-cluster cell matrices (one row per resampling
    cluster, sorted by its id) and the questions inside the clusters (sorted by id)."""
    if QUESTION not in frame.columns:
        frame = frame.with_columns(question_of(frame))
    if CLUSTER not in frame.columns:
        frame = frame.with_columns(pl.col(QUESTION).alias(CLUSTER))
    same = frame[CLUSTER].equals(frame[QUESTION])  # the question is the unit: one cluster per question
    frame = frame.with_columns(_item=(pl.col(CLUSTER).rank("dense").over(list(UNIT)) - 1).cast(pl.UInt32))
    frame = frame.with_columns(_q=pl.col("_item") if same else
                               (pl.col(QUESTION).rank("dense").over(list(UNIT)) - 1).cast(pl.UInt32))
    sizes = frame.group_by(list(UNIT)).agg(n=pl.col("_item").max() + 1, ids=pl.col(CLUSTER).unique().sort(),
                                           questions=pl.col(QUESTION if not same else CLUSTER).unique().sort())
    owners = {} if same else {k: g for k, g in frame.select(*UNIT, "_q", "_item").unique()
                              .partition_by(list(UNIT), as_dict=True).items()}
    cells = {k: g for k, g in _cell_rows(frame, spec.families, same).partition_by(list(UNIT), as_dict=True).items()}
    calib: dict[tuple, pl.DataFrame] = {}
    if spec.calibration:
        calib = frame.filter("has_conf").partition_by(list(UNIT), as_dict=True)
    out = []
    for row in sizes.sort(list(UNIT)).iter_rows(named=True):
        key = tuple(row[u] for u in UNIT)
        n = int(row["n"])
        n_q = len(row["questions"])
        item_cluster = np.arange(n_q, dtype=np.int64)
        if not same:
            owner = owners[key]
            item_cluster[owner["_q"].to_numpy().astype(np.int64)] = owner["_item"].to_numpy().astype(np.int64)
        long = cells.get(key)
        names: list[tuple[str, ...]] = []
        sums = np.zeros((n, 0))
        counts = np.zeros((n, 0))
        present = np.zeros((n_q, 0), dtype=bool)
        if long is not None:
            # questions added to their cluster in a fixed order: float sums (confidences) of a cluster of several
            # questions would otherwise depend on the order the group-by returns them in
            long = long if same else long.sort("_item", "_q", "cell")
            names_raw = sorted(long["cell"].unique().to_list())
            j = long["cell"].cast(pl.Enum(names_raw)).to_physical().to_numpy().astype(np.int64)
            i = long["_item"].to_numpy().astype(np.int64)
            q = long["_q"].to_numpy().astype(np.int64)
            c = long["c"].to_numpy()
            sums = np.zeros((n, len(names_raw)))
            counts = np.zeros((n, len(names_raw)))
            np.add.at(sums, (i, j), long["s"].to_numpy())
            np.add.at(counts, (i, j), c)
            present = np.zeros((n_q, len(names_raw)), dtype=bool)
            present[q[c > 0], j[c > 0]] = True
            names = [tuple(name.split(_SEP)) for name in names_raw]
        calibration, calibration_items = {}, {}
        if key in calib:
            for (method,), g in calib[key].partition_by("conf_method", as_dict=True).items():
                calibration[method] = (g["_item"].to_numpy().astype(np.int64),
                                       g["confidence"].to_numpy().astype(np.float64),
                                       g["correct"].to_numpy().astype(np.float64))
                calibration_items[method] = np.bincount(g["_q"].to_numpy().astype(np.int64), minlength=n_q) > 0
        out.append(UnitData(key, n, names, sums, counts, calibration, tuple(row["ids"]), tuple(row["questions"]),
                            item_cluster, present, calibration_items))
    return out


def _compress(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct non-constant columns of ``values`` (items x channels): constant channels (e.g. one instance per
    item and condition) resample to ``n * constant`` and duplicated channels to the same sums, so neither needs to
    be resampled. Returns ``(distinct, inverse, constant_mask, constant_values)``."""
    const = np.all(values == values[:1], axis=0) if len(values) else np.ones(values.shape[1], bool)
    varying = values[:, ~const]
    if varying.shape[1]:
        distinct, inverse = np.unique(varying, axis=1, return_inverse=True)
    else:
        distinct, inverse = varying, np.zeros(0, dtype=np.int64)
    return (np.ascontiguousarray(distinct), inverse.reshape(-1),
            const, values[0, const] if len(values) else np.zeros(int(const.sum())))


def _csr(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(indptr, indices, data, n_cols)`` of a dense items x channels matrix (for ``resample_sums``)."""
    items, cols = np.nonzero(values)
    indptr = np.searchsorted(items, np.arange(values.shape[0] + 1)).astype(np.int64)
    return indptr, cols.astype(np.int64), np.ascontiguousarray(values[items, cols]), values.shape[1]


_SPARSE = 0.03
"""Non-integer channels with non-zeros on fewer than this share of items go to the sparse (CSR) part of index
resampling, which costs per non-zero (~10 ns: a branch and a scattered addition). Integer channels, sparse or not,
are packed several to a 64-bit word (``omnieval.kernels.bootstrap``), which costs ~0.1 ns per word and item: cheaper
even for one cell per anchor among hundreds of items."""


def _pattern_shortcut(distinct: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(patterns, counts)`` when the pattern shortcut is cheaper than index resampling for these per-item rows.

    Both are exact; the choice is speed only. Rough per-resample costs (ns, measured on 2 cores): the shortcut
    ~(3 + 0.3 channels) per pattern plus ~4.5 sqrt(n) for the Poissonised multinomial's corrections; index
    resampling ~(1 + 0.4 packed words) per item. Only integer rows qualify (counts and 0/1 outcomes), so every
    resampled sum stays an exact integer.
    """
    if n == 0 or distinct.shape[1] == 0 or not np.all(distinct == np.round(distinct)):
        return None
    spans = distinct.max(axis=0) - distinct.min(axis=0)
    bits = sum(int(n * s).bit_length() for s in spans)
    index_cost = n * (1.0 + 0.4 * np.ceil(bits / 56))
    patterns, counts = np.unique(distinct, axis=0, return_counts=True)
    k = len(patterns)
    pattern_cost = k * (3.0 + 0.3 * distinct.shape[1]) + (4.5 * np.sqrt(n) if k > 2 else 0.0)
    if pattern_cost >= index_cost:
        return None
    return np.ascontiguousarray(patterns), counts.astype(np.int64)


def bootstrap_unit(unit: UnitData, resamples: int, seed: int, stream: int,
                   shortcut: bool = True, jackknife: bool = False) -> tuple[np.ndarray, dict]:
    """Rows [data, resample 1..R] of every channel (sums then counts) and of each calibration statistic, followed
    with ``jackknife`` by the C leave-one-cluster-out rows (cluster i left out in row R + 1 + i: what the BCa
    interval reads, ``stats.intervals``).

    The channel matrix comes back Fortran-ordered (each channel's rows contiguous), the layout the metric
    functions read. Sums-only resampling (no item multiplicity matrix) whenever no calibration statistic needs one.
    ``shortcut=False`` forbids the pattern shortcut: index resampling draws the same items for every unit on the
    same items and stream, which is what makes two units' resamples paired; the shortcut's multinomial over one
    unit's own patterns does not.
    """
    values = np.hstack([unit.sums, unit.counts])
    n = unit.n_clusters
    n_jack = n if jackknife else 0
    distinct, inverse, const, const_values = _compress(values)
    seed_u, stream_u = np.uint64(seed % 2**64), np.uint64(stream % 2**64)
    rows_t = np.empty((distinct.shape[1], resamples + 1 + n_jack))  # channel x row
    rows_t[:, 0] = distinct.sum(axis=0)
    if n_jack:
        rows_t[:, resamples + 1:] = rows_t[:, :1] - distinct.T
    calib = {m: [np.empty(resamples + 1 + n_jack), np.empty(resamples + 1 + n_jack)] for m in unit.calibration}
    ones = np.ones((1, n), dtype=np.int32)
    for method, (item, conf, correct) in unit.calibration.items():
        e, a = calibration_weighted(ones, item, conf, correct, N_BINS)
        calib[method][0][0], calib[method][1][0] = e[0], a[0]
        step = max(1, _CHUNK_CELLS // max(n, 1))
        for j0 in range(0, n_jack, step):
            j1 = min(n_jack, j0 + step)
            w = np.ones((j1 - j0, n), dtype=np.int32)
            w[np.arange(j1 - j0), np.arange(j0, j1)] = 0
            e, a = calibration_weighted(w, item, conf, correct, N_BINS)
            calib[method][0][resamples + 1 + j0:resamples + 1 + j1] = e
            calib[method][1][resamples + 1 + j0:resamples + 1 + j1] = a
    if resamples and (distinct.shape[1] or unit.calibration):
        patterns = None if unit.calibration or not shortcut else _pattern_shortcut(distinct, n)
        if patterns is not None:
            rows_t[:, 1:resamples + 1] = pattern_sums(patterns[0], patterns[1], 0, resamples, seed_u, stream_u).T
        else:
            sparse = ((distinct != 0).mean(axis=0) < _SPARSE) & np.any(distinct != np.round(distinct), axis=0) \
                if n else np.zeros(distinct.shape[1], bool)
            order = np.concatenate([np.nonzero(~sparse)[0], np.nonzero(sparse)[0]])  # channels as resampled
            dense = np.ascontiguousarray(distinct[:, ~sparse])
            csr = _csr(distinct[:, sparse])
            if not unit.calibration:
                rows_t[order, 1:resamples + 1] = cluster_sums(dense, 0, resamples, seed_u, stream_u, csr).T
            step = max(1, _CHUNK_CELLS // max(n, 1))
            for r0 in range(0, resamples if unit.calibration else 0, step):
                r1 = min(resamples, r0 + step)
                w, sums = resample_sums(dense, r0, r1, seed_u, stream_u, csr)
                rows_t[order, 1 + r0:1 + r1] = sums.T
                for method, (item, conf, correct) in unit.calibration.items():
                    e, a = calibration_weighted(w, item, conf, correct, N_BINS)
                    calib[method][0][1 + r0:1 + r1], calib[method][1][1 + r0:1 + r1] = e, a
    full_t = np.empty((values.shape[1], resamples + 1 + n_jack))
    for channel, source in zip(np.nonzero(~const)[0], inverse, strict=True):  # row copies: no gathered temporary
        full_t[channel] = rows_t[source]
    full_t[np.nonzero(const)[0], :resamples + 1] = (n * const_values)[:, None]
    full_t[np.nonzero(const)[0], resamples + 1:] = ((n - 1) * const_values)[:, None]
    return full_t.T, calib


def shared_item_sets(units: list[UnitData]) -> set[tuple[str, ...]]:
    """Keys of the units that share their split and their exact set of items with another unit: their resamples
    must be paired (same clusters drawn), so they are never resampled through the pattern shortcut."""
    seen: dict[tuple, list[tuple[str, ...]]] = {}
    for unit in units:
        seen.setdefault((unit.key[2], unit.cluster_ids), []).append(unit.key)
    return {key for keys in seen.values() if len(keys) > 1 for key in keys}


def protocol_rows(frame: pl.DataFrame, spec: ProtocolMetrics, resamples: int, seed: int,
                  on_unit: UnitHook | None = None, interval: str = DEFAULT_METHOD,
                  methods: tuple[str, ...] | None = None,
                  paired: frozenset[tuple[str, ...]] | None = None) -> list[dict]:
    """The metric rows of one protocol's prepared frame, each with its interval (``interval``: a method of
    ``stats.intervals``). ``on_unit`` sees each unit's values over [data, resamples] and, for BCa, the jackknife
    rows after them. ``methods``: the confidence methods of the whole protocol (``stats.first_pass``) where
    ``frame`` holds part of it; default: ``frame``'s. ``paired``: the units drawn paired (``shared_item_sets``)
    decided from the whole protocol where ``frame`` holds one prompt of it; default: from ``frame``'s units."""
    if methods is None:
        methods = tuple(sorted(frame.filter("has_conf")["conf_method"].unique().to_list()))
    out: list[dict] = []
    units = unit_data(frame, spec)
    paired = shared_item_sets(units) if paired is None else paired
    jackknife = needs_jackknife(interval)
    for unit in units:
        stream = keyed_seed(0, "bootstrap", spec.name, unit.key[2])
        full, calib = bootstrap_unit(unit, resamples, seed, stream, shortcut=unit.key not in paired,
                                     jackknife=jackknife)
        n_cells = len(unit.cells)
        cells = Cells(sums=full[:, :n_cells], counts=full[:, n_cells:],
                      index={name: i for i, name in enumerate(unit.cells)}, present=unit.present,
                      methods=methods)
        for method, (ece, auc) in calib.items():
            support = Support(len(unit.calibration[method][0]), unit.calibration_items[method])
            cells.stats[("ece", method)] = (ece, support)
            cells.stats[("rc_auc", method)] = (auc, support)
        rows = checked_rows(spec, unit.key, spec.metrics(cells))
        if not rows:
            continue
        values = np.empty((len(rows), full.shape[0]))  # metric x row: each metric's rows contiguous
        for j, r in enumerate(rows):
            values[j] = r.values
        sizes = [row_size(r.support, unit) for r in rows]
        masks = np.vstack([unit.cluster_mask(row_items(r.support, unit)) for r in rows]) if jackknife else None
        low, high = clipped(*intervals(values, resamples, interval, np.array([s[2] for s in sizes]),
                                       CONFIDENCE_LEVEL, masks), [spec.bounds_of(r.metric) for r in rows])
        if on_unit is not None:
            on_unit(spec, unit, rows, values)
        model, prompt, split = unit.key
        for j, r in enumerate(rows):
            n, n_items, n_clusters = sizes[j]
            out.append({"protocol": spec.name, "model": model, "prompt": prompt, "split": split,
                        "metric": r.metric, "key": r.key, "value": _num(values[j, 0]), "ci_low": _num(low[j]),
                        "ci_high": _num(high[j]), "n": n, "n_items": n_items, "n_clusters": n_clusters,
                        **{part: r.parts.get(part, "") for part in (*KEY_PARTS, *spec.key_parts)}})
    return out


def checked_rows(spec: ProtocolMetrics, unit: tuple[str, ...], rows: Iterable[MetricRow]) -> list[MetricRow]:
    """A unit's metric rows, refused (``ValueError`` naming the protocol, unit and metric) where one is not a
    ``MetricRow``, sets a key part its protocol does not declare, or repeats another row's metric and parts: a
    reader selects rows by their parts, so two rows with the same parts would be one row to it."""
    rows = list(rows)
    allowed = {*KEY_PARTS, *spec.key_parts}
    seen: set[tuple] = set()
    for row in rows:
        if not isinstance(row, MetricRow) or not isinstance(row.support, Support):
            raise ValueError(f"protocol {spec.name!r}, unit {'/'.join(unit)}: its metric function must yield "
                             f"MetricRow records with a Support, got {row!r:.80}")
        undeclared = set(row.parts) - allowed
        ident = (row.metric, *sorted((p, v) for p, v in row.parts.items() if v))
        if undeclared or ident in seen:
            raise ValueError(f"protocol {spec.name!r}, unit {'/'.join(unit)}, metric {row.metric!r}: "
                             + (f"key parts {sorted(undeclared)} are not declared in its metric spec" if undeclared
                                else f"two rows with the same key parts {dict(ident[1:])}"))
        seen.add(ident)
    return rows


def row_size(support: Support, unit: UnitData) -> tuple[int, int, int]:
    """``(n, n_items, n_clusters)`` of a metric row: its rows, the questions behind it and the clusters holding
    them."""
    return support.n, support.n_items, unit.clusters_of(support.items)


def row_items(support: Support, unit: UnitData) -> np.ndarray:
    """The mask over the unit's items of those behind a metric row."""
    return support.items


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)
