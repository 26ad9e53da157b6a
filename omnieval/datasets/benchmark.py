"""Load a benchmark folder in omnieval's own format and check it before any model work.

A folder holds ``benchmark.json`` (name, protocol; optional), ``items.jsonl`` (or ``items.parquet``) and, for the
dissonance protocol, ``anchors.jsonl`` (the anchor library). Every problem raises ``InputError`` naming the file,
the item (or line) and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from omnieval.schema import Anchor, DissonanceItem, InputError, resolve_media_path

ITEM_MODELS = {"dissonance": DissonanceItem}


@dataclass
class Benchmark:
    root: str
    name: str
    protocol: str
    items: list = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)


def _field(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"]) or "(item)"


def _read_records(path: Path) -> list[tuple[int, dict]]:
    """(line number, record) pairs from JSONL or Parquet."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(enumerate(pq.read_table(path).to_pylist(), start=1))
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"line {lineno} is not valid JSON: {exc.msg}", file=path) from None
            if not isinstance(record, dict):
                raise InputError(f"line {lineno} is not a JSON object", file=path)
            records.append((lineno, record))
    return records


def _parse(model, path: Path, lineno: int, record: dict, id_key: str):
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        err = exc.errors()[0]
        item = record.get(id_key) if isinstance(record.get(id_key), str) else f"line {lineno}"
        raise InputError(f"{err['msg']} (line {lineno})", file=path, item=item, field=_field(err)) from None


def load_benchmark(path: str | Path) -> Benchmark:
    root = Path(path)
    if not root.is_dir():
        raise InputError("benchmark folder does not exist", file=root)
    meta: dict = {}
    meta_path = root / "benchmark.json"
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", file=meta_path) from None
    protocol = meta.get("protocol", "dissonance")
    if protocol not in ITEM_MODELS:
        raise InputError(f"unknown protocol {protocol!r}", file=meta_path, field="protocol")
    items_path = next((p for p in (root / "items.jsonl", root / "items.parquet") if p.exists()), None)
    if items_path is None:
        raise InputError("no items.jsonl or items.parquet", file=root)
    items, seen = [], {}
    for lineno, record in _read_records(items_path):
        item = _parse(ITEM_MODELS[protocol], items_path, lineno, record, "item_id")
        if item.item_id in seen:
            raise InputError(f"duplicate item_id (first on line {seen[item.item_id]}, again on line {lineno})",
                             file=items_path, item=item.item_id, field="item_id")
        seen[item.item_id] = lineno
        for fname in ("video", "audio"):
            resolve_media_path(root, getattr(item.media, fname), file=items_path, item=item.item_id,
                               field=f"media.{fname}")
        items.append(item)
    anchors = []
    anchors_path = root / "anchors.jsonl"
    if protocol == "dissonance":
        if not anchors_path.exists():
            raise InputError("the dissonance protocol needs an anchor library (anchors.jsonl)", file=root)
        for lineno, record in _read_records(anchors_path):
            anchor = _parse(Anchor, anchors_path, lineno, record, "anchor")
            for fname in ("video", "audio"):
                resolve_media_path(root, getattr(anchor.media, fname), file=anchors_path, item=anchor.anchor,
                                   field=f"media.{fname}")
            anchors.append(anchor)
    return Benchmark(root=str(root.resolve()), name=meta.get("name", root.name), protocol=protocol, items=items,
                     anchors=anchors)


def media_uses(bench: Benchmark) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(relative path, modality) -> (file, first item or anchor using it, field) for every distinct media file."""
    uses: dict[tuple[str, str], tuple[str, str, str]] = {}
    root = Path(bench.root)
    for item in bench.items:
        for fname in ("video", "audio"):
            uses.setdefault((getattr(item.media, fname), fname),
                            (str(root / "items.jsonl"), item.item_id, f"media.{fname}"))
    for anchor in bench.anchors:
        for fname in ("video", "audio"):
            uses.setdefault((getattr(anchor.media, fname), fname),
                            (str(root / "anchors.jsonl"), anchor.anchor, f"media.{fname}"))
    return uses


def check_media(bench: Benchmark, mode: str = "probe") -> int:
    """Pre-flight: every distinct media file exists (``exists``) and opens with a decodable stream (``probe``).
    Returns the number of files checked; raises ``InputError`` naming the file, the first user and the field."""
    from omnieval.media.decode import MediaError, probe_media

    if mode == "off":
        return 0
    uses = media_uses(bench)
    for (rel, modality), (file, user, fname) in uses.items():
        full = Path(bench.root) / rel
        if not full.is_file():
            raise InputError(f"media file {rel!r} does not exist", file=file, item=user, field=fname)
        if mode == "probe":
            try:
                probe_media(full, modality)
            except MediaError as exc:
                raise InputError(f"media file {rel!r} is not a readable {modality}: {exc}", file=file, item=user,
                                 field=fname) from None
    return len(uses)
