"""AV-Odyssey (questions on pictures or clips with sounds) -> one ``spectrum`` benchmark, every sound question kept.

Two layouts of the release are read:

* **The authors' release** (``AV-Odyssey/AV_Odyssey_Bench``): ``av_odyssey_part1.parquet`` ...
  ``av_odyssey_part6.parquet``, the media embedded in the rows. Columns, as the release's own ``evaluation.py``
  reads them: ``question_id``, ``question_type_id`` (the task, 1-26), ``subfield``, ``data_type``, ``question``,
  ``options`` (four texts), ``answer`` (a label), and one column per medium: ``image_1`` .. ``image_4``,
  ``video_1``, ``audio_1`` .. ``audio_4``. A medium's cell holds its bytes (a Hugging Face ``Image`` / ``Audio``
  struct ``{"bytes", "path"}``, or the bytes alone); an empty cell is no medium. The bytes are written into the
  benchmark folder (``media/embedded/<content hash><suffix>``, ``common.MediaLinker``), the suffix from the cell's
  ``path`` or, without one, from the bytes' own signature (PNG, JPEG, WAV, MP4, ...). A cell that holds a path and
  no bytes (a text, or a struct whose ``bytes`` is empty: ``evaluation.py`` hands the cell to loaders that open a
  file) names a file under the release folder, looked for as lmms-eval's paths are.
* **lmms-eval's copy** (``AV-Odyssey/AV_Odyssey_Bench_LMMs_Eval``, its archives unpacked): ``av_odyssey.parquet``
  (the ``test`` split) beside the media its rows name, with the lists of relative paths ``image_path``,
  ``video_path``, ``audio_path`` instead of the media columns. A path is looked for as written, then under a folder
  of its first component's name (an archive unpacked into a folder of its own name, as lmms-eval's first reader had
  it).

In both, ``data_type`` says whether the pictures are images or videos (as both readers do: the image columns where
it names ``image``, else the video column where it names ``video``); the sounds are always read.

**One benchmark.** Items differ in their modalities (an image and a sound, a video and a sound) and some show
several files of one kind (four pictures to choose from, two sounds to compare): a ``spectrum`` item's media may be
a list (``spectrum.Item``), and each item gets the conditions its own modalities allow. ``category`` is
``subfield`` and ``task`` is ``question_type_id``; ``breakdowns`` carries both (``subfield``, ``task``) and the
item's set of modalities (``modalities``: ``image+audio``, ``video+audio``), the axes the release's results are
reported along and the one the shuffles differ by.

**Tags.** The ``spectrum`` prompt shows the media before the question: the modalities in the order image, video,
audio, the files of one modality in the order of their numbers. Each tag becomes a short marker: ``[image]``,
``[video]`` or ``[audio]`` where the item shows one medium of that kind, ``[image 1]`` .. ``[image 4]``,
``[audio 1]``, ``[audio 2]`` where it shows several (the N-th file shown is number N, as in the release). A tag
naming a medium the row does not have (``[img2]`` with one picture) is an error naming the row. The item's
``media`` lists its modalities in the order the question's tags first name them (the rest after).

**Unsound rows.** A row that cannot be converted (such a tag, an answer that is no label, a file after an empty
cell, embedded bytes of no format read here, a listed file that is missing) is skipped and listed with its reason in
``skipped.jsonl`` (``common``: the same fields as every omni converter's), the other rows converted; the summary's
count per set of modalities counts the items written. A folder with neither layout still refuses the release.
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path, PurePosixPath

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_images import missing_cell
from omnieval.datasets.mcq_sources import parquet_rows
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Skipped,
    Where,
    check_out,
    field_text,
    given_answer,
    option_texts,
    release_sources,
    sound_entries,
    write_release,
)
from omnieval.protocols.spectrum import MEDIA

CONVERTER = "av-odyssey"
SCORER = "av-odyssey"
"""The benchmark's released answer-scoring rule (``omnieval.scoring.av_odyssey``), recorded in ``benchmark.json``."""
QUESTIONS = "av_odyssey.parquet"
PARTS = "av_odyssey_part*.parquet"
SPLIT = "test"
TAG_KINDS = {"img": "image", "video": "video", "audio": "audio"}
"""The tag words of the release and the modality each names."""
PATH_COLUMNS = {"image": "image_path", "video": "video_path", "audio": "audio_path"}
"""lmms-eval's copy: the column listing each modality's relative paths."""
MEDIA_COLUMNS = {"image": ("image_1", "image_2", "image_3", "image_4"), "video": ("video_1",),
                 "audio": ("audio_1", "audio_2", "audio_3", "audio_4")}
"""The authors' release: the columns embedding each modality's files, in the order the question numbers them."""
NOUNS = {"image": ("image", "images"), "video": ("video", "videos"), "audio": ("audio clip", "audio clips")}
SIGNATURES = ((0, b"\x89PNG\r\n\x1a\n", ".png"), (0, b"\xff\xd8\xff", ".jpg"), (0, b"GIF8", ".gif"),
              (0, b"BM", ".bmp"), (8, b"WEBP", ".webp"), (8, b"WAVE", ".wav"), (0, b"ID3", ".mp3"),
              (0, b"\xff\xfb", ".mp3"), (0, b"\xff\xf3", ".mp3"), (0, b"fLaC", ".flac"), (0, b"OggS", ".ogg"),
              (4, b"ftyp", ".mp4"), (0, b"\x1a\x45\xdf\xa3", ".mkv"), (8, b"AVI ", ".avi"))
"""Where a file's bytes show its format (offset, bytes, suffix): the suffix of an embedded file whose cell names
none."""
_TAG = re.compile(r"\[(img|video|audio)(\d+)\]")


def read_av_odyssey(release: Path) -> tuple[list[Entry], list[Skipped]]:
    """The entries of the release folder, in either layout (module doc), in the files' order, and the rows skipped
    (``common.sound_entries``)."""
    if (release / QUESTIONS).is_file():
        rows = ((Where(row.file, f"row {row.number}"), row.record) for row in parquet_rows(release / QUESTIONS, SPLIT))
        return sound_entries(rows, partial(_entry, media_of=_listed_media))
    parts = sorted(release.glob(PARTS), key=_part_number)
    if not parts:
        raise InputError(f"no {QUESTIONS} (lmms-eval's copy) and no {PARTS.replace('*', '<n>')} (the authors' "
                         "release) in the release folder", file=release)
    rows = ((Where(row.file, f"row {row.number}"), row.record) for part in parts for row in parquet_rows(part, SPLIT))
    return sound_entries(rows, partial(_entry, media_of=_embedded_media))


def _part_number(path: Path) -> tuple[int, str]:
    """``av_odyssey_part10`` after ``av_odyssey_part9``."""
    digits = re.sub(r"\D", "", path.stem)
    return (int(digits) if digits else 0, path.name)


def _visual(record: dict, where: Where) -> str | None:
    """The modality of the row's pictures: ``data_type`` names ``image`` or ``video`` (module doc)."""
    data_type = field_text(record, "data_type", where, required=False) or ""
    return "image" if "image" in data_type else "video" if "video" in data_type else None


def _listed_media(record: dict, where: Where, qid: str) -> dict[str, list[MediaRef]]:
    """lmms-eval's copy: each modality's files from its list of relative paths."""
    out = {}
    for modality in (_visual(record, where), "audio"):
        if modality is None:
            continue
        column = PATH_COLUMNS[modality]
        value = record.get(column)
        if hasattr(value, "tolist"):
            value = value.tolist()
        if value is None:
            value = []
        if not isinstance(value, list):
            raise where.error(f"expected a list of paths, got {type(value).__name__}", column)
        for i, p in enumerate(value):
            if missing_cell(p) or not isinstance(p, str):
                raise where.error(f"path {i} is {p!r}", column)
        if value:
            out[modality] = [MediaRef(column, _candidates(p.strip())) for p in value]
    return out


def _embedded_media(record: dict, where: Where, qid: str) -> dict[str, list[MediaRef]]:
    """The authors' release: each modality's files from its columns, in order; an empty cell is no file, and a
    file after an empty cell is an error (its number would not be the one the question gives)."""
    out = {}
    for modality in (_visual(record, where), "audio"):
        if modality is None:
            continue
        refs, gap = [], None
        for column in MEDIA_COLUMNS[modality]:
            ref = _embedded(record.get(column), where, column, qid)
            if ref is None:
                gap = gap or column
            elif gap is not None:
                raise where.error(f"{column} holds a file but {gap} is empty: the files of one kind are numbered "
                                  "from 1 without gaps", column)
            else:
                refs.append(ref)
        if refs:
            out[modality] = refs
    return out


def _embedded(cell, where: Where, column: str, qid: str) -> MediaRef | None:
    """The file a media cell embeds (module doc), None for an empty cell."""
    name = None
    if isinstance(cell, dict):
        name = cell.get("path") if isinstance(cell.get("path"), str) and cell.get("path").strip() else None
        cell = cell.get("bytes")
        if not cell and name is not None:  # a path, no bytes: a file beside the part files
            return MediaRef(column, _candidates(name.strip()))
    if isinstance(cell, str) and cell.strip():
        return MediaRef(column, _candidates(cell.strip()))
    if cell is None or (isinstance(cell, bytes | bytearray | str) and not cell):
        return None
    if not isinstance(cell, bytes | bytearray):
        raise where.error(f"expected the file's bytes, got {type(cell).__name__}", column)
    data = bytes(cell)
    if name is None or not PurePosixPath(name).suffix:
        suffix = next((ext for offset, magic, ext in SIGNATURES if data[offset:offset + len(magic)] == magic), None)
        if suffix is None:
            raise where.error(f"the {len(data)} bytes embedded are no image, audio or video format this reads "
                              f"(they start {data[:8]!r})", column)
        name = f"{qid}_{column}{suffix}"
    return MediaRef(column, data=data, name=PurePosixPath(name).name)


def _entry(record: dict, where: Where, *, media_of) -> Entry:
    qid = field_text(record, "question_id", where)
    where = where.named("question", qid)
    refs = media_of(record, where, qid)
    raw_options = record.get("options")
    if hasattr(raw_options, "tolist"):
        raw_options = raw_options.tolist()
    options = option_texts(raw_options, where, "options")
    counts = {m: len(r) for m, r in refs.items()}
    named: list[str] = []
    question = _markers(field_text(record, "question", where), counts, named, where, "question")
    options = [_markers(o, counts, named, where, "options") for o in options]
    order = named + [m for m in MEDIA if m in refs and m not in named]
    subfield = field_text(record, "subfield", where, required=False)
    task = field_text(record, "question_type_id", where, required=False)
    modalities = "+".join(m for m in MEDIA if m in refs)
    return Entry(
        where=where, item_id=qid, question=question, options=options,
        answer=given_answer(record, "answer", options, where, raw_options), split=SPLIT,
        media={m: refs[m][0] if len(refs[m]) == 1 else refs[m] for m in order},
        category=subfield, task=task,
        breakdowns={k: v for k, v in (("subfield", subfield), ("task", task), ("modalities", modalities)) if v})


def _markers(text: str, counts: dict[str, int], named: list[str], where: Where, field_name: str) -> str:
    """``text`` with each tag replaced by its marker (module doc); ``named`` gathers the modalities in the order the
    tags first name them. A tag for a medium the row does not have is an error."""
    def marker(match: re.Match) -> str:
        modality, number = TAG_KINDS[match.group(1)], int(match.group(2))
        have = counts.get(modality, 0)
        if not 1 <= number <= have:
            raise where.error(f"tag {match.group(0)} but the row has {have} {NOUNS[modality][have != 1]}",
                              field_name)
        if modality not in named:
            named.append(modality)
        return f"[{modality}]" if have == 1 else f"[{modality} {number}]"

    return _TAG.sub(marker, text)


def _candidates(path: str) -> tuple[str, ...]:
    """The path as written, then under a folder named after its first component (module doc)."""
    first = PurePosixPath(path).parts[0] if PurePosixPath(path).parts else ""
    nested = f"{first}/{path}" if first and first != path else None
    return (path, nested) if nested else (path,)


def convert_av_odyssey(release: str | Path, out: str | Path, *, name: str = "av-odyssey",
                       media_root: str | Path | None = None, copy: bool = False,
                       overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the AV-Odyssey release folder, either layout (module doc); listed
    media are read only under ``release`` and ``media_root`` (a folder holding the media folders)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped = read_av_odyssey(release)
    layout = "the authors' release (media embedded)" if not (release / QUESTIONS).is_file() else "lmms-eval's copy"
    converted = write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                              copy=copy, overwrite=overwrite, skipped=skipped, skip_unsound=True, scorer=SCORER)
    converted.notes.append(f"read {layout}; items per set of modalities: {_modality_sets(converted.out)}")
    return converted


def _modality_sets(out: Path) -> str:
    """The items written per set of modalities (``image+audio 10, video+audio 4``), counted in ``items.jsonl`` so
    the rows skipped while writing are left out."""
    sets: dict[str, int] = {}
    for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines():
        key = json.loads(line).get("breakdowns", {}).get("modalities", "none")
        sets[key] = sets.get(key, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(sets.items()))
