"""MMAR (reasoning questions on speech, sound, music and their mixes) -> a ``spectrum`` benchmark of audio items.

The release folder as the MMAR repository (``ddlBoJack/MMAR``) and its audio download lay it out: the questions in
``MMAR-meta.jsonl`` (one JSON object a line; since February 2026, with the reasoning rubrics) or, in the first
release, ``MMAR-meta.json`` (one list), beside ``audio/`` (the clips, ``./audio/<id>.wav``). Where both are there the
``.jsonl`` is read; ``benchmark.json`` names the file read. Fields: ``id``, ``audio_path`` (relative to the file's
folder), ``question``, ``choices`` (texts), ``answer`` (the correct choice's text), ``modality`` (the sound types
the clip holds and the answer needs: ``sound``, ``music``, ``speech``, ``mix-sound-music``, ``mix-sound-speech``,
``mix-music-speech``, ``mix-sound-music-speech``), ``category`` (the reasoning layer: Signal, Perception, Semantic,
Cultural), ``sub-category``, ``language``, ``source``, ``url``, ``timestamp``; the ``.jsonl`` adds ``thinking``,
``cue`` and ``rubric`` (ignored).

``modality`` is the item's ``category``, the release's ``category`` its ``task``. Not ``evidence_modality``: that
label names the ``spectrum`` modalities the answer's evidence lies in (``vision``, ``audio``), which the shuffles can
test against; MMAR's sound types are kinds of the one audio clip, which no condition separates, and every MMAR
answer's evidence is the audio. As ``category`` they give MMAR's own breakdown (its leaderboard's columns) for
every metric, and ``donor_within: [category]`` draws a clip's donors from clips of the same sound types.

Item ids are ``id``; the release has no splits (``all``) and no text stand-ins. As for MMAU (MMAR's
``evaluation.py`` scores as MMAU's does), the answer is always a choice's text, and blank choices (four questions
end with one) are left out and repeated ones merged (``common.text_answered``), the questions so changed named in a
note and in ``benchmark.json``. ``breakdowns`` holds ``modality``, ``category`` and ``sub-category`` under those
names: the three tables ``evaluation.py`` prints.

**Unsound entries.** The first release's ``MMAR-meta.json`` (the one the Hugging Face copy ships) has five
questions whose ``answer`` is none of their choices (entry 43's is ``"American\nColombian"``, both choices joined;
others are a shortened choice); the current ``.jsonl`` corrects them. Each such entry, like any entry that cannot
be converted (a missing clip), is skipped and listed with its reason in ``skipped.jsonl`` (``common``), the others
converted.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.core.schema import InputError
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
    read_jsonl,
    release_sources,
    sound_entries,
    text_answered,
    write_release,
)

CONVERTER = "mmar"
SCORER = "mmar"
"""The benchmark's released answer-scoring rule (``omnieval.scoring.mmar``), recorded in ``benchmark.json``."""
QUESTION_FILES = ("MMAR-meta.jsonl", "MMAR-meta.json")
"""The question file of the current release, then that of the first; the first found is read."""
BREAKDOWNS = ("modality", "category", "sub-category")
"""The fields MMAR's ``evaluation.py`` reports accuracy by, kept as the item's ``breakdowns`` under these names."""


def read_mmar(release: Path) -> tuple[Path, list[Entry], list[str], list[Skipped]]:
    """The question file read, one ``Entry`` per sound question (module doc), the ids whose choices were changed, and
    the entries skipped (``common.sound_entries``)."""
    path = next((release / name for name in QUESTION_FILES if (release / name).is_file()), None)
    if path is None:
        raise InputError(f"neither {' nor '.join(QUESTION_FILES)} in the release folder", file=release)
    if path.suffix == ".jsonl":
        records = [(Where(path, f"line {n}"), record) for n, record in read_jsonl(path)]
    else:
        data = read_json(path)
        if not isinstance(data, list):
            raise InputError(f"expected a list of questions, got {type(data).__name__}", file=path)
        records = [(Where(path, f"entry {i}"), record) for i, record in enumerate(data)]
    built, skipped = sound_entries(records, _entry)
    return path, [entry for entry, _ in built], [entry.item_id for entry, changed in built if changed], skipped


def _entry(record, where: Where) -> tuple[Entry, bool]:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    item_id = field_text(record, "id", where)
    where = where.named("id", item_id)
    options, answer, changed = text_answered(record, "choices", "answer", where)
    return Entry(
        where=where, item_id=item_id, question=field_text(record, "question", where), options=options,
        answer=answer,
        media={"audio": MediaRef("audio_path", (field_text(record, "audio_path", where),))},
        category=field_text(record, "modality", where, required=False),
        task=field_text(record, "category", where, required=False),
        breakdowns={name: text for name in BREAKDOWNS if (text := field_text(record, name, where, required=False))},
        fields={"options": "choices", "media": "audio_path"}), changed


def convert_mmar(release: str | Path, out: str | Path, *, name: str = "mmar", media_root: str | Path | None = None,
                 copy: bool = False, overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the MMAR release folder (module doc); clips are read only under
    ``release`` and ``media_root`` (a folder holding ``audio/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    path, entries, changed, skipped = read_mmar(release)
    meta: dict = {"question_file": path.name}
    notes = [changed_options_note(changed)] if changed else []
    if changed:
        meta["changed_options"] = changed
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, meta=meta, notes=notes, skipped=skipped,
                         skip_unsound=True, scorer=SCORER)
