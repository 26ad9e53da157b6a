"""One module per protocol. The contract every protocol module meets (the pipeline, the benchmark loader and
``omnieval metrics`` use nothing else):

``NAME: str``
    the protocol's name as written in ``benchmark.json``, run configs and the ``protocol`` column.
``Item: type[pydantic.BaseModel]``
    one line of ``items.jsonl`` (extra fields forbidden, so typos surface with the field named).
``Options: type[pydantic.BaseModel]``
    the protocol's knobs, set under ``protocol_options:`` in a run config (all fields defaulted).
``media_refs(item) -> list[tuple[str, str, str]]``
    ``(relative path, modality, field)`` of every media file the item uses, ``field`` as a dotted path for errors
    (``media.video``, ``options.B.input``): the loader rejects paths that leave the benchmark folder, the pre-flight
    check opens each distinct file once.
``validate_items(items, bench, file) -> None``
    cross-item checks a pydantic model cannot do alone; raises ``InputError`` naming file, item and field.
``expand_all(items, bench, seed, options) -> list[Instance]``
    every instance of the given items: stable ids, keyed randomness only (``core.keyed``), never order-dependent.
``ITEM_LOCAL: bool`` (optional, default False)
    True where an item's instances never depend on the other items, so ``expand_all`` may run on chunks of the
    items in parallel Ray tasks (``omnieval.run.expansion``); spectrum's donors are drawn across all items, so it
    expands in one task.
``metrics_spec() -> omnieval.core.metric_types.ProtocolMetrics``
    the cells and the metric function of the protocol's section of docs/reference.md.

``bench`` is the loaded ``omnieval.datasets.benchmark.Benchmark`` (root folder, items, and the protocol's extra
tables such as the dissonance anchor library).
"""

from __future__ import annotations

import importlib
from types import ModuleType

PROTOCOLS: dict[str, str] = {
    "dissonance": "omnieval.protocols.dissonance",
    "crossmodal": "omnieval.protocols.crossmodal",
    "spectrum": "omnieval.protocols.spectrum",
    "contrastive": "omnieval.protocols.contrastive",
}


def get_protocol(name: str) -> ModuleType:
    """The protocol module called ``name``; ``KeyError`` listing the known ones otherwise."""
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r}; known protocols: {', '.join(PROTOCOLS)}")
    return importlib.import_module(PROTOCOLS[name])


def known_protocols() -> tuple[str, ...]:
    return tuple(PROTOCOLS)
