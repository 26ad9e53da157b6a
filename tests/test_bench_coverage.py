"""``omnieval bench coverage``: the quick mode runs and prints every column; the known truths equal independent
computations (quadrature against scipy, Shapley values by averaging over orderings) and the simulations agree with
them on large studies; the two-stage bootstrap's weights draw whole clusters, then items within them."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from omnieval.dev.bench_coverage import (
    Design,
    condition_shift,
    crossmodal_truth,
    dissonance_truth,
    mean_expit,
    simulate_crossmodal,
    simulate_dissonance,
    two_stage_weights,
)
from omnieval.protocols.dissonance import MODALITIES

ROOT = Path(__file__).resolve().parents[1]


def test_quick_mode_runs_and_prints_every_method():
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "bench", "coverage", "--quick", "--replicates", "2"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for column in ("item percentile (before)", "item t", "unit percentile", "unit t (C-1 df)", "unit BCa",
                   "two-stage percentile", "few clusters"):
        assert column in out
    for metric in ("accuracy C000", "ace", "shapley video", "paired accuracy C000", "disparity T_vs_V"):
        assert metric in out
    assert "*" in out  # the default is marked


def test_mean_expit_is_the_normal_integral():
    for shift, sd in ((0.8, 0.5), (-1.2, 1.1), (0.3, 0.0)):
        want = quad(lambda z, a=shift, b=sd: norm.pdf(z) / (1 + math.exp(-(a + b * z))), -12, 12)[0]
        assert mean_expit(shift, sd) == pytest.approx(want, abs=1e-10)


def test_shapley_truth_is_the_average_over_orderings():
    design = Design("dissonance", 27, 10, 0.5)
    truth = dissonance_truth(design)
    sd = math.hypot(0.5, 0.5)

    def v(clean: set[str]) -> float:  # accuracy of the condition where exactly ``clean`` is uncorrupted
        condition = "C" + "".join("0" if m in clean else "1" for m in MODALITIES)
        return mean_expit(0.8 + condition_shift(condition), sd)

    for m in MODALITIES:
        gains = []
        for order in itertools.permutations(MODALITIES):
            before = set(order[:order.index(m)])
            gains.append(v(before | {m}) - v(before))
        assert truth[("shapley", m)] == pytest.approx(np.mean(gains), abs=1e-12)


def _accuracy(frame: pl.DataFrame, model: str, condition: str) -> float:
    sel = frame.filter((pl.col("model") == model) & (pl.col("condition") == condition))
    return float((sel["choice"] == sel["target"]).mean())


def test_large_simulated_studies_agree_with_their_truths():
    """Thousands of anchors: the sample's accuracies, difference and ACE lie within 4 standard errors of the truth."""
    design = Design("dissonance", 2_000, 5, 1.0)
    frame = simulate_dissonance(design, np.random.default_rng(0))
    truth = dissonance_truth(design)
    acc_a, acc_b = _accuracy(frame, "a", "C000"), _accuracy(frame, "b", "C000")
    # an anchor's accuracy over 5 questions has an sd below 0.35, the two models' difference below 0.5
    assert acc_a == pytest.approx(truth[("accuracy", "C000")], abs=4 * 0.35 / math.sqrt(2_000))
    assert acc_a - acc_b == pytest.approx(truth[("paired accuracy", "C000")], abs=4 * 0.5 / math.sqrt(2_000))
    a = frame.filter(pl.col("model") == "a").with_columns(
        k=pl.col("condition").str.count_matches("1"), abst=pl.col("choice") == "E", human=pl.col("target") == "E")
    per_k = a.group_by("k").agg(pl.col("abst").mean(), pl.col("human").mean()).sort("k")
    ace = float(np.mean(np.abs(per_k["abst"].to_numpy() - per_k["human"].to_numpy())))
    assert ace == pytest.approx(truth[("ace", "")], abs=0.01)
    xdesign = Design("crossmodal", 3_000, 4, 1.0, unit="clip")
    xframe = simulate_crossmodal(xdesign, np.random.default_rng(1))
    xtruth = crossmodal_truth(xdesign)
    acc = {d: _accuracy(xframe, "a", d) for d in ("A->T", "A->V", "V->A", "T->A")}
    assert acc["A->T"] == pytest.approx(xtruth[("accuracy", "A->T")], abs=0.02)
    assert (acc["A->V"] - acc["A->T"]) + (acc["V->A"] - acc["T->A"]) == pytest.approx(
        xtruth[("disparity", "T_vs_V")], abs=0.03)


def test_two_stage_weights_draw_clusters_then_items_within_them():
    cluster_of_item = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    w = two_stage_weights(cluster_of_item, 500, np.random.default_rng(3))
    assert w.shape == (500, 9) and w.sum(axis=1).mean() == pytest.approx(9, abs=0.3)  # 9 on average (sizes differ)
    sizes = np.bincount(cluster_of_item)
    per_cluster = np.stack([w[:, cluster_of_item == c].sum(axis=1) for c in range(3)], axis=1)
    assert np.all(per_cluster % sizes == 0)  # a cluster is drawn whole: its size times the times it was drawn
    drawn = per_cluster / sizes
    assert np.all(drawn.sum(axis=1) == 3) and drawn.mean() == pytest.approx(1.0, abs=0.05)
    # within a drawn cluster, items are drawn with replacement: a 4-item cluster drawn once leaves some item out
    once = (drawn[:, 2] == 1)
    assert np.mean(np.any(w[once][:, cluster_of_item == 2] == 0, axis=1)) == pytest.approx(1 - 24 / 256, abs=0.08)
