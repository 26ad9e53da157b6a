"""Predictions on local disk or any pyarrow filesystem (``s3://``, ``gs://``), written atomically.

Layout of a run's output folder::

    run.json                                  config, versions, seed, counts
    parts/<model>/part-000000.parquet ...     what finished, flushed while the run goes (the resume log)
    predictions.parquet                       every model's predictions, sorted by (model, prompt, instance_id)

A part is written to a temporary name and renamed, so a run killed at any moment leaves only whole parts. Resume
reads the parts, keeps the instance ids that finished without error, and the pipeline skips them.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from omnieval.schema import PREDICTION_SCHEMA, InputError, conform

_PART = re.compile(r"part-(\d{6})\.parquet$")


def safe_name(name: str) -> str:
    """A model name as a folder name (``org/model`` -> ``org__model``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "__", name)


class RunStore:
    def __init__(self, uri: str):
        if "://" in uri:
            self.fs, root = pafs.FileSystem.from_uri(uri)
        else:
            self.fs, root = pafs.LocalFileSystem(), str(uri)
        self.root = root.rstrip("/")
        self.fs.create_dir(self.root, recursive=True)

    def path(self, *parts: str) -> str:
        return str(PurePosixPath(self.root, *parts))

    # -- atomic primitives ------------------------------------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes) -> None:
        final = self.path(rel)
        self.fs.create_dir(str(PurePosixPath(final).parent), recursive=True)
        tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        self.fs.move(tmp, final)

    def write_table(self, rel: str, table: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        self.write_bytes(rel, sink.getvalue().to_pybytes())

    def write_json(self, rel: str, obj: object) -> None:
        self.write_bytes(rel, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())

    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self.path(rel)).type != pafs.FileType.NotFound

    def read_table(self, rel: str) -> pa.Table:
        with self.fs.open_input_file(self.path(rel)) as f:
            return pq.read_table(f)

    # -- part folders (the resume logs: predictions, judgements, descriptions) ----------------------------------
    def folder_parts(self, folder: str) -> list[str]:
        """The ``part-NNNNNN.parquet`` files of a folder of the run, in write order."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.path(folder), allow_not_found=True))
        return sorted(i.path for i in infos if _PART.search(i.path))

    def next_part(self, folder: str) -> str:
        """The relative path of the next part of a folder."""
        files = self.folder_parts(folder)
        index = int(_PART.search(files[-1]).group(1)) + 1 if files else 0
        return f"{folder}/part-{index:06d}.parquet"

    def read_folder(self, folder: str, schema: pa.Schema) -> pa.Table:
        """Every part of a folder, in write order, cast to ``schema`` (empty when there is none)."""
        tables = []
        for path in self.folder_parts(folder):
            with self.fs.open_input_file(path) as f:
                tables.append(pq.read_table(f).cast(schema))
        return pa.concat_tables(tables) if tables else schema.empty_table()

    # -- prediction parts --------------------------------------------------------------------------------------
    def part_files(self, model: str) -> list[str]:
        return self.folder_parts(f"parts/{safe_name(model)}")

    def append_part(self, model: str, rows: list[dict]) -> str:
        rel = self.next_part(f"parts/{safe_name(model)}")
        self.write_table(rel, predictions_table(rows))
        return rel

    def read_parts(self, model: str) -> pa.Table:
        tables = []
        for path in self.part_files(model):
            with self.fs.open_input_file(path) as f:
                tables.append(conform(pq.read_table(f)))
        return pa.concat_tables(tables) if tables else PREDICTION_SCHEMA.empty_table()

    def finished_ids(self, model: str) -> set[tuple[str, str, str]]:
        """(mode, prompt, instance_id) triples that finished without an error: resume skips them."""
        table = self.read_parts(model)
        ok = table.filter(pc.is_null(table["error"]))
        return set(zip(mode_values(ok), ok["prompt"].to_pylist(), ok["instance_id"].to_pylist(), strict=True))


def predictions_table(rows: Iterable[dict]) -> pa.Table:
    rows = list(rows)
    return pa.Table.from_pylist(rows, schema=PREDICTION_SCHEMA) if rows else PREDICTION_SCHEMA.empty_table()


def mode_values(table: pa.Table) -> list[str]:
    """The ``mode`` of every row (``mcq`` where the column is null or absent)."""
    if "mode" not in table.column_names:
        return ["mcq"] * table.num_rows
    return [m or "mcq" for m in table["mode"].to_pylist()]


def consolidate(tables: Iterable[pa.Table]) -> pa.Table:
    """One row per (model, prompt, instance_id, mode), sorted. A row without error wins over errored attempts of the
    same instance (a resumed run retries errors); among equals the later part wins."""
    tables = [conform(t) for t in tables]
    table = pa.concat_tables(tables) if tables else None
    if table is None or table.num_rows == 0:
        return PREDICTION_SCHEMA.empty_table()
    keep: dict[tuple[str, str, str, str], int] = {}
    errors = table["error"].to_pylist()
    keys = zip(table["model"].to_pylist(), table["prompt"].to_pylist(), table["instance_id"].to_pylist(),
               mode_values(table), strict=True)
    for i, key in enumerate(keys):
        j = keep.get(key)
        if j is None or errors[i] is None or errors[j] is not None:
            keep[key] = i
    order = sorted(keep, key=lambda k: k)
    return table.take([keep[k] for k in order])


# -- reading a run from anywhere it can be written (the statistics commands) --------------------------------------

@dataclass(frozen=True, order=True)
class StoredPath:
    """A file or folder on a pyarrow filesystem (``s3://``, ``gs://``, ``file://``), with the few ``pathlib.Path``
    methods the statistics commands read runs with, so ``metrics``, ``stats`` and ``report`` read wherever a run
    can write. ``str()`` is the URI without its query (options such as ``endpoint_override`` stay out of messages
    and labels); children and parents keep the query and the filesystem."""

    scheme: str
    path: str  # inside the filesystem, no leading or trailing slash
    query: str = ""
    fs: pafs.FileSystem = field(default=None, compare=False, hash=False, repr=False)

    def __truediv__(self, name: str) -> StoredPath:
        return replace(self, path=f"{self.path}/{name}")

    def __str__(self) -> str:
        return f"{self.scheme}://{self.path}"

    @property
    def uri(self) -> str:
        """The URI that opens this location again (with its query)."""
        return f"{self}?{self.query}" if self.query else str(self)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.path).suffix

    @property
    def parent(self) -> StoredPath:
        return replace(self, path=str(PurePosixPath(self.path).parent))

    def resolve(self) -> StoredPath:
        return self

    def is_absolute(self) -> bool:
        return True

    def _type(self) -> pafs.FileType:
        return self.fs.get_file_info(self.path).type

    def exists(self) -> bool:
        return self._type() != pafs.FileType.NotFound

    def is_file(self) -> bool:
        return self._type() == pafs.FileType.File

    def is_dir(self) -> bool:
        return self._type() == pafs.FileType.Directory

    def iterdir(self) -> list[StoredPath]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.path))
        return [replace(self, path=i.path.rstrip("/")) for i in infos]

    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.path) as f:
            return f.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)


def stored_path(where: str | Path | StoredPath) -> Path | StoredPath:
    """A local path as ``pathlib.Path`` (as before), a URI (``s3://bucket/run?endpoint_override=...``) as a
    ``StoredPath`` on the filesystem pyarrow opens for it (the same ``FileSystem.from_uri`` a run writes with)."""
    if isinstance(where, StoredPath):
        return where
    if "://" not in str(where):
        return Path(where)
    uri = str(where)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise InputError(f"cannot open this location: {exc}", file=uri.split("?", 1)[0]) from exc
    scheme, query = uri.split("://", 1)[0], urlsplit(uri).query
    return StoredPath(scheme=scheme, path=path.rstrip("/"), query=query, fs=fs)


def readable(path: Path | StoredPath) -> Path | io.BytesIO:
    """What polars' readers take: the local path, or the remote file's bytes."""
    return path if isinstance(path, Path) else io.BytesIO(path.read_bytes())


def local_folder(out: str | Path) -> Path:
    """An output folder of the statistics commands: local only (``Path("s3://b/x")`` would quietly become a local
    folder named ``s3:``)."""
    if "://" in str(out):
        raise InputError("outputs (--out) go to a local folder; copy them to remote storage afterwards", file=out)
    return Path(out)
