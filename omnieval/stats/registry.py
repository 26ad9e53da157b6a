"""Which protocols have metric definitions: ``REGISTRY`` (protocol name -> ``ProtocolMetrics``).

Filled from each protocol module's ``metrics_spec()`` on first use (``load_protocols``); other code adds or replaces
a definition with ``register``. Reading predictions (unknown protocols and conditions are refused), the table and the
paired differences all look specs up here.
"""

from __future__ import annotations

import polars as pl

from omnieval.core.metric_types import KEY_PARTS, OPEN_KEY_PARTS, ProtocolMetrics

REGISTRY: dict[str, ProtocolMetrics] = {}


def register(spec: ProtocolMetrics) -> None:
    """Add (or replace) a protocol's metric definitions."""
    REGISTRY[spec.name] = spec


def load_protocols() -> None:
    """Import the protocol modules that register metric definitions (idempotent)."""
    from omnieval.protocols import get_protocol, known_protocols

    for name in known_protocols():
        if name not in REGISTRY:
            register(get_protocol(name).metrics_spec())


def key_columns() -> tuple[str, ...]:
    """The key-part columns of the metrics and paired tables: the shared parts (``metric_types.KEY_PARTS``), then
    each registered protocol's own (``ProtocolMetrics.key_parts``, protocols by name), then the open-ended metrics'.
    The same columns whatever protocols a table holds, so the tables of several runs concatenate; a part a row does
    not set is ``""``."""
    load_protocols()
    own = [part for name in sorted(REGISTRY) for part in REGISTRY[name].key_parts]
    return tuple(dict.fromkeys((*KEY_PARTS, *own, *OPEN_KEY_PARTS)))


def unscoped(frame: pl.DataFrame) -> pl.Expr:
    """Rows of a metrics (or paired) table that are their unit's own, not restricted to a task, category or other
    scope: every registered protocol's scope parts (``ProtocolMetrics.scope_parts``) empty."""
    load_protocols()
    parts = [p for name in sorted(REGISTRY) for p in REGISTRY[name].scope_parts if p in frame.columns]
    return pl.all_horizontal([pl.col(p).fill_null("") == "" for p in dict.fromkeys(parts)] or [pl.lit(True)])
