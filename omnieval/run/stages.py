"""The Ray Data operators every model call goes through: decode media once, call one model, drain into parts.

A run's answers, open answers, judge verdicts and media descriptions all take the same path:

    request rows -> ``prefetch_media`` (starts the decode of each distinct media file once, through the run's
                    ``MediaCache``, without waiting: decodes run ahead of the model)
                 -> ``ModelStage`` (the one seam: an actor pool of one model's engine; waits for its batch's
                    decodes; requests in, result columns out)
                    and, in the same actor, a ``RowBuilder`` (result columns -> prediction, judgement or
                    description rows)
                 -> ``drain`` on the driver (atomic Parquet parts: the resume log)

A request row (``records.REQUEST_FIELDS``: Arrow lists and structs, read once per batch) says what to ask with
``call``: ``score`` (multiple choice: ``instance`` + ``prompt``, the prompt style) or ``generate`` (free text:
``parts``, ``max_new_tokens``, ``key``, ``meta``, and for an open-ended answer its ``instance``, read once for
the request and the row), and which media it needs (``media_paths``: ``schema.media_ref`` of each, a path relative
to its benchmark or ``<path>#audio`` for a video file's soundtrack, as the engine looks them up). Where rows of
several runs
share one pipeline (``pipeline.evaluate_runs``: one model load for all of a model's runs), each row also carries
``media_scope`` (its run), and its media specs are looked up under ``media_key(scope, path)``, since two benchmarks
may both hold a ``media/0.mp4``. A generate row may carry ``retry`` (``suffix``, ``words``, ``key``): when the
reply is not one of ``words`` it is asked once more with ``suffix`` appended (the judges' strict-verdict retry),
inside the same actor, so a retry never loads the model twice. ``ModelCalls`` adds one result record per row
(``engines.base.EngineResult``, in ``RESULT_COLUMN``) and passes every other column through to the row builder.
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from omnieval.core.keyed import keyed_rng
from omnieval.core.schema import ENGINE_ERROR, MEDIA_ERROR, RESULT_COLUMN
from omnieval.engines.base import EngineResult
from omnieval.run.records import batch_columns, meta_dict, request_rows_table

if TYPE_CHECKING:  # the decode cache imports Ray; planning a run (and the GPU bench) must not need it
    from omnieval.run.decode_cache import MediaSource

INSTANCE_COLUMN = "_instance"
"""The ``Instance`` of a row with an ``instance`` record: a batch column inside the model actor only (handed to
the row builder there, never serialised into the stream)."""
MODEL_BATCH_FORMAT = "pyarrow"
"""The model stage takes its batches as Arrow tables and reads their columns once (``records.batch_columns``)."""
_RESULT_NAMES = tuple(f.name for f in fields(EngineResult))
FLUSH_ROWS = 256
FLUSH_SECONDS = 5.0
PACKED_COLUMN = "_packed_rows"
"""The column of a block of packed rows (``pack_rows``): each cell one batch's rows as a compressed Arrow stream."""
PACKED_SIZE_COLUMN = "_packed_size"
PACK_CODEC = "lz4"
REQUEST_CPUS = 0.25
"""A task of the maps that make request rows and start their decodes (``request_tasks``)."""


def media_key(scope: str | None, path: str) -> str:
    """Where a row's media file is found in ``MediaSource.specs``: the path itself, or under the row's
    ``media_scope`` where rows of several runs (each with paths relative to its own benchmark) share a pipeline."""
    return f"{scope}::{path}" if scope else path


def _row_keys(batch: dict[str, np.ndarray]) -> list[list[tuple[str, str]]]:
    """(spec key, path) of every media file of every row of a batch."""
    scopes = batch["media_scope"] if "media_scope" in batch else [None] * len(batch["media_paths"])
    return [[(media_key(scope, p), p) for p in paths or ()]
            for scope, paths in zip(scopes, batch["media_paths"], strict=True)]


_ASKED: dict[tuple[str, str], set[str]] = {}
"""Per worker process: the media keys already asked of the cache in each pass (cache name, pass id), the last few
passes. Keyed by pass: a kept cache forgets every key when it is reset for the next pass."""


def prefetch_media(batch: pa.Table, *, media: MediaSource) -> pa.Table:
    """Ask the run's cache to start decoding every media file of the batch not asked for before, without waiting:
    a map ahead of the model stage, so decodes run while earlier blocks are answered. The batch passes through
    unchanged. The model stage waits for the statuses (``ModelStage``); a cache that is gone shows there, with its
    message. It runs in ``request_tasks``, fused by Ray Data with the maps that make the request rows."""
    asked = _ASKED.setdefault((media.cache_name, media.pass_id), set())
    for name in list(_ASKED)[:-4]:
        del _ASKED[name]
    columns = [c for c in ("media_scope", "media_paths") if c in batch.column_names]
    keys = {key for row in _row_keys(batch.select(columns).to_pydict()) for key, _ in row}
    new = sorted(keys - asked)
    if new:
        media.client().request([media.specs[k] for k in new])
        asked.update(new)
    return batch


def request_tasks():
    """The compute of the maps that make request rows and start their decodes: one task at a time. Cheap work
    (microseconds a row) that needs no process of its own: an actor was a process started per run (~1 s of CPU
    on 2 cores), and unbounded tasks started a worker process per concurrent task. A single task at a time reuses
    one of the job's pooled workers, from one run to the next. The maps must share it to be fused."""
    from ray.data import TaskPoolStrategy

    return TaskPoolStrategy(size=1)


def _draw_of(batch: dict, i: int) -> dict | None:
    """Row ``i``'s repeated-sample draw (``answers.SampleDraws``: seed, temperature, top_p), None for one sample."""
    return batch["sampling"][i] if "sampling" in batch else None


def drawn_answer(result: EngineResult, request, draw: dict) -> EngineResult:
    """A zero-shot answer of a repeated sample: its label drawn from the option distribution (the label logprobs'
    softmax at the draw's ``temperature``, cut to the ``top_p`` nucleus), seeded by the sample's seed and the
    instance and prompt, so the k samples of an instance differ as a sampling model's would. Answers read from
    generated text (chain of thought, thinking: ``answer_source`` set) were sampled by the engine itself, and
    errored ones or ones without logprobs are kept as they are. ``confidence`` becomes the drawn label's
    probability (restricted softmax, ``rs``)."""
    logprobs = result.option_logprobs
    if result.error or result.answer_source is not None or not logprobs:
        return result
    labels = list(request.instance.option_labels)[:len(logprobs)]
    values = np.array([x if x is not None and np.isfinite(x) else -np.inf for x in logprobs[:len(labels)]])
    if not np.isfinite(values).any():
        return result
    probs = np.exp((values - values.max()) / float(draw.get("temperature") or 1.0))
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")
    keep = np.cumsum(probs[order]) - probs[order] < float(draw.get("top_p") or 1.0)  # the nucleus: top labels
    nucleus = np.zeros_like(probs)
    nucleus[order[keep]] = probs[order[keep]]
    rng = keyed_rng(int(draw["seed"]), request.instance.instance_id, request.prompt_style, "label")
    pick = int(rng.choice(len(labels), p=nucleus / nucleus.sum()))
    plain = np.exp(values - values.max())
    result.choice = labels[pick]
    result.confidence, result.confidence_method = float(plain[pick] / plain.sum()), "rs"
    return result


class ModelCalls:
    """What the seam does with a batch, given an engine: build the engine requests from the request rows, call
    ``score`` / ``generate``, add the result columns. Plain Python (no Ray): ``ModelStage`` is its actor, and tests
    and benchmarks call it directly. ``fetch`` maps a set of media keys (``media_key``) to their decoded media (by
    default to None: for engines that read no media); the engine gets them by path. A row whose media
    failed to decode gets that error without a model call, and a row marked ``skipped`` (media its model cannot
    take: ``media_policy``) passes by without one and with no result; an engine exception marks every request of
    its sub-batch (``engine error: ...``) and the run goes on. Each error gets its kind here (``error_kind``,
    ``schema.ERROR_KINDS``): ``media`` for a decode, ``engine`` for an exception and for an engine's own error
    result, unless the engine gives the kind (``media``: a medium it shows was dropped from the model's input,
    ``engines.shown``)."""

    def __init__(self, engine, fetch: Callable[[set[str]], dict] | None = None):
        self.engine = engine
        self.fetch = fetch or (lambda paths: dict.fromkeys(paths))

    def _media(self, paths: set[str]) -> dict[str, object]:
        return self.fetch(paths)

    def __call__(self, batch: dict[str, list], keys_of: list | None = None) -> dict[str, list]:
        """``batch``: the request columns as plain values (``records.batch_columns``); ``keys_of``: the batch's
        ``_row_keys`` where the caller has them already. Returns the batch with ``INSTANCE_COLUMN`` and
        ``RESULT_COLUMN`` added."""
        n = len(batch["call"])
        if "instance" in batch:
            batch[INSTANCE_COLUMN] = _parsed_instances(batch["instance"])
        calls = batch["call"]
        decode_errors = batch["decode_error"] if "decode_error" in batch else [""] * n
        keys_of = keys_of if keys_of is not None else _row_keys(batch)
        skipped = [bool(s) for s in batch["skipped"]] if "skipped" in batch else [False] * n
        results = {i: EngineResult() for i in range(n) if skipped[i]}
        results |= {i: EngineResult(error=decode_errors[i], error_kind=MEDIA_ERROR) for i in range(n)
                    if decode_errors[i] and not skipped[i]}
        todo = [i for i in range(n) if i not in results]
        start = time.perf_counter()
        if todo:
            media = self._media({key for i in todo for key, _ in keys_of[i]})
            row_media = {i: {path: media[key] for key, path in keys_of[i]} for i in todo}
            scored = [i for i in todo if calls[i] == "score"]
            if scored:
                results.update(zip(scored, self._score(batch, scored, row_media), strict=True))
            generated = [i for i in todo if calls[i] == "generate"]
            if generated:
                results.update(zip(generated, self._generate(batch, generated, row_media), strict=True))
        latency = (time.perf_counter() - start) / max(1, len(todo))
        for i in todo:
            results[i].latency_s = latency
        batch[RESULT_COLUMN] = [results[i] for i in range(n)]
        return batch

    def _score(self, batch: dict, ids: list[int], media: dict) -> list[EngineResult]:
        from omnieval.engines.base import EngineRequest

        draws = [_draw_of(batch, i) for i in ids]
        requests = [EngineRequest(batch[INSTANCE_COLUMN][i], media[i], batch["prompt"][i],
                                  sample_seed=None if d is None else int(d["seed"])) for i, d in zip(ids, draws)]
        try:
            out = self.engine.score(requests)
        except Exception as exc:
            return [_engine_error(exc) for _ in ids]
        results = [_record(r) for r in out]
        return [drawn_answer(res, req, d) if d is not None else res
                for res, req, d in zip(results, requests, draws, strict=True)]

    def _generate(self, batch: dict, ids: list[int], media: dict) -> list[EngineResult]:
        from omnieval.core.prompts import PromptPart
        from omnieval.engines.base import GenerationRequest

        def request(i: int, suffix: str = "", key: str | None = None) -> GenerationRequest:
            parts = [_as_decoded(PromptPart(**p), media[i]) for p in batch["parts"][i]]
            if suffix:
                last = parts[-1]
                parts[-1] = PromptPart("text", text=(last.text or "") + suffix)
            budget = batch["max_new_tokens"][i] if "max_new_tokens" in batch else None
            return GenerationRequest(parts=parts, media=media[i], max_new_tokens=budget,
                                     key=key if key is not None else batch["key"][i],
                                     meta=meta_dict(batch["meta"][i]),
                                     instance=batch[INSTANCE_COLUMN][i] if INSTANCE_COLUMN in batch else None)

        results = {i: r for i, r in zip(ids, self._call_generate([request(i) for i in ids]), strict=True)}
        for r in results.values():
            r.attempts = 1
        retries = {i: batch["retry"][i] for i in ids if "retry" in batch and batch["retry"][i]}
        again = [i for i, spec in retries.items() if results[i].error is not None or not _accepted(results[i], spec)]
        if again:
            second = self._call_generate([request(i, retries[i]["suffix"], retries[i]["key"]) for i in again])
            for i, r in zip(again, second, strict=True):
                r.attempts = 2
                results[i] = r
        return [results[i] for i in ids]

    def _call_generate(self, requests: list) -> list[EngineResult]:
        try:
            out = self.engine.generate(requests)
        except Exception as exc:
            return [_engine_error(exc) for _ in requests]
        return [_record(r) for r in out]


class ModelStage(ModelCalls):
    """One replica of one model (the actor of ``through_model``): the engine built from the model's config, media
    fetched by key from the run's cache (zero-copy from the object store, kept in a small per-actor LRU: at most
    ``MEDIA_LRU`` files and ``MediaSource.reader_bytes`` bytes, since what it keeps stays pinned in the object
    store; the current batch's media always)."""

    MEDIA_LRU = 512

    def __init__(self, model: dict, media: MediaSource | None, rows: RowBuilder):
        from omnieval.config import ModelConfig
        from omnieval.engines.base import create_engine

        self.model = ModelConfig.model_validate(model)
        super().__init__(create_engine(self.model.engine, model=self.model.name, **self.model.options))
        self.cache = media.client() if media is not None else None
        self.specs = media.specs if media is not None else {}
        self.local_bytes = media.reader_bytes if media is not None else 0
        self.local: OrderedDict[str, object] = OrderedDict()
        self.status: dict[str, str] = {}
        self.rows = rows.build()

    def __call__(self, table: pa.Table) -> pa.Table:
        batch = batch_columns(table)
        keys_of = None
        if self.cache is not None and "media_paths" in batch:
            keys_of = _row_keys(batch)  # once: the decode wait and the engine's media both need them
            batch["decode_error"] = self._decode_errors(keys_of)
        return pack_rows(self.rows(super().__call__(batch, keys_of)))

    def _decode_errors(self, keys_of: list[list[tuple[str, str]]]) -> list[str]:
        """Per row, ``media decode failed: ...`` naming each of its files that failed to decode, or ``""``. Waits
        for the decodes (started ahead by ``prefetch_media``); a key's status is asked of the cache once per actor:
        every condition, direction and order of an item shows the same few files, so after the first blocks a
        batch costs dict lookups, not a round trip to the cache and a wait on hundreds of small objects."""
        per_row = [[key for key, _ in keys] for keys in keys_of]
        unknown = sorted({k for keys in per_row for k in keys} - self.status.keys())
        self.status.update(zip(unknown, self.cache.statuses([self.specs[k] for k in unknown]), strict=True))
        errors = ["; ".join(self.status[k] for k in keys if self.status[k]) for keys in per_row]
        return [f"media decode failed: {e}" if e else "" for e in errors]

    def _media(self, keys: set[str]) -> dict[str, object]:
        while self._over_bytes() and next(iter(self.local)) not in keys:  # room first: what is kept stays pinned
            self.local.popitem(last=False)
        missing = sorted(k for k in keys if k not in self.local)
        if missing:
            for key, payload in zip(missing, self.cache.payloads([self.specs[k] for k in missing]), strict=True):
                self.local[key] = payload
        for k in keys:
            self.local.move_to_end(k)
        while len(self.local) > len(keys) and (len(self.local) > self.MEDIA_LRU or self._over_bytes()):
            self.local.popitem(last=False)
        return {k: self.local[k] for k in keys}

    def _over_bytes(self) -> bool:
        if not self.local_bytes:
            return False
        return sum(_payload_bytes(m) for m in self.local.values()) > self.local_bytes


def _payload_bytes(media) -> int:
    data = getattr(media, "data", None)
    return int(data.nbytes) if data is not None else 0


@dataclass(frozen=True)
class RowBuilder:
    """What turns a batch with its result records into the rows a caller stores (``answers.PredictionRows``,
    ``judges.JudgementRows``, ``cascade.DescriptionRows``): a class and its constructor arguments. ``through_model``
    runs it inside the model's actors, right after the engine call, so a row's instance is parsed once and the
    stream carries finished rows, not a request row plus its results to a further pool of actors."""

    cls: type
    kwargs: dict

    def build(self):
        return self.cls(**self.kwargs)


def call_rows(engine, rows: list[dict], fetch: Callable[[set[str]], dict] | None = None) -> dict[str, list]:
    """Request rows through ``engine`` without Ray (tests, benchmarks), typed as the stream types them (a column
    outside ``records.REQUEST_FIELDS`` as Arrow infers it): the batch with its result records (``RESULT_COLUMN``).
    Without ``fetch`` every media path maps to None: for engines that read no media (the simulated engine)."""
    return ModelCalls(engine, fetch)(batch_columns(typed_rows(rows)))


def typed_rows(rows: list[dict]) -> pa.Table:
    """Request rows as the stream's Arrow table: ``records.REQUEST_FIELDS`` typed, any other column (the run a
    row belongs to, the names a judgement carries) as Arrow infers it from its values."""
    from omnieval.run.records import REQUEST_FIELDS

    known = dict(REQUEST_FIELDS)
    names = dict.fromkeys(k for r in rows for k in r if k not in known)
    return request_rows_table(rows, {k: pa.array([r.get(k) for r in rows]).type for k in names})


def _parsed_instances(records) -> list:
    """The ``Instance`` of each row's ``instance`` record (None where it has none), each distinct one read once:
    the engine's request and the row builder both read it, and the rows of one instance (its modes and prompt
    styles, made one after another by ``answers.block_requests``) share one within a batch. Records are told
    apart by their whole value, not their id: rows of several runs in one pipeline may share an id."""
    from omnieval.run.records import instance_from_record

    seen: dict[str, list] = {}
    out = []
    for record in records:
        if record is None:
            out.append(None)
            continue
        same = seen.setdefault(record["instance_id"], [])
        inst = next((parsed for other, parsed in same if other == record), None)
        if inst is None:
            inst = instance_from_record(record)
            same.append((record, inst))
        out.append(inst)
    return out


def _as_decoded(part, media: dict):
    """A media part with no modality is announced as the modality its file decoded to (a point cloud shown as
    rendered views is an image); describers ask this way, as they do not know the decoded form in advance."""
    if part.kind == "media" and not part.modality:
        from omnieval.core.prompts import PromptPart

        return PromptPart("media", modality=media[part.ref].modality, path=part.path)
    return part


def _accepted(result: EngineResult, spec: dict) -> bool:
    from omnieval.core.judges import judge_reply

    return judge_reply(result.raw_text, spec["words"]) is not None


def _engine_error(exc: Exception) -> EngineResult:
    """The result of each request of a sub-batch whose engine call raised."""
    return EngineResult(error=f"engine error: {type(exc).__name__}: {exc}", error_kind=ENGINE_ERROR)


def _record(result) -> EngineResult:
    """An engine's result (``EngineResult`` for ``score``, ``GenerationResult`` for ``generate``; any object with
    those fields) as the stage's own record, field by field under the same names, its error given a kind
    (``_own_error_kind``). A copy: an engine may hand back one result object for equal requests."""
    record = EngineResult(**{name: getattr(result, name, None) for name in _RESULT_NAMES})
    record.error_kind = _own_error_kind(result)
    return record


def _own_error_kind(result) -> str | None:
    """The kind of an error an engine returned for one request (it did not raise: a request it could not score, a
    forward pass that failed for that request alone): the engine's own where it gives one (``media``: a medium
    dropped from the model's input), else ``engine``, the stage that failed. Files written before the column
    existed count these as ``other`` (their messages carry no ``engine error:`` prefix)."""
    if not result.error:
        return None
    return getattr(result, "error_kind", None) or ENGINE_ERROR


def through_model(ds, model, media: MediaSource | None, *, rows: RowBuilder):
    """``ds`` of request rows through ``model``'s engine pool (``replicas`` actors, each with the model's
    ``num_cpus``/``num_gpus``, batches of ``batch_size``), their media decodes started ahead by ``prefetch_media``
    (unless ``media`` is None: requests of text only): the rows ``rows`` builds come back, packed (``pack_rows``)."""
    from ray.data import ActorPoolStrategy

    from omnieval.run.ray_notices import absorb_restart_notice

    absorb_restart_notice()  # Ray's false alarm about the pools' restarts, spent before the first pool starts
    if media is not None:
        ds = ds.map_batches(prefetch_media, fn_kwargs={"media": media}, compute=request_tasks(), batch_size=None,
                            batch_format="pyarrow", num_cpus=REQUEST_CPUS)
    resources = {"num_cpus": model.num_cpus} | ({"num_gpus": model.num_gpus} if model.num_gpus else {})
    return ds.map_batches(ModelStage, fn_constructor_kwargs={"model": model.model_dump(), "media": media, "rows": rows},
                          compute=ActorPoolStrategy(size=model.replicas), batch_size=model.batch_size,
                          batch_format=MODEL_BATCH_FORMAT, **resources)


def pack_rows(table: pa.Table) -> pa.Table:
    """``table`` as one row: its Arrow IPC stream, compressed (``unpack_rows`` reverses it). The built rows travel
    to the driver packed because of what reading a block costs there: a block of Ray's object store (any object over
    Ray's inline limit of 100 KiB, as a block of 256 prediction rows is) is mapped into the driver, and every page
    the driver touches stays in its resident memory, so the driver's memory grew with every block it drained (by
    about the predictions' size: 5 MiB over 16k rows). Packed (a third of the size, ~0.6 us a row each way), a
    block stays under the limit and reaches the driver inline, in memory it frees and reuses."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    stream = sink.getvalue()
    return pa.table({PACKED_COLUMN: pa.array([pa.compress(stream, codec=PACK_CODEC, asbytes=True)], pa.binary()),
                     PACKED_SIZE_COLUMN: pa.array([stream.size], pa.int64())})


def unpack_rows(block: pa.Table) -> pa.Table:
    """The rows of a block of ``pack_rows`` tables, in order; any other block as it is."""
    if PACKED_COLUMN not in block.column_names:
        return block
    tables = [pa.ipc.open_stream(pa.decompress(packed, decompressed_size=size, codec=PACK_CODEC)).read_all()
              for packed, size in zip(block[PACKED_COLUMN].to_pylist(), block[PACKED_SIZE_COLUMN].to_pylist(),
                                      strict=True)]
    return pa.concat_tables(tables)


def from_rows(rows: list[dict], extra: dict[str, pa.DataType] | None = None):
    """A Ray dataset of request rows (``records.request_rows_table``: ``extra`` types the columns beyond the
    request's own), in blocks of about 32 rows (at most 64 blocks)."""
    import ray.data

    table = request_rows_table(rows, extra)
    n = max(1, min(len(rows) // 32, 64))
    size = -(-len(rows) // n)
    return ray.data.from_arrow([table.slice(i, size) for i in range(0, max(1, len(rows)), size)])


def drain(ds, total: int, desc: str, write: Callable[[pa.Table], None], progress: bool) -> int:
    """Pull the finished rows to the driver and hand them to ``write`` in parts of about ``FLUSH_ROWS`` rows or
    every ``FLUSH_SECONDS`` (each part an atomic file: what was written survives a crash); returns rows written."""
    from tqdm import tqdm

    buffer: list[pa.Table] = []
    buffered = written = 0
    last = time.monotonic()
    bar = tqdm(total=total, desc=desc, unit="row", disable=not progress, file=sys.stderr)
    # prefetch_batches=0: with Ray Data's default prefetch, a finished block reaches this loop only once the next
    # one has finished too, so the resume log lagged a block behind (a small run arrived all at its end)
    for block in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0):
        block = unpack_rows(block)
        buffer.append(block)
        buffered += block.num_rows
        bar.update(block.num_rows)
        if buffered >= FLUSH_ROWS or time.monotonic() - last > FLUSH_SECONDS:
            write(pa.concat_tables(buffer))
            written, buffer, buffered, last = written + buffered, [], 0, time.monotonic()
    if buffer:
        write(pa.concat_tables(buffer))
        written += buffered
    bar.close()
    return written
