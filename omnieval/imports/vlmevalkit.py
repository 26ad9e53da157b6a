"""VLMEvalKit's per-model result files as imported records (``omnieval import vlmevalkit``).

What VLMEvalKit writes (``run.py`` and ``vlmeval/smp/file.py``): each run of a model goes to
``<work_dir>/<model>/<eval id>/`` (the eval id ``T<yyyymmdd>-<hhmmss>``, or the older ``T<yyyymmdd>_G<commit>``)
and, after the run, every file of it is linked from ``<work_dir>/<model>/`` by a relative symlink. Per dataset:

- ``<model>_<dataset>.xlsx`` (or ``.tsv``/``.json`` under ``PRED_FORMAT``): the benchmark's rows with the model's
  ``prediction``; no verdict. A circular dataset (MMBench, CCBench, ...) has one row per rotation of each question,
  at ``index = g + k * 1,000,000``.
- ``<model>_<dataset>_<judge>_result.xlsx`` (``.tsv``/``.json`` likewise; ``_<judge>_result`` added by
  ``get_intermediate_file_path``; the judge is ``exact_matching`` or the judge model's name): the same rows with
  ``hit`` (1 correct, 0 wrong), written by ``mcq_vanilla_eval`` / ``mcq_circular_eval`` in
  ``vlmeval/dataset/utils/multiple_choice.py``. For a circular dataset it holds one row per question
  (``index == g_index``), whose ``hit`` is already the whole group's: 1 only if every rotation was answered
  correctly.

So the verdicts are read from the ``_result`` files: a folder argument is searched for them (a link and its target
are read once), a file argument must have a ``hit`` column. A file that still holds rotation rows (``index`` of
1,000,000 or more, or a ``g_index`` column naming another row) is reduced to one record per question with
VLMEvalKit's rule: correct only if all its rows are.

The model's name is the folder's (``<model>/`` or ``<model>/<eval id>/``): file names alone are ambiguous when the
model or the dataset has ``_`` in its name. The dataset is what lies between the model and the judge; the judge is
``exact_matching`` or else the last ``_`` part of the name (judge model names such as ``gpt-4o-mini`` have none).
``--model`` renames the model (and resolves a file outside a model folder whose name starts with it).

The cluster is ``--cluster-field`` where given, else a ``video`` column where the file has one, else the question
is its own unit. ``written`` orders reruns: the eval folder's time (as written, the run machine's local time; only
the order matters), else the file's modification time, so a dataset rerun in a later eval folder wins.
"""

from __future__ import annotations

import csv
import datetime
import json
import re
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.circular import STRIDE
from omnieval.imports.base import ImportedRow, ImportOptions, register_format

RESULT_FILE = re.compile(r"^(?P<stem>.+)_result\.(?P<ext>xlsx|csv|tsv|json)$")
EVAL_ID = re.compile(r"^T(?P<time>\d{8}-\d{6})$")
LEGACY_EVAL_ID = re.compile(r"^T\d{8}_G[0-9a-fA-F]+$")
VIDEO_COLUMN = "video"


@register_format("vlmevalkit")
def read(paths: Sequence[Path], options: ImportOptions) -> Iterator[ImportedRow]:
    """One record per question of every ``_result`` file under ``paths`` (files or model folders)."""
    for path in _result_files(paths):
        yield from _read_result(path, options)


def _result_files(paths: Sequence[Path]) -> list[Path]:
    """The files to read, each real file once: a model folder holds links to the files of its eval folders."""
    found, seen = [], set()
    for path in map(Path, paths):
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*") if p.is_file() and RESULT_FILE.match(p.name))
            if not candidates:
                raise InputError("no VLMEvalKit result file (<model>_<dataset>_<judge>_result.xlsx/tsv/csv/json) in "
                                 "this folder", file=path)
        elif path.is_file():
            candidates = [path]
        else:
            raise InputError("no such file or folder", file=path)
        for candidate in candidates:
            real = candidate.resolve()
            if real not in seen:
                seen.add(real)
                found.append(candidate)
    return found


def _read_result(path: Path, options: ImportOptions) -> Iterator[ImportedRow]:
    folder_model, dataset = _model_and_dataset(path, options)
    model = options.model or folder_model
    rows = _table(path)
    if not rows:
        return
    for column in ("index", "hit"):
        if column not in rows[0]:
            hint = (" (VLMEvalKit writes multiple-choice verdicts to <model>_<dataset>_<judge>_result files; name "
                    "those files, not a folder that holds other benchmarks' results)") if column == "hit" else ""
            raise InputError(f"no {column!r} column{hint}", file=path, field=column)
    if options.cluster_field and options.cluster_field not in rows[0]:
        raise InputError("no such column (--cluster-field)", file=path, field=options.cluster_field)
    written = _written(path)
    for question, members in _questions(path, rows).items():
        yield _record(path, model, dataset, question, members, options.cluster_field, written)


def _model_and_dataset(path: Path, options: ImportOptions) -> tuple[str, str]:
    """The model (from the folder, or ``--model``) and the dataset in ``<model>_<dataset>_<judge>_result.<ext>``."""
    stem = RESULT_FILE.match(path.name)
    if stem is None:
        raise InputError("not a VLMEvalKit result file name (<model>_<dataset>_<judge>_result.xlsx/tsv/csv/json)",
                         file=path)
    stem = stem["stem"]
    folder = path.parent.name
    if EVAL_ID.match(folder) or LEGACY_EVAL_ID.match(folder):
        folder = path.parent.parent.name
    model = next((m for m in (folder, options.model) if m and stem.startswith(f"{m}_")), None)
    if model is None:
        raise InputError(f"cannot tell the model from the dataset in the file name: its folder {folder!r} is not "
                         "the model it starts with (VLMEvalKit writes to <work_dir>/<model>/); pass --model",
                         file=path, field="model")
    rest = stem[len(model) + 1:]
    dataset = _strip_judge(rest)
    if not dataset:
        raise InputError("no dataset name between the model and the judge in the file name", file=path,
                         field="dataset")
    return model, dataset


def _strip_judge(rest: str) -> str:
    if rest.endswith("_exact_matching"):
        return rest[: -len("_exact_matching")]
    return rest.rpartition("_")[0]


def _written(path: Path) -> float:
    """When the run was made: the eval folder's time, else the file's modification time."""
    match = EVAL_ID.match(path.resolve().parent.name)
    if match:
        stamp = datetime.datetime.strptime(match["time"], "%Y%m%d-%H%M%S")
        return stamp.replace(tzinfo=datetime.UTC).timestamp()
    return path.stat().st_mtime


def _table(path: Path) -> list[dict]:
    """The rows of a file written by VLMEvalKit's ``dump`` (pandas ``to_excel`` with xlsxwriter, ``to_csv`` with
    every field quoted, or a JSON list of records), as dicts of header to cell; cells as written."""
    try:
        if path.suffix == ".xlsx":
            return _xlsx_rows(path)
        if path.suffix == ".json":
            return _json_rows(path)
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle, delimiter="\t" if path.suffix == ".tsv" else ","))
    except InputError:
        raise
    except (OSError, ValueError, KeyError, csv.Error, zipfile.BadZipFile) as exc:
        raise InputError(f"cannot read the table: {exc}", file=path) from exc


def _xlsx_rows(path: Path) -> list[dict]:
    try:
        import openpyxl
    except ImportError as exc:
        raise InputError("reading .xlsx needs openpyxl (pip install openpyxl)", file=path) from exc
    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        lines = book.worksheets[0].iter_rows(values_only=True)
        header = [str(h) for h in next(lines, ())]
        return [dict(zip(header, line)) for line in lines if any(cell is not None for cell in line)]
    finally:
        book.close()


def _json_rows(path: Path) -> list[dict]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise InputError("not a list of records, as VLMEvalKit's dump writes a table to .json", file=path)
    return rows


def _cell_text(value) -> str | None:
    """A cell as text: None and empty cells as None, integral numbers without ``.0``."""
    if value is None or value == "":
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _index(path: Path, row: dict, column: str) -> int:
    text = _cell_text(row.get(column))
    try:
        return int(text)
    except (TypeError, ValueError):
        raise InputError(f"{column} {text!r} is not an integer", file=path, item=f"index {row.get('index')}",
                         field=column) from None


def _questions(path: Path, rows: list[dict]) -> dict[int, list[dict]]:
    """The rows of each question, keyed by its index: ``g_index`` where the file has it, else ``index % 1e6``
    (VLMEvalKit's own ``g_index`` default); a plain file has one row per question."""
    grouped: dict[int, list[dict]] = {}
    for row in rows:
        index = _index(path, row, "index")
        question = _index(path, row, "g_index") if _cell_text(row.get("g_index")) is not None else index % STRIDE
        grouped.setdefault(question, []).append({**row, "_index": index})
    return grouped


def _hit(path: Path, row: dict) -> bool:
    value = _cell_text(row.get("hit"))
    if value in ("1", "True"):
        return True
    if value in ("0", "False"):
        return False
    raise InputError(f"hit {value!r} is neither 1 nor 0", file=path, item=f"index {row['_index']}", field="hit")


def _record(path: Path, model: str, dataset: str, question: int, members: list[dict], cluster_field: str | None,
            written: float) -> ImportedRow:
    """One question: correct only if every row of it is (VLMEvalKit's CircularEval); the rest from its original
    row (``index == question``), or the first where the file lacks it."""
    correct = all([_hit(path, row) for row in members])
    main = next((row for row in members if row["_index"] == question), members[0])
    cluster = _cell_text(main.get(cluster_field or VIDEO_COLUMN))
    if cluster_field and cluster is None:
        raise InputError("empty cluster cell", file=path, item=f"index {main['_index']}", field=cluster_field)
    return ImportedRow(
        model=model, task=dataset, sample_id=str(question), correct=correct,
        source=f"{path}#index={main['_index']}", target=_cell_text(main.get("answer")),
        text=_cell_text(main.get("prediction")), cluster=cluster, written=written,
        extra={"rows": len(members)} if len(members) > 1 else {},
    )
