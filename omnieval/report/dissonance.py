"""Report section of protocol ``dissonance`` (docs/reference.md, Protocol `dissonance`): accuracy by corruption level
and condition (the papers' Tables 1 and 6), abstention against the human target and ACE, confidence and calibration per
confidence method, Shapley attribution and reliance, per-anchor accuracy; plots of accuracy and abstention against k, a
reliability diagram and Shapley bars."""

from __future__ import annotations

import polars as pl

from omnieval.report import plots
from omnieval.report.blocks import Figure, Section
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import Col, MetricView, error_cols, plot_series, series_label

NAME = "dissonance"
LEVELS = ("0", "1", "2", "3")
CONDITIONS = ("C000", "C100", "C010", "C001", "C110", "C101", "C011", "C111")  # by level k
MODALITIES = ("video", "audio", "text")
CALIBRATION = ("confidence_k", "ece", "rc_auc")
METHOD_NAMES = {"rs": "restricted softmax over the option labels", "tp": "probability of the answer token",
                "rs_topk": "restricted softmax over the option labels among an endpoint's top logprobs"}


def scope_and_leaf(rec: dict) -> tuple[str, str, tuple[str, ...]]:
    """Confidence metrics are scoped by their method (``rs``, ``tp``); the others have no scope."""
    if rec["metric"] in CALIBRATION:
        return rec["method"], rec["leaf"], ("method",)
    return "", rec["leaf"], ()


def section(data: ProtocolInput) -> Section | None:
    view = MetricView(data.metrics, scope_and_leaf)
    if not view:
        return None
    splits = view.distinct("split")
    sec = Section(NAME, "Dissonance: modality conflict and abstention",
                  intro="Each modality of a question (video, audio, text) is independently replaced by another "
                        "anchor's; k is the number of replaced modalities. Condition Cvat: digit 1 = replaced.")
    tables = []
    cols = []
    for s in splits:
        cols += [Col(f"k={k}", "accuracy_k", k, group=f"split {s}", split=s) for k in LEVELS
                 if view.has("accuracy_k", k)]
        cols.append(Col("invalid", "invalid_rate", "", group=f"split {s}", split=s, scale=None))
        cols += error_cols(view, group=f"split {s}", split=s)
    errors = " and of errors" if view.has("error_rate") else ""
    tables.append(view.table("Accuracy by corruption level k (mean of the condition accuracies at each level) and "
                             f"shares of invalid answers{errors}", cols, rows=("run", "model", "prompt"),
                             name="accuracy_k"))
    conditions = [c for c in CONDITIONS if view.has("accuracy", c)]
    conditions += [c for c in view.leaves("accuracy") if c not in conditions]
    tables.append(view.table("Accuracy by condition", [Col(c, "accuracy", c) for c in conditions],
                             name="accuracy"))
    cols = [Col(f"k={k}", "abstention_k", k, group="model abstains") for k in LEVELS]
    cols += [Col(f"k={k}", "human_abstention_k", k, group="human target") for k in LEVELS]
    cols.append(Col("ACE", "ace", "", scale=None, group="",
                    title="abstention calibration error: mean over k of |abstention - human target|"))
    tables.append(view.table("Abstention against the human target by k, and the abstention calibration error (ACE)",
                             cols, name="abstention"))
    cols = [Col(f"k={k}", "confidence_k", k, group="mean confidence") for k in LEVELS]
    cols += [Col("ECE", "ece", "", scale=None, group=""), Col("RC-AUC", "rc_auc", "", scale=None, group="")]
    shown = [m for m in dict.fromkeys(sc for metric in CALIBRATION for sc in view.scopes(metric))
             if m in METHOD_NAMES]
    named = f" ({', '.join(f'{m}: {METHOD_NAMES[m]}' for m in shown)})" if shown else ""
    tables.append(view.table("Confidence by k, expected calibration error (10 bins) and area under the "
                             f"risk-coverage curve, per confidence method{named}", cols,
                             rows=("run", "model", "prompt", "split", "scope"), scope=lambda s: True,
                             scope_label="method", name="calibration"))
    cols = [Col(m, "shapley", m, group="Shapley value", scale="div") for m in MODALITIES]
    cols += [Col(m, "reliance", m, group="reliance", scale="div") for m in MODALITIES]
    tables.append(view.table("Modality attribution: exact Shapley values (v(S) = accuracy with exactly S clean) and "
                             "reliance ((acc[C000] - acc[only m corrupted]) / acc[C000]); bold: the 95% interval "
                             "excludes 0", cols, name="attribution"))
    sec.blocks = [t for t in tables if t is not None]
    anchors = []
    for s in splits:
        leaves = view.leaves("anchor_accuracy")
        present = [a for a in leaves if any(r["metric"] == "anchor_accuracy" and r["leaf"] == a and r["split"] == s
                                            for r in view.records)]
        t = view.table(f"Accuracy at k=0 per anchor, split {s}",
                       [Col(a, "anchor_accuracy", a, split=s) for a in present], rows=("run", "model", "prompt"),
                       name=f"anchors-{s}")
        if t is not None:
            anchors.append(t)
    if anchors:
        sec.subsections.append(Section(f"{NAME}-anchors", "Per-anchor accuracy", blocks=anchors))
    sec.blocks.extend(_figures(view, data, splits))
    rest = view.leftover_table()
    if rest is not None:
        sec.blocks.append(rest)
    return sec


def _figures(view: MetricView, data: ProtocolInput, splits: list[str]) -> list:
    out: list = []
    ks = [f"k={k}" for k in LEVELS]
    panels = []
    for s in splits:
        series = plot_series(view, "accuracy_k", LEVELS, split=s, xlabels=ks)
        if series:
            panels.append((f"accuracy, split {s}", "accuracy", series, None))
    for s in splits:
        series = plot_series(view, "abstention_k", LEVELS, split=s, xlabels=ks)
        human = plot_series(view, "human_abstention_k", LEVELS, split=s, xlabels=ks)
        if series:
            reference = human[0] if human else None
            if reference is not None:
                reference.label = "human target"
            panels.append((f"abstention, split {s}", "abstention rate", series, reference))
    if panels:
        out.append(Figure("dissonance-k", "Accuracy and abstention against the corruption level k, with 95% "
                                          "intervals; dashed: the human abstention target",
                          plots.line_panels(panels, "corruption level", ncols=len(splits)),
                          alt="accuracy and abstention against k"))
    reliability = _reliability(view, data, splits)
    if reliability is not None:
        out.append(reliability)
    panels = []
    for s in splits:
        series = plot_series(view, "shapley", MODALITIES, split=s)
        if series:
            panels.append((f"split {s}", "Shapley value (accuracy)", series, "modality"))
    if panels:
        out.append(Figure("dissonance-shapley", "Shapley modality attribution with 95% intervals",
                          plots.bar_panels(panels), alt="Shapley values per modality"))
    return out


def _reliability(view: MetricView, data: ProtocolInput, splits: list[str]) -> Figure | None:
    """From the predictions (their summary's ``reliability`` counts): accuracy per equal-width confidence bin;
    without them, mean confidence against accuracy per level k from the metrics table."""
    panels = []
    preds = data.predictions
    if preds is not None and preds.has("confidence") and preds.reliability.height:
        valid = preds.reliability
        if "run" not in valid.columns:
            valid = valid.with_columns(run=pl.lit(data.runs[0]))
        for (split, method), g in sorted(valid.partition_by(["split", "method"], as_dict=True).items()):
            series = []
            groups = g.sort("first").partition_by(["run", "model", "prompt"], as_dict=True)
            for (run, model, prompt), part in sorted(groups.items(), key=lambda kv: _order(view, kv[0])):
                bins = part.group_by("bin").agg(pl.col("conf_sum", "conf_n", "correct_sum", "correct_n", "n").sum()) \
                    .sort("bin").with_columns(conf=_mean("conf_sum", "conf_n"), acc=_mean("correct_sum", "correct_n"))
                rec = {"run": run, "model": model, "prompt": prompt}
                ece = (view.index.get((run, model, prompt, split, method, "ece", ""))
                       or view.index.get((run, model, prompt, split, "", "ece", "")))
                label = series_label(view, rec) + (f" (ECE {ece['value']:.3f})" if ece and ece["value"]
                                                   is not None else "")
                series.append((label, bins["conf"].to_list(), bins["acc"].to_list(), bins["n"].to_list()))
            panels.append((f"split {split}, confidence {method}", series))
    if panels:
        return Figure("dissonance-reliability", "Reliability diagram: accuracy against mean confidence in 10 "
                                                "equal-width confidence bins (marker area: share of answers); "
                                                "dotted: perfect calibration",
                      plots.reliability(panels[:6]), alt="reliability diagram")
    for s in splits:
        for method in view.scopes("confidence_k"):
            series = []
            conf = plot_series(view, "confidence_k", LEVELS, split=s, scope=method)
            acc = plot_series(view, "accuracy_k", LEVELS, split=s)
            by_label = {x.label: x for x in acc}
            for c in conf:
                a = by_label.get(c.label)
                if a is None:
                    continue
                pairs = [(pc[1], pa[1]) for pc, pa in zip(c.points, a.points) if pc[1] is not None
                         and pa[1] is not None]
                series.append((c.label, [p[0] for p in pairs], [p[1] for p in pairs], [1] * len(pairs)))
            if series:
                panels.append((f"split {s}, confidence {method or '-'} (per level k)", series))
    if not panels:
        return None
    return Figure("dissonance-reliability", "Mean confidence against accuracy per corruption level k (no predictions "
                                            "given, so no per-bin reliability); dotted: perfect calibration",
                  plots.reliability(panels[:6]), alt="confidence against accuracy")


def _mean(total: str, count: str) -> pl.Expr:
    """A mean from its sum and count (null for no value, as polars' mean of no value)."""
    return pl.when(pl.col(count) > 0).then(pl.col(total) / pl.col(count)).otherwise(None)


def _order(view: MetricView, key: tuple) -> tuple:
    run, model, prompt = key
    return (view.order["run"].get(run, 99), view.order["model"].get(model, 99),
            view.order["prompt"].get(prompt, (9, 9)))

