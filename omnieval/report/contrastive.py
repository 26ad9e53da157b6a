"""Report section of protocol ``contrastive`` (docs/reference.md, Protocol `contrastive`): accuracy on the original
order by number of inputs, selection type and answer modality, permutation consistency, position bias per label; plot:
accuracy by number of inputs and position bias."""

from __future__ import annotations

import re

from omnieval.report import plots
from omnieval.report.blocks import Figure, Section
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import Col, MetricView, error_cols, plot_series

NAME = "contrastive"


def _subset(view: MetricView, part: str) -> list[tuple[str, str]]:
    """``(key label, value)`` of the accuracy rows over one value of the key part ``part`` (``n_inputs``,
    ``selection_type``, ``answer_modality``), numbers in numeric order, then the other values in order."""
    found = {r["key"]: r[part] for r in view.records if r["metric"] == "accuracy" and r["scope"] == "" and r[part]}

    def order(value: str):
        return (0, int(value), "") if re.fullmatch(r"\d+", value) else (1, 0, value)

    return sorted(found.items(), key=lambda kv: order(kv[1]))


def section(data: ProtocolInput) -> Section | None:
    view = MetricView(data.metrics)
    if not view:
        return None
    keys = view.leaves("accuracy")
    by_n, by_sel, by_mod = (_subset(view, part) for part in ("n_inputs", "selection_type", "answer_modality"))
    subsets = {k for k, _ in by_n + by_sel + by_mod}
    other = [k for k in keys if k != "all" and k not in subsets]
    cols = [Col("all", "accuracy", "all", group="accuracy (original order)")] if "all" in keys else []
    cols += [Col(f"n = {n}", "accuracy", k, group="by number of inputs") for k, n in by_n]
    cols += [Col(value, "accuracy", k, group="by selection type") for k, value in by_sel]
    cols += [Col(value, "accuracy", k, group="by answer modality") for k, value in by_mod]
    cols += [Col(k, "accuracy", k, group="other") for k in other]
    cols.append(Col("consistency", "permutation_consistency", "", group="",
                    title="share of items answered correctly under every option order evaluated"))
    cols.append(Col("invalid", "invalid_rate", "", group="", scale=None))
    cols += error_cols(view, group="")
    sec = Section(NAME, "Contrastive selection across inputs",
                  intro="Which of 2-4 inputs answers the question; options permuted to expose position bias. "
                        "'+captions' models see each input's caption instead of the input.")
    blocks = [view.table("Accuracy by number of inputs, selection type and answer modality; permutation "
                         "consistency", cols, name="contrastive")]
    labels = view.leaves("position_bias")
    blocks.append(view.table("Position bias: share of answers with each label minus the share expected under "
                             "uniform choice (bold: the 95% interval excludes 0)",
                             [Col(lab, "position_bias", lab, scale="div") for lab in labels], name="position"))
    sec.blocks = [b for b in blocks if b is not None]
    panels = []
    for s in view.distinct("split"):
        suffix = f", split {s}" if len(view.order["split"]) > 1 else ""
        acc = plot_series(view, "accuracy", [k for k, _ in by_n], split=s, xlabels=[n for _, n in by_n])
        bias = plot_series(view, "position_bias", labels, split=s)
        if acc:
            panels.append((f"accuracy by number of inputs{suffix}", "accuracy", acc, "number of inputs"))
        if bias:
            panels.append((f"position bias{suffix}", "share above uniform", bias, "answer label"))
    if panels:
        sec.blocks.append(Figure("contrastive-bars", "Accuracy by number of inputs and position bias per label, "
                                                     "with 95% intervals",
                                 plots.bar_panels(panels, ncols=min(2, len(panels))), alt="contrastive bars"))
    rest = view.leftover_table()
    if rest is not None:
        sec.blocks.append(rest)
    return sec
