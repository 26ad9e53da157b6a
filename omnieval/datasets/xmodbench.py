"""Convert an XModBench release into an omnieval crossmodal benchmark folder.

The release keeps one JSON file per subtask and direction (``01_perception/instruments/..._questions_audio_text.json``),
each a list of entries ``{question, conditions: {modality, input}, options: {A..D: {modality, input}},
correct_answer}`` (extra keys such as ``class`` or ``category`` are ignored). ``input`` is a media path, or the text
itself for ``Text``. The task is the grandparent folder (``01_perception`` -> ``perception``), the subtask the parent.

Consistency and agreement need to know which entries of the six direction files are the same item. An entry's id
(``id``, ``question_id`` or ``uid``) is used where present; otherwise entries are joined through their media: an
entry links its context media with the media of its correct option (``A->V`` links the audio clip to the image,
``V->T`` the image to nothing new, ``T->A`` the audio clip), and the connected entries of one subtask are one item.
Text never links (one class label names many clips). An item in which one direction occurs twice is ambiguous: its
entries become items of their own. Entries left alone (or ambiguous) are evaluated all the same and listed in
``unmatched.jsonl`` with the reason; the converter prints how many.

Media are linked (hard link, else copied) into the benchmark's ``media/`` folder under a name derived from the
original path, so the folder is self-contained and every path stays inside it. Absolute paths from the machine that
built the release are found by their trailing components under the release folder. Nothing outside the release
folder (or the ``media_root`` given) is ever read: such a path is an error naming the file, entry and field.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from omnieval.datasets.benchmark import building_folder
from omnieval.datasets.release_media import resolve_release_media
from omnieval.datasets.textfile import read_utf8
from omnieval.protocols.crossmodal import DIRECTIONS, EXTRA_CONDITIONS, LETTER, DirectionEntry, Input, Item
from omnieval.schema import LABELS, InputError

MODALITY_NAMES = {"audio": "audio", "image": "image", "video": "video", "text": "text"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}
ID_KEYS = ("id", "question_id", "uid")


@dataclass
class Entry:
    file: Path
    index: int
    task: str | None
    subtask: str | None
    direction: str
    entry: DirectionEntry
    ident: str | None
    links: list[str] = field(default_factory=list)


@dataclass
class ConvertReport:
    out: Path
    n_entries: int
    n_items: int
    unmatched: list[dict]

    def summary(self) -> str:
        return (f"wrote {self.n_items} items from {self.n_entries} entries to {self.out}; "
                f"{len(self.unmatched)} entries not matched across directions (see unmatched.jsonl)")


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


def _input(raw, linker: _MediaLinker, *, file: Path, where: str, field_name: str) -> tuple[Input, str | None]:
    """(the converted input, its link key for matching: the resolved media path, or None for text)."""
    if not isinstance(raw, dict):
        raise InputError("expected an object with 'modality' and 'input'", file=file, item=where, field=field_name)
    value = raw.get("input")
    if not isinstance(value, str) or not value.strip():
        raise InputError("missing or empty 'input'", file=file, item=where, field=f"{field_name}.input")
    modality = _modality(raw.get("modality"), file=file, where=where, field_name=f"{field_name}.modality",
                         value=value)
    if modality == "text":
        return Input(modality="text", input=value), None
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
        context, links = [], []
        for i, cond in enumerate(conditions):
            name = "conditions" if len(conditions) == 1 else f"conditions[{i}]"
            inp, key = _input(cond, linker, file=path, where=where, field_name=name)
            context.append(inp)
            links += [key] if key else []
        options = []
        for label in labels:
            inp, key = _input(options_raw[label], linker, file=path, where=where, field_name=f"options.{label}")
            options.append(inp)
            if label == answer and key:
                links.append(key)
        cand = {o.modality for o in options}
        if len({LETTER[m] for m in cand}) != 1:
            raise InputError(f"options mix modalities {sorted(cand)}", file=path, item=where, field="options")
        source = "".join(sorted({LETTER[c.modality] for c in context}, key="AV".find)) or "none"
        direction = f"{source}->{LETTER[options[0].modality]}"
        if direction not in (*DIRECTIONS, *EXTRA_CONDITIONS):
            raise InputError(f"context and options give direction {direction!r}, which is not a crossmodal direction",
                             file=path, item=where, field="conditions")
        entry = DirectionEntry(question=question, context=context, options=options, answer=answer)
        out.append(Entry(path, index, task, subtask, direction, entry, ident, links))
    return out


def _groups(entries: list[Entry]) -> tuple[list[list[Entry]], list[tuple[Entry, str]]]:
    """Connected entries per (task, subtask): by id where present, else through shared media (union-find)."""
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple, int] = {}
    for i, e in enumerate(entries):
        keys = [("id", e.task, e.subtask, e.ident)] if e.ident else [("media", e.task, e.subtask, k) for k in e.links]
        for key in keys:
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    components: dict[int, list[Entry]] = defaultdict(list)
    for i, e in enumerate(entries):
        components[find(i)].append(e)
    groups, unmatched = [], []
    for members in components.values():
        directions = [e.direction for e in members]
        if len(set(directions)) < len(directions):
            for e in members:
                groups.append([e])
                unmatched.append((e, "ambiguous: matched an item that has this direction already"))
        else:
            groups.append(members)
            if len(members) == 1:
                unmatched.append((members[0], "no entry of another direction shares its id or media"))
    return groups, unmatched


def convert_xmodbench(release_dir: str | Path, out_dir: str | Path, *, copy_media: bool = False,
                      name: str = "xmodbench", media_root: str | Path | None = None) -> ConvertReport:
    """Read every ``*.json`` under ``release_dir`` and write a crossmodal benchmark folder to ``out_dir``. Media are
    read only under ``release_dir`` or ``media_root`` (a folder the release's media live in, if not beside it)."""
    release = Path(release_dir).resolve()
    if not release.is_dir():
        raise InputError("release folder does not exist", file=release)
    roots = [release]
    if media_root is not None:
        roots.append(Path(media_root).resolve())
        if not roots[-1].is_dir():
            raise InputError("media root folder does not exist", file=roots[-1], field="--media-root")
    files = sorted(p for p in release.rglob("*.json") if p.is_file())
    if not files:
        raise InputError("no JSON files under the release folder", file=release)
    out = Path(out_dir)
    with building_folder(out, prefix=".xmodbench-") as tmp:  # replaces ``out`` in one rename when all is written
        linker = _MediaLinker(roots, tmp, copy_media)
        entries = [e for f in files for e in _read_entries(f, release, linker)]
        groups, unmatched = _groups(entries)
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
                "items": len(items), "unmatched": len(report), "converter": "omnieval.datasets.xmodbench"}
        (tmp / "benchmark.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return ConvertReport(out=out, n_entries=len(entries), n_items=len(items), unmatched=report)
