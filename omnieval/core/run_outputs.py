"""Predictions on local disk or any pyarrow filesystem (``s3://``, ``gs://``), written atomically.

Layout of a run's output folder::

    run.json                                  config, versions, seed, counts
    parts/<model>/_identity.json              what decided these predictions (see ``omnieval.run.identity``)
    parts/<model>/part-000000-<writer>.parquet ...  what finished, flushed while the run goes (the resume log)
    predictions.parquet                       every model's predictions, sorted by (model, prompt, instance_id)

A part is written to a temporary name and renamed, so a run killed at any moment leaves only whole parts. Its name
carries the writer's token, so two writers can never replace each other's parts (one writer per output is the rule:
``omnieval.run.lease``; the token is the safety net). Resume reads the parts, keeps the instance ids that finished
without error, and the pipeline skips them. Folder names come from ``folder_name``: injective, never a path.
"""

from __future__ import annotations

import errno
import json
import os
import re
import uuid
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from omnieval.core.names import folder_name
from omnieval.core.schema import DEFAULT_MODE, PREDICTION_SCHEMA, InputError, conform, mode_or_default
from omnieval.core.storage import StoredPath, bounded, filesystem

_PART = re.compile(r"part-(\d{6})(?:-[0-9A-Za-z]+)?\.parquet$")
_TEMPORARY = re.compile(r"\.(?:parquet|json)\.tmp-[0-9a-f]{8}$")
"""A temporary of ``write_bytes`` (the lease's own, ``.tmp-<writer token>``, is 12 digits and not matched)."""
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
"""A full device, a quota reached, a file-size limit: the write cannot succeed until someone frees space."""


class RunOutputs:
    def __init__(self, uri: str, *, writer: str | None = None):
        self.uri = uri
        self.fs, root = filesystem(uri)
        self.root = root.rstrip("/")
        self.writer = writer or uuid.uuid4().hex[:12]  # names this writer's parts
        self.lease = None  # an ``omnieval.run.lease.OutputLease`` while this store's writer holds the output
        try:
            bounded(lambda: self.fs.create_dir(self.root, recursive=True), "creating the output folder", uri)
        except OSError as exc:
            raise InputError(f"cannot create the output folder: {exc}", file=uri, field="output") from None

    def path(self, *parts: str) -> str:
        return str(PurePosixPath(self.root, *parts))

    # -- atomic primitives ------------------------------------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes) -> None:
        if self.lease is not None:
            self.lease.check()  # a writer whose lease was taken over writes nothing more
        final = self.path(rel)
        tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            self.fs.create_dir(str(PurePosixPath(final).parent), recursive=True)
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, final)
        except BaseException as exc:  # a full disk, Ctrl-C: no half-written temporary is left behind
            self._discard(tmp)
            if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
                raise InputError(f"no space left for {rel} ({os.strerror(exc.errno)}): free space or give another "
                                 "output, then rerun the same command: the parts already written are kept and "
                                 "resumed", file=self.uri, field="output") from None
            raise

    def _discard(self, path: str) -> None:
        try:
            self.fs.delete_file(path)
        except (OSError, FileNotFoundError):
            pass

    def remove_temporaries(self) -> list[str]:
        """Delete the temporaries (``<name>.parquet.tmp-<hex>``, ``<name>.json.tmp-<hex>``) that a writer killed
        in the middle of ``write_bytes`` left; the relative paths removed. Only for the holder of the output's
        lease: no other writer of this output can be in the middle of a write then."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True, allow_not_found=True))
        stale = [i.path for i in infos if i.type == pafs.FileType.File and _TEMPORARY.search(i.path)]
        for path in stale:
            self._discard(path)
        return [PurePosixPath(path).relative_to(self.root).as_posix() for path in stale]

    def write_table(self, rel: str, table: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        self.write_bytes(rel, sink.getvalue().to_pybytes())

    def write_json(self, rel: str, obj: object) -> None:
        self.write_bytes(rel, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.path(rel)) as f:
            return f.read()

    def delete_folder(self, rel: str) -> None:
        """Delete a folder of this output (never anything outside it: ``rel`` must stay below the root)."""
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or "." in parts:
            raise ValueError(f"refusing to delete {rel!r}: not a folder inside the output")
        self.fs.delete_dir(self.path(rel))

    def location(self, rel: str) -> Path | StoredPath:
        """A file of this output as the statistics read it (``stored_path``): a local path, or a ``StoredPath`` on
        this store's own filesystem (the URI's query options kept)."""
        if isinstance(self.fs, pafs.LocalFileSystem):
            return Path(self.path(rel))
        uri = urlsplit(self.uri)
        return StoredPath(scheme=uri.scheme, path=self.path(rel).strip("/"), query=uri.query, fs=self.fs)

    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self.path(rel)).type != pafs.FileType.NotFound

    def read_table(self, rel: str) -> pa.Table:
        return read_parquet(self.fs, self.path(rel))

    def check_writable(self) -> None:
        """Write and remove a probe file, so that an output that cannot be written fails before any model work."""
        probe = f".write-probe-{uuid.uuid4().hex[:8]}"
        try:
            bounded(lambda: (self.write_bytes(probe, b""), self.fs.delete_file(self.path(probe))),
                    "writing a probe file", self.uri)
        except OSError as exc:
            raise InputError(f"the output folder is not writable: {exc}", file=self.uri, field="output") from None

    # -- part folders (the resume logs: predictions, judgements, descriptions) ----------------------------------
    def folder_parts(self, folder: str) -> list[str]:
        """The ``part-NNNNNN.parquet`` files of a folder of the run, in write order."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.path(folder), allow_not_found=True))
        return sorted(i.path for i in infos if _PART.search(i.path))

    def next_part(self, folder: str) -> str:
        """The relative path of the next part of a folder: the next index, and this writer's token, so that a part
        of another writer (which one writer per output rules out, but a lost lease could allow) is never
        replaced."""
        files = self.folder_parts(folder)
        index = int(_PART.search(files[-1]).group(1)) + 1 if files else 0
        return f"{folder}/part-{index:06d}-{self.writer}.parquet"

    def read_folder(self, folder: str, schema: pa.Schema) -> pa.Table:
        """Every part of a folder, in write order, conformed to ``schema`` (``schema.conform``: a part written
        before a column existed gets it; empty when there is none)."""
        tables = [conform(read_parquet(self.fs, path), schema) for path in self.folder_parts(folder)]
        return pa.concat_tables(tables) if tables else schema.empty_table()

    # -- prediction parts --------------------------------------------------------------------------------------
    @staticmethod
    def parts_folder(model: str) -> str:
        return f"parts/{folder_name(model)}"

    def part_files(self, model: str) -> list[str]:
        return self.folder_parts(self.parts_folder(model))

    def append_part(self, model: str, rows: list[dict] | pa.Table) -> str:
        """One atomic part of ``model``'s predictions: a table (written as it is, cast to the schema) or rows."""
        rel = self.next_part(self.parts_folder(model))
        self.write_table(rel, conform(rows) if isinstance(rows, pa.Table) else predictions_table(rows))
        return rel

    def read_parts(self, model: str) -> pa.Table:
        tables = [conform(read_parquet(self.fs, path)) for path in self.part_files(model)]
        return pa.concat_tables(tables) if tables else PREDICTION_SCHEMA.empty_table()

    def finished_ids(self, model: str) -> set[tuple[str, str, str, int]]:
        """(mode, prompt, instance_id, sample) keys that finished without an error: resume skips them."""
        table = self.read_parts(model)
        ok = table.filter(pc.is_null(table["error"]))
        return set(zip(mode_values(ok), ok["prompt"].to_pylist(), ok["instance_id"].to_pylist(), sample_values(ok),
                       strict=True))


def read_parquet(fs: pafs.FileSystem, path: str) -> pa.Table:
    """A Parquet file of the run; one that cannot be read is an ``InputError`` naming it (a part is never written
    half, so an unreadable one was changed outside omnieval: move it aside and rerun, and its rows are redone)."""
    try:
        with fs.open_input_file(path) as f:
            return pq.read_table(f)
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"not a readable Parquet file ({exc}); move it aside and rerun to recompute its rows",
                         file=path) from None


def predictions_table(rows: Iterable[dict]) -> pa.Table:
    """Prediction rows (dicts; ``Prediction.row()`` in the run layer) cast to ``PREDICTION_SCHEMA``: a value of the
    wrong type fails here, where it is written, not in a reader."""
    rows = list(rows)
    return pa.Table.from_pylist(rows, schema=PREDICTION_SCHEMA) if rows else PREDICTION_SCHEMA.empty_table()


def mode_values(table: pa.Table) -> list[str]:
    """The ``mode`` of every row (``schema.mode_or_default``: ``mcq`` where the column is null or absent)."""
    if "mode" not in table.column_names:
        return [DEFAULT_MODE] * table.num_rows
    return [mode_or_default(m) for m in table["mode"].to_pylist()]


def sample_values(table: pa.Table) -> list[int]:
    """The ``sample`` of every row (0 where the column is null or absent: one sample, or a part written before
    repeated samples existed)."""
    if "sample" not in table.column_names:
        return [0] * table.num_rows
    return [s or 0 for s in table["sample"].to_pylist()]


def consolidate(tables: Iterable[pa.Table]) -> pa.Table:
    """One row per (model, prompt, instance_id, mode, sample), sorted. A row without error wins over errored
    attempts of the same instance and sample (a resumed run retries errors); among equals the later part wins."""
    tables = [conform(t) for t in tables]
    table = pa.concat_tables(tables) if tables else None
    if table is None or table.num_rows == 0:
        return PREDICTION_SCHEMA.empty_table()
    keep: dict[tuple[str, str, str, str, int], int] = {}
    errors = table["error"].to_pylist()
    keys = zip(table["model"].to_pylist(), table["prompt"].to_pylist(), table["instance_id"].to_pylist(),
               mode_values(table), sample_values(table), strict=True)
    for i, key in enumerate(keys):
        j = keep.get(key)
        if j is None or errors[i] is None or errors[j] is not None:
            keep[key] = i
    order = sorted(keep, key=lambda k: k)
    return table.take([keep[k] for k in order])
