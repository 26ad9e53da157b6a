"""Report subsection of open-ended runs (``stats.open_metrics``), under each protocol's section, and the marks on
cascade models.

Open-ended answers are graded by judges, so every accuracy comes twice: averaged over the judges, and per judge (with
the share of verdicts that stayed unparseable). Next to them: the multiple-choice minus open-ended gap, judge
agreement and Cohen's / Fleiss' kappa; plot: open-ended accuracy and the gap per level k (or per condition) with
95% intervals. Models whose answers came through a cascade (a describer turned some media into text first) are
marked with a dagger wherever the protocol's tables name them, as the papers set those rows apart.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from omnieval.report import plots
from omnieval.report.blocks import Figure, Note, Section, Table
from omnieval.report.inputs import ProtocolInput
from omnieval.report.summary import RowSummary
from omnieval.report.tables import Col, MetricView, error_cols, plot_series
from omnieval.stats.significance import pair_label

OPEN_METRICS = ("open_accuracy", "open_abstention", "judge_agreement", "judge_kappa", "mcq_open_gap",
                "open_invalid_verdicts", "open_error_rate", "open_official_accuracy", "open_rating",
                "ifeval_prompt_strict", "ifeval_instruction_strict", "ifeval_prompt_loose", "ifeval_instruction_loose")
PER_JUDGE = ("open_accuracy", "open_abstention", "open_rating")
CASCADE_MARK = " †"
BY_JUDGE = ("run", "model", "prompt", "split", "scope")


def split_metrics(data: ProtocolInput) -> tuple[ProtocolInput, ProtocolInput]:
    """(the protocol's own metrics, the open-ended ones): each part goes to its own section builder."""
    is_open = pl.col("metric").is_in(list(OPEN_METRICS))
    return (replace(data, metrics=data.metrics.filter(~is_open)), replace(data, metrics=data.metrics.filter(is_open)))


BY_NAME = (*PER_JUDGE, "judge_agreement", "mcq_open_gap")
"""Metrics given over all rows (``all``), per level k (``k=<k>``) and per condition."""


def _scope_and_leaf(rec: dict) -> tuple[str, str, tuple[str, ...]]:
    """Scope = the judge (per-judge rows and the invalid-verdict share), '' for judge averages; the leaf of the
    metrics of ``BY_NAME``: ``all``, ``k=<k>`` or the condition."""
    if rec["metric"] in BY_NAME:
        leaf = f"k={rec['k']}" if rec["k"] else (rec["leaf"] or "all")
        return rec["judge"], leaf, ("judge",) if rec["judge"] else ()
    if rec["metric"] == "open_invalid_verdicts":
        return rec["judge"], "invalid", ("judge",)
    return "", rec["key"], ()


def _levels(view: MetricView) -> dict[str, str]:
    """Leaf -> level k of the rows over one level."""
    return {f"k={r['k']}": r["k"] for r in view.records if r["metric"] in BY_NAME and r["k"]}


def _ordered(view: MetricView, leaves: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(['all'], levels k in numeric order, conditions in order of appearance)."""
    level_of = _levels(view)
    levels = sorted((x for x in leaves if x in level_of), key=lambda x: (len(level_of[x]), level_of[x]))
    return [x for x in leaves if x == "all"], levels, [x for x in leaves if x != "all" and x not in levels]


def _cols(view: MetricView, metric: str, scope, scale: str = "seq") -> list[Col]:
    overall, levels, conditions = _ordered(view, view.leaves(metric, scope))
    return ([Col("all", metric, "all", group="", scale=scale) for _ in overall]
            + [Col(x.replace("=", " = "), metric, x, group="by level k", scale=scale) for x in levels]
            + [Col(x, metric, x, group="by condition", scale=scale) for x in conditions])


def _ifeval_table(view: MetricView, level: str, reading: str, protocol: str) -> Table | None:
    """One of IFEval's four shares (``stats.open_metrics``: ``ifeval_<level>_<reading>``), per condition."""
    what = ("answers following every instruction of their prompt" if level == "prompt"
            else "all the prompts' instructions followed")
    loose = ", also with the first or last line cut or '*' removed" if reading == "loose" else ""
    return view.table(f"VoiceBench ifeval, {level}-level {reading} (share of {what}{loose})",
                      _cols(view, f"ifeval_{level}_{reading}", lambda s: s == ""),
                      name=f"{protocol}-ifeval-{level}-{reading}")


def section(data: ProtocolInput) -> Section | None:
    view = MetricView(data.metrics, _scope_and_leaf)
    if not view:
        return None
    average = lambda s: s == ""  # noqa: E731
    judge = lambda s: s != ""  # noqa: E731
    blocks: list[Table | Figure | Note | None] = [
        view.table("Open-ended accuracy, mean over judges (a verdict is right when it says correct, or abstained "
                   "where the answer is to abstain)" + (", and the share of errors (never answered, not graded)"
                                                        if view.has("open_error_rate") else ""),
                   [*_cols(view, "open_accuracy", average), *error_cols(view, metric="open_error_rate", group="")],
                   name=f"{data.protocol}-open"),
        view.table("Open-ended accuracy per judge, and the share of the judge's verdicts that stayed unparseable "
                   "after one retry", [*_cols(view, "open_accuracy", judge),
                                        Col("invalid verdicts", "open_invalid_verdicts", "invalid", scale=None)],
                   rows=BY_JUDGE, scope=judge, scope_label="judge", name=f"{data.protocol}-open-judges"),
        view.table("Open-ended answers scored by the benchmark's released rule (share it counts correct: "
                   "VoiceBench advbench's refusal rate; ifeval's score, the mean of the four IFEval shares below)",
                   _cols(view, "open_official_accuracy", average),
                   name=f"{data.protocol}-open-official"),
        *(_ifeval_table(view, level, reading, data.protocol)
          for reading in ("strict", "loose") for level in ("prompt", "instruction")),
        view.table("Open-ended answers rated 1-5 by the judges (rated open items: VoiceBench alpacaeval, commoneval, "
                   "wildvoice), mean over judges", _cols(view, "open_rating", average, scale=None),
                   name=f"{data.protocol}-open-rating"),
        view.table("Open-ended ratings per judge", _cols(view, "open_rating", judge, scale=None), rows=BY_JUDGE,
                   scope=judge, scope_label="judge", name=f"{data.protocol}-open-rating-judges", collapsed=True),
        view.table("Open-ended abstention (share of valid verdicts 'abstained'), mean over judges",
                   _cols(view, "open_abstention", average), name=f"{data.protocol}-open-abstention"),
        view.table("Open-ended abstention per judge", _cols(view, "open_abstention", judge), rows=BY_JUDGE, scope=judge,
                   scope_label="judge", name=f"{data.protocol}-open-abstention-judges", collapsed=True),
        view.table("Multiple-choice accuracy minus open-ended accuracy (mean over judges); bold: the 95% interval "
                   "excludes 0", _cols(view, "mcq_open_gap", average, scale="div"), name=f"{data.protocol}-gap"),
        view.table("Judge agreement (share of answers every judge graded alike) and chance-corrected agreement",
                   [*_cols(view, "judge_agreement", average),
                    *(Col(f"kappa ({k})", "judge_kappa", k, group="kappa") for k in view.leaves("judge_kappa"))],
                   name=f"{data.protocol}-agreement"),
    ]
    figure = _figure(view, data.protocol)
    sec = Section(f"{data.protocol}-open", "Open-ended answers and judges",
                  intro="The same instances with the options left out; the model answers freely and judges grade the "
                        "answer against the ground truth.")
    sec.blocks = [b for b in [*blocks, figure, view.leftover_table("Other open-ended metrics")] if b is not None]
    return sec


def _figure(view: MetricView, protocol: str) -> Figure | None:
    """Open-ended accuracy and the MCQ gap per level k (or per condition), one pair of panels per split."""
    panels = []
    for split in view.distinct("split"):
        suffix = f", split {split}" if len(view.order["split"]) > 1 else ""
        _, levels, conditions = _ordered(view, view.leaves("open_accuracy"))
        xs = levels or conditions
        xlabel = "corruption level k" if levels else "condition"
        labels = [_levels(view).get(x, x) for x in xs]
        acc = plot_series(view, "open_accuracy", xs, split=split, xlabels=labels)
        gap = plot_series(view, "mcq_open_gap", xs, split=split, xlabels=labels)
        if acc:
            panels.append((f"open-ended accuracy, mean of judges{suffix}", "accuracy", acc, xlabel))
        if gap:
            panels.append((f"multiple choice minus open-ended{suffix}", "accuracy difference", gap, xlabel))
    if not panels:
        return None
    return Figure(f"{protocol}-open-bars", "Open-ended accuracy (mean over judges) and the multiple-choice minus "
                                           "open-ended gap, with 95% intervals",
                  plots.bar_panels(panels, ncols=min(2, len(panels))), alt="open-ended accuracy and gap")


def cascades_of(predictions: RowSummary | None) -> dict[str, str]:
    """Model -> how its cascade ran (``describer:modalities``, and each stage's engine), for models whose
    predictions carry a ``cascade``: of each model, its first such row's (``RowSummary.cascades``)."""
    if predictions is None or not predictions.has("cascade"):
        return {}
    rows = predictions.cascades.sort("first").unique(subset=["model"], keep="first", maintain_order=True)
    out: dict[str, str] = {}
    for row in rows.iter_rows(named=True):
        out[row["model"]] = f"{row['cascade']}" + (f" ({row['stages']})" if row["stages"] else "")
    return out


def mark_cascades(section: Section, cascades: dict[str, str]) -> None:
    """Add the dagger and a hover note to every model cell naming a cascade model (the two models of a test between
    two, and
    model-pair matrices' column headers), and one note saying what the dagger means."""
    if not cascades:
        return
    marked = False
    for block in section.walk():
        if not isinstance(block, Table) or "model" not in block.header:
            continue
        col = block.header.index("model")
        block.header = [h + CASCADE_MARK if h in cascades and i != col else h for i, h in enumerate(block.header)]
        for row in block.rows:
            cell = row[col]
            pair = cell.data.get("model_b") is not None  # a test between two models (report.significance)
            names = [cell.data["model_a"], cell.data["model_b"]] if pair else [cell.text]
            if any(p in cascades for p in names):
                cell.title = "; ".join(f"{p}: cascade {cascades[p]}" for p in names if p in cascades)
                marked_names = [p + CASCADE_MARK if p in cascades else p for p in names]
                cell.text = pair_label(*marked_names) if pair else marked_names[0]
                marked = True
    if marked:
        described = "; ".join(f"{m}: {how}" for m, how in cascades.items())
        section.blocks.append(Note(f"{CASCADE_MARK.strip()} cascade: a describer model turned some media into text "
                                   f"and the model answered from the text ({described})."))
