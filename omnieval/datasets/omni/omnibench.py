"""OmniBench (an image, an audio clip and a question about both) -> a ``spectrum`` benchmark of image + audio items,
with the release's transcript and caption as text stand-ins.

Either layout the release ships, given as its folder:

* **GitHub** (``multimodal-art-projection/OmniBench``): ``dataset/batch-5_1142_20240817.jsonl`` (the one ``.jsonl``
  under ``dataset/``) with the media fetched by git-lfs: ``audio_path`` and ``image_path`` are base names under
  ``mm_data/audio/`` and ``mm_data/image/``;
* **Hugging Face** (``m-a-p/OmniBench``): ``data/train-0000N-of-00003.parquet`` whose ``audio`` and ``image`` cells
  embed the files (``{bytes, path}``), written to ``media/embedded/`` (the images decoded in full first).

Fields: ``index``, ``task type`` (7 task types), ``audio type`` (speech, sound event, music), ``question``,
``options`` (four texts), ``answer`` (the correct option's text), ``audio content`` (a human transcript of the
audio) and ``image content`` (a model-written caption of the image). Item ids are the ``index``; ``category`` is
``task type``, ``task`` is ``audio type``; the text stand-ins are ``audio content`` for ``audio`` and ``image
content`` for ``image`` (the release's text-alternative experiments). The split is the shard's for Parquet (the Hub
calls the whole benchmark ``train``), else ``all``. ``breakdowns`` holds ``audio type`` in lower case (the table
the release's ``calculate_metrics.py`` prints) and ``task type`` (its paper's). A question that cannot be converted
(an answer that is none of its options, a missing file) is skipped and listed in ``skipped.jsonl`` (``common``), the
others converted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_sources import parquet_rows
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
    read_jsonl,
    release_sources,
    sound_entries,
    write_release,
)

CONVERTER = "omnibench"
SCORER = "omnibench"
"""The benchmark's released answer-scoring rule (``omnieval.scoring.omnibench``), recorded in ``benchmark.json``."""
STAND_INS = {"audio": "audio content", "image": "image content"}


def read_omnibench(release: Path) -> tuple[list[Entry], list[Skipped]]:
    """One ``Entry`` per sound question of either layout (module doc), and the questions skipped."""
    parquet = sorted((release / "data").glob("*.parquet")) if (release / "data").is_dir() else []
    jsonl = sorted((release / "dataset").glob("*.jsonl")) if (release / "dataset").is_dir() else []
    if parquet:
        return sound_entries(((where, (record, split)) for record, where, split in _parquet_records(release / "data")),
                             lambda pair, where: _entry(pair[0], where, pair[1]))
    if len(jsonl) == 1:
        return sound_entries(((Where(jsonl[0], f"line {n}"), record) for n, record in read_jsonl(jsonl[0])),
                             lambda record, where: _entry(record, where, "all"))
    if len(jsonl) > 1:
        raise InputError(f"{len(jsonl)} question files under dataset/ ({', '.join(p.name for p in jsonl)}); give a "
                         "release folder with one", file=release / "dataset")
    raise InputError("neither dataset/*.jsonl (the GitHub release) nor data/*.parquet (the Hugging Face release) in "
                     "the release folder", file=release)


def _parquet_records(folder: Path) -> Iterator[tuple[dict, Where, str]]:
    for row in parquet_rows(folder, None):
        yield row.record, Where(row.file, f"row {row.number}"), row.split or "all"


def _entry(record, where: Where, split: str) -> Entry:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    index = field_text(record, "index", where)
    where = where.named("index", index)
    raw_options = record.get("options")
    options = option_texts(raw_options, where, "options")
    return Entry(
        where=where, item_id=index, question=field_text(record, "question", where), options=options,
        answer=given_answer(record, "answer", options, where, list(raw_options), text_only=True), split=split,
        media={"image": _medium(record, "image", where), "audio": _medium(record, "audio", where)},
        category=field_text(record, "task type", where, required=False),
        task=field_text(record, "audio type", where, required=False),
        breakdowns=_breakdowns(record, where),
        text_alternatives={m: text for m, key in STAND_INS.items()
                           if (text := field_text(record, key, where, required=False))})


def _breakdowns(record: dict, where: Where) -> dict[str, str]:
    """``audio type`` as the release's ``calculate_metrics.py`` reports it (lower case), and ``task type``."""
    audio = field_text(record, "audio type", where, required=False)
    task = field_text(record, "task type", where, required=False)
    return {k: v for k, v in (("audio type", audio and audio.lower()), ("task type", task)) if v}


def _medium(record: dict, modality: str, where: Where) -> MediaRef:
    """The Parquet cell's embedded file, else the base name in ``<modality>_path`` under ``mm_data/<modality>/``."""
    cell = record.get(modality)
    if isinstance(cell, dict) and cell.get("bytes"):
        return MediaRef(modality, data=bytes(cell["bytes"]), name=str(cell.get("path") or ""))
    name = file_name(record, f"{modality}_path", where)
    return MediaRef(f"{modality}_path", (f"mm_data/{modality}/{name}",))


def convert_omnibench(release: str | Path, out: str | Path, *, name: str = "omnibench",
                      media_root: str | Path | None = None, copy: bool = False,
                      overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the OmniBench release folder (module doc); media files are read only
    under ``release`` and ``media_root`` (a folder holding ``mm_data/``)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_omnibench(release)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
