"""MMAU (questions on speech, sound and music clips) -> a ``spectrum`` benchmark of audio items, with the release
version it is recorded.

Either layout of the release, given as its folder:

* **GitHub** (``Sakshi113/MMAU``, with its audio archives unpacked): ``mmau-test-mini.json`` beside
  ``test-mini-audios/`` and ``mmau-test.json`` beside ``test-audios/``. Each file is a list of questions: ``id``,
  ``audio_id`` (the clip, ``./test-mini-audios/<id>.wav``, relative to the file's folder), ``question``, ``choices``
  (texts), ``answer`` (the correct choice's text), ``dataset``, ``task`` (``sound``, ``music`` or ``speech``),
  ``split``, ``category``, ``sub-category`` and ``difficulty``;
* **lmms-eval's copy** (the Hub dataset its ``mmau`` tasks read, ``lmms-lab-audio/mmau``):
  ``data/test_mini-*.parquet`` (and ``data/test-*.parquet``) with the same columns, ``choices`` written as JSON text
  (lmms-eval's task decodes it with ``json.loads``) and the clip embedded in the ``audio`` cell (``{bytes, path}``,
  written to ``media/embedded/``).

``mmau-test.json`` (``test``) withholds its answers (empty texts): that split is skipped with a note.

**Versions.** The release names no version in its files: ``MMAU-v05.15.25`` (the README: about a quarter of the
questions and answers revised, about 5% of the audio refined) replaced both files in place, under the same names.
So the version is told by content: the (id, answer) pairs of the answered questions are looked up among those only
one version's test-mini has (``mmau_versions``: digests, not the data). A file with such pairs of one version only
(a re-indented or re-ordered file, lmms-eval's copy, a subset of the questions) is that version; one with none of
either (edited, or revised later) or some of both needs ``--version``, and the error says which it was.
``mmau-test.json``, whose answers are withheld, is known only by its exact bytes: ``REVISIONS`` holds the git blob
id of every revision of the two files, with its date and version. Files of two versions are refused, and
``--version``, if given, must agree with them. ``benchmark.json`` records the version, how it was told
(``version_from``) and, per question file, how many of its answers are each version's alone, and its blob id and
revision date where it has them. The audio is not checked: its archives carry no version either.

Items: ids are ``id`` (the clip's file name where the first revision has none); ``category`` is ``task`` (the sound
type, as MMAU's leaderboard columns), ``task`` is ``sub-category`` (the skill); ``breakdowns`` holds ``task``,
``difficulty`` and ``sub-category``, the tables MMAU's ``evaluation.py`` prints. The split is the file's
(``test-mini``, ``test``; lmms-eval's ``test_mini`` is ``test-mini``). The answer is always a choice's text, even one
letter long (``"D"``, a musical note, is the choice that reads D). Choices that repeat a text (27 questions of the
current test-mini) are merged and blank ones left out (``common.text_answered``: MMAU scores an answer by its words,
so the copies are one answer), the questions so changed named in a note and in ``benchmark.json``
(``changed_options``). An entry that cannot be converted (an answer that is none of its choices, a missing clip) is
skipped and listed in ``skipped.jsonl`` (``common``), the others converted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_sources import parquet_rows
from omnieval.datasets.omni import MMAU_VERSIONS as VERSIONS
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Skipped,
    Where,
    changed_options_note,
    check_out,
    field_text,
    read_json,
    release_sources,
    sound_entries,
    text_answered,
    write_release,
)
from omnieval.datasets.omni.mmau_versions import ORIGINAL_ONLY, V05_15_25_ONLY, answer_digest

CONVERTER = "mmau"
SCORER = "mmau"
"""The benchmark's released answer-scoring rule (``omnieval.scoring.mmau``), recorded in ``benchmark.json``."""
FILES = {"mmau-test-mini.json": "test-mini", "mmau-test.json": "test"}
"""The question files the release ships, each with its split."""
PARQUET_FOLDER = "data"
"""Where lmms-eval's copy keeps its shards."""
BREAKDOWNS = ("task", "difficulty", "sub-category")
"""The fields MMAU's ``evaluation.py`` reports accuracy by, kept as the item's ``breakdowns`` under these names."""
ONLY_IN = {"original": ORIGINAL_ONLY, "v05.15.25": V05_15_25_ONLY}
"""Per version, the digests of the (id, answer) pairs only its test-mini has (``mmau_versions``)."""
REVISIONS: dict[str, tuple[str, str, str]] = {
    # git blob id: (file, date of the commit that wrote it, version)
    "e04117e7277d1a41e682a61931addcb7ffc8249b": ("mmau-test-mini.json", "2024-10-23", "original"),
    "8e4ac07f9717e57c9680b80a32db192b0d894d7d": ("mmau-test-mini.json", "2024-10-25", "original"),
    "c904027d9417be3e363a3db14f58cb8082c82af0": ("mmau-test-mini.json", "2024-10-29", "original"),
    "b256e635c28919eced627959e966bdfe2d715d9d": ("mmau-test-mini.json", "2024-12-09", "original"),
    "cf25650c6fda3eef0e1737baad68dd0417fe708e": ("mmau-test-mini.json", "2025-01-28", "original"),
    "537d6a3d06e8857b04cdb207b64a1f31f96b0594": ("mmau-test-mini.json", "2025-03-25", "original"),
    "fb3a6899b37e265163bf7b72e6b05e97a4e74f95": ("mmau-test-mini.json", "2025-05-15", "v05.15.25"),
    "73fde7d0ce47468842cf64a7f25b34c32572924b": ("mmau-test-mini.json", "2025-05-16", "v05.15.25"),
    "db2ffaee56d4d2182b094ffec10846a3329de341": ("mmau-test-mini.json", "2025-05-16", "v05.15.25"),
    "2dac394ab12fed4220228ec949f4c590d4e813d7": ("mmau-test-mini.json", "2025-05-18", "v05.15.25"),
    "e9a1605143109af04cff27acd699685278a45b26": ("mmau-test-mini.json", "2025-05-19", "v05.15.25"),
    "18b0117457304219f1a69ef066963e06cea7d852": ("mmau-test-mini.json", "2025-05-22", "v05.15.25"),
    "360fcb64b812e31d4ec09a8333ef56abc86ad143": ("mmau-test-mini.json", "2025-05-24", "v05.15.25"),
    "ac782499e43501984d44dfd414b0a1e54b1c3bdd": ("mmau-test-mini.json", "2025-05-30", "v05.15.25"),
    "11edfb2dca81ab7d096abe8091f27a8600494c46": ("mmau-test-mini.json", "2025-06-23", "v05.15.25"),
    "045ee9d8146369f1a240caf521e4b4d5f34619d8": ("mmau-test-mini.json", "2025-06-23", "v05.15.25"),
    "a2f7539b406a7a466d554e15a22342dbfe53c461": ("mmau-test-mini.json", "2025-08-09", "v05.15.25"),
    "70e3d3be30771f8ce54611ec54755d99af4d0039": ("mmau-test.json", "2024-10-24", "original"),
    "47b7de0e466c8718aa0f7436663a315046ed5dbe": ("mmau-test.json", "2024-10-25", "original"),
    "2265402679badf3988efc05c2131d2e499e76d9c": ("mmau-test.json", "2024-10-25", "original"),
    "13f3982f92d29f8e07d7a1df6a4d296fa3632dd3": ("mmau-test.json", "2024-10-29", "original"),
    "5a28c68baca0d3f54f6b75d4e78f33a8bfbc5a70": ("mmau-test.json", "2024-12-09", "original"),
    "347746bd388c06ccfcce666f5fc7042c79d58827": ("mmau-test.json", "2024-12-09", "original"),
    "52452f1ece9e3e48d5d613a5f020eb4962c2331e": ("mmau-test.json", "2025-01-28", "original"),
    "e77e28385c8b2469183f007a0953b9e7aca33ce2": ("mmau-test.json", "2025-05-15", "v05.15.25"),
    "ecad88087cc30dabd193c26ac0cbdaddbf8df405": ("mmau-test.json", "2025-05-16", "v05.15.25"),
    "a3c9801696423afca95654370489c8b41263c779": ("mmau-test.json", "2025-05-18", "v05.15.25"),
    "302e2c1dc7fc0bccd0fa5205d034ca8903567eea": ("mmau-test.json", "2025-05-19", "v05.15.25"),
    "f0a58996fd47285a60426bfcf2bac6ec0bf4b61d": ("mmau-test.json", "2025-05-19", "v05.15.25"),
    "3dd11a427ba88e5b9b7430650c909c6b17ed896f": ("mmau-test.json", "2025-05-22", "v05.15.25"),
    "344d99bb206f8be8e69b4507988556fb52b36b02": ("mmau-test.json", "2025-05-24", "v05.15.25"),
}
"""Every revision of the question files in the repository's history (``git log`` of each file): the version follows
the date, ``v05.15.25`` from the commit of 15 May 2025 that the README's announcement names."""


@dataclass
class QuestionFile:
    """One question file read: its entries, the entries skipped, the (id, answer) pairs of its answered questions
    (for the version), the ids whose choices were changed, and its git blob id (the GitHub layout's files)."""

    path: Path
    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    blob: str | None = None


def git_blob_id(path: Path) -> str:
    """The id git gives the file's content (SHA-1 of ``blob <size>\\0`` and the bytes): the same for a raw download
    and a checkout of that revision."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def file_evidence(qfile: QuestionFile) -> tuple[dict, set[str], str]:
    """What one file says of its version: its ``benchmark.json`` record, the versions its answers and its bytes name
    (none; one; two where they disagree), and why it names none (for the error)."""
    counts = {v: sum(answer_digest(*pair) in digests for pair in qfile.pairs) for v, digests in ONLY_IN.items()}
    hits = {v for v, n in counts.items() if n}
    named = set(hits) if len(hits) == 1 else set()
    info: dict = {"answered": len(qfile.pairs), "answers_only_in": counts} if qfile.pairs else {}
    if len(hits) > 1:
        why = "its answers are a mix: " + " and ".join(f"{n} are {v}'s alone" for v, n in counts.items())
    elif qfile.pairs:
        why = f"none of its {len(qfile.pairs)} (id, answer) pairs is one that only one version has"
    else:
        why = "it has no answers and its bytes are no known revision"
    if qfile.blob is not None:
        info["git_blob"] = qfile.blob
        known = REVISIONS.get(qfile.blob)
        if known is not None and known[0] == qfile.path.name:  # else another file's content under this name
            info["revision"] = known[1]
            named.add(known[2])
    if len(named) == 1:
        info["version"] = next(iter(named))
    return info, named, why


def release_version(files: list[QuestionFile], version: str | None, release: Path) -> dict:
    """The version the question files are (module doc), as ``benchmark.json`` records it; an error where it cannot
    be told, where the files are of two versions, or where ``version`` contradicts them."""
    if version is not None and version not in VERSIONS:
        raise InputError(f"unknown MMAU version {version!r}; known: {', '.join(VERSIONS)}", field="--version")
    found, named, why = {}, {}, {}
    paths = {qfile.path.name: qfile.path for qfile in files}
    for qfile in files:
        found[qfile.path.name], named[qfile.path.name], why[qfile.path.name] = file_evidence(qfile)
    versions = set().union(*named.values())
    telling = [n for n, v in named.items() if v]
    silent = [n for n, v in named.items() if not v]
    if len(versions) > 1:
        detail = ", ".join(f"{n} is {' and '.join(sorted(named[n]))}" for n in telling)
        raise InputError(f"the question files are of two MMAU versions ({detail}); give one release folder",
                         file=release)
    if versions and version is not None and version not in versions:
        name = telling[0]
        raise InputError(f"{name} is {found[name]['version']} by its {_how(found[name])}, not {version}: give "
                         f"--version {found[name]['version']} or the {version} files", file=paths[name],
                         field="--version")
    if not versions and version is None:
        name = silent[0]
        raise InputError(f"cannot tell which MMAU version {name} is: {why[name]}; give --version "
                         f"({' or '.join(VERSIONS)})", file=paths[name], field="--version")
    if versions:
        how = "; ".join(f"{n} by its {_how(found[n])}" for n in telling) + (", as --version says" if version else "")
    else:
        how = "given (--version)"
    how += "".join(f"; {n} tells nothing: {why[n]}" for n in silent)
    return {"version": version or next(iter(versions)), "version_from": how, "question_files": found}


def _how(info: dict) -> str:
    """How a file's version was told: by its answers, its bytes, or both."""
    parts = []
    counts = info.get("answers_only_in", {})
    if counts.get(info["version"]):
        parts.append(f"content ({counts[info['version']]} of its {info['answered']} answers are "
                     f"{info['version']}'s alone)")
    if "revision" in info:
        parts.append(f"bytes (the revision of {info['revision']})")
    return " and ".join(parts)


def read_mmau(release: Path) -> list[QuestionFile]:
    """Each question file of the release, either layout (module doc), read."""
    files = [release / name for name in FILES if (release / name).is_file()]
    if files:
        return [_read_json_file(path, FILES[path.name]) for path in files]
    folder = release / PARQUET_FOLDER
    shards = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if shards:
        return [_read_shard(path) for path in shards]
    raise InputError(f"neither {' nor '.join(FILES)} (the GitHub release) nor {PARQUET_FOLDER}/*.parquet "
                     "(lmms-eval's copy) in the release folder", file=release)


def _read_json_file(path: Path, split: str) -> QuestionFile:
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"expected a list of questions, got {type(data).__name__}", file=path)
    records = ((Where(path, f"entry {i}"), record) for i, record in enumerate(data))
    return _built(QuestionFile(path, blob=git_blob_id(path)), records, split, embedded=False)


def _read_shard(path: Path) -> QuestionFile:
    """One shard of lmms-eval's copy; its split is the shard's name's (``test_mini`` read as ``test-mini``)."""
    rows = list(parquet_rows(path, None))
    split = (rows[0].split if rows and rows[0].split else "test_mini").replace("_", "-")
    records = ((Where(row.file, f"row {row.number}"), row.record) for row in rows)
    return _built(QuestionFile(path), records, split, embedded=True)


def _built(qfile: QuestionFile, records: Iterable, split: str, *, embedded: bool) -> QuestionFile:
    built, qfile.skipped = sound_entries(records, lambda record, where: _entry(record, where, split, embedded))
    for entry, pair, changed in built:
        qfile.entries.append(entry)
        qfile.pairs += [pair] if pair is not None else []
        qfile.changed += [entry.item_id] if changed else []
    return qfile


def _entry(record, where: Where, split: str, embedded: bool) -> tuple[Entry, tuple[str, str] | None, bool]:
    """The entry, its (id, answer) pair where it has an answer (for the version), and whether its choices were
    changed."""
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    audio = field_text(record, "audio_id", where, required=not embedded)
    item_id = field_text(record, "id", where, required=audio is None) or PurePosixPath(audio).stem
    where = where.named("id", item_id)
    if embedded:
        record = {**record, "choices": _json_choices(record.get("choices"), where)}
    options, answer, changed = text_answered(record, "choices", "answer", where)
    entry = Entry(
        where=where, item_id=item_id, question=field_text(record, "question", where), options=options,
        answer=answer, media={"audio": _audio(record, audio, where, embedded)}, split=split,
        category=field_text(record, "task", where, required=False),
        task=field_text(record, "sub-category", where, required=False),
        breakdowns={name: text for name in BREAKDOWNS if (text := field_text(record, name, where, required=False))},
        fields={"options": "choices", "media": "audio" if embedded else "audio_id"})
    return entry, ((item_id, record["answer"]) if answer is not None else None), changed


def _json_choices(value, where: Where):
    """lmms-eval's ``choices`` cell: the list written as JSON text (a list cell is taken as it is)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise where.error(f"not a JSON list of choices: {exc.msg}", "choices") from None


def _audio(record: dict, audio: str | None, where: Where, embedded: bool) -> MediaRef:
    """The clip: embedded in lmms-eval's ``audio`` cell, else the file ``audio_id`` names."""
    if not embedded:
        return MediaRef("audio_id", (audio,))
    cell = record.get("audio")
    if not isinstance(cell, dict) or not cell.get("bytes"):
        raise where.error("no embedded clip (expected a cell {bytes, path})", "audio")
    return MediaRef("audio", data=bytes(cell["bytes"]), name=str(cell.get("path") or audio or ""))


def convert_mmau(release: str | Path, out: str | Path, *, name: str = "mmau", version: str | None = None,
                 media_root: str | Path | None = None, copy: bool = False, overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the MMAU release folder (module doc), recording the version read;
    clips are read only under ``release`` and ``media_root`` (a folder holding ``test-mini-audios/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    files = read_mmau(release)
    meta = release_version(files, version, release)
    changed = [item_id for qfile in files for item_id in qfile.changed]
    notes = [f"MMAU {meta['version']} ({meta['version_from']})"]
    if changed:
        notes.append(changed_options_note(changed))
        meta["changed_options"] = changed
    return write_release([e for qfile in files for e in qfile.entries], out, converter=CONVERTER, name=name,
                         release=release, media_root=media_root, copy=copy, overwrite=overwrite, meta=meta,
                         notes=notes, skipped=[s for qfile in files for s in qfile.skipped], skip_unsound=True,
                         scorer=SCORER)
