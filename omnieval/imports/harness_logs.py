"""What lm-eval and lmms-eval logs share (lmms-eval began as a fork of lm-eval's harness and writes the same way):
a folder per model, per-sample JSON Lines files per task and a results JSON per run, both named with the run's
timestamp; each sample a JSON object with ``doc_id`` and one field per metric the task computed.

The readers (``lm_eval``, ``lmms_eval``) say how each tool names its files and scores; this module reads lines,
pairs a samples file with the results file of its run, names the model and turns a logged metric into a verdict,
each failure an ``InputError`` naming the file, the record and the field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.imports.base import ImportOptions, files_under

MODEL_ARG_KEYS = ("peft", "delta", "pretrained", "model", "model_version", "model_name", "model_id", "path",
                  "engine")
"""The ``model_args`` keys that name a model, in the order both harnesses' trackers look for one."""


@dataclass(frozen=True)
class Record:
    """One logged sample: its object, the file and the line it is on."""

    data: dict
    file: Path
    line: int

    @property
    def where(self) -> str:
        return f"line {self.line}"

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"

    def error(self, message: str, field: str | None = None) -> InputError:
        return InputError(f"{self.where}: {message}", file=self.file, item=self.where, field=field)


def records(path: Path) -> Iterator[Record]:
    """The JSON objects of a JSON Lines file, blank lines skipped; a line that is not an object is refused."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the samples file: {exc}", file=path) from None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {number}: not JSON ({exc.msg})", file=path, item=f"line {number}") from None
        if not isinstance(data, dict):
            raise InputError(f"line {number}: a {type(data).__name__}, not a sample object", file=path,
                             item=f"line {number}")
        yield Record(data, path, number)


def read_results(path: Path) -> dict:
    """A results JSON file as an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the results file: {exc}", file=path) from None
    if not isinstance(data, dict):
        raise InputError("the results file is not a JSON object", file=path)
    return data


def model_from_results(results: dict) -> str | None:
    """The model a results file names: ``model_name``, else the first name-giving key of ``config.model_args``
    (``pretrained=...``), else ``config.model`` (the model type, e.g. ``dummy``)."""
    name = results.get("model_name")
    if isinstance(name, str) and name:
        return name
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    args = config.get("model_args")
    if isinstance(args, str):
        pairs = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
        for key in MODEL_ARG_KEYS:
            if pairs.get(key):
                return pairs[key]
    elif isinstance(args, dict):
        for key in MODEL_ARG_KEYS:
            if isinstance(args.get(key), str) and args[key]:
                return args[key]
    model = config.get("model")
    return model if isinstance(model, str) and model else None


@dataclass(frozen=True)
class SamplesFile:
    """One task's samples file of one run: the task and run timestamp its name holds, the model it is of."""

    path: Path
    task: str
    model: str
    written: float | None


@dataclass(frozen=True)
class Layout:
    """How a harness names its files: the samples files' glob and pattern (groups ``task`` and ``stamp``), the
    results file of a run's timestamp, the timestamp's formats (``strptime``)."""

    tool: str
    glob: str
    samples: re.Pattern
    results: Callable[[str], str]
    stamp_formats: tuple[str, ...]


def samples_files(paths: Sequence[Path], options: ImportOptions, layout: Layout) -> list[SamplesFile]:
    """Every samples file among ``paths``, with its model: ``--model``, else the results file of the same run,
    else the folder's name. ``--model`` renames one model: files of several are refused, as renaming them all
    would merge different models' answers into one."""
    found = []
    for path in files_under(paths, [layout.glob]):
        match = layout.samples.fullmatch(path.name)
        if match is None:
            raise InputError(f"not a {layout.tool} samples file ({layout.samples.pattern})", file=path)
        results = path.parent / layout.results(match["stamp"])
        model = (model_from_results(read_results(results)) if results.is_file() else None) or path.parent.name
        found.append(SamplesFile(path, match["task"], model, timestamp(match["stamp"], layout.stamp_formats)))
    own = sorted({f.model for f in found})
    if options.model is None:
        return found
    if len(own) > 1:
        raise InputError(f"--model {options.model!r} names one model, but the files are of {len(own)}: "
                         f"{', '.join(own)}; import each model's files on their own to rename them", field="--model")
    return [replace(f, model=options.model) for f in found]


def timestamp(text: str, formats: tuple[str, ...]) -> float | None:
    """Seconds since the epoch of a file-name timestamp in one of ``formats`` (``strptime``), else None."""
    for fmt in formats:
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return None


def verdict(record: Record, field: str) -> bool:
    """A per-sample metric as a verdict: 0 or 1 (a boolean, an integer or a float such as ``1.0``). Any other value
    (a partial score, a text) is refused, naming the field: read as right or wrong it would be a silent guess."""
    value = record.data.get(field)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)) and value in (0, 1):
        return bool(value)
    raise record.error(f"{field} is {value!r}, not 0 or 1: only per-sample verdicts can be imported", field=field)


def sample_id(record: Record) -> str:
    """The sample's ``doc_id`` as text (the document's index in the task's split: the same in every model's log of
    the task; ``doc_hash`` is a hash of the document's text, equal for two documents with equal text, so not an
    id)."""
    value = record.data.get("doc_id")
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        raise record.error(f"doc_id is {value!r}, not a document index", field="doc_id")
    return str(value)


def text_of(value) -> str | None:
    """A logged response as one text: the first string inside nested lists (the harnesses log ``[[text]]``)."""
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, str) else None


def option_labels(record: Record, labels: str) -> tuple[str | None, str | None]:
    """For a multiple-choice sample scored by log-likelihood (``filtered_resps`` one ``[loglikelihood, is_greedy]``
    per option, ``target`` the index of the right option): the chosen option's label (the highest log-likelihood,
    as the harness's ``acc``) and the target's; (None, None) for any other layout."""
    resps = record.data.get("filtered_resps")
    target = record.data.get("target")
    if not isinstance(resps, list) or not resps or len(resps) > len(labels):
        return None, None
    scores = []
    for option in resps:  # the trackers write the numbers as text ("-0.03"), older versions as numbers
        if not (isinstance(option, list) and len(option) == 2):
            return None, None
        try:
            scores.append(float(option[0]))
        except (TypeError, ValueError):
            return None, None
    index = int(target) if isinstance(target, int) or (isinstance(target, str) and target.isdigit()) else None
    if index is None or not 0 <= index < len(scores):
        return None, None
    return labels[scores.index(max(scores))], labels[index]
