"""The one registry of protocols: ``PROTOCOLS`` maps a protocol's name to the module that exports its
``SPEC`` (``omnieval.protocols.spec.ProtocolSpec``). Everything else that knows about protocols (the run pipeline, the
benchmark loader, ``omnieval metrics`` / ``stats`` / ``report``, ``omnieval datasets synth``) asks this registry for
the spec (``get_protocol``) or its metric definitions (``metric_spec``); none keeps a table of its own keyed by
protocol name.

**Adding a protocol**: write a module exporting ``SPEC = ProtocolSpec(...)`` (the fields and their defaults are
documented there), then register it, in Python with ``register_protocol("name", "package.module")`` before the run or
the statistics, or for the ``omnieval`` commands with the environment variable
``OMNIEVAL_PROTOCOLS=name=package.module[,name=package.module]`` (inherited by every process they start). The Ray
tasks that expand a run's items register the driver's protocol module themselves, so the module need only be
importable where they run. ``tests/fifth_protocol.py`` is a small complete example.

The order of ``PROTOCOLS`` is the order of the report's sections and of ``omnieval datasets synth``'s choices (the
first is its default). A protocol's ``bench`` argument is the loaded ``omnieval.datasets.benchmark.Benchmark`` (root
folder, items, and the protocol's extra tables such as the dissonance anchor library).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import TYPE_CHECKING

from omnieval.core.schema import InputError
from omnieval.protocols.spec import ProtocolSpec

if TYPE_CHECKING:  # polars: a protocol's expansion runs where only its items are needed (the GPU bench)
    from omnieval.core.metric_types import ProtocolMetrics

PROTOCOLS: dict[str, str] = {
    "dissonance": "omnieval.protocols.dissonance",
    "crossmodal": "omnieval.protocols.crossmodal",
    "spectrum": "omnieval.protocols.spectrum",
    "contrastive": "omnieval.protocols.contrastive",
}
ENVIRONMENT = "OMNIEVAL_PROTOCOLS"
"""Protocols registered from the environment (``name=package.module``, comma-separated), read on the first lookup:
how an ``omnieval`` command, and every process it starts, learns a protocol of the user's."""
SPEC_ATTRIBUTE = "SPEC"
_METRICS: dict[str, ProtocolMetrics] = {}
"""Each protocol's ``SPEC.metrics()``, made once per process (the statistics ask for it per unit)."""


def register_protocol(name: str, module: str) -> None:
    """Make ``module`` (importable, ``"package.module"``) the protocol called ``name`` in this process. It is imported
    now and must export a ``ProtocolSpec`` as ``SPEC``, with ``SPEC.name == name``. Registering a name again with the
    same module does nothing; with another module it is refused (the statistics keep the first one's metric spec)."""
    _from_environment()
    if name in PROTOCOLS:
        if PROTOCOLS[name] != module:
            raise InputError(f"protocol {name!r} is already registered as module {PROTOCOLS[name]!r}; pick another "
                             f"name for {module!r}", field="protocol")
        return
    spec = _load(name, module)
    if spec.name != name:
        raise InputError(f"protocol module {module!r} is called {spec.name!r}, not {name!r}", field="protocol")
    PROTOCOLS[name] = module


def unregister_protocol(name: str) -> None:
    """Forget protocol ``name`` in this process (its module and its metric definitions); nothing for an unknown name."""
    PROTOCOLS.pop(name, None)
    _METRICS.pop(name, None)


def _load(name: str, module: str) -> ProtocolSpec:
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise InputError(f"protocol {name!r}: cannot import module {module!r} ({exc})", field="protocol") from None
    spec = getattr(loaded, SPEC_ATTRIBUTE, None)
    if not isinstance(spec, ProtocolSpec):
        raise InputError(f"protocol module {module!r} exports no {SPEC_ATTRIBUTE} = ProtocolSpec(...) (see "
                         "omnieval.protocols.spec for what a protocol defines)", field="protocol")
    return spec


_environment_read = False


def _from_environment() -> None:
    """Register the protocols ``OMNIEVAL_PROTOCOLS`` names (once per process; a bad entry is an ``InputError``)."""
    global _environment_read
    if _environment_read:
        return
    _environment_read = True
    for entry in filter(None, (part.strip() for part in os.environ.get(ENVIRONMENT, "").split(","))):
        name, sep, module = entry.partition("=")
        if not sep or not name.strip() or not module.strip():
            raise InputError(f"{ENVIRONMENT}: {entry!r} is not name=package.module", field=ENVIRONMENT)
        register_protocol(name.strip(), module.strip())


def get_protocol(name: str) -> ProtocolSpec:
    """The spec of protocol ``name``; ``KeyError`` listing the known ones otherwise."""
    _from_environment()
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r}; known protocols: {', '.join(PROTOCOLS)}")
    return _load(name, PROTOCOLS[name])


def protocol_module(name: str) -> str:
    """The module (``"package.module"``) registered as protocol ``name``: what a Ray task registers in its own
    process."""
    get_protocol(name)
    return PROTOCOLS[name]


def known_protocols() -> tuple[str, ...]:
    """The registered protocols' names, in registry order (the built-in ones first)."""
    _from_environment()
    return tuple(PROTOCOLS)


def protocol_attribute(name: str, field: str):
    """A field of protocol ``name``'s spec, or the field's default (``ProtocolSpec``) for a name registered nowhere
    in this process (a metrics file of a protocol the report's process does not know is still drawn)."""
    if name in known_protocols():
        return getattr(get_protocol(name), field)
    default = {f.name: f for f in dataclasses.fields(ProtocolSpec)}[field]
    return default.default_factory() if default.default_factory is not dataclasses.MISSING else default.default


def metric_spec(name: str) -> ProtocolMetrics | None:
    """The metric definitions of protocol ``name`` (``SPEC.metrics()``, made once), or None for an unknown name."""
    if name not in _METRICS:
        if name not in known_protocols():
            return None
        _METRICS[name] = get_protocol(name).metrics()
    return _METRICS[name]


def metric_specs() -> dict[str, ProtocolMetrics]:
    """Every registered protocol's metric definitions, in registry order."""
    return {name: metric_spec(name) for name in known_protocols()}  # type: ignore[misc]


def resolve(reference: str):
    """The object a ``"package.module:attribute"`` reference names (imported now)."""
    module, sep, attribute = reference.partition(":")
    if not sep:
        raise ValueError(f"{reference!r} is not 'package.module:attribute'")
    return getattr(importlib.import_module(module), attribute)
