"""Report section of a protocol without a section builder of its own: accuracy per condition, the invalid and error
rates, then the tables and bar figures of the layout its spec states (``ProtocolSpec.report``, a
``core.protocol_views.ReportLayout``), then every other metric row in a long table."""

from __future__ import annotations

from omnieval.core.protocol_views import ReportBars, ReportLayout
from omnieval.protocols import protocol_attribute
from omnieval.report import plots
from omnieval.report.blocks import Figure, Section
from omnieval.report.inputs import ProtocolInput
from omnieval.report.tables import Col, MetricView, error_cols, plot_series


def section(data: ProtocolInput) -> Section | None:
    view = MetricView(data.metrics)
    if not view:
        return None
    layout: ReportLayout | None = protocol_attribute(data.protocol, "report")
    cols = [Col(c, "accuracy", c) for c in view.leaves("accuracy")]
    cols.append(Col("invalid", "invalid_rate", "", scale=None))
    cols += error_cols(view)
    if layout is None:
        sec = Section(data.protocol, f"Protocol {data.protocol}")
    else:
        sec = Section(data.protocol, layout.title, intro=layout.intro)
    errors = " and of errors" if view.has("error_rate") else ""
    blocks = [view.table(f"Accuracy by condition, share of invalid answers{errors}", cols, name="accuracy")]
    for i, table in enumerate(layout.tables if layout is not None else ()):
        columns = [Col(c.label, c.metric, c.key, group=c.group, scale=c.scale, title=c.title) for c in table.columns]
        blocks.append(view.table(table.caption, columns, note=table.note, name=f"{data.protocol}-{i + 1}"))
    blocks += [_bars(view, figure) for figure in (layout.figures if layout is not None else ())]
    blocks.append(view.leftover_table("Metrics"))
    sec.blocks = [b for b in blocks if b is not None]
    return sec


def _bars(view: MetricView, figure: ReportBars) -> Figure | None:
    """One panel per split: a bar per model and prompt style at each key, with its interval."""
    splits = view.distinct("split")
    panels = []
    for split in splits:
        series = plot_series(view, figure.metric, figure.keys, split=split)
        if series:
            panels.append((f"split {split}" if len(splits) > 1 else "", figure.ylabel, series, figure.xlabel))
    if not panels:
        return None
    return Figure(figure.name, figure.caption, plots.bar_panels(panels, ncols=min(3, len(panels))),
                  alt=figure.caption)
