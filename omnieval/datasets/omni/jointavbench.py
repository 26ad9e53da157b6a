"""JointAVBench (joint audio-visual questions on movie clips, ICLR 2026) -> a ``spectrum`` benchmark of video items
with their soundtracks.

The release (Hugging Face ``JointAVBench/JointAVBench``, described in the README of github.com/jointavbench/
JointAVBench) ships the questions, not the media: ``jointavbench.json`` (one list, 2,853 questions) beside
``video_annotations.json`` and ``subtitle.zip`` (not read). Fields of a question: ``qid`` (``<video>_task<n>_<k>``),
``video_name`` (the YouTube id), ``task`` (the task's short name), ``question``, ``options`` (four texts),
``correct_answer`` (the correct option's text), ``explanation``, ``video_url``, ``segment_timestamp`` ([start, end]
seconds in the YouTube video); ``explanation`` and the URL are not read.

**Clips.** The raw videos cannot be shared, so the user cuts each question's segment from the YouTube video
themselves. The release's ``evaluation/evaluation.py`` opens one clip per question, named by its ``qid``
(``<qid>.mp4`` in its video folder); omnieval reads the same name, ``<qid>.mp4``, under the release folder or
``--media-root``, as the video and (its soundtrack) the audio. A question whose clip is missing is skipped and
listed with its file name in ``skipped.jsonl`` (one line each), the others converted; a release none of whose clips
is there is refused with the first missing name and the count.

**Option order.** ``evaluation.py`` shuffles each question's options with an unseeded ``random.shuffle`` on every
run (``generate_mcq_prompt``), so no two runs of the released script show the same letters. omnieval keeps the
release's order by default (``option_order="release"``: the order of ``options`` in the file); ``"seeded"``
permutes each question's options by a generator seeded with ``seed`` and the ``qid``, the same on every conversion;
``benchmark.json`` records the order used (``option_order``, and ``option_seed``).

Item ids are ``qid``; ``task`` is the item's ``task`` and its ``breakdowns`` (``eval_result.py --eval-task``
reports accuracy per task); the release has no splits (``all``) and no text stand-ins. The answer must be exactly
one option's text (the release's script refuses a question otherwise), compared as written, then with case and runs
of spaces ignored.
"""

from __future__ import annotations

import random
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
    sound_entries,
    write_release,
)

CONVERTER = "jointavbench"
SCORER = "jointavbench"
"""The benchmark's released answer-scoring rule (``omnieval.scoring.jointavbench``), recorded in ``benchmark.json``."""
QUESTION_FILE = "jointavbench.json"
OPTION_ORDERS = ("release", "seeded")


def read_jointavbench(release: Path, option_order: str = "release", seed: int = 0):
    """The question file, one ``Entry`` per sound question (module doc) and the entries skipped."""
    path = release / QUESTION_FILE
    if not path.is_file():
        raise InputError(f"no {QUESTION_FILE} in the release folder (the release's README places it at the top of "
                         "the Hugging Face download)", file=release)
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"expected a list of questions, got {type(data).__name__}", file=path)
    records = ((Where(path, f"entry {i}"), record) for i, record in enumerate(data))
    return path, *sound_entries(records, lambda record, where: _entry(record, where, option_order, seed))


def _entry(record, where: Where, option_order: str, seed: int) -> Entry:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    qid = file_name(record, "qid", where)
    where = where.named("qid", qid)
    options = option_texts(record.get("options"), where, "options")
    if option_order == "seeded":
        random.Random(f"{seed}:{qid}").shuffle(options)
    task = field_text(record, "task", where, required=False)
    clip = MediaRef("qid", (f"{qid}.mp4",))
    return Entry(where=where, item_id=qid, question=field_text(record, "question", where), options=options,
                 answer=given_answer(record, "correct_answer", options, where, text_only=True),
                 media={"video": clip, "audio": clip}, task=task, breakdowns={"task": task} if task else {},
                 fields={"answer": "correct_answer", "media": "qid"})


def convert_jointavbench(release: str | Path, out: str | Path, *, name: str = "jointavbench",
                         media_root: str | Path | None = None, copy: bool = False, overwrite: bool = False,
                         option_order: str = "release", seed: int = 0) -> Converted:
    """Write the benchmark folder ``out`` from the JointAVBench release folder and the user's clips
    (``<qid>.mp4`` under ``release`` or ``media_root``; module doc)."""
    if option_order not in OPTION_ORDERS:
        raise ValueError(f"option_order {option_order!r}; known: {', '.join(OPTION_ORDERS)}")
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    path, entries, skipped = read_jointavbench(release, option_order, seed)
    meta: dict = {"question_file": path.name, "option_order": option_order}
    if option_order == "seeded":
        meta["option_seed"] = seed
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, meta=meta, skipped=skipped, skip_unsound=True,
                         scorer=SCORER)
