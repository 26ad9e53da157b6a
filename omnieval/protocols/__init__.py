"""One module per protocol, and one registration: ``PROTOCOLS`` maps a protocol's name to its module. Everything
else that knows about protocols (the run pipeline, the benchmark loader, ``omnieval metrics`` / ``stats`` /
``report``, ``omnieval datasets synth``) loops over this registry and reads the module's attributes below; none
keeps a table of its own keyed by protocol name.

**Adding a protocol**: write a module with the required attributes (and any optional ones), then register it, in
Python with ``register_protocol("name", "package.module")`` before the run or the statistics, or for the
``omnieval`` commands with the environment variable ``OMNIEVAL_PROTOCOLS=name=package.module[,name=package.module]``
(inherited by every process they start). The Ray tasks that expand a run's items register the driver's protocol
module themselves, so the module need only be importable where they run. ``tests/fifth_protocol.py`` is a small
complete example.
The module may import only ``omnieval.core``, ``omnieval.media``, ``kernels``, polars and numpy (the import
contracts in ``pyproject.toml``): what it tells the statistics and the report is data, or functions over polars
frames and cell means; what lives in an upper layer (a report section with code of its own, a synthetic benchmark
generator) it names by a ``"package.module:function"`` string that the layer imports when it needs it.

Required:

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
``metrics_spec() -> omnieval.core.metric_types.ProtocolMetrics``
    the cells and metric function of the protocol (docs/reference.md), and what the statistics read besides:
    ``paired`` (the metrics of the paired differences; default accuracy per condition), ``headlines`` (the tables
    ``omnieval metrics`` prints; default none), ``tests`` (significance tests on its conditions,
    ``core.protocol_views.ConditionTests``; default none: the permutation tests every protocol gets).

Optional (``OPTIONAL`` holds the defaults):

``ITEM_LOCAL: bool = False``
    True where an item's instances never depend on the other items, so ``expand_all`` may run on chunks of the
    items in parallel Ray tasks (``omnieval.run.expansion``); spectrum's donors are drawn across all items, so it
    expands in one task.
``PAIRED_MATRIX: tuple[tuple[str, str | None], ...] = (("accuracy", None),)``
    the columns of the report's compact matrix of paired differences: ``(metric, key)``, or every key of the metric
    (``None``).
``REPORT: core.protocol_views.ReportLayout | None = None``
    the title, intro, tables and figures of the protocol's report section, drawn without code of its own
    (``omnieval.report.generic``); without it the section is "Protocol <name>": accuracy per condition and every
    other metric row.
``REPORT_SECTION: str | None = None``
    ``"package.module:function"`` of a section builder in the report layer (``(ProtocolInput) -> Section | None``),
    for a section that needs code (the four built-in protocols'); it wins over ``REPORT``.
``VALUE_RANGES: dict[str, str] = {}``
    metric -> the clause the report's introduction adds when a metric of the run can leave [-1, 1].
``condition_coverage(items, options) -> dict[str, tuple[int, int]]`` (default None: every condition runs on every
    item)
    the conditions that run on some items only (spectrum's ``<m>_as_text``, on the items with a text stand-in):
    condition -> (items it runs on, items). A run reports the others as skipped for the condition (the run's summary,
    ``run.json``'s ``skipped.conditions``).
``SYNTHETIC_BENCHMARK: str | None = None``
    ``"package.module:function"`` of the writer of a synthetic benchmark, ``(out, seed, options: SynthOptions,
    overwrite) -> Path`` (``omnieval.datasets.synthetic_registry``): what ``omnieval datasets synth --protocol``
    writes.

The order of ``PROTOCOLS`` is the order of the report's sections and of ``omnieval datasets synth``'s choices (the
first is its default). ``bench`` is the loaded ``omnieval.datasets.benchmark.Benchmark`` (root folder, items, and the
protocol's extra tables such as the dissonance anchor library).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from omnieval.core.schema import InputError

PROTOCOLS: dict[str, str] = {
    "dissonance": "omnieval.protocols.dissonance",
    "crossmodal": "omnieval.protocols.crossmodal",
    "spectrum": "omnieval.protocols.spectrum",
    "contrastive": "omnieval.protocols.contrastive",
}
ENVIRONMENT = "OMNIEVAL_PROTOCOLS"
"""Protocols registered from the environment (``name=package.module``, comma-separated), read on the first lookup:
how an ``omnieval`` command, and every process it starts, learns a protocol of the user's."""
REQUIRED = ("NAME", "Item", "Options", "media_refs", "validate_items", "expand_all", "metrics_spec")
OPTIONAL: dict[str, object] = {
    "ITEM_LOCAL": False,
    "PAIRED_MATRIX": (("accuracy", None),),
    "REPORT": None,
    "REPORT_SECTION": None,
    "VALUE_RANGES": {},
    "SYNTHETIC_BENCHMARK": None,
    "condition_coverage": None,
}


def register_protocol(name: str, module: str) -> None:
    """Make ``module`` (importable, ``"package.module"``) the protocol called ``name`` in this process. It is imported
    now and must define every ``REQUIRED`` attribute, with ``NAME == name``. Registering a name again with the same
    module does nothing; with another module it is refused (the statistics keep the first one's metric spec)."""
    _from_environment()
    if name in PROTOCOLS:
        if PROTOCOLS[name] != module:
            raise InputError(f"protocol {name!r} is already registered as module {PROTOCOLS[name]!r}; pick another "
                             f"name for {module!r}", field="protocol")
        return
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise InputError(f"protocol {name!r}: cannot import module {module!r} ({exc})", field="protocol") from None
    missing = [attr for attr in REQUIRED if not hasattr(loaded, attr)]
    if missing:
        raise InputError(f"protocol module {module!r} lacks {', '.join(missing)} (see omnieval.protocols for what a "
                         "protocol module defines)", field="protocol")
    if loaded.NAME != name:
        raise InputError(f"protocol module {module!r} is called {loaded.NAME!r}, not {name!r}", field="protocol")
    PROTOCOLS[name] = module


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


def get_protocol(name: str) -> ModuleType:
    """The protocol module called ``name``; ``KeyError`` listing the known ones otherwise."""
    _from_environment()
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r}; known protocols: {', '.join(PROTOCOLS)}")
    return importlib.import_module(PROTOCOLS[name])


def known_protocols() -> tuple[str, ...]:
    """The registered protocols' names, in registry order (the built-in ones first)."""
    _from_environment()
    return tuple(PROTOCOLS)


def protocol_attribute(name: str, attribute: str):
    """An optional attribute of protocol ``name``, or its default (``OPTIONAL``); the default too for a name with
    no module here (metric definitions registered by code alone, ``omnieval.stats.registry.register``)."""
    default = OPTIONAL[attribute]
    if name not in known_protocols():
        return default
    return getattr(get_protocol(name), attribute, default)


def resolve(reference: str):
    """The object a ``"package.module:attribute"`` reference names (imported now)."""
    module, sep, attribute = reference.partition(":")
    if not sep:
        raise ValueError(f"{reference!r} is not 'package.module:attribute'")
    return getattr(importlib.import_module(module), attribute)

