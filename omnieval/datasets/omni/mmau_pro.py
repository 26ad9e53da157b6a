"""MMAU-Pro (audio understanding and reasoning over speech, sound, music, long, multi-clip and spatial audio) -> a
``spectrum`` benchmark of audio items: its closed-form questions as multiple-choice items, its ``open`` questions as
open items.

The release folder as the Hugging Face dataset ``gamma-lab-umd/MMAU-Pro`` ships it: ``test.parquet`` (5,305 rows)
beside ``data.zip`` (about 47 GB, members ``data/<uuid>.wav``). The archive may be left packed (the members an item
needs are extracted into the benchmark folder, module ``archives``) or unpacked where it lies (``data/``, the folder
NeMo-Skills' ``nemo_skills/dataset/mmau-pro/prepare.py`` unpacks it to). Each row: ``id``, ``audio_path`` (a list of
``data/<uuid>.wav``, several for the multi-audio questions, kept in order as a list of clips), ``question``,
``choices`` (a list of texts; empty for the open questions), ``answer`` (the correct choice's *text*; the reference
answer of an open question), ``category`` (a domain such as ``sound``, ``music``, ``speech``, ``multi``, ..., or
``open`` or ``instruction following``), ``sub-cat``, ``length_type``, ``task_classification``, and, for instruction
following, ``task_identifier`` and ``kwargs``.

What each kind becomes, as the authors' ``evaluate_mmau_pro_comprehensive.py`` (github.com/sonalkum/MMAUPro) splits
the rows by ``category``:

* **closed-form** (every other category): a multiple-choice item, the ``answer`` text mapped to its choice (as
  written, then with case and runs of spaces ignored: ``common.answer_label``, text only; blank choices left out and
  repeated ones merged, ``common.text_answered``). The script scores only rows with more than one choice: a row
  with fewer, an answer that is no choice's text, or several, is skipped and listed in ``skipped.jsonl``.
* ``open``: an open item (no options, asked with ``modes: [open]``) with ``answer`` as its reference, graded by the
  run's judges; the script rates them 1-5 with Qwen2.5-7B-Instruct instead (``omnieval.scoring.mmau_pro``).
* ``instruction following``: an open item without a reference, scored by the script's own checks of the row's
  constraint (``omnieval.scoring.mmau_pro_aif``: word and sentence counts, keywords, casing, ...), the item keeping
  ``task_identifier`` and ``kwargs`` (JSON, its null fields left out) as breakdowns ``task_identifier`` and
  ``aif_kwargs``; a row without a ``task_identifier``, or with ``kwargs`` that are no object, is skipped and listed.

Item ids are ``id``; the split is ``test``; the item's ``category`` is the row's, and ``category``, ``sub-cat``,
``length_type`` and ``task_classification`` are its ``breakdowns`` under those names (the script reports per
``category``). The multi-valued skill lists are not kept. No text stand-ins (``transcription`` is not read).
"""

from __future__ import annotations

import json
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
    media_roots,
    release_sources,
    sound_entries,
    text_answered,
    write_release,
)
from omnieval.scoring.mmau_pro_aif import KWARGS_BREAKDOWN, TASK_BREAKDOWN

CONVERTER = "mmau-pro"
SCORER = "mmau-pro"
"""The benchmark's answer-scoring rule (``omnieval.scoring.mmau_pro``), recorded in ``benchmark.json``."""
QA_FILE = "test.parquet"
ARCHIVES = (ArchiveFolder("data", "data.zip"),)
OPEN = "open"
INSTRUCTION_FOLLOWING = "instruction following"
BREAKDOWNS = ("category", "sub-cat", "length_type", "task_classification")
"""The release's per-row labels kept as the item's ``breakdowns`` under these names."""


def read_mmau_pro(release: Path, media_root: str | Path | None = None,
                  previous: Path | None = None) -> tuple[list[Entry], list[Skipped]]:
    """One ``Entry`` per convertible question of ``release/test.parquet`` (module doc), and those skipped."""
    qa = release / QA_FILE
    if not qa.is_file():
        raise InputError(f"no {QA_FILE} in the release folder (gamma-lab-umd/MMAU-Pro keeps its questions there, "
                         "beside data.zip)", file=release)
    archives = ReleaseArchives(media_roots(release, media_root), ARCHIVES, previous)
    rows = ((Where(row.file, f"row {row.number}"), row.record) for row in parquet_rows(qa, "test"))
    return sound_entries(rows, partial(_entry, archives=archives))


def _entry(record, where: Where, *, archives: ReleaseArchives) -> Entry:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    item_id = field_text(record, "id", where)
    where = where.named("id", item_id)
    category = field_text(record, "category", where)
    common = {"where": where, "item_id": item_id, "question": field_text(record, "question", where),
              "split": "test", "media": {"audio": _clips(record, where, archives)}, "category": category,
              "breakdowns": {n: t for n in BREAKDOWNS if (t := field_text(record, n, where, required=False))},
              "fields": {"options": "choices", "reference": "answer"}}
    if category == INSTRUCTION_FOLLOWING:
        common["breakdowns"] |= _constraint(record, where)
        return Entry(options=[], answer=None, reference=None, is_open=True, **common)
    if category == OPEN:
        return Entry(options=[], answer=None, reference=field_text(record, "answer", where), is_open=True, **common)
    choices = record.get("choices")
    choices = choices.tolist() if hasattr(choices, "tolist") else choices
    if not isinstance(choices, list | tuple) or len(choices) < 2:
        n = len(choices) if isinstance(choices, list | tuple) else 0
        raise where.error(f"a closed-form question with {n} choice{'' if n == 1 else 's'}: the release scores only "
                          "questions with more than one", "choices")
    options, answer, _ = text_answered(record, "choices", "answer", where)
    if answer is None:
        raise where.error("missing or empty 'answer'", "answer")
    return Entry(options=options, answer=answer, **common)


def _constraint(record: dict, where: Where) -> dict[str, str]:
    """An instruction-following row's check id and arguments as its item keeps them (module doc)."""
    task = field_text(record, TASK_BREAKDOWN, where)
    kwargs = record.get("kwargs")
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs) if kwargs.strip() else None
        except json.JSONDecodeError as exc:
            raise where.error(f"not JSON: {exc}", "kwargs") from None
    if kwargs is not None and not isinstance(kwargs, dict):
        raise where.error(f"expected an object of arguments, got {type(kwargs).__name__}", "kwargs")
    plain = {k: (v.item() if hasattr(v, "item") else v) for k, v in (kwargs or {}).items() if v is not None}
    return {TASK_BREAKDOWN: task, KWARGS_BREAKDOWN: json.dumps(plain, sort_keys=True, ensure_ascii=False)}


def _clips(record: dict, where: Where, archives: ReleaseArchives) -> list[MediaRef]:
    """The row's clips in order: each ``data/<uuid>.wav`` as a file under the release (or media root), else as a
    member of ``data.zip``."""
    paths = record.get("audio_path")
    paths = paths.tolist() if hasattr(paths, "tolist") else paths
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list | tuple) or not paths:
        raise where.error("expected a list of clip paths (data/<uuid>.wav)", "audio_path")
    refs = []
    for path in paths:
        if not isinstance(path, str) or not path.strip():
            raise where.error(f"a clip path that is {'empty' if isinstance(path, str) else type(path).__name__}",
                              "audio_path")
        refs.append(MediaRef("audio_path", (path.strip().lstrip("/"),), archives=archives or None))
    return refs


def convert_mmau_pro(release: str | Path, out: str | Path, *, name: str = "mmau-pro",
                     media_root: str | Path | None = None, copy: bool = False, overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the MMAU-Pro release folder (module doc); the clips are read only
    under ``release`` and ``media_root`` (a folder holding ``data/`` or ``data.zip``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_mmau_pro(release, media_root, Path(out) if overwrite else None)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
