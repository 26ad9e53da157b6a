"""Load a benchmark folder in omnieval's own format and check it before any model work.

A folder holds ``benchmark.json`` (name, protocol; without it, or without its ``protocol``, the items are read as
``dissonance`` items, and a first item that is not one is refused as a benchmark of unknown protocol; optionally
``scorer``, the benchmark's released answer-scoring rule, one of ``omnieval.scoring``'s names), ``items.jsonl``
(or ``items.parquet``) in the protocol's ``Item`` format and, for the dissonance protocol, ``anchors.jsonl`` (the
anchor library). Every problem raises ``InputError`` naming the file,
the item (or line) and the field.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from omnieval.core.schema import Anchor, InputError, media_ref, pydantic_message, resolve_media_path
from omnieval.datasets.textfile import read_utf8, utf8_lines
from omnieval.scoring import scorer_names

DEFAULT_PROTOCOL = "dissonance"
"""A benchmark whose ``benchmark.json`` names no protocol (or that has none) is read as this protocol's."""


@dataclass
class Benchmark:
    """A loaded, validated benchmark: ``root`` is the absolute folder that every media path is relative to."""

    root: str
    name: str
    protocol: str
    items: list = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)
    items_file: str = ""
    scorer: str | None = None
    """The benchmark's released answer-scoring rule (``benchmark.json``'s ``scorer``; docs/scoring.md): the
    ``official`` verdict of every generated answer. None: the benchmark has none, only omnieval's own rule applies."""
    #: ``benchmark.json``'s ``"pinned": {"decode": {...}}``: the protocol's own decode settings (a paper's 32
    #: frames), over a model's recipe and under a run's ``decode:`` options (``run.recipe``, which checks them).
    pinned_decode: dict = field(default_factory=dict)


def _field(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"]) or "(item)"


def read_records(path: Path) -> list[tuple[str, dict]]:
    """(position, record) pairs from JSONL (``line N``) or Parquet (``row N``)."""
    if path.is_dir() and path.suffix != ".parquet":  # pyarrow reads a folder of Parquet files as one table
        raise InputError(f"{path.name} is a folder, not a file (of one JSON object per line)", file=path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise InputError(f"not a readable Parquet file: {exc}", file=path) from None
        return [(f"row {i}", _from_arrow(row)) for i, row in enumerate(rows, start=1)]
    records = []
    for lineno, line in enumerate(utf8_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {lineno} is not valid JSON: {exc.msg}", file=path) from None
        if not isinstance(record, dict):
            raise InputError(f"line {lineno} is not a JSON object", file=path)
        records.append((f"line {lineno}", record))
    return records


def _from_arrow(value):
    """Undo what Arrow does to JSON-like records: a map column comes back as a list of (key, value) pairs, and a
    struct column holds every key of every row, with None where a row had none (so drop the Nones)."""
    if isinstance(value, dict):
        return {k: _from_arrow(v) for k, v in value.items() if v is not None}
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: _from_arrow(v) for k, v in value}
    if isinstance(value, list):
        return [_from_arrow(v) for v in value]
    return value


def _parse(model, path: Path, where: str, record: dict, id_key: str):
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        err = exc.errors()[0]
        item = record.get(id_key) if isinstance(record.get(id_key), str) else where
        raise InputError(f"{pydantic_message(err)} ({where})", file=path, item=item, field=_field(err)) from None


def _pinned_decode(meta: dict, meta_path: Path) -> dict:
    """``"pinned": {"decode": {...}}`` of ``benchmark.json`` (an object of objects; its options are checked where
    the run resolves them, ``run.recipe.pinned_decode``)."""
    pinned = meta.get("pinned", {})
    if not isinstance(pinned, dict) or not isinstance(pinned.get("decode", {}), dict):
        raise InputError("pinned must be an object whose decode is an object of decode options",
                         file=meta_path, field="pinned")
    unknown = sorted(set(pinned) - {"decode"})
    if unknown:
        raise InputError(f"pinned holds decode settings only; not {', '.join(unknown)}", file=meta_path,
                         field=f"pinned.{unknown[0]}")
    return dict(pinned.get("decode", {}))


def load_benchmark(path: str | Path) -> Benchmark:
    """Read and validate a benchmark folder (no media file is opened: ``check_media`` does that)."""
    from omnieval.protocols import get_protocol, known_protocols

    root = Path(path).resolve()
    if not root.is_dir():
        raise InputError("benchmark folder does not exist", file=root)
    meta_path = root / "benchmark.json"
    meta = _read_meta(meta_path)
    protocol_name = meta.get("protocol", DEFAULT_PROTOCOL)
    if protocol_name not in known_protocols():
        raise InputError(f"unknown protocol {protocol_name!r}; known protocols: {', '.join(known_protocols())}",
                         file=meta_path, field="protocol")
    protocol = get_protocol(protocol_name)
    scorer = _scorer(meta, meta_path)
    items_path = next((p for p in (root / "items.jsonl", root / "items.parquet") if p.exists()), None)
    if items_path is None:
        raise InputError("no items.jsonl or items.parquet", file=root)
    records = read_records(items_path)
    if records and "protocol" not in meta:
        _fits_the_default(protocol.item, meta_path, items_path, *records[0])
        _note_once(f"omnieval: {meta_path if meta_path.exists() else root}: no protocol named (benchmark.json), "
                   f"so its items are read as {protocol_name} items; write \"protocol\" in benchmark.json to say so")
    items, seen, resolved = [], {}, set()
    for where, record in records:
        item = _parse(protocol.item, items_path, where, record, "item_id")
        if item.item_id in seen:
            raise InputError(f"duplicate item_id (first on {seen[item.item_id]}, again on {where})",
                             file=items_path, item=item.item_id, field="item_id")
        seen[item.item_id] = where
        for rel, _, fname in protocol.media_refs(item):
            # items share their media: each distinct path is resolved (a realpath) once
            if not isinstance(rel, str) or rel not in resolved:
                resolve_media_path(root, rel, file=items_path, item=item.item_id, field=fname)
                resolved.add(rel)
        items.append(item)
    if not items:
        raise InputError("no items: the file holds no records", file=items_path)
    bench = Benchmark(root=str(root), name=meta.get("name", root.name), protocol=protocol_name, items=items,
                      items_file=str(items_path.resolve()), scorer=scorer,
                      pinned_decode=_pinned_decode(meta, meta_path))
    if protocol_name == "dissonance":  # our own format keeps the anchor library beside the items
        bench.anchors = _load_anchors(root)
    protocol.validate_items(items, bench, file=items_path)
    return bench


def _read_meta(meta_path: Path) -> dict:
    """``benchmark.json`` as a dict; {} when the folder has none."""
    if not meta_path.exists():
        return {}
    if not meta_path.is_file():
        raise InputError("benchmark.json is a folder, not a file", file=meta_path)
    try:
        meta = json.loads(read_utf8(meta_path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", file=meta_path) from None
    if not isinstance(meta, dict):
        raise InputError(f"expected a JSON object such as {{\"name\": \"my-bench\", \"protocol\": \"spectrum\"}}, "
                         f"got a JSON {type(meta).__name__}", file=meta_path)
    return meta


def _scorer(meta: dict, meta_path: Path) -> str | None:
    """``benchmark.json``'s optional ``scorer``: one of the registered scorers, refused by name otherwise."""
    scorer = meta.get("scorer")
    if scorer is not None and (not isinstance(scorer, str) or scorer not in scorer_names()):
        raise InputError(f"unknown scorer {scorer!r}; known scorers: {', '.join(scorer_names())} (docs/scoring.md)",
                         file=meta_path, field="scorer")
    return scorer


_NOTED: set[str] = set()


def _note_once(text: str) -> None:
    """A notice on stderr, once per process (a run loads its benchmark more than once)."""
    if text not in _NOTED:
        _NOTED.add(text)
        print(text, file=sys.stderr)


def _fits_the_default(model, meta_path: Path, items_path: Path, where: str, record: dict) -> None:
    """Without a ``protocol`` in ``benchmark.json`` the items are read as the default protocol's (dissonance, as
    the first benchmarks were). A first item that is not one is refused in those terms: the protocol is unknown,
    which protocols the item does fit, and what to write; not merely the first dissonance field it lacks."""
    from omnieval.protocols import get_protocol, known_protocols

    try:
        model.model_validate(record)
        return
    except ValidationError as exc:
        err = exc.errors()[0]
    fits = [name for name in known_protocols()
            if name != DEFAULT_PROTOCOL and _validates(get_protocol(name).item, record)]
    missing = "has no benchmark.json" if not meta_path.exists() else "has a benchmark.json without 'protocol'"
    if fits:
        why = f"its first item ({where} of {items_path.name}) is a {' or '.join(map(repr, fits))} item"
    else:
        why = (f"read as a {DEFAULT_PROTOCOL} item (the default), its first item ({where} of {items_path.name}) "
               f"fails: field {_field(err)!r}: {err['msg'].removeprefix('Value error, ')}")
    raise InputError(f"the benchmark {missing}, so its protocol is unknown: {why}; write benchmark.json with the "
                     "benchmark's name and protocol, e.g. {\"name\": \"my-bench\", \"protocol\": \"spectrum\"} "
                     f"(protocols: {', '.join(known_protocols())}; see docs/benchmarks.md)", file=meta_path,
                     field="protocol")


def _validates(model, record: dict) -> bool:
    try:
        model.model_validate(record)
    except ValidationError:
        return False
    return True


def _load_anchors(root: Path) -> list[Anchor]:
    """The anchor library; an anchor name may appear once per split."""
    path = root / "anchors.jsonl"
    if not path.exists():
        raise InputError("the dissonance protocol needs an anchor library (anchors.jsonl)", file=root)
    anchors, seen = [], {}
    for where, record in read_records(path):
        anchor = _parse(Anchor, path, where, record, "anchor")
        key = (anchor.split, anchor.anchor)
        if key in seen:
            raise InputError(f"anchor listed twice for split {anchor.split!r} ({seen[key]} and {where})",
                             file=path, item=anchor.anchor, field="anchor")
        seen[key] = where
        for fname in ("video", "audio"):
            resolve_media_path(root, getattr(anchor.media, fname), file=path, item=anchor.anchor,
                               field=f"media.{fname}")
        anchors.append(anchor)
    return anchors


def media_uses(bench: Benchmark) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(relative path, modality) -> (file, first item or anchor using it, field) for every distinct media file."""
    uses: dict[tuple[str, str], tuple[str, str, str]] = {}
    root = Path(bench.root)
    from omnieval.protocols import get_protocol

    protocol = get_protocol(bench.protocol)
    for item in bench.items:
        for rel, modality, fname in protocol.media_refs(item):
            uses.setdefault((rel, modality), (bench.items_file or str(root / "items.jsonl"), item.item_id, fname))
    for anchor in bench.anchors:
        for fname in ("video", "audio"):
            uses.setdefault((getattr(anchor.media, fname), fname),
                            (str(root / "anchors.jsonl"), anchor.anchor, f"media.{fname}"))
    return uses


def check_media(bench: Benchmark, mode: str = "probe") -> int:
    """Pre-flight: every distinct media file exists (``exists``) and opens with a decodable stream (``probe``).
    Returns the number of files checked; raises ``InputError`` naming the file, the first user and the field.

    ``probe`` decodes the first frame only: it catches a WAV shorter than its header declares, but a compressed
    audio or video file cut short after its first frames is caught by the full decode during the run, which makes
    that file's predictions errored rows (``media decode failed: ... truncated``, counted in ``error_rate``).
    A video file named as an item's audio (its soundtrack) must hold an audio stream: ``probe`` refuses one without
    (``exists`` leaves that to the decode, whose instances become errored rows: ``no audio stream``)."""
    from omnieval.media.decode import MediaError, probe_media

    if mode not in ("probe", "exists", "off"):
        raise ValueError(f"media check mode must be 'probe', 'exists' or 'off', not {mode!r}")
    uses = media_uses(bench)
    _check_streams(uses)
    if mode == "off":
        return 0
    for (rel, modality), (file, user, fname) in uses.items():
        full = Path(bench.root) / rel
        if not full.is_file():
            raise InputError(f"media file {rel!r} does not exist", file=file, item=user, field=fname)
        if mode == "probe":
            try:
                probe_media(full, modality)
            except MediaError as exc:
                if modality == "audio" and media_ref(rel, modality) != rel and "no audio stream" in str(exc):
                    raise InputError(f"media file {rel!r} has no audio stream: the audio of this item is taken "
                                     "from it (a video without sound cannot be its soundtrack)", file=file,
                                     item=user, field=fname) from None
                raise InputError(f"media file {rel!r} is not a readable {modality}: {exc}", file=file, item=user,
                                 field=fname) from None
    return len(uses)


def _check_streams(uses: dict[tuple[str, str], tuple[str, str, str]]) -> None:
    """One file may be shown as several modalities only where they are different streams of it (a video and its
    soundtrack, ``media_ref``); otherwise (an image file also used as a video, audio from a file whose name is not
    a video container's) one key would stand for two decodes."""
    seen: dict[str, tuple[str, tuple[str, str, str]]] = {}
    for (rel, modality), use in uses.items():
        ref = media_ref(rel, modality)
        if ref in seen and seen[ref][0] != modality:
            other, (_, first, first_field) = seen[ref]
            file, user, fname = use
            raise InputError(f"media file {rel!r} is used as {modality} here and as {other} by {first!r} "
                             f"({first_field}); one file gives a video and its soundtrack only when named as a "
                             "video (.mp4, .mkv, .webm, .mov, ...), and never an image and a video",
                             file=file, item=user, field=fname)
        seen.setdefault(ref, (modality, use))


# ---------------------------------------------------------------------------------------------------------------
# Writing (the built-in synthetic benchmarks and the converters)
# ---------------------------------------------------------------------------------------------------------------

def write_benchmark_files(folder: Path, items: Iterable, meta: dict) -> None:
    """``items.jsonl`` (one pydantic item per line, unset optional fields left out) and ``benchmark.json``."""
    (folder / "items.jsonl").write_text("".join(it.model_dump_json(exclude_none=True) + "\n" for it in items))
    (folder / "benchmark.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
