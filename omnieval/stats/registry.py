"""Which protocols have metric definitions: ``REGISTRY`` (protocol name -> ``ProtocolMetrics``).

Filled from each protocol module's ``metrics_spec()`` on first use (``load_protocols``); other code adds or replaces
a definition with ``register``. Reading predictions (unknown protocols and conditions are refused), the table and the
paired differences all look specs up here.
"""

from __future__ import annotations

from omnieval.core.metric_types import ProtocolMetrics

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
