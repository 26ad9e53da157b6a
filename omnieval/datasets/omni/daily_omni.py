"""Daily-Omni (audio-visual questions on 30 s and 60 s clips) -> a ``spectrum`` benchmark of video + audio items.

The release, as its README has it placed: ``qa.json`` and the ``Videos/`` folder of ``Videos.tar`` side by side.
``qa.json`` is a list of questions: ``Question``, ``Choice`` (four texts written ``"A. ..."``), ``Answer`` (a label),
``video_id``, ``Type`` (the question type, e.g. ``AV Event Alignment``), ``video_category``, ``video_duration``
(``30s`` / ``60s``), some with ``content_parent_category``, ``content_fine_category`` or ``Explaination`` (ignored).
Each clip is a folder ``Videos/<video_id>/`` holding the picture ``<video_id>_video.mp4`` and the sound
``<video_id>_audio.wav`` (the release's own test scripts read those names), so an item's video and audio are the two
files. Item ids are ``<video_id>/<n>``, n counting the clip's questions in file order; ``category`` is ``Type``,
``task`` is ``video_category``; ``breakdowns`` holds ``Type``, ``video_category`` and ``video_duration``, the three
tables the release's test scripts print. The release has no splits (``all``) and no text stand-ins. A question that
cannot be converted (an answer past its choices, a missing clip) is skipped and listed in ``skipped.jsonl``
(``common``), the others converted; the n of an id counts it all the same, so no id depends on what was skipped.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Skipped,
    Where,
    check_out,
    field_text,
    file_name,
    given_answer,
    option_texts,
    read_json,
    release_sources,
    sound_entries,
    write_release,
)

CONVERTER = "daily-omni"
# The answer scorer reproducing the benchmark's released evaluation code (omnieval/scoring/daily_omni.py), which
# benchmark.json is to record as its "scorer".
SCORER = "daily-omni"
QA_FILE = "qa.json"
BREAKDOWNS = ("Type", "video_category", "video_duration")
"""The fields the release's test scripts report accuracy by, kept as the item's ``breakdowns`` under these names."""


def read_daily_omni(release: Path) -> tuple[list[Entry], list[Skipped]]:
    """One ``Entry`` per sound question of ``release/qa.json`` (module doc), and the questions skipped."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder (the release's README places qa.json beside Videos/)",
                         file=release)
    data = read_json(qa)
    if not isinstance(data, list):
        raise InputError(f"expected a list of questions, got {type(data).__name__}", file=qa)
    per_clip: dict[str, int] = {}
    return sound_entries(((Where(qa, f"entry {i}"), raw) for i, raw in enumerate(data)),
                         partial(_entry, per_clip=per_clip))


def _entry(raw, where: Where, *, per_clip: dict[str, int]) -> Entry:
    """The question's entry; ``per_clip`` counts the clip's questions in file order, a skipped one included, so an
    id never depends on which questions were skipped."""
    if not isinstance(raw, dict):
        raise where.error(f"expected an object, got {type(raw).__name__}")
    video_id = file_name(raw, "video_id", where)
    n = per_clip[video_id] = per_clip.get(video_id, -1) + 1
    where = Where(where.file, f"{where.item} (video {video_id})", f"{video_id}/{n}")
    question = field_text(raw, "Question", where)
    raw_options = raw.get("Choice")
    options = option_texts(raw_options, where, "Choice")
    label = given_answer(raw, "Answer", options, where, raw_options)
    clip = f"Videos/{video_id}/{video_id}"
    return Entry(
        where=where, item_id=f"{video_id}/{n}", question=question, options=options, answer=label,
        media={"video": MediaRef("video_id", (f"{clip}_video.mp4",)),
               "audio": MediaRef("video_id", (f"{clip}_audio.wav",))},
        category=field_text(raw, "Type", where, required=False),
        task=field_text(raw, "video_category", where, required=False),
        breakdowns={name: text for name in BREAKDOWNS if (text := field_text(raw, name, where, required=False))},
        fields={"question": "Question", "options": "Choice", "answer": "Answer"})


def convert_daily_omni(release: str | Path, out: str | Path, *, name: str = "daily-omni",
                       media_root: str | Path | None = None, copy: bool = False,
                       overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the Daily-Omni release folder (module doc); media are read only under
    ``release`` and ``media_root`` (a folder holding ``Videos/``, if it lives elsewhere)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_daily_omni(release)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
