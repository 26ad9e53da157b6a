"""Reading predictions files and the row flags every protocol's metrics share (docs/reference.md,
Predictions).

``read_predictions`` reads Parquet / JSONL / CSV with the columns of docs/reference.md, Predictions (unknown columns
kept; a missing required column is an ``InputError`` naming file and column) and refuses rows that would give a
silently wrong number.
``prepare`` derives the row flags: ``valid`` (choice not null), ``correct``, ``abstained``, ``human_abstain``,
``invalid``, ``has_conf``, and ``errored`` / ``answered``: a row with an ``error_kind`` (media that failed to decode,
an engine or describer failure) never reached the model, or its answer never came back, so it is not the model's
answer: it stays out of every accuracy, abstention, calibration and invalid-rate denominator and is counted in
``error_rate`` instead, per kind (``metric_types.with_error_rates``).

The kind is read from the ``error_kind`` column; a file without that column (written by an older omnieval or by
another tool) gets it derived from its ``error`` text, file by file, by ``schema.with_error_kind``
(docs/reference.md, Predictions). A file with the column must give a kind exactly where it gives an error.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa

from omnieval.core.metric_types import CLUSTER, QUESTION, cluster_of, question_of
from omnieval.core.schema import DEFAULT_MODE, ERROR_KINDS, LABELS, REQUIRED_COLUMNS, InputError, with_error_kind
from omnieval.core.storage import StoredPath, readable, stored_path
from omnieval.kernels.softmax import restricted_softmax
from omnieval.protocols import metric_specs
from omnieval.stats.samples import SAMPLE, sample_index


def _read_one(path: Path | StoredPath) -> pl.DataFrame:
    """One predictions file, local or wherever a run can write (``s3://``, ``gs://``: ``omnieval.core.storage``); a
    local folder that holds ``predictions.parquet`` (a run's output, an ``omnieval import`` folder) stands for it."""
    if isinstance(path, Path) and path.is_dir() and (path / "predictions.parquet").is_file():
        path = path / "predictions.parquet"
    try:
        if not path.is_file():
            raise InputError("no such predictions file", file=path)
        source = readable(path)
    except OSError as exc:  # the filesystem cannot be reached (credentials, endpoint)
        raise InputError(f"cannot reach predictions file: {exc}", file=path) from exc
    data = source.read_bytes() if isinstance(source, Path) else source.getvalue()
    if not data:
        raise InputError("empty file: no predictions", file=path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pl.read_parquet(io.BytesIO(data))
        if suffix in (".jsonl", ".ndjson", ".json"):
            return pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        if suffix == ".csv":
            # polars calls a header alone an "empty CSV"
            if len(list(itertools.islice((line for line in data.splitlines() if line.strip()), 2))) < 2:
                raise InputError("no predictions in the file (zero rows)", file=path)
            return pl.read_csv(io.BytesIO(data), infer_schema=False)  # all strings; typed below (ids stay strings)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"cannot read predictions: {exc}", file=path) from exc
    raise InputError(f"unsupported predictions format {suffix!r} (use .parquet, .jsonl or .csv)", file=path)


def some_columns(path: str | Path | StoredPath, columns: Sequence[str]) -> pl.DataFrame:
    """The ``columns`` a predictions file has of those named, as written (not checked or typed: for a side note
    such as the official rule's reasons, ``stats.verdicts.not_computed_reasons``); a local Parquet file is read for
    those columns alone."""
    path = stored_path(path)
    if isinstance(path, Path) and path.is_dir() and (path / "predictions.parquet").is_file():
        path = path / "predictions.parquet"
    if isinstance(path, Path) and path.suffix.lower() == ".parquet":
        names = pl.read_parquet_schema(path)
        return pl.read_parquet(path, columns=[c for c in columns if c in names])
    frame = _read_one(path)
    return frame.select([c for c in columns if c in frame.columns])


def _normalise(frame: pl.DataFrame, path: Path | StoredPath) -> pl.DataFrame:
    """Required columns present and typed; confidence in [0, 1]; protocol conditions known; rows checked by
    ``_check_rows``."""
    if frame.height == 0:
        raise InputError("no predictions in the file (zero rows)", file=path)
    for column in REQUIRED_COLUMNS:
        if column not in frame.columns:
            raise InputError(f"missing required column {column!r}", file=path, field=column)
    casts = {c: pl.Utf8 for c in REQUIRED_COLUMNS if c != "confidence"}
    casts.update({"confidence": pl.Float64, **{c: pl.Int64 for c in ("k", "n_options", SAMPLE) if c in frame.columns}})
    for column in ("anchor", "task", "subtask", "category", "group", "evidence_modality", "media_unit", "error",
                   "error_kind"):
        if column in frame.columns:
            casts[column] = pl.Utf8
    for column, dtype in casts.items():
        try:
            frame = frame.with_columns(pl.col(column).cast(dtype))
        except pl.exceptions.PolarsError as exc:
            raise InputError(f"column {column!r} cannot be read as {dtype}: {exc}", file=path, field=column) \
                from exc
    frame = _with_error_kinds(frame)
    if "official_correct" in frame.columns:
        frame = frame.with_columns(official_correct=boolean_column(frame["official_correct"], path))
    if "breakdowns" in frame.columns:
        frame = frame.with_columns(breakdowns=breakdowns_column(frame["breakdowns"], path))
    if SAMPLE in frame.columns and (row := _first_bad(frame, (pl.col(SAMPLE) < 0).fill_null(False))):
        raise InputError(f"{row['where']}: sample {row[SAMPLE]} is negative (0 for the first or only sample)",
                         file=path, item=row["where"], field=SAMPLE)
    conf = frame["confidence"].drop_nulls()
    if len(conf) and (conf.min() < 0.0 or conf.max() > 1.0 or conf.is_nan().any()):
        raise InputError("confidence must lie in [0, 1]", file=path, field="confidence")
    for name, spec in metric_specs().items():
        if spec.conditions is None:
            continue
        bad = frame.filter((pl.col("protocol") == name) & ~pl.col("condition").is_in(list(spec.conditions)))
        if len(bad):
            raise InputError(f"unknown {name} condition {bad['condition'][0]!r} (expected one of "
                             f"{', '.join(spec.conditions)})", file=path, field="condition")
    _check_rows(frame, path)
    return frame


def boolean_column(column: pl.Series, path: Path | StoredPath) -> pl.Series:
    """A verdict column (``official_correct``) as booleans, from what a tool can write: booleans (Parquet, JSONL),
    ``true`` / ``false`` / ``1`` / ``0`` text (CSV; blank: null, dropped by the rule), or 0/1 numbers. Anything else
    is refused with its row: read as false it would change an accuracy silently."""
    if column.dtype == pl.Boolean or column.dtype == pl.Null:
        return column.cast(pl.Boolean)
    words = {"true": True, "1": True, "1.0": True, "false": False, "0": False, "0.0": False, "": None}
    values = []
    for row, value in enumerate(column.cast(pl.Utf8).to_list(), start=1):
        text = None if value is None else value.strip().lower()
        if text is not None and text not in words:
            raise InputError(f"row {row}: {column.name} {value!r} is not true, false or empty", file=path,
                             item=f"row {row}", field=column.name)
        values.append(None if text is None else words[text])
    return pl.Series(column.name, values, dtype=pl.Boolean)


BREAKDOWN_DTYPE = pl.List(pl.Struct({"name": pl.Utf8, "value": pl.Utf8}))
"""``breakdowns`` as every reader hands it on (``schema.BREAKDOWNS_TYPE``): ``{name, value}`` pairs."""


def breakdowns_column(column: pl.Series, path: Path | StoredPath) -> pl.Series:
    """A file's ``breakdowns`` as ``{name, value}`` pairs, from any of the forms a tool can write: the pairs
    (omnieval's Parquet), a JSON object per row (``{"duration": "long"}``: JSONL, read as a struct), or that object
    as JSON text (CSV). Blank values are left out (the item has no value for that breakdown); a name that is blank
    or holds ``=`` or ``/`` (the metric keys are ``<name>=<value>/<condition>``) is refused with its row."""
    rows = column.to_list()
    if column.dtype == pl.Utf8:
        rows = [_json_object(text, i, path) for i, text in enumerate(rows, start=1)]
    elif isinstance(column.dtype, pl.List):
        rows = [None if pairs is None else {p.get("name"): p.get("value") for p in pairs} for pairs in rows]
    elif not isinstance(column.dtype, pl.Struct) and column.null_count() < len(column):
        raise InputError(f"column 'breakdowns' is {column.dtype}; write a JSON object of name -> value per row",
                         file=path, field="breakdowns")
    return pl.Series("breakdowns", [_pairs(row, i, path) for i, row in enumerate(rows, start=1)],
                     dtype=BREAKDOWN_DTYPE)


def _json_object(text: str | None, row: int, path) -> dict | None:
    import json

    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"row {row}: breakdowns is not JSON ({exc.msg}); write an object of name -> value",
                         file=path, item=f"row {row}", field="breakdowns") from None
    if not isinstance(value, dict):
        raise InputError(f"row {row}: breakdowns is {type(value).__name__}, not an object of name -> value",
                         file=path, item=f"row {row}", field="breakdowns")
    return value


def _pairs(row: dict | None, number: int, path) -> list[dict] | None:
    """One row's breakdowns as pairs sorted by name, blank values left out; None where none is left."""
    pairs = []
    for name, value in sorted((row or {}).items(), key=lambda kv: str(kv[0])):
        if value is None or not str(value).strip():
            continue
        if not isinstance(name, str) or not name.strip() or "=" in name or "/" in name:
            raise InputError(f"row {number}: breakdown name {name!r} is blank or holds '=' or '/' (metric keys are "
                             "<name>=<value>/<condition>)", file=path, item=f"row {number}", field="breakdowns")
        pairs.append({"name": name, "value": str(value)})
    return pairs or None


def _first_bad(frame: pl.DataFrame, bad: pl.Expr) -> dict | None:
    """The first row where ``bad`` holds (null counts as bad), with ``where`` = ``"row N"`` (rows counted from 1
    in the file's order; in a CSV file, row N is on line N + 1), or None."""
    hit = frame.with_row_index("_row", offset=1).filter(bad.fill_null(True)).head(1)
    return None if hit.is_empty() else hit.row(0, named=True) | {"where": f"row {hit['_row'][0]}"}


def _check_rows(frame: pl.DataFrame, path: Path) -> None:
    """Refuse rows that would otherwise give a silently wrong number (each error names file, row and column).

    * ``protocol`` not one with metric definitions: its rows would get none of the protocol's metrics;
    * ``target`` null: every answer to it would count as wrong;
    * ``target`` or ``choice`` not an option label of its instance: the first ``n_options`` letters of A, B, C, ...
      where the file gives ``n_options``, else any single capital letter. A choice outside them can only be a
      parsing or bookkeeping mistake of the tool that wrote the file; scoring it as wrong (or as invalid) would
      hide that mistake in an accuracy, so it is refused: fix the file, or set the choice to null to count it as
      an invalid answer. Open-ended rows (``mode == 'open'``) have no choice and are not checked for one; an open
      item's rows (no options: ``target`` empty, ``n_options`` null) have no target label either;
    * ``error_kind`` not one of ``schema.ERROR_KINDS``, or set where ``error`` is not (or the other way round): the
      row's error would be counted under no kind, or a kind counted without an error.
    """
    known = sorted(metric_specs())
    if row := _first_bad(frame, ~pl.col("protocol").is_in(known)):
        raise InputError(f"{row['where']}: unknown protocol {row['protocol']!r}; metrics are defined for "
                         f"{', '.join(known)}", file=path, item=row["where"], field="protocol")
    if row := _first_bad(frame, pl.col("target").is_null()):
        raise InputError(f"{row['where']}: target is null (every answer to it would count as wrong)", file=path,
                         item=row["where"], field="target")
    if "n_options" in frame.columns:
        n = pl.col("n_options")
        if row := _first_bad(frame, n.is_not_null() & ((n < 1) | (n > len(LABELS)))):
            raise InputError(f"{row['where']}: n_options {row['n_options']} is not between 1 and {len(LABELS)}",
                             file=path, item=row["where"], field="n_options")
        labels = pl.lit(LABELS).str.slice(0, n.fill_null(len(LABELS)))
    else:
        labels = pl.lit(LABELS)
    is_open = (pl.col("mode") == "open").fill_null(False) if "mode" in frame.columns else pl.lit(False)
    open_item = is_open & (pl.col("target") == "")
    for column, skip in (("target", open_item), ("choice", pl.col("choice").is_null() | is_open)):
        value = pl.col(column)
        if row := _first_bad(frame, ~skip & ((value.str.len_chars() != 1)
                                             | ~labels.str.contains(value, literal=True))):
            count = row.get("n_options")
            allowed = ", ".join(LABELS[:count]) if count else f"one capital letter {LABELS[0]}-{LABELS[-1]}"
            raise InputError(f"{row['where']}: {column} {row[column]!r} is not an option label of its instance "
                             f"(labels: {allowed})", file=path, item=row["where"], field=column)
    kind, has_error = pl.col("error_kind"), _has_error(frame)
    if row := _first_bad(frame, (kind.is_not_null() & ~kind.is_in(ERROR_KINDS)).fill_null(False)):
        raise InputError(f"{row['where']}: error_kind {row['error_kind']!r} is not one of {', '.join(ERROR_KINDS)}",
                         file=path, item=row["where"], field="error_kind")
    if row := _first_bad(frame, (kind.is_null() == has_error)):
        what = "error is set but error_kind is null" if row["error_kind"] is None else \
            f"error_kind is {row['error_kind']!r} but error is not set"
        raise InputError(f"{row['where']}: {what}; a row has a kind exactly where it has an error (leave the "
                         "error_kind column out to have it derived from the error text)", file=path,
                         item=row["where"], field="error_kind")


def _check_duplicates(frame: pl.DataFrame) -> None:
    """One prediction per (model, prompt, mode, instance_id, sample): a file given twice, or a row written twice,
    would double every count (``sample``: which repeated sample of the instance, 0 where absent; ``stats.samples``)."""
    keys = ["model", "prompt", "_mode", "instance_id", "_sample"]
    keyed = frame.with_columns(_mode=_mode(frame), _sample=sample_index(frame))
    dup = keyed.filter(pl.len().over(keys) > 1)
    if dup.is_empty():
        return
    first = dup.filter(pl.struct(keys) == dup.select(pl.struct(keys)).row(0)[0]).head(2).to_dicts()
    a, b = first
    sample = f", sample {a['_sample']}" if a["_sample"] else ""
    raise InputError(f"duplicate prediction for model {a['model']!r}, prompt {a['prompt']!r}, mode {a['_mode']!r},"
                     f" instance {a['instance_id']!r}{sample}: {a['_file']} row {a['_row']} and {b['_file']} row "
                     f"{b['_row']} (the same file given twice?)", file=b["_file"], item=f"row {b['_row']}",
                     field="instance_id")


def _chosen_probability(logprobs: list[float | None], label: int) -> float:
    """The restricted softmax value of option ``label`` (an index; -1: the choice is not one label): NaN where
    there is none (no finite logprob, or no label); a label past the row's logprobs has none of its own (0)."""
    if label < 0:
        return float("nan")
    return restricted_softmax(list(logprobs) + [None] * (label + 1 - len(logprobs)))[label]


def fill_confidence(frame: pl.DataFrame) -> pl.DataFrame:
    """Where ``confidence`` is null but ``option_logprobs`` are given, use the restricted softmax value of the
    chosen label (method ``rs``), as the engines do when they score from logits (docs/reference.md, Prompting and
    parsing)."""
    if "option_logprobs" not in frame.columns or not isinstance(frame.schema["option_logprobs"], pl.List):
        return frame
    need = (pl.col("confidence").is_null() & pl.col("choice").is_not_null()
            & pl.col("option_logprobs").list.len().fill_null(0).gt(0))
    rows = frame.with_row_index("_row").filter(need)
    if not len(rows):
        return frame
    labels = [LABELS.find(c) if isinstance(c, str) and len(c) == 1 else -1 for c in rows["choice"]]
    conf = [_chosen_probability(values, label)
            for values, label in zip(rows["option_logprobs"].to_list(), labels, strict=True)]
    fill = pl.DataFrame({"_row": rows["_row"], "_conf": conf}, schema_overrides={"_conf": pl.Float64}) \
        .filter(pl.col("_conf").is_not_nan())
    out = frame.with_row_index("_row").join(fill, on="_row", how="left")
    return out.with_columns(
        confidence=pl.coalesce("confidence", "_conf"),
        confidence_method=pl.when(pl.col("_conf").is_not_null() & pl.col("confidence_method").is_null())
        .then(pl.lit("rs")).otherwise(pl.col("confidence_method")),
    ).drop("_row", "_conf")


def read_predictions(paths: Iterable[str | Path | StoredPath]) -> pl.DataFrame:
    """Concatenate predictions files, local paths or URIs (columns missing from some files become null; extra
    columns are kept)."""
    frames = [_normalise(_read_one(path), path).with_columns(
        _file=pl.lit(str(path)), _row=pl.int_range(1, pl.len() + 1)) for path in map(stored_path, paths)]
    if not frames:
        raise InputError("no predictions files given")
    frame = pl.concat(frames, how="diagonal_relaxed")
    _check_duplicates(frame)
    return fill_confidence(frame.drop("_file", "_row"))


def _with_error_kinds(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its ``error_kind`` column (text): the one it has, or, where it has none (a file of an older
    omnieval or another tool), the kinds ``schema.with_error_kind`` derives from its ``error`` messages."""
    if "error_kind" in frame.columns:
        return frame.with_columns(pl.col("error_kind").cast(pl.Utf8))
    if "error" not in frame.columns:
        return frame.with_columns(error_kind=pl.lit(None, dtype=pl.Utf8))
    errors = pa.table({"error": frame["error"].cast(pl.Utf8).to_arrow()})
    return frame.with_columns(error_kind=pl.from_arrow(with_error_kind(errors)["error_kind"]).cast(pl.Utf8))


def _has_error(frame: pl.DataFrame) -> pl.Expr:
    """Where ``error`` holds a message (not null, not blank)."""
    if "error" not in frame.columns:
        return pl.lit(False)
    message = pl.col("error").cast(pl.Utf8)
    return (message.is_not_null() & (message.str.strip_chars() != "")).fill_null(False)


def _mode(frame: pl.DataFrame) -> pl.Expr:
    """Every row's ``mode``, ``schema.DEFAULT_MODE`` where it is null or the column absent."""
    return pl.col("mode").fill_null(DEFAULT_MODE) if "mode" in frame.columns else pl.lit(DEFAULT_MODE)


def _error_flags() -> dict[str, pl.Expr]:
    """``errored`` (the row has an ``error_kind``) and one 0/1 column ``_error_<kind>`` per kind (the cells of
    ``error_rate``)."""
    kind = pl.col("error_kind")
    flags = {"errored": kind.is_not_null()}
    flags.update({f"_error_{name}": (kind == name).fill_null(False) for name in ERROR_KINDS})
    return flags


def _check_confidence_in_code(frame: pl.DataFrame) -> None:
    """Refuse a confidence outside [0, 1] or NaN in a frame built in code, as ``_normalise`` refuses it in a file: a
    NaN is not null to polars, so it would count as a confidence, leave ECE undefined (null) without a word and sort
    last in the RC-AUC ranking."""
    if "confidence" not in frame.columns or not frame.schema["confidence"].is_float():
        return
    conf = pl.col("confidence")
    bad = frame.with_row_index("_at").filter(conf.is_nan() | (conf < 0.0) | (conf > 1.0)).head(1)
    if len(bad):
        row = bad.row(0, named=True)
        item = row.get("instance_id") or row.get("item_id") or f"row {row['_at'] + 1}"
        raise InputError(f"confidence {row['confidence']} is not in [0, 1]", item=str(item),
                         field="confidence")


def prepare(frame: pl.DataFrame) -> pl.DataFrame:
    """Row flags shared by every protocol. ``answered``: the row has no ``error``; ``valid``: answered with a
    choice; ``invalid``: answered without one (unparseable). Invalid rows are excluded from accuracy, abstention
    and calibration and counted in ``invalid_rate``; errored rows are excluded from all of those, ``invalid_rate``
    included, and counted in ``error_rate``. ``_question``: the row's question (``metric_types.question_of``);
    ``_cluster``: its resampling unit, the question until ``stats.clusters.with_clusters`` sets another.

    Rows marked ``skipped`` (not asked: media their model cannot take, ``media_policy``) are dropped here, so they
    are in no metric's numerator or denominator, ``error_rate`` included: for the metrics, the model was never
    given those instances (paired differences and tests then match the instances both sides answered)."""
    frame = _with_error_kinds(without_skipped(frame))  # a frame not read from a file may lack the column
    _check_confidence_in_code(frame)
    frame = frame.with_columns(**_error_flags())
    answered = ~pl.col("errored")
    valid = answered & pl.col("choice").is_not_null()
    source = pl.col("answer_source").cast(pl.Utf8) if "answer_source" in frame.columns else pl.lit(None, pl.Utf8)
    return frame.with_columns(
        # chain-of-thought answers whose engine says how the choice was made; ``forced``: the reasoning named no
        # answer and the label logits after it made one (``forced_rate``)
        _cot_answer=(valid & source.is_not_null()).fill_null(False),
        forced=(valid & (source == "forced")).fill_null(False),
        answered=answered,
        valid=valid,
        invalid=answered & pl.col("choice").is_null(),
        correct=valid & (pl.col("choice") == pl.col("target")).fill_null(False),
        abstained=valid & (pl.col("choice") == pl.col("abstain_label")).fill_null(False),
        human_abstain=(pl.col("target") == pl.col("abstain_label")).fill_null(False),
        has_conf=valid & pl.col("confidence").is_not_null(),
        conf_method=pl.col("confidence_method").fill_null("unknown"),
        mode=_mode(frame),
        **{QUESTION: question_of(frame), CLUSTER: cluster_of(frame)},
    ).with_columns(**verdict_flags(frame))


def verdict_flags(frame: pl.DataFrame) -> dict[str, pl.Expr]:
    """The rows of ``metric_types.VERDICT_METRICS`` (answers read from generated text, ``scoring.verdicts``):
    ``_scored`` an answered row the robust rule read; ``_unparsed`` one it found no option in; ``_official_read``
    one the official rule read too, ``_disagree`` where the two rules took different options (none counts as an
    option), ``_official_forced`` where the official rule chose an option the text does not name (a default for an
    empty or unparseable answer); ``_official_counted`` an answered row the official rule counts (a verdict that is
    not null) and ``_official_correct`` one it counts correct. A file without the columns (an older run, another
    tool) has no such rows."""
    def text(name: str) -> pl.Expr:
        return pl.col(name).cast(pl.Utf8) if name in frame.columns else pl.lit(None, pl.Utf8)

    official = (pl.col("official_correct").cast(pl.Boolean) if "official_correct" in frame.columns
                else pl.lit(None, pl.Boolean))
    answered = ~pl.col("errored")
    scored = (answered & text("robust_source").is_not_null()).fill_null(False)
    read = (scored & text("official_source").is_not_null()).fill_null(False)
    return {"_scored": scored, "_unparsed": (scored & (text("robust_source") == "unparsed")).fill_null(False),
            "_official_read": read,
            "_disagree": (read & text("robust_choice").ne_missing(text("official_choice"))).fill_null(False),
            "_official_forced": (read & (text("official_source") == "forced")).fill_null(False),
            "_official_counted": (answered & official.is_not_null()).fill_null(False),
            "_official_correct": (answered & official).fill_null(False)}


def without_skipped(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` without the rows marked ``skipped`` (a string naming the modalities; null or empty: asked)."""
    if "skipped" not in frame.columns:
        return frame
    skipped = pl.col("skipped").cast(pl.Utf8)
    return frame.filter(skipped.is_null() | (skipped.str.strip_chars() == ""))


def error_kinds_present(frame: pl.DataFrame) -> list[str]:
    """The error kinds of a prepared frame, in ``schema.ERROR_KINDS`` order."""
    present = set(frame["error_kind"].drop_nulls().unique().to_list())
    return [kind for kind in ERROR_KINDS if kind in present]
