"""The few numbers of each protocol a person reads first, as terminal tables (``omnieval metrics`` and the demo).

Each protocol's headline is a function of the long metrics table: a pivot of ``value [95% CI]`` by model. The
full table is in ``metrics.csv``; these are what to look at first. Tables are printed wide enough never to wrap a
header mid-word.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

CONDITION_NOTE = ("C<video><audio><text>: 1 = that modality shows another anchor (corrupted), 0 = clean; "
                  "k = number of corrupted modalities")


def _with_ci() -> pl.Expr:
    return pl.format("{} [{}, {}]", pl.col("value").round(2), pl.col("ci_low").round(2), pl.col("ci_high").round(2))


def _by_model(rows: pl.DataFrame, index: str | list[str] = "metric") -> pl.DataFrame:
    return rows.with_columns(_with_ci().alias("ci")).pivot(on="model", index=index, values="ci")


def _label(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.concat_str("metric", pl.lit(" "), "key").str.strip_chars().alias("metric"))


def dissonance(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    shapley = (table.filter(pl.col("metric") == "shapley").with_columns(_with_ci().alias("ci"))
               .pivot(on="key", index=["model", "split"], values="ci").sort(["model", "split"]))
    levels = _by_model(_label(table.filter(pl.col("metric").is_in(["accuracy_k", "abstention_k", "ace"]))),
                       ["metric", "split"]).sort(["split", "metric"])
    return [("Shapley modality attribution of accuracy", shapley),
            (f"Accuracy and abstention by corruption level k, ACE ({CONDITION_NOTE})", levels)]


def crossmodal(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    rows = table.filter(pl.col("metric").is_in(["average", "disparity", "imbalance", "consistency"])
                        & ~pl.col("key").str.contains("/"))
    return [("Modality disparity, direction imbalance and consistency, with the average accuracy",
             _by_model(_label(rows), ["metric", "split"]).sort(["split", "metric"]))]


def spectrum(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    overall = table.filter(~pl.col("key").str.contains("/"))
    acc = (overall.filter((pl.col("metric") == "accuracy") | ((pl.col("metric") == "chance") & (pl.col("key") == "")))
           .with_columns(pl.when(pl.col("metric") == "chance").then(pl.lit("chance")).otherwise("key").alias("metric")))
    labels = overall.filter(pl.col("metric") == "dependency").select("model", "split", "key").unique()
    note = "; ".join(f"{m} ({s}) {d}" for m, s, d in labels.sort("model", "split").iter_rows())
    return [(f"Accuracy per shuffling condition against chance; dependency: {note}",
             _by_model(acc, ["metric", "split"]).sort(["split", "metric"]))]


def contrastive(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    keep = (((pl.col("metric") == "accuracy") & (pl.col("key").str.starts_with("n=") | (pl.col("key") == "all")))
            | (pl.col("metric") == "permutation_consistency")
            | ((pl.col("metric") == "position_bias") & (pl.col("key") == "A")))
    return [("Accuracy by number of inputs, permutation consistency, position bias of A",
             _by_model(_label(table.filter(keep)), ["metric", "split"]).sort(["split", "metric"]))]


def open_ended(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    rows = table.filter(pl.col("metric").is_in(["open_accuracy", "mcq_open_gap", "judge_kappa"])
                        & (pl.col("key").str.starts_with("all") | (pl.col("metric") == "judge_kappa")))
    if rows.is_empty():
        return []
    return [("Open-ended answers graded by the judges: accuracy (mean and per judge), multiple-choice minus open, "
             "judge kappa",
             _by_model(_label(rows), ["metric", "split"]).sort(["split", "metric"]))]


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
