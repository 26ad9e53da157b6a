"""WorldSense (real-world audio-visual questions) -> a ``spectrum`` benchmark whose items show each video with its
own soundtrack.

The release folder as the dataset ships it, its archives unpacked: ``worldsense_qa.json``, the videos
(``worldsense_videos*.zip``) in ``videos/<video>.mp4`` and the subtitles (``worldsense_subtitles.zip``) in
``subtitles/<video>.srt``, the folders VLMEvalKit and lmms-eval read. ``worldsense_qa.json`` is an object keyed by
video: per video ``duration``, ``domain``, ``sub_category``, ``audio_class``, ``video_caption`` and the questions
``task0``, ``task1``, ... each with ``question``, ``candidates`` (three or four texts written ``"A. ..."``),
``answer`` (a label), ``task_domain`` and ``task_type``.

The audio is only inside the mp4, so the mp4 is both the item's ``video`` and its ``audio`` (its own soundtrack,
never extracted). Item ids are ``<video>/<task key>``; ``category`` is ``task_type``, ``task`` the video's
``domain``. Where ``subtitles/<video>.srt`` exists its text (``subtitles.srt_text``) is the item's text stand-in for
``audio``. The release has no splits (``all``).
"""

from __future__ import annotations

import re
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Where,
    check_out,
    field_text,
    find_file,
    given_answer,
    media_roots,
    option_texts,
    read_json,
    release_sources,
    write_release,
)
from omnieval.datasets.omni.subtitles import srt_text

CONVERTER = "worldsense"
QA_FILE = "worldsense_qa.json"
_TASK_KEY = re.compile(r"^task(\d+)$")


def read_worldsense(release: Path, media_root: str | Path | None = None) -> list[Entry]:
    """One ``Entry`` per question of ``release/worldsense_qa.json`` (module doc)."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder", file=release)
    data = read_json(qa)
    if not isinstance(data, dict):
        raise InputError(f"expected an object keyed by video, got {type(data).__name__}", file=qa)
    roots = media_roots(release, media_root)
    entries = []
    for video, record in data.items():
        where = Where(qa, f"video {video}")
        if not isinstance(record, dict):
            raise where.error(f"expected an object, got {type(record).__name__}")
        if video in (".", "..") or "/" in video or "\\" in video:
            raise where.error(f"{video!r} is not a plain file name (keys name videos/<key>.mp4)", "video")
        tasks = sorted((k for k in record if _TASK_KEY.match(str(k))), key=lambda k: int(_TASK_KEY.match(k)[1]))
        if not tasks:
            raise where.error("no questions (task0, task1, ...)", "task0")
        clip = MediaRef("video", (f"videos/{video}.mp4",))
        subtitle = find_file((f"subtitles/{video}.srt",), roots, where, "video", required=False)
        try:
            stand_in = srt_text(subtitle) if subtitle is not None else ""
        except InputError as exc:
            raise where.error(str(exc), "subtitles") from None
        domain = field_text(record, "domain", where, required=False)
        for key in tasks:
            task = record[key]
            at = Where(qa, f"{video}/{key}")
            if not isinstance(task, dict):
                raise at.error(f"expected an object, got {type(task).__name__}", key)
            raw_options = task.get("candidates")
            options = option_texts(raw_options, at, "candidates")
            entries.append(Entry(
                where=at, item_id=f"{video}/{key}", question=field_text(task, "question", at), options=options,
                answer=given_answer(task, "answer", options, at, raw_options),
                media={"video": clip, "audio": clip}, category=field_text(task, "task_type", at, required=False),
                task=domain, text_alternatives={"audio": stand_in} if stand_in else {},
                fields={"options": "candidates"}))
    return entries


def convert_worldsense(release: str | Path, out: str | Path, *, name: str = "worldsense",
                       media_root: str | Path | None = None, copy: bool = False,
                       overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the WorldSense release folder (module doc); media and subtitles are
    read only under ``release`` and ``media_root`` (a folder holding ``videos/`` and ``subtitles/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    return write_release(read_worldsense(release, media_root), out, converter=CONVERTER, name=name, release=release,
                         media_root=media_root, copy=copy, overwrite=overwrite)
