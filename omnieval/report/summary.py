"""What the report shows of a run's prediction rows, as small aggregate tables: the report never holds the rows.

A sweep's runs hold tens of millions of rows, but the sections that read them need only counts: the runs table
(rows, skipped rows per model and modality, the protocols, models, prompts and splits), what each model was shown
(``report.shown``: the distribution of each shown figure), the cascades (``report.open_ended.cascades_of``), why an
official rule was not computed (``report.verdicts.not_computed``) and the reliability diagram
(``report.dissonance``: confidence and correctness per confidence bin). ``RowSummary`` holds one aggregate frame for
each, every one grouped by ``protocol`` (so a protocol's share is a filter) and carrying ``first``, the position of
the first row of its group (so that whatever the sections list in order of first appearance keeps that order).

How the aggregates are made, memory bounded by their size, not by the rows:

* a local Parquet file: one lazy scan of the columns needed (``pl.scan_parquet``, column pushdown), grouped and
  collected by polars' streaming engine; a confidence left to the option logprobs is filled as the statistics fill it
  (``stats.read.fill_confidence``, row by row) on each morsel of the stream;
* a Parquet file on remote storage (``s3://``, ``gs://``: ``core.storage.StoredPath``): read batch by batch
  (``pyarrow.parquet.ParquetFile.iter_batches``), each batch filled and aggregated the same way, the partial
  aggregates added up;
* another format (JSONL, CSV: small by nature), or a frame of rows already in memory: read whole, then aggregated.

Every aggregate is a count, a sum or a least row position, so partial aggregates (batches, files) add up to the
whole exactly; a median is taken from the count of each value (``median``), not from the values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from omnieval.core.schema import SHOWN_COLUMNS
from omnieval.core.storage import StoredPath
from omnieval.scoring.base import NOT_COMPUTED

N_BINS = 10
"""Equal-width confidence bins of the reliability diagram."""
TOKEN_MODALITIES = ("video", "audio", "image")
CELL_KEYS = ("protocol", "model", "prompt", "split")
TEXT_COLUMNS = (*CELL_KEYS, "skipped", "cascade", "stage_engines", "video_size", "choice", "target",
                "confidence_method", "official_how")
NUMBER_COLUMNS = ("video_frames", "audio_seconds", "prompt_tokens", "confidence")
READ_COLUMNS = (*TEXT_COLUMNS, *NUMBER_COLUMNS, "media_tokens", "option_logprobs")
"""The prediction columns a summary reads (of those a file has); every other column stays on disk."""
SHOWN_FIGURES = ("video_frames", "audio_seconds", *(f"{m}_tokens" for m in TOKEN_MODALITIES), "prompt_tokens")
"""The figures of ``report.shown`` summarised as a count per value (``RowSummary.shown``)."""
BATCH_ROWS = 250_000
"""Rows per batch where a file is read batch by batch."""


@dataclass(frozen=True)
class RowSummary:
    """The aggregates of a run's prediction rows (or, pooled for a protocol, of several runs': then every frame has
    a ``run`` column and ``first`` orders the runs as given). ``n``: rows; ``first``: least row position.

    * ``cells``: protocol, model, prompt, split, n, first;
    * ``skipped``: protocol, model, skipped (the modalities not asked, ``video+audio``), n, first;
    * ``asked``: protocol, model, n (rows asked: not skipped), said (of them, rows that say what was shown), first;
    * ``shown``: protocol, model, figure (``SHOWN_FIGURES``), value, n: how many rows asked show each value;
    * ``sizes``: protocol, model, video_size, n;
    * ``cascades``: protocol, model, cascade, stages, first;
    * ``not_computed``: protocol, prompt, split, reason (the row's ``official_how``), first;
    * ``reliability``: protocol, split, method, model, prompt, bin, conf_sum, conf_n, correct_sum, correct_n, n,
      first: rows with a choice and a confidence per confidence bin.

    ``rows``: the rows in all; ``columns``: the prediction columns any of the files has (a section whose columns no
    file has shows nothing)."""

    rows: int
    columns: frozenset[str]
    cells: pl.DataFrame
    skipped: pl.DataFrame
    asked: pl.DataFrame
    shown: pl.DataFrame
    sizes: pl.DataFrame
    cascades: pl.DataFrame
    not_computed: pl.DataFrame
    reliability: pl.DataFrame

    def has(self, *columns: str) -> bool:
        return all(c in self.columns for c in columns)

    def frames(self) -> dict[str, pl.DataFrame]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("rows", "columns")}

    def height(self) -> int:
        """Rows of all the aggregate frames together: what the summary holds, whatever the rows it summarises."""
        return sum(frame.height for frame in self.frames().values())

    def rows_of(self, protocol: str) -> int:
        return int(self.cells.filter(pl.col("protocol") == protocol)["n"].sum())

    @staticmethod
    def pooled(parts: list[tuple[str, RowSummary]], protocol: str) -> RowSummary | None:
        """The rows of ``protocol`` in each (run label, summary), with ``run``: what a protocol's sections read of
        several runs side by side; positions follow the runs in the order given. None where no run has a row of
        it."""
        kept = [(label, s) for label, s in parts if s.rows_of(protocol)]
        if not kept:
            return None
        pooled: dict[str, list[pl.DataFrame]] = {}
        offset = 0
        for label, summary in kept:
            for name, frame in summary.frames().items():
                part = frame.filter(pl.col("protocol") == protocol)
                if "run" not in part.columns:
                    part = part.with_columns(run=pl.lit(label, pl.Utf8))
                if "first" in part.columns:
                    part = part.with_columns(pl.col("first") + offset)
                pooled.setdefault(name, []).append(part)
            offset += summary.rows
        frames = {name: pl.concat(parts_of, how="vertical_relaxed") for name, parts_of in pooled.items()}
        columns = frozenset().union(*(s.columns for _, s in kept)) | {"run"}
        return RowSummary(rows=sum(s.rows_of(protocol) for _, s in kept), columns=columns, **frames)


def summarise(paths: Iterable[Path | StoredPath]) -> RowSummary:
    """The summary of a run's predictions files, read in the order given (row positions run on from one file to
    the next, as if the files were one table)."""
    partials: list[dict[str, pl.DataFrame]] = []
    offset, columns = 0, set()
    for path in paths:
        made, rows, present = _summarise_file(path, offset)
        partials += made
        offset += rows
        columns |= present
    return _merged(partials, offset, columns)


def summarise_frame(frame: pl.DataFrame, run: str | None = None) -> RowSummary:
    """The summary of rows already in memory (a small JSONL or CSV file read whole, a table built by hand);
    ``run``: the run label where the frame has no ``run`` column and one is wanted."""
    from omnieval.stats.read import fill_confidence

    frame = fill_confidence(frame.select(c for c in (*READ_COLUMNS, "run") if c in frame.columns))
    if run is not None and "run" not in frame.columns:
        frame = frame.with_columns(run=pl.lit(run, pl.Utf8))
    extra = ("run",) if "run" in frame.columns else ()
    lazy = _typed(frame.lazy().with_row_index("_row"), set(frame.columns), extra)
    made = _collect(_aggregates(lazy, extra), streaming=False)
    return _merged([made], frame.height, set(frame.columns), extra)


def _summarise_file(path: Path | StoredPath, offset: int) -> tuple[list[dict[str, pl.DataFrame]], int, set[str]]:
    """The partial aggregates of one file, its row count and its columns."""
    if path.suffix.lower() != ".parquet":
        from omnieval.stats.read import read_predictions

        frame = read_predictions([path])
        frame = frame.select(c for c in READ_COLUMNS if c in frame.columns)
        made = summarise_frame(frame)
        return [_shifted(made.frames(), offset)], frame.height, set(frame.columns)
    schema = _schema(path)
    present = {c for c in READ_COLUMNS if c in schema}
    if isinstance(path, Path):
        lazy = _filled(_scan(path, sorted(present)), schema).with_row_index("_row", offset=offset)
        return [_collect(_aggregates(_typed(lazy, present)), streaming=True)], _row_count(path), present
    made, rows = [], 0
    for batch in _batches(path, sorted(present)):
        made.append(_shifted(summarise_frame(batch).frames(), offset + rows))
        rows += batch.height
    return made, rows, present


def _scan(path: Path, columns: list[str]) -> pl.LazyFrame:
    """A lazy scan of ``columns`` of a local Parquet file (what is not named is never read)."""
    return pl.scan_parquet(path).select(columns)


def _filled(lazy: pl.LazyFrame, schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    """The rows with a confidence left to the option logprobs filled as the statistics fill it
    (``stats.read.fill_confidence``, method ``rs``), morsel by morsel as the scan streams (the fill is row by row;
    a morsel with no such row costs one check); a file with no such row (a first scan of three columns says) is
    left as it is."""
    if not isinstance(schema.get("option_logprobs"), pl.List) or "confidence" not in schema:
        return lazy
    from omnieval.stats.read import fill_confidence

    need = (pl.col("confidence").is_null() & pl.col("choice").is_not_null()
            & pl.col("option_logprobs").list.len().fill_null(0).gt(0))
    if not lazy.select(need.any()).collect(engine="streaming").item():  # most often: the engine gave confidences
        return lazy
    method = pl.col("confidence_method").cast(pl.Utf8) if "confidence_method" in schema else pl.lit(None, pl.Utf8)

    def fill(rows: pl.Series) -> pl.Series:
        frame = rows.struct.unnest()
        if not frame["_need"].any():
            return pl.Series("_filled", [None] * len(frame), dtype=pl.Float64)
        frame = frame.with_columns(confidence=pl.lit(None, pl.Float64), confidence_method=pl.lit(None, pl.Utf8))
        return fill_confidence(frame)["confidence"].alias("_filled")

    filled = pl.struct(need.alias("_need"), "choice", "option_logprobs").map_batches(
        fill, return_dtype=pl.Float64, is_elementwise=True).alias("_filled")
    return lazy.with_columns(filled).with_columns(
        confidence=pl.coalesce(pl.col("confidence").cast(pl.Float64), "_filled"),
        confidence_method=pl.when(pl.col("_filled").is_not_null() & method.is_null()).then(pl.lit("rs"))
        .otherwise(method)).drop("_filled")


def _schema(path: Path | StoredPath) -> dict[str, pl.DataType]:
    import pyarrow.parquet as pq

    if isinstance(path, Path):
        return dict(pl.read_parquet_schema(path))
    with path.fs.open_input_file(path.path) as f:
        return dict(pl.from_arrow(pq.read_schema(f).empty_table()).schema)


def _row_count(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def _batches(path: Path | StoredPath, columns: list[str]) -> Iterator[pl.DataFrame]:
    """The file's ``columns``, ``BATCH_ROWS`` rows at a time (local, or opened on its filesystem: nothing is read
    whole)."""
    import pyarrow.parquet as pq

    handle = open(path, "rb") if isinstance(path, Path) else path.fs.open_input_file(path.path)
    with handle as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=BATCH_ROWS, columns=columns):
            yield pl.from_arrow(batch)


def _typed(lazy: pl.LazyFrame, present: set[str], extra: tuple[str, ...] = ()) -> pl.LazyFrame:
    """The columns the aggregates read, with one type each; those the rows lack, null."""
    text = [(pl.col(c).cast(pl.Utf8) if c in present else pl.lit(None, pl.Utf8)).alias(c) for c in TEXT_COLUMNS]
    numbers = [(pl.col(c).cast(pl.Float64) if c in present else pl.lit(None, pl.Float64)).alias(c)
               for c in NUMBER_COLUMNS]
    kind = lazy.collect_schema().get("media_tokens") if "media_tokens" in present else None
    held = {f.name for f in kind.fields} if isinstance(kind, pl.Struct) else set()  # a null column holds none
    fields_of = [(pl.col("media_tokens").struct.field(m).cast(pl.Float64) if m in held else pl.lit(None, pl.Float64))
                 .alias(f"{m}_tokens") for m in TOKEN_MODALITIES]
    said = pl.any_horizontal(*(pl.col(c).is_not_null() if c in present else pl.lit(False) for c in SHOWN_COLUMNS))
    return lazy.select("_row", *extra, *text, *numbers, *fields_of, said.alias("_said"))


def _aggregates(rows: pl.LazyFrame, extra: tuple[str, ...] = ()) -> dict[str, pl.LazyFrame]:
    """One lazy aggregate per ``RowSummary`` frame, over typed rows (``_typed``)."""
    first = pl.col("_row").min().alias("first")
    n = pl.len().alias("n")
    skipped = pl.col("skipped")
    asked = rows.filter(skipped.is_null() | (skipped == ""))
    by = [*extra, "protocol", "model"]
    shown = [asked.filter(pl.col(f).is_not_null()).group_by(*by, pl.col(f).alias("value"))
             .agg(n).with_columns(figure=pl.lit(f)) for f in SHOWN_FIGURES]
    how = pl.col("official_how")
    valid = rows.filter(pl.col("choice").is_not_null() & pl.col("confidence").is_not_null()).with_columns(
        method=pl.col("confidence_method").fill_null("unknown"),
        correct=(pl.col("choice") == pl.col("target")).cast(pl.Float64),
        bin=(pl.col("confidence") * N_BINS).floor().clip(0, N_BINS - 1).cast(pl.Int64))
    return {
        "cells": rows.group_by(*extra, *CELL_KEYS).agg(n, first),
        "skipped": rows.filter(skipped.is_not_null() & (skipped != "")).group_by(*by, "skipped").agg(n, first),
        "asked": asked.group_by(*by).agg(n, pl.col("_said").sum().cast(pl.Int64).alias("said"), first),
        "shown": pl.concat(shown).select(*by, "figure", "value", "n"),
        "sizes": asked.filter(pl.col("video_size").is_not_null()).group_by(*by, "video_size").agg(n),
        "cascades": rows.filter(pl.col("cascade").is_not_null())
        .group_by(*by, "cascade", pl.col("stage_engines").alias("stages")).agg(first),
        "not_computed": rows.filter(how.str.starts_with(NOT_COMPUTED))
        .group_by(*extra, "protocol", "prompt", "split", how.alias("reason")).agg(first),
        "reliability": valid.group_by(*extra, "protocol", "split", "method", "model", "prompt", "bin").agg(
            pl.col("confidence").sum().alias("conf_sum"), pl.col("confidence").count().alias("conf_n"),
            pl.col("correct").sum().alias("correct_sum"), pl.col("correct").count().alias("correct_n"), n, first),
    }


def _collect(queries: dict[str, pl.LazyFrame], streaming: bool) -> dict[str, pl.DataFrame]:
    names = list(queries)
    frames = pl.collect_all([queries[k] for k in names], engine="streaming" if streaming else "auto")
    return dict(zip(names, frames, strict=True))


def _shifted(frames: dict[str, pl.DataFrame], offset: int) -> dict[str, pl.DataFrame]:
    return {k: f.with_columns(pl.col("first") + offset) if "first" in f.columns and offset else f
            for k, f in frames.items()}


FRAMES = ("cells", "skipped", "asked", "shown", "sizes", "cascades", "not_computed", "reliability")
SUMS = {"n", "said", "conf_sum", "conf_n", "correct_sum", "correct_n"}


def _merged(partials: list[dict[str, pl.DataFrame]], rows: int, columns: set[str],
            extra: tuple[str, ...] = ()) -> RowSummary:
    """The partial aggregates of batches and files added up: counts and sums added, least positions kept; every
    frame ordered by first appearance (``first``), or by its keys where it has none."""
    merged = {}
    for name in FRAMES:
        frames = [p[name] for p in partials if p[name].height]
        if not frames:
            merged[name] = _empty(name, extra)
            continue
        frame = pl.concat(frames, how="vertical_relaxed")
        values = [c for c in frame.columns if c in SUMS or c == "first"]
        keys = [c for c in frame.columns if c not in values]
        frame = frame.group_by(keys).agg(*(pl.col(c).min() if c == "first" else pl.col(c).sum() for c in values))
        frame = frame.with_columns(pl.col(c).cast(pl.Int64) for c in values if frame.schema[c].is_integer())
        merged[name] = frame.sort("first" if "first" in frame.columns else keys, nulls_last=True)
    return RowSummary(rows=rows, columns=frozenset(columns), **merged)


def _empty(name: str, extra: tuple[str, ...] = ()) -> pl.DataFrame:
    """An aggregate frame of no group, with its columns and types."""
    lazy = pl.LazyFrame(schema={"_row": pl.UInt32, **dict.fromkeys(extra, pl.Utf8)})
    return _aggregates(_typed(lazy, set(), extra), extra)[name].collect()


def median(counts: pl.DataFrame) -> tuple[float, float, float] | None:
    """(least, median, greatest) of the values whose counts ``counts`` holds (columns ``value``, ``n``), as
    polars' ``Series.median`` gives them over the values themselves (between two middle values: polars' median of
    the two); None for no value."""
    counts = counts.filter(pl.col("value").is_not_null()).group_by("value").agg(pl.col("n").sum()).sort("value")
    total = int(counts["n"].sum()) if counts.height else 0
    if not total:
        return None
    values, ends = counts["value"].to_list(), counts["n"].cum_sum().to_list()

    def at(position: int) -> float:  # the value at 0-based position in the sorted values
        return next(v for v, end in zip(values, ends, strict=True) if position < end)

    low, high = at((total - 1) // 2), at(total // 2)
    middle = low if low == high else pl.Series([low, high], dtype=pl.Float64).median()
    return values[0], middle, values[-1]

