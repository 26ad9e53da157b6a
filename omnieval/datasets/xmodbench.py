"""Convert an XModBench release into an omnieval crossmodal benchmark folder.

The release's question files are ``tasks/0N_<task>/<subtask>/<prefix>_questions_<context>_<candidates>.json`` with
context and candidates two of ``audio``, ``vision`` and ``text`` (``solos_audio_bench_questions_audio_vision.json``);
every other JSON file of the release (per-clip metadata under ``Data/``, the ``<prefix>_generation_stats.json``
beside the question files) is skipped and counted. A question file is a list of entries ``{question, conditions:
{modality, input}, options: {A..D: {modality, input}}, correct_answer}`` (extra keys such as ``class`` or
``correct_class`` are ignored). ``input`` is a media path, or the text itself for ``Text``. The task is the
grandparent folder (``01_perception`` -> ``perception``), the subtask the parent.

The release's generator writes the six direction files of a subtask as parallel lists: entry ``i`` of each file is
the same question (the same four classes, the same correct clip). Items are therefore joined by position, not by
media, since one clip may be the answer of several questions. The join is checked: the correct answer's audio,
image or video and text (texts compared without case) and the set of candidates of each modality must be the same
in every direction of an item; where they differ, the entries of that position become items of their own and
``unmatched.jsonl`` names both files and the position. Entries of files with
different lengths, or of a subtask with a single direction file, are likewise evaluated alone and listed there.

Media are linked (hard link, else copied) into the benchmark's ``media/`` folder under a name derived from the
original path, so the folder is self-contained and every path stays inside it. Absolute paths from the machine that
built the release are found by their trailing components under the release folder. Nothing outside the release
folder (or the ``media_root`` given) is ever read: such a path is an error naming the file, entry and field. A
modality label that disagrees with the file's kind (``Image`` for an ``.mp4``) is an error as well.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from omnieval.core.schema import LABELS, InputError
from omnieval.datasets.output_folder import Source, building_folder
from omnieval.datasets.release_media import resolve_release_media
from omnieval.datasets.textfile import read_utf8
from omnieval.protocols.crossmodal import DIRECTIONS, EXTRA_CONDITIONS, LETTER, DirectionEntry, Input, Item

MODALITY_NAMES = {"audio": "audio", "image": "image", "video": "video", "text": "text"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}
VIDEO_SUFFIXES = {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v"}
ID_KEYS = ("id", "question_id", "uid")
# the release's question files: <prefix>_questions_<context>_<candidates>.json
QUESTION_FILE = re.compile(r"^(?P<prefix>.+)_questions_(?P<ctx>audio|vision|text)_(?P<cand>audio|vision|text)\.json$")
FILE_LETTER = {"audio": "A", "vision": "V", "text": "T"}
KIND = {"A": "audio", "V": "image or video", "T": "text"}


@dataclass
class Entry:
    file: Path
    index: int
    task: str | None
    subtask: str | None
    direction: str
    entry: DirectionEntry
    ident: str | None
    # what must agree across the directions of one item, e.g. "the correct answer's audio" -> its resolved path,
    # "the candidates' text" -> the four texts (media paths, texts casefolded)
    entity: dict[str, str]


@dataclass
class ConvertReport:
    out: Path
    n_entries: int
    n_items: int
    unmatched: list[dict]
    n_files: int = 0
    n_skipped: int = 0

    def summary(self) -> str:
        return (f"wrote {self.n_items} items from {self.n_entries} entries of {self.n_files} question files to "
                f"{self.out}; skipped {self.n_skipped} other JSON files (not <prefix>_questions_<context>_"
                f"<candidates>.json); {len(self.unmatched)} entries not matched across directions "
                "(see unmatched.jsonl)")


def _modality(raw, *, file: Path, where: str, field_name: str, value: str | None = None) -> str:
    name = str(raw).strip().lower() if isinstance(raw, str) else ""
    if name == "vision":  # some files say vision: decide by the file suffix
        name = "image" if value and Path(value).suffix.lower() in IMAGE_SUFFIXES else "video"
    if name not in MODALITY_NAMES:
        raise InputError(f"unknown modality {raw!r} (expected Audio, Image, Video or Text)", file=file, item=where,
                         field=field_name)
    return MODALITY_NAMES[name]


class _MediaLinker:
    """Finds release media (only under the release folder or the media root: ``resolve_release_media``) and links
    them into ``out/media`` once each."""

    def __init__(self, roots: list[Path], out: Path, copy: bool):
        self.roots, self.out, self.copy = roots, out, copy
        self.done: dict[Path, str] = {}

    def find(self, raw: str, json_file: Path, *, where: str, field_name: str) -> Path:
        return resolve_release_media(raw, self.roots, base=json_file.parent, file=json_file, item=where,
                                     field=field_name)

    def link(self, source: Path) -> str:
        if source not in self.done:
            digest = hashlib.blake2b(str(source).encode(), digest_size=8).hexdigest()
            rel = Path("media") / f"{digest}{source.suffix.lower()}"
            target = self.out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if self.copy:
                shutil.copy2(source, target)
            else:
                try:
                    os.link(source, target)
                except OSError:  # another filesystem, or links not allowed
                    shutil.copy2(source, target)
            self.done[source] = str(rel)
        return self.done[source]


def _input(raw, linker: _MediaLinker, *, file: Path, where: str, field_name: str) -> tuple[Input, str]:
    """(the converted input, its identity for checking the join: the resolved media path, or the text)."""
    if not isinstance(raw, dict):
        raise InputError("expected an object with 'modality' and 'input'", file=file, item=where, field=field_name)
    value = raw.get("input")
    if not isinstance(value, str) or not value.strip() or value.strip().lower() == "nan":
        raise InputError(f"missing or empty 'input' ({value!r})", file=file, item=where, field=f"{field_name}.input")
    modality = _modality(raw.get("modality"), file=file, where=where, field_name=f"{field_name}.modality",
                         value=value)
    if modality == "text":
        return Input(modality="text", input=value), " ".join(value.split()).casefold()
    suffix = Path(value).suffix.lower()
    if (modality == "image" and suffix in VIDEO_SUFFIXES) or (modality == "video" and suffix in IMAGE_SUFFIXES):
        raise InputError(f"modality {raw.get('modality')!r} disagrees with the file {value!r} (a "
                         f"{'video' if modality == 'image' else 'image'} file)", file=file, item=where,
                         field=f"{field_name}.modality")
    source = linker.find(value, file, where=where, field_name=f"{field_name}.input")
    return Input(modality=modality, input=linker.link(source)), str(source)


def _task_subtask(path: Path, release: Path) -> tuple[str | None, str | None]:
    rel = path.resolve().relative_to(release).parts[:-1]
    clean = [re.sub(r"^\d+_", "", p) for p in rel]
    if len(clean) >= 2:
        return clean[-2], clean[-1]
    if len(clean) == 1:
        return clean[0], None
    return None, None


def _read_entries(path: Path, release: Path, linker: _MediaLinker) -> list[Entry]:
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (line {exc.lineno})", file=path) from None
    if isinstance(data, dict):  # some dumps key entries by index
        data = list(data.values())
    if not isinstance(data, list):
        raise InputError("expected a JSON list of question entries", file=path)
    task, subtask = _task_subtask(path, release)
    named = QUESTION_FILE.match(path.name)
    file_direction = f"{FILE_LETTER[named['ctx']]}->{FILE_LETTER[named['cand']]}"
    out = []
    for index, raw in enumerate(data):
        ident = next((str(raw[k]) for k in ID_KEYS if isinstance(raw, dict) and raw.get(k) is not None), None)
        where = f"entry {index}" + (f" (id {ident})" if ident else "")
        if not isinstance(raw, dict):
            raise InputError("entry is not a JSON object", file=path, item=where)
        question = raw.get("question")
        if not isinstance(question, str) or not question.strip():
            raise InputError("missing 'question'", file=path, item=where, field="question")
        answer = raw.get("correct_answer")
        if not isinstance(answer, str) or not answer.strip():
            raise InputError("missing 'correct_answer'", file=path, item=where, field="correct_answer")
        options_raw = raw.get("options")
        if not isinstance(options_raw, dict) or len(options_raw) < 2:
            raise InputError("'options' must map labels A, B, ... to inputs", file=path, item=where,
                             field="options")
        labels = sorted(options_raw)
        if labels != list(LABELS[: len(labels)]):
            raise InputError(f"option labels must be A, B, ... in order, got {labels}", file=path, item=where,
                             field="options")
        answer = answer.strip().strip("().").upper()
        if answer not in labels:
            raise InputError(f"correct_answer {raw['correct_answer']!r} is not an option label", file=path,
                             item=where, field="correct_answer")
        conditions = raw.get("conditions") or []
        conditions = [conditions] if isinstance(conditions, dict) else conditions
        context, entity, candidates = [], {}, []
        for i, cond in enumerate(conditions):
            name = "conditions" if len(conditions) == 1 else f"conditions[{i}]"
            inp, key = _input(cond, linker, file=path, where=where, field_name=name)
            context.append(inp)
            entity[f"the correct answer's {KIND[LETTER[inp.modality]]}"] = key
        options = []
        for label in labels:
            inp, key = _input(options_raw[label], linker, file=path, where=where, field_name=f"options.{label}")
            options.append(inp)
            candidates.append(key)
            if label == answer:
                entity[f"the correct answer's {KIND[LETTER[inp.modality]]}"] = key
        entity[f"the candidates' {KIND[LETTER[options[0].modality]]}"] = "\n".join(sorted(candidates))
        cand = {o.modality for o in options}
        if len({LETTER[m] for m in cand}) != 1:
            raise InputError(f"options mix modalities {sorted(cand)}", file=path, item=where, field="options")
        source = "".join(sorted({LETTER[c.modality] for c in context}, key="AV".find)) or "none"
        direction = f"{source}->{LETTER[options[0].modality]}"
        if direction not in (*DIRECTIONS, *EXTRA_CONDITIONS):
            raise InputError(f"context and options give direction {direction!r}, which is not a crossmodal direction",
                             file=path, item=where, field="conditions")
        if direction != file_direction:
            raise InputError(f"context and options give direction {direction!r}, but the file name says "
                             f"{file_direction!r}", file=path, item=where,
                             field="conditions" if source != file_direction[0] else "options")
        entry = DirectionEntry(question=question, context=context, options=options, answer=answer)
        out.append(Entry(path, index, task, subtask, direction, entry, ident, entity))
    return out


def _shown(key: str, release: Path) -> str:
    """Media paths relative to the release folder (as the user knows them), texts as they are."""
    def one(k: str) -> str:
        path = Path(k)
        return str(path.relative_to(release)) if path.is_absolute() and path.is_relative_to(release) else k
    return ", ".join(one(k) for k in key.split("\n"))


def _disagreement(members: list[Entry], release: Path) -> str | None:
    """Where the correct answer or the candidates differ between the directions of one position, else None."""
    for what in sorted({k for e in members for k in e.entity}):
        seen = [(e, e.entity[what]) for e in members if what in e.entity]
        for e, key in seen[1:]:
            first, first_key = seen[0]
            if key != first_key:
                return (f"mismatch in {what}: {first.file.relative_to(release)} entry "
                        f"{first.index} has {_shown(first_key, release)!r}, {e.file.relative_to(release)} entry "
                        f"{e.index} has {_shown(key, release)!r}")
    return None


def _groups(by_file: dict[Path, list[Entry]], release: Path) -> tuple[list[list[Entry]], list[tuple[Entry, str]]]:
    """Items from the parallel direction files of each subtask: position ``i`` of every file is one item, where
    the files have one length and the correct answer's entity agrees across them."""
    sets: dict[tuple[Path, str], list[Path]] = defaultdict(list)
    for path in by_file:
        sets[(path.parent, QUESTION_FILE.match(path.name)["prefix"])].append(path)
    groups, unmatched = [], []
    for paths in sets.values():
        lengths = {len(by_file[p]) for p in paths}
        if len(paths) == 1 or len(lengths) != 1:
            reason = ("no other direction file of this subtask" if len(paths) == 1 else
                      "the direction files of this subtask differ in length (" +
                      ", ".join(f"{p.name}: {len(by_file[p])}" for p in sorted(paths)) + "), so they are not aligned")
            for p in paths:
                for e in by_file[p]:
                    groups.append([e])
                    unmatched.append((e, reason))
            continue
        for i in range(lengths.pop()):
            members = [by_file[p][i] for p in sorted(paths)]
            reason = _disagreement(members, release)
            if reason is None:
                groups.append(members)
            else:
                for e in members:
                    groups.append([e])
                    unmatched.append((e, f"not joined: {reason}"))
    return groups, unmatched


def convert_xmodbench(release_dir: str | Path, out_dir: str | Path, *, copy_media: bool = False,
                      name: str = "xmodbench", media_root: str | Path | None = None,
                      overwrite: bool = False) -> ConvertReport:
    """Read the question files under ``release_dir`` and write a crossmodal benchmark folder to ``out_dir``. Media
    are read only under ``release_dir`` or ``media_root`` (a folder the release's media live in, if not beside it).
    ``out_dir`` must be new or empty, or with ``overwrite`` a previous ``xmodbench`` output, and apart from both
    (``omnieval.datasets.output_folder``)."""
    release = Path(release_dir).resolve()
    if not release.is_dir():
        raise InputError("release folder does not exist", file=release)
    roots = [release]
    if media_root is not None:
        roots.append(Path(media_root).resolve())
        if not roots[-1].is_dir():
            raise InputError("media root folder does not exist", file=roots[-1], field="--media-root")
    every = sorted(p for p in release.rglob("*.json") if p.is_file())
    files = [p for p in every if QUESTION_FILE.match(p.name)]
    if not files:
        raise InputError(f"no question files (<prefix>_questions_<context>_<candidates>.json) under the release "
                         f"folder ({len(every)} other JSON files)", file=release)
    out = Path(out_dir)
    sources = [Source(release, "the release folder")]
    sources += [Source(roots[1], "the --media-root folder")] if media_root is not None else []
    # replaces ``out`` when all is written
    with building_folder(out, "xmodbench", overwrite=overwrite, sources=sources, prefix=".xmodbench-") as tmp:
        linker = _MediaLinker(roots, tmp, copy_media)
        by_file = {f: _read_entries(f, release, linker) for f in files}
        entries = [e for f in files for e in by_file[f]]
        groups, unmatched = _groups(by_file, release)
        groups.sort(key=lambda g: (g[0].task or "", g[0].subtask or "", str(g[0].file), g[0].index))
        items = []
        for n, members in enumerate(groups):
            first = members[0]
            scope = "/".join(p for p in (first.task, first.subtask) if p) or "all"
            items.append(Item(item_id=f"{scope}/{n:06d}", benchmark=name, task=first.task, subtask=first.subtask,
                              directions={e.direction: e.entry for e in members}))
        (tmp / "items.jsonl").write_text("".join(it.model_dump_json(exclude_none=True) + "\n" for it in items))
        report = [{"file": str(e.file.relative_to(release)), "entry": e.index, "direction": e.direction,
                   "reason": reason} for e, reason in unmatched]
        (tmp / "unmatched.jsonl").write_text("".join(json.dumps(r) + "\n" for r in report))
        meta = {"name": name, "protocol": "crossmodal", "source": str(release), "entries": len(entries),
                "items": len(items), "unmatched": len(report), "question_files": len(files),
                "skipped_json_files": len(every) - len(files), "generator": "omnieval.datasets.xmodbench"}
        (tmp / "benchmark.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return ConvertReport(out=out, n_entries=len(entries), n_items=len(items), unmatched=report, n_files=len(files),
                         n_skipped=len(every) - len(files))
