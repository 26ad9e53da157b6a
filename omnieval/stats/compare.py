"""``omnieval compare CANDIDATE BASELINE --margin 0.02``: a gate for CI pipelines that evaluate every checkpoint
(docs/reference.md, Non-inferiority gate).

Per benchmark (protocol x split) and prompt style, on the questions both sides answered, a one-sided
non-inferiority test of the paired difference ``delta = candidate - baseline`` of accuracy over every
multiple-choice condition: H0 ``delta <= -margin`` against H1 ``delta > -margin``. The test is scipy's one-sample t
test (``alternative="greater"``) of the per-unit differences against ``-margin``; a unit is the resampling unit of
the statistics (``stats.clusters``: the question, or the anchor or clip that holds several), whose rows are averaged
first, as in the paired sign-flip tests. Answers without a choice (unparseable) count as wrong here, unlike in the
metrics' accuracy: a checkpoint that stops answering in the expected format must not pass the gate by leaving those
answers out; errored rows (never answered) are left out on both sides, as everywhere.

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

from omnieval.core.metric_types import CLUSTER
from omnieval.core.schema import InputError
from omnieval.stats.clusters import with_clusters
from omnieval.stats.read import prepare, read_predictions

COMPARE_COLUMNS = ("protocol", "prompt", "split", "n_clusters", "candidate", "baseline", "difference", "lower_bound",
                   "margin", "p_value", "p_adjusted", "verdict")
SIDES = ("candidate", "baseline")
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


def non_inferiority(d: np.ndarray, margin: float, alpha: float) -> tuple[float | None, float | None]:
    """(p, one-sided lower confidence bound of the mean difference) of H0 ``mean(d) <= -margin`` by scipy's
    one-sample t test; ``(None, None)`` with fewer than two units. Units that all differ by the same amount have no
    spread: p is 0 above the margin and 1 at or below it."""
    from scipy.stats import t as student
    from scipy.stats import ttest_1samp

    if len(d) < 2:
        return None, None
    if np.all(d == d[0]):
        return (0.0 if d[0] > -margin else 1.0), float(d[0])
    p = float(ttest_1samp(d, -margin, alternative="greater").pvalue)
    se = float(np.std(d, ddof=1) / np.sqrt(len(d)))
    return p, float(np.mean(d) - student.ppf(1 - alpha, len(d) - 1) * se)


def compare_table(candidate: pl.DataFrame, baseline: pl.DataFrame, margin: float, alpha: float = 0.05,
                  cluster=None) -> pl.DataFrame:
    """The gate's table (``COMPARE_COLUMNS``), one row per benchmark and prompt style both sides answered (each
    side's predictions of one model, whatever its name)."""
    from statsmodels.stats.multitest import multipletests

    sides = [frame.with_columns(model=pl.lit(side)) for side, frame in zip(SIDES, (candidate, baseline), strict=True)]
    frame = with_clusters(prepare(pl.concat(sides, how="diagonal_relaxed")), cluster)
    rows = []
    for (protocol, prompt, split), units in sorted(unit_differences(frame).items()):
        d = units["d"].to_numpy()
        p, lower = non_inferiority(d, margin, alpha)
        weights = units["rows"].to_numpy()
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
    print(f"\nomnieval compare: candidate - baseline > -{margin} (one-sided t test per benchmark, Holm-adjusted, "
          f"alpha {alpha}): " + ("non-inferior on every benchmark" if failing.is_empty() else
                                 f"not shown on {len(failing)} of {len(table)}"))
    return 0 if failing.is_empty() else 1
