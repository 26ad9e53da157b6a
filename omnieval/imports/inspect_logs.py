"""inspect-ai's logs as imported records (``omnieval import inspect``); named so as not to shadow ``inspect``.

inspect writes one log per task run (``inspect_ai/log/_log.py``, ``EvalLog``), in one of two formats:

- ``.json``: the whole ``EvalLog``: ``eval`` (the spec: ``task``, ``model``, ``created``), ``results`` (the
  aggregate scores) and ``samples``, one per sample and epoch.
- ``.eval`` (``inspect_ai/log/_recorders/eval.py``): a zip with ``header.json`` (the log without its samples;
  ``_journal/start.json`` holds the spec while a run is unfinished) and one member ``samples/<id>_epoch_<n>.json``
  per sample and epoch. Its members are zstd-compressed (zip method 93), which the standard library's ``zipfile``
  cannot read before Python 3.14: they are decompressed with pyarrow's zstd codec, a library the project already
  has, and checked against the zip's CRC.

A sample's verdict is its score's ``value`` as inspect's scorers write it: ``"C"`` (correct) and ``"I"``
(incorrect) for ``choice()``, ``match()`` and the like (these are verdicts, not answer letters), ``"N"`` (no
answer, counted wrong as inspect's own ``accuracy`` does), booleans, or the numbers 1 and 0. Partial credit
(``"P"``, or any other number) is refused: a binary verdict cannot hold it. A sample scored by several scorers gives
one record per scorer, the scorer's name as its ``filter``; with one scorer the filter is empty. The option chosen is
the score's ``answer`` where the sample has ``choices`` and the answer is one letter; the repeat is the epoch less
one (0 for a single-epoch run). A sample that failed (an ``error`` and no score) is left out, as inspect's own
``results`` leave it out; ``inspect eval-retry`` writes a later log in which it is scored.

The cluster is ``--cluster-field`` from the sample's ``metadata``, else the first of :data:`CLUSTER_FIELDS` it has,
else the sample is its own unit. ``written`` is the log's ``eval.created``, so a
``.eval`` and its ``.json`` conversion give identical records, and a retried run (a later log) wins over its first.
"""

from __future__ import annotations

import datetime
import json
import struct
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from omnieval.core.schema import InputError
from omnieval.imports.base import ImportedRow, ImportOptions, register_format

CLUSTER_FIELDS = ("video_id", "video", "audio_id", "audio", "document_id", "doc_id")
"""Sample metadata keys read as the clustering unit, in this order, where ``--cluster-field`` names none."""
CORRECT, INCORRECT, PARTIAL, NOANSWER = "C", "I", "P", "N"  # inspect_ai.scorer._metric's values
ZIP_ZSTD = 93  # the zip compression method number of zstd (APPNOTE 4.4.5)
LOCAL_HEADER = struct.Struct("<4s22xHH")  # a zip member's local header: signature, ..., name and extra lengths
NOT_LOGS = {"logs.json", "listing.json"}  # index files inspect may keep beside the logs of a folder


@register_format("inspect")
def read(paths: Sequence[Path], options: ImportOptions) -> Iterator[ImportedRow]:
    """One record per sample, epoch and scorer of every log among ``paths`` (files or folders of logs)."""
    for path in _log_files(paths):
        spec, samples = _read_eval(path) if path.suffix == ".eval" else _read_json(path)
        yield from _records(path, spec, samples, options)


def _log_files(paths: Sequence[Path]) -> list[Path]:
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            logs = sorted(p for p in path.rglob("*") if p.suffix in (".eval", ".json") and p.name not in NOT_LOGS)
            if not logs:
                raise InputError("no inspect log (.eval or .json) in this folder", file=path)
            found.extend(logs)
        elif path.is_file():
            if path.suffix not in (".eval", ".json"):
                raise InputError("not an inspect log: expected a .eval or .json file", file=path)
            found.append(path)
        else:
            raise InputError("no such file or folder", file=path)
    return found


def _read_json(path: Path) -> tuple[dict, Iterator[tuple[str, dict]]]:
    log = _parse(path, "", path.read_bytes())
    spec = _spec(path, log)
    samples = log.get("samples") or []
    if not isinstance(samples, list):
        raise InputError("samples is not a list", file=path, field="samples")
    return spec, ((f"samples[{i}]", sample) for i, sample in enumerate(samples))


def _read_eval(path: Path) -> tuple[dict, Iterator[tuple[str, dict]]]:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"not a readable .eval zip: {exc}", file=path) from exc
    members = {info.filename: info for info in archive.infolist()}
    archive.close()
    head = next((name for name in ("header.json", "_journal/start.json") if name in members), None)
    if head is None:
        raise InputError("neither header.json nor _journal/start.json in the .eval zip", file=path)
    spec = _spec(path, _parse(path, head, _member(path, members[head])))
    names = sorted(name for name in members if name.startswith("samples/") and name.endswith(".json"))
    return spec, ((name, _parse(path, name, _member(path, members[name]))) for name in names)


def _member(path: Path, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes: stored, deflated, or zstd (read raw from the file and decompressed by pyarrow)."""
    if info.compress_type != ZIP_ZSTD:
        with zipfile.ZipFile(path) as archive:
            return archive.read(info)
    import pyarrow as pa

    with path.open("rb") as handle:
        handle.seek(info.header_offset)
        signature, name_length, extra_length = LOCAL_HEADER.unpack(handle.read(LOCAL_HEADER.size))
        if signature != b"PK\x03\x04":
            raise InputError("broken zip member header", file=path, item=info.filename)
        handle.seek(name_length + extra_length, 1)
        raw = handle.read(info.compress_size)
    try:
        data = pa.decompress(raw, decompressed_size=info.file_size, codec="zstd").to_pybytes()
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot decompress the zstd member: {exc}", file=path, item=info.filename) from exc
    if zlib.crc32(data) != info.CRC:
        raise InputError("the member's CRC does not match its contents", file=path, item=info.filename)
    return data


def _parse(path: Path, member: str, data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:
        raise InputError(f"not JSON: {exc}", file=path, item=member or None) from exc


def _spec(path: Path, log: Any) -> dict:
    spec = log.get("eval") if isinstance(log, dict) else None
    if not isinstance(spec, dict):
        raise InputError("no 'eval' object: not an inspect log", file=path, field="eval")
    for key in ("task", "model"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise InputError(f"eval.{key} missing or not a string", file=path, field=f"eval.{key}")
    return spec


def _written(path: Path, spec: dict) -> float | None:
    created = spec.get("created")
    if created is None:
        return None
    try:
        return datetime.datetime.fromisoformat(created).timestamp()
    except (TypeError, ValueError):
        raise InputError(f"eval.created {created!r} is not an ISO time", file=path, field="eval.created") from None


def _records(path: Path, spec: dict, samples: Iterator[tuple[str, dict]],
             options: ImportOptions) -> Iterator[ImportedRow]:
    model, task, written = options.model or spec["model"], spec["task"], _written(path, spec)
    for where, sample in samples:
        item = f"{where} (id {sample.get('id')!r}, epoch {sample.get('epoch')!r})" if isinstance(sample, dict) \
            else where
        if not isinstance(sample, dict) or sample.get("id") is None:
            raise InputError("sample without an id", file=path, item=item, field="id")
        scores = sample.get("scores")
        if not scores and sample.get("error"):
            continue  # the sample failed, unscored: inspect's own results leave it out; its retry log has it
        if not isinstance(scores, dict) or not scores:
            raise InputError("sample has no score", file=path, item=item, field="scores")
        epoch = sample.get("epoch", 1)
        if not isinstance(epoch, int) or epoch < 1:
            raise InputError(f"epoch {epoch!r} is not a positive integer", file=path, item=item, field="epoch")
        shared = dict(model=model, task=task, sample_id=str(sample["id"]), repeat=epoch - 1,
                      target=_target(sample.get("target")), text=_completion(sample.get("output")),
                      cluster=_cluster(path, item, sample.get("metadata"), options.cluster_field),
                      written=written, source=f"{path}#{where}")
        for scorer, score in scores.items():
            yield ImportedRow(**shared, filter=scorer if len(scores) > 1 else "",
                              correct=_verdict(path, item, scorer, score),
                              choice=_choice(sample, score))


def _verdict(path: Path, item: str, scorer: str, score: Any) -> bool:
    field = f"scores.{scorer}.value"
    value = score.get("value") if isinstance(score, dict) else None
    if isinstance(value, bool):
        return value
    if value in (CORRECT, INCORRECT, NOANSWER):
        return value == CORRECT
    if value == PARTIAL:
        raise InputError("partial credit ('P') is not a correct/incorrect verdict", file=path, item=item, field=field)
    if isinstance(value, int | float) and value in (0, 1):
        return value == 1
    raise InputError(f"score value {value!r} is not a verdict (C/I/N, true/false, 1/0)", file=path, item=item,
                     field=field)


def _choice(sample: dict, score: Any) -> str | None:
    """The option letter the scorer read, for a multiple-choice sample answered with one letter."""
    answer = score.get("answer") if isinstance(score, dict) else None
    if sample.get("choices") and isinstance(answer, str) and len(answer) == 1 and answer.isascii() \
            and answer.isupper():
        return answer
    return None


def _target(target: Any) -> str | None:
    if isinstance(target, list):
        return ", ".join(map(str, target))
    return None if target is None else str(target)


def _completion(output: Any) -> str | None:
    completion = output.get("completion") if isinstance(output, dict) else None
    return completion if isinstance(completion, str) else None


def _cluster(path: Path, item: str, metadata: Any, field: str | None) -> str | None:
    metadata = metadata if isinstance(metadata, dict) else {}
    if field is not None:
        if metadata.get(field) in (None, ""):
            raise InputError("sample metadata lacks the cluster field", file=path, item=item,
                             field=f"metadata.{field}")
        return str(metadata[field])
    return next((str(metadata[key]) for key in CLUSTER_FIELDS if metadata.get(key) not in (None, "")), None)
