"""``omnieval import lmms-eval``: the per-sample logs of lmms-eval (``lmms-eval --log_samples --output_path OUT``).

Its evaluation tracker (``lmms_eval/loggers/evaluation_tracker.py``) writes, under ``OUT/<model name, sanitized>/``,
one ``<timestamp>_samples_<task>.jsonl`` per task and one ``<timestamp>_results.json`` per run, the timestamp
being the run's start as ``YYYYMMDD_HHMMSS``. Before a line is written the tracker drops the document (``doc``) and
the request arguments, so a line holds ``doc_id``, ``target``, ``filtered_resps`` (and ``resps``), hashes, and the
value of each metric the task's ``process_results`` returned: a number, or an object a task fills with what its
aggregation needs (Video-MME's ``videomme_perception_score``: ``question_id``, ``duration``, ``category``,
``pred_answer``, ``answer``, ...). What is read:

* the sample id: ``doc_id`` (the document's index in the task's split, the same for every model; ``doc_hash`` is
  not an id: two documents with the same text share it);
* the verdict, from the first metric field (in the line's order) of one of these kinds, and the field says which:
  an object holding ``pred_answer`` and ``answer`` (correct where they are equal, the rule of the Video-MME family's
  own aggregation; both kept as the choice and target), or a number 0 or 1 under ``exact_match``, ``acc`` or
  ``accuracy``. A line with neither is refused, naming its metric fields;
* the cluster: ``--cluster-field``, else the first of ``CLUSTER_FIELDS`` found, looked up in the line, then in its
  metric objects (a task returns its document's video id only if its ``process_results`` puts it there); without
  one, each sample is its own unit;
* the model: ``--model``, else the run's results file (``model_name``, ``config.model_args``), else the folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from omnieval.imports.base import ImportedRow, ImportOptions, register_format
from omnieval.imports.harness_logs import (
    Layout,
    Record,
    records,
    sample_id,
    samples_files,
    text_of,
    verdict,
)

FORMAT = "lmms-eval"
LAYOUT = Layout(FORMAT, "*_samples_*.jsonl", re.compile(r"(?P<stamp>\d{8}_\d{6})_samples_(?P<task>.+)\.jsonl"),
                lambda stamp: f"{stamp}_results.json", ("%Y%m%d_%H%M%S",))
LOGGED_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "doc_hash",
                           "prompt_hash", "target_hash", "input", "filter", "metrics", "token_counts"})
"""Fields of a line that are not a metric's value."""
NUMERIC_VERDICTS = ("exact_match", "acc", "accuracy")
ANSWER_PAIR = ("pred_answer", "answer")
CLUSTER_FIELDS = ("video_id", "videoID", "video", "audio_id", "audio")
"""Document fields that name the medium several questions share, tried in order."""


def _metric_fields(record: Record) -> list[str]:
    return [key for key in record.data if key not in LOGGED_FIELDS]


def _verdict(record: Record) -> tuple[bool, str | None, str | None, str]:
    """(correct, choice, target, the field it came from) from the first metric field of a supported kind."""
    for field in _metric_fields(record):
        value = record.data[field]
        if isinstance(value, dict) and all(key in value for key in ANSWER_PAIR):
            choice, target = (None if value[k] is None else str(value[k]).strip() for k in ANSWER_PAIR)
            if target is None:
                raise record.error(f"{field}.answer is null", field=f"{field}.answer")
            return choice == target, choice, target, field
        if field in NUMERIC_VERDICTS:
            return verdict(record, field), None, None, field
    raise record.error(f"no per-sample verdict among its metric fields {_metric_fields(record)}; importable: an "
                       f"object with {' and '.join(ANSWER_PAIR)}, or 0/1 under {', '.join(NUMERIC_VERDICTS)}",
                       field="metrics")


def _cluster(record: Record, wanted: str | None) -> str | None:
    """The value of the cluster field in the line or its metric objects (``--cluster-field``: required there)."""
    places = [record.data] + [v for v in record.data.values() if isinstance(v, dict)]
    for field in (wanted,) if wanted else CLUSTER_FIELDS:
        for place in places:
            value = place.get(field)
            if value is not None and value != "" and not isinstance(value, (dict, list)):
                return str(value)
    if wanted:
        raise record.error(f"no {wanted!r} in the line or its metric objects (--cluster-field)", field=wanted)
    return None


@register_format(FORMAT)
def read_lmms_eval(paths: Sequence[Path], options: ImportOptions) -> Iterator[ImportedRow]:
    """Every line of every ``<timestamp>_samples_<task>.jsonl`` among ``paths`` (files, or folders searched)."""
    for file in samples_files(paths, options, LAYOUT):
        for record in records(file.path):
            correct, choice, target, field = _verdict(record)
            filter_name = record.data.get("filter")
            if target is None and record.data.get("target") is not None:
                target = str(record.data["target"])
            yield ImportedRow(
                model=file.model, task=file.task, sample_id=sample_id(record), correct=correct, source=record.source,
                filter=filter_name if isinstance(filter_name, str) else "", choice=choice, target=target,
                text=text_of(record.data.get("filtered_resps")), cluster=_cluster(record, options.cluster_field),
                written=file.written, extra={"metric": field})
