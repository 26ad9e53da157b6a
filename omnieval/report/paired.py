"""Report section "Comparisons": per protocol, compact matrices of paired differences (``omnieval.stats.paired``: rows
are pairs, columns a few headline metrics, each cell the difference with its interval and adjusted p), the full
paired table, and the minimum detectable effect per cell (``omnieval.stats.power``)."""

from __future__ import annotations

import math

import polars as pl

from omnieval.protocols import protocol_attribute
from omnieval.report.blocks import Cell, Note, Section, Table, excludes_zero, fmt, fmt_p, p_text, text_cell
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import FEW_CLUSTERS, FEW_MARK, clusters_of, few_clusters, shade

MATRIX_NOTE = ("Each cell: a minus b of the column's metric on the items both answered (accuracy <condition>: that "
               "condition's accuracy alone, not pooled over conditions as the Significance section's model pairs "
               "are), its 95% clustered bootstrap interval from the metrics' own resamples, and the "
               "Benjamini-Hochberg adjusted p (permutation test for accuracy of one condition, bootstrap otherwise); "
               "bold: the interval excludes 0; *: adjusted p < 0.05. Hover for the raw p, the per-item correlation "
               "of the two sides and the item count.")
COMPARISONS = {"models": "model pairs", "prompts": "prompt styles", "modes": "multiple-choice vs open-ended"}


def _in_clusters(row: dict) -> str:
    """`` in C clusters`` where the resampling unit holds several items, else nothing."""
    n = row.get("n_clusters")
    return f" in {n} clusters" if n is not None and n != row.get("n_items") else ""


def _columns(paired: pl.DataFrame, protocol: str) -> list[tuple[str, str]]:
    """The compact matrix's columns: the protocol's ``paired_matrix`` ((metric, key), or every key of the metric
    where the key is None) among the rows present."""
    present = list(dict.fromkeys(zip(paired["metric"].to_list(), paired["key"].to_list(), strict=True)))
    out = []
    for metric, key in protocol_attribute(protocol, "paired_matrix"):
        out += [(m, k) for m, k in present if m == metric and (key is None or k == key)]
    return out


def _label(metric: str, key: str) -> str:
    if metric == "accuracy_k":
        return f"acc k={key}"
    return f"{metric} {key}".strip()


def _mode_columns(g: pl.DataFrame) -> list[tuple[str, str]]:
    """Multiple-choice vs open-ended: all conditions pooled, then per level k where the protocol has levels, else
    per condition."""
    rows = list(g.select("key", "leaf", "k").unique(maintain_order=True).iter_rows(named=True))
    pooled = [r["key"] for r in rows if not r["leaf"] and not r["k"]]  # no key part: all conditions
    levels = [r["key"] for r in rows if r["k"]]
    rest = levels or [r["key"] for r in rows if r["key"] not in pooled]
    return [("accuracy", k) for k in pooled + rest]


def pair_cell(row: dict | None, vmax: float) -> Cell:
    """The difference, its interval and BH-adjusted p beneath it; bold where the interval excludes 0 (the report's
    one rule, ``blocks.MARKS``), the p marked apart."""
    if row is None or row["estimate"] is None:
        return Cell(text="—")
    est, low, high, padj = row["estimate"], row["ci_low"], row["ci_high"], row["p_adjusted"]
    ci = f"[{fmt(low)}, {fmt(high)}] p={p_text(padj)}" if low is not None and high is not None else \
        f"p={p_text(padj)}"
    few = few_clusters(clusters_of(row))
    if few:
        ci = f"{ci} {FEW_MARK}"
    corr = "—" if row["item_corr"] is None else f"{row['item_corr']:.3f}"
    data = {c: str(row[c]) for c in ("protocol", "comparison", "model", "prompt", "split", "a", "b")}
    data.update({"paired_metric": row["metric"], "paired_key": row["key"], "paired_value": repr(float(est))})
    title = (f"{row['a']} minus {row['b']}, {row['metric']} {row['key']}: {est:+.4f}"
             + (f", 95% CI [{low:.4f}, {high:.4f}]" if low is not None and high is not None else "")
             + f"; {row['p_method']} p = {fmt_p(row['p_value'])}, BH-adjusted p = {fmt_p(padj)}; per-item "
             f"correlation {corr}; {row['n_items']} items" + _in_clusters(row)
             + (f" ({FEW_MARK} fewer than {FEW_CLUSTERS} clusters: the interval is unreliable)" if few else ""))
    return Cell(text=fmt(est), ci=ci, title=title, sort=float(est), shade=shade(est, "div", vmax),
                strong=excludes_zero(low, high), data=data)


def matrices(paired: pl.DataFrame, protocol: str, where=lambda split: f"split {split}") -> list[Table]:
    """Per comparison and split, a matrix of pairs x headline metrics; ``where`` names a split (with its
    benchmark: ``ProtocolInput.where``)."""
    cols = _columns(paired, protocol)
    if not cols:
        return []
    out = []
    for comparison in COMPARISONS:
        part = paired.filter(pl.col("comparison") == comparison)
        if part.is_empty():
            continue
        for (split,), g in sorted(part.partition_by(["split"], as_dict=True).items()):
            index = {}
            idents: list[tuple[str, str, str, str]] = []
            for row in g.iter_rows(named=True):
                ident = (row["a"], row["b"], row["model"], row["prompt"])
                if ident not in idents:
                    idents.append(ident)
                index[(*ident, row["metric"], row["key"])] = row
            values = [abs(r["estimate"]) for r in g.iter_rows(named=True) if r["estimate"] is not None
                      and math.isfinite(r["estimate"])]
            vmax = max([0.05, *values])
            show_model = comparison != "models"
            show_prompt = comparison != "prompts"
            header = ["a − b"] + (["model"] if show_model else []) + (["prompt"] if show_prompt else [])
            mcols = cols if comparison != "modes" else _mode_columns(g)
            # a column no pair of this benchmark has (intra video on an audio benchmark pooled in a sweep) is left out
            mcols = [(m, k) for m, k in mcols if any((*ident, m, k) in index for ident in idents)]
            rows = []
            for a, b, model, prompt in idents:
                cells = [text_cell(f"{a} − {b}", header=True)]
                if show_model:
                    cells.append(text_cell(model))
                if show_prompt:
                    cells.append(text_cell(prompt))
                cells += [pair_cell(index.get((a, b, model, prompt, m, k)), vmax) for m, k in mcols]
                rows.append(cells)
            out.append(Table(
                caption=f"Paired differences: {COMPARISONS[comparison]}, {where(split)}",
                header=header + [_label(m, k) for m, k in mcols], rows=rows, name=f"paired-{comparison}",
                note=None if out else MATRIX_NOTE))
    return out


def long_table(paired: pl.DataFrame, protocol: str) -> Table:
    header = ["comparison", "a − b", "model", "prompt", "split", "metric", "key", "difference [95% CI] p (BH)",
              "p", "method", "item corr.", "items"]
    values = [abs(v) for v in paired["estimate"].drop_nulls().to_list() if math.isfinite(v)]
    vmax = max([0.05, *values])
    rows = []
    for row in paired.iter_rows(named=True):
        rows.append([
            text_cell(row["comparison"]), text_cell(f"{row['a']} − {row['b']}", header=True),
            text_cell(row["model"] or "·"), text_cell(row["prompt"] or "·"), text_cell(row["split"]),
            text_cell(row["metric"]), text_cell(row["key"] or "·"), pair_cell(row, vmax),
            Cell(text=fmt_p(row["p_value"]), sort=row["p_value"]), text_cell(row["p_method"]),
            Cell(text=fmt(row["item_corr"]), sort=row["item_corr"]),
            Cell(text=str(row["n_items"]) + _in_clusters(row), sort=float(row["n_items"])),
        ])
    return Table(caption=f"All paired differences ({protocol})", header=header, rows=rows, name="paired-all",
                 collapsed=True)


def power_table(power: pl.DataFrame, where=lambda split: split) -> Table | None:
    """Rows prompt x split, columns the cells (``all`` first): the MDE at 80% power, items and correlation beneath;
    ``where`` names a split with its benchmark (``ProtocolInput.where``)."""
    if power is None or power.is_empty():
        return None
    keys = list(dict.fromkeys(power["key"].to_list()))
    idents = list(dict.fromkeys(zip(power["prompt"].to_list(), power["split"].to_list(), strict=True)))
    index = {(r["prompt"], r["split"], r["key"]): r for r in power.iter_rows(named=True)}
    rows = []
    for prompt, split in idents:
        cells = [text_cell(prompt, header=True), text_cell(where(split))]
        for key in keys:
            r = index.get((prompt, split, key))
            if r is None or r["mde"] is None:
                cells.append(Cell(text="—"))
                continue
            corr = "—" if r["correlation"] is None else f"{r['correlation']:.2f}"
            few = f" {FEW_MARK}" if few_clusters(clusters_of(r)) else ""
            cells.append(Cell(
                text=fmt(r["mde"]), ci=f"{r['n_items']} items{_in_clusters(r)}, r={corr}{few}", sort=float(r["mde"]),
                data={"power_key": key, "power_prompt": prompt, "power_split": split, "mde": repr(r["mde"])},
                title=(f"{key}: smallest accuracy difference a paired comparison of two models detects with "
                       f"{r['power']:.0%} power at alpha {r['alpha']}: {r['mde']:.4f} ({r['n_items']} items"
                       f"{_in_clusters(r)}, "
                       f"accuracy {fmt(r['accuracy'])}, per-item correlation {corr}, {r['correlation_source']})")))
        rows.append(cells)
    return Table(caption="Minimum detectable difference (80% power, alpha 0.05, paired, clustered by the resampling "
                         "unit)",
                 header=["prompt", "benchmark, split", *keys], rows=rows, name="power",
                 note="The smallest difference in accuracy between two models that this benchmark detects in 80% of "
                      "studies (two-sided, alpha 0.05), from the per-cluster variance of these predictions; beneath, "
                      "the items (and the clusters they fall in, where the unit holds several) and the models' "
                      "median per-cluster correlation. 'omnieval power --effect' gives the items needed for a "
                      "chosen difference.")


def section(inputs: list[ProtocolInput]) -> Section | None:
    subs = []
    for data in inputs:
        blocks: list = []
        if data.paired is not None and not data.paired.is_empty():
            blocks += matrices(data.paired, data.protocol, data.where)
            blocks.append(long_table(data.paired, data.protocol))
        table = power_table(data.power, data.where)
        if table is not None:
            blocks.append(table)
        if not blocks:
            continue
        if data.paired is not None and any(few_clusters(clusters_of(r)) for r in data.paired.iter_rows(named=True)):
            blocks.insert(0, Note(f"{FEW_MARK}: fewer than {FEW_CLUSTERS} clusters behind the interval; with so few "
                                  "clusters the bootstrap interval is too narrow: read it as unreliable."))
        subs.append(Section(f"paired-{data.protocol}", f"Comparisons: {data.protocol}", blocks=blocks))
    if not subs:
        return None
    return Section("paired", "Comparisons: paired differences and detectable effects", subsections=subs,
                   intro="How large each difference is, with its interval, on the items both sides answered; and "
                         "the smallest difference this benchmark could have detected.")
