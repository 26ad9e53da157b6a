"""Report section of protocol ``spectrum`` (docs/reference.md, Protocol `spectrum`): per benchmark (run and split) the
accuracy with every modality, with one modality only, with all shuffled (random) and without one, against chance; where
a benchmark holds rotated copies of its questions, the circular accuracy (VLMEvalKit's CircularEval) per condition;
where its questions come in Video-MME-v2's groups, the group score per condition (groups resampled whole); the
intra / inter gains, perceptual scores and the dependency label, overall and per category; where items give text
stand-ins, accuracy with each medium shown as its text and the gap to normal; where items carry the benchmark's
evidence labels, every column per label beside what the shuffles find; where items carry the release's own
breakdowns (Video-MME's duration), every column per value, a table per breakdown; plot: what each modality alone
buys over random (every modality of the benchmark, intervals, a model's colour kept across prompt styles)."""

from __future__ import annotations

import re

from omnieval.report import plots
from omnieval.report.blocks import Figure, Section, Table, fmt, text_cell
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import FEW_CLUSTERS, FEW_MARK, Col, MetricView, error_cols, plot_series

NAME = "spectrum"
MODALITIES = ("image", "video", "audio", "text")
SCOPED_LEAF = ("accuracy", "circular_accuracy", "group_score", "official_group_score", "intra", "perceptual_score",
               "as_text_gap", "dependency")
SCOPE_ONLY = ("chance", "inter")


def scope_and_leaf(rec: dict) -> tuple[str, str, tuple[str, ...]]:
    """The scope (a category, ``evidence=<label>``, ``<breakdown>=<value>``, ``modalities=<set>``) and leaf (a
    condition, a modality, the dependency label) of the conditions' metrics; ``chance`` and ``inter`` have the scope
    alone; other metrics are shown under their whole key label. The kind: ``("category",)``, ``("evidence",)`` or
    ``("breakdown", <name>)`` (a set of modalities is shown as the breakdown ``modalities``)."""
    if rec["metric"] not in SCOPED_LEAF and rec["metric"] not in SCOPE_ONLY:
        return "", rec["key"], ()
    by, value = rec["scope_by"], rec["scope_value"]
    if by == "":
        return "", rec["leaf"], ()
    if by == "category":
        return value, rec["leaf"], ("category",)
    if by == "evidence":
        return f"evidence={value}", rec["leaf"], ("evidence",)
    name = rec["breakdown"] if by == "breakdown" else by
    return f"{name}={value}", rec["leaf"], ("breakdown", name)


def _conditions(view: MetricView, metric: str = "accuracy") -> list[str]:
    present = set(view.leaves(metric, lambda s: True))
    order = ["normal", *(f"{m}_only" for m in MODALITIES), "random", *(f"no_{m}" for m in MODALITIES),
             *(f"{m}_as_text" for m in MODALITIES)]
    return [c for c in order if c in present] + sorted(present - set(order))


def _modalities(view: MetricView, metric: str) -> list[str]:
    present = set(view.leaves(metric, lambda s: True))
    return [m for m in MODALITIES if m in present] + sorted(present - set(MODALITIES))


def _columns(view: MetricView) -> list[Col]:
    cols = [Col(c.replace("_", " "), "accuracy", c, group="accuracy") for c in _conditions(view)]
    cols.append(Col("chance", "chance", "", group="accuracy"))
    cols += [Col(c.replace("_", " "), "circular_accuracy", c, group="circular accuracy: every rotation right")
             for c in _conditions(view, "circular_accuracy")]
    cols += [Col(c.replace("_", " "), "group_score", c, group="group score: Video-MME-v2's, per group of four")
             for c in _conditions(view, "group_score")]
    cols += [Col(c.replace("_", " "), "official_group_score", c,
                 group="official group score: the release script's verdicts, -1 for no letter")
             for c in _conditions(view, "official_group_score")]
    cols += [Col(m, "intra", m, group="intra: m alone over random", scale="div") for m in _modalities(view, "intra")]
    cols.append(Col("inter", "inter", "", group="", scale="div",
                    title="accuracy[normal] - max over m of accuracy[m only]"))
    cols += [Col(m, "perceptual_score", m, group="perceptual score", scale="div")
             for m in _modalities(view, "perceptual_score")]
    cols += [Col(m, "as_text_gap", m, group="as text: m's stand-in minus normal", scale="div",
                 title=f"accuracy[{m} as text] - accuracy[normal]") for m in _modalities(view, "as_text_gap")]
    return cols


def _breakdown_sections(view: MetricView) -> list[Section]:
    """Per breakdown of the release (its name), the section's columns per value, and the dependency label per
    value: one table each, rows the values."""
    names = sorted({kind[1] for r in view.records if (kind := view.kind_of(r["scope"]))[:1] == ("breakdown",)})
    out = []
    for name in names:
        def scope(s: str, name: str = name) -> bool:
            return view.kind_of(s) == ("breakdown", name)

        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name)
        blocks = [view.table(f"Accuracy, gains and perceptual scores per {name} (the release's own breakdown)",
                             _columns(view), rows=("run", "model", "prompt", "split", "scope"), scope=scope,
                             scope_label=name, name=f"spectrum-breakdown-{slug}"),
                  _dependency_table(view, scope, f"Dependency label per {name}", scoped=True, scope_label=name)]
        blocks = [b for b in blocks if b is not None]
        if blocks:
            out.append(Section(f"{NAME}-breakdown-{slug}", f"By {name}", blocks=blocks))
    return out


def section(data: ProtocolInput) -> Section | None:
    view = MetricView(data.metrics, scope_and_leaf)
    if not view:
        return None

    def is_category(scope: str) -> bool:
        return view.kind_of(scope) == ("category",)

    def is_evidence(scope: str) -> bool:
        return view.kind_of(scope) == ("evidence",)

    sec = Section(NAME, "Modality dependence spectrum",
                  intro="Modalities shuffled between items: '<m> only' keeps m and replaces the others, 'random' "
                        "replaces all, 'no <m>' replaces m alone, '<m> as text' shows m's text stand-in (a "
                        "transcript, a caption) instead of m. Rows are benchmarks (run and split).")
    cols = _columns(view) + [Col("invalid", "invalid_rate", "", scale=None, group="")] + error_cols(view, group="")
    blocks = [view.table("Accuracy per condition against chance, intra / inter gains, perceptual scores",
                         cols, note="bold: the 95% interval excludes 0", name="spectrum")]
    blocks.append(_dependency_table(view, lambda s: s == "", "Dependency label"))
    per_cat = view.table("Accuracy, gains and perceptual scores per category", _columns(view),
                         rows=("run", "model", "prompt", "split", "scope"),
                         scope=is_category, scope_label="category", name="spectrum-category")
    dep_cat = _dependency_table(view, is_category, "Dependency label per category", scoped=True)
    sec.blocks = [b for b in blocks if b is not None]
    scoped = [b for b in (per_cat, dep_cat) if b is not None]
    if scoped:
        sec.subsections.append(Section(f"{NAME}-categories", "Per category", blocks=scoped))
    per_evidence = view.table("Accuracy per condition by the benchmark's evidence label: where the benchmark says "
                              "the answer's evidence lies, beside what the shuffles find", _columns(view),
                              rows=("run", "model", "prompt", "split", "scope"), scope=is_evidence,
                              scope_label="evidence", name="spectrum-evidence")
    dep_evidence = _dependency_table(view, is_evidence, "Dependency label per evidence label", scoped=True,
                                     scope_label="evidence")
    labelled = [b for b in (per_evidence, dep_evidence) if b is not None]
    if labelled:
        sec.subsections.append(Section(f"{NAME}-evidence", "By evidence label", blocks=labelled))
    sec.subsections += _breakdown_sections(view)
    figure = _gains(view, data)
    if figure is not None:
        sec.blocks.append(figure)
    rest = view.leftover_table()
    if rest is not None:
        sec.blocks.append(rest)
    return sec


def _dependency_table(view: MetricView, scope, caption: str, scoped: bool = False,
                      scope_label: str = "category") -> Table | None:
    """One row per benchmark x model (x category) with its label (labels are keys, so not columns)."""
    recs = [r for r in view.records if r["metric"] == "dependency" and scope(r["scope"])]
    if not recs:
        return None
    ident = [c for c in ("run", "model", "prompt", "split") if c == "model" or len(view.order[c]) > 1]
    header = ident + ([scope_label] if scoped else []) + ["dependency", "why"]
    rows = []
    for r in sorted(recs, key=lambda r: tuple(view.order[c][r[c]] for c in ("run", "model", "prompt", "split",
                                                                            "scope"))):
        cells = [text_cell(str(r[c]), header=True) for c in ident]
        if scoped:
            cells.append(text_cell(r["scope"], header=True))
        cells.append(view.cell(r, None, label=r["leaf"]))
        cells.append(text_cell(dependency_reason(view, r)))
        rows.append(cells)
    return Table(caption=caption, header=header, rows=rows, name="dependency" + (f"-{scope_label}" if scoped else ""),
                 note=None if scoped else "<m>-intra: the 95% interval of intra[m] lies above 0 (joined by +); "
                                          "at-chance: no modality's does and accuracy with every modality is not "
                                          "above chance either; inter-only: no modality's does, but the model is "
                                          "above chance (also what a model answering from what no shuffle "
                                          "replaces gets); 'why' lists the intervals the label rests on. Each "
                                          "modality is one uncorrected 95% interval: with k "
                                          f"modalities a model relying on none gets some <m>-intra up to k x 2.5% of "
                                          f"the time. {FEW_MARK}: fewer than {FEW_CLUSTERS} clusters.")


def dependency_reason(view: MetricView, rec: dict) -> str:
    """Why a label was given, from the rows beside it: each modality's ``intra`` interval, those above 0 first,
    and for ``at-chance`` / ``inter-only`` the accuracy with every modality against chance. A label whose
    modalities differ from the shown intervals above 0 says so: the label reads the percentile interval of the
    resamples (docs/reference.md), the table the run's interval method."""
    ident = {c: rec[c] for c in ("run", "model", "prompt", "split", "scope")}
    intervals = {}
    for leaf in _modalities(view, "intra"):
        row = view.get(ident, "intra", leaf)
        if row is not None and row["ci_low"] is not None and row["ci_high"] is not None:
            intervals[leaf] = (row["ci_low"], row["ci_high"])
    above = [m for m, (low, _) in intervals.items() if low > 0]
    text = "; ".join(f"{m} [{fmt(lo)}, {fmt(hi)}]" for m, (lo, hi) in intervals.items())
    label = rec["leaf"]
    if label in ("at-chance", "inter-only"):
        normal, chance = view.get(ident, "accuracy", "normal"), view.get(ident, "chance", "")
        against = (f"; accuracy normal {fmt(normal['value'])} [{fmt(normal['ci_low'])}, {fmt(normal['ci_high'])}] vs "
                   f"chance {fmt(chance['value'])}") if normal is not None and chance is not None else ""
        why = f"no intra interval above 0 ({text}){against}"
    else:
        why = f"intra intervals: {text}"
    labelled = [] if label in ("at-chance", "inter-only") else [p.removesuffix("-intra") for p in label.split("+")]
    if intervals and sorted(labelled) != sorted(above):
        why += (f"; the shown intervals above 0 are {', '.join(above) or 'none'}: the label reads the percentile "
                "interval of the resamples")
    return why


def _gains(view: MetricView, data: ProtocolInput) -> Figure | None:
    """What each modality alone buys over random (``intra``, with its interval), every modality of the benchmark
    side by side (image, video, audio, text; those it has): one panel per benchmark and split (named by the
    benchmark, so two releases' runs never share a panel), one bar per model and prompt style, a model's colour kept
    across prompt styles and panels (the hatch tells prompts apart). An audio-reliant model stands out on audio,
    where a single x-y scatter of one medium against text would have put it at the origin beside a random one."""
    modalities = _modalities(view, "intra")
    if not modalities:
        return None
    panels = []
    several = len(view.order["split"]) > 1 or len(set(data.benchmarks.values())) > 1
    for split in view.distinct("split"):
        for name, runs in _runs_by_benchmark(view, data, split):
            present = {rec["leaf"] for rec in view.records if rec["metric"] == "intra" and rec["split"] == split
                       and rec["scope"] == "" and rec["run"] in runs}
            series = plot_series(view, "intra", [m for m in modalities if m in present], split=split, runs=runs)
            if series:
                title = (f"{name}, split {split}" if name else f"split {split}") if several else ""
                panels.append((title, "m only - random", series, "modality m"))
    if not panels:
        return None
    return Figure("spectrum-gains", "What each modality alone buys: accuracy with only m kept minus accuracy with "
                                    "every modality shuffled (intra), per modality, with 95% intervals; one panel "
                                    "per benchmark and split",
                  plots.bar_panels(panels, ncols=min(3, len(panels))), alt="spectrum intra gains per modality")


def _runs_by_benchmark(view: MetricView, data: ProtocolInput, split: str) -> list[tuple[str | None, list[str]]]:
    """The runs of ``split`` grouped by the benchmark they ran (None: not recorded), in the report's run order."""
    runs = [r for r in view.distinct("run") if any(rec["run"] == r and rec["split"] == split
                                                   for rec in view.records)]
    groups: dict[str | None, list[str]] = {}
    for run in runs:
        groups.setdefault(data.benchmarks.get(run), []).append(run)
    return list(groups.items())
