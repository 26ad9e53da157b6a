"""Reading the sources of ``omnieval.datasets.mcq`` row by row: Parquet files (a file, or a folder of shards),
``datasets.save_to_disk`` folders (read with pyarrow) and VLMEvalKit TSV files. Each row comes with its file, its
row number, its split (from a shard name or a split folder) and the file's Hugging Face features, so that errors
can name where they are and answers stored as ``ClassLabel`` ids can be read.

Shard names give the split as the Hugging Face Hub writes them: ``dev-00000-of-00001.parquet``, or with the hash
suffix of older uploads, ``dev-00000-of-00001-75b6649fb044d38b.parquet`` (lmms-eval's ``lmms-lab/MMBench_EN``).
Every reader takes ``columns`` (read only those, where the format allows: a scan of the answers need not decode
images) and ``only`` (skip whole files or folders of other splits)."""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnieval.core.schema import InputError
from omnieval.datasets.textfile import read_utf8, utf8_lines

_SHARD = re.compile(r"^(?P<split>[A-Za-z0-9_.]+?)-\d{5}-of-\d{5}(?:-[0-9a-f]{8,64})?$")


@dataclass
class SourceRow:
    """One source row and where it is (for errors, and ``ClassLabel`` names from the file's features)."""

    file: Path
    number: int  # 0-based row number in its file
    split: str | None
    record: dict[str, Any]
    features: dict  # Hugging Face features of the file (for ClassLabel names), {} when unknown


def detect_format(source: Path) -> str:
    """``parquet``, ``hf-disk`` or ``tsv``, from a file's suffix or a folder's contents."""
    if source.is_file():
        suffix = source.suffix.lower()
        if suffix == ".parquet":
            return "parquet"
        if suffix in (".tsv", ".txt"):
            return "tsv"
        raise InputError(f"unknown source format {suffix!r} (expected .parquet, .tsv or a save_to_disk folder)",
                         file=source)
    if source.is_dir():
        if (source / "dataset_dict.json").is_file() or (source / "state.json").is_file():
            return "hf-disk"
        if any(source.rglob("*.parquet")):
            return "parquet"
        if any(source.glob("*.tsv")):
            return "tsv"
        raise InputError("no Parquet files, TSV files or save_to_disk metadata in this folder", file=source)
    raise InputError("no such file or folder", file=source)


def _hf_features(metadata: dict | None) -> dict:
    """The features dict of Hugging Face's Arrow/Parquet schema metadata (``b"huggingface"``), or {}."""
    raw = (metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    try:
        info = json.loads(raw)
    except (ValueError, TypeError):
        return {}
    return (info.get("info") or {}).get("features") or {}


def shard_split(path: Path) -> str | None:
    """The split a Parquet shard's name gives (``dev-00000-of-00001[-<hash>].parquet`` -> ``dev``), or None."""
    match = _SHARD.match(path.stem)
    return match.group("split") if match else None


def parquet_rows(source: Path, split: str | None, *, columns: Sequence[str] | None = None,
                 only: Collection[str] | None = None) -> Iterator[SourceRow]:
    import pyarrow.parquet as pq

    files = [source] if source.is_file() else sorted(source.rglob("*.parquet"))
    for path in files:
        file_split = split or shard_split(path)
        if only is not None and file_split is not None and file_split not in only:
            continue
        try:
            pf = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise InputError(f"not a readable Parquet file: {exc}", file=path) from None
        features = _hf_features(pf.schema_arrow.metadata)
        names = None if columns is None else [c for c in pf.schema_arrow.names if c in columns]
        number = 0
        for batch in pf.iter_batches(batch_size=64, columns=names):
            for record in batch.to_pylist():
                yield SourceRow(path, number, file_split, record, features)
                number += 1


def _arrow_files(folder: Path) -> list[Path]:
    state_path = folder / "state.json"
    if state_path.is_file():
        try:
            state = json.loads(read_utf8(state_path))
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", file=state_path) from None
        files = [folder / f["filename"] for f in state.get("_data_files", []) if "filename" in f]
        if files:
            return files
    return sorted(folder.glob("*.arrow"))


def hf_disk_rows(source: Path, split: str | None, *, columns: Sequence[str] | None = None,
                 only: Collection[str] | None = None) -> Iterator[SourceRow]:
    import pyarrow as pa

    folders: list[tuple[Path, str | None]]
    dict_path = source / "dataset_dict.json"
    if dict_path.is_file():
        try:
            names = json.loads(read_utf8(dict_path)).get("splits", [])
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", file=dict_path) from None
        folders = [(source / name, split or name) for name in names]
    else:
        state = {}
        if (source / "state.json").is_file():
            try:
                state = json.loads(read_utf8(source / "state.json"))
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON: {exc.msg}", file=source / "state.json") from None
        folders = [(source, split or state.get("_split"))]
    for folder, folder_split in folders:
        if only is not None and folder_split is not None and folder_split not in only:
            continue
        files = _arrow_files(folder)
        if not files:
            raise InputError("no Arrow data files in this save_to_disk folder", file=folder)
        info_features = {}
        if (folder / "dataset_info.json").is_file():
            try:
                info_features = json.loads(read_utf8(folder / "dataset_info.json")).get("features") or {}
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON: {exc.msg}", file=folder / "dataset_info.json") from None
        number = 0
        for path in files:
            if not path.is_file():
                raise InputError("Arrow data file listed in state.json is missing", file=path)
            try:
                reader = pa.ipc.open_stream(pa.memory_map(str(path)))
            except pa.ArrowInvalid:
                reader = pa.ipc.open_file(pa.memory_map(str(path)))  # an Arrow IPC file rather than a stream
            except Exception as exc:
                raise InputError(f"not a readable Arrow file: {exc}", file=path) from None
            features = info_features or _hf_features(reader.schema.metadata)
            batches = reader if isinstance(reader, pa.ipc.RecordBatchStreamReader) else \
                (reader.get_batch(i) for i in range(reader.num_record_batches))
            for batch in batches:
                if columns is not None:
                    batch = batch.select([c for c in batch.schema.names if c in columns])
                for start in range(0, batch.num_rows, 64):
                    for record in batch.slice(start, 64).to_pylist():
                        yield SourceRow(path, number, folder_split, record, features)
                        number += 1


def tsv_rows(source: Path, split: str | None, *, columns: Sequence[str] | None = None,
             only: Collection[str] | None = None) -> Iterator[SourceRow]:
    """VLMEvalKit TSV rows (every column: the format cannot skip any; no file-level split)."""
    files = [source] if source.is_file() else sorted(source.glob("*.tsv"))
    limit = csv.field_size_limit()
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # base64 images are long fields
    try:
        for path in files:
            reader = csv.DictReader(utf8_lines(path), delimiter="\t")  # UTF-8 checked line by line
            for number, record in enumerate(reader):
                if None in record:
                    raise InputError(f"row {number} has more fields than the header", file=path,
                                     item=f"row {number}")
                yield SourceRow(path, number, split, dict(record), {})
    except csv.Error as exc:
        raise InputError(f"not a readable TSV file: {exc}", file=source) from None
    finally:
        csv.field_size_limit(limit)


READERS: dict[str, Callable[..., Iterator[SourceRow]]] = {
    "parquet": parquet_rows, "hf-disk": hf_disk_rows, "tsv": tsv_rows}
"""Row readers by source format (``detect_format`` tells them apart)."""
