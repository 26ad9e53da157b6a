"""The record every format reader produces, and the registry of readers.

A reader is a function ``read(paths, options) -> Iterator[ImportedRow]``: it reads the files a tool wrote exactly as
that tool's writer lays them out, yields one record per (model, task, sample, repeat, filter) it finds, and raises
``core.schema.InputError`` naming the file, the record and the field for anything it cannot read. It never dedupes
or joins: the shared writer does that once for every format, so the rules are the same whatever wrote the files.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ImportOptions:
    """What the user may say on the command line: the model name to use instead of the files' own (``--model``),
    the document field that names the clustering unit (``--cluster-field``, e.g. a video id)."""

    model: str | None = None
    cluster_field: str | None = None


@dataclass(frozen=True)
class ImportedRow:
    """One scored sample as a tool logged it.

    ``model``, ``task`` (the tool's task or benchmark name) and ``sample_id`` (the tool's own id for the sample,
    stable across models, so two models' files join on it) identify it; ``repeat`` tells repeated samples of one item
    apart (inspect epochs, lm-eval repeats; 0 for one sample) and ``filter`` the tool's answer-extraction variants
    (lm-eval filters; "" where the tool has none). ``correct`` is the tool's verdict; ``choice`` the option the log
    names where it has one (a label such as ``B``), ``target`` the gold answer as logged, ``text`` the model's reply;
    ``cluster`` the unit several samples share (a video, audio or document id) where the log carries one, else None
    (the sample is its own unit). ``source`` is where the record was read (``file:line`` or ``file#record``), for
    error messages and the dedupe report; ``written`` orders reruns of one sample (a timestamp or the file's
    modification time: the newest wins where a tool reran a sample).
    """

    model: str
    task: str
    sample_id: str
    correct: bool
    source: str
    repeat: int = 0
    filter: str = ""
    choice: str | None = None
    target: str | None = None
    text: str | None = None
    cluster: str | None = None
    written: float | None = None
    extra: dict = field(default_factory=dict)


Reader = Callable[[Sequence[Path], ImportOptions], Iterator[ImportedRow]]

_REGISTRY: dict[str, Reader] = {}
# Modules that register a reader on import.
_MODULES: tuple[str, ...] = ("omnieval.imports.lm_eval", "omnieval.imports.lmms_eval", "omnieval.imports.inspect_logs",
                             "omnieval.imports.vlmevalkit")


def register_format(name: str) -> Callable[[Reader], Reader]:
    """Function decorator: ``@register_format("lm-eval")`` makes ``get_format("lm-eval")`` return the reader."""

    def wrap(reader: Reader) -> Reader:
        if name in _REGISTRY:
            raise ValueError(f"import format {name!r} registered twice")
        _REGISTRY[name] = reader
        return reader

    return wrap


def _load_all() -> None:
    for module in _MODULES:
        importlib.import_module(module)


def files_under(paths: Sequence[Path], patterns: Sequence[str]) -> list[Path]:
    """The files a reader reads: each path that is a file, and under each folder (recursively) the files whose name
    matches one of ``patterns`` (``fnmatch`` globs such as ``samples_*.jsonl``), sorted, each once (a file given
    twice, or given and found in a folder, is read once). A path that does not exist is an ``InputError``."""
    from omnieval.core.schema import InputError

    found: dict[Path, None] = {}
    for path in map(Path, paths):
        if path.is_file():
            found.setdefault(path, None)
        elif path.is_dir():
            for pattern in patterns:
                for match in sorted(path.rglob(pattern)):
                    if match.is_file():
                        found.setdefault(match, None)
        else:
            raise InputError("no such file or folder", file=path)
    return list(found)


def format_names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get_format(name: str) -> Reader:
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(f"unknown import format {name!r}; known formats: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]
