"""Video-Holmes -> a ``spectrum`` benchmark whose items show each suspense short film with its own soundtrack, per
question type.

The release folder as the dataset ships it (``TencentARC/Video-Holmes``, the folder its ``download.py`` writes,
``Benchmark/``): the questions in ``test_Video-Holmes.json`` beside ``videos.zip`` (members ``videos/<video ID>.mp4``;
the release's README unpacks it where it lies, giving the ``videos/`` folder its ``evaluate.py`` reads, and
VLMEvalKit unpacks every member by its file name into ``video/``). The archive may be left packed (the members an
item needs are extracted into the benchmark folder, module ``archives``) or unpacked. The training set
(``train_Video-Holmes.json``) and ``annotations.zip`` are not read. ``test_Video-Holmes.json`` is a list of
questions: ``video ID``, ``Question ID``, ``Question Type`` (``SR``, ``IMC``, ``TCI``, ``TA``, ``MHR``, ``PAR``,
``CTI``), ``Question``, ``Options`` (an object of label -> text, ``A`` to ``F``), ``Answer`` (a label),
``Explanation``.

Item ids are ``<video ID>/<Question ID>``; the options are the ``Options`` values in label order (as VLMEvalKit
lists them); ``category`` and the one breakdown are the question type (``question_type``: the release's
``evaluate.py`` and VLMEvalKit report accuracy per type and overall); the split is ``test``. The mp4 is both the
item's ``video`` and its ``audio``. A question that cannot be converted (options that are not an object of
labels, an answer that is no label of its options, a film found neither as a file nor as an archive member) is
skipped and listed in ``skipped.jsonl`` (``common``).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from omnieval.core.schema import LABELS, InputError
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
    read_json,
    release_sources,
    sound_entries,
    write_release,
)

CONVERTER = "video-holmes"
SCORER = "video-holmes"
QA_FILE = "test_Video-Holmes.json"
VIDEO_NAMES = ("videos/{}.mp4", "video/{}.mp4")
ARCHIVES = (ArchiveFolder("videos", "videos.zip"),)


def read_video_holmes(release: Path, media_root: str | Path | None = None,
                      previous: Path | None = None) -> tuple[list[Entry], list[Skipped]]:
    """One ``Entry`` per sound question of ``release/test_Video-Holmes.json`` (module doc), and those skipped."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder (TencentARC/Video-Holmes keeps its test questions "
                         "there, beside videos.zip)", file=release)
    data = read_json(qa)
    if not isinstance(data, list):
        raise InputError(f"expected a list of questions, got {type(data).__name__}", file=qa)
    archives = ReleaseArchives(media_roots(release, media_root), ARCHIVES, previous)
    records = ((Where(qa, f"entry {i}"), record) for i, record in enumerate(data))
    return sound_entries(records, partial(_entry, archives=archives))


def _entry(record, where: Where, *, archives: ReleaseArchives) -> Entry:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    video = file_name(record, "video ID", where)
    qid = f"{video}/{field_text(record, 'Question ID', where)}"
    where = where.named("question", qid)
    raw = record.get("Options")
    if not isinstance(raw, dict) or not raw:
        raise where.error(f"expected an object of label -> option text, got {type(raw).__name__}", "Options")
    labels = [label for label in LABELS if label in raw]
    if labels != list(LABELS[: len(raw)]):
        raise where.error(f"option labels {', '.join(map(str, raw))}; expected A, B, ... in order", "Options")
    options = option_texts([raw[label] for label in labels], where, "Options")
    clip = MediaRef("video ID", tuple(name.format(video) for name in VIDEO_NAMES), archives=archives or None)
    kind = field_text(record, "Question Type", where, required=False)
    return Entry(where=where, item_id=qid, question=field_text(record, "Question", where), options=options,
                 answer=given_answer(record, "Answer", options, where), media={"video": clip, "audio": clip},
                 split="test", category=kind, breakdowns={"question_type": kind} if kind else {},
                 fields={"options": "Options", "answer": "Answer", "question": "Question"})


def convert_video_holmes(release: str | Path, out: str | Path, *, name: str = "video-holmes",
                         media_root: str | Path | None = None, copy: bool = False,
                         overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the Video-Holmes release folder (module doc); the films are read only
    under ``release`` and ``media_root`` (a folder holding ``videos/`` or ``videos.zip``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_video_holmes(release, media_root, Path(out) if overwrite else None)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
