"""``omnieval compare CANDIDATE BASELINE --margin 0.02``: a gate for CI pipelines that evaluate every checkpoint
(docs/reference.md, Non-inferiority gate).

Per benchmark (protocol x split) and prompt style, on the questions both sides answered, a one-sided
non-inferiority test of the paired difference ``delta = candidate - baseline`` of accuracy over every
multiple-choice condition: H0 ``delta <= -margin`` against H1 ``delta > -margin``, on the per-unit differences; a
unit is the resampling unit of the statistics (``stats.clusters``: the question, or the anchor or clip that holds
several), whose rows are averaged first, as in the paired sign-flip tests. Two checkpoints agree on most answers, so
these differences are mostly 0 with a few +-1, skewed at the margin, where the one-sample t test's upper tail is
liberal (it passed a candidate worse by the margin 6-9% of the time at alpha 0.05). So: where every unit is one
question, Tango's (1998) score test for paired proportions (the variance of the discordant-pair difference taken
under the null from the restricted MLE, ``score_test``); where units hold several questions, the studentized
bootstrap of the unit means (``bootstrap_t_test``, keyed resampling: the same table on every run). Answers without
a choice (unparseable) count as wrong here, unlike in the metrics' accuracy: a checkpoint that stops answering in
the expected format must not pass the gate by leaving those answers out; errored rows (never answered) are left out
on both sides, as everywhere.

Adjusted across benchmarks by Holm's step-down method (statsmodels ``holm``): each row's verdict
("non-inferior") is a claim a reader takes on its own, so the chance that any of them is wrong is what is held at
alpha (family-wise), not only the expected share of wrong ones (Benjamini-Hochberg).

The command exits 0 when every benchmark is shown non-inferior, 1 when one is not (the candidate may be worse than
the baseline by more than the margin there, or too few units to tell), 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from omnieval.core.keyed import keyed_rng
from omnieval.core.metric_types import CLUSTER
from omnieval.core.schema import InputError
from omnieval.stats.clusters import with_clusters
from omnieval.stats.read import prepare, read_predictions

COMPARE_COLUMNS = ("protocol", "prompt", "split", "n_clusters", "candidate", "baseline", "difference", "lower_bound",
                   "margin", "p_value", "p_adjusted", "verdict")
SIDES = ("candidate", "baseline")
BOOTSTRAP_T_RESAMPLES = 9_999
MAX_DEPTH = 6  # a sweep's predictions sit at <sweep>/runs/<entry>/<model>/<prompt>/predictions.parquet


def prediction_paths(given: str) -> list[Path]:
    """The predictions files a command-line argument stands for: a file, a run folder holding
    ``predictions.parquet``, or a sweep folder whose runs hold them (found up to ``MAX_DEPTH`` folders down)."""
    path = Path(given)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError("no such predictions file, run or sweep folder", file=path)
    if (path / "predictions.parquet").is_file():
        return [path / "predictions.parquet"]
    found = sorted(p for p in path.rglob("predictions.parquet") if len(p.relative_to(path).parts) <= MAX_DEPTH + 1)
    if not found:
        raise InputError("no predictions.parquet in this folder or the run folders below it", file=path)
    return found


def _one_model(frame: pl.DataFrame, side: str, given: str) -> pl.DataFrame:
    """``frame``, refused unless it holds one model (a sweep of several models is ambiguous)."""
    models = sorted(frame["model"].unique().drop_nulls().to_list())
    if len(models) != 1:
        raise InputError(f"the {side} holds {len(models)} models ({', '.join(models)}); compare one model against "
                         "one (pass its run folder or predictions file)", file=given, field="model")
    return frame


def unit_differences(frame: pl.DataFrame) -> dict[tuple[str, str, str], pl.DataFrame]:
    """Per (protocol, prompt, split): one row per resampling unit with the candidate's and the baseline's mean
    correctness over the multiple-choice rows both answered (matched by instance), and their difference ``d``."""
    answered = frame.filter(pl.col("answered") & (pl.col("mode") != "open")).with_columns(
        pl.col("correct").cast(pl.Float64))
    wide = answered.pivot("model", index=["protocol", "prompt", "split", CLUSTER, "instance_id"],
                          values="correct", aggregate_function="mean")
    if not all(side in wide.columns for side in SIDES):
        return {}
    units = wide.drop_nulls(list(SIDES)).group_by(["protocol", "prompt", "split", CLUSTER]).agg(
        pl.col("candidate").mean(), pl.col("baseline").mean(), pl.len().alias("rows")) \
        .with_columns(d=pl.col("candidate") - pl.col("baseline")).sort(CLUSTER)
    return {key: group for key, group in units.partition_by(["protocol", "prompt", "split"], as_dict=True).items()}


def restricted_q21(b: int, c: int, n: int, delta0: float) -> float:
    """Tango's (1998) restricted maximum-likelihood estimate of ``q21 = P(candidate wrong, baseline right)`` under
    ``q12 - q21 = delta0`` (``q12 = P(candidate right, baseline wrong)``), from ``b`` pairs (1, 0), ``c`` pairs
    (0, 1) among ``n``: the larger root of the likelihood equation ``A q^2 + B q + C = 0``."""
    a_coef = 2.0 * n
    b_coef = -b - c + (2.0 * n - b + c) * delta0
    c_coef = -c * delta0 * (1.0 - delta0)
    return float((np.sqrt(max(b_coef * b_coef - 4.0 * a_coef * c_coef, 0.0)) - b_coef) / (2.0 * a_coef))


def _score_terms(b: int, c: int, n: int, delta0: float) -> tuple[float, float]:
    """(numerator, variance) of Tango's score statistic ``(b - c - n delta0) / sqrt(n (2 q21~ + delta0 (1 -
    delta0)))``: the variance of ``b - c`` under the null, with the nuisance ``q21`` at its restricted estimate."""
    variance = n * (2.0 * restricted_q21(b, c, n, delta0) + delta0 * (1.0 - delta0))
    return b - c - n * delta0, max(variance, 0.0)


def score_test(d: np.ndarray, margin: float, alpha: float) -> tuple[float, float]:
    """(p, one-sided lower confidence bound) of H0 ``difference <= -margin`` for single-question units (``d`` in
    {-1, 0, 1}) by Tango's score test for paired proportions: the variance is taken under the null (restricted
    MLE), not from the sample, so the skew of a few discordant pairs at the margin does not make it liberal as the
    t test is. The bound inverts the test: the ``delta0`` at which the statistic equals ``z_{1 - alpha}``."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    n, b, c = len(d), int(np.sum(d > 0)), int(np.sum(d < 0))
    numerator, variance = _score_terms(b, c, n, -margin)
    p = float(norm.sf(numerator / np.sqrt(variance))) if variance > 0 else (0.0 if numerator > 0 else 1.0)
    z = norm.ppf(1 - alpha)

    def excess(delta0: float) -> float:
        num, var = _score_terms(b, c, n, delta0)
        return num - z * np.sqrt(var)

    low_end, high_end = -1.0 + 1e-12, 1.0 - 1e-12  # the statistic falls as delta0 rises (any alpha in (0, 1))
    if excess(low_end) <= 0:
        return p, -1.0
    if excess(high_end) >= 0:
        return p, 1.0
    return p, float(brentq(excess, low_end, high_end, xtol=1e-12))


def bootstrap_t_test(d: np.ndarray, margin: float, alpha: float, rng: np.random.Generator,
                     resamples: int = BOOTSTRAP_T_RESAMPLES) -> tuple[float, float]:
    """(p, one-sided lower confidence bound) of H0 ``mean(d) <= -margin`` for units holding several questions
    (``d``: per-unit mean differences) by the studentized bootstrap (bootstrap-t): the t statistic's null
    distribution is read from ``(mean* - mean) / se*`` over units resampled with replacement instead of Student's
    t, so a skewed ``d`` gets the skewed tail it has. p counts the resampled statistics at or above the observed
    ``(mean + margin) / se``, the bound is ``mean - q_{1 - alpha}(t*) se``."""
    n = len(d)
    mean, se = float(np.mean(d)), float(np.std(d, ddof=1) / np.sqrt(n))
    stats = []
    for start in range(0, resamples, 500):
        sample = d[rng.integers(0, n, size=(min(500, resamples - start), n))]
        shift = sample.mean(axis=1) - mean
        spread = sample.std(axis=1, ddof=1) / np.sqrt(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            # a resample of identical units has no spread: its statistic is +-inf, or 0 where it did not move
            stats.append(np.where(spread > 0, shift / spread, np.sign(shift) * np.inf))
    t_star = np.concatenate(stats)
    p = (1 + np.sum(t_star >= (mean + margin) / se)) / (resamples + 1)
    return float(p), float(mean - np.quantile(t_star, 1 - alpha) * se)


def non_inferiority(d: np.ndarray, margin: float, alpha: float, single: bool,
                    rng: np.random.Generator) -> tuple[float | None, float | None]:
    """(p, one-sided lower confidence bound of the difference) of H0 ``mean(d) <= -margin``: Tango's score test
    where every unit is one question (``single``), else the bootstrap-t; ``(None, None)`` with fewer than two units.
    Units that all differ by the same amount have no spread: p is 0 above the margin and 1 at or below it."""
    if len(d) < 2:
        return None, None
    if np.all(d == d[0]):
        return (0.0 if d[0] > -margin else 1.0), float(d[0])
    if single:
        return score_test(d, margin, alpha)
    return bootstrap_t_test(d, margin, alpha, rng)


def compare_table(candidate: pl.DataFrame, baseline: pl.DataFrame, margin: float, alpha: float = 0.05,
                  cluster=None, seed: int = 0) -> pl.DataFrame:
    """The gate's table (``COMPARE_COLUMNS``), one row per benchmark and prompt style both sides answered (each
    side's predictions of one model, whatever its name); ``seed`` keys the bootstrap-t's resampling per row."""
    from statsmodels.stats.multitest import multipletests

    sides = [frame.with_columns(model=pl.lit(side)) for side, frame in zip(SIDES, (candidate, baseline), strict=True)]
    frame = with_clusters(prepare(pl.concat(sides, how="diagonal_relaxed")), cluster)
    rows = []
    for (protocol, prompt, split), units in sorted(unit_differences(frame).items()):
        d = units["d"].to_numpy()
        weights = units["rows"].to_numpy()
        rng = keyed_rng(seed, "compare", protocol, prompt, split)
        p, lower = non_inferiority(d, margin, alpha, single=bool(np.all(weights == 1)), rng=rng)
        rows.append({"protocol": protocol, "prompt": prompt, "split": split, "n_clusters": len(units),
                     "candidate": float(np.average(units["candidate"], weights=weights)),
                     "baseline": float(np.average(units["baseline"], weights=weights)),
                     "difference": float(np.mean(d)), "lower_bound": lower, "margin": margin, "p_value": p,
                     "p_adjusted": None, "verdict": "not shown (fewer than 2 units)"})
    tested = [r for r in rows if r["p_value"] is not None]
    if tested:
        adjusted = multipletests([r["p_value"] for r in tested], alpha=alpha, method="holm")[1]
        for row, q in zip(tested, adjusted, strict=True):
            row["p_adjusted"] = float(q)
            row["verdict"] = "non-inferior" if q <= alpha else "not shown"
    schema = {"protocol": pl.Utf8, "prompt": pl.Utf8, "split": pl.Utf8, "n_clusters": pl.Int64} | {
        c: pl.Float64 for c in COMPARE_COLUMNS[4:11]} | {"verdict": pl.Utf8}
    return pl.DataFrame(rows, schema=schema, orient="row")


def compare_command(candidate: str, baseline: str, margin: float, alpha: float = 0.05) -> int:
    """Print the gate's table; 0 when every benchmark is shown non-inferior, 1 otherwise (``InputError``: 2)."""
    if not 0 <= margin < 1:
        raise InputError(f"--margin {margin} is not a difference of accuracies in [0, 1)", field="margin")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha {alpha} is not a probability in (0, 1)", field="alpha")
    sides = [_one_model(read_predictions(prediction_paths(given)), side, given)
             for side, given in zip(SIDES, (candidate, baseline), strict=True)]
    table = compare_table(*sides, margin=margin, alpha=alpha)
    if table.is_empty():
        raise InputError(f"{candidate} and {baseline} share no answered question of any benchmark and prompt style")
    with pl.Config(tbl_rows=200, tbl_cols=20, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   tbl_width_chars=1000, float_precision=4):
        print(table)
    failing = table.filter(pl.col("verdict") != "non-inferior")
    print(f"\nomnieval compare: candidate - baseline > -{margin} (one-sided score test or bootstrap-t per "
          f"benchmark, Holm-adjusted, "
          f"alpha {alpha}): " + ("non-inferior on every benchmark" if failing.is_empty() else
                                 f"not shown on {len(failing)} of {len(table)}"))
    return 0 if failing.is_empty() else 1
