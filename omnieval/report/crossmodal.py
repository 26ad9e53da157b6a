"""Report section of protocol ``crossmodal`` (docs/reference.md, Protocol `crossmodal`): the six-direction accuracy
table with average, std and consistency, overall and per task family (and subtask), modality disparity and direction
imbalance, pairwise direction agreement; plots: a direction heatmap and disparity / imbalance bars."""

from __future__ import annotations

from omnieval.report import plots
from omnieval.report.blocks import Figure, Section
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import Col, MetricView, error_cols, plot_series, series_label

NAME = "crossmodal"
DIRECTIONS = ("A->T", "A->V", "T->A", "T->V", "V->A", "V->T")
DISPARITY = ("T_vs_V", "T_vs_A", "V_vs_A")
IMBALANCE = ("A<->T", "V<->T", "V<->A")
SCOPED_LEAF = ("accuracy", "disparity", "imbalance", "agreement")
SCOPE_ONLY = ("average", "std", "consistency")


def scope_and_leaf(rec: dict) -> tuple[str, str, tuple[str, ...]]:
    """The scope is the row's task, or its task and subtask (shown ``task/subtask``); the leaf a direction or a
    pair of them. ``average`` etc. have the scope alone; other metrics (error rates, answer verdicts) are shown
    under their whole key label."""
    if rec["metric"] not in SCOPED_LEAF and rec["metric"] not in SCOPE_ONLY:
        return "", rec["key"], ()
    task, subtask = rec["task"], rec["subtask"]
    if subtask:
        return f"{task}/{subtask}", rec["leaf"], ("subtask",)
    return task, rec["leaf"], ("task",) if task else ()


def section(data: ProtocolInput) -> Section | None:
    view = MetricView(data.metrics, scope_and_leaf)
    if not view:
        return None

    def is_task(scope: str) -> bool:
        return view.kind_of(scope) == ("task",)

    def is_subtask(scope: str) -> bool:
        return view.kind_of(scope) == ("subtask",)

    directions = [d for d in DIRECTIONS if view.has("accuracy", d)]
    directions += [d for d in view.leaves("accuracy", lambda s: True) if d not in directions]
    summary = [Col("average", "average", "", group="summary"), Col("std", "std", "", group="summary", scale=None),
               Col("consistency", "consistency", "", group="summary",
                   title="share of items answered correctly in all six directions")]
    direction_cols = [Col(d, "accuracy", d, group="context -> candidates") for d in directions]
    sec = Section(NAME, "Cross-modal consistency",
                  intro="The same question asked in six context -> candidate directions (A audio, V vision, "
                        "T text); average and std over the six directions.")
    blocks = [view.table("Accuracy per direction, average, std, consistency and share of invalid answers",
                         direction_cols + summary + [Col("invalid", "invalid_rate", "", scale=None, group="")]
                         + error_cols(view, group=""),
                         name="directions")]
    tasks = view.table("Accuracy per direction, average, std and consistency per task family",
                       direction_cols + summary, rows=("run", "model", "prompt", "split", "scope"),
                       scope=is_task, scope_label="task", name="directions-task")
    subtasks = view.table("The same per task and subtask", direction_cols + summary,
                          rows=("run", "model", "prompt", "split", "scope"), scope=is_subtask,
                          scope_label="task/subtask", collapsed=True, name="directions-subtask")
    gaps = [Col(k.replace("_vs_", " vs "), "disparity", k, group="modality disparity", scale="div")
            for k in DISPARITY]
    gaps += [Col(k, "imbalance", k, group="direction imbalance", scale="div") for k in IMBALANCE]
    note = ("D(X vs Y) = (Acc[Z->Y] - Acc[Z->X]) + (Acc[Y->Z] - Acc[X->Z]); imbalance X<->Y = Acc[X->Y] - "
            "Acc[Y->X]; bold: the 95% interval excludes 0")
    blocks.append(view.table("Modality disparity and direction imbalance", gaps, note=note, name="disparity"))
    blocks.append(view.table("Modality disparity and direction imbalance per task and subtask", gaps,
                             rows=("run", "model", "prompt", "split", "scope"), scope=lambda s: s != "",
                             scope_label="scope", collapsed=True, name="disparity-scoped"))
    pairs = view.leaves("agreement", lambda s: True)
    blocks.append(view.table("Agreement: share of items on which two directions are both right or both wrong",
                             [Col(p.replace("|", " | "), "agreement", p) for p in pairs],
                             rows=("run", "model", "prompt", "split", "scope"), scope=lambda s: True,
                             scope_label="scope", collapsed=True, name="agreement"))
    sec.blocks = [t for t in blocks if t is not None]
    scoped = [t for t in (tasks, subtasks) if t is not None]
    if scoped:
        sec.subsections.append(Section(f"{NAME}-tasks", "Per task family", blocks=scoped))
    sec.blocks.extend(_figures(view, directions))
    rest = view.leftover_table()
    if rest is not None:
        sec.blocks.append(rest)
    return sec


def _figures(view: MetricView, directions: list[str]) -> list[Figure]:
    out = []
    rows, values = [], []
    splits = view.distinct("split")
    scopes = [""] + [s for s in view.scopes("accuracy") if view.kind_of(s) == ("task",)]
    idents = []
    for rec in view.records:
        if rec["metric"] == "accuracy" and rec["scope"] == "":
            ident = (rec["run"], rec["model"], rec["prompt"], rec["split"])
            if ident not in idents:
                idents.append(ident)
    for scope in scopes:
        for run, model, prompt, split in idents:
            row = [view.index.get((run, model, prompt, split, scope, "accuracy", d)) for d in directions]
            if not any(row):
                continue
            label = series_label(view, {"run": run, "model": model, "prompt": prompt})
            if len(splits) > 1:
                label += f" · {split}"
            rows.append(label + (f" · {scope}" if scope else ""))
            values.append([r["value"] if r else None for r in row])
    if rows:
        out.append(Figure("crossmodal-heatmap", "Accuracy per context -> candidate direction, overall and per task",
                          plots.heatmap(rows, directions, values, "accuracy by direction"),
                          alt="direction heatmap"))
    panels = []
    for s in splits:
        suffix = f", split {s}" if len(splits) > 1 else ""
        dis = plot_series(view, "disparity", DISPARITY, split=s, xlabels=[k.replace("_vs_", " vs ") for k in DISPARITY])
        imb = plot_series(view, "imbalance", IMBALANCE, split=s)
        if dis:
            panels.append((f"modality disparity{suffix}", "accuracy difference", dis, "modality pair"))
        if imb:
            panels.append((f"direction imbalance{suffix}", "accuracy difference", imb, "direction pair"))
    if panels:
        out.append(Figure("crossmodal-disparity", "Modality disparity and direction imbalance with 95% intervals",
                          plots.bar_panels(panels, ncols=min(2, len(panels))), alt="disparity bars"))
    return out
