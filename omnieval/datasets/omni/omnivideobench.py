"""OmniVideoBench (questions on videos with their sound, each with its reasoning steps) -> a ``spectrum`` benchmark
whose items show each video with its own soundtrack and carry the release's evidence label.

The release folder as its README places it: ``data.json`` beside ``videos/<video>.mp4`` (the repository's example
folder calls it ``video/``, also read). ``data.json`` is a list of videos: ``video`` (the file's name without
``.mp4``), ``video_type``, ``duration`` (``MM:SS``) and ``questions``, each with ``question``, ``question_type``,
``audio_type`` (Speech, Sound, Music), ``options`` (four texts written ``"A.xxx"``, ``"A. xxx"`` or ``"A xxx"``),
``correct_option`` (the label), ``answer`` (a text that often paraphrases the correct option: not read) and
``reasoning_steps``: ``modality``, ``evidence``, ``inference`` per step.

**Evidence label.** Each step's ``modality`` says whether its evidence is seen or heard. The item's
``evidence_modality`` is ``vision``, ``audio`` or ``vision+audio``: the tags of its steps (``spectrum.Item``; metrics
then come per label too). Tags are read with case, spaces and a trailing ``.``/``,``/``;``/``:`` aside, and the
misspellings the release has (``MISSPELLED``); any other tag stops the conversion naming the step. A step without a
``modality`` key (the release has a few with a mangled key, e.g. ``nmodality``) carries no tag; a question none of
whose steps does has no label, and the summary counts those.

The mp4 is both the item's ``video`` and its ``audio`` (its own soundtrack, never extracted). Item ids are
``<video>/<n>``, n counting the video's questions from 0; ``category`` is ``question_type``, ``task`` is
``video_type``; ``breakdowns`` holds ``audio_type`` and ``question_type``, the breakdowns the release's paper reports.
The release has no splits (``all``) and no text stand-ins. An option repeating an earlier one's text (one question of
the release) is merged into it (``common.merge_repeated_options``), the label following.

**Written labels.** The labels the options are written with are stripped wherever written
(``common.strip_option_labels``), also where they are out of order: a question written ``A. ...``, ``B. ...``,
``A. an angry tone``, ``B. ...`` shows ``an angry tone`` as its third option, not ``C. A. an angry tone``. Such a
label is a slip in the text, not a second name: ``correct_option`` names an option by its position (``C`` is the
third, whatever letter it was written with), as the letters a model is asked for do; the questions so written are
named in a note and in ``benchmark.json`` (``labels_out_of_order``) for review. A question that cannot be
converted (an unknown step tag, an answer past its options, a missing video) is skipped and listed in
``skipped.jsonl`` (``common``), the others converted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from omnieval.core.schema import LABELS, InputError
from omnieval.datasets.mcq_images import missing_cell
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Skipped,
    Where,
    answer_label,
    changed_options_note,
    check_out,
    field_text,
    file_name,
    merge_repeated_options,
    merged_label,
    option_texts,
    read_json,
    release_sources,
    sound_entries,
    write_release,
    writes_labels,
    written_labels,
)

CONVERTER = "omnivideobench"
# The answer scorer reproducing the benchmark's released evaluation code (omnieval/scoring/omnivideobench.py), which
# benchmark.json is to record as its "scorer".
SCORER = "omnivideobench"
QA_FILE = "data.json"
VIDEO_NAMES = ("videos/{}.mp4", "video/{}.mp4")
TAGS = ("vision", "audio")
MISSPELLED = {"vison": "vision", "viison": "vision", "vsion": "vision",
              "aduio": "audio", "auido": "audio", "aodio": "audio"}
"""Step tags as the release misspells them (in ten of its 3,500-odd steps), and the tag each means."""
BREAKDOWNS = ("audio_type", "question_type")
"""The question fields OmniVideoBench's paper reports accuracy by, kept as the item's ``breakdowns``."""
_BARE_LABEL = re.compile(r"^([A-Z]) (.+)$", re.DOTALL)


@dataclass
class Read:
    """What ``read_omnivideobench`` found: the entries, the entries skipped, how many questions have no evidence
    label, the questions whose repeated options were merged and those whose written labels are out of order."""

    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    unlabelled: int = 0
    merged: list[str] = field(default_factory=list)
    relabelled: list[str] = field(default_factory=list)


def read_omnivideobench(release: Path) -> Read:
    """One ``Entry`` per sound question of ``release/data.json`` (module doc), each unsound question, or video, skipped
    (``common.sound_entries``)."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder (the release's README places data.json beside "
                         "videos/)", file=release)
    data = read_json(qa)
    if not isinstance(data, list):
        raise InputError(f"expected a list of videos, got {type(data).__name__}", file=qa)
    read = Read()
    videos, read.skipped = sound_entries(((Where(qa, f"entry {i}"), r) for i, r in enumerate(data)), _video)
    for video, video_type, questions in videos:
        clip = MediaRef("video", tuple(name.format(video) for name in VIDEO_NAMES))
        records = ((Where(qa, f"{video}/{n}", f"{video}/{n}"), q) for n, q in enumerate(questions))
        built, skipped = sound_entries(records, partial(_question, clip=clip, video_type=video_type))
        read.skipped += skipped
        for entry, merged, relabelled in built:
            read.entries.append(entry)
            read.unlabelled += entry.evidence_modality is None
            read.merged += [entry.item_id] if merged else []
            read.relabelled += [entry.item_id] if relabelled else []
    return read


def _video(record, where: Where) -> tuple[str, str | None, list]:
    """A video's name, type and questions."""
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    video = file_name(record, "video", where)
    questions = record.get("questions")
    if not isinstance(questions, list) or not questions:
        raise where.named("video", video).error("expected a non-empty list of questions", "questions")
    return video, field_text(record, "video_type", where, required=False), questions


def _question(question, at: Where, *, clip: MediaRef, video_type: str | None) -> tuple[Entry, bool, bool]:
    """The question's entry, whether repeated options were merged, and whether its written labels are out of
    order (module doc: the answer is ``correct_option``'s position all the same)."""
    if not isinstance(question, dict):
        raise at.error(f"expected an object, got {type(question).__name__}", "questions")
    raw = question.get("options")
    written = _without_bare_labels(option_texts(raw, at, "options"))
    labels = written_labels([o.strip() for o in raw])
    relabelled = writes_labels(labels) and any(label not in (None, LABELS[i]) for i, label in enumerate(labels))
    answer = answer_label(question.get("correct_option"), written, at, "correct_option")
    options = merge_repeated_options(written)
    entry = Entry(
        where=at, item_id=at.item_id, question=field_text(question, "question", at), options=options,
        answer=merged_label(answer, written, options), media={"video": clip, "audio": clip},
        category=field_text(question, "question_type", at, required=False), task=video_type,
        evidence_modality=evidence_label(question.get("reasoning_steps"), at),
        breakdowns={name: text for name in BREAKDOWNS if (text := field_text(question, name, at, required=False))},
        fields={"answer": "correct_option"})
    return entry, len(options) < len(written), relabelled


def _without_bare_labels(options: list[str]) -> list[str]:
    """The options without a label followed by a space only (``"A Kitchen"``), when every option starts with its own
    label so, in order (``option_texts`` has already taken ``"A."`` and the like off)."""
    matches = [_BARE_LABEL.match(o) for o in options]
    if all(m is not None and m.group(1) == label for m, label in zip(matches, LABELS, strict=False)):
        return [m.group(2).strip() for m in matches]
    return options


def evidence_label(steps, where: Where) -> str | None:
    """``vision``, ``audio`` or ``vision+audio`` from the steps' ``modality`` tags (module doc); None where no step
    has one."""
    if missing_cell(steps):  # the release has one question whose steps are an empty text
        steps = []
    if not isinstance(steps, list):
        raise where.error(f"expected a list of steps, got {type(steps).__name__}", "reasoning_steps")
    found = set()
    for k, step in enumerate(steps):
        if not isinstance(step, dict):
            raise where.error(f"expected an object, got {type(step).__name__}", f"reasoning_steps[{k}]")
        if "modality" not in step:
            continue
        raw = step["modality"]
        tag = raw.strip().rstrip(".,;:").strip().lower() if isinstance(raw, str) else None
        tag = MISSPELLED.get(tag, tag)
        if tag not in TAGS:
            raise where.error(f"step tag {raw!r} is neither {' nor '.join(TAGS)}", f"reasoning_steps[{k}].modality")
        found.add(tag)
    return "+".join(t for t in TAGS if t in found) or None


def convert_omnivideobench(release: str | Path, out: str | Path, *, name: str = "omnivideobench",
                           media_root: str | Path | None = None, copy: bool = False,
                           overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the OmniVideoBench release folder (module doc); videos are read only
    under ``release`` and ``media_root`` (a folder holding ``videos/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    read = read_omnivideobench(release)
    notes = [f"{read.unlabelled} questions have no tagged reasoning step: no evidence label"] if read.unlabelled else []
    notes += [changed_options_note(read.merged)] if read.merged else []
    meta: dict = {"changed_options": read.merged} if read.merged else {}
    if read.relabelled:
        shown = ", ".join(read.relabelled[:5]) + (", ..." if len(read.relabelled) > 5 else "")
        notes.append(f"{len(read.relabelled)} questions write option labels out of order ({shown}): the labels are "
                     "stripped and correct_option read as the option's position")
        meta["labels_out_of_order"] = read.relabelled
    return write_release(read.entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, notes=notes, meta=meta or None, skipped=read.skipped,
                         skip_unsound=True, scorer=SCORER)
