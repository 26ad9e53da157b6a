"""Repeated samples: the variance split of a metric into data noise and prediction noise (docs/reference.md,
Statistics common to all protocols, Repeated samples).

A model that samples its answers (``samples: k`` on a model, or imported repeats) has ``k`` rows per instance, told
apart by the ``sample`` column (0 for a single sample). Every sample of a question sits in the question's
resampling unit, so the clustered bootstrap of ``stats.bootstrap`` draws an item with all its samples: the spread of
a unit's mean over the k samples is part of the spread between units, and that bootstrap's variance is the total
variance, both sources together (the law of total variance over the resampling unit):

    se_total^2 = Var(unit means) / C = se_data^2 + se_prediction^2,   se_prediction^2 = mean_i(s_i^2 / k_i) / C

with ``s_i^2`` the (unbiased) variance of the k_i samples of item i ("Measuring all the noises of LLM evals", 2026).
The interval therefore stays the one-stage interval of the table: resampling the samples within each drawn unit too
would count the prediction noise twice (the two-stage bootstrap over-covers: docs/reference.md, Coverage study).

For any metric of cell means (not only accuracy), the split is formed by resampling:

* ``se_total``: the standard deviation of the unit bootstrap's resamples times ``sqrt(C / (C - 1))`` (as the t
  interval forms its standard error, ``stats.intervals``);
* ``se_prediction``: every question kept, its samples resampled: ``k_i - 1`` draws with replacement among its k_i
  samples, each weighted ``k_i / (k_i - 1)`` (the rescaled bootstrap of Rao and Wu 1988), whose variance of a
  question's mean is ``s_i^2 / k_i`` exactly, the unbiased within-item term above;
* ``se_data``: ``sqrt(max(se_total^2 - se_prediction^2, 0))``.

The within-item draws use the keyed stream ``(seed, "samples", protocol, split)`` over questions and sample indices
in sorted order, so two models (or prompts) with the same questions and samples get the same draws: a paired
difference's split pairs them by item and sample index (``omnieval.stats.paired``). Cells whose unit has one sample
per instance get no split (null), and their intervals and values are those of a table without the column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from omnieval.core.keyed import keyed_rng
from omnieval.core.metric_types import QUESTION, Cells, ProtocolMetrics, question_of
from omnieval.stats.bootstrap import _SEP, UNIT, UnitData, _cell_rows, row_size

SAMPLE = "sample"
SPLIT_COLUMNS = ("se_total", "se_data", "se_prediction")
MAX_SPLIT_RESAMPLES = 2_000
"""Within-item resamples behind ``se_prediction`` (at most; fewer when the table asks for fewer): its Monte Carlo
relative error is about ``1 / sqrt(2 R)``, 1.6% at 2,000."""
_CHUNK = 2_000_000  # resamples x (question, sample) rows of weights held at once (16 MB)


def sample_index(frame: pl.DataFrame) -> pl.Expr:
    """The row's sample (0 where the column is absent or null: one sample)."""
    if SAMPLE not in frame.columns:
        return pl.lit(0, dtype=pl.Int64)
    return pl.col(SAMPLE).cast(pl.Int64).fill_null(0)


def has_samples(frame: pl.DataFrame) -> bool:
    """Whether any row of ``frame`` is a second (or later) sample of its instance."""
    return SAMPLE in frame.columns and bool((frame[SAMPLE].cast(pl.Int64).fill_null(0) > 0).any())


@dataclass
class SampleMatrix:
    """One unit's cells per (question, sample): rows sorted by question then sample, ``question[row]`` the
    question's index, ``sums`` / ``counts`` aligned with the unit's cells."""

    question: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    index: dict[tuple[str, ...], int]


def sample_matrices(frame: pl.DataFrame, spec: ProtocolMetrics) -> dict[tuple[str, ...], SampleMatrix]:
    """Unit key -> its cells per (question, sample), for the units where some question has two samples or more."""
    if QUESTION not in frame.columns:
        frame = frame.with_columns(question_of(frame))
    frame = frame.with_columns(
        _item=(pl.col(QUESTION).rank("dense").over(list(UNIT)) - 1).cast(pl.UInt32),
        _q=sample_index(frame).rank("dense").over([*UNIT, QUESTION]).cast(pl.UInt32) - 1)
    long = _cell_rows(frame, spec.families)
    out = {}
    for key, part in long.partition_by(list(UNIT), as_dict=True).items():
        pairs = part.select("_item", "_q").unique().sort("_item", "_q")
        if pairs["_q"].max() < 1:
            continue
        row_of = {p: r for r, p in enumerate(zip(pairs["_item"].to_list(), pairs["_q"].to_list(), strict=True))}
        names = sorted(part["cell"].unique().to_list())
        col_of = {name: j for j, name in enumerate(names)}
        rows = np.array([row_of[p] for p in zip(part["_item"].to_list(), part["_q"].to_list(), strict=True)])
        cols = np.array([col_of[c] for c in part["cell"].to_list()])
        sums = np.zeros((len(pairs), len(names)))
        counts = np.zeros((len(pairs), len(names)))
        np.add.at(sums, (rows, cols), part["s"].to_numpy())
        np.add.at(counts, (rows, cols), part["c"].to_numpy())
        out[tuple(key)] = SampleMatrix(pairs["_item"].to_numpy().astype(np.int64), sums, counts,
                                       {tuple(name.split(_SEP)): j for j, name in enumerate(names)})
    return out


def within_weights(question: np.ndarray, r: int, rng: np.random.Generator) -> np.ndarray:
    """``(r, rows)`` weights: per resample and question, ``k - 1`` draws among its k sample rows, each weighted
    ``k / (k - 1)`` (a question with one sample keeps weight 1): every question's total weight stays k."""
    k = np.bincount(question)
    start = np.concatenate([[0], np.cumsum(k)[:-1]])
    n_rows = len(question)
    weights = np.zeros((r, n_rows))
    many = np.nonzero(k > 1)[0]
    weights[:, np.isin(question, np.nonzero(k == 1)[0])] = 1.0
    if not len(many):
        return weights
    owner = np.repeat(many, k[many] - 1)  # one entry per draw
    picks = start[owner] + np.floor(rng.random((r, len(owner))) * k[owner]).astype(np.int64)
    scale = (k[owner] / (k[owner] - 1.0))
    flat = (np.arange(r)[:, None] * n_rows + picks).ravel()
    weights += np.bincount(flat, weights=np.broadcast_to(scale, picks.shape).ravel(),
                           minlength=r * n_rows).reshape(r, n_rows)
    return weights


def prediction_values(matrix: SampleMatrix, spec: ProtocolMetrics, present: np.ndarray, resamples: int,
                      rng: np.random.Generator) -> dict[tuple[str, str], np.ndarray]:
    """(metric, key) -> its values over [data, within-item resamples 1..R] (calibration statistics, which read
    instances rather than cells, have none)."""
    sums = np.empty((resamples + 1, matrix.sums.shape[1]))
    counts = np.empty_like(sums)
    sums[0], counts[0] = matrix.sums.sum(axis=0), matrix.counts.sum(axis=0)
    step = max(1, _CHUNK // max(len(matrix.question), 1))
    for r0 in range(0, resamples, step):  # the weights of a chunk of resamples at a time; draws in resample order
        w = within_weights(matrix.question, min(step, resamples - r0), rng)
        sums[1 + r0:1 + r0 + len(w)] = w @ matrix.sums
        counts[1 + r0:1 + r0 + len(w)] = w @ matrix.counts
    cells = Cells(sums=np.asfortranarray(sums), counts=np.asfortranarray(counts), index=matrix.index,
                  present=present, methods=())
    return {(row.metric, row.key): np.asarray(row.values, dtype=np.float64) for row in spec.metrics(cells)}


def _sd(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.std(finite, ddof=1)) if len(finite) >= 2 else float("nan")


def split_of(total_boot: np.ndarray, n_clusters: int, within_boot: np.ndarray | None) -> dict[str, float | None]:
    """``se_total``, ``se_data``, ``se_prediction`` of one metric row from its unit resamples and its within-item
    resamples (None: not defined, e.g. fewer than two clusters)."""
    c = float(n_clusters)
    total = _sd(total_boot) * np.sqrt(c / (c - 1.0)) if c >= 2 else float("nan")
    pred = _sd(within_boot) if within_boot is not None else float("nan")
    data = np.sqrt(max(total ** 2 - pred ** 2, 0.0)) if np.isfinite(total) and np.isfinite(pred) else float("nan")
    return {name: (float(v) if np.isfinite(v) else None) for name, v in zip(SPLIT_COLUMNS, (total, data, pred),
                                                                              strict=True)}


@dataclass
class VarianceSplit:
    """A ``UnitHook`` (``stats.bootstrap``) that forms the split of every metric row of the units with repeated
    samples, from the unit's own resamples and its within-item resamples; ``splits`` is read by ``fill``."""

    spec_frames: dict[str, pl.DataFrame]
    resamples: int
    seed: int
    splits: dict[tuple[str, ...], dict[str, float | None]] = field(default_factory=dict)
    total: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)  # paired row -> unit resamples
    within: dict[tuple[str, ...], np.ndarray | None] = field(default_factory=dict)  # row -> [data, within-item]
    layouts: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)  # unit -> questions of its sample rows
    clusters: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)  # unit -> its clusters
    _matrices: dict[str, dict] = field(default_factory=dict)

    def __call__(self, spec: ProtocolMetrics, unit: UnitData, rows: list, values: np.ndarray) -> None:
        if spec.name not in self._matrices:
            frame = self.spec_frames.get(spec.name)
            self._matrices[spec.name] = sample_matrices(frame, spec) if frame is not None else {}
        matrix = self._matrices[spec.name].get(unit.key)
        self.clusters[(spec.name, *unit.key)] = unit.cluster_ids
        for j, row in enumerate(rows):  # what a paired difference's split reads
            if spec.compares(row):
                self.total[(spec.name, *unit.key, row.metric, row.key)] = values[j, :1 + self.resamples]
        if matrix is None or self.resamples < 2:
            return
        r = min(self.resamples, MAX_SPLIT_RESAMPLES)
        rng = keyed_rng(self.seed, "samples", spec.name, unit.key[2])
        within = prediction_values(matrix, spec, unit.present, r, rng)
        self.layouts[(spec.name, *unit.key)] = matrix.question
        for j, row in enumerate(rows):
            row_key = (spec.name, *unit.key, row.metric, row.key)
            pred = within.get((row.metric, row.key))
            self.within[row_key] = pred
            self.splits[row_key] = split_of(values[j, 1:1 + self.resamples], row_size(row.support, unit)[2],
                                            None if pred is None else pred[1:])

    def fill(self, rows: list[dict]) -> list[dict]:
        """The table's rows with the split columns (null where the row's unit has one sample per instance)."""
        empty = dict.fromkeys(SPLIT_COLUMNS)
        return [row | self.splits.get((row["protocol"], row["model"], row["prompt"], row["split"], row["metric"],
                                       row["key"]), empty) for row in rows]

    def fill_paired(self, rows: list[dict]) -> list[dict]:
        """The paired table's rows with the split of each difference (``omnieval.stats.paired``): from the two
        sides' unit resamples (paired: the same clusters drawn) and their within-item resamples, paired by item
        and sample index (the same draws where both sides hold the same questions and samples; a side with one
        sample per instance has no prediction noise and stays at its value). Null where neither side has repeated
        samples, for ``modes`` rows, and where the two sides' questions or samples differ."""
        return [row | self._paired_split(row) for row in rows]

    def _paired_split(self, row: dict) -> dict[str, float | None]:
        empty = dict.fromkeys(SPLIT_COLUMNS)
        if row["comparison"] not in ("models", "prompts"):
            return empty
        models = row["comparison"] == "models"
        keys = [(row["protocol"], side if models else row["model"], row["prompt"] if models else side, row["split"])
                for side in (row["a"], row["b"])]
        rows = [(*k, row["metric"], row["key"]) for k in keys]
        if not any(r in self.within for r in rows) or not all(r in self.total for r in rows):
            return empty
        if self.clusters.get(keys[0]) != self.clusters.get(keys[1]):  # not drawn alike: compared on common items
            return empty
        layouts = [self.layouts.get(k) for k in keys]
        if all(x is not None for x in layouts) and not np.array_equal(layouts[0], layouts[1]):
            return empty
        sides = [self._within_of(r) for r in rows]
        if any(x is None for x in sides) or len(sides[0]) != len(sides[1]):
            return empty
        total = self.total[rows[0]] - self.total[rows[1]]
        if total.shape != (self.resamples + 1,):
            return empty
        return split_of(total[1:], row["n_clusters"] or 0, (sides[0] - sides[1])[1:])

    def _within_of(self, row_key: tuple[str, ...]) -> np.ndarray | None:
        """A side's within-item resamples; a side without samples is its value on every one."""
        if row_key in self.within:
            return self.within[row_key]
        r = min(self.resamples, MAX_SPLIT_RESAMPLES)
        return np.full(r + 1, self.total[row_key][0])
