"""Daily-Omni (audio-visual questions on 30 s and 60 s clips) -> a ``spectrum`` benchmark of video + audio items.

The release, as its README has it placed: ``qa.json`` and the ``Videos/`` folder of ``Videos.tar`` side by side.
``qa.json`` is a list of questions: ``Question``, ``Choice`` (four texts written ``"A. ..."``), ``Answer`` (a label),
``video_id``, ``Type`` (the question type, e.g. ``AV Event Alignment``), ``video_category``, ``video_duration``
(``30s`` / ``60s``), some with ``content_parent_category``, ``content_fine_category`` or ``Explaination`` (ignored).
Each clip is a folder ``Videos/<video_id>/`` holding the picture ``<video_id>_video.mp4`` and the sound
``<video_id>_audio.wav`` (the release's own test scripts read those names), so an item's video and audio are the two
files. Item ids are ``<video_id>/<n>``, n counting the clip's questions in file order; ``category`` is ``Type``,
``task`` is ``video_category``. The release has no splits (``all``) and no text stand-ins.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Where,
    check_out,
    field_text,
    file_name,
    given_answer,
    option_texts,
    read_json,
    release_sources,
    write_release,
)

CONVERTER = "daily-omni"
QA_FILE = "qa.json"


def read_daily_omni(release: Path) -> list[Entry]:
    """One ``Entry`` per question of ``release/qa.json`` (module doc)."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder (the release's README places qa.json beside Videos/)",
                         file=release)
    data = read_json(qa)
    if not isinstance(data, list):
        raise InputError(f"expected a list of questions, got {type(data).__name__}", file=qa)
    entries, per_clip = [], {}
    for i, raw in enumerate(data):
        where = Where(qa, f"entry {i}")
        if not isinstance(raw, dict):
            raise where.error(f"expected an object, got {type(raw).__name__}")
        video_id = file_name(raw, "video_id", where)
        where = Where(qa, f"entry {i} (video {video_id})")
        question = field_text(raw, "Question", where)
        raw_options = raw.get("Choice")
        options = option_texts(raw_options, where, "Choice")
        label = given_answer(raw, "Answer", options, where, raw_options)
        n = per_clip[video_id] = per_clip.get(video_id, -1) + 1
        clip = f"Videos/{video_id}/{video_id}"
        entries.append(Entry(
            where=where, item_id=f"{video_id}/{n}", question=question, options=options, answer=label,
            media={"video": MediaRef("video_id", (f"{clip}_video.mp4",)),
                   "audio": MediaRef("video_id", (f"{clip}_audio.wav",))},
            category=field_text(raw, "Type", where, required=False),
            task=field_text(raw, "video_category", where, required=False),
            fields={"question": "Question", "options": "Choice", "answer": "Answer"}))
    return entries


def convert_daily_omni(release: str | Path, out: str | Path, *, name: str = "daily-omni",
                       media_root: str | Path | None = None, copy: bool = False,
                       overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the Daily-Omni release folder (module doc); media are read only under
    ``release`` and ``media_root`` (a folder holding ``Videos/``, if it lives elsewhere)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    return write_release(read_daily_omni(release), out, converter=CONVERTER, name=name, release=release,
                         media_root=media_root, copy=copy, overwrite=overwrite)
