"""``omnieval power``: the smallest paired difference a benchmark can detect, and the items needed for a given one.

A paired comparison of two models on the same n clusters (the resampling units, ``stats.clusters``: the questions
by default, the anchors where those are the unit) estimates ``acc_a - acc_b``; its variance is ``sd_diff^2 / n``,
``sd_diff`` the standard deviation over clusters of the linearised per-cluster difference
``z_i = (s_ai - acc_a c_ai) / mean(c_a) - (s_bi - acc_b c_bi) / mean(c_b)`` (``s``, ``c``: a cluster's correct and
valid instances in the cell): the clustered (sandwich) variance of a ratio of sums, which is what the bootstrap
over clusters estimates. For a two-sided test at level ``alpha`` and power ``1 - beta``::

    MDE = (z_{1 - alpha/2} + z_{1 - beta}) * sd_diff / sqrt(n)     clusters(effect) = ((z + z) * sd_diff / effect)^2

``items_needed`` is ``clusters_needed`` times the items per cluster of these predictions (the same number where the
unit is the question): more questions per anchor do not replace anchors.

From a predictions file, per protocol x prompt x split and per cell (accuracy per condition, and ``all`` pooling the
conditions): ``sd_diff`` is the median over model pairs of the observed one; with one model it comes from that
model's per-item standard deviation ``sd_item`` and a correlation ``rho`` between models' per-item scores
(``sd_diff^2 = 2 sd_item^2 (1 - rho)``; given, or 0: no shared item difficulty, which overstates the MDE when
models agree on which items are hard). From numbers alone (n items, base accuracy p, rho; optionally m instances
per item with intra-item correlation icc): ``sd_item^2 = p (1 - p) (1 + (m - 1) icc) / m``.

On one instance per item and no clustering this is the normal approximation of the paired-proportions (McNemar)
power formula with discordant share ``psi = 2 p (1 - p) (1 - rho)``; the tests check both, and the 80% power
against simulated studies.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

POWER_COLUMNS = ("protocol", "prompt", "split", "metric", "key", "n_items", "n_clusters", "instances", "accuracy",
                 "sd_item", "correlation", "correlation_source", "sd_diff", "alpha", "power", "mde", "effect",
                 "items_needed", "clusters_needed")
ALPHA = 0.05
POWER = 0.80


def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """``z_{1 - alpha/2} + z_{power}``: 2.80 at the defaults."""
    from scipy.stats import norm

    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError("alpha and power must lie strictly between 0 and 1")
    return float(norm.ppf(1 - alpha / 2) + norm.ppf(power))


def mde(sd_diff: float, n_items: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Minimum detectable paired difference on ``n_items`` items."""
    return z_sum(alpha, power) * sd_diff / math.sqrt(n_items) if n_items > 0 else math.nan


def items_needed(sd_diff: float, effect: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Items needed to detect a paired difference ``effect`` (rounded up)."""
    if effect <= 0:
        raise ValueError("the effect must be positive")
    return int(math.ceil((z_sum(alpha, power) * sd_diff / effect) ** 2))


def sd_item_from_numbers(accuracy: float, instances: int = 1, icc: float = 0.0) -> float:
    """Per-item standard deviation of one model's item mean: ``p (1 - p)`` shrunk by ``m`` instances, grown back
    by their intra-item correlation (design effect ``1 + (m - 1) icc``)."""
    if not 0 <= accuracy <= 1 or instances < 1 or not 0 <= icc <= 1:
        raise ValueError("accuracy and icc must lie in [0, 1], instances >= 1")
    return math.sqrt(accuracy * (1 - accuracy) * (1 + (instances - 1) * icc) / instances)


def sd_diff_from(sd_item: float, correlation: float) -> float:
    if not -1 <= correlation <= 1:
        raise ValueError("the correlation must lie in [-1, 1]")
    if not math.isfinite(sd_item):
        return math.nan
    return math.sqrt(max(0.0, 2 * sd_item ** 2 * (1 - correlation)))


def _linearised(s: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per-item influence of a ratio of sums (NaN for items without rows in the cell)."""
    ok = c > 0
    out = np.full(len(s), np.nan)
    if ok.any():
        acc = s[ok].sum() / c[ok].sum()
        out[ok] = (s[ok] - acc * c[ok]) / c[ok].mean()
    return out


def _cell_row(protocol: str, prompt: str, split: str, key: str, s: np.ndarray, c: np.ndarray, models: list[str],
              correlation: float | None, alpha: float, power: float, effect: float | None,
              n_items: int | None = None) -> dict:
    """One cell: ``s``, ``c`` are clusters x models (correct and valid instances; NaN where a model has no row in
    a cluster); ``n_items`` the questions behind them (default: one per cluster)."""
    z = np.column_stack([_linearised(np.nan_to_num(s[:, m]), np.nan_to_num(c[:, m])) for m in range(len(models))])
    per_model = [np.nanstd(z[:, m], ddof=1) for m in range(len(models)) if np.sum(np.isfinite(z[:, m])) > 1]
    sd_item = float(np.sqrt(np.mean(np.square(per_model)))) if per_model else math.nan
    diffs, corrs = [], []
    for a, b in itertools.combinations(range(len(models)), 2):
        ok = np.isfinite(z[:, a]) & np.isfinite(z[:, b])
        if ok.sum() > 2:
            diffs.append(np.std(z[ok, a] - z[ok, b], ddof=1))
            if np.std(z[ok, a]) > 0 and np.std(z[ok, b]) > 0:
                corrs.append(np.corrcoef(z[ok, a], z[ok, b])[0, 1])
    if correlation is not None:
        rho, source, sd_diff = correlation, "given", sd_diff_from(sd_item, correlation)
    elif diffs:
        rho = float(np.median(corrs)) if corrs else math.nan
        source, sd_diff = f"observed ({len(diffs)} pairs)", float(np.median(diffs))
    else:
        rho, source, sd_diff = 0.0, "assumed 0 (one model)", sd_diff_from(sd_item, 0.0)
    if not sd_diff > 0:  # every item scored alike (e.g. all correct): the data say nothing about the variance
        sd_diff, source = math.nan, "no variation"
    n_clusters = int(np.median(np.sum(c > 0, axis=0)))
    n_items = n_clusters if n_items is None else n_items
    valid = np.nansum(c)
    needed = items_needed(sd_diff, effect, alpha, power) if effect is not None and math.isfinite(sd_diff) else None
    row = {"protocol": protocol, "prompt": prompt, "split": split, "metric": "accuracy", "key": key,
           "n_items": n_items, "n_clusters": n_clusters, "instances": float(valid / max(1, np.sum(c > 0))),
           "accuracy": float(np.nansum(s) / valid) if valid else None, "sd_item": _num(sd_item),
           "correlation": _num(rho), "correlation_source": source, "sd_diff": _num(sd_diff), "alpha": alpha,
           "power": power, "mde": _num(mde(sd_diff, n_clusters, alpha, power)), "effect": effect,
           "items_needed": (None if needed is None else int(math.ceil(needed * n_items / max(1, n_clusters)))),
           "clusters_needed": needed}
    return row


def _num(x) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def power_table(predictions: pl.DataFrame, *, effect: float | None = None, alpha: float = ALPHA,
                power: float = POWER, correlation: float | None = None, cluster=None,
                model_order: Sequence[str] | None = None) -> pl.DataFrame:
    """Per protocol x prompt x split x cell (accuracy per condition, and ``all``): the MDE of a paired model
    comparison with the clustered variance of these predictions (multiple-choice rows; invalid ones left out).
    The clusters are the bootstrap's (``cluster``: ``stats.clusters``; the question by default, the copies of one
    question being one).

    A cell's models are taken in ``model_order`` (default: their first appearance among these predictions'
    multiple-choice rows; ``stats.distributed.ray_power`` passes the whole input's to a task holding one split)
    and its clusters sorted: the sums behind each figure then run in one order, so that the figures are the same
    bits whatever other rows the frame holds and however the grouping hashed them."""
    from omnieval.core.metric_types import CLUSTER, QUESTION
    from omnieval.stats.clusters import with_clusters
    from omnieval.stats.read import prepare

    frame = with_clusters(prepare(predictions), cluster).filter(pl.col("mode") != "open")
    valid = frame.filter("valid").with_columns(pl.col("correct").cast(pl.Float64))
    per_cell = valid.group_by("protocol", "prompt", "split", "condition", "model", CLUSTER).agg(
        s=pl.col("correct").sum(), c=pl.len().cast(pl.Float64), q=pl.col(QUESTION).n_unique())
    pooled = valid.group_by("protocol", "prompt", "split", "model", CLUSTER).agg(
        s=pl.col("correct").sum(), c=pl.len().cast(pl.Float64), q=pl.col(QUESTION).n_unique()) \
        .with_columns(condition=pl.lit("all"))
    cells = pl.concat([per_cell, pooled.select(per_cell.columns)])
    if model_order is None:
        model_order = frame["model"].unique(maintain_order=True).to_list()
    order = {m: i for i, m in enumerate(model_order)}
    rows = []
    for (protocol, prompt, split, key), g in sorted(
            cells.partition_by(["protocol", "prompt", "split", "condition"], as_dict=True).items(),
            key=lambda kv: (kv[0][:3], kv[0][3] != "all", kv[0][3])):
        models = sorted(g["model"].unique().to_list(), key=lambda m: (order.get(m, len(order)), m))
        s = g.pivot("model", index=CLUSTER, values="s").sort(CLUSTER).select(models).to_numpy().astype(np.float64)
        c = g.pivot("model", index=CLUSTER, values="c").sort(CLUSTER).select(models).to_numpy().astype(np.float64)
        n_items = int(np.median(g.group_by("model").agg(pl.col("q").sum())["q"].to_numpy()))
        rows.append(_cell_row(protocol, prompt, split, key, s, c, models, correlation, alpha, power, effect,
                              n_items))
    return table_of(rows)


def from_numbers(n_items: int, accuracy: float, correlation: float, *, instances: int = 1, icc: float = 0.0,
                 effect: float | None = None, alpha: float = ALPHA, power: float = POWER) -> pl.DataFrame:
    """The one-row table for a benchmark described by numbers instead of predictions."""
    sd_item = sd_item_from_numbers(accuracy, instances, icc)
    sd_diff = sd_diff_from(sd_item, correlation)
    row = {"protocol": "", "prompt": "", "split": "", "metric": "accuracy", "key": "", "n_items": n_items,
           "n_clusters": n_items, "instances": float(instances), "accuracy": accuracy, "sd_item": sd_item,
           "correlation": correlation,
           "correlation_source": "given", "sd_diff": sd_diff, "alpha": alpha, "power": power,
           "mde": _num(mde(sd_diff, n_items, alpha, power)), "effect": effect,
           "items_needed": items_needed(sd_diff, effect, alpha, power) if effect is not None else None}
    row["clusters_needed"] = row["items_needed"]
    return table_of([row])


def table_of(rows: Iterable[dict]) -> pl.DataFrame:
    ints = {"n_items", "n_clusters", "items_needed", "clusters_needed"}
    strings = {"protocol", "prompt", "split", "metric", "key", "correlation_source"}
    schema = {c: pl.Int64 if c in ints else pl.Utf8 if c in strings else pl.Float64 for c in POWER_COLUMNS}
    rows = list(rows)
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _print(table: pl.DataFrame) -> None:
    cols = ["protocol", "prompt", "split", "key", "n_items", "n_clusters", "accuracy", "correlation", "sd_diff", "mde",
            "items_needed"]
    text = [[("—" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)) for v in row]
            for row in table.select(cols).iter_rows()]
    widths = [max(len(c), *(len(r[j]) for r in text)) if text else len(c) for j, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for r in text:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))


def power_command(paths: list[str], out: str | None, *, n_items: int | None = None, accuracy: float | None = None,
                  correlation: float | None = None, instances: int = 1, icc: float = 0.0,
                  effect: float | None = None, alpha: float = ALPHA, power: float = POWER, cluster=None,
                  address: str | None = None) -> int:
    """Print (and with ``out`` write ``power.csv`` / ``power.parquet``) the MDE table; large inputs, or any with
    ``address`` (a Ray cluster), one split or protocol per Ray task (``stats.distributed.ray_power``: the same
    table)."""
    from omnieval.core.schema import InputError
    from omnieval.core.storage import local_folder
    from omnieval.stats.read import read_predictions

    start = time.perf_counter()
    if correlation is not None and not -1 <= correlation <= 1:
        raise InputError("--correlation must lie in [-1, 1]", field="--correlation")
    if effect is not None and effect <= 0:
        raise InputError("--effect must be positive", field="--effect")
    for name, value in (("--alpha", alpha), ("--power", power)):
        if not 0 < value < 1:
            raise InputError(f"{name} must lie strictly between 0 and 1", field=name)
    folder = local_folder(out) if out else None  # a bad --out stops here, before the computing
    options = {"effect": effect, "alpha": alpha, "power": power, "correlation": correlation}
    if paths:
        from omnieval.stats import distributed

        if distributed.use_ray(paths, address):
            started = distributed.connect(address)
            try:
                table = distributed.ray_power(paths, power_table, cluster=cluster, **options)
            finally:
                if started:
                    import ray

                    ray.shutdown()
        else:
            table = power_table(read_predictions(paths), cluster=cluster, **options)
    else:
        if n_items is None or accuracy is None:
            raise InputError("give predictions files, or --items and --accuracy (and --correlation)",
                             field="--items")
        try:
            table = from_numbers(n_items, accuracy, 0.0 if correlation is None else correlation,
                                 instances=instances, icc=icc, effect=effect, alpha=alpha, power=power)
        except ValueError as exc:
            raise InputError(str(exc)) from exc
    _print(table)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        table.write_csv(folder / "power.csv")
        table.write_parquet(folder / "power.parquet")
        print(f"omnieval power: {len(table)} rows in {time.perf_counter() - start:.1f} s -> {folder}")
    return 0
