"""Video-MME with audio -> a ``spectrum`` benchmark whose items show each video with its own soundtrack, the
subtitles kept as the text stand-in for the audio.

The release folder as the dataset ships it (``lmms-lab/Video-MME``): the questions in
``videomme/test-00000-of-00001.parquet`` beside the videos, ``videos_chunked_01.zip`` ... (members
``data/<videoID>.mp4``), and the subtitles, ``subtitle.zip`` (members ``subtitle/<videoID>.srt``; not every video
has one). The archives may be left packed (the members a question needs are extracted into the benchmark folder,
module ``archives``) or unpacked where they lie, as lmms-eval does (``data/<videoID>.mp4``, lmms-eval also trying
``.MP4`` and ``.mkv``; ``subtitle/<videoID>.srt``), or into VLMEvalKit's folders (``video/<videoID>.mp4`` and the
same two other suffixes, since it keeps each member's file name; ``subtitle/``). Columns: ``question_id`` (``001-1``),
``video_id`` (``001``), ``videoID`` (the YouTube id naming the files), ``duration`` (``short`` / ``medium`` /
``long``), ``domain``, ``sub_category``, ``task_type``, ``question``, ``options`` (four texts written ``"A. ..."``),
``answer`` (a label).

The mp4 is both the item's ``video`` and its ``audio`` (its own soundtrack, never extracted). Item ids are the
``question_id``; ``category`` is ``task_type``, ``task`` is ``domain``; the split is the shard's (``test``). Where
the subtitle file exists its text (``subtitles.srt_text``) is the item's text stand-in for ``audio``. The item's
``breakdowns`` are the axes Video-MME's own evaluation scores along (its ``eval_your_results.py``, and VLMEvalKit's
and lmms-eval's ratings): ``duration`` (its headline: short, medium, long), ``domain``, ``sub_category`` and
``task_type``.
``durations`` keeps only the questions of those durations (Video-MME reports short, medium and long apart).

**Unsound rows.** A row that cannot be converted (an answer that is no label of its options, a bad option list, a
video found neither as a file nor as an archive member, a member whose data fails its CRC-32 check, which names the
archive and the member) is skipped and listed with its reason in ``skipped.jsonl`` (``common``), the other rows
converted. What concerns the release as a whole still refuses it: no question shard, and a zip archive whose central
directory cannot be read (every video in it would be lost; module ``archives``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_sources import parquet_rows
from omnieval.datasets.omni.archives import ArchiveFolder, ReleaseArchives
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
    media_roots,
    option_texts,
    release_sources,
    sound_entries,
    write_release,
)
from omnieval.datasets.omni.subtitles import subtitle_stand_in

CONVERTER = "videomme"
# The answer scorer reproducing the benchmark's released evaluation code (omnieval/scoring/videomme.py), which
# benchmark.json is to record as its "scorer".
SCORER = "videomme"
QUESTIONS = "videomme"
DURATIONS = ("short", "medium", "long")
VIDEO_NAMES = ("data/{}.mp4", "data/{}.MP4", "data/{}.mkv", "video/{}.mp4", "video/{}.MP4", "video/{}.mkv")
ARCHIVES = (ArchiveFolder("data", "videos_chunked_*.zip"), ArchiveFolder("subtitle", "subtitle.zip"))
BREAKDOWNS = ("duration", "domain", "sub_category", "task_type")


def read_videomme(release: Path, media_root: str | Path | None = None, durations: Sequence[str] | None = None,
                  previous: Path | None = None) -> tuple[list[Entry], list[Skipped]]:
    """One ``Entry`` per sound row of ``release/videomme/*.parquet`` of the ``durations`` given (module doc), and the
    rows skipped (``common.sound_entries``); ``previous``: the earlier output being replaced, whose extracted members
    are reused (``archives``)."""
    folder = release / QUESTIONS
    if not folder.is_dir() or not any(folder.glob("*.parquet")):
        raise InputError(f"no {QUESTIONS}/*.parquet in the release folder (lmms-lab/Video-MME keeps its questions in "
                         f"{QUESTIONS}/test-00000-of-00001.parquet)", file=release)
    unknown = [d for d in durations or () if d not in DURATIONS]
    if unknown:
        raise InputError(f"unknown duration {unknown[0]!r}; Video-MME's durations: {', '.join(DURATIONS)}",
                         field="--duration")
    roots = media_roots(release, media_root)
    archives = ReleaseArchives(roots, ARCHIVES, previous)
    rows = ((Where(row.file, f"row {row.number}"), row) for row in parquet_rows(folder, None))
    built, skipped = sound_entries(rows, partial(_entry, durations=durations, roots=roots, archives=archives,
                                                 subtitles={}))
    return [entry for entry in built if entry is not None], skipped


def _entry(row, where: Where, *, durations: Sequence[str] | None, roots: Sequence[Path],
           archives: ReleaseArchives, subtitles: dict[str, str]) -> Entry | None:
    """The row's entry, None for a row of a duration not kept (read first, so a row filtered out is never listed as
    skipped); ``subtitles`` caches each video's stand-in text."""
    record = row.record
    duration = field_text(record, "duration", where, required=False)
    if durations and duration not in durations:
        return None
    qid = field_text(record, "question_id", where)
    where = where.named("question", qid)
    video = file_name(record, "videoID", where)
    if video not in subtitles:
        subtitles[video] = subtitle_stand_in(f"subtitle/{video}.srt", roots, archives, where, "videoID")
    raw_options = record.get("options")
    options = option_texts(raw_options, where, "options")
    clip = MediaRef("videoID", tuple(name.format(video) for name in VIDEO_NAMES), archives=archives or None)
    return Entry(
        where=where, item_id=qid, question=field_text(record, "question", where), options=options,
        answer=given_answer(record, "answer", options, where, list(raw_options)),
        media={"video": clip, "audio": clip}, split=row.split or "all",
        category=field_text(record, "task_type", where, required=False),
        task=field_text(record, "domain", where, required=False),
        text_alternatives={"audio": subtitles[video]} if subtitles[video] else {},
        breakdowns={axis: field_text(record, axis, where, required=False) or "" for axis in BREAKDOWNS})


def convert_videomme(release: str | Path, out: str | Path, *, name: str = "videomme",
                     durations: Sequence[str] | None = None, media_root: str | Path | None = None,
                     copy: bool = False, overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the Video-MME release folder (module doc); videos and subtitles are
    read only under ``release`` and ``media_root`` (a folder holding ``data/`` and ``subtitle/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    notes = [f"kept the {', '.join(durations)} videos' questions"] if durations else []
    entries, skipped = read_videomme(release, media_root, durations, Path(out) if overwrite else None)
    return write_release(entries, out, converter=CONVERTER, name=name,
                         release=release, media_root=media_root, copy=copy, overwrite=overwrite,
                         meta={"durations": list(durations)} if durations else None, notes=notes,
                         skipped=skipped, skip_unsound=True, scorer=SCORER)
