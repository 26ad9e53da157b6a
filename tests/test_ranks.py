"""Ranks and significance groups (``stats.ranks``): rank intervals against a plain numpy loop over the same resample
indices (drawn here from ``omnieval.kernels.rng`` as the metrics pass draws them), groups against statsmodels'
Benjamini-Hochberg on the paired table's p-values and a brute-force search of the groups, a worked letter example,
and the files ``omnieval metrics`` writes."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests

from omnieval.core.keyed import keyed_seed
from omnieval.kernels.rng import randbelow, stream_key
from omnieval.stats.command import metrics_files
from omnieval.stats.paired import Collector, metrics_and_paired
from omnieval.stats.ranks import differing_pairs, letter_groups, ranks_table

R = 400
SEED = 11
SKILL = {"m0": 1.2, "m1": 1.1, "m2": 0.4, "m3": 0.35, "m4": -0.6}


def five_models(n_items: int = 120, seed: int = 3) -> pl.DataFrame:
    """Five models on the same questions, one instance each in condition ``C000``, per-question ease shared."""
    rng = np.random.default_rng(seed)
    ease = rng.normal(0, 1.0, n_items)
    rows = []
    for model, skill in SKILL.items():
        right = rng.random(n_items) < 1 / (1 + np.exp(-(skill + ease)))
        for i in range(n_items):
            rows.append((model, "zs", "dissonance", "s", f"q{i:04d}", f"q{i:04d}|0", "C000", "A",
                         "A" if right[i] else "B"))
    frame = pl.DataFrame(rows, orient="row", schema=["model", "prompt", "protocol", "split", "item_id",
                                                     "instance_id", "condition", "target", "choice"])
    return frame.with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                              confidence_method=pl.lit(None, pl.Utf8))


def numpy_rank_intervals(correct: np.ndarray, seed: int, stream: int, resamples: int, level: float = 0.95):
    """Reference: models x items right/wrong; resample r draws item ``randbelow(stream_key(seed, stream, r), j, n)``
    for j < n; every pair's difference, its bootstrap se, the max-|t| quantile; ranks counted pair by pair."""
    m, n = correct.shape
    acc = np.empty((m, resamples))
    for r in range(resamples):
        key = np.uint64(stream_key(np.uint64(seed), np.uint64(stream % 2**64), np.uint64(r)))
        idx = np.array([randbelow(key, np.uint64(j), n) for j in range(n)])
        acc[:, r] = correct[:, idx].mean(axis=1)
    point = correct.mean(axis=1)
    pairs = list(itertools.combinations(range(m), 2))
    se = {p: np.std(acc[p[0]] - acc[p[1]], ddof=1) for p in pairs}
    t_max = np.zeros(resamples)
    for (i, j) in pairs:
        if se[(i, j)] > 0:
            t = np.abs(acc[i] - acc[j] - (point[i] - point[j])) / se[(i, j)]
            t_max = np.maximum(t_max, t)
    crit = np.quantile(t_max, level)
    low, high = np.ones(m, int), np.full(m, m)
    for (i, j) in pairs:
        d = point[i] - point[j]
        if se[(i, j)] > 0 and d - crit * se[(i, j)] > 0:  # i above j
            low[j] += 1
            high[i] -= 1
        if se[(i, j)] > 0 and d + crit * se[(i, j)] < 0:  # j above i
            low[i] += 1
            high[j] -= 1
    return low, high


def brute_force_groups(order: list[str], differs: set[frozenset]) -> set[frozenset]:
    """Every run of consecutive models (in rank order) with no differing pair inside, kept where no longer such run
    holds it."""
    runs = [frozenset(order[i:j + 1]) for i in range(len(order)) for j in range(i, len(order))
            if not any(frozenset(p) in differs for p in itertools.combinations(order[i:j + 1], 2))]
    return {r for r in runs if not any(r < other for other in runs)}


@pytest.fixture(scope="module")
def five():
    frame = five_models()
    collector = Collector()
    metrics, paired = metrics_and_paired(frame, resamples=R, seed=SEED, permutations=2_000, cluster="item",
                                         interval="percentile", collector=collector)
    return frame, metrics, paired, ranks_table(collector.units, paired, R, metrics)


def test_rank_intervals_match_a_numpy_loop_over_the_same_resamples(five):
    frame, _, _, ranks = five
    models = sorted(SKILL)
    wide = frame.sort("item_id").pivot("model", index="item_id", values="choice")
    correct = np.vstack([(wide[m] == "A").to_numpy() for m in models]).astype(float)
    low, high = numpy_rank_intervals(correct, SEED, keyed_seed(0, "bootstrap", "dissonance", "s"), R)
    got = ranks.filter(pl.col("key") == "C000").sort("model")
    assert got["model"].to_list() == models
    assert got["rank_low"].to_list() == low.tolist()
    assert got["rank_high"].to_list() == high.tolist()
    point = correct.mean(axis=1)
    assert got["rank"].to_list() == [1 + int(np.sum(point > p)) for p in point]
    assert np.allclose(got["value"].to_numpy(), point)
    _, metrics, _, _ = five
    accuracy = metrics.filter((pl.col("metric") == "accuracy") & (pl.col("key") == "C000")).sort("model")
    assert got["ci_low"].to_list() == accuracy["ci_low"].to_list()
    assert (got["rank_low"] <= got["rank"]).all() and (got["rank"] <= got["rank_high"]).all()
    # the clear gaps here (skills 1.2 / 0.4 / -0.6) separate the best pair from the worst model
    assert got.filter(pl.col("model") == "m4")["rank_low"].item() >= 3


def test_groups_are_the_bh_adjusted_paired_tests_brute_forced(five):
    _, _, paired, ranks = five
    rows = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy")
                         & (pl.col("key") == "C000"))
    assert len(rows) == 10
    adjusted = multipletests(rows["p_value"].to_numpy(), method="fdr_bh")[1]
    differs = {frozenset((a, b)) for a, b, p in zip(rows["a"], rows["b"], adjusted, strict=True) if p <= 0.05}
    assert differs, "the clear gaps must give some differing pairs, or the test checks nothing"
    got = ranks.filter(pl.col("key") == "C000").sort("rank", "model")
    order = got["model"].to_list()
    letters = {letter for g in got["group"] for letter in g}
    found = {frozenset(m for m, g in zip(got["model"], got["group"], strict=True) if letter in g)
             for letter in letters}
    assert found == brute_force_groups(order, differs)


def test_letter_groups_worked_example():
    differs = {frozenset(p) for p in (("A", "C"), ("A", "D"), ("B", "D"))}
    assert letter_groups(["A", "B", "C", "D"], differs) == {"A": "a", "B": "ab", "C": "bc", "D": "c"}
    assert letter_groups(["A", "B", "C"], set()) == {"A": "a", "B": "a", "C": "a"}


def test_metrics_writes_ranks_with_three_models_and_not_with_two(tmp_path):
    frame = five_models(n_items=40)
    path = tmp_path / "predictions.parquet"
    frame.write_parquet(path)
    made = metrics_files([path], resamples=200, seed=1, permutations=200)
    ranks = pl.read_csv(made.files["ranks.csv"])
    assert set(ranks["model"]) == set(SKILL)
    assert ranks["n_models"].unique().to_list() == [5]
    two = tmp_path / "two.parquet"
    frame.filter(pl.col("model").is_in(["m0", "m1"])).write_parquet(two)
    assert "ranks.csv" not in metrics_files([two], resamples=200, seed=1, permutations=200).files


def test_differing_pairs_use_the_bh_adjustment_not_the_raw_p_values():
    """Three pairs with p = 0.01, 0.04, 0.30: raw, two are below 0.05; after BH (0.03, 0.06, 0.30) only one."""
    p = [0.01, 0.04, 0.30]
    paired = pl.DataFrame({"comparison": "models", "protocol": "spectrum", "prompt": "zs", "split": "s",
                           "metric": "accuracy", "key": "normal", "a": ["x", "x", "y"], "b": ["y", "z", "z"],
                           "p_value": p, "p_adjusted": None}, schema_overrides={"p_adjusted": pl.Float64})
    reference = multipletests(p, method="fdr_bh")[1]
    expected = {frozenset(pair) for pair, q in zip([("x", "y"), ("x", "z"), ("y", "z")], reference, strict=True)
                if q <= 0.05}
    assert expected == {frozenset(("x", "y"))}
    assert differing_pairs(paired, "spectrum", "zs", "s", "accuracy", "normal", ["x", "y", "z"]) == expected


def test_a_majority_vote_ensemble_is_not_ranked_nor_counted(tmp_path):
    """Spectrum's ``ensemble`` votes the run's own models: two models and their ensemble make no ranking."""
    frame = five_models(n_items=40).with_columns(pl.col("model").replace({"m4": "ensemble"}))
    path = tmp_path / "predictions.parquet"
    frame.write_parquet(path)
    ranks = metrics_files([path], resamples=200, seed=1, permutations=200).ranks
    assert sorted(ranks["model"].unique()) == ["m0", "m1", "m2", "m3"] and ranks["n_models"].unique().to_list() == [4]
    three = tmp_path / "three.parquet"
    frame.filter(pl.col("model").is_in(["m0", "m1", "ensemble"])).write_parquet(three)
    assert "ranks.csv" not in metrics_files([three], resamples=200, seed=1, permutations=200).files
