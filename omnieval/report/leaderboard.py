"""Report section "Leaderboard": with three or more models on the same questions (a sweep, or one run of several
models), one table per benchmark and prompt style: each model's accuracy with its interval, its rank with the
simultaneous rank interval and its significance group (``omnieval.stats.ranks``), best first.

A benchmark has one accuracy row per condition; the leaderboard ranks on the headline one (``headline_key``): the
accuracy column of the protocol's compact paired matrix (``ProtocolSpec.paired_matrix``: spectrum's ``normal``,
contrastive's ``all``), else the unaltered condition of its tests (dissonance's ``C000``), else each condition in
turn."""

from __future__ import annotations

import polars as pl

from omnieval.protocols import metric_spec, protocol_attribute
from omnieval.report.blocks import Cell, Section, Table, fmt, text_cell
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import shade

NOTE = ("Rank: 1 + the models with a higher accuracy. Rank interval: where each model's rank lies, all models at once "
        "with 95% confidence (simultaneous intervals for every pairwise difference from the max-|t| bootstrap over "
        "the resampling unit, the same resamples for every model; Mogstad, Romano, Shaikh and Wilhelm 2024). Group: "
        "models sharing a letter do not differ pairwise after the Benjamini-Hochberg adjustment of the paired "
        "permutation tests; a model in no shared letter differs from every other. docs/reference.md, Ranks and "
        "significance groups.")


def headline_key(protocol: str, keys: list[str]) -> list[str]:
    """The accuracy keys to rank a benchmark on, of those present (module docstring)."""
    for metric, key in protocol_attribute(protocol, "paired_matrix"):
        if metric == "accuracy" and key in keys:
            return [key]
    spec = metric_spec(protocol)
    if spec is not None and spec.tests is not None and spec.tests.baseline in keys:
        return [spec.tests.baseline]
    return keys


def _row(r: dict) -> list[Cell]:
    span = f"{r['rank_low']}–{r['rank_high']}"
    interval = f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]" if r["ci_low"] is not None else None
    return [
        Cell(text=str(r["rank"]), sort=float(r["rank"])),
        text_cell(r["model"], header=True),
        Cell(text=fmt(r["value"]), ci=interval, sort=r["value"], shade=shade(r["value"], "seq", 1.0),
             title=f"{r['model']}: accuracy {r['key']} {r['value']:.4f}" + (f", 95% CI {interval}" if interval else "")
             + f"; {r['n_clusters']} clusters"),
        Cell(text=span, sort=float(r["rank_low"]),
             title=f"simultaneous 95% interval of {r['model']}'s rank among {r['n_models']} models"),
        text_cell(r["group"], title="models sharing a letter: no pair of them differs (BH-adjusted)"),
    ]


def tables(data: ProtocolInput) -> list[Table]:
    """One leaderboard per split, prompt style and ranked key of a protocol's ranks."""
    ranks = data.ranks
    out = []
    for (split, prompt), g in sorted(ranks.partition_by(["split", "prompt"], as_dict=True).items()):
        for key in headline_key(data.protocol, sorted(g["key"].unique().to_list())):
            rows = g.filter(pl.col("key") == key).sort("rank", "model")
            out.append(Table(
                caption=f"Leaderboard: {data.where(split)}, prompt {prompt}, accuracy {key} "
                        f"({rows['n_models'][0]} models)",
                header=["rank", "model", "accuracy [95% CI]", "rank interval (95%, simultaneous)", "group"],
                rows=[_row(r) for r in rows.iter_rows(named=True)], name="leaderboard",
                note=None if out else NOTE))
    return out


def section(inputs: list[ProtocolInput]) -> Section | None:
    subs = [Section(f"leaderboard-{d.protocol}", f"Leaderboard: {d.protocol}", blocks=tables(d))
            for d in inputs if d.ranks is not None and not d.ranks.is_empty()]
    if not subs:
        return None
    return Section("leaderboard", "Leaderboard: ranks and significance groups", subsections=subs,
                   intro="Which of the models really differ: each model's rank with an interval that holds for all "
                         "models at once, and the groups of models no pair of which differs.")
