"""Confidence intervals from one clustered bootstrap pass: percentile, t with C - 1 degrees of freedom, BCa
(docs/reference.md, Statistics common to all protocols, Intervals).

Every method reads the same rows of a metric: ``values[metric, row]`` with row 0 the data, rows ``1..R`` the
bootstrap resamples and, for BCa only, rows ``R + 1..R + C`` the leave-one-cluster-out jackknife (cluster ``i``
left out in row ``R + 1 + i``; ``stats.bootstrap.bootstrap_unit(jackknife=True)``). A resample where the metric is
undefined (NaN) is left out, as everywhere in the table.

* ``percentile``: the ``alpha/2`` and ``1 - alpha/2`` quantiles of the resamples (linear interpolation, numpy's
  default).
* ``t``: ``estimate +- t_{1 - alpha/2, C - 1} * se``, ``se`` the resamples' standard deviation times
  ``sqrt(C / (C - 1))``, C the clusters behind the row: for a mean of C cluster totals the bootstrap variance is
  ``(C - 1) / C`` of the unbiased one, so this is the textbook t interval of a clustered mean, and the small-sample
  correction carries over to every smooth metric of cell means. No interval below two clusters.
* ``bca``: bias-corrected and accelerated percentile interval (Efron and Tibshirani 1993, 14.3): ``z0`` from the
  share of resamples below the estimate (ties counted half), the acceleration from the jackknife over the clusters
  behind the row, as ``scipy.stats.bootstrap(method="BCa")`` computes them.
"""

from __future__ import annotations

import numpy as np

from omnieval.kernels.bootstrap import percentile_interval

METHODS = ("percentile", "t", "bca")
DEFAULT_METHOD = "t"
"""The interval of every table unless another is asked for: the one that covers at the nominal rate in the coverage
study (``omnieval bench coverage``; docs/reference.md, Statistics common to all protocols, Intervals)."""


def check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown interval method {method!r}; known: {', '.join(METHODS)}")
    return method


def needs_jackknife(method: str) -> bool:
    """Whether the method reads the leave-one-cluster-out rows after the resamples."""
    return check_method(method) == "bca"


def intervals(values: np.ndarray, resamples: int, method: str, n_clusters: np.ndarray,
              level: float = 0.95, cluster_masks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` per metric (row of ``values``, laid out as the module docstring says).

    ``n_clusters[m]``: the clusters behind metric m (the t interval's C); ``cluster_masks[m, i]``: whether cluster i
    is behind metric m (BCa's jackknife reads only those rows; default: every cluster).
    """
    check_method(method)
    values = np.asarray(values, dtype=np.float64)
    n_metrics = values.shape[0]
    if resamples < 1 or n_metrics == 0:
        nan = np.full(n_metrics, np.nan)
        return nan, nan.copy()
    alpha = (1.0 - level) / 2.0
    boot = values[:, 1:1 + resamples]
    if method == "percentile":
        low, high = percentile_interval(boot.T, alpha, 1.0 - alpha)  # rows contiguous: no copy (the kernel's layout)
        return _on_two_clusters(low, high, n_clusters)
    if method == "t":
        return t_interval(values[:, 0], boot, np.asarray(n_clusters), alpha)
    return bca_interval(values[:, 0], boot, values[:, 1 + resamples:], alpha, cluster_masks)


def _on_two_clusters(low: np.ndarray, high: np.ndarray, n_clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NaN where a row rests on fewer than two clusters: every resample of one cluster is that cluster again, so
    the percentile interval would be [value, value], a certainty the data cannot give (as the t interval, none)."""
    few = np.asarray(n_clusters) < 2
    return np.where(few, np.nan, low), np.where(few, np.nan, high)


def t_interval(estimate: np.ndarray, boot: np.ndarray, n_clusters: np.ndarray,
               alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``estimate +- t_{1 - alpha, C - 1} sd(boot) sqrt(C / (C - 1))`` per row; NaN where C < 2 or fewer than
    two resamples are defined. The quantile is ``scipy.special.stdtrit``, the function ``scipy.stats.t.ppf``
    evaluates (the same numbers), without importing ``scipy.stats`` (seconds of a short command's start)."""
    from scipy.special import stdtrit

    count, var = _row_count_and_variance(boot)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = n_clusters.astype(np.float64)
        se = np.sqrt(var * c / (c - 1))
        q = stdtrit(np.where(c >= 2, c - 1, np.nan), 1.0 - alpha)
    ok = (c >= 2) & (count >= 2) & np.isfinite(estimate)
    half = np.where(ok, q * se, np.nan)
    return np.where(ok, estimate - half, np.nan), np.where(ok, estimate + half, np.nan)


_BLOCK_VALUES = 1 << 17
"""Values (1 MiB of float64) per block of rows in ``_row_count_and_variance``: a block's temporaries stay in the
core's cache and are reused, where whole-table temporaries (hundreds of MB over a paired table) cost a trip to
memory, and fresh pages, per pass."""


def _row_count_and_variance(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite values per row and their unbiased variance (NaN below two), a block of rows at a time. numpy sums
    each row on its own along the last axis, so the blocks give the numbers of one whole-table pass."""
    n_rows, width = boot.shape
    count = np.empty(n_rows)
    var = np.empty(n_rows)
    step = max(1, _BLOCK_VALUES // max(width, 1))
    for lo in range(0, n_rows, step):
        part = boot[lo:lo + step]
        finite = np.isfinite(part)
        everywhere = bool(finite.all())  # the usual case: no masked copies (the same sums: nothing is masked)
        n = np.full(len(part), width) if everywhere else finite.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = (part if everywhere else np.where(finite, part, 0.0)).sum(axis=1) / n
            deviation = part - mean[:, None]
            deviation *= deviation
            var[lo:lo + step] = (deviation if everywhere else np.where(finite, deviation, 0.0)).sum(axis=1) / (n - 1)
        count[lo:lo + step] = n
    return count, var


def bca_interval(estimate: np.ndarray, boot: np.ndarray, jackknife: np.ndarray, alpha: float,
                 cluster_masks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """BCa per row (``scipy.stats.bootstrap``'s formulas); NaN where the estimate, the bias correction or the
    acceleration is undefined (e.g. every resample on one side of the estimate)."""
    from scipy.special import ndtr, ndtri

    low = np.full(len(estimate), np.nan)
    high = np.full(len(estimate), np.nan)
    z_alpha = ndtri(alpha)
    for m in range(len(estimate)):
        b = boot[m][np.isfinite(boot[m])]
        theta = estimate[m]
        jack = jackknife[m] if cluster_masks is None else jackknife[m][cluster_masks[m]]
        jack = jack[np.isfinite(jack)]
        if not len(b) or not np.isfinite(theta) or len(jack) < 2:
            continue
        z0 = ndtri((np.count_nonzero(b < theta) + np.count_nonzero(b <= theta)) / (2.0 * len(b)))
        d = jack.mean() - jack
        den = np.sum(d ** 2)
        a = np.sum(d ** 3) / (6.0 * den ** 1.5) if den > 0 else 0.0
        levels = []
        for z in (z_alpha, -z_alpha):
            num = z0 + z
            levels.append(ndtr(z0 + num / (1.0 - a * num)))
        if not np.all(np.isfinite(levels)):
            continue
        low[m], high[m] = np.quantile(b, levels)
    return low, high


def clipped(low: np.ndarray, high: np.ndarray, bounds: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's interval cut to the values its metric can take (``ProtocolMetrics.bounds_of``). Only the t
    interval reaches past them (an accuracy of 0.375 on 4 clips: -0.33 to 1.08); the true value lies inside the
    bounds, so a clipped interval covers it exactly when the whole one does: coverage is unchanged. NaN stays NaN."""
    if not bounds:
        return low, high
    lo, hi = (np.array(side, dtype=np.float64) for side in zip(*bounds, strict=True))
    return np.where(np.isnan(low), low, np.maximum(low, lo)), np.where(np.isnan(high), high, np.minimum(high, hi))


def difference_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    """The values a difference of two values within ``bounds`` can take."""
    lo, hi = bounds
    return lo - hi, hi - lo
