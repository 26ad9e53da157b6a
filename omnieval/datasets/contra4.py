"""Read a released Contra4 JSON file and convert it into an omnieval ``contrastive`` benchmark folder.

A release file is a JSON list of entries. Two shapes are accepted, field by field:

==================  ==============================================  ===============================================
field               released files (``data/final_data/*.json``)     the paper's appendix A / the README
==================  ==============================================  ===============================================
question            ``question``                                    ``questions``
answer              ``answer``: ``"Scene B"`` (val), ``"B"`` (test)  ``answers`` / ``gt_answer``: ``"Scene B"``,
                                                                    ``"B"``, ``"(B)"``
negatives           ``selection_type``: ``similarity`` / ``random``  ``similar`` / ``high_similarity`` / ``random``
modalities          ``modalities``: ``pc``, ``image``, ``audio``,   ``3d``, ``point_cloud``, ``pointcloud``, ...
                    ``video``
==================  ==============================================  ===============================================

A one-element list is accepted where a string is expected (``"answers": ["Scene A"]``). ``q_type`` (``mc_N``), when
given, must agree with the number of examples; ``category`` is optional; ``url`` and ``meta`` are kept only to name
AudioCaps files (below); other keys are ignored. Example ids are integers (``coco_val``, ``audiocaps``) or strings.
Where ``modalities`` is missing, each example's modality comes from its ``source`` (``pointllm`` / ``objaverse*`` ->
point cloud, ``msrvtt*`` -> video, ``audiocaps*`` / ``clotho*`` -> audio, ``coco*`` -> image).

**Media** are found by source and id in the layouts the release's baselines and the source datasets use
(``omnieval.datasets.contra4_media``); nothing outside the release folder and the folders given is read. A missing
file is an ``InputError`` naming the release file, the entry and the field (``examples[1].id``), unless
``on_missing="skip"`` (then the entry is left out and listed).

``convert_contra4`` writes ``benchmark.json`` (protocol ``contrastive``), ``items.jsonl`` and
``media/<source>/<name as found>`` (hard links, or copies), so the benchmark folder is self-contained; it is built
beside ``out`` and moved into place when complete (``omnieval.datasets.output_folder``: what ``out`` may be).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omnieval.core.schema import LABELS, InputError
from omnieval.datasets.contra4_media import MediaFolders, Wanted, find_media
from omnieval.datasets.output_folder import Source, building_folder, check_output_folder
from omnieval.datasets.textfile import read_utf8
from omnieval.protocols.contrastive import MAX_INPUTS, MIN_INPUTS, Input, Item

MODALITY_NAMES = {
    "image": "image", "img": "image", "audio": "audio", "video": "video", "pc": "pointcloud", "3d": "pointcloud",
    "pointcloud": "pointcloud", "point_cloud": "pointcloud", "point cloud": "pointcloud", "point-cloud": "pointcloud",
}
SELECTION_NAMES = {"random": "random", "similar": "similar", "similarity": "similar", "high_similarity": "similar",
                   "high-similarity": "similar", "high similarity": "similar"}
SOURCE_MODALITIES = (("pointllm", "pointcloud"), ("objaverse", "pointcloud"), ("msrvtt", "video"),
                     ("audiocaps", "audio"), ("clotho", "audio"), ("coco", "image"))
QUESTION_KEYS = ("question", "questions")
ANSWER_KEYS = ("answer", "answers", "gt_answer")


@dataclass(frozen=True)
class Example:
    """One scene of an entry; ``url`` and ``start`` (``meta.start_time``) only help find AudioCaps files."""

    source: str
    id: str
    caption: str
    modality: str
    url: str | None = None
    start: str | None = None

    def wanted(self) -> Wanted:
        return Wanted(self.source, self.id, self.modality, self.url, self.start)


@dataclass(frozen=True)
class Entry:
    """One release entry, normalised: ``answer`` is the index of the answering example."""

    id: str
    question: str
    examples: tuple[Example, ...]
    answer: int
    selection_type: str
    category: str | None
    where: str


@dataclass
class ConvertReport:
    out: Path
    n_entries: int
    n_items: int
    skipped: list[dict] = field(default_factory=list)

    def summary(self) -> str:
        return (f"wrote {self.n_items} items from {self.n_entries} entries to {self.out}"
                + (f"; {len(self.skipped)} skipped for missing media" if self.skipped else ""))


def _one_string(raw: dict, keys: tuple[str, ...], *, file: Path, where: str, required: bool = True) -> str | None:
    key = next((k for k in keys if k in raw), None)
    if key is None:
        if required:
            raise InputError(f"missing {' / '.join(repr(k) for k in keys)}", file=file, item=where, field=keys[0])
        return None
    value = raw[key]
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"expected a non-empty string, got {value!r}", file=file, item=where, field=key)
    return value.strip()


def parse_answer(text: str) -> int | None:
    """``'Scene B'``, ``'B'``, ``'(B)'``, ``'scene b.'`` -> 1; None when it names no scene letter."""
    m = re.fullmatch(r"\s*(?:scene\s*)?[\(\[]?\s*([A-Za-z])\s*[\)\]]?\s*\.?\s*", text, flags=re.IGNORECASE)
    return LABELS.index(m.group(1).upper()) if m else None


def _start_time(meta) -> str | None:
    """``meta.start_time`` as a file name writes it (``60``, not ``60.0``), or None."""
    value = meta.get("start_time") if isinstance(meta, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return str(int(value)) if float(value).is_integer() else str(value)


def _modality_from_source(source: str) -> str | None:
    low = source.lower()
    return next((m for prefix, m in SOURCE_MODALITIES if low.startswith(prefix)), None)


def parse_entry(raw, index: int, *, file: Path) -> Entry:
    """One release entry in either shape -> ``Entry``; ``InputError`` naming file, entry and field otherwise."""
    if not isinstance(raw, dict):
        raise InputError("entry is not a JSON object", file=file, item=f"entry {index}")
    ident = raw.get("id")
    where = f"entry {index}" + (f" (id {ident})" if ident is not None else "")
    if ident is None or (isinstance(ident, str) and not ident.strip()):
        raise InputError("missing 'id'", file=file, item=where, field="id")
    question = _one_string(raw, QUESTION_KEYS, file=file, where=where)
    answer_text = _one_string(raw, ANSWER_KEYS, file=file, where=where)
    answer_key = next(k for k in ANSWER_KEYS if k in raw)
    examples_raw = raw.get("examples")
    if not isinstance(examples_raw, list) or not MIN_INPUTS <= len(examples_raw) <= MAX_INPUTS:
        raise InputError(f"'examples' must be a list of {MIN_INPUTS} to {MAX_INPUTS} scenes", file=file, item=where,
                         field="examples")
    modalities = raw.get("modalities")
    if modalities is not None and (not isinstance(modalities, list) or len(modalities) != len(examples_raw)):
        raise InputError(f"'modalities' must list one modality per example ({len(examples_raw)})", file=file,
                         item=where, field="modalities")
    examples = []
    for i, ex in enumerate(examples_raw):
        if not isinstance(ex, dict):
            raise InputError("example is not a JSON object", file=file, item=where, field=f"examples[{i}]")
        for key in ("source", "id", "caption"):
            value = ex.get(key)
            if value is None or isinstance(value, bool) or not str(value).strip() or isinstance(value, (list, dict)):
                raise InputError(f"missing or empty {key!r}", file=file, item=where, field=f"examples[{i}].{key}")
        if modalities is not None:
            name = str(modalities[i]).strip().lower()
            if name not in MODALITY_NAMES:
                raise InputError(f"unknown modality {modalities[i]!r} (expected image, audio, video or pc)",
                                 file=file, item=where, field=f"modalities[{i}]")
            modality = MODALITY_NAMES[name]
        else:
            modality = _modality_from_source(str(ex["source"]))
            if modality is None:
                raise InputError(f"no 'modalities' and source {ex['source']!r} does not tell the modality",
                                 file=file, item=where, field=f"examples[{i}].source")
        examples.append(Example(str(ex["source"]).strip(), str(ex["id"]).strip(), str(ex["caption"]).strip(),
                                modality, ex["url"] if isinstance(ex.get("url"), str) else None,
                                _start_time(ex.get("meta"))))
    answer = parse_answer(answer_text)
    if answer is None or answer >= len(examples):
        raise InputError(f"answer {answer_text!r} names none of the {len(examples)} scenes "
                         f"(Scene A..Scene {LABELS[len(examples) - 1]})", file=file, item=where, field=answer_key)
    selection = _one_string(raw, ("selection_type",), file=file, where=where)
    if selection.lower() not in SELECTION_NAMES:
        raise InputError(f"unknown selection_type {selection!r} (expected random or similarity)", file=file,
                         item=where, field="selection_type")
    q_type = raw.get("q_type")
    if q_type is not None:
        m = re.fullmatch(r"mc_(\d+)", str(q_type))
        if not m or int(m.group(1)) != len(examples):
            raise InputError(f"q_type {q_type!r} does not match the {len(examples)} examples", file=file,
                             item=where, field="q_type")
    category = _one_string(raw, ("category",), file=file, where=where, required=False)
    return Entry(str(ident).strip(), question, tuple(examples), answer, SELECTION_NAMES[selection.lower()], category,
                 where)


def read_release(path: str | Path) -> list[Entry]:
    """Every entry of a release JSON file (a list, or an object of entries); duplicate ids are an error."""
    path = Path(path)
    if not path.is_file():
        raise InputError("release file does not exist", file=path)
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", file=path) from None
    if isinstance(data, dict):
        data = list(data.values())
    if not isinstance(data, list):
        raise InputError("expected a JSON list of entries", file=path)
    entries, seen = [], {}
    for index, raw in enumerate(data):
        entry = parse_entry(raw, index, file=path)
        if entry.id in seen:
            raise InputError(f"duplicate id (first at {seen[entry.id]})", file=path, item=entry.where, field="id")
        seen[entry.id] = entry.where
        entries.append(entry)
    return entries


def entry_item(entry: Entry, paths: list[str], *, benchmark: str, split: str) -> Item:
    return Item(item_id=entry.id, benchmark=benchmark, split=split, question=entry.question,
                inputs=[Input(modality=ex.modality, path=p, caption=ex.caption, source=ex.source, id=ex.id)
                        for ex, p in zip(entry.examples, paths, strict=True)],
                answer=entry.answer, selection_type=entry.selection_type, category=entry.category)


MediaDirs = Mapping[str, str | Path | Sequence[str | Path]]
"""Folders holding one source's files themselves: ``{"coco_val": "/data/coco/val2017", ...}`` (a list per source
is searched in order)."""


@dataclass
class Loaded:
    """A release read against its media: items whose input paths are ``<source>/<name as found>``, the entries
    skipped for missing media, and the file behind each path."""

    items: list[Item]
    skipped: list[dict]
    files: dict[str, Path]


def _check_sources(entries: list[Entry], media_dirs: MediaDirs | None, release: Path) -> None:
    """A folder given for a source no example has is a typo: refuse it, naming the sources there are."""
    sources = sorted({ex.source for e in entries for ex in e.examples})
    for source in media_dirs or {}:
        if source not in sources:
            raise InputError(f"a media folder is given for source {source!r}, which no example has; the release's "
                             f"sources: {', '.join(sources)}", file=release, field="examples[].source")


def _read(release: str | Path, media_root: str | Path | None, *, benchmark: str, split: str | None,
          media_map: Mapping | None, media_dirs: MediaDirs | None, on_missing: str) -> Loaded:
    if on_missing not in ("error", "skip"):
        raise ValueError("on_missing must be 'error' or 'skip'")
    release = Path(release)
    entries = read_release(release)
    _check_sources(entries, media_dirs, release)
    media = MediaFolders.build(media_root if media_root is not None else release.parent, media_dirs, media_map)
    split = split or release.stem
    items, skipped, files = [], [], {}
    taken: dict[str, Path] = {}  # benchmark-relative path -> file (two folders of one source may share a name)
    for entry in entries:
        paths, missing = [], None
        for i, example in enumerate(entry.examples):
            search = find_media(example.wanted(), media)
            if search.found is None:
                missing = (i, example, search)
                break
            found = search.found
            rel, n = f"{example.source}/{found.name}", 1
            while taken.get(rel, found.path) != found.path:
                n += 1
                rel = f"{example.source}/{n}/{found.name}"
            taken[rel] = files[rel] = found.path
            paths.append(rel)
        if missing is not None:
            i, example, search = missing
            message = f"no {example.modality} file for source {example.source!r} id {example.id!r} ({search.tried()})"
            if on_missing == "error":
                raise InputError(message, file=release, item=entry.where, field=f"examples[{i}].id")
            skipped.append({"id": entry.id, "field": f"examples[{i}].id", "reason": message})
            continue
        items.append(entry_item(entry, paths, benchmark=benchmark, split=split))
    return Loaded(items, skipped, files)


def load_contra4(release: str | Path, media_root: str | Path | None = None, *, benchmark: str = "contra4",
                 split: str | None = None, media_map: Mapping | None = None, media_dirs: MediaDirs | None = None,
                 on_missing: str = "error") -> tuple[list[Item], list[dict]]:
    """``(items, skipped)``; input paths are ``<source>/<name as found>``: with only ``media_root`` (one folder per
    source) they are relative to it, so it can serve as the benchmark folder. ``media_root`` defaults to the
    release file's folder; ``media_dirs`` and ``media_map`` as in ``omnieval.datasets.contra4_media``."""
    loaded = _read(release, media_root, benchmark=benchmark, split=split, media_map=media_map,
                   media_dirs=media_dirs, on_missing=on_missing)
    return loaded.items, loaded.skipped


def convert_contra4(release: str | Path, media_root: str | Path | None, out: str | Path, *, name: str = "contra4",
                    split: str | None = None, media_map: Mapping | None = None, media_dirs: MediaDirs | None = None,
                    copy: bool = False, on_missing: str = "error", overwrite: bool = False) -> ConvertReport:
    """Write a self-contained ``contrastive`` benchmark folder from a release file and its media (module doc):
    ``media/<source>/<name as found>``, hard-linked (or copied). ``out`` must be new or empty, or with
    ``overwrite`` a previous ``contra4`` output, and apart from the release file and the media folders given
    (``omnieval.datasets.output_folder``)."""
    release, out = Path(release), Path(out)
    sources = [Source(release, "the release file")]
    sources += [Source(Path(media_root), "the --media-root folder")] if media_root is not None else []
    sources += [Source(Path(d), f"the --media-root folder of source {s!r}") for s, dirs in (media_dirs or {}).items()
                for d in ([dirs] if isinstance(dirs, str | Path) else dirs)]
    check_output_folder(out, "contra4", overwrite=overwrite, sources=sources)  # before reading the media
    loaded = _read(release, media_root, benchmark=name, split=split, media_map=media_map, media_dirs=media_dirs,
                   on_missing=on_missing)
    with building_folder(out, "contra4", overwrite=overwrite, sources=sources, prefix=".contra4-") as tmp:
        for rel, source in loaded.files.items():
            target = tmp / "media" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if copy:
                shutil.copy2(source, target)
            else:
                try:
                    os.link(source, target)
                except OSError:  # another filesystem, or links not allowed
                    shutil.copy2(source, target)
        converted = [item.model_copy(update={"inputs": [inp.model_copy(update={"path": f"media/{inp.path}"})
                                                        for inp in item.inputs]}) for item in loaded.items]
        (tmp / "items.jsonl").write_text("".join(it.model_dump_json(exclude_none=True) + "\n" for it in converted),
                                         encoding="utf-8")
        meta = {"name": name, "protocol": "contrastive", "source": str(release.name), "split": split or release.stem,
                "generator": "omnieval.datasets.contra4"}
        (tmp / "benchmark.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if loaded.skipped:
            (tmp / "skipped.jsonl").write_text("".join(json.dumps(s) + "\n" for s in loaded.skipped))
    return ConvertReport(out, len(converted) + len(loaded.skipped), len(converted), loaded.skipped)


def read_media_map(path: str | Path) -> dict:
    """A media map JSON file (``{source: {id: file}}`` or the release's ``data2path.json``); ``InputError`` naming
    the file and the table otherwise."""
    path = Path(path)
    if not path.is_file():
        raise InputError("media map file does not exist", file=path)
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", file=path) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object {source: {id: file}}", file=path)
    for source, table in data.items():
        inner = table.get("key2path") if isinstance(table, dict) and "key2path" in table else table
        if not isinstance(inner, dict):
            raise InputError("expected {id: file} (or {\"key2path\": {id: file}})", file=path, field=str(source))
    return data
