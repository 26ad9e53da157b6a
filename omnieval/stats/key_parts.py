"""The key-part columns of the metrics and paired tables, gathered from every registered protocol's metric spec
(``omnieval.protocols.metric_specs``): what lets readers select rows by named parts instead of parsing a key."""

from __future__ import annotations

import polars as pl

from omnieval.core.metric_types import KEY_PARTS, OPEN_KEY_PARTS
from omnieval.protocols import metric_specs


def key_columns() -> tuple[str, ...]:
    """The key-part columns of the metrics and paired tables: the shared parts (``metric_types.KEY_PARTS``), then
    each registered protocol's own (``ProtocolMetrics.key_parts``, protocols by name), then the open-ended metrics'.
    The same columns whatever protocols a table holds, so the tables of several runs concatenate; a part a row does
    not set is ``""``."""
    specs = metric_specs()
    own = [part for name in sorted(specs) for part in specs[name].key_parts]
    return tuple(dict.fromkeys((*KEY_PARTS, *own, *OPEN_KEY_PARTS)))


def unscoped(frame: pl.DataFrame) -> pl.Expr:
    """Rows of a metrics (or paired) table that are their unit's own, not restricted to a task, category or other
    scope: every registered protocol's scope parts (``ProtocolMetrics.scope_parts``) empty."""
    specs = metric_specs()
    parts = [p for name in sorted(specs) for p in specs[name].scope_parts if p in frame.columns]
    return pl.all_horizontal([pl.col(p).fill_null("") == "" for p in dict.fromkeys(parts)] or [pl.lit(True)])
