"""What every omni-release converter shares: reading the release's files with one-line errors, normalising options
and answers, finding and linking media only under the release's folders, and writing the ``spectrum`` benchmark
folder (docs/benchmarks.md, "Omni benchmarks").

* **Errors** are ``InputError``s naming the file, the entry (``Where.item``) and the field, on one line.
* **Options** are texts; a release that writes the labels into them (``"A. Apples."``, ``"(B) ..."``) has them
  stripped wherever it writes one, in order or not (``strip_option_labels``), but a label is a letter of the
  question's with its punctuation, so an option that merely starts with ``A`` (``"A man is talking"``) is kept
  whole, and a question writes labels only where most of its options carry one.
* **Answers** become the correct option's label (``"A"``...), from a label, a labelled option text or the option
  text itself. A release that gives and scores the answer as the option's text (MMAU, MMAR: ``text_answered``) has a
  one-letter answer read as text, blank options left out and repeated ones merged (``merge_repeated_options``).
* **Media** are named by relative paths tried in order under the release folder, then the media root
  (``MediaRef.paths``), and hard-linked (else copied; ``copy=True`` always copies) to ``media/<the same relative
  path>`` (``media/media-root/...`` for a file under the media root), or written from bytes a Parquet cell embeds
  (``media/embedded/<content hash><suffix>``: an image, a sound, or a video named ``.mp4``, ``.mkv``, ...). A path
  found as no file may be a member of the release's zip archives (``MediaRef.archives``, module ``archives``): the
  member is extracted to ``media/<that path>``, as if the release had been unpacked. An entry may show several files
  of one modality (a list of ``MediaRef``: ``spectrum.Item.media``). A path that leaves those folders, a symbolic
  link included, is never read. A video file named as both an item's ``video`` and its ``audio`` is the video with
  its own soundtrack (docs/benchmarks.md, "A video's own soundtrack"): the converters never extract a soundtrack.
* **Splits**: a split none of whose entries has an answer is skipped and reported (``Converted.skipped_splits``); an
  entry without an answer in a split that has answers is an error, or skipped as below.
* **Skipped entries**: one unsound entry (an answer that is none of its options, a missing clip) never refuses the
  release. A converter builds each entry with ``sound_entries``, which keeps the ``EntryError`` (an ``InputError``
  raised through ``Where.error``) of an entry it cannot build as a ``Skipped``; ``write_release`` (``skip_unsound``)
  adds those whose answer, media, item or id fail there, writes them to ``<out>/skipped.jsonl`` (one line each:
  ``item_id``, ``file``, ``entry``, ``field``, ``reason``), counts them in the summary and in ``benchmark.json``
  (``skipped_entries``) and refuses, with the first one's error, a release none of whose entries is sound. Errors
  about the release as a whole (no question file, not a list) still refuse it.
* **Text alternatives** (``Entry.text_alternatives``: modality -> a text stand-in the release gives, a transcript,
  a caption, subtitles) are written as the item field ``text_alternatives`` when ``WRITE_TEXT_ALTERNATIVES`` is on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from omnieval.core.schema import LABELS, InputError, option_key, pydantic_message
from omnieval.datasets.mcq_images import CellError, check_decodes, missing_cell
from omnieval.datasets.omni.archives import ReleaseArchives
from omnieval.datasets.output_folder import Source, building_folder, check_output_folder
from omnieval.datasets.release_media import is_inside
from omnieval.datasets.textfile import read_utf8, utf8_lines
from omnieval.protocols.spectrum import MEDIA, Item
from omnieval.scoring import scorer_names

WRITE_TEXT_ALTERNATIVES = True
"""Write each item's ``text_alternatives`` (modality -> text stand-in) into ``items.jsonl``, where the ``spectrum``
conditions ``<m>_as_text`` show the stand-in instead of the medium (off: benchmarks without them, as before)."""

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff"})
VIDEO_MAGIC = ((4, b"ftyp", (".mp4", ".mov", ".m4v")), (0, b"\x1a\x45\xdf\xa3", (".mkv", ".webm")),
               (8, b"AVI ", (".avi",)))
"""The signature of each embedded video container (offset, bytes) and the suffixes that name it."""
AUDIO_MAGIC = ((b"RIFF", ".wav"), (b"ID3", ".mp3"), (b"fLaC", ".flac"), (b"OggS", ".ogg"), (b"\xff\xfb", ".mp3"),
               (b"\xff\xf3", ".mp3"), (b"\xff\xf2", ".mp3"))
SKIPPED_FILE = "skipped.jsonl"
"""The entries a converter left out, one JSON object a line (``Skipped``), beside ``items.jsonl``."""
_LABEL_PREFIX = re.compile(r"^\s*[(\[]?([A-Z])\s*(?:[.):\]]|\)\.)\s*(.*)$", re.DOTALL)


# ---------------------------------------------------------------------------------------------------------------
# Where an entry is, and reading the release's files
# ---------------------------------------------------------------------------------------------------------------

class EntryError(InputError):
    """An ``InputError`` about one entry of a release (``Where.error``): that entry can be skipped, the rest kept
    (``sound_entries``). ``reason`` is the message without the file, entry and field it is prefixed with."""

    def __init__(self, message: str, *, file: Path, item: str, field: str | None, item_id: str | None):
        super().__init__(message, file=file, item=item, field=field)
        self.reason, self.item_id = message, item_id


@dataclass(frozen=True)
class Where:
    """An entry of a release file, for errors: ``item`` as the user would find it (``entry 3 (video abc)``), and its
    item id once read (for ``skipped.jsonl``)."""

    file: Path
    item: str
    item_id: str | None = None

    def error(self, message: str, field_name: str | None = None) -> EntryError:
        return EntryError(message, file=self.file, item=self.item, field=field_name, item_id=self.item_id)

    def named(self, label: str, item_id: str) -> Where:
        """This entry once its id is read: ``entry 3`` becomes ``entry 3 (<label> <item_id>)``."""
        return Where(self.file, f"{self.item} ({label} {item_id})", item_id)


@dataclass(frozen=True)
class Skipped:
    """An entry left out of the benchmark and why: one line of ``skipped.jsonl`` (``item_id`` is None where the
    entry's id could not be read)."""

    item_id: str | None
    file: str | None
    entry: str | None
    field: str | None
    reason: str

    @classmethod
    def of(cls, error: EntryError) -> Skipped:
        return cls(error.item_id, error.file, error.item, error.field, error.reason)

    def error(self) -> InputError:
        return InputError(self.reason, file=self.file, item=self.entry, field=self.field)


Built = TypeVar("Built")


def sound_entries(records: Iterable[tuple[Where, Any]],
                  build: Callable[[Any, Where], Built]) -> tuple[list[Built], list[Skipped]]:
    """``build(record, where)`` of each record, and a ``Skipped`` for each whose build raised an ``EntryError``: one
    unsound entry is listed, never a reason to refuse the release (module doc)."""
    kept, skipped = [], []
    for where, record in records:
        try:
            kept.append(build(record, where))
        except EntryError as exc:
            skipped.append(Skipped.of(exc))
    return kept, skipped


def read_json(path: Path) -> Any:
    """The whole JSON document; not valid JSON is an error naming the file, line and column."""
    try:
        return json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", file=path) from None


def read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line; a line that is not JSON is an error naming it."""
    for number, line in enumerate(utf8_lines(path), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {number} is not valid JSON: {exc.msg}", file=path, item=f"line {number}") \
                from None


def field_text(record: dict, key: str, where: Where, *, required: bool = True) -> str | None:
    """A non-empty text field (numbers are taken as their text); missing or blank: an error, or None if not
    ``required``."""
    value = record.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and not missing_cell(value):
        value = str(int(value)) if float(value).is_integer() else str(value)
    if missing_cell(value):
        if required:
            raise where.error(f"missing or empty {key!r}", key)
        return None
    if not isinstance(value, str):
        raise where.error(f"expected a text, got {type(value).__name__}", key)
    return value.strip()


def file_name(record: dict, key: str, where: Where) -> str:
    """A field naming a media file by id (a video id): a plain name, never a path."""
    name = field_text(record, key, where)
    if name in (".", "..") or "/" in name or "\\" in name:
        raise where.error(f"{name!r} is not a plain file name (ids name files inside the release's folders)", key)
    return name


# ---------------------------------------------------------------------------------------------------------------
# Options and answers
# ---------------------------------------------------------------------------------------------------------------

def written_labels(options: Sequence[str]) -> list[str | None]:
    """The label each option is written with (``A. ``, ``(B)``, ``C)``, ``D:``, ``A.text``), None where it has none:
    one of the question's own labels (``A`` to the n-th letter), followed by its punctuation and some text. A first
    word without that punctuation (``"A man is talking"``) or a letter past the question's labels (``"U.S. Army"`` in
    four options) is no label."""
    labels = LABELS[: len(options)]
    found = []
    for option in options:
        match = _LABEL_PREFIX.match(option)
        found.append(match.group(1) if match and match.group(1) in labels and match.group(2).strip() else None)
    return found


def writes_labels(written: Sequence[str | None]) -> bool:
    """Whether a question writes labels into its options: more than half of them carry one (``written_labels``)."""
    return 2 * sum(label is not None for label in written) > len(written)


def strip_option_labels(options: Sequence[str]) -> list[str]:
    """The option texts without the labels the release writes into them (``written_labels``), wherever it writes
    one, in order or not (``A. x``, ``B. y``, ``A. z``, ``B. w``): a question writes labels when more than half of
    its options carry one, so a lone option that happens to start so (``"C.S. Lewis"``) is kept whole. Which option
    is the answer is left to the caller: a written label never moves it (``answer_label``)."""
    written = written_labels(options)
    if not writes_labels(written):
        return list(options)
    return [_LABEL_PREFIX.match(o).group(2).strip() if label else o for o, label in zip(options, written, strict=True)]


def option_texts(value: Any, where: Where, field_name: str, *, drop_blank: bool = False) -> list[str]:
    """A list of 2-26 non-empty option texts (labels stripped, ``strip_option_labels``). ``drop_blank``: blank
    options are left out, not refused (for releases that give the answer as a text, where no label moves)."""
    if hasattr(value, "tolist"):  # a Parquet list cell read as an array
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise where.error(f"expected a list of options, got {type(value).__name__}", field_name)
    if drop_blank:
        value = [o for o in value if not (isinstance(o, str) and not o.strip())]
    if not 2 <= len(value) <= len(LABELS):
        raise where.error(f"{len(value)} options (2 to {len(LABELS)} needed)", field_name)
    for i, option in enumerate(value):
        if not isinstance(option, str) or not option.strip():
            raise where.error(f"option {i} is {'empty' if isinstance(option, str) else type(option).__name__}",
                              field_name)
    return strip_option_labels([o.strip() for o in value])


def merge_repeated_options(options: Sequence[str]) -> list[str]:
    """The options without every later copy of one that reads the same as an earlier one (``option_key``: case,
    spaces and punctuation aside): a ``spectrum`` item refuses repeated options, since a model choosing the copy that
    is not the answer would be scored wrong for the right answer. Merged, the copies are one option, which is the
    answer when either copy was (MMAU and MMAR score an answer by its text, so there the copies already are one
    answer). ``merged_label`` moves a label to the merged options."""
    seen: set[str] = set()
    kept = []
    for option in options:
        key = option_key(option)
        if key not in seen:
            seen.add(key)
            kept.append(option)
    return kept


def merged_label(label: str, written: Sequence[str], merged: Sequence[str]) -> str:
    """The label, among ``merged`` (``merge_repeated_options(written)``), of the option ``label`` names in
    ``written``."""
    key = option_key(written[LABELS.index(label)])
    return LABELS[[option_key(o) for o in merged].index(key)]


def text_answered(record: dict, options_key: str, answer_key: str, where: Where) -> tuple[list[str], str | None, bool]:
    """The options, the answer's label (None where the release withholds it) and whether the options were changed,
    for a release that gives the answer as the correct option's text and scores it by that text (MMAU, MMAR): blank
    options are left out and repeated ones merged (``merge_repeated_options``), which moves no answer; a one-letter
    answer is an option's text, never a label."""
    raw = record.get(options_key)
    written = option_texts(raw, where, options_key, drop_blank=True)
    options = merge_repeated_options(written)
    changed = len(options) < len(raw)
    return options, given_answer(record, answer_key, options, where, text_only=True), changed


def changed_options_note(item_ids: Sequence[str]) -> str:
    """The converter's note naming the questions whose options were merged or left out."""
    shown = ", ".join(item_ids[:5]) + (", ..." if len(item_ids) > 5 else "")
    return (f"left out blank options or merged repeated ones in {len(item_ids)} question"
            f"{'s' if len(item_ids) != 1 else ''} ({shown})")


def answer_label(value: Any, options: Sequence[str], where: Where, field_name: str,
                 raw_options: Sequence[str] | None = None, *, text_only: bool = False) -> str:
    """The label of the correct option: ``value`` is a label (``"B"``, ``"(B)"``, ``"B."``), a labelled option as the
    release writes it (one of ``raw_options``), or exactly one option's text (compared as written, then with case
    and runs of spaces ignored). ``text_only``: the release always gives the text, so ``"D"`` is the option that
    reads ``D`` (MMAU's musical notes), never the fourth."""
    labels = LABELS[: len(options)]
    if missing_cell(value) or not isinstance(value, str):
        raise where.error(f"expected the answer as a label or an option text, got {value!r}", field_name)
    text = value.strip()
    match = None if text_only else re.fullmatch(r"[(\[]?([A-Za-z])[)\].]?", text)
    if match and match.group(1).upper() in LABELS:
        label = match.group(1).upper()
        if label not in labels:
            raise where.error(f"answer {text!r} but the question has {len(options)} options "
                              f"({labels[0]}..{labels[-1]})", field_name)
        return label
    for candidates in (raw_options or [], options):
        hits = [lab for lab, opt in zip(labels, candidates, strict=False) if opt.strip() == text]
        if len(hits) == 1:
            return hits[0]
    folded = " ".join(text.split()).casefold()
    hits = [lab for lab, opt in zip(labels, options, strict=True) if " ".join(opt.split()).casefold() == folded]
    if len(hits) == 1:
        return hits[0]
    if text_only:
        raise where.error(f"answer {text!r} is not exactly one of the options", field_name)
    raise where.error(f"answer {text!r} is neither a label {labels[0]}..{labels[-1]} nor exactly one of the options",
                      field_name)


def given_answer(record: dict, key: str, options: Sequence[str], where: Where,
                 raw_options: Sequence[str] | None = None, *, text_only: bool = False) -> str | None:
    """The label of ``record[key]`` (``answer_label``), None where the release gives no answer (missing, null,
    blank or ``nan``: an answerless split)."""
    value = record.get(key)
    return None if missing_cell(value) else answer_label(value, options, where, key, raw_options,
                                                         text_only=text_only)


# ---------------------------------------------------------------------------------------------------------------
# Media
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MediaRef:
    """One medium of an entry: ``paths`` (relative to the release's folders, tried in order) or ``data`` (bytes a
    Parquet cell embeds, ``name`` its file name, whose suffix names the format); ``field`` is the entry field that
    names it, for errors."""

    field: str
    paths: tuple[str, ...] = ()
    data: bytes | None = None
    name: str | None = None
    archives: ReleaseArchives | None = None
    """The release's zip archives, where ``paths`` not found as files are looked up as members (``archives``)."""


class MediaLinker:
    """Finds media under ``roots`` (the release folder, then the media root) and places each file once in
    ``out/media``."""

    def __init__(self, roots: Sequence[Path], out: Path, copy: bool):
        self.roots = [Path(r).resolve() for r in roots]
        self.out, self.copy = out, copy
        self.placed: dict[Path | str, str] = {}

    def find(self, paths: Sequence[str], where: Where, field_name: str) -> Path:
        return find_file(paths, self.roots, where, field_name)

    def check(self, ref: MediaRef, where: Where) -> None:
        """Refuse (``where.error``) a medium that is neither a file under the roots nor a member of the release's
        archives, without placing anything; bytes a cell embeds are checked when they are written."""
        if ref.data is not None:
            return
        if find_file(ref.paths, self.roots, where, ref.field, required=not ref.archives) is None \
                and ref.archives.find(ref.paths, where, ref.field) is None:
            raise where.error(missing_media(ref.paths, self.roots, ref.archives.looked_in(ref.paths)), ref.field)

    def place(self, ref: MediaRef, where: Where) -> str:
        """The benchmark-relative path of the medium, linked (or copied, or written) into ``out/media`` once."""
        if ref.data is not None:
            return self._write(ref, where)
        source = find_file(ref.paths, self.roots, where, ref.field, required=not ref.archives)
        if source is None:
            return self._extract(ref, where)
        if source not in self.placed:
            root = next(r for r in self.roots if source == r or r in source.parents)
            prefix = Path("media") if root == self.roots[0] else Path("media", "media-root")
            rel = prefix / source.relative_to(root)
            target = self.out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(source, target, self.copy)
            self.placed[source] = rel.as_posix()
        return self.placed[source]

    def _extract(self, ref: MediaRef, where: Where) -> str:
        """The path of the archive member standing for ``ref.paths``, extracted into ``out/media`` at the path the
        unpacked file would have had there, once."""
        member = ref.archives.find(ref.paths, where, ref.field)
        if member is None:
            raise where.error(missing_media(ref.paths, self.roots, ref.archives.looked_in(ref.paths)), ref.field)
        key = f"{member.archive}::{member.info.filename}"
        if key not in self.placed:
            rel = Path("media", member.path)
            ref.archives.extract(member, self.out / rel, where, ref.field)
            self.placed[key] = rel.as_posix()
        return self.placed[key]

    def _write(self, ref: MediaRef, where: Where) -> str:
        data = ref.data
        suffix = Path(ref.name or "").suffix.lower()
        if suffix in IMAGE_SUFFIXES:
            try:
                check_decodes(data, suffix, ref.field)
            except CellError as exc:
                raise where.error(str(exc), ref.field) from None
        elif any(suffix in names for _, _, names in VIDEO_MAGIC):
            if not any(data[offset:offset + len(magic)] == magic and suffix in names
                       for offset, magic, names in VIDEO_MAGIC):
                raise where.error(f"embedded video {ref.name!r} ({len(data)} bytes) is not the container its name "
                                  "says", ref.field)
        else:
            known = next((ext for magic, ext in AUDIO_MAGIC if data.startswith(magic)), None)
            if known is None:
                raise where.error(f"embedded audio {ref.name!r} ({len(data)} bytes) is not WAV, MP3, FLAC or Ogg",
                                  ref.field)
            suffix = suffix or known
        digest = hashlib.sha256(data).hexdigest()[:20]
        rel = f"media/embedded/{digest}{suffix}"
        if rel not in self.placed:
            (self.out / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.out / rel).write_bytes(data)
            self.placed[rel] = rel
        return rel


def media_roots(release: Path, media_root: str | Path | None) -> list[Path]:
    """The folders media are read from: the release folder, then the media root if given."""
    return [Path(release)] + ([Path(media_root)] if media_root is not None else [])


def find_file(paths: Sequence[str], roots: Sequence[Path], where: Where, field_name: str, *,
              required: bool = True) -> Path | None:
    """The first of ``paths`` (relative) that is a file under one of ``roots``, tried root by root; a candidate that
    resolves outside every root (a symbolic link out) is never read. None when none is and not ``required``."""
    outside = None
    for rel in paths:
        for root in roots:
            candidate = Path(root) / rel
            if not is_inside(candidate, roots):
                outside = outside or candidate
                continue
            if candidate.is_file():
                return candidate.resolve()
    where_text = " or ".join(str(r) for r in roots)
    if outside is not None and outside.exists():
        raise where.error(f"{paths[0]!r} resolves to {outside.resolve()}, outside {where_text}: media are read only "
                          "under the release folder (and --media-root)", field_name)
    if required:
        raise where.error(missing_media(paths, roots), field_name)
    return None


def missing_media(paths: Sequence[str], roots: Sequence[Path], archives: Sequence[Path] = ()) -> str:
    """The message for a medium found neither as a file nor (``archives``: those looked in) as an archive member."""
    message = f"no media file {', '.join(repr(p) for p in paths)} under {' or '.join(str(r) for r in roots)}"
    if archives:
        message += f", nor as a member of {', '.join(str(a) for a in archives)}"
    return message


def _link_or_copy(source: Path, target: Path, copy: bool) -> None:
    if not copy:
        try:
            os.link(source, target)
            return
        except OSError:  # another filesystem, or links not allowed
            pass
    shutil.copy2(source, target)


# ---------------------------------------------------------------------------------------------------------------
# Entries -> the benchmark folder
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Entry:
    """One question of a release, normalised: ``answer`` is a label, or None where the release gives none;
    ``evidence_modality`` the release's label of where the answer's evidence lies (``spectrum.Item``). An open
    question (``is_open``: no options, no answer label; ``spectrum.Item``'s open items) has its ground truth in
    words in ``reference``, or none."""

    where: Where
    item_id: str
    question: str
    options: list[str]
    answer: str | None
    media: dict[str, MediaRef | list[MediaRef]]
    split: str = "all"
    category: str | None = None
    task: str | None = None
    text_alternatives: dict[str, str] = field(default_factory=dict)
    evidence_modality: str | None = None
    breakdowns: dict[str, str] = field(default_factory=dict)
    """The release's own score breakdowns for this question (``spectrum.Item.breakdowns``), blank values left out."""
    fields: dict[str, str] = field(default_factory=dict)
    """The release's name of an item field where it differs (``{"options": "Choice"}``), for errors."""
    reference: str | None = None
    is_open: bool = False
    rated: bool = False

    def release_field(self, name: str) -> str:
        return self.fields.get(name, name)


@dataclass
class Converted:
    """What a converter wrote: items per split, distinct media files, the answerless splits skipped (their entry
    counts), the items with a text stand-in per modality, the entries skipped (``skipped.jsonl``) and what the
    converter has to say (filters applied)."""

    out: Path
    splits: dict[str, int]
    n_media: int
    skipped_splits: dict[str, int] = field(default_factory=dict)
    text_alternatives: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def n_items(self) -> int:
        return sum(self.splits.values())

    def summary(self) -> str:
        parts = ", ".join(f"{s}: {n}" for s, n in self.splits.items())
        order = sorted(self.text_alternatives, key=lambda m: MEDIA.index(m) if m in MEDIA else len(MEDIA))
        alternatives = "".join(f"; a text stand-in for {m} on {self.text_alternatives[m]} of {self.n_items} items"
                               for m in order)
        return (f"wrote {self.n_items} items ({parts}) and {self.n_media} media files to {self.out}{alternatives}"
                f"{skipped_summary(self.skipped, self.out)}")


def skipped_summary(skipped: Sequence[Skipped], out: Path) -> str:
    """The summary's clause on the skipped entries: how many, the first few with their reasons, and where all are
    listed; empty when none was."""
    if not skipped:
        return ""
    shown = "; ".join(f"{s.entry}: {s.reason}" for s in skipped[:3]) + ("; ..." if len(skipped) > 3 else "")
    n = len(skipped)
    return (f"; skipped {n} entr{'y' if n == 1 else 'ies'} that could not be converted, each with its reason in "
            f"{Path(out) / SKIPPED_FILE} ({shown})")


def check_out(out: str | Path, converter: str, sources: Sequence[Source], overwrite: bool) -> None:
    """Refuse an ``--out`` the converter may not write before reading anything (``output_folder``)."""
    check_output_folder(out, converter, overwrite=overwrite, sources=sources)


def release_sources(release: Path, media_root: str | Path | None) -> list[Source]:
    sources = [Source(release, "the release folder")]
    return sources + ([Source(Path(media_root), "the --media-root folder")] if media_root is not None else [])


def write_release(entries: Iterable[Entry], out: str | Path, *, converter: str, name: str, release: Path,
                  media_root: str | Path | None = None, copy: bool = False, overwrite: bool = False,
                  meta: dict | None = None, notes: Sequence[str] = (), skipped: Sequence[Skipped] = (),
                  skip_unsound: bool = False, scorer: str | None = None) -> Converted:
    """Write the ``spectrum`` benchmark folder ``out`` from ``entries`` (module doc): built beside ``out`` and moved
    into place when complete (``output_folder``), media only from under ``release`` and ``media_root``. ``skipped``:
    the entries the converter could not build, written to ``skipped.jsonl``; with ``skip_unsound``, those whose
    answer, media, item or id fail here are added to them, else such an entry refuses the release. ``scorer``: the
    name of the benchmark's released answer-scoring rule (``omnieval.scoring``), recorded as ``"scorer"``."""
    if scorer is not None and scorer not in scorer_names():
        raise ValueError(f"{converter}: unknown scorer {scorer!r}; known scorers: {', '.join(scorer_names())}")
    sources = release_sources(release, media_root)
    entries = list(entries)
    chosen, skipped_splits, skipped = _answered_splits(entries, list(skipped), release, skip_unsound)
    with building_folder(out, converter, overwrite=overwrite, sources=sources, prefix=f".{converter}-") as tmp:
        linker = MediaLinker(media_roots(release, media_root), tmp, copy)
        seen: dict[str, Where] = {}
        counts: dict[str, int] = {}
        stand_ins: dict[str, int] = {}
        with open(tmp / "items.jsonl", "w", encoding="utf-8") as f:
            for entry in entries:
                if entry.split not in chosen or (entry.answer is None and not entry.is_open):
                    continue
                try:
                    line = _item_line(entry, name, linker, seen)
                except EntryError as exc:
                    if not skip_unsound:
                        raise
                    skipped.append(Skipped.of(exc))
                    continue
                seen[entry.item_id] = entry.where
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                counts[entry.split] = counts.get(entry.split, 0) + 1
                for modality in line.get("text_alternatives", {}):
                    stand_ins[modality] = stand_ins.get(modality, 0) + 1
        if not counts:
            raise _none_sound(skipped)
        info = {"name": name, "protocol": "spectrum", "source": str(release), "n_items": sum(counts.values()),
                "splits": counts, "generator": f"omnieval.datasets.omni.{converter.replace('-', '_')}",
                **(meta or {})}
        if scorer is not None:
            info["scorer"] = scorer
        if skipped_splits:
            info["skipped_splits"] = skipped_splits
        if stand_ins:
            info["text_alternatives"] = stand_ins
        if skipped:
            info["skipped_entries"] = len(skipped)
            write_skipped(tmp, skipped)
        (tmp / "benchmark.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return Converted(out=Path(out), splits=counts, n_media=len(linker.placed), skipped_splits=skipped_splits,
                     text_alternatives=stand_ins, notes=list(notes), skipped=skipped)


def write_skipped(folder: Path, skipped: Sequence[Skipped]) -> None:
    """``folder/skipped.jsonl``: one JSON object a line per skipped entry (``Skipped``'s fields)."""
    (folder / SKIPPED_FILE).write_text("".join(json.dumps(asdict(s), ensure_ascii=False) + "\n" for s in skipped),
                                       encoding="utf-8")


def _none_sound(skipped: Sequence[Skipped]) -> InputError:
    """The error for a release none of whose entries could be converted: the first one's, with the count."""
    first = skipped[0]
    return InputError(f"none of the {len(skipped)} entries could be converted; the first: {first.reason}",
                      file=first.file, item=first.entry, field=first.field)


def _answered_splits(entries: Sequence[Entry], skipped: list[Skipped], release: Path,
                     skip_unsound: bool) -> tuple[set[str], dict[str, int], list[Skipped]]:
    """The splits to write, the answerless ones skipped (their entry counts), and ``skipped`` with each entry that
    has no answer in a split that has answers added (``skip_unsound``; else such an entry is an error)."""
    totals: dict[str, int] = {}
    answered: dict[str, int] = {}
    for entry in entries:
        totals[entry.split] = totals.get(entry.split, 0) + 1
        answered[entry.split] = answered.get(entry.split, 0) + (entry.answer is not None or entry.is_open)
    if not entries:
        if skipped:
            raise _none_sound(skipped)
        raise InputError("the release has no questions (after the filters given)", file=release)
    chosen = {s for s, n in answered.items() if n}
    if not chosen:
        first = entries[0]
        raise first.where.error("no split has answers: nothing can be scored", first.release_field("answer"))
    for entry in entries:
        if entry.split in chosen and entry.answer is None and not entry.is_open:
            error = entry.where.error(f"no answer, though split {entry.split!r} has answers",
                                      entry.release_field("answer"))
            if not skip_unsound:
                raise error
            skipped.append(Skipped.of(error))
    return chosen, {s: n for s, n in totals.items() if s not in chosen}, skipped


def _item_line(entry: Entry, name: str, linker: MediaLinker, seen: dict[str, Where]) -> dict:
    """The item's ``items.jsonl`` line, validated as ``spectrum.Item`` and its media found before any is placed, so
    a skipped entry leaves no file behind; a second entry with an id already written is an error."""
    where = Where(entry.where.file, entry.where.item, entry.item_id)
    if entry.item_id in seen:
        first = seen[entry.item_id]
        raise where.error(f"duplicate item id {entry.item_id!r} (first: {first.item} of {first.file})", "item_id")
    for ref in entry.media.values():
        for one in ref if isinstance(ref, list) else [ref]:
            linker.check(one, where)
    alternatives = {m: t for m, t in entry.text_alternatives.items() if t.strip()} if WRITE_TEXT_ALTERNATIVES else {}
    try:
        item = Item(item_id=entry.item_id, benchmark=name, split=entry.split, question=entry.question,
                    options=entry.options, answer=entry.answer, reference=entry.reference, rated=entry.rated, media={
                        m: [f"{i}" for i in range(len(ref))] if isinstance(ref, list) else "."
                        for m, ref in entry.media.items()},
                    category=entry.category, task=entry.task, text_alternatives=alternatives or None,
                    evidence_modality=entry.evidence_modality,
                    breakdowns={k: v for k, v in entry.breakdowns.items() if v and v.strip()} or None)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        loc[:1] = [entry.release_field(loc[0])] if loc else []
        raise where.error(pydantic_message(err), ".".join(loc) or None) from None
    media = {modality: [linker.place(r, where) for r in ref] if isinstance(ref, list) else linker.place(ref, where)
             for modality, ref in entry.media.items()}
    return item.model_copy(update={"media": media}).model_dump(mode="json", exclude_none=True)
