"""Predictions on local disk or any pyarrow filesystem (``s3://``, ``gs://``), written atomically.

Layout of a run's output folder::

    run.json                                  config, versions, seed, counts
    parts/<model>/part-000000.parquet ...     what finished, flushed while the run goes (the resume log)
    predictions.parquet                       every model's predictions, sorted by (model, prompt, instance_id)

A part is written to a temporary name and renamed, so a run killed at any moment leaves only whole parts. Resume
reads the parts, keeps the instance ids that finished without error, and the pipeline skips them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from omnieval.schema import PREDICTION_SCHEMA, conform

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
