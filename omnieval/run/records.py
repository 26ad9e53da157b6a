"""The typed records between the Ray stages: the request row a model stage reads, and the result it hands the row
builder.

A request row is Arrow all the way from the map that makes it (``answers.block_requests``, ``cascade``'s and the
judges' request rows) to the model stage: lists and structs, not JSON text, so the model stage reads a batch's
columns once (``batch_columns``) and every field keeps one name and type. The instance itself is a struct
(``INSTANCE_TYPE``), read back into a ``schema.Instance`` once per instance and batch in the model stage
(``stages.ModelCalls``); the plan digest is made from the ``Instance`` where it is expanded
(``expansion.digest_text``), never from this record.

The result of a call is the engine's own record, ``engines.base.EngineResult``, from the engine to the row builder
inside the same actor (``stages.RESULT_COLUMN``): it is never written into Arrow, and its fields keep their names in
the prediction row (``raw_text`` is the generated text from the engine to ``predictions.parquet``).

Measured with the simulated engine on the demo's dissonance benchmark (2,048 multiple-choice rows, zs and cot, no Ray;
2 cores shared with a load of about 40, best of two runs each): reading a batch's columns in the model stage went
from 20.6 to 0.9 us a row, and a row's whole hand-off (request row, batch columns, engine call, row builder, pack and
unpack) from 293 to 217 us (open-ended rows: 686 to 251 us). With the instance a struct instead of JSON text (the
same 2,048 rows, 1,024 instances; load about 10, alternate runs of both, best of three each): the hand-off went
from 213-225 to 194-216 us a row; reading a batch's columns costs more (6-10 to ~33 us: the struct, once per
instance), no JSON is parsed or written, and the request rows take the instance from the block in Arrow.

docs/architecture.md, "The one picture", names the record at each arrow.
"""

from __future__ import annotations

import pyarrow as pa

PART_TYPE = pa.struct([("kind", pa.string()), ("text", pa.string()), ("modality", pa.string()),
                       ("path", pa.string())])
"""One prompt part of a generate request (``prompts.PromptPart``): media by path, or text."""

META_TYPE = pa.struct([("task", pa.string()), ("style", pa.string()), ("modality", pa.string()),
                       ("path", pa.string()), ("caption", pa.string()), ("reference", pa.string()),
                       ("answer", pa.string()), ("abstention", pa.bool_()),
                       ("reference_is_abstention", pa.bool_()), ("question", pa.string())])
"""What a generate request is for (``GenerationRequest.meta``): ``task`` (``answer``, ``judge``, ``rate``,
``describe``) and the fields of that task (a rating judge reads the ``question`` asked); the engine gets the fields
that are set (``meta_dict``)."""

RETRY_TYPE = pa.struct([("suffix", pa.string()), ("words", pa.list_(pa.string())), ("key", pa.string())])
"""A generate request's strict-verdict retry: asked once more with ``suffix`` when the reply is none of ``words``."""

SAMPLING_TYPE = pa.struct([("seed", pa.uint64()), ("temperature", pa.float64()), ("top_p", pa.float64())])
"""A repeated sample's draw (``answers.SampleDraws``): its 64-bit keyed seed, temperature and top_p."""

CASCADE_TYPE = pa.struct([("cascade", pa.string()), ("intermediate_text", pa.string()),
                          ("stage_engines", pa.string())])
"""An answering row's cascade columns (``cascade.cascade_instances``), null where no describer stood in."""

PAIRS_TYPE = pa.list_(pa.struct([("name", pa.string()), ("value", pa.string())]))
"""A name -> value map in the order it was made (``Instance.donors``, a breakdowns value)."""

PROTOCOL_FIELD_TYPE = pa.struct([("name", pa.string()), ("text", pa.string()), ("number", pa.int64()),
                                 ("flag", pa.bool_()), ("pairs", PAIRS_TYPE)])
"""One of ``Instance.protocol_fields``: its value in the one of ``text``, ``number``, ``flag`` or ``pairs`` that its
type takes (``schema.ProtocolValue``), the others null; a field with none set is None."""

INSTANCE_TYPE = pa.struct([
    ("instance_id", pa.string()), ("item_id", pa.string()), ("protocol", pa.string()), ("benchmark", pa.string()),
    ("split", pa.string()), ("condition", pa.string()), ("segments", pa.list_(PART_TYPE)),
    ("question", pa.string()), ("option_labels", pa.list_(pa.string())), ("option_texts", pa.list_(pa.string())),
    ("target", pa.string()), ("abstain_label", pa.string()), ("task", pa.string()), ("category", pa.string()),
    ("option_segments", pa.list_(PART_TYPE)), ("protocol_fields", pa.list_(PROTOCOL_FIELD_TYPE)),
    ("simulation_hints", pa.list_(pa.struct([("percept", pa.string()), ("label", pa.string())]))),
    ("donors", PAIRS_TYPE), ("media_unit", pa.string()), ("layout", pa.string()), ("reference", pa.string()),
    ("judge_question", pa.string()), ("rated", pa.bool_()),
])
"""An instance (``schema.Instance``) as the instance blocks and request rows carry it: every field typed, maps as
lists of pairs in their order; ``instance_record`` writes one, ``instance_from_record`` reads it back."""


def instance_record(inst) -> dict:
    """``inst`` (a ``schema.Instance``) as an ``INSTANCE_TYPE`` value."""
    data = inst.model_dump()
    data["protocol_fields"] = [_protocol_field(k, v) for k, v in inst.protocol_fields.items()]
    data["simulation_hints"] = [{"percept": k, "label": v} for k, v in inst.simulation_hints.items()]
    data["donors"] = _pairs(inst.donors)
    return data


def instance_from_record(record: dict):
    """The ``schema.Instance`` of an ``INSTANCE_TYPE`` value (its dict, as ``batch_columns`` gives it)."""
    from omnieval.core.schema import Instance

    data = dict(record)
    data["protocol_fields"] = {f["name"]: _field_value(f) for f in record["protocol_fields"] or []}
    data["simulation_hints"] = {h["percept"]: h["label"] for h in record["simulation_hints"] or []}
    data["donors"] = None if record["donors"] is None else {p["name"]: p["value"] for p in record["donors"]}
    return Instance.model_validate(data)


def _pairs(mapping: dict | None) -> list[dict] | None:
    return None if mapping is None else [{"name": k, "value": v} for k, v in mapping.items()]


def _protocol_field(name: str, value) -> dict:
    field = {"name": name, "text": None, "number": None, "flag": None, "pairs": None}
    if isinstance(value, bool):
        field["flag"] = value
    elif isinstance(value, int):
        field["number"] = value
    elif isinstance(value, str):
        field["text"] = value
    elif isinstance(value, dict):
        field["pairs"] = _pairs(value)
    elif value is not None:
        raise TypeError(f"protocol field {name!r}: a {type(value).__name__} is no ProtocolValue")
    return field


def _field_value(field: dict):
    if field["pairs"] is not None:
        return {p["name"]: p["value"] for p in field["pairs"]}
    for kind in ("flag", "number", "text"):
        if field[kind] is not None:
            return field[kind]
    return None


REQUEST_FIELDS = [
    ("call", pa.string()), ("mode", pa.string()), ("prompt", pa.string()), ("instance", INSTANCE_TYPE),
    ("instance_id", pa.string()), ("media_paths", pa.list_(pa.string())), ("cascade", CASCADE_TYPE),
    ("parts", pa.list_(PART_TYPE)), ("max_new_tokens", pa.int64()), ("key", pa.string()), ("meta", META_TYPE),
    ("retry", RETRY_TYPE), ("skipped", pa.string()), ("media_noted", pa.string()), ("sample", pa.int32()),
    ("sampling", SAMPLING_TYPE),
]
"""Every column a model stage reads of a request row: ``call`` (``score`` or ``generate``), the instance
(``instance``, its id), the media it shows (``media_paths``: ``schema.media_ref`` of each), and for
``generate`` its ``parts``, token budget, ``key``, ``meta`` and ``retry``. A row may carry further columns (its
run, the judged prediction's names) that ride along to its row builder."""

REQUEST_SCHEMA = pa.schema(REQUEST_FIELDS)


def request_schema(names, extra: dict[str, pa.DataType] | None = None) -> pa.Schema:
    """The schema of request rows with the columns ``names`` (``REQUEST_FIELDS``' types) and ``extra`` ones."""
    types = dict(REQUEST_FIELDS) | (extra or {})
    return pa.schema([(name, types[name]) for name in names])


def request_rows_table(rows: list[dict], extra: dict[str, pa.DataType] | None = None) -> pa.Table:
    """Request rows (dicts of plain values) as an Arrow table: the request columns they use, with their types,
    and ``extra`` columns typed as given; a column neither names is refused (a misspelt field would be lost)."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    unknown = [n for n in names if n not in dict(REQUEST_FIELDS) and n not in (extra or {})]
    if unknown:
        raise ValueError(f"request rows: no type for the column(s) {', '.join(unknown)} (run/records.py)")
    schema = request_schema(names, extra)
    _check_struct_fields(rows, schema)
    return pa.Table.from_pylist(rows, schema=schema)


def _check_struct_fields(rows: list[dict], schema: pa.Schema) -> None:
    """Refuse a struct value with a field its type does not name: Arrow would drop it without a word."""
    for field in schema:
        if not pa.types.is_struct(field.type):
            continue
        known = {field.type.field(i).name for i in range(field.type.num_fields)}
        for row in rows:
            value = row.get(field.name)
            extra = sorted(set(value) - known) if isinstance(value, dict) else []
            if extra:
                raise ValueError(f"request rows: {field.name} has no field {', '.join(extra)} (run/records.py)")


def batch_columns(table: pa.Table) -> dict[str, list]:
    """A batch of request rows as plain Python values, column by column: read once per batch by the model stage
    (lists stay lists, structs become dicts). The ``instance`` struct is read once per instance (``_instances``)."""
    return {name: _instances(table) if name == "instance" else table.column(name).to_pylist()
            for name in table.column_names}


def _instances(table: pa.Table) -> list:
    """The ``instance`` column's dicts, each instance read from Arrow once and shared by its rows (its modes,
    prompt styles and samples). An instance is named by its id and, where rows of several runs share a pipeline,
    its run's ``media_scope``: ids are unique within a run."""
    column = table.column("instance")
    if "instance_id" not in table.column_names:
        return column.to_pylist()
    ids = table.column("instance_id").to_pylist()
    scopes = table.column("media_scope").to_pylist() if "media_scope" in table.column_names else [None] * len(ids)
    first: dict[tuple, int] = {}
    for i, key in enumerate(zip(scopes, ids, strict=True)):
        if key[1] is not None:
            first.setdefault(key, i)
    read = dict(zip(first.values(), column.take(pa.array(list(first.values()), pa.int64())).to_pylist(),
                    strict=True))
    return [read[first[key]] if key[1] is not None else column[i].as_py()
            for i, key in enumerate(zip(scopes, ids, strict=True))]


def meta_dict(meta: dict | None) -> dict:
    """A request's ``meta`` struct as the engine gets it (``GenerationRequest.meta``): the fields that are set."""
    return {k: v for k, v in (meta or {}).items() if v is not None}
