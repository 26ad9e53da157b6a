"""The shared half of ``omnieval import``: every reader's records deduped, one filter per task chosen, models
joined on their items, and ``predictions.parquet`` written in the documented columns (docs/import.md).

One rule for every format, applied here once:

* **Duplicates and reruns.** Records are keyed by (model, task, sample id, repeat, filter). Two records of one key
  written at different times (``written``: a rerun's files carry a later timestamp) are a rerun: the newest is kept
  and counted as a rerun, whatever its verdict. Two of equal (or unknown) time are the same record read twice (an
  inspect ``.eval`` and its ``.json`` conversion, a file reached through a link or given twice): kept once and
  counted as a duplicate where their contents agree; where they differ nothing says which is right, and the import
  is refused naming both sources.
* **Filters.** A tool that scores one answer several ways (lm-eval's filters) logs one record per filter. Metrics
  need one verdict per sample, so a task logged under several filters needs ``--filter``; without it the import
  is refused with the task's filters listed. A task logged under one filter keeps it.
* **Repeats** (inspect epochs, repeated samples) stay rows of one item: ``item_id`` is the sample, each repeat is
  an instance of it (column ``sample``: 0, 1, ...), so every resampling unit holds all repeats of its items and an
  item's accuracy is the mean over its repeats.
* **Joining.** Models are paired on (task, sample id). Items some models lack are kept (each model's metrics use
  what it answered; paired statistics use the items both answered) and reported: a count in the summary and one
  row per such item in ``unpaired_items.csv``.
* **Clusters.** An item's cluster (a video, audio or document id) must be one value across its rows; rows without
  one take the value the item's other rows give, and two values are refused naming both sources.

The verdict becomes ``choice`` and ``target`` (metrics count ``choice == target`` as correct): the logged labels
where the tool logged option labels that agree with its verdict, else ``target`` ``A`` and ``choice`` ``A``
(correct) or ``B`` (wrong), with the logged gold answer in ``reference`` and the logged answer in ``answer_text``.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from omnieval.core.schema import LABELS, PREDICTION_SCHEMA, InputError, conform
from omnieval.imports.base import ImportedRow

PROTOCOL, CONDITION, PROMPT = "spectrum", "normal", "imported"
"""Imported rows are plain multiple-choice answers: protocol ``spectrum``'s ``normal`` condition (every modality
the item's own) gives accuracy per model and task with every statistic; ``prompt`` says the prompt style is the
tool's, not one of omnieval's."""
SAMPLE_COLUMN = "sample"
"""Which repeat of its item a row is (0 for one sample)."""
IMPORT_RECORD, UNPAIRED_FILE, PREDICTIONS_FILE = "import.json", "unpaired_items.csv", "predictions.parquet"
OUTPUT_SCHEMA = PREDICTION_SCHEMA  # its ``sample`` column tells the repeats apart


@dataclass
class ImportSummary:
    """What an import did, for the one summary line and ``import.json``."""

    out: Path
    rows: int = 0
    models: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    duplicates: int = 0
    reruns: int = 0
    repeats: int = 0
    unpaired: int = 0
    filters: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        unpaired = (f", {self.unpaired} items not in every model (listed in {self.out / UNPAIRED_FILE})"
                    if self.unpaired else "")
        return (f"imported {_count(self.rows, 'row')} ({_count(len(self.models), 'model')}, "
                f"{_count(len(self.tasks), 'task')}) into "
                f"{self.out / PREDICTIONS_FILE}: {self.duplicates} duplicates collapsed, {self.reruns} reruns "
                f"(newest kept), {self.repeats} repeats{unpaired}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _key(row: ImportedRow) -> tuple:
    return row.model, row.task, row.sample_id, row.repeat, row.filter


def _content(row: ImportedRow) -> tuple:
    """What two records of one key must share to be the same record (where and when it was read aside)."""
    return row.correct, row.choice, row.target, row.text, row.cluster


def dedupe(rows: Iterable[ImportedRow]) -> tuple[list[ImportedRow], int, int]:
    """One record per key (model, task, sample, repeat, filter), with the counts of duplicates collapsed and
    reruns replaced (module docstring)."""
    kept: dict[tuple, ImportedRow] = {}
    duplicates = reruns = 0
    for row in rows:
        key = _key(row)
        old = kept.get(key)
        if old is None:
            kept[key] = row
        elif old.written is not None and row.written is not None and old.written != row.written:
            reruns += 1
            kept[key] = row if row.written > old.written else old
        elif _content(old) == _content(row):
            duplicates += 1
        else:
            raise InputError(f"{old.source} and {row.source} log different results for model {row.model!r}, task "
                             f"{row.task!r}, sample {row.sample_id!r}, repeat {row.repeat}"
                             f"{f', filter {row.filter!r}' if row.filter else ''} and nothing says which is newer; "
                             "import one of them", file=row.source.rsplit(":", 1)[0], item=row.sample_id,
                             field="correct")
    return list(kept.values()), duplicates, reruns


def choose_filters(rows: list[ImportedRow], wanted: str | None) -> tuple[list[ImportedRow], dict[str, str]]:
    """The rows of one filter per task: the task's only filter, or ``wanted`` where a task has several (refused,
    listing them, when ``wanted`` is missing or not among them)."""
    by_task: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        by_task[row.task].add(row.filter)
    chosen = {}
    for task, filters in sorted(by_task.items()):
        if len(filters) == 1:
            chosen[task] = next(iter(filters))
            continue
        listed = ", ".join(repr(f) for f in sorted(filters))
        if wanted is None:
            raise InputError(f"task {task!r} is scored under several filters ({listed}); choose one with --filter",
                             item=task, field="filter")
        if wanted not in filters:
            raise InputError(f"task {task!r} has no filter {wanted!r}; its filters: {listed}", item=task,
                             field="filter")
        chosen[task] = wanted
    return [row for row in rows if row.filter == chosen[row.task]], chosen


def item_clusters(rows: list[ImportedRow]) -> dict[tuple[str, str], str | None]:
    """Each item's (task, sample) cluster: the one value its rows give (None where none gives one); two values are
    refused naming both sources, as a unit must hold whole items."""
    clusters: dict[tuple[str, str], ImportedRow] = {}
    for row in rows:
        if row.cluster is None:
            continue
        item = (row.task, row.sample_id)
        other = clusters.setdefault(item, row)
        if other.cluster != row.cluster:
            raise InputError(f"sample {row.sample_id!r} of task {row.task!r} is in cluster {other.cluster!r} in "
                             f"{other.source} but {row.cluster!r} in {row.source}", file=row.source.rsplit(":", 1)[0],
                             item=row.sample_id, field="cluster")
    return {item: row.cluster for item, row in clusters.items()}


def unpaired_items(rows: list[ImportedRow]) -> list[dict]:
    """The items (task, sample) that some models lack, with the models that have them: empty for one model."""
    models = sorted({row.model for row in rows})
    have: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        have[(row.task, row.sample_id)].add(row.model)
    return [{"task": task, "sample_id": sample, "models": ";".join(sorted(present)),
             "missing": ";".join(m for m in models if m not in present)}
            for (task, sample), present in sorted(have.items()) if len(present) < len(models)]


def verdict_fields(rows: list[ImportedRow]) -> dict[str, list[str]]:
    """Per task, the logged fields the verdicts were read from (a reader names its field in ``extra['metric']``)."""
    fields: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.extra.get("metric"):
            fields[row.task].add(str(row.extra["metric"]))
    return {task: sorted(names) for task, names in sorted(fields.items())}


def _labels(row: ImportedRow) -> tuple[str, str]:
    """``(target, choice)`` whose equality is the tool's verdict (module docstring)."""
    logged = row.target, row.choice
    if all(isinstance(v, str) and len(v) == 1 and v in LABELS for v in logged) and (logged[0] == logged[1]) == \
            row.correct:
        return logged
    return "A", ("A" if row.correct else "B")


def _as_text(value) -> str | None:
    return None if value is None else str(value)


def prediction_table(rows: list[ImportedRow], fmt: str) -> pa.Table:
    """The rows as ``OUTPUT_SCHEMA``: one row per (model, task, sample, repeat), in a stable order."""
    clusters = item_clusters(rows)
    rows = sorted(rows, key=lambda r: (r.model, r.task, r.sample_id, r.repeat))
    columns: dict[str, list] = defaultdict(list)
    for row in rows:
        target, choice = _labels(row)
        item_id = f"{row.task}/{row.sample_id}"
        logged_choice = row.choice if (target, choice) != (row.target, row.choice) else None
        values = {"model": row.model, "prompt": PROMPT, "protocol": PROTOCOL, "condition": CONDITION,
                  "split": row.task, "task": row.task, "item_id": item_id, "instance_id": f"{item_id}|{row.repeat}",
                  "target": target, "choice": choice, "raw_text": row.text, "engine": fmt,
                  "reference": _as_text(row.target), "answer_text": _as_text(logged_choice),
                  "media_unit": clusters.get((row.task, row.sample_id)), SAMPLE_COLUMN: row.repeat}
        for name, value in values.items():
            columns[name].append(value)
    table = pa.table({name: pa.array(values, type=OUTPUT_SCHEMA.field(name).type)
                      for name, values in columns.items()})
    return conform(table, OUTPUT_SCHEMA)


def _check_out(out: Path) -> None:
    """``out`` may be new, empty, or an earlier import's folder (replaced); a run's folder or any other file is
    never overwritten."""
    if out.exists() and not out.is_dir():
        raise InputError("--out names a file, not a folder", file=out)
    if (out / PREDICTIONS_FILE).exists() and not (out / IMPORT_RECORD).is_file():
        raise InputError(f"the folder holds a {PREDICTIONS_FILE} that no import wrote (a run's?); choose another "
                         "--out", file=out)


def _write_atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    os.replace(tmp, path)


def write_import(rows: Iterable[ImportedRow], out: str | Path, *, fmt: str, inputs: Sequence[str | Path] = (),
                 filter: str | None = None) -> ImportSummary:
    """Dedupe, choose filters, join and write ``out/predictions.parquet``, ``out/import.json`` and (where models
    differ in their items) ``out/unpaired_items.csv``; the summary of what was done."""
    out = Path(out)
    _check_out(out)
    earlier_import = (out / IMPORT_RECORD).is_file()
    kept, duplicates, reruns = dedupe(rows)
    if not kept:
        raise InputError("no scored samples found in the files given", file=", ".join(map(str, inputs)) or None)
    kept, filters = choose_filters(kept, filter)
    table = prediction_table(kept, fmt)
    unpaired = unpaired_items(kept)
    summary = ImportSummary(out=out, rows=len(kept), models=sorted({r.model for r in kept}),
                            tasks=sorted({r.task for r in kept}), duplicates=duplicates, reruns=reruns,
                            repeats=len(kept) - len({(r.model, r.task, r.sample_id) for r in kept}),
                            unpaired=len(unpaired), filters={t: f for t, f in filters.items() if f})
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(out / PREDICTIONS_FILE, lambda p: pq.write_table(table, p))
    unpaired_path = out / UNPAIRED_FILE
    if unpaired:
        _write_atomic(unpaired_path, lambda p: pa_csv.write_csv(pa.Table.from_pylist(unpaired), p))
    elif earlier_import and unpaired_path.exists():  # an earlier import's list, no longer true
        unpaired_path.unlink()
    record = {"format": fmt, "inputs": [str(p) for p in inputs], "rows": summary.rows, "models": summary.models,
              "tasks": summary.tasks, "duplicates": duplicates, "reruns": reruns, "repeats": summary.repeats,
              "unpaired_items": summary.unpaired, "filters": summary.filters, "verdicts": verdict_fields(kept)}
    _write_atomic(out / IMPORT_RECORD, lambda p: p.write_text(json.dumps(record, indent=2) + "\n"))
    return summary
