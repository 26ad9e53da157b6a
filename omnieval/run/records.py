"""The typed records between the Ray stages: the request row a model stage reads, and the result it hands the row
builder.

A request row is Arrow all the way from the map that makes it (``answers.block_requests``, ``cascade``'s and the
judges' request rows) to the model stage: lists and structs, not JSON text, so the model stage reads a batch's
columns once (``batch_columns``) and every field keeps one name and type. The one text column that stays JSON is
``instance_json``: the instance's canonical form (``schema.Instance``, the plan digest's input), parsed once per batch
in the model stage (``stages.ModelCalls``).

The result of a call is the engine's own record, ``engines.base.EngineResult``, from the engine to the row builder
inside the same actor (``stages.RESULT_COLUMN``): it is never written into Arrow, and its fields keep their names in
the prediction row (``raw_text`` is the generated text from the engine to ``predictions.parquet``).

Measured with the simulated engine on the demo's dissonance benchmark (2,048 multiple-choice rows, zs and cot, no Ray;
2 cores shared with a load of about 40, best of two runs each): reading a batch's columns in the model stage went
from 20.6 to 0.9 us a row, and a row's whole hand-off (request row, batch columns, engine call, row builder, pack and
unpack) from 293 to 217 us (open-ended rows: 686 to 251 us).

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

REQUEST_FIELDS = [
    ("call", pa.string()), ("mode", pa.string()), ("prompt", pa.string()), ("instance_json", pa.string()),
    ("instance_id", pa.string()), ("media_paths", pa.list_(pa.string())), ("cascade", CASCADE_TYPE),
    ("parts", pa.list_(PART_TYPE)), ("max_new_tokens", pa.int64()), ("key", pa.string()), ("meta", META_TYPE),
    ("retry", RETRY_TYPE), ("skipped", pa.string()), ("media_noted", pa.string()), ("sample", pa.int32()),
    ("sampling", SAMPLING_TYPE),
]
"""Every column a model stage reads of a request row: ``call`` (``score`` or ``generate``), the instance
(``instance_json``, its id), the media it shows (``media_paths``: ``schema.media_ref`` of each), and for
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
    (lists stay lists, structs become dicts)."""
    return {name: table.column(name).to_pylist() for name in table.column_names}


def meta_dict(meta: dict | None) -> dict:
    """A request's ``meta`` struct as the engine gets it (``GenerationRequest.meta``): the fields that are set."""
    return {k: v for k, v in (meta or {}).items() if v is not None}
