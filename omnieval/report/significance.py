"""Report section of the significance tests (``omnieval stats``): per protocol the tests table with
Benjamini-Hochberg adjusted p-values, and a model-pair matrix of the paired permutation tests between models
(or between runs, when several runs of a protocol are compared)."""

from __future__ import annotations

import math

import polars as pl

from omnieval.core.schema import DEFAULT_MODE, OPEN_MODE
from omnieval.report.blocks import Cell, Section, Table, excludes_zero, fmt, fmt_p, p_text, text_cell
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import shade

TEST_NAMES = {
    "wilcoxon": "Wilcoxon signed-rank over anchors (accuracy drops of two modalities)",
    "friedman": "Friedman across models, anchors as blocks",
    "mcnemar": "McNemar (exact) between two models at C000",
    "permutation": "paired sign-flip permutation test between prompt styles",
    "permutation_models": "paired sign-flip permutation test between models",
    "mcq_vs_open": "paired sign-flip permutation test: multiple-choice vs open-ended correctness",
    "mcnemar_judges": "McNemar (exact) between two judges grading the same open answers",
}


def _num_cell(row: dict, column: str, text: str, *, strong: bool = False, scale: str | None = None,
              vmax: float = 1.0, value: float | None = None) -> Cell:
    value = row[column] if value is None else value
    data = {c: str(row[c]) for c in ("protocol", "model", "prompt", "split", "test", "comparison")}
    data["field"] = column
    data["value"] = "" if value is None else repr(float(value))
    sort = float(value) if value is not None and math.isfinite(value) else None
    return Cell(text=text, sort=sort, strong=strong, data=data, shade=shade(value, scale, vmax),
                title=f"{row['test']} {row['comparison']} — {row['model']}: {column} = {text}")


def _intervals(tests: pl.DataFrame, paired: pl.DataFrame | None) -> dict[tuple, tuple[float, float]]:
    """The paired-difference interval of each test that has one (``omnieval.stats.paired``): a model pair in one
    condition, and multiple-choice vs open-ended (judge-averaged, or the only judge)."""
    if paired is None or paired.is_empty():
        return {}
    # a paired row by its comparison, sides, unit and key parts: a condition's accuracy (``leaf``), or the
    # multiple-choice minus open-ended gap over all rows (no part set)
    rows = {(r["comparison"], r["a"], r["b"], r["model"], r["prompt"], r["split"], r["leaf"], r["k"], r["judge"]): r
            for r in paired.filter(pl.col("metric") == "accuracy").iter_rows(named=True)}
    judged = tests.filter(pl.col("test") == "mcq_vs_open").group_by("model", "prompt", "split").len()
    single = {(r["model"], r["prompt"], r["split"]) for r in judged.iter_rows(named=True) if r["len"] == 1}
    out = {}
    for t in tests.iter_rows(named=True):
        ident = (t["test"], t["comparison"], t["model"], t["prompt"], t["split"])
        if t["test"] == "permutation_models" and t["comparison"] != "all":
            hit = rows.get(("models", t["model_a"], t["model_b"], "", t["prompt"], t["split"], t["comparison"], "",
                            ""))
        elif t["test"] == "mcq_vs_open" and (t["comparison"] == "mcq_vs_open"
                                             or (t["model"], t["prompt"], t["split"]) in single):
            hit = rows.get(("modes", DEFAULT_MODE, OPEN_MODE, t["model"], t["prompt"], t["split"], "", "", ""))
        else:
            hit = None
        if hit is not None and hit["ci_low"] is not None and hit["ci_high"] is not None:
            out[ident] = (hit["ci_low"], hit["ci_high"])
    return out


def model_cell(row: dict) -> Cell:
    """The ``model`` cell of a test row; a test between two models keeps them apart in its data (``model_a`` /
    ``model_b``), what the cascade marks read (``open_ended.mark_cascades``) rather than its text."""
    cell = text_cell(str(row["model"]))
    if row.get("model_b"):
        cell.data = {"model_a": row["model_a"], "model_b": row["model_b"]}
    return cell


def tests_table(tests: pl.DataFrame, protocol: str, paired: pl.DataFrame | None = None) -> Table:
    """Every test, with the paired difference's interval where the test compares one accuracy. The estimate is
    bold where that interval excludes 0 (the report's one rule, ``blocks.MARKS``); the adjusted p is marked apart."""
    header = ["test", "comparison", "model", "prompt", "split", "statistic", "estimate", "95% CI", "p", "p (BH)",
              "n"]
    intervals = _intervals(tests, paired)
    rows = []
    for row in tests.iter_rows(named=True):
        ci = intervals.get((row["test"], row["comparison"], row["model"], row["prompt"], row["split"]))
        rows.append([
            text_cell(row["test"], header=True, title=TEST_NAMES.get(row["test"], row["test"])),
            text_cell(str(row["comparison"])), model_cell(row), text_cell(str(row["prompt"])),
            text_cell(str(row["split"])),
            _num_cell(row, "statistic", fmt(row["statistic"])),
            _num_cell(row, "estimate", fmt(row["estimate"]), strong=bool(ci) and excludes_zero(*ci)),
            Cell(text=f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "—", sort=ci[0] if ci else None,
                 title="95% clustered bootstrap interval of the paired difference (stats.paired)" if ci else None),
            _num_cell(row, "p_value", fmt_p(row["p_value"])),
            _num_cell(row, "p_adjusted", p_text(row["p_adjusted"])),
            Cell(text=str(row["n"]), sort=float(row["n"])),
        ])
    return Table(caption=f"Significance tests ({protocol}); 95% CI: the paired difference's interval where the test "
                         "compares one accuracy; p (BH): Benjamini-Hochberg adjusted within each test "
                         "family; bold: the interval excludes 0; *: adjusted p < 0.05", header=header, rows=rows,
                 name="tests",
                 collapsed=len(rows) > 40)


def pair_matrices(tests: pl.DataFrame, where=lambda split: f"split {split}") -> list[Table]:
    """Per prompt x split (``where`` names it with its benchmark), the models' paired differences pooled over all
    conditions: cell (a, b) = accuracy of a minus b over every instance, with the adjusted p beneath it. Not the
    Comparisons section's per-condition accuracy: the caption says so, as the two differ. No interval exists for
    the pooled difference, so no cell is bold (the report's one rule); the p carries its own mark."""
    models_tests = tests.filter(pl.col("test") == "permutation_models")
    pairs = models_tests.filter(pl.col("comparison") == "all")
    out = []
    for (prompt, split), g in sorted(pairs.partition_by(["prompt", "split"], as_dict=True).items()):
        models: list[str] = []
        entries: dict[tuple[str, str], dict] = {}
        for row in g.iter_rows(named=True):
            a, b = row["model_a"], row["model_b"]
            for m in (a, b):
                if m not in models:
                    models.append(m)
            entries[(a, b)] = row
        vmax = max([0.25, *(abs(r["estimate"]) for r in entries.values() if r["estimate"] is not None)])
        rows = []
        for a in models:
            cells = [text_cell(a, header=True)]
            for b in models:
                if a == b:
                    cells.append(Cell(text="·"))
                    continue
                row, sign = (entries[(a, b)], 1.0) if (a, b) in entries else (entries.get((b, a)), -1.0)
                if row is None or row["estimate"] is None:
                    cells.append(Cell(text="—"))
                    continue
                est = sign * row["estimate"]
                padj = row["p_adjusted"]
                cell = _num_cell(row, "estimate", fmt(est), scale="div", vmax=vmax, value=est)
                cell.data["orientation"] = f"{a} - {b}"
                cell.ci = f"p={p_text(padj)}"
                cell.title = (f"{a} minus {b}: {est:+.4f} mean per-item accuracy difference over all conditions, "
                              f"paired sign-flip permutation test p = {fmt_p(row['p_value'])}, BH-adjusted "
                              f"p = {fmt_p(padj)}, n = {row['n']} items")
                cells.append(cell)
            rows.append(cells)
        conditions = sorted(set(models_tests.filter((pl.col("prompt") == prompt) & (pl.col("split") == split)
                                                    & (pl.col("comparison") != "all"))["comparison"].to_list()))
        pooled = f"all {len(conditions)} conditions" if conditions else "all conditions"
        out.append(Table(caption=f"Model pairs, prompt {prompt}, {where(split)}: accuracy pooled over {pooled}",
                         header=["model", *models], rows=rows, name="pairs",
                         note=f"Row minus column: mean per-item accuracy difference pooled over {pooled} "
                              f"({', '.join(conditions)}), not one condition's accuracy as in Comparisons, with the "
                              "BH-adjusted p of the paired sign-flip permutation test beneath (*: below 0.05); no "
                              "interval, so nothing is bold."))
    return out


def section(inputs: list[ProtocolInput]) -> Section | None:
    subs = []
    for data in inputs:
        if data.tests is None or data.tests.is_empty():
            continue
        tests = data.tests.sort(["test", "model", "prompt", "split", "comparison"], maintain_order=True)
        blocks: list = []
        if len(data.runs) > 1:
            from omnieval.report.blocks import Note

            blocks.append(Note(f"Runs compared: {', '.join(data.runs)}. Models are named run:model; the paired tests "
                               "match instances across runs by item and condition."))
        blocks.extend(pair_matrices(tests, data.where))
        blocks.append(tests_table(tests, data.protocol, data.paired))
        subs.append(Section(f"significance-{data.protocol}", f"Significance: {data.protocol}", blocks=blocks))
    if not subs:
        return None
    return Section("significance", "Significance tests", subsections=subs,
                   intro="Paired tests on matched instances; p-values adjusted with Benjamini-Hochberg within each "
                         "test family (test x protocol x prompt x split).")
