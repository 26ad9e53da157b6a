"""Video-MME-v2 -> a ``spectrum`` benchmark whose items show each clip with its own soundtrack, in the release's groups
of four questions per clip, its word-level subtitles kept as the text stand-in for the audio.

The release folder as the dataset ships it (``MME-Benchmarks/Video-MME-v2``): the questions in ``test.parquet``
beside ``videos/001.zip`` ... ``videos/040.zip`` (twenty clips each, ``<video_id>.mp4``) and ``subtitle.zip``
(``subtitle/<video_id>.jsonl``: one ``{"text", "start_time", "end_time"}`` word a line). The archives may be left
packed (the members an item needs are extracted into the benchmark folder, module ``archives``; a member is found by
its file name whatever folder it carries) or unpacked where they lie (``videos/<video_id>.mp4`` or VLMEvalKit's
``video/``, ``.MP4`` also tried; lmms-eval's ``data/<video_id>.mp4``, ``.MP4`` and ``.mkv``;
``subtitle/<video_id>.jsonl``). Columns: ``video_id`` (``001``), ``url``, ``group_type`` (``relevance`` /
``logic``), ``group_structure`` (``[1,2,3,4]``, ``[1,[2,3],4]``, ``[[1,2],3,4]``), ``question_id`` (``001-1``),
``question``, ``options`` (eight texts written ``"A. ..."``, one text a line or a list), ``answer`` (a label),
``level``, ``second_head``, ``third_head``.

**Groups.** The released evaluation script (``scoring.videomme_v2``) forms the groups by row position, rows 0-3,
4-7, ..., and reads a group's type, structure, level and heads from its last row (the release fills ``level``,
``second_head`` and ``third_head`` on that row only). The converter forms the same blocks and checks each holds one
clip's four questions ``<video_id>-1`` ... ``-4`` in that order with one type and structure; every item of a block
carries the block's values as breakdowns (``group_type``, ``group_structure``, ``level``, ``second_head``,
``third_head``), which is what the run's ``group_score`` reads (``protocols.spectrum``). A block that fails the
check has all its rows skipped with the reason, since a group score over it would be read from the wrong rows.

Item ids are the ``question_id``; ``category`` is ``second_head``, ``task`` is ``third_head``; the split is
``test``. The mp4 is both the item's ``video`` and its ``audio``; the subtitle words, joined by spaces as the
script's concatenated mode joins them, are the item's text stand-in for ``audio`` where the file exists.

**Unsound rows.** A row that cannot be converted (an answer that is no label of its options, a bad option list, a
video found neither as a file nor as an archive member, a member failing its CRC-32 check) is skipped and listed in
``skipped.jsonl`` (``common``), and so are the other rows of its group; no ``test.parquet`` refuses the release.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_sources import parquet_rows
from omnieval.datasets.omni.archives import ArchiveFolder, ReleaseArchives
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    EntryError,
    MediaRef,
    Skipped,
    Where,
    check_out,
    field_text,
    file_name,
    find_file,
    given_answer,
    media_roots,
    option_texts,
    release_sources,
    write_release,
)
from omnieval.scoring.videomme_v2 import GROUP_TYPES, chain_structure

CONVERTER = "videomme-v2"
SCORER = "videomme-v2"
QUESTIONS = "test.parquet"
GROUP_SIZE = 4
VIDEO_NAMES = ("videos/{}.mp4", "videos/{}.MP4", "video/{}.mp4", "video/{}.MP4", "data/{}.mp4", "data/{}.MP4",
               "data/{}.mkv")
ARCHIVES = (ArchiveFolder("videos", "videos/*.zip"), ArchiveFolder("subtitle", "subtitle.zip"))
GROUP_FIELDS = ("group_type", "group_structure", "level", "second_head", "third_head")


def read_videomme_v2(release: Path, media_root: str | Path | None = None,
                     previous: Path | None = None) -> tuple[list[Entry], list[Skipped]]:
    """One ``Entry`` per sound row of ``release/test.parquet`` in a sound group (module doc), and the rows skipped;
    ``previous``: the earlier output being replaced, whose extracted members are reused (``archives``)."""
    path = release / QUESTIONS
    if not path.is_file():
        raise InputError(f"no {QUESTIONS} in the release folder (MME-Benchmarks/Video-MME-v2 keeps its 3,200 "
                         "questions there, beside videos/ and subtitle.zip)", file=release)
    roots = media_roots(release, media_root)
    archives = ReleaseArchives(roots, ARCHIVES, previous)
    rows = [(Where(row.file, f"row {row.number}"), row.record) for row in parquet_rows(path, None)]
    entries: list[Entry] = []
    skipped: list[Skipped] = []
    subtitles: dict[str, str] = {}
    for start in range(0, len(rows), GROUP_SIZE):
        block = rows[start:start + GROUP_SIZE]
        try:
            shared = _group_fields(block)
            built = [_entry(record, where, shared, roots, archives, subtitles) for where, record in block]
        except EntryError as exc:
            skipped += _skip_block(block, exc)
            continue
        entries += built
    return entries, skipped


def _group_fields(block: Sequence[tuple[Where, dict]]) -> dict[str, str]:
    """The group's breakdowns, read from its last row as the script reads them, once the block is checked to be one
    clip's four questions in order with one type and structure (module doc)."""
    where, last = block[-1]
    video = file_name(last, "video_id", where)
    if len(block) != GROUP_SIZE:
        raise where.error(f"the last {len(block)} rows form no group of {GROUP_SIZE} (the release's evaluation forms "
                          "groups by row position)", "question_id")
    for number, (row_where, record) in enumerate(block, start=1):
        qid = field_text(record, "question_id", row_where)
        if qid != f"{video}-{number}":
            raise row_where.error(f"question {qid!r} where the group of video {video!r} (its rows "
                                  f"{block[0][0].item}..{where.item}) needs {video}-{number}", "question_id")
        for name in ("group_type", "group_structure"):
            if field_text(record, name, row_where, required=False) != field_text(last, name, where, required=False):
                raise row_where.error(f"{name} differs within the group of video {video!r}", name)
    shared = {name: field_text(last, name, where, required=False) or "" for name in GROUP_FIELDS}
    if shared["group_type"] not in GROUP_TYPES:
        raise where.error(f"group_type {shared['group_type']!r} is none of {', '.join(GROUP_TYPES)}", "group_type")
    if shared["group_type"] == "logic":
        try:
            chain_structure(shared["group_structure"])
        except ValueError as exc:
            raise where.error(str(exc), "group_structure") from None
    return {name: value for name, value in shared.items() if value}


def _skip_block(block: Sequence[tuple[Where, dict]], error: EntryError) -> list[Skipped]:
    """Every row of a group one of whose rows cannot be converted: that row with its reason, the others naming it
    (a group score over the rest would be read from the wrong table)."""
    out = []
    for where, record in block:
        if error.item == where.item or str(error.item).startswith(f"{where.item} ("):
            out.append(Skipped.of(error))
            continue
        qid = record.get("question_id")
        out.append(Skipped(qid if isinstance(qid, str) else None, str(where.file), where.item, None,
                           f"another question of its group cannot be converted ({error.item}: {error.reason})"))
    return out


def _entry(record: dict, where: Where, shared: dict[str, str], roots: Sequence[Path], archives: ReleaseArchives,
           subtitles: dict[str, str]) -> Entry:
    qid = field_text(record, "question_id", where)
    where = where.named("question", qid)
    video = file_name(record, "video_id", where)
    if video not in subtitles:
        subtitles[video] = word_subtitles(f"subtitle/{video}.jsonl", roots, archives, where)
    raw = record.get("options")
    written = raw.splitlines() if isinstance(raw, str) else raw
    options = option_texts(written, where, "options")
    clip = MediaRef("video_id", tuple(name.format(video) for name in VIDEO_NAMES), archives=archives or None)
    return Entry(
        where=where, item_id=qid, question=field_text(record, "question", where), options=options,
        answer=given_answer(record, "answer", options, where, [o.strip() for o in written]),
        media={"video": clip, "audio": clip}, split="test", category=shared.get("second_head"),
        task=shared.get("third_head"), text_alternatives={"audio": subtitles[video]} if subtitles[video] else {},
        breakdowns=shared)


def word_subtitles(rel: str, roots: Sequence[Path], archives: ReleaseArchives, where: Where) -> str:
    """The words of a word-level JSONL subtitle file (``rel`` under ``roots``, else its archive member) joined by
    spaces; "" where there is none. A line that is not a JSON object with a ``text`` is an error naming the line."""
    path = find_file((rel,), roots, where, "video_id", required=False)
    if path is not None:
        data, name = path.read_bytes(), str(path)
    else:
        member = archives.find((rel,), where, "video_id") if archives else None
        if member is None:
            return ""
        data, name = archives.read_bytes(member, where, "video_id"), member.describe()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise where.error(f"{name}: not UTF-8 text (byte offset {exc.start}: {exc.reason})", "video_id") from None
    words = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            word = json.loads(line)
        except json.JSONDecodeError as exc:
            raise where.error(f"{name}, line {number}: not JSON ({exc.msg})", "video_id") from None
        if not isinstance(word, dict) or not isinstance(word.get("text"), str):
            raise where.error(f"{name}, line {number}: no 'text' (word-level lines hold text, start_time, "
                              "end_time)", "video_id")
        words.append(word["text"])
    return " ".join(words)


def convert_videomme_v2(release: str | Path, out: str | Path, *, name: str = "videomme-v2",
                        media_root: str | Path | None = None, copy: bool = False,
                        overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the Video-MME-v2 release folder (module doc); videos and subtitles
    are read only under ``release`` and ``media_root`` (a folder holding ``videos/`` and ``subtitle/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_videomme_v2(release, media_root, Path(out) if overwrite else None)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
