"""WorldSense (real-world audio-visual questions) -> a ``spectrum`` benchmark whose items show each video with its
own soundtrack.

The release folder as the dataset ships it (``honglyhly/WorldSense``): ``worldsense_qa.json`` beside the videos,
``worldsense_videos_0.zip`` ... (each holding ``<video>.mp4`` files at its top), and the subtitles,
``worldsense_subtitles.zip``. The archives may be left packed (the members a question needs are extracted into the
benchmark folder, module ``archives``) or unpacked into ``videos/<video>.mp4`` and ``subtitles/<video>.srt``, the
folders VLMEvalKit unpacks them to (keeping each member's file name). ``worldsense_qa.json`` is an object keyed by
video: per video ``duration``, ``domain``, ``sub_category``, ``audio_class``, ``video_caption`` and the questions
``task0``, ``task1``, ... each with ``question``, ``candidates`` (three or four texts written ``"A. ..."``),
``answer`` (a label), ``task_domain`` and ``task_type``.

The audio is only inside the mp4, so the mp4 is both the item's ``video`` and its ``audio`` (its own soundtrack,
never extracted). Item ids are ``<video>/<task key>``; ``category`` is ``task_type``, ``task`` the video's
``domain``. Where ``subtitles/<video>.srt`` exists its text (``subtitles.srt_text``) is the item's text stand-in for
``audio``. The release has no splits (``all``).

The item's ``breakdowns`` are the axes WorldSense's evaluation (VLMEvalKit's ``get_dimension_rating``, which the
authors point to, and lmms-eval's) scores along: the video's ``duration`` (``<1min`` ... ``>8min``), ``domain`` and
``sub_category``, the question's ``task_domain`` and ``task_type``, and the video's audio classes. A video has
several audio classes (``["Speech", "Event"]``) and its questions count in each class's score, so each class is a
breakdown of its own, ``audio_class:<class>`` with the value ``yes``: that breakdown's one value scores exactly the
questions the release scores for the class.

A key written twice in ``worldsense_qa.json`` (a video, or a task within a video) is refused, naming the key and
both places: a JSON reader keeps only the last, which would drop the first record's questions without a word.

**Unsound entries.** A question that cannot be converted (an answer that is no label of its candidates, a bad
candidate list, a video found neither as ``videos/<video>.mp4`` nor as an archive member, a member whose data fails
its CRC-32 check, which names the archive and the member) is skipped and listed with its reason in
``skipped.jsonl`` (``common``), the other questions converted; a video whose own record cannot be read (its key no
plain file name, no questions, unreadable subtitles) is one line there, its questions skipped with it. What concerns
the file as a whole still refuses the release: no ``worldsense_qa.json``, not valid JSON, a key written twice, and a
zip archive whose central directory cannot be read (module ``archives``).
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.omni.archives import ArchiveFolder, ReleaseArchives
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Skipped,
    Where,
    check_out,
    field_text,
    given_answer,
    media_roots,
    option_texts,
    release_sources,
    sound_entries,
    write_release,
)
from omnieval.datasets.omni.subtitles import subtitle_stand_in
from omnieval.datasets.textfile import read_utf8

CONVERTER = "worldsense"
# The answer scorer reproducing the benchmark's released evaluation code (omnieval/scoring/worldsense.py), which
# benchmark.json is to record as its "scorer".
SCORER = "worldsense"
QA_FILE = "worldsense_qa.json"
_TASK_KEY = re.compile(r"^task(\d+)$")
ARCHIVES = (ArchiveFolder("videos", "worldsense_videos*.zip"), ArchiveFolder("subtitles", "worldsense_subtitles.zip"))
VIDEO_BREAKDOWNS = ("duration", "domain", "sub_category")
TASK_BREAKDOWNS = ("task_domain", "task_type")


def read_worldsense(release: Path, media_root: str | Path | None = None,
                    previous: Path | None = None) -> tuple[list[Entry], list[Skipped]]:
    """One ``Entry`` per sound question of ``release/worldsense_qa.json`` (module doc), and the entries skipped: a
    video whose record cannot be read (all its questions, one line), a question that cannot be converted;
    ``previous``: the earlier output being replaced, whose extracted members are reused (``archives``)."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder", file=release)
    data = read_qa(qa)
    if not isinstance(data, dict):
        raise InputError(f"expected an object keyed by video, got {type(data).__name__}", file=qa)
    roots = media_roots(release, media_root)
    archives = ReleaseArchives(roots, ARCHIVES, previous)
    videos = ((Where(qa, f"video {video}"), (video, record)) for video, record in data.items())
    built, skipped = sound_entries(videos, partial(_video_entries, roots=roots, archives=archives))
    entries = [entry for kept, _ in built for entry in kept]
    return entries, skipped + [one for _, lost in built for one in lost]


def _video_entries(keyed: tuple[str, object], where: Where, *, roots: list[Path],
                   archives: ReleaseArchives) -> tuple[list[Entry], list[Skipped]]:
    """The entries of one video's questions and those skipped; an error about the video itself (its key, its
    record, its subtitles) skips them all. A task key written twice refuses the release (module doc)."""
    video, record = keyed
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    repeated = _repeated(record, None)
    if repeated:
        raise InputError(f"task key {repeated[0]!r} is written twice in the video's record ({repeated[1]}): a JSON "
                         "reader keeps only the last, dropping the other's question", file=where.file,
                         item=where.item, field=repeated[0])
    if video in (".", "..") or "/" in video or "\\" in video:
        raise where.error(f"{video!r} is not a plain file name (keys name videos/<key>.mp4)", "video")
    tasks = sorted((k for k in record if _TASK_KEY.match(str(k))), key=lambda k: int(_TASK_KEY.match(k)[1]))
    if not tasks:
        raise where.error("no questions (task0, task1, ...)", "task0")
    clip = MediaRef("video", (f"videos/{video}.mp4",), archives=archives or None)
    stand_in = subtitle_stand_in(f"subtitles/{video}.srt", roots, archives, where, "subtitles")
    shared = {"clip": clip, "stand_in": stand_in, "domain": field_text(record, "domain", where, required=False),
              "breakdowns": {**{axis: field_text(record, axis, where, required=False) or ""
                                for axis in VIDEO_BREAKDOWNS}, **_audio_classes(record, where)}}
    questions = ((Where(where.file, f"{video}/{key}", f"{video}/{key}"), (key, record[key])) for key in tasks)
    return sound_entries(questions, partial(_task_entry, **shared))


def _task_entry(keyed: tuple[str, object], at: Where, *, clip: MediaRef, stand_in: str, domain: str | None,
                breakdowns: dict[str, str]) -> Entry:
    """One question's entry; ``clip``, ``stand_in``, ``domain`` and ``breakdowns`` are its video's."""
    key, task = keyed
    if not isinstance(task, dict):
        raise at.error(f"expected an object, got {type(task).__name__}", key)
    raw_options = task.get("candidates")
    options = option_texts(raw_options, at, "candidates")
    return Entry(
        where=at, item_id=at.item_id, question=field_text(task, "question", at), options=options,
        answer=given_answer(task, "answer", options, at, raw_options),
        media={"video": clip, "audio": clip}, category=field_text(task, "task_type", at, required=False),
        task=domain, text_alternatives={"audio": stand_in} if stand_in else {},
        breakdowns={**breakdowns, **{axis: field_text(task, axis, at, required=False) or ""
                                     for axis in TASK_BREAKDOWNS}},
        fields={"options": "candidates"})


class _Pairs(dict):
    """A JSON object as read, remembering each key written more than once with the positions (1, 2, ...) of its
    occurrences among the object's keys."""

    repeated: dict[str, list[int]]


def _pairs(pairs: list[tuple[str, object]]) -> _Pairs:
    obj = _Pairs(pairs)
    positions: dict[str, list[int]] = {}
    for number, (key, _) in enumerate(pairs, start=1):
        positions.setdefault(key, []).append(number)
    obj.repeated = {k: p for k, p in positions.items() if len(p) > 1}
    return obj


def read_qa(path: Path) -> dict:
    """``worldsense_qa.json``, a video key written twice refused (module doc) with the lines of both."""
    text = read_utf8(path)
    try:
        data = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", file=path) from None
    repeated = _repeated(data, text)
    if repeated:
        raise InputError(f"video key {repeated[0]!r} is written more than once ({repeated[1]}): a JSON reader keeps "
                         "only the last record, dropping the others' questions", file=path,
                         item=f"video {repeated[0]}", field="video")
    return data


def _repeated(obj: object, text: str | None) -> tuple[str, str] | None:
    """The first key ``obj`` (read by ``_pairs``) holds more than once and its places: the lines of the top-level
    object's keys in ``text`` when given, else the keys' positions in the object."""
    repeated = getattr(obj, "repeated", None)
    if not repeated:
        return None
    key, positions = next(iter(repeated.items()))
    lines = _key_lines(text).get(key, []) if text is not None else []
    if len(lines) == len(positions):
        return key, " and ".join(f"line {n}" for n in lines)
    return key, " and ".join(f"key {n} of its object" for n in positions)


def _key_lines(text: str) -> dict[str, list[int]]:
    """The line of each key of the top-level object, in order (the document is already known to be valid JSON)."""
    decoder, space = json.JSONDecoder(), re.compile(r"[ \t\n\r]*")
    lines: dict[str, list[int]] = {}
    i = space.match(text, 0).end() + 1  # past "{"
    i = space.match(text, i).end()
    while i < len(text) and text[i] == '"':
        key, i = json.decoder.scanstring(text, i + 1)
        lines.setdefault(key, []).append(text.count("\n", 0, i) + 1)
        i = space.match(text, space.match(text, i).end() + 1).end()  # past ":"
        _, i = decoder.raw_decode(text, i)
        i = space.match(text, i).end()
        if i < len(text) and text[i] == ",":
            i = space.match(text, i + 1).end()
    return lines


def _audio_classes(record: dict, where: Where) -> dict[str, str]:
    """``audio_class:<class>: yes`` per audio class of the video (module doc)."""
    classes = record.get("audio_class")
    if classes is None:
        return {}
    if isinstance(classes, str):
        classes = [classes]
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise where.error(f"expected a list of audio classes, got {classes!r}", "audio_class")
    return {f"audio_class:{c.strip()}": "yes" for c in classes if c.strip()}


def convert_worldsense(release: str | Path, out: str | Path, *, name: str = "worldsense",
                       media_root: str | Path | None = None, copy: bool = False,
                       overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the WorldSense release folder (module doc); media and subtitles are
    read only under ``release`` and ``media_root`` (a folder holding ``videos/`` and ``subtitles/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_worldsense(release, media_root, Path(out) if overwrite else None)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
