"""Calibration: ECE and the risk-coverage AUC, on the data or under bootstrap weights (the restricted softmax that
gives the ``rs`` confidence is ``omnieval.kernels.softmax``).

ECE and RC-AUC are not functions of a few cell means (RC-AUC depends on the ranking of every instance), so under the
clustered bootstrap they are evaluated on the resample itself: a resample is a row of item multiplicities ``W[r]``
(from ``omnieval.kernels.bootstrap.resample_counts``) and instance ``t`` of item ``item[t]`` counts ``W[r, item[t]]``
times. A row of ones gives the point estimate, so the estimate and its CI come from the same code.

Definitions (docs/reference.md, Protocol `dissonance`):

* ECE: 10 equal-width confidence bins ``[b/10, (b+1)/10)`` (the last one closed at 1),
  ``sum_b (n_b / N) |acc_b - conf_b|`` = ``sum_b |sum correct - sum conf| / N``.
* RC-AUC: sort by confidence descending; risk at coverage i/N = error rate of the top i; average over i = 1..N.
  Instances with equal confidence have no order of their own: the value is the expectation over a uniformly random
  order of each tie group (bootstrap copies of one instance are ties too), which makes it independent of row order.
  Within a tie group of size c with e errors entered after C0 instances and E0 errors, position j has expected risk
  ``(E0 + j e/c) / (C0 + j)``; the sum over j is ``e + (E0 - C0 e/c) (H(C0 + c) - H(C0))`` with harmonic numbers H.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from omnieval.kernels.bootstrap import blocks


@njit(cache=True)
def _calibration_rows(weights, s_item, s_conf, s_err, s_gap, group_end, bin_end, single, harmonic, ece, auc):
    """ECE and RC-AUC of every row of ``weights``, instances pre-sorted by confidence (see module docstring)."""
    n = s_item.shape[0]
    for r in range(weights.shape[0]):
        w_row = weights[r]
        total = 0
        errors = 0.0
        area = 0.0
        gap = 0.0
        c = 0
        e = 0.0
        g = 0.0
        for t in range(n):  # branch-light: zero weights just add zeros
            w = w_row[s_item[t]]
            c += w
            e += w * s_err[t]
            g += w * s_gap[t]
            if bin_end[t]:
                gap += abs(g)
                g = 0.0
            if group_end[t]:
                rate = s_err[t] if single[t] else e / max(c, 1)
                area += e + (errors - total * rate) * (harmonic[total + c] - harmonic[total])
                total += c
                errors += e
                c = 0
                e = 0.0
        if total > 0:
            ece[r] = gap / total
            auc[r] = area / total


@njit(cache=True)
def _calibration_rows_distinct(weights, s_item, s_err, s_gap, bin_end, harmonic, ece, auc):
    """``_calibration_rows`` when no two instances share a confidence (the usual case with continuous
    confidences): every tie group is the ``w`` copies of one instance, whose error rate is its own error, so the
    group sums collapse to ``w * err`` and the loop needs no group bookkeeping and no branch besides bin ends.
    Same formulas in the same order as the general loop (bit-identical results).

    Four resamples go through the instances side by side: each row's running sums form a chain of dependent
    additions, and four independent chains keep the core busy where one leaves it waiting (~27% less time on
    2,040 instances x 10,000 resamples). Each row still sees exactly its own operations in its own order, so the
    values are those of one row at a time; the last ``R mod 4`` rows go through ``_calibration_row``."""
    n = s_item.shape[0]
    n_rows = weights.shape[0]
    r = 0
    while r + 4 <= n_rows:
        w0, w1, w2, w3 = weights[r], weights[r + 1], weights[r + 2], weights[r + 3]
        total0 = total1 = total2 = total3 = 0
        errors0 = errors1 = errors2 = errors3 = 0.0
        area0 = area1 = area2 = area3 = 0.0
        gap0 = gap1 = gap2 = gap3 = 0.0
        g0 = g1 = g2 = g3 = 0.0
        for t in range(n):
            i = s_item[t]
            err = s_err[t]
            gp = s_gap[t]
            w = w0[i]
            e = w * err
            g0 += w * gp
            area0 += e + (errors0 - total0 * err) * (harmonic[total0 + w] - harmonic[total0])
            total0 += w
            errors0 += e
            w = w1[i]
            e = w * err
            g1 += w * gp
            area1 += e + (errors1 - total1 * err) * (harmonic[total1 + w] - harmonic[total1])
            total1 += w
            errors1 += e
            w = w2[i]
            e = w * err
            g2 += w * gp
            area2 += e + (errors2 - total2 * err) * (harmonic[total2 + w] - harmonic[total2])
            total2 += w
            errors2 += e
            w = w3[i]
            e = w * err
            g3 += w * gp
            area3 += e + (errors3 - total3 * err) * (harmonic[total3 + w] - harmonic[total3])
            total3 += w
            errors3 += e
            if bin_end[t]:
                gap0 += abs(g0)
                gap1 += abs(g1)
                gap2 += abs(g2)
                gap3 += abs(g3)
                g0 = g1 = g2 = g3 = 0.0
        _store(ece, auc, r, total0, gap0, area0)
        _store(ece, auc, r + 1, total1, gap1, area1)
        _store(ece, auc, r + 2, total2, gap2, area2)
        _store(ece, auc, r + 3, total3, gap3, area3)
        r += 4
    for rest in range(r, n_rows):
        _calibration_row(weights[rest], s_item, s_err, s_gap, bin_end, harmonic, ece, auc, rest)


@njit(cache=True)
def _calibration_row(w_row, s_item, s_err, s_gap, bin_end, harmonic, ece, auc, r):
    """One row of ``_calibration_rows_distinct``, the same operations in the same order."""
    total = 0
    errors = 0.0
    area = 0.0
    gap = 0.0
    g = 0.0
    for t in range(s_item.shape[0]):
        w = w_row[s_item[t]]
        err = s_err[t]
        e = w * err
        g += w * s_gap[t]
        if bin_end[t]:
            gap += abs(g)
            g = 0.0
        area += e + (errors - total * err) * (harmonic[total + w] - harmonic[total])
        total += w
        errors += e
    _store(ece, auc, r, total, gap, area)


@njit(cache=True)
def _store(ece, auc, r, total, gap, area):
    """ECE and RC-AUC of row ``r`` from its sums (left NaN where the resample holds no instance)."""
    if total > 0:
        ece[r] = gap / total
        auc[r] = area / total


@njit(cache=True, parallel=True)
def _calibration_rows_parallel(weights, s_item, s_conf, s_err, s_gap, group_end, bin_end, single, harmonic, ece,
                               auc, n_blocks):
    size = (weights.shape[0] + n_blocks - 1) // n_blocks
    distinct = True
    for t in range(single.shape[0]):
        distinct &= single[t]
    for b in prange(n_blocks):
        lo = b * size
        hi = min(weights.shape[0], lo + size)
        if lo < hi:
            if distinct:
                _calibration_rows_distinct(weights[lo:hi], s_item, s_err, s_gap, bin_end, harmonic, ece[lo:hi],
                                           auc[lo:hi])
            else:
                _calibration_rows(weights[lo:hi], s_item, s_conf, s_err, s_gap, group_end, bin_end, single,
                                  harmonic, ece[lo:hi], auc[lo:hi])


def calibration_weighted(weights, item, conf, correct, n_bins=10):
    """``(ece[r], rc_auc[r])`` for every row of item multiplicities ``weights[r, item]``.

    ``item[t]``, ``conf[t]`` in [0, 1], ``correct[t]`` in {0, 1} describe the instances (valid predictions with a
    confidence, one confidence method). NaN where a resample holds no instance. Sorted by confidence, tie groups
    and bins are contiguous runs, so running sums are flushed at their ends (a tie never straddles a bin edge).
    """
    conf = np.asarray(conf, dtype=np.float64)
    n = len(conf)
    order = np.argsort(-conf, kind="stable")
    s_item = np.ascontiguousarray(np.asarray(item, dtype=np.int64)[order])
    s_conf = conf[order]
    s_corr = np.asarray(correct, dtype=np.float64)[order]
    s_err = 1.0 - s_corr
    s_gap = s_corr - s_conf
    s_bin = np.minimum((s_conf * n_bins).astype(np.int64), n_bins - 1)
    group_end = np.ones(n, dtype=np.bool_)
    bin_end = np.ones(n, dtype=np.bool_)
    group_end[:-1] = s_conf[1:] != s_conf[:-1]
    bin_end[:-1] = s_bin[1:] != s_bin[:-1]
    single = group_end.copy()  # a tie group of one: its error rate is known without a division
    single[1:] &= group_end[:-1]
    bound = int(weights.max()) * n if weights.size else 0  # no resample holds more instances
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, bound + 1))])
    ece = np.full(weights.shape[0], np.nan)
    auc = np.full(weights.shape[0], np.nan)
    args = (weights, s_item, s_conf, s_err, s_gap, group_end, bin_end, single, harmonic, ece, auc)
    n_blocks = blocks(weights.shape[0], weights.shape[0] * 3.0 * n)
    if n_blocks > 1:
        _calibration_rows_parallel(*args, n_blocks)
    elif single.all():
        _calibration_rows_distinct(weights, s_item, s_err, s_gap, bin_end, harmonic, ece, auc)
    else:
        _calibration_rows(*args)
    return ece, auc
