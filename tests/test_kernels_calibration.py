"""Calibration kernels against plain numpy loops written here (definitions of docs/reference.md, Protocol `dissonance`),
with and without ties and under bootstrap item multiplicities (a resample = the data with every item repeated ``w``
times)."""

from __future__ import annotations

import itertools

import numpy as np

from omnieval.kernels.calibration import calibration_weighted


def ece_loop(conf, correct, bins=10):
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [i for i in range(len(conf)) if lo <= conf[i] < hi or (b == bins - 1 and conf[i] == 1.0)]
        if members:
            acc = np.mean([correct[i] for i in members])
            avg = np.mean([conf[i] for i in members])
            total += len(members) / len(conf) * abs(acc - avg)
    return total


def rc_auc_loop(conf, correct):
    """Sort by confidence descending; risk at coverage i/N = error rate of the top i; mean over i (no ties)."""
    order = sorted(range(len(conf)), key=lambda i: -conf[i])
    errors, risks = 0, []
    for i, t in enumerate(order, start=1):
        errors += 1 - correct[t]
        risks.append(errors / i)
    return float(np.mean(risks))


def rc_auc_all_tie_orders(conf, correct):
    """Exact expectation over every order of equal-confidence instances (brute force)."""
    groups = [[i for i in range(len(conf)) if conf[i] == c] for c in sorted(set(conf), reverse=True)]
    values = []
    for perm in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [i for g in perm for i in g]
        errors, risks = 0, []
        for k, t in enumerate(order, start=1):
            errors += 1 - correct[t]
            risks.append(errors / k)
        values.append(np.mean(risks))
    return float(np.mean(values))


def test_ece_and_rc_auc_match_loops_on_random_data():
    rng = np.random.default_rng(0)
    for n in (1, 7, 300):
        conf = rng.random(n)
        correct = (rng.random(n) < conf).astype(float)
        item = np.arange(n)
        ece, auc = calibration_weighted(np.ones((1, n), dtype=np.int32), item, conf, correct, 10)
        assert np.isclose(ece[0], ece_loop(conf, correct))
        assert np.isclose(auc[0], rc_auc_loop(conf, correct))


def test_rc_auc_averages_over_tie_orders():
    conf = np.array([0.9, 0.9, 0.9, 0.5, 0.5, 0.2, 1.0])
    correct = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    _, auc = calibration_weighted(np.ones((1, 7), dtype=np.int32), np.arange(7), conf, correct, 10)
    assert np.isclose(auc[0], rc_auc_all_tie_orders(conf, correct))
    assert np.isclose(auc[0], rc_auc_all_tie_orders(conf[::-1], correct[::-1]))  # row order does not matter


def test_weighted_equals_the_expanded_resample():
    rng = np.random.default_rng(1)
    n_items = 40
    per_item = rng.integers(1, 5, n_items)
    item = np.repeat(np.arange(n_items), per_item)
    conf = rng.random(len(item))
    correct = (rng.random(len(item)) < conf).astype(float)
    weights = rng.multinomial(n_items, np.full(n_items, 1 / n_items), size=25).astype(np.int32)
    ece, auc = calibration_weighted(weights, item, conf, correct, 10)
    for r in range(25):
        rows = np.concatenate([np.nonzero(item == i)[0].repeat(weights[r, i]) for i in range(n_items)])
        # copies of one instance share its correctness, so their order is irrelevant: the no-tie loop applies
        assert np.isclose(ece[r], ece_loop(conf[rows], correct[rows]))
        assert np.isclose(auc[r], rc_auc_loop(conf[rows], correct[rows]))


def test_ece_bins_include_one_in_the_last_bin_and_empty_resample_is_nan():
    conf = np.array([1.0, 0.95, 0.05])
    correct = np.array([1.0, 0.0, 0.0])
    ece, _ = calibration_weighted(np.ones((1, 3), dtype=np.int32), np.arange(3), conf, correct, 10)
    assert np.isclose(ece[0], ece_loop(conf, correct))
    ece, auc = calibration_weighted(np.zeros((1, 3), dtype=np.int32), np.arange(3), conf, correct, 10)
    assert np.isnan(ece[0]) and np.isnan(auc[0])


def _running_sums_loop(w_row, item, conf, correct, bins=10):
    """ECE and RC-AUC of one resample as plain Python running sums over the instances sorted by confidence
    (distinct confidences): the module docstring's formulas, added up in the same order as the kernel."""
    order = sorted(range(len(conf)), key=lambda t: -conf[t])
    harmonic = [0.0]
    for k in range(1, int(sum(w_row[i] for i in item)) + 1):
        harmonic.append(harmonic[-1] + 1.0 / k)
    total, errors, area, gap, g = 0, 0.0, 0.0, 0.0, 0.0
    for pos, t in enumerate(order):
        w = int(w_row[item[t]])
        err = 1.0 - correct[t]
        g += w * (correct[t] - conf[t])
        last_of_bin = pos == len(order) - 1 or (min(int(conf[t] * bins), bins - 1)
                                                != min(int(conf[order[pos + 1]] * bins), bins - 1))
        if last_of_bin:
            gap += abs(g)
            g = 0.0
        area += w * err + (errors - total * err) * (harmonic[total + w] - harmonic[total])
        total += w
        errors += w * err
    return (gap / total, area / total) if total else (np.nan, np.nan)


def test_each_resample_row_is_exactly_the_plain_loop_whatever_its_neighbours():
    """Resamples go through the kernel several at a time; every row count (a multiple of that batch or not)
    must give each row the bits a plain loop gives it alone."""
    rng = np.random.default_rng(7)
    n_items = 30
    item = np.repeat(np.arange(n_items), 3)
    conf = rng.random(len(item))
    correct = (rng.random(len(item)) < conf).astype(float)
    weights = rng.multinomial(n_items, np.full(n_items, 1 / n_items), size=11).astype(np.int32)
    weights[5] = 0  # an empty resample among full ones
    expected = [_running_sums_loop(weights[r], item, conf, correct) for r in range(len(weights))]
    for n_rows in range(1, len(weights) + 1):
        ece, auc = calibration_weighted(weights[:n_rows], item, conf, correct, 10)
        got = list(zip(ece.tolist(), auc.tolist()))
        assert np.array_equal(np.array(got), np.array(expected[:n_rows]), equal_nan=True), n_rows
