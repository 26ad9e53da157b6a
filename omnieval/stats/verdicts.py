"""Answer verdicts at a glance: per accuracy cell of answers read from generated text, both accuracies, the
disagreement count, the unparsed and forced shares, and the flags (``metric_types.VERDICT_METRICS``). What
``omnieval metrics`` prints after its headline tables, and what the report's and the sweep summary's verdict columns
read."""

from __future__ import annotations

import polars as pl

from omnieval.core.metric_types import UNPARSED_FLAG, VERDICT_METRICS
from omnieval.stats.key_parts import key_columns

NO_SCORER = "no official scorer"
NOT_COMPUTED_TEXT = "official rule not computed"
"""Shown where the run names an official scorer whose rule cannot be computed here (``scoring.base.NOT_COMPUTED``)."""
UNPARSED_TEXT = f"unparsed > {UNPARSED_FLAG:.0%}"
CREDITS_TEXT = "official rule credits unparseable answers"
DROPPED_TEXT = "every answer dropped by the official rule"
CELL = ("protocol", "model", "prompt", "split", "key")


def cell_flags(unparsed_share: float | None, official_forced_share: float | None, has_official: bool,
               not_computed: str | None = None) -> list[str]:
    """The flags of one accuracy cell: more than ``UNPARSED_FLAG`` of its answers unparsed; an official rule that
    gives answers naming no option an option (so may count them correct); no official scorer, or (``not_computed``:
    the reason) an official rule that cannot be computed here."""
    flags = []
    if unparsed_share is not None and unparsed_share > UNPARSED_FLAG:
        flags.append(UNPARSED_TEXT)
    if official_forced_share is not None and official_forced_share > 0:
        flags.append(CREDITS_TEXT)
    if not has_official:
        flags.append(f"{NOT_COMPUTED_TEXT} ({not_computed})" if not_computed else NO_SCORER)
    return flags


def official_text(official_accuracy: float | None, read: bool, number, not_computed: str | None = None) -> str:
    """The official accuracy as shown: ``number(value)``; where there is none, ``NO_SCORER``, ``DROPPED_TEXT``
    where the official rule ``read`` the answers but counted none, or ``NOT_COMPUTED_TEXT`` where the run's official
    rule cannot be computed here (``not_computed``: why)."""
    if official_accuracy is not None:
        return number(official_accuracy)
    if not_computed:
        return NOT_COMPUTED_TEXT
    return DROPPED_TEXT if read else NO_SCORER


def verdict_table(metrics: pl.DataFrame) -> pl.DataFrame:
    """One row per accuracy cell that has verdict metrics: ``accuracy``, ``official_accuracy`` (null: no official
    scorer), ``disagree``, ``n`` (the accuracy cell's answers), the three shares and ``flags`` (``cell_flags``)."""
    wanted = ["accuracy", *VERDICT_METRICS]
    rows = metrics.filter(pl.col("metric").is_in(wanted))
    if rows.is_empty() or not rows["metric"].is_in(list(VERDICT_METRICS)).any():
        return pl.DataFrame()
    cell = [*CELL, *(c for c in key_columns() if c in rows.columns)]  # the key's parts ride along
    wide = rows.pivot(on="metric", index=cell, values="value", aggregate_function="first")
    for metric in wanted:
        if metric not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(metric))
    wide = wide.filter(pl.any_horizontal(pl.col(list(VERDICT_METRICS)).is_not_null()))
    # the official rule read the cell's answers where ``disagree`` exists (its accuracy may still be missing: a rule
    # that drops every answer of the cell counts none), or where its accuracy does (a file with no robust columns)
    flags = [cell_flags(u, f, d is not None or o is not None) for u, f, d, o in
             wide.select("unparsed_share", "official_forced_share", "disagree", "official_accuracy").iter_rows()]
    return wide.select(*cell, *wanted).with_columns(flags=pl.Series(["; ".join(f) for f in flags], dtype=pl.Utf8))


def not_computed_reasons(frames) -> dict[tuple[str, str], str]:
    """(prompt, split) -> why the official rule was not computed on those answers, from prediction frames whose rows
    say so (``official_how`` beginning ``scoring.base.NOT_COMPUTED``): a run names one scorer for all its models."""
    from omnieval.scoring.base import NOT_COMPUTED

    found: dict[tuple[str, str], str] = {}
    for frame in frames:
        if not {"official_how", "prompt", "split"} <= set(frame.columns):
            continue
        rows = frame.select("prompt", "split", pl.col("official_how").cast(pl.Utf8)).filter(
            pl.col("official_how").str.starts_with(NOT_COMPUTED)).unique(subset=["prompt", "split"])
        for prompt, split, how in rows.iter_rows():
            found.setdefault((str(prompt), str(split)), how.removeprefix(NOT_COMPUTED))
    return found


def render_verdicts(metrics: pl.DataFrame, not_computed: dict[tuple[str, str], str] | None = None) -> str:
    """``verdict_table`` as plain text lines ('' when no answer was read from generated text); ``not_computed``
    (``not_computed_reasons``): the cells whose official rule was not computed, and why."""
    table = verdict_table(metrics)
    if table.is_empty():
        return ""
    not_computed = not_computed or {}

    def pct(value) -> str:
        return "—" if value is None else f"{value:.3f}"

    lines = ["Answer verdicts (answers read from generated text; docs/reference.md, Answer verdicts):",
             "model | prompt | split | cell | accuracy | official | disagree | unparsed | forced | official forced | "
             "flags"]
    for r in table.iter_rows(named=True):
        read = r["disagree"] is not None or r["official_accuracy"] is not None
        reason = None if read else not_computed.get((r["prompt"], r["split"]))
        official = official_text(r["official_accuracy"], r["disagree"] is not None, pct, reason)
        if reason is not None:
            r["flags"] = "; ".join(f for f in [*r["flags"].split("; "), f"{NOT_COMPUTED_TEXT} ({reason})"]
                                   if f and f != NO_SCORER)
        disagree = "—" if r["disagree"] is None else str(round(r["disagree"]))
        lines.append(" | ".join([r["model"], r["prompt"], r["split"], r["key"] or "all", pct(r["accuracy"]),
                                 official, disagree, pct(r["unparsed_share"]), pct(r["forced_share"]),
                                 pct(r["official_forced_share"]), r["flags"] or "-"]))
    return "\n".join(lines)
