"""MMAU (questions on speech, sound and music clips) -> a ``spectrum`` benchmark of audio items, pinned to one version
of the release.

The release folder as the MMAU repository (``Sakshi113/MMAU``) and its audio archives lay it out:
``mmau-test-mini.json`` beside ``test-mini-audios/`` (the ``test-mini-audios.tar.gz`` archive unpacked) and
``mmau-test.json`` beside ``test-audios/``. Each file is a list of questions: ``id``, ``audio_id`` (the clip,
``./test-mini-audios/<id>.wav``, relative to the file's folder), ``question``, ``choices`` (texts), ``answer`` (the
correct choice's text), ``dataset``, ``task`` (``sound``, ``music`` or ``speech``), ``split``, ``category``,
``sub-category`` and ``difficulty``. ``mmau-test.json`` withholds its answers (empty texts): that split is skipped with
a note.

**Versions.** The release names no version in its files: ``MMAU-v05.15.25`` (the README: about a quarter of the
questions and answers revised, about 5% of the audio refined) replaced both files in place, under the same names. So
each file is known by its content: ``REVISIONS`` holds the git blob id of every revision of the two files in the
repository's history, with its date and version (``original``: October 2024 to March 2025; ``v05.15.25``: from 15 May
2025, its later corrections included). A known revision gives the version, which ``--version``, if given, must
match; a file that is none of them (edited, or newer than this table) needs ``--version``. ``benchmark.json`` records
the version, how it was established, and each file's blob id and revision date. The audio is not checked: its
archives carry no version either.

Items: ids are ``id`` (the clip's file name where the first revision has none); ``category`` is ``task`` (the sound
type, as MMAU's leaderboard columns), ``task`` is ``sub-category`` (the skill); the split is the file's
(``test-mini``, ``test``). The answer is always a choice's text, even one letter long (``"D"``, a musical note, is
the choice that reads D). Choices that repeat a text (27 questions of the current test-mini) are merged and blank
ones left out (``common.text_answered``: MMAU scores an answer by its words, so the copies are one answer), the
questions so changed named in a note and in ``benchmark.json`` (``changed_options``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

from omnieval.core.schema import InputError
from omnieval.datasets.omni import MMAU_VERSIONS as VERSIONS
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Where,
    changed_options_note,
    check_out,
    field_text,
    read_json,
    release_sources,
    text_answered,
    write_release,
)

CONVERTER = "mmau"
FILES = {"mmau-test-mini.json": "test-mini", "mmau-test.json": "test"}
"""The question files the release ships, each with its split."""
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


def git_blob_id(path: Path) -> str:
    """The id git gives the file's content (SHA-1 of ``blob <size>\\0`` and the bytes): the same for a raw download
    and a checkout of that revision."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def release_version(files: list[Path], version: str | None) -> dict:
    """The version the question files are (module doc), as ``benchmark.json`` records it; an error where it cannot
    be told, where the files are of two versions, or where ``version`` contradicts them."""
    if version is not None and version not in VERSIONS:
        raise InputError(f"unknown MMAU version {version!r}; known: {', '.join(VERSIONS)}", field="--version")
    found: dict[str, dict] = {}
    for path in files:
        blob = git_blob_id(path)
        known = REVISIONS.get(blob)
        if known is not None and known[0] != path.name:
            known = None  # the content of the other file under this name: not the release's layout
        found[path.name] = {"git_blob": blob, **({"revision": known[1], "version": known[2]} if known else {})}
    versions = {info["version"] for info in found.values() if "version" in info}
    if len(versions) > 1:
        detail = ", ".join(f"{n} is {i['version']} ({i['revision']})" for n, i in found.items() if "version" in i)
        raise InputError(f"the question files are of two MMAU versions ({detail}); give one release folder",
                         file=files[0].parent)
    if versions and version is not None and version not in versions:
        name, info = next((n, i) for n, i in found.items() if "version" in i)
        raise InputError(f"{name} is the {info['version']} revision of {info['revision']}, not {version}: give "
                         f"--version {info['version']} or the {version} files", file=files[0].parent / name,
                         field="--version")
    unknown = [n for n, i in found.items() if "version" not in i]
    if not versions and version is None:
        raise InputError(f"cannot tell which MMAU version {unknown[0]} is: its content (git blob "
                         f"{found[unknown[0]]['git_blob'][:12]}) is none of the {len(REVISIONS)} known revisions; "
                         f"give --version ({' or '.join(VERSIONS)})", file=files[0].parent / unknown[0],
                         field="--version")
    chosen = version or next(iter(versions))
    how = "given (--version); no file is a known revision" if not versions else \
        "known from the files' content" + (" and --version" if version else "")
    if unknown and versions:
        how += f"; {', '.join(unknown)} is no known revision"
    return {"version": chosen, "version_from": how, "question_files": found}


def read_mmau(release: Path) -> tuple[list[Entry], list[str]]:
    """One ``Entry`` per question of the release's files (module doc), and the ids whose choices were changed."""
    entries, changed = [], []
    for file_name, split in FILES.items():
        path = release / file_name
        if not path.is_file():
            continue
        data = read_json(path)
        if not isinstance(data, list):
            raise InputError(f"expected a list of questions, got {type(data).__name__}", file=path)
        for i, record in enumerate(data):
            entry, was_changed = _entry(record, Where(path, f"entry {i}"), split)
            entries.append(entry)
            if was_changed:
                changed.append(entry.item_id)
    return entries, changed


def _entry(record, where: Where, split: str) -> tuple[Entry, bool]:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    audio = field_text(record, "audio_id", where)
    item_id = field_text(record, "id", where, required=False) or PurePosixPath(audio).stem
    where = Where(where.file, f"{where.item} (id {item_id})")
    options, answer, changed = text_answered(record, "choices", "answer", where)
    return Entry(
        where=where, item_id=item_id, question=field_text(record, "question", where), options=options,
        answer=answer, media={"audio": MediaRef("audio_id", (audio,))}, split=split,
        category=field_text(record, "task", where, required=False),
        task=field_text(record, "sub-category", where, required=False),
        fields={"options": "choices", "media": "audio_id"}), changed


def convert_mmau(release: str | Path, out: str | Path, *, name: str = "mmau", version: str | None = None,
                 media_root: str | Path | None = None, copy: bool = False, overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the MMAU release folder (module doc), recording the version read;
    clips are read only under ``release`` and ``media_root`` (a folder holding ``test-mini-audios/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    files = [release / f for f in FILES if (release / f).is_file()]
    if not files:
        hint = " (data/*.parquet is a Hugging Face copy with the audio embedded; give the repository's files)" \
            if (release / "data").is_dir() else ""
        raise InputError(f"neither {' nor '.join(FILES)} in the release folder{hint}", file=release)
    meta = release_version(files, version)
    entries, changed = read_mmau(release)
    notes = [f"MMAU {meta['version']} ({meta['version_from']})"]
    if changed:
        notes.append(changed_options_note(changed))
        meta["changed_options"] = changed
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, meta=meta, notes=notes)
