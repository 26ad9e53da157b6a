"""``omnieval import lm-eval``: the per-sample logs of lm-eval 0.4 (``lm_eval --log_samples --output_path OUT``).

Its evaluation tracker (``lm_eval/loggers/evaluation_tracker.py``) writes, under ``OUT/<model name, sanitized>/``,
one ``samples_<task>_<timestamp>.jsonl`` per task and one ``results_<timestamp>.json`` per run, the timestamp being
the run's start (``2026-12-02T05-10-11.123456``). Each line is one document under one filter (the evaluator logs
``doc_id``, ``doc``, ``target``, ``filtered_resps``, ``filter``, ``metrics``: the names of the metrics computed, and
each metric's value). What is read:

* the verdict: the first of ``VERDICT_METRICS`` the line's ``metrics`` names, which must be 0 or 1 (a line with
  none of them, e.g. only ``f1`` or ``bleu``, is refused naming its metrics);
* the filter (``filter``: ``none``, ``strict-match``, ...): one line per filter; the writer keeps one per task;
* the option chosen and the right one as labels where the task scores options by log-likelihood
  (``filtered_resps`` one ``[loglikelihood, is_greedy]`` per option, ``target`` an index), the generated text
  otherwise;
* the model: ``--model``, else the results file of the same run (``model_name``, ``config.model_args``,
  ``config.model``), else the model folder's name;
* the cluster: the ``doc`` field named by ``--cluster-field`` (lm-eval's tasks are text: none by default).

lm-eval logs one line per document even with ``repeats`` (its filters reduce the repeated answers to one), so every
line is repeat 0; a rerun writes new files with a later timestamp, and the writer keeps the newest line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from omnieval.core.schema import LABELS
from omnieval.imports.base import ImportedRow, ImportOptions, register_format
from omnieval.imports.harness_logs import (
    Layout,
    Record,
    option_labels,
    records,
    sample_id,
    samples_files,
    text_of,
    verdict,
)

FORMAT = "lm-eval"
STAMP = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
LAYOUT = Layout(FORMAT, "samples_*.jsonl", re.compile(rf"samples_(?P<task>.+)_(?P<stamp>{STAMP})\.jsonl"),
                lambda stamp: f"results_{stamp}.json", ("%Y-%m-%dT%H-%M-%S.%f", "%Y-%m-%dT%H-%M-%S"))
VERDICT_METRICS = ("acc", "exact_match", "acc_norm")
"""Per-sample metrics that are a verdict (0 or 1), in the order one is taken when a line has several."""


def _metric(record: Record) -> str:
    named = record.data.get("metrics")
    names = named if isinstance(named, list) else [k for k in VERDICT_METRICS if k in record.data]
    for metric in VERDICT_METRICS:
        if metric in names:
            return metric
    raise record.error(f"no per-sample verdict among its metrics {names}; importable: "
                       f"{', '.join(VERDICT_METRICS)}", field="metrics")


def _cluster(record: Record, field: str | None) -> str | None:
    if field is None:
        return None
    doc = record.data.get("doc")
    value = doc.get(field) if isinstance(doc, dict) else None
    if value is None or value == "":
        raise record.error(f"doc has no {field!r} (--cluster-field)", field=f"doc.{field}")
    return str(value)


def _row(record: Record, task: str, model: str, written: float | None, options: ImportOptions) -> ImportedRow:
    metric = _metric(record)
    choice, target = option_labels(record, LABELS)
    filter_name = record.data.get("filter")
    return ImportedRow(
        model=model, task=task, sample_id=sample_id(record), correct=verdict(record, metric), source=record.source,
        filter=filter_name if isinstance(filter_name, str) else "", choice=choice,
        target=target if target is not None else (None if record.data.get("target") is None
                                                  else str(record.data["target"])),
        text=None if choice else text_of(record.data.get("filtered_resps")),
        cluster=_cluster(record, options.cluster_field), written=written, extra={"metric": metric})


@register_format(FORMAT)
def read_lm_eval(paths: Sequence[Path], options: ImportOptions) -> Iterator[ImportedRow]:
    """Every line of every ``samples_<task>_<timestamp>.jsonl`` among ``paths`` (files, or folders searched)."""
    for file in samples_files(paths, options, LAYOUT):
        for record in records(file.path):
            yield _row(record, file.task, file.model, file.written, options)
