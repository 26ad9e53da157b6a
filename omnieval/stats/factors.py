"""Random factors: a column whose levels are a draw from a larger population (prompt paraphrases or styles, judges,
recipe settings such as the number of frames), pooled into one value whose interval counts the levels' own spread
(docs/reference.md, Statistics common to all protocols, Random factors).

``omnieval metrics --random prompt`` pools a model's prompt styles: one unit per model and split (its ``prompt``
reads ``random:<levels>``), the value the metric over every level's rows (for a balanced design, the mean over
levels). Its standard error has two parts, from two resamplings of the same unit:

* over the resampling unit (the question, an anchor, ...), levels fixed: the table's own bootstrap, whose spread
  holds the questions' variance and, where the model sampled, the prediction noise (``stats.samples``);
* over the levels, questions fixed: ``L - 1`` of the L levels drawn with replacement, each weighted ``L / (L - 1)``
  (the rescaled bootstrap, as for repeated samples), whose variance of the mean over levels is the unbiased
  between-level variance over L: ``se_<factor>``.

``se_total = sqrt(se_unit^2 + se_<factor>^2)`` (the residual term ``sigma_e^2 / (C L)`` is in both parts: slightly
conservative), and the interval is ``value +- t(0.975, df) se_total`` with Welch-Satterthwaite degrees of freedom
``se_total^4 / (se_unit^4 / (C - 1) + se_<factor>^4 / (L - 1))``: with few levels the interval widens as their
variance is poorly known. One factor at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from omnieval.core.keyed import keyed_rng
from omnieval.core.metric_types import Cells, ProtocolMetrics
from omnieval.core.schema import InputError
from omnieval.stats.bootstrap import _SEP, UNIT, UnitData, _cell_rows, row_size

LEVEL = "_level"
MAX_LEVEL_RESAMPLES = 2_000


def check_factor(frame: pl.DataFrame, column: str) -> None:
    """Refuse a factor the predictions lack or that has a single level (nothing to resample)."""
    if column not in frame.columns or frame[column].null_count() == len(frame):
        raise InputError(f"--random {column!r}: the predictions have no such column (give prompt, or a column "
                         "such as judge or a recipe setting recorded per row)", field="--random")
    if frame[column].drop_nulls().n_unique() < 2:
        raise InputError(f"--random {column!r}: one level only ({frame[column].drop_nulls()[0]!r}); a random "
                         "factor needs two levels or more", field="--random")


def pool_levels(frame: pl.DataFrame, column: str, checked: bool = False) -> pl.DataFrame:
    """Rows of every level in one unit per model and split, each row's level in ``LEVEL``. Pooling prompt styles
    names the unit's prompt ``random:<levels>``; another column's levels already share their unit. ``checked``:
    the whole input was checked already (a Ray task holds one protocol, which may have one level where the input
    has several: ``stats.distributed``)."""
    if not checked:
        check_factor(frame, column)
    frame = frame.with_columns(pl.col(column).cast(pl.Utf8).fill_null("(none)").alias(LEVEL))
    if column != "prompt":
        return frame
    names = frame.group_by("model", "split").agg(pl.col("prompt").unique().sort().str.join("+").alias("_pooled"))
    return frame.join(names, on=["model", "split"], how="left") \
        .with_columns(prompt=pl.lit("random:") + pl.col("_pooled")).drop("_pooled")


@dataclass
class LevelMatrix:
    """One unit's cells per level (rows: levels, sorted)."""

    sums: np.ndarray
    counts: np.ndarray
    index: dict[tuple[str, ...], int]


def level_matrices(frame: pl.DataFrame, spec: ProtocolMetrics) -> dict[tuple[str, ...], LevelMatrix]:
    """Unit key -> its cells per level, for units with two levels or more."""
    frame = frame.with_columns(_item=(pl.col(LEVEL).rank("dense").over(list(UNIT)) - 1).cast(pl.UInt32),
                               _q=pl.lit(0, dtype=pl.UInt32))
    out = {}
    for key, part in _cell_rows(frame, spec.families).partition_by(list(UNIT), as_dict=True).items():
        n_levels = int(part["_item"].max()) + 1
        if n_levels < 2:
            continue
        names = sorted(part["cell"].unique().to_list())
        col = {name: j for j, name in enumerate(names)}
        rows, cols = part["_item"].to_numpy().astype(np.int64), np.array([col[c] for c in part["cell"].to_list()])
        sums, counts = np.zeros((n_levels, len(names))), np.zeros((n_levels, len(names)))
        np.add.at(sums, (rows, cols), part["s"].to_numpy())
        np.add.at(counts, (rows, cols), part["c"].to_numpy())
        out[tuple(key)] = LevelMatrix(sums, counts, {tuple(n.split(_SEP)): j for j, n in enumerate(names)})
    return out


def level_values(matrix: LevelMatrix, spec: ProtocolMetrics, present: np.ndarray, resamples: int,
                 rng: np.random.Generator) -> dict[tuple[str, str], np.ndarray]:
    """(metric, key) -> values over [data, level resamples 1..R] (``L - 1`` levels drawn, each weighted
    ``L / (L - 1)``)."""
    n = len(matrix.sums)
    picks = np.floor(rng.random((resamples, n - 1)) * n).astype(np.int64)
    weights = np.zeros((resamples, n))
    np.add.at(weights, (np.repeat(np.arange(resamples), n - 1), picks.ravel()), n / (n - 1.0))
    sums = np.vstack([matrix.sums.sum(axis=0), weights @ matrix.sums])
    counts = np.vstack([matrix.counts.sum(axis=0), weights @ matrix.counts])
    cells = Cells(sums=np.asfortranarray(sums), counts=np.asfortranarray(counts), index=matrix.index,
                  present=present, methods=())
    return {(row.metric, row.key): np.asarray(row.values, dtype=np.float64) for row in spec.metrics(cells)}


def combined(unit_boot: np.ndarray, n_clusters: int, level_boot: np.ndarray | None, n_levels: int,
             value: float, bounds: tuple[float, float]) -> dict[str, float | None]:
    """``se_total``, the factor's part and the Welch-Satterthwaite t interval of one row."""
    from scipy.stats import t

    def sd(x):
        x = x[np.isfinite(x)]
        return float(np.std(x, ddof=1)) if len(x) >= 2 else float("nan")

    c = float(n_clusters)
    se_unit = sd(unit_boot) * np.sqrt(c / (c - 1.0)) if c >= 2 else float("nan")
    se_level = sd(level_boot) if level_boot is not None else float("nan")
    total = float(np.hypot(se_unit, se_level))
    out = {"se_total": total, "se_unit": se_unit, "se_factor": se_level, "ci_low": float("nan"),
           "ci_high": float("nan")}
    if np.isfinite(total) and total > 0 and np.isfinite(value):
        df = total ** 4 / (se_unit ** 4 / (c - 1.0) + se_level ** 4 / (n_levels - 1.0))
        half = float(t.ppf(0.975, df)) * total
        out["ci_low"], out["ci_high"] = max(value - half, bounds[0]), min(value + half, bounds[1])
    elif np.isfinite(total) and np.isfinite(value):
        out["ci_low"] = out["ci_high"] = value
    return {k: (v if np.isfinite(v) else None) for k, v in out.items()}


@dataclass
class FactorSplit:
    """A ``UnitHook`` (``stats.bootstrap``) forming each row's factor part and interval; ``fill`` writes them."""

    factor: str
    spec_frames: dict[str, pl.DataFrame]
    resamples: int
    seed: int
    rows: dict[tuple[str, ...], dict[str, float | None]] = field(default_factory=dict)
    _matrices: dict[str, dict] = field(default_factory=dict)

    def __call__(self, spec: ProtocolMetrics, unit: UnitData, rows: list, values: np.ndarray) -> None:
        if spec.name not in self._matrices:
            self._matrices[spec.name] = level_matrices(self.spec_frames[spec.name], spec)
        matrix = self._matrices[spec.name].get(unit.key)
        if matrix is None or self.resamples < 2:
            return
        rng = keyed_rng(self.seed, "levels", spec.name, unit.key[2])
        levels = level_values(matrix, spec, unit.present, min(self.resamples, MAX_LEVEL_RESAMPLES), rng)
        for j, row in enumerate(rows):
            boot = levels.get((row.metric, row.key))
            self.rows[(spec.name, *unit.key, row.metric, row.key)] = combined(
                values[j, 1:1 + self.resamples], row_size(row.support, unit)[2], None if boot is None else boot[1:],
                len(matrix.sums), values[j, 0], spec.bounds_of(row.metric))

    def fill(self, rows: list[dict]) -> list[dict]:
        """The rows with ``se_<factor>`` and, where the factor was resampled, the interval and ``se_total`` that
        count it (the split columns of repeated samples keep their own meaning: ``se_data`` is then the items'
        part, ``se_prediction`` the samples')."""
        name = f"se_{self.factor}"
        out = []
        for row in rows:
            got = self.rows.get((row["protocol"], row["model"], row["prompt"], row["split"], row["metric"],
                                 row["key"]))
            if got is None:
                out.append(row | {name: None})
                continue
            data = got["se_unit"] if row.get("se_prediction") is None else row.get("se_data")
            out.append(row | {"ci_low": got["ci_low"], "ci_high": got["ci_high"], "se_total": got["se_total"],
                              "se_data": data, name: got["se_factor"]})
        return out
