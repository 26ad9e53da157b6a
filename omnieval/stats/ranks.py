"""Which of many models really differ: each model's rank with a simultaneous interval, and significance groups
(the ``ranks`` table of ``omnieval metrics``, docs/reference.md, Ranks and significance groups).

With three or more models on the same questions of one benchmark (protocol x split) and prompt style, every
``accuracy`` row of the paired differences (``omnieval.stats.paired``: one condition's accuracy) gets one row per
model (``RANK_COLUMNS``):

* ``value``, ``ci_low``, ``ci_high``: the model's value and its interval, as in the metrics table.
* ``rank``: 1 + the number of models with a higher accuracy on the data (ties share the better rank).
* ``rank_low`` / ``rank_high``: a simultaneous 95% interval for every model's rank at once, by the method of
  Mogstad, Romano, Shaikh and Wilhelm (2024, "Inference for ranks", Review of Economic Studies): simultaneous
  intervals for all ``M (M - 1) / 2`` pairwise differences from the max-|t| statistic of the bootstrap
  (``max_t_critical``), then model m's rank is at least 1 + the number of models shown better than m and at most
  M - the number shown worse. All models share the same resamples (the metrics pass draws the same clusters for
  every unit on the same clusters of a split: ``stats.bootstrap``), so the differences are paired.
* ``group``: letters (``a``, ``ab``, ...): models sharing a letter are a significance group, a set no pair of which
  differs after the Benjamini-Hochberg adjustment (statsmodels ``fdr_bh``) of the paired table's p-values of that
  row (the sign-flip permutation tests), adjusted among the row's ``M (M - 1) / 2`` pairs. Groups are the maximal
  runs of the models in rank order with no significant pair inside (a compact letter display).

Models whose questions differ from the others' are not paired with them and are left out of their row's ranking;
a row with fewer than three models on one set of questions has no ranks. A majority-vote ``ensemble`` (spectrum's,
made from the run's own models) is not ranked: it is no model of its own, and its answers are its members'.
"""

from __future__ import annotations

import itertools
import string

import numpy as np
import polars as pl

from omnieval.stats.bootstrap import CONFIDENCE_LEVEL
from omnieval.stats.multiple_testing import bh_within

RANK_COLUMNS = ("protocol", "prompt", "split", "metric", "key", "model", "value", "ci_low", "ci_high", "rank",
                "rank_low", "rank_high", "group", "n_models", "n_clusters")
RANKED_METRICS = ("accuracy",)
MIN_MODELS = 3
ENSEMBLE = "ensemble"  # the spectrum protocol's majority vote (``protocols.spectrum.ENSEMBLE``)


def competition_ranks(values: np.ndarray) -> np.ndarray:
    """Rank 1 = the highest value; ties share the better rank (1 + how many are strictly higher). ``values``:
    models x columns; ranks per column."""
    return 1 + (values[None, :, :] > values[:, None, :]).sum(axis=1)


def max_t_critical(estimates: np.ndarray, resampled: np.ndarray, level: float) -> tuple[np.ndarray, float]:
    """Standard errors of the pairwise differences and the critical value of their simultaneous interval.

    ``estimates``: the differences on the data (pairs); ``resampled``: pairs x resamples. A pair whose resampled
    differences never vary (two models with the same answers) has standard error 0 and takes no part in the
    maximum. The critical value is the ``level`` quantile of ``max_pairs |d* - d| / se`` over the resamples."""
    se = resampled.std(axis=1, ddof=1) if resampled.shape[1] > 1 else np.zeros(len(estimates))
    varies = se > 0
    if not varies.any():
        return se, 0.0
    t = np.abs(resampled[varies] - estimates[varies, None]) / se[varies, None]
    return se, float(np.quantile(t.max(axis=0), level))


def rank_intervals(values: np.ndarray, level: float = CONFIDENCE_LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rank, rank_low, rank_high)`` of M models from ``values`` (models x [data, resample 1..R], the same
    resamples in every row): the simultaneous rank intervals of the module docstring."""
    m = values.shape[0]
    pairs = list(itertools.combinations(range(m), 2))
    first, second = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    diff = values[first] - values[second]  # pairs x [data, resamples]
    se, crit = max_t_critical(diff[:, 0], diff[:, 1:], level)
    low, high = diff[:, 0] - crit * se, diff[:, 0] + crit * se
    better = np.zeros((m, m), dtype=bool)  # better[i, j]: i shown above j
    better[first, second] = (low > 0) & (se > 0)
    better[second, first] = (high < 0) & (se > 0)
    rank = competition_ranks(values[:, :1])[:, 0]
    return rank, 1 + better.sum(axis=0), m - better.sum(axis=1)


def letter_groups(order: list[str], differs: set[frozenset[str]]) -> dict[str, str]:
    """Compact letter display of models in rank ``order``: each maximal run of consecutive models with no pair in
    ``differs`` gets a letter; a model's group is the letters of the runs holding it."""
    runs: list[tuple[int, int]] = []
    for start in range(len(order)):
        end = start
        while end + 1 < len(order) and all(frozenset((order[i], order[end + 1])) not in differs
                                           for i in range(start, end + 1)):
            end += 1
        if not runs or end > runs[-1][1]:
            runs.append((start, end))
    letters = (string.ascii_lowercase + string.ascii_uppercase) * (len(runs) // 52 + 1)
    groups = dict.fromkeys(order, "")
    for letter, (start, end) in zip(letters, runs, strict=False):
        for name in order[start:end + 1]:
            groups[name] += letter
    return groups


def differing_pairs(paired: pl.DataFrame, protocol: str, prompt: str, split: str, metric: str, key: str,
                    models: list[str], alpha: float = 1 - CONFIDENCE_LEVEL) -> set[frozenset[str]]:
    """The model pairs of one ranked row whose paired p-value, Benjamini-Hochberg adjusted among the row's pairs,
    is at most ``alpha``."""
    rows = paired.filter((pl.col("comparison") == "models") & (pl.col("protocol") == protocol)
                         & (pl.col("prompt") == prompt) & (pl.col("split") == split) & (pl.col("metric") == metric)
                         & (pl.col("key") == key) & pl.col("a").is_in(models) & pl.col("b").is_in(models))
    if rows.is_empty():
        return set()
    adjusted = bh_within(rows.drop("p_adjusted"), pl.lit("row"))
    return {frozenset((a, b)) for a, b, p in adjusted.select("a", "b", "p_adjusted").iter_rows()
            if p is not None and p <= alpha}


def _paired_sets(units: list) -> list[list]:
    """The units of one benchmark and prompt style grouped by their questions (only units on the same questions
    share resamples), each group with at least ``MIN_MODELS`` models."""
    by_items: dict[tuple, list] = {}
    for unit in units:
        if unit.key[0] != ENSEMBLE:
            by_items.setdefault(unit.cluster_ids, []).append(unit)
    return [group for group in by_items.values() if len(group) >= MIN_MODELS]


def ranks_table(units: list, paired: pl.DataFrame, resamples: int, metrics: pl.DataFrame) -> pl.DataFrame:
    """The ``ranks`` table (``RANK_COLUMNS``) of the units a ``stats.paired.Collector`` kept in the metrics pass and
    the metrics and paired tables of the same pass."""
    by_context: dict[tuple[str, str, str], list] = {}
    for unit in units:
        by_context.setdefault((unit.protocol, unit.key[1], unit.key[2]), []).append(unit)
    rows = []
    for (protocol, prompt, split), context_units in sorted(by_context.items()):
        for group in _paired_sets(context_units):
            group = sorted(group, key=lambda u: u.key[0])
            shared = set.intersection(*(set(u.single_cell) for u in group))
            for metric, key in sorted(k for k in shared if k[0] in RANKED_METRICS):
                rows += _ranked_rows(group, paired, protocol, prompt, split, metric, key, resamples)
    schema = {c: pl.Utf8 for c in ("protocol", "prompt", "split", "metric", "key", "model")} | {
        "value": pl.Float64, "rank": pl.Int64, "rank_low": pl.Int64, "rank_high": pl.Int64, "group": pl.Utf8,
        "n_models": pl.Int64, "n_clusters": pl.Int64}
    table = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    ids = ["protocol", "model", "prompt", "split", "metric", "key"]
    intervals = metrics.select(*ids, "ci_low", "ci_high").unique(ids, keep="first")
    return table.join(intervals, on=ids, how="left").select(RANK_COLUMNS)


def _ranked_rows(group: list, paired: pl.DataFrame, protocol: str, prompt: str, split: str, metric: str, key: str,
                 resamples: int) -> list[dict]:
    values = np.vstack([u.values[(metric, key)][:1 + resamples] for u in group])
    keep = np.all(np.isfinite(values), axis=1)  # a model with no answer in the condition has no rank
    group, values = [u for u, k in zip(group, keep, strict=True) if k], values[keep]
    if len(group) < MIN_MODELS:
        return []
    names = [u.key[0] for u in group]
    rank, low, high = rank_intervals(values)
    order = [names[i] for i in np.lexsort((names, rank))]
    groups = letter_groups(order, differing_pairs(paired, protocol, prompt, split, metric, key, names))
    clusters = int(np.count_nonzero(group[0].cluster_mask(group[0].items[(metric, key)])))
    return [{"protocol": protocol, "prompt": prompt, "split": split, "metric": metric, "key": key, "model": name,
             "value": float(values[i, 0]), "rank": int(rank[i]), "rank_low": int(low[i]), "rank_high": int(high[i]),
             "group": groups[name], "n_models": len(names), "n_clusters": clusters}
            for i, name in sorted(enumerate(names), key=lambda t: (rank[t[0]], t[1]))]
