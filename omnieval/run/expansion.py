"""A plan's instances, made where they are used: items expanded into blocks of instance rows by Ray tasks, so the
driver never holds the instances (its memory does not grow with them) and expansion runs on every core.

The items are cut into chunks of ``CHUNK_ITEMS`` (for a protocol whose items expand independently of each other,
``item_local`` in its spec; otherwise, as for spectrum's donors drawn across all items, one chunk holds every
item). A task per chunk expands it (``ProtocolSpec.expand``) and yields blocks of ``ExpansionSource.block_size``
instance rows (``INSTANCE_SCHEMA``) into the object store, then a ``ChunkSummary``: its instance count, a SHA-256 of
its instances' JSON, and the media files they show. The driver keeps the block refs and the summaries only; the run's
stream reads the blocks (``instance_dataset``).

Without Ray (sweep planning, tests) the same chunks are expanded in this process, and the blocks are kept as tables
or dropped (``keep_blocks``); either way the digest, counts and media are the same, so a plan made without Ray and
one made with it have the same identity.
"""

from __future__ import annotations

import hashlib
import pickle
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from omnieval.core.schema import InputError, Instance, ProtocolValue, Segment
from omnieval.run.records import INSTANCE_TYPE, instance_from_record, instance_record

CHUNK_ITEMS = 64
BLOCK_INSTANCES = 512
"""The most instances in a block. A block is what one engine replica takes at a time, and what reaches the driver
(and its resume log and progress bar) at once; each costs every stage of the stream some milliseconds of
scheduling. So a block holds ``BATCHES_PER_BLOCK`` of the model's batches (``block_instances``), within 16 and this
bound, and fewer where the plan is small (``ExpansionSource.block_size``). The bound keeps a block's finished rows,
packed (``stages.pack_rows``), under Ray's 100 KiB inline limit, so they reach the driver in memory it reuses:
512 multiple-choice rows of the simulated engine pack to ~70 KB, 1,024 to ~140 KB."""
BATCHES_PER_BLOCK = 16
DEFAULT_BLOCK_INSTANCES = 256
NAMING_FIELDS = frozenset({"donors", "media_unit"})
"""Instance fields that name where content came from rather than what is shown: out of the digest."""
LATER_FIELDS = frozenset({"breakdowns"})
"""Canonical fields added after outputs were written: out of the digest where unset, so an instance without one has
the digest it had before the field existed (a run written then still resumes)."""
DERIVED_FIELDS = frozenset({"layout"})
"""Instance fields that follow from the protocol (already in the digest through ``protocol``): out of the digest."""


class CanonicalInstance(BaseModel):
    """The form of an instance the plan's digest hashes (``digest_text``), field for field and in the order of the
    flat instance that runs were first made with: the protocols' own fields (``Instance.protocol_fields``) at the
    places they held there, the simulated engine's hints under their first name, ``evidence``. Hashing this form
    keeps the digest, and with it the identity of every run written before the fields moved, byte for byte
    (``tests/test_instance_digest.py`` holds recorded texts). A protocol field not listed here (a protocol added
    since) is hashed in ``protocol_fields`` at the end, left out where there is none."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    item_id: str
    protocol: str
    benchmark: str
    split: str
    condition: str
    segments: list[Segment]
    question: str
    option_labels: list[str]
    option_texts: list[str]
    target: str
    abstain_label: str | None = None
    k: int | None = None
    anchor: str | None = None
    task: str | None = None
    subtask: str | None = None
    category: str | None = None
    n_inputs: int | None = None
    selection_type: str | None = None
    answer_modality: str | None = None
    group: str | None = None
    option_segments: list[Segment] | None = None
    evidence: dict[str, str | None]
    evidence_modality: str | None = None
    breakdowns: dict[str, str] | None = None
    reference: str | None = None
    judge_question: str | None = None
    rated: bool = False
    protocol_fields: dict[str, ProtocolValue] | None = None


_SHARED = frozenset(Instance.model_fields) - NAMING_FIELDS - DERIVED_FIELDS - {"protocol_fields", "simulation_hints"}
"""The instance's fields hashed as they are; a shared field added to ``Instance`` and not to ``CanonicalInstance`` (or
to the sets above) fails every expansion, so whether it changes the digest is decided, not left to chance."""
_PLACED = frozenset(CanonicalInstance.model_fields) - _SHARED - {"evidence", "protocol_fields"}


def digest_text(inst: Instance) -> str:
    """The text of ``inst`` that the plan's digest hashes: its ``CanonicalInstance`` as JSON, without the naming
    and derived fields, and without a later field (``LATER_FIELDS``) the instance does not set."""
    own = inst.protocol_fields
    canonical = CanonicalInstance(
        **{name: getattr(inst, name) for name in _SHARED}, evidence=inst.simulation_hints,
        **{name: own[name] for name in _PLACED if name in own},
        protocol_fields={k: v for k, v in own.items() if k not in _PLACED} or None)
    unset = {name for name in LATER_FIELDS if own.get(name) is None}
    return canonical.model_dump_json(exclude=unset | ({"protocol_fields"} if canonical.protocol_fields is None
                                                      else set()))

INSTANCE_SCHEMA = pa.schema([("instance_id", pa.string()), ("instance", INSTANCE_TYPE),
                             ("media_paths", pa.list_(pa.string()))])
"""An instance block: the id, the instance (``records.INSTANCE_TYPE``), and the media refs of its segments."""


@dataclass(frozen=True)
class ExpansionSource:
    """What expanding needs: the protocol, the benchmark (its ``items`` the ones to expand), seed and options."""

    protocol: str
    bench: object
    seed: int
    options: object
    max_block: int = DEFAULT_BLOCK_INSTANCES  # ``block_instances`` of the run's models

    @property
    def block_size(self) -> int:
        """About 16 blocks in all (taking ~8 instances an item), 16 to ``max_block`` instances each: every block
        costs each stage of the stream some milliseconds of scheduling, so a small run wants few, and a small
        block keeps a replica busy only briefly. The digest does not depend on it. (A chunk's blocks end with the
        chunk: ``CHUNK_ITEMS`` items.)"""
        return max(16, min(self.max_block, len(self.bench.items) * 8 // 16))


def block_instances(batch_sizes: list[int]) -> int:
    """The most instances in a block for models with these batch sizes: ``BATCHES_PER_BLOCK`` batches of the
    smallest, within 16 and ``BLOCK_INSTANCES``. With the default batch of 16 that is 256 rows; a fast engine
    with batches of 64 gets blocks twice as large, and so half the scheduling a row (measured with the simulated
    engine on 2 cores: 3.8k -> 4.9k instances/s at 16k instances)."""
    if not batch_sizes:
        return DEFAULT_BLOCK_INSTANCES
    return max(16, min(BLOCK_INSTANCES, BATCHES_PER_BLOCK * min(batch_sizes)))


@dataclass
class ChunkSummary:
    count: int
    digest: str
    media: dict[str, str]  # media_ref (relative path, or path#audio) -> modality, in first-seen order


@dataclass
class Expansion:
    """A plan's instances: how many, their digest (SHA-256 over the chunks' digests in order), the media they show
    (``schema.media_ref`` -> modality), and the blocks (Ray object refs, or tables when expanded in this process;
    empty when not kept)."""

    n_instances: int
    digest: str
    media: dict[str, str]
    blocks: list = field(default_factory=list)

    def load_instances(self) -> list:
        """Every instance, parsed, in this process: O(instances) memory, for the few callers that need them all
        on the driver (describers, judges, benchmarks of the engine)."""
        return [instance_from_record(r) for table in self._tables() for r in table.column("instance").to_pylist()]

    def _tables(self) -> Iterator[pa.Table]:
        for block in self.blocks:
            if isinstance(block, pa.Table):
                yield block
            else:
                import ray

                yield ray.get(block)


def chunks(source: ExpansionSource) -> list[tuple[int, int]]:
    """The (start, stop) item ranges expanded by one task each."""
    from omnieval.protocols import get_protocol

    n = len(source.bench.items)
    if not get_protocol(source.protocol).item_local:
        return [(0, n)]
    return [(start, min(n, start + CHUNK_ITEMS)) for start in range(0, n, CHUNK_ITEMS)]


def expand_chunk(source: ExpansionSource, start: int, stop: int) -> Iterator[pa.Table | ChunkSummary]:
    """The blocks of one chunk's instances (items ``start:stop`` of ``source.bench.items``), then its summary."""
    yield from _expand_items(source, source.bench.items[start:stop], source.block_size)


def _expand_items(source: ExpansionSource, items: list, size: int) -> Iterator[pa.Table | ChunkSummary]:
    from omnieval.protocols import get_protocol

    instances = get_protocol(source.protocol).expand(items, source.bench, source.seed, source.options)
    digest = hashlib.sha256()
    media: dict[str, str] = {}
    for first in range(0, len(instances), size):
        ids, records, paths = [], [], []
        for inst in instances[first:first + size]:
            # ``donors`` and ``media_unit`` only name where the content shown came from (the content itself is
            # hashed), and are left out of the digest so that outputs written before the fields existed resume.
            digest.update(digest_text(inst).encode())
            digest.update(b"\n")
            segments = inst.media_segments()
            for seg in segments:
                media.setdefault(seg.ref, seg.modality)
            ids.append(inst.instance_id)
            records.append(instance_record(inst))
            paths.append([seg.ref for seg in segments])
        yield pa.Table.from_arrays([pa.array(ids, pa.string()), pa.array(records, INSTANCE_TYPE),
                                    pa.array(paths, pa.list_(pa.string()))], schema=INSTANCE_SCHEMA)
    yield ChunkSummary(len(instances), digest.hexdigest(), media)


def _combine(summaries: list[ChunkSummary], blocks: list) -> Expansion:
    digest = hashlib.sha256()
    media: dict[str, str] = {}
    for s in summaries:
        digest.update(s.digest.encode())
        for path, modality in s.media.items():
            media.setdefault(path, modality)
    return Expansion(sum(s.count for s in summaries), digest.hexdigest(), media, blocks)


def expand(source: ExpansionSource, *, keep_blocks: bool = True) -> Expansion:
    """Expand with Ray tasks when Ray is up (blocks stay in the object store), else in this process (Ray is not
    imported for that: a process that never imported it has no Ray up, and the plan then needs no Ray at all)."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return _expand_ray(source)
    summaries, blocks = [], []
    for start, stop in chunks(source):
        for out in expand_chunk(source, start, stop):
            if isinstance(out, ChunkSummary):
                summaries.append(out)
            elif keep_blocks:
                blocks.append(out)
    return _combine(summaries, blocks)


_TASK = None


def _expand_ray(source: ExpansionSource) -> Expansion:
    """One task per chunk. The source without its items is put once (anchors, options: the same for every chunk);
    each task's own items travel in its arguments, pickled and compressed (~15 KB for 64 items), so they stay under
    Ray's inline limit and never go through the object store. Putting the whole source there had the driver write
    every item into the store's shared memory, which stays in its resident memory: 3 MiB more at 2,016 items."""
    import ray

    global _TASK
    if _TASK is None:
        _TASK = ray.remote(num_returns="streaming", num_cpus=1, max_retries=2)(_expand_task)
    from omnieval.protocols import protocol_module
    from omnieval.run.parallelism import cpu_parallelism

    shared = ray.put(replace(source, bench=replace(source.bench, items=[])))
    module = protocol_module(source.protocol)  # the tasks register it too: a protocol registered here in Python
    items = source.bench.items
    pending = list(chunks(source))
    window = cpu_parallelism()  # chunks in flight: more would only start more worker processes
    running = []
    summaries, blocks = [], []
    while pending or running:
        while pending and len(running) < window:
            start, stop = pending.pop(0)
            running.append(_TASK.remote(shared, _pack_items(items[start:stop]), source.block_size, module))
        with _refusal_unwrapped():
            refs = list(running.pop(0))  # in chunk order: the blocks keep the plan's order
            blocks += refs[:-1]
            summaries.append(ray.get(refs[-1]))
    return _combine(summaries, blocks)


@contextmanager
def _refusal_unwrapped() -> Iterator[None]:
    """A refusal raised inside an expansion task (a protocol finding no donor, an item it cannot expand) reaches
    the driver as Ray's task error, whose message carries the worker's whole stack; the user gets the refusal
    itself, one line naming the file, item and field, as the same check gives in this process."""
    import ray.exceptions

    try:
        yield
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, InputError):
            raise cause from None
        raise


def _pack_items(items: list) -> bytes:
    return zlib.compress(pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _expand_task(shared: ExpansionSource, packed_items: bytes, block_size: int, module: str):
    """The blocks and summary of one chunk: ``shared`` with the chunk's items as its benchmark's items (a protocol
    that expands items alone reads no other item; one that does not has a single chunk holding them all), cut into
    blocks of the whole plan's ``block_size``. ``module`` is the protocol's module on the driver: a worker started
    before ``register_protocol`` was called there learns the protocol here."""
    from omnieval.protocols import register_protocol

    register_protocol(shared.protocol, module)
    items = pickle.loads(zlib.decompress(packed_items))
    yield from _expand_items(replace(shared, bench=replace(shared.bench, items=items)), items, block_size)


def instance_dataset(expansion: Expansion):
    """The instance blocks as a Ray dataset, one block each, in order.

    Blocks in the object store are read by index: a dataset of block numbers (made on the driver, one tiny block
    per number) and a map that fetches each, in the request tasks (``stages.request_tasks``) with the maps after it.
    ``ray.data.from_arrow_refs`` would launch one metadata task per block before the stream starts (63 tasks,
    ~0.8 s on 2 cores for a 16k-instance run)."""
    import ray
    import ray.data

    from omnieval.run.stages import REQUEST_CPUS, request_tasks

    if not expansion.blocks or isinstance(expansion.blocks[0], pa.Table):
        return ray.data.from_arrow(expansion.blocks) if expansion.blocks else ray.data.from_items([])
    n = len(expansion.blocks)
    return ray.data.from_items([{"block": i} for i in range(n)], override_num_blocks=n).map_batches(
        _fetch_blocks, fn_kwargs={"blocks": ray.put(list(expansion.blocks))}, batch_size=None,
        batch_format="pyarrow", num_cpus=REQUEST_CPUS, compute=request_tasks())


def _fetch_blocks(numbers: pa.Table, *, blocks) -> pa.Table:
    """The instance blocks of the block ``numbers`` (``blocks``: an object ref to the list of block refs)."""
    import ray

    refs = ray.get(blocks)
    return pa.concat_tables([ray.get(refs[i]) for i in numbers.column("block").to_pylist()])
