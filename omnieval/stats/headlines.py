"""The few numbers of each protocol a person reads first, as terminal tables (``omnieval metrics`` and the demo).

Each protocol's headlines are the ``HeadlineTable``s of its metric spec (``omnieval.core.protocol_views``), each
a selection of its rows of the long metrics table pivoted to ``value [95% CI]`` by model (or by key), one row per
prompt style (a run with ``prompts: [zs, cot]`` has both of every model). The full table is in ``metrics.csv``;
these are what to look at first. Tables are printed wide enough never to wrap a header mid-word.

Every pivot goes through ``_wide``, which refuses a table where two metric rows would land in one cell: a cell
is one number, never a silent pick or mean of several.
"""

from __future__ import annotations

import polars as pl

from omnieval.protocols import metric_spec


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


def open_ended(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    rows = table.filter(pl.col("metric").is_in(["open_accuracy", "mcq_open_gap", "judge_kappa"])
                        & (((pl.col("leaf") == "") & (pl.col("k") == "")) | (pl.col("metric") == "judge_kappa")))
    if rows.is_empty():
        return []
    return [("Open-ended answers graded by the judges: accuracy (mean and per judge), multiple-choice minus open, "
             "judge kappa",
             _by_model(_label(rows)))]


def protocol_tables(protocol: str, table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """The headline tables the protocol's metric spec names (``ProtocolMetrics.headlines``; none for a protocol
    without a spec), from its rows of the metrics table."""
    spec = metric_spec(protocol)
    out = []
    for headline in spec.headlines if spec is not None else ():
        rows = headline.rows(table)
        if headline.columns == "key":
            frame = _wide(rows, "key", ["model", "prompt", "split"]).sort(["model", "prompt", "split"])
        else:
            frame = _by_model(_label(rows))
        out.append((headline.title_of(table), frame))
    return out


def headline_tables(table: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """(title, table) per protocol present in a metrics table, open-ended answers last."""
    out = []
    for protocol in sorted(table["protocol"].unique().to_list()):
        part = table.filter(pl.col("protocol") == protocol)
        for title, frame in [*protocol_tables(protocol, part), *open_ended(part)]:
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
