"""Convert multiple-choice VQA benchmarks, as lmms-eval and VLMEvalKit users hold them, into an omnieval benchmark
folder for the ``spectrum`` protocol: ``benchmark.json`` (``{"name": ..., "protocol": "spectrum"}``),
``items.jsonl`` and the images extracted to ``media/``.

Sources (``fmt="auto"`` tells them apart):

* **Parquet** (``.parquet`` file, or a folder of them, e.g. a Hugging Face dataset snapshot's ``data/``): shards
  named ``<split>-00000-of-00001[-<hash>].parquet`` give their split (lmms-eval's ``lmms-lab/MMBench_EN``:
  ``data/dev-*.parquet`` and ``data/test-*.parquet``; point at one config's folder of a multi-config snapshot);
* **``datasets.save_to_disk`` folders**: ``state.json`` + ``dataset_info.json`` + Arrow stream files (one split),
  or ``dataset_dict.json`` with one such folder per split. Read with pyarrow: the ``datasets`` package is not
  needed;
* **VLMEvalKit TSV**: base64 image column ``image`` (a value of 64 characters or fewer names the ``index`` of the
  row whose image it shares, VLMEvalKit's space saving), ``question``, option columns ``A``.. , ``answer``,
  ``category``, ``index``, optional ``hint`` and ``split``.

Columns (each overridable, see ``Columns``): the id from ``index`` / ``id`` / ``question_id`` (else the row number);
the question (a non-empty ``hint`` goes first, on its own line, as VLMEvalKit and lmms-eval prompt MMBench); options
as letter columns ``A``, ``B``, .. (trailing empty ones dropped), ``choice_a``.. , or a list column ``options`` /
``choices`` (also a string holding a Python list, as MMMU stores them); the answer as a label (``"B"``), a 0-based
index (an integer, or digits when no option reads the same), an option text, or a ``ClassLabel`` id (its names come
from the Hugging Face features metadata); the image as Hugging Face stores an ``Image`` feature (``{bytes, path}``),
raw bytes, base64 text, or a path (relative to the source file's folder). Multi-image rows are refused. The
item's ``category`` from ``category``, its ``task`` from ``l2-category`` (MMBench's second-level ability) when
present.

**Circular copies.** VLMEvalKit's MMBench-style files hold each question once per rotation of its options, the
copies at ``index + k * 1,000,000`` with their image cell naming the original row (``omnieval.datasets.circular``).
When an ``index`` column has that layout, every item gets ``group`` = the original's id: the copies of a question
are one resampling unit, never each other's spectrum donors, and ``circular_accuracy`` (VLMEvalKit's CircularEval)
scores them together. A copy must be its original with the options reordered (same question, same option texts,
the same correct option), else an ``InputError`` names its row and the field. The picture is decoded and written
once and shared by every copy.

**Splits.** A row's split comes from its shard name or ``save_to_disk`` split folder, else from a ``split``
column, else it is ``all``. A split none of whose rows has an answer (MMBench's ``test``: its answers are withheld,
the cells empty, ``None`` or ``'nan'``, or the column absent) cannot be scored: by default every split with
answers is converted and each answerless one is skipped and reported (``Converted.skipped_splits``, its row count);
``splits=[...]`` converts exactly those, and naming an unknown or answerless split is an ``InputError`` naming the
file and the answer column. Within a converted split a row without an answer is an error naming its row.

Items get ``answer`` as a label and ``media = {"image": "media/<content hash>.<ext>"}``: an image shared by several
rows (MMBench repeats them) is written once. With more than one split converted the item id is ``<split>/<id>``.
Errors are ``InputError`` naming the file, the row (and item id) and the column.

The sources are read row by row in ``omnieval.datasets.mcq_sources``, and each image cell is decoded in full and
written by ``omnieval.datasets.mcq_images`` (a picture cut short, such as a truncated base64 string, is refused
naming its row and column); the command is ``omnieval datasets mcq``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from omnieval.core.schema import LABELS, InputError, pydantic_message
from omnieval.datasets.circular import question_groups
from omnieval.datasets.mcq_images import CellError, MediaWriter, cell_image, missing_cell
from omnieval.datasets.mcq_sources import READERS, SourceRow, detect_format
from omnieval.datasets.output_folder import Source, building_folder, check_output_folder
from omnieval.protocols.spectrum import Item

Format = Literal["auto", "parquet", "hf-disk", "tsv"]
AnswerFormat = Literal["auto", "label", "index", "text"]


@dataclass(frozen=True)
class Columns:
    """Source column names; ``None`` = detect from the usual names (the first present wins)."""

    id: str | None = None
    question: str = "question"
    hint: str | None = "hint"
    options: str | None = None
    answer: str = "answer"
    image: str | None = None
    category: str | None = "category"
    task: str | None = None
    split: str | None = "split"

    ID_NAMES = ("index", "id", "question_id", "qid", "sample_id")
    TASK_NAMES = ("l2-category",)  # MMBench's second-level ability, above its ``category``
    OPTION_LISTS = ("options", "choices")
    IMAGE_NAMES = ("image", "img", "image_path", "image_1")


@dataclass
class Converted:
    """What ``convert_mcq`` wrote: the folder, the item count per split, the distinct images, the rows skipped
    (no image), the splits skipped for having no answers with their row counts, and the number of questions when
    circular copies were grouped (None without copies: every item is its own question)."""

    out: Path
    splits: dict[str, int]
    n_media: int
    skipped: list[str] = field(default_factory=list)
    skipped_splits: dict[str, int] = field(default_factory=dict)
    n_questions: int | None = None

    @property
    def n_items(self) -> int:
        return sum(self.splits.values())

    def summary(self) -> str:
        parts = ", ".join(f"{s}: {n}" for s, n in self.splits.items())
        skipped = f"; skipped {len(self.skipped)} rows without an image" if self.skipped else ""
        copies = (f" (circular copies of {self.n_questions} questions, each one resampling unit)"
                  if self.n_questions is not None else "")
        return f"wrote {self.n_items} items ({parts}){copies} and {self.n_media} images to {self.out}{skipped}"


# ---------------------------------------------------------------------------------------------------------------
# One row -> one item
# ---------------------------------------------------------------------------------------------------------------

def _text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _options(record: dict, columns: Columns) -> tuple[list[str], str]:
    """Option texts and the column(s) they came from."""
    if columns.options:
        name = columns.options
        if name not in record:
            raise CellError(f"no column {name!r}", name)
        return _option_list(record[name], name), name
    for names in (list(LABELS), [f"choice_{label.lower()}" for label in LABELS]):
        if names[0] in record:
            values = []
            for col in names:
                if col not in record:
                    break
                values.append((col, record[col]))
            while values and missing_cell(values[-1][1]):
                values.pop()
            for col, value in values:
                if missing_cell(value):
                    raise CellError("empty option before a later non-empty one", col)
            if values:
                return [_text(v) for _, v in values], f"{names[0]}.."
    for name in Columns.OPTION_LISTS:
        if name in record:
            return _option_list(record[name], name), name
    raise CellError("no options: expected columns A, B, .. or a list column options / choices", None)


def _option_list(value, column: str) -> list[str]:
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise CellError("options text is not a list", column) from None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise CellError(f"options must be a list, got {type(value).__name__}", column)
    if any(missing_cell(v) for v in value):
        raise CellError("an option is empty", column)
    return [_text(v) for v in value]


def _answer(value, options: list[str], fmt: str, features: dict, column: str) -> str:
    """The correct option's label."""
    labels = LABELS[: len(options)]
    if missing_cell(value):
        raise CellError("no answer", column)
    names = (features.get(column) or {}).get("names") if isinstance(features.get(column), dict) else None
    if names and isinstance(value, int) and fmt == "auto":  # a ClassLabel: its id -> its name
        if not 0 <= value < len(names):
            raise CellError(f"class id {value} outside the {len(names)} class names", column)
        value = names[value]
    if isinstance(value, float) and value.is_integer():
        value = int(value)

    def by_index(i: int) -> str:
        if not 0 <= i < len(options):
            raise CellError(f"answer index {i} outside the {len(options)} options (0-based)", column)
        return labels[i]

    def by_text(text: str) -> str | None:
        hits = [lab for lab, opt in zip(labels, options, strict=True) if opt == text]
        return hits[0] if len(hits) == 1 else None

    if fmt == "index" or (fmt == "auto" and isinstance(value, int) and not isinstance(value, bool)):
        try:
            return by_index(int(value))
        except (TypeError, ValueError):
            raise CellError(f"answer {value!r} is not an index", column) from None
    text = _text(value)
    if fmt == "label":
        if text not in labels:
            raise CellError(f"answer {text!r} is not one of the labels {labels[0]}..{labels[-1]}", column)
        return text
    if fmt == "text":
        label = by_text(text)
        if label is None:
            raise CellError(f"answer {text!r} is not exactly one of the options", column)
        return label
    if len(text) == 1 and text in LABELS:
        if text not in labels:
            raise CellError(f"answer {text!r} but the row has {len(options)} options ({labels[0]}..{labels[-1]})",
                            column)
        return text
    if text.isdigit():
        as_text = by_text(text)
        as_index = by_index(int(text)) if int(text) < len(options) else None
        if as_text is not None and as_index is not None and as_text != as_index:
            raise CellError(f"answer {text!r} is ambiguous: option {as_index} by index, option {as_text} by text "
                            "(set the answer format)", column)
        if as_text or as_index:
            return as_text or as_index  # type: ignore[return-value]
        raise CellError(f"answer index {text} outside the {len(options)} options (0-based)", column)
    label = by_text(text)
    if label is None:
        raise CellError(f"answer {text!r} is neither a label, an index nor one of the options", column)
    return label


def _pick(record: dict, name: str | None, candidates: Sequence[str]) -> str | None:
    if name is not None:
        return name if name in record else None
    return next((c for c in candidates if c in record), None)


# ---------------------------------------------------------------------------------------------------------------
# The converter
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class _SplitScan:
    rows: int = 0
    answered: int = 0
    file: Path | None = None  # the first file holding the split, for errors


def _row_split(row: SourceRow, columns: Columns) -> str:
    """The split of a row: its shard or split folder, else its ``split`` column, else ``all``."""
    if row.split is not None:
        return row.split
    if columns.split and columns.split in row.record and not missing_cell(row.record[columns.split]):
        return _text(row.record[columns.split])
    return "all"


def scan_splits(source: Path, kind: str, columns: Columns) -> dict[str, _SplitScan]:
    """Rows and rows with an answer, per split, reading only the split and answer columns where the format
    allows (images are not decoded)."""
    wanted = [c for c in (columns.answer, columns.split) if c]
    scans: dict[str, _SplitScan] = {}
    for row in READERS[kind](source, None, columns=wanted):
        scan = scans.setdefault(_row_split(row, columns), _SplitScan(file=row.file))
        scan.rows += 1
        scan.answered += not missing_cell(row.record.get(columns.answer))
    return scans


def choose_splits(source: Path, scans: dict[str, _SplitScan], splits: Sequence[str] | None,
                  answer: str) -> tuple[list[str], dict[str, int]]:
    """The splits to convert and the answerless splits skipped (their row counts): see the module doc."""
    listed = ", ".join(f"{s} ({v.rows} rows, {v.answered} with answers)" for s, v in scans.items()) or "none"
    if splits:
        for split in splits:
            if split not in scans:
                raise InputError(f"no split {split!r} in the source; its splits: {listed}", file=source,
                                 field="split")
            if scans[split].answered == 0:
                raise InputError(f"split {split!r} has no answers: none of its {scans[split].rows} rows has a value "
                                 f"in column {answer!r} (withheld answers cannot be scored); its splits: {listed}",
                                 file=scans[split].file, field=answer)
        return list(dict.fromkeys(splits)), {}
    chosen = [s for s, v in scans.items() if v.answered]
    if not chosen:
        first = next(iter(scans.values()), _SplitScan(file=source))
        raise InputError(f"no split has answers in column {answer!r}; its splits: {listed}", file=first.file,
                         field=answer)
    return chosen, {s: v.rows for s, v in scans.items() if not v.answered}


def convert_mcq(source: str | Path, out_dir: str | Path, *, name: str | None = None, fmt: Format = "auto",
                splits: Sequence[str] | None = None, columns: Columns | None = None,
                answer_format: AnswerFormat = "auto", skip_missing_image: bool = False, limit: int | None = None,
                overwrite: bool = False, media_root: str | Path | None = None) -> Converted:
    """Write the benchmark folder ``out_dir`` from ``source`` (see the module doc); returns what was written.

    ``splits`` chooses the splits (default: every split with answers; module doc); ``skip_missing_image`` drops
    rows without an image (text-only questions have nothing to shuffle) instead of failing on the first; ``limit``
    converts only the first rows (per source, in file order). The folder is written beside ``out_dir`` and moved
    into place when complete; ``out_dir`` must be new or empty, or with ``overwrite`` a previous ``mcq`` output, and
    apart from the source and ``media_root`` (``omnieval.datasets.output_folder``). Image files named by path are
    read only under the source's folder (the folder given, or the file's) and ``media_root``; each image is decoded
    in full, so a truncated or corrupt one is refused here, naming its row and column.
    """
    source = Path(source)
    columns = columns or Columns()
    kind = detect_format(source) if fmt == "auto" else fmt
    if kind not in READERS:
        raise ValueError(f"unknown format {fmt!r}; use one of auto, {', '.join(READERS)}")
    out = Path(out_dir)
    sources = [Source(source, "the source folder" if source.is_dir() else "the source file")]
    sources += [Source(Path(media_root), "the --media-root folder")] if media_root is not None else []
    check_output_folder(out, "mcq", overwrite=overwrite, sources=sources)  # before reading the source
    chosen, skipped_splits = choose_splits(source, scan_splits(source, kind, columns), splits, columns.answer)
    bench_name = name or (source.stem if source.is_file() else source.name)
    with building_folder(out, "mcq", overwrite=overwrite, sources=sources, prefix=".mcq-") as tmp:
        roots = [(source if source.is_dir() else source.parent).resolve()]
        roots += [Path(media_root).resolve()] if media_root is not None else []
        media = MediaWriter(tmp, roots)
        records: list[tuple[SourceRow, dict]] = []
        images_by_index: dict[str, str] = {}
        skipped: list[str] = []
        count = 0
        for row in READERS[kind](source, None, only=set(chosen)):
            if _row_split(row, columns) not in chosen:
                continue
            if limit is not None and count >= limit:
                break
            count += 1
            converted = _convert_row(row, columns, answer_format, media)
            where = f"{converted['_id']} (row {row.number})"
            if converted["_image"] is None:
                if not skip_missing_image:
                    raise InputError("row has no image (pass skip_missing_image=True to drop text-only rows)",
                                     file=row.file, item=where, field=converted["_image_col"] or "image")
                skipped.append(where)
                continue
            if not converted["_image"].startswith("ref:"):
                images_by_index[converted["_id"]] = converted["_image"]
            records.append((row, converted))
        items = _finish(records, images_by_index, bench_name)
        with open(tmp / "items.jsonl", "w", encoding="utf-8") as f:
            for item in items:
                f.write(item.model_dump_json(exclude_none=True) + "\n")
        counts: dict[str, int] = {}
        for item in items:
            counts[item.split] = counts.get(item.split, 0) + 1
        n_questions = len({(it.split, it.question_id) for it in items}) if any(it.group for it in items) else None
        meta = {"name": bench_name, "protocol": "spectrum", "source": str(source), "format": kind,
                "n_items": len(items), "splits": counts, "generator": "omnieval.datasets.mcq"}
        if skipped_splits:
            meta["skipped_splits"] = skipped_splits
        if n_questions is not None:
            meta["n_questions"] = n_questions
        (tmp / "benchmark.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return Converted(out=out, splits=counts, n_media=len(media.written), skipped=skipped,
                     skipped_splits=skipped_splits, n_questions=n_questions)


def _convert_row(row: SourceRow, columns: Columns, answer_format: str, media: MediaWriter) -> dict:
    record = row.record
    id_col = _pick(record, columns.id, Columns.ID_NAMES)
    if id_col and missing_cell(record[id_col]):
        id_col = None  # the row number stands in
    ident = _text(record[id_col]) if id_col else str(row.number)
    where = f"{ident} (row {row.number})"
    image_col = _pick(record, columns.image, Columns.IMAGE_NAMES)
    try:
        if columns.question not in record:
            raise CellError(f"no column {columns.question!r}", columns.question)
        if missing_cell(record[columns.question]):
            raise CellError("empty question", columns.question)
        question = _text(record[columns.question])
        if columns.hint and columns.hint in record and not missing_cell(record[columns.hint]):
            question = f"{_text(record[columns.hint])}\n{question}"
        options, options_col = _options(record, columns)
        if not 2 <= len(options) <= len(LABELS):
            raise CellError(f"{len(options)} options (2 to 26 needed)", options_col)
        if columns.answer not in record:
            raise CellError(f"no column {columns.answer!r}", columns.answer)
        answer = _answer(record[columns.answer], options, answer_format, row.features, columns.answer)
        image = cell_image(record[image_col], row, image_col, media) if image_col else None
    except CellError as exc:
        raise InputError(str(exc), file=row.file, item=where, field=exc.column) from None
    category_col = columns.category if columns.category in record else None
    task_col = _pick(record, columns.task, Columns.TASK_NAMES)
    return {"_id": ident, "_id_col": id_col, "_image": image, "_image_col": image_col,
            "_split": _row_split(row, columns), "question": question, "options": options, "answer": answer,
            "category": _cell_text(record, category_col), "task": _cell_text(record, task_col)}


def _cell_text(record: dict, column: str | None) -> str | None:
    return _text(record[column]) if column and not missing_cell(record[column]) else None


def _finish(records: list[tuple[SourceRow, dict]], images_by_index: dict[str, str], bench_name: str) -> list[Item]:
    """Resolve image references, group circular copies, make ids unique (split-prefixed when there are several
    splits), validate."""
    several = len({c["_split"] for _, c in records}) > 1
    groups = question_groups(records)
    items, seen = [], {}
    for (row, c), group in zip(records, groups, strict=True):
        where = f"{c['_id']} (row {row.number})"
        image = c["_image"]
        if image.startswith("ref:"):
            target = image[len("ref:"):]
            if target not in images_by_index:
                raise InputError(f"image refers to row index {target!r}, which has no image of its own; nor is "
                                 f"it an existing file (paths are relative to {Path(row.file).parent})",
                                 file=row.file, item=where, field=c["_image_col"])
            image = images_by_index[target]
        item_id = f"{c['_split']}/{c['_id']}" if several else c["_id"]
        if item_id in seen:
            raise InputError(f"duplicate item id {item_id!r} (first on row {seen[item_id]})", file=row.file,
                             item=where, field="index")
        seen[item_id] = row.number
        try:
            items.append(Item(item_id=item_id, benchmark=bench_name, split=c["_split"], question=c["question"],
                              options=c["options"], answer=c["answer"], media={"image": image},
                              category=c["category"], task=c["task"],
                              group=None if group is None else f"{c['_split']}/{group}" if several else group))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(pydantic_message(err), file=row.file, item=where,
                             field=".".join(str(p) for p in err["loc"]) or None) from None
    return items
