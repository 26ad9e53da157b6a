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
``video_type``. The release has no splits (``all``) and no text stand-ins. An option repeating an earlier one's text
(one question of the release) is merged into it (``common.merge_repeated_options``), the label following.
"""

from __future__ import annotations

import re
from pathlib import Path

from omnieval.core.schema import LABELS, InputError
from omnieval.datasets.mcq_images import missing_cell
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
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
    write_release,
)

CONVERTER = "omnivideobench"
QA_FILE = "data.json"
VIDEO_NAMES = ("videos/{}.mp4", "video/{}.mp4")
TAGS = ("vision", "audio")
MISSPELLED = {"vison": "vision", "viison": "vision", "vsion": "vision",
              "aduio": "audio", "auido": "audio", "aodio": "audio"}
"""Step tags as the release misspells them (in ten of its 3,500-odd steps), and the tag each means."""
_BARE_LABEL = re.compile(r"^([A-Z]) (.+)$", re.DOTALL)


def read_omnivideobench(release: Path) -> tuple[list[Entry], int, list[str]]:
    """One ``Entry`` per question of ``release/data.json`` (module doc), how many have no evidence label, and the
    questions whose repeated options were merged."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder (the release's README places data.json beside "
                         "videos/)", file=release)
    data = read_json(qa)
    if not isinstance(data, list):
        raise InputError(f"expected a list of videos, got {type(data).__name__}", file=qa)
    entries, unlabelled, merged = [], 0, []
    for i, record in enumerate(data):
        where = Where(qa, f"entry {i}")
        if not isinstance(record, dict):
            raise where.error(f"expected an object, got {type(record).__name__}")
        video = file_name(record, "video", where)
        questions = record.get("questions")
        if not isinstance(questions, list) or not questions:
            raise Where(qa, f"entry {i} (video {video})").error("expected a non-empty list of questions",
                                                                "questions")
        clip = MediaRef("video", tuple(name.format(video) for name in VIDEO_NAMES))
        video_type = field_text(record, "video_type", where, required=False)
        for n, question in enumerate(questions):
            at = Where(qa, f"{video}/{n}")
            if not isinstance(question, dict):
                raise at.error(f"expected an object, got {type(question).__name__}", f"questions[{n}]")
            written = _without_bare_labels(option_texts(question.get("options"), at, "options"))
            answer = answer_label(question.get("correct_option"), written, at, "correct_option")
            options = merge_repeated_options(written)
            if len(options) < len(written):
                merged.append(f"{video}/{n}")
            label = evidence_label(question.get("reasoning_steps"), at)
            unlabelled += label is None
            entries.append(Entry(
                where=at, item_id=f"{video}/{n}", question=field_text(question, "question", at), options=options,
                answer=merged_label(answer, written, options), media={"video": clip, "audio": clip},
                category=field_text(question, "question_type", at, required=False), task=video_type,
                evidence_modality=label, fields={"answer": "correct_option"}))
    return entries, unlabelled, merged


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
    entries, unlabelled, merged = read_omnivideobench(release)
    notes = [f"{unlabelled} questions have no tagged reasoning step: no evidence label"] if unlabelled else []
    notes += [changed_options_note(merged)] if merged else []
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, notes=notes,
                         meta={"changed_options": merged} if merged else None)
