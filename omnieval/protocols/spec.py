"""``ProtocolSpec``: everything the other layers know about a protocol, in one typed value.

A protocol module exports ``SPEC = ProtocolSpec(...)`` and is registered once (``omnieval.protocols``): the run
pipeline, the benchmark loader, the statistics, the report and ``omnieval datasets synth`` read this value and
nothing else of the module. A field left out has its default here, so a protocol states only what it needs; a field
of the wrong kind is refused when the spec is made, naming the protocol and the field.

What lives in a layer above the protocols (a report section with code of its own, a synthetic benchmark writer) is
named by a ``"package.module:function"`` string that the layer imports when it needs it, so a protocol module imports
only ``omnieval.core``, ``omnieval.media``, ``kernels``, polars and numpy (the import contracts in ``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from omnieval.core.prompts import DEFAULT_LAYOUT, LAYOUTS
from omnieval.core.schema import Instance, pydantic_message

if TYPE_CHECKING:  # both import polars; expanding a benchmark (and the GPU bench, which has no polars) must not
    from omnieval.core.metric_types import ProtocolMetrics
    from omnieval.core.protocol_views import ReportLayout

class NoFields(BaseModel):
    """The per-instance fields of a protocol that has none of its own (``ProtocolSpec.instance_fields``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


MediaRefs = Callable[[Any], list[tuple[str, str, str]]]
Expand = Callable[..., list[Instance]]


@dataclass(frozen=True)
class ProtocolSpec:
    """One protocol: what it reads, how it expands, what it computes and how its results are shown.

    ``name``: as written in ``benchmark.json``, run configs and the ``protocol`` column.
    ``item``: one line of ``items.jsonl`` (a pydantic model; extra fields forbidden, so typos surface named).
    ``options``: the protocol's knobs under ``protocol_options:`` in a run config (a pydantic model, all defaulted).
    ``media_refs(item)``: ``(relative path, modality, field)`` of every media file the item uses, ``field`` a dotted
    path for errors (``media.video``): the loader rejects paths leaving the benchmark, the pre-flight opens each once.
    ``validate_items(items, bench, file)``: cross-item checks a pydantic model cannot make alone; raises
    ``InputError`` naming file, item and field.
    ``expand_all(items, bench, seed, options)``: every instance of the items; stable ids, keyed randomness only
    (``core.keyed``), never order-dependent.
    ``metrics()``: the cells and metric function (``core.metric_types.ProtocolMetrics``) and what the statistics read
    besides: paired metrics, headline tables, significance tests.
    ``instance_fields``: the protocol's own per-instance fields (a pydantic model, extra fields forbidden), carried
    in ``Instance.protocol_fields`` and checked against this model by ``expand``; those named as prediction columns
    (``schema.PROTOCOL_COLUMNS``) are written flat into them. The shared ``Instance`` holds only what every protocol
    uses; a protocol without fields of its own keeps the empty default.
    ``item_local``: an item's instances never depend on the other items, so expansion may run on chunks of the items
    in parallel Ray tasks (``omnieval.run.expansion``).
    ``condition_coverage(items, options)``: the conditions that run on some items only, condition -> (items it runs
    on, items); None: every condition runs on every item.
    ``prompt_layout``: how an instance's prompt is laid out (``core.prompts.LAYOUTS``): ``options`` (context, question,
    labelled options) or ``scenes`` (the options are the inputs, each after ``Scene X.``). Every instance the protocol
    makes carries it (``Instance.layout``), so an engine renders the prompt from the instance alone.
    ``paired_matrix``: the report's compact matrix of paired differences, ``(metric, key)`` or every key (``None``).
    ``report``: the protocol's report section drawn without code of its own (``omnieval.report.generic``).
    ``report_section``: ``"package.module:function"`` of a section builder in the report layer; wins over ``report``.
    ``value_ranges``: metric -> the clause the report's introduction adds when a metric can leave [-1, 1].
    ``synthetic_benchmark``: ``"package.module:function"`` writing its synthetic benchmark, ``(out, seed,
    options: SynthOptions, overwrite) -> Path`` (``omnieval.datasets.synthetic_registry``).
    """

    name: str
    item: type[BaseModel]
    options: type[BaseModel]
    media_refs: MediaRefs
    validate_items: Callable[..., None]
    expand_all: Expand
    metrics: Callable[[], ProtocolMetrics]
    instance_fields: type[BaseModel] = NoFields
    item_local: bool = False
    condition_coverage: Callable[..., dict[str, tuple[int, int]]] | None = None
    prompt_layout: str = DEFAULT_LAYOUT
    paired_matrix: tuple[tuple[str, str | None], ...] = (("accuracy", None),)
    report: ReportLayout | None = None
    report_section: str | None = None
    value_ranges: Mapping[str, str] = field(default_factory=dict)
    synthetic_benchmark: str | None = None

    def __post_init__(self) -> None:
        where = f"protocol spec {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"protocol spec: name must be a non-empty string, got {self.name!r}")
        for name in ("item", "options", "instance_fields"):
            value = getattr(self, name)
            if not (isinstance(value, type) and issubclass(value, BaseModel)):
                raise TypeError(f"{where}: {name} must be a pydantic model class, got {value!r}")
        for name in ("media_refs", "validate_items", "expand_all", "metrics"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{where}: {name} must be callable, got {getattr(self, name)!r}")
        if self.condition_coverage is not None and not callable(self.condition_coverage):
            raise TypeError(f"{where}: condition_coverage must be callable or None")
        if self.prompt_layout not in LAYOUTS:
            raise TypeError(f"{where}: prompt_layout {self.prompt_layout!r} is not one of {', '.join(LAYOUTS)}")
        if self.report is not None and not _is_report_layout(self.report):
            raise TypeError(f"{where}: report must be a core.protocol_views.ReportLayout or None")
        for name in ("report_section", "synthetic_benchmark"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or ":" not in value):
                raise TypeError(f"{where}: {name} must be a 'package.module:function' string, got {value!r}")
        object.__setattr__(self, "paired_matrix", _pairs(self.paired_matrix, where))
        object.__setattr__(self, "value_ranges", dict(self.value_ranges))

    def expand(self, items: Sequence[BaseModel], bench, seed: int, options: BaseModel | None) -> list[Instance]:
        """``expand_all``, and a check that every instance is this protocol's, carries its prompt layout (an
        instance of another layout would be prompted as the wrong kind of question) and holds in
        ``protocol_fields`` only the fields, of the types, that ``instance_fields`` declares."""
        instances = self.expand_all(items, bench, seed, options)
        for inst in instances:
            if inst.protocol != self.name or inst.layout != self.prompt_layout:
                raise ValueError(f"protocol {self.name!r} made instance {inst.instance_id!r} with protocol "
                                 f"{inst.protocol!r} and prompt layout {inst.layout!r}; its spec says "
                                 f"{self.name!r} and {self.prompt_layout!r}")
            self._check_fields(inst)
        return instances

    def fields(self, **values) -> dict:
        """``values`` checked against ``instance_fields``, as ``Instance.protocol_fields`` holds them (fields left
        None are left out)."""
        return self.instance_fields(**values).model_dump(exclude_none=True)

    def _check_fields(self, inst: Instance) -> None:
        try:
            self.instance_fields.model_validate(inst.protocol_fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            field_name = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"protocol {self.name!r} made instance {inst.instance_id!r} with protocol field "
                             f"{field_name!r}: {pydantic_message(err)} (its spec's instance_fields: "
                             f"{self.instance_fields.__name__})") from None


def _pairs(matrix, where: str) -> tuple[tuple[str, str | None], ...]:
    pairs = tuple(tuple(pair) for pair in matrix)
    for pair in pairs:
        if len(pair) != 2 or not isinstance(pair[0], str) or not (pair[1] is None or isinstance(pair[1], str)):
            raise TypeError(f"{where}: paired_matrix entries are (metric, key or None), got {pair!r}")
    return pairs  # type: ignore[return-value]


def _is_report_layout(value) -> bool:
    from omnieval.core.protocol_views import ReportLayout

    return isinstance(value, ReportLayout)
