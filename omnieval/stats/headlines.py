"""The few numbers of each protocol a person reads first, as terminal tables (``omnieval metrics`` and the demo).

Each protocol's headline is a function of the long metrics table: a pivot of ``value [95% CI]`` by model, one row
per prompt style (a run with ``prompts: [zs, cot]`` has both of every model). The full table is in ``metrics.csv``;
these are what to look at first. Tables are printed wide enough never to wrap a header mid-word.

Every pivot goes through ``_wide``, which refuses a table where two metric rows would land in one cell: a cell
is one number, never a silent pick or mean of several.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

CONDITION_NOTE = ("C<video><audio><text>: 1 = that modality shows another anchor (corrupted), 0 = clean; "
                  "k = number of corrupted modalities")


def _with_ci() -> pl.Expr:
    return pl.format("{} [{}, {}]", pl.col("value").round(2), pl.col("ci_low").round(2), pl.col("ci_high").round(2))


def _wide(rows: pl.DataFrame, on: str, index: list[str]) -> pl.DataFrame:
    """``value [CI]`` of ``rows`` with one column per value of ``on`` and one row per ``index``. The metrics table
    has one row per (model, prompt, split, metric, key), so ``on`` and ``index`` must name (or, for ``key``, fold into
    the metric label) each of them; a pair of rows sharing a cell would be a wrong headline, so it stops here with
    the cell named."""
    cells = rows.select(*index, on)
    if cells.is_duplicated().any():
        first = cells.filter(cells.is_duplicated()).row(0, named=True)
        raise ValueError(f"headline table: two metric rows for one cell {first}; the metrics table has duplicate "
                         "rows or the headline's index misses a column that tells them apart")
    return rows.with_columns(_with_ci().alias("ci")).pivot(on=on, index=index, values="ci")


def _by_model(rows: pl.DataFrame) -> pl.DataFrame:
    """One column per model, a row per labelled metric x split x prompt style."""
    return _wide(rows, "model", ["metric", "split", "prompt"]).sort(["split", "metric", "prompt"])


def _label(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.concat_str("metric", pl.lit(" "), "key").str.strip_chars().alias("metric"))


def dissonance(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    shapley = _wide(table.filter(pl.col("metric") == "shapley"), "key", ["model", "prompt", "split"]).sort(
        ["model", "prompt", "split"])
    levels = _by_model(_label(table.filter(pl.col("metric").is_in(["accuracy_k", "abstention_k", "ace"]))))
    return [("Shapley modality attribution of accuracy", shapley),
            (f"Accuracy and abstention by corruption level k, ACE ({CONDITION_NOTE})", levels)]


def crossmodal(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    rows = table.filter(pl.col("metric").is_in(["average", "disparity", "imbalance", "consistency"])
                        & ~pl.col("key").str.contains("/"))
    return [("Modality disparity, direction imbalance and consistency, with the average accuracy",
             _by_model(_label(rows)))]


def spectrum(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    overall = table.filter(~pl.col("key").str.contains("/"))
    acc = (overall.filter((pl.col("metric") == "accuracy") | ((pl.col("metric") == "chance") & (pl.col("key") == "")))
           .with_columns(pl.when(pl.col("metric") == "chance").then(pl.lit("chance")).otherwise("key").alias("metric")))
    labels = overall.filter(pl.col("metric") == "dependency").select("model", "prompt", "split", "key").unique()
    note = "; ".join(f"{m} {p} ({s}) {d}" for m, p, s, d in labels.sort("model", "prompt", "split").iter_rows())
    return [(f"Accuracy per shuffling condition against chance; dependency: {note}", _by_model(acc))]


def contrastive(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    keep = (((pl.col("metric") == "accuracy") & (pl.col("key").str.starts_with("n=") | (pl.col("key") == "all")))
            | (pl.col("metric") == "permutation_consistency")
            | ((pl.col("metric") == "position_bias") & (pl.col("key") == "A")))
    return [("Accuracy by number of inputs, permutation consistency, position bias of A",
             _by_model(_label(table.filter(keep))))]


def open_ended(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    rows = table.filter(pl.col("metric").is_in(["open_accuracy", "mcq_open_gap", "judge_kappa"])
                        & (pl.col("key").str.starts_with("all") | (pl.col("metric") == "judge_kappa")))
    if rows.is_empty():
        return []
    return [("Open-ended answers graded by the judges: accuracy (mean and per judge), multiple-choice minus open, "
             "judge kappa",
             _by_model(_label(rows)))]


HEADLINES: dict[str, Callable[[pl.DataFrame], list[tuple[str, pl.DataFrame]]]] = {
    "dissonance": dissonance, "crossmodal": crossmodal, "spectrum": spectrum, "contrastive": contrastive}


def headline_tables(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """(title, table) per protocol present in a metrics table, open-ended answers last."""
    out = []
    for protocol in sorted(table["protocol"].unique().to_list()):
        part = table.filter(pl.col("protocol") == protocol)
        for title, frame in [*HEADLINES.get(protocol, lambda _: [])(part), *open_ended(part)]:
            if not frame.is_empty():
                out.append((f"{protocol}: {title} (value [95% bootstrap CI])", frame))
    return out


def render(tables: list[tuple[str, pl.DataFrame]]) -> str:
    chunks = []
    with pl.Config(tbl_rows=80, tbl_cols=16, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   fmt_str_lengths=60, tbl_width_chars=1000):
        for title, frame in tables:
            chunks.append(f"{title}:\n{frame}")
    return "\n\n".join(chunks)
