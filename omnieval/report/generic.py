"""Report section of a protocol with no section of its own: accuracy per condition, the invalid rate, and every
other metric row in a long table."""

from __future__ import annotations

from omnieval.report.blocks import Section
from omnieval.report.build import ProtocolInput
from omnieval.report.tables import Col, MetricView, error_cols


def section(data: ProtocolInput) -> Section | None:
    view = MetricView(data.metrics)
    if not view:
        return None
    cols = [Col(c, "accuracy", c) for c in view.leaves("accuracy")]
    cols.append(Col("invalid", "invalid_rate", "", scale=None))
    cols += error_cols(view)
    sec = Section(data.protocol, f"Protocol {data.protocol}")
    errors = " and of errors" if view.has("error_rate") else ""
    table = view.table(f"Accuracy by condition, share of invalid answers{errors}", cols, name="accuracy")
    sec.blocks = [b for b in (table, view.leftover_table("Metrics")) if b is not None]
    return sec
