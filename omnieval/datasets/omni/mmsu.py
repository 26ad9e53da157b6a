"""MMSU (spoken language understanding and reasoning, 47 tasks) -> a ``spectrum`` benchmark of audio items.

The release folder as the Hugging Face dataset ``ddwang2000/MMSU`` lays it out (its card, and the README of
github.com/dingdongwang/MMSU): Parquet shards under ``data/`` (``<split>-NNNNN-of-NNNNN.parquet``), each row one
question with its clip embedded in the ``audio`` cell (``{"bytes", "path"}``), beside ``audio/``. A cell without
bytes names its clip by ``path``, looked for under ``audio/`` and then as written. Fields: ``id``, ``audio``,
``question``, ``choice_a`` .. ``choice_d``, ``answer_gt`` (the correct choice's *text*), ``task_name`` (one of the
47 tasks), ``category`` (perception or reasoning), ``sub-category``, ``sub-sub-category`` and
``linguistics_sub_discipline`` (the taxonomy's lower levels).

**Answers.** ``answer_gt`` is mapped to the one choice with that text, compared as written, then with case and runs
of spaces ignored (``common.answer_label``, text only: an answer ``"A"`` is the choice that reads ``A``, never the
first); an answer that is no choice's text, or several, skips the question (``skipped.jsonl``). lmms-eval's
``mmsu`` task reads a field ``answer`` instead (``omnieval.scoring.mmsu``).

Item ids are ``id``; the split is the shard's (``train`` on the Hugging Face copy); ``task_name`` is the item's
``task``, ``category`` its ``category``, and all five taxonomy fields its ``breakdowns`` under their own names, so
every metric can be read per task and per category as the release's leaderboard reads them. No text stand-ins.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_sources import parquet_rows
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Where,
    check_out,
    field_text,
    given_answer,
    option_texts,
    release_sources,
    sound_entries,
    write_release,
)

CONVERTER = "mmsu"
SCORER = "mmsu"
"""The benchmark's answer-scoring rule (``omnieval.scoring.mmsu``), recorded in ``benchmark.json``."""
CHOICES = ("choice_a", "choice_b", "choice_c", "choice_d")
BREAKDOWNS = ("task_name", "category", "sub-category", "sub-sub-category", "linguistics_sub_discipline")
"""The release's taxonomy fields, kept as the item's ``breakdowns`` under these names."""


def read_mmsu(release: Path):
    """One ``Entry`` per sound question of ``data/*.parquet`` (module doc), and the questions skipped."""
    data = release / "data"
    if not data.is_dir() or not any(data.rglob("*.parquet")):
        raise InputError("no data/*.parquet in the release folder (the Hugging Face dataset's layout)", file=release)
    rows = ((Where(row.file, f"row {row.number}"), (row.record, row.split or "all"))
            for row in parquet_rows(data, None))
    return sound_entries(rows, lambda pair, where: _entry(pair[0], where, pair[1]))


def _entry(record, where: Where, split: str) -> Entry:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    item_id = field_text(record, "id", where)
    where = where.named("id", item_id)
    options = option_texts([record.get(key) for key in CHOICES], where, "choice_a..choice_d")
    return Entry(
        where=where, item_id=item_id, question=field_text(record, "question", where), options=options,
        answer=given_answer(record, "answer_gt", options, where, text_only=True), split=split,
        media={"audio": _clip(record, where)}, category=field_text(record, "category", where, required=False),
        task=field_text(record, "task_name", where, required=False),
        breakdowns={name: text for name in BREAKDOWNS if (text := field_text(record, name, where, required=False))},
        fields={"answer": "answer_gt", "options": "choice_a..choice_d"})


def _clip(record: dict, where: Where) -> MediaRef:
    """The clip the ``audio`` cell embeds, else the file its ``path`` names (under ``audio/``, then as written)."""
    cell = record.get("audio")
    if not isinstance(cell, dict):
        raise where.error(f"expected an audio cell with bytes or a path, got {type(cell).__name__}", "audio")
    if cell.get("bytes"):
        return MediaRef("audio", data=bytes(cell["bytes"]), name=str(cell.get("path") or ""))
    path = cell.get("path")
    if not isinstance(path, str) or not path.strip():
        raise where.error("the audio cell has neither bytes nor a path", "audio")
    return MediaRef("audio", (f"audio/{path.strip()}", path.strip()))


def convert_mmsu(release: str | Path, out: str | Path, *, name: str = "mmsu", media_root: str | Path | None = None,
                 copy: bool = False, overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the MMSU release folder (module doc); clips not embedded are read
    only under ``release`` and ``media_root`` (a folder holding ``audio/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_mmsu(release)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
