"""The many-model part of ``omnieval bench coverage`` (``dev.bench_ranks``): its truths against an independent
integral (a fine midpoint grid over the beta density written out with ``math.lgamma``) and against large simulated
studies, the margin boundary it tests the gate at, and its table in quick mode through the command line."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omnieval.dev.bench_ranks import (
    BETA,
    MARGIN,
    REDRAW,
    SHIFTS,
    boundary_shift,
    checkpoint_pair,
    simulate,
    true_accuracy,
)

ROOT = Path(__file__).resolve().parents[1]


def grid_accuracy(shift: float, a: float = BETA[0], b: float = BETA[1], n: int = 400_000) -> float:
    """``E expit(logit(p) + shift)`` for p ~ Beta(a, b) on a midpoint grid, the density from its formula."""
    p = (np.arange(n) + 0.5) / n
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    density = np.exp(log_norm + (a - 1) * np.log(p) + (b - 1) * np.log1p(-p))
    odds = p / (1 - p) * math.exp(shift)
    return float(np.sum(density * odds / (1 + odds)) / n)


@pytest.mark.parametrize("shift", [-1.0, 0.0, 0.3, 1.0])
def test_true_accuracy_is_the_beta_integral(shift):
    assert true_accuracy(shift) == pytest.approx(grid_accuracy(shift), abs=2e-5)


def test_boundary_is_worse_by_the_margin_and_simulations_agree_with_the_truth():
    shift = boundary_shift()
    assert REDRAW * (grid_accuracy(0.0) - grid_accuracy(shift)) == pytest.approx(MARGIN, abs=2e-6)
    candidate, baseline = checkpoint_pair(shift, 1_000_000, np.random.default_rng(2))
    assert candidate.mean() - baseline.mean() == pytest.approx(-MARGIN, abs=2e-3)
    assert np.mean(candidate != baseline) < REDRAW  # the rest repeat the baseline's answers
    correct = simulate(np.array([0.0, -1.0, 1.0]), 400_000, np.random.default_rng(1))
    assert correct.mean(axis=1) == pytest.approx([grid_accuracy(s) for s in (0.0, -1.0, 1.0)], abs=4e-3)
    assert len(SHIFTS) == 30 and np.sum(SHIFTS == 0) == 10 and len(set(SHIFTS[SHIFTS != 0])) == 20


def test_quick_mode_prints_the_many_model_table():
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "bench", "coverage", "--quick", "--replicates", "2",
                           "--part", "ranks"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for line in ("(e) many models: 30 models (10 equal)", "rank intervals: all 30 true ranks covered",
                 "groups: false discovery share", "gate: passes a candidate worse by the margin"):
        assert line in done.stdout
