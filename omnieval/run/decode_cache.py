"""Decode once: a run-scoped Ray actor that maps a media content hash to the ObjectRef of its decoded form.

The first request for a key launches one decode task (a CPU task in the cluster); every later request, from any
worker on any node, gets the same ObjectRefs. The actor owns the refs, so decoded media live in the object store for
the whole run and are shared by every instance (condition, direction, permutation) that uses them; rows of the
Ray Data stream carry only the keys, never the arrays, and an engine reads the arrays zero-copy from the object
store. Each decode returns three objects: a small status (``""`` or the error message) that the model stage waits
on, the payload (``DecodedMedia``, or ``None`` on failure) that only the engine fetches, and the kind of work it did
(decoded, or read from a decoded-media store: ``media.decoded_store``), which only the cache's counts read. The decode
task never raises: a file that fails to decode marks only the instances that use it.

Surviving the cache's own death. One actor is what makes decode-once cheap (a dict lookup, no coordination between
readers), so it stays, but it is restartable (``max_restarts=-1``, ``max_task_retries=-1``, set on the class so
every run's cache has them): when its process or node dies, or it is killed with ``ray.kill(..., no_restart=False)``,
Ray starts it again under the same name and replays the lookups that were in flight. The restarted actor starts
empty, and the refs the old one handed out are gone with their owner (``OwnerDiedError``), so every reader goes
through ``CacheClient``, which catches the lost-object and dead-actor errors, looks the keys up again and so gets
fresh decodes. (Objects lost with a node while the cache lives are rebuilt by Ray from their lineage; where that
fails, the reader first asks the cache to ``forget`` them.) The price of a death is a re-decode of the media still
needed, nothing else; in a healthy run every key is decoded exactly once. Designs without the actor were weighed:
refs owned by the driver (decoding everything up front, before the stream needs it, or a driver thread serving
lookups) or a decode per reader (no sharing between replicas); the actor keeps decoding lazy and shared. An actor
killed with ``ray.kill`` and its default ``no_restart=True`` is asked never to come back: readers then fail with a
message that says so.

Bounded by bytes, not by the run's length. A run over long clips decodes far more than the object store holds (a
768-frame clip at 448 px is ~460 MB), so the cache does not keep every ref for the whole pass. The rule:

* A prefetched key (``request``: the stream's decode-ahead) is queued and launched, in the order first asked, only
  while the bytes the cache holds are under its ``budget`` (a share of the object store: ``media_budget``); counted
  while decoding as the largest payload of its modality so far (``decoded_bound`` before the first), by the
  payload's real size after. A key a reader waits for (``statuses``,
  ``payloads``) is launched at once, budget or not, so a reader never waits on room that only it could free.
* Once a reader has asked for a key, its rows have reached a model stage and the key may be dropped: when room is
  needed, the cache drops the least recently asked of those keys (never one of the latest readers' lookups,
  ``RECENT_LOOKUPS``, which their readers hold anyway), and the object is freed once no reader holds it. A key
  asked again after that is decoded again (or read from the store).

So the stream applies backpressure (decodes wait for answers) instead of filling and spilling the object store, and
in a healthy run whose rows of a key come together (as ``answers.block_requests`` makes them) every key is still
decoded once: it is dropped only after its rows have been asked for, and only when the budget is full.

The pass's cache (``PassCache``, ``media_cache``): this driver's ``MediaCache`` actor, kept from one pass (one
model's requests over one or more runs) to the next and reset between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import math
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import ray
from ray.exceptions import ObjectLostError, OwnerDiedError, RayActorError

from omnieval.media.spec import MediaSpec  # noqa: F401 - the cache's unit, defined without Ray

#: What a reader recovers from by looking up again: objects whose owner (the cache) died or that could not be
#: rebuilt, and a cache that is dead or restarting.
LOST_ERRORS = (ObjectLostError, RayActorError)
LOOKUP_ATTEMPTS = 8


#: Files decoded by one task: a decode takes milliseconds, about what Ray spends scheduling a task, so a lookup of
#: many new files launches tasks of up to this many files (each file still has its own objects), and of up to
#: ``TASK_BYTES`` by their ``decoded_bound`` (a task's returns land in the object store together when it ends, so
#: long clips, whose payloads are large and whose decodes are not short, go one to a task).
DECODES_PER_TASK = 8
TASK_BYTES = 32 * 2**20


def task_groups(specs: list[MediaSpec]) -> list[list[MediaSpec]]:
    """``specs`` in order, cut into the groups one decode task each takes (``DECODES_PER_TASK``, ``TASK_BYTES``)."""
    groups: list[list[MediaSpec]] = []
    used = 0
    for spec in specs:
        size = decoded_bound(spec)
        if not groups or len(groups[-1]) == DECODES_PER_TASK or used + size > TASK_BYTES:
            groups.append([])
            used = 0
        groups[-1].append(spec)
        used += size
    return groups


#: What one decode task returns per spec, in order: the status readers wait on, the payload engines fetch, and
#: ``(kind, bytes)`` that only the cache reads: the kind it tallies (``decode_kinds``): ``"decoded"`` (decoded here,
#: or failed to), ``"hit"`` (read from the decoded-media store, no decode) or ``"rejected"`` (the store's entry was
#: cut short or corrupt: decoded again), and the payload's array bytes, which count against the cache's budget.
RETURNS_PER_SPEC = 3

#: Readers' lookups whose keys are never dropped to make room: the batches being answered now (a status lookup and
#: a payload lookup per batch, a few replicas), which their readers hold in the object store whatever the cache does.
RECENT_LOOKUPS = 4

#: The share of the object store that decoded media the cache holds may fill (``media_budget``); Ray Data's blocks
#: get another share (``ray_start.DATA_STORE_SHARE``), and the rest is room for readers' copies in use.
MEDIA_STORE_SHARE = 0.3


@ray.remote(num_cpus=1, max_retries=2)
def decode_task(store: str | None, claims: str | None, *specs: MediaSpec):
    """``status, payload, kind`` of each spec in turn (``num_returns`` = 3 x the specs, set by the caller)."""
    from omnieval.media.claims import claims_of
    from omnieval.media.decoded_store import DecodedStore

    try:
        kept = DecodedStore(store) if store else None
    except Exception:  # a store this worker cannot open (the driver checked it opens there): decode without it
        kept = None
    holder = claims_of(claims) if kept is not None else None
    out: list = []
    for spec in specs:
        status, media, kind = decode_through(spec, kept, holder)
        out += [status, media, (kind, _nbytes(media))]
    return tuple(out)


def _nbytes(media) -> int:
    data = getattr(media, "data", None)
    return int(data.nbytes) if data is not None else 0


def decode_through(spec: MediaSpec, store, claims=None) -> list:
    """``[status, payload, kind]`` of one spec: from the store where it holds an intact entry, else decoded (and
    then stored, unless the decode failed). With ``claims``, one task at a time decodes a missing key; the others
    wait for it, then read the entry it wrote, and where it wrote none (its decode failed, or the store refused the
    write) claim the key in turn, so no two tasks decode one key at once (``media.claims``)."""
    if store is None:
        return [*_decode(spec), "decoded"]
    found = store.read(spec.key, spec.path)
    rejected = found.status == "rejected"
    claimed = False
    try:
        while found.status != "hit" and claims is not None and not claimed:
            try:
                claimed = ray.get(claims.claim.remote(spec.key))
            except Exception:  # the claims actor is gone: decode without coordination
                break
            found = store.read(spec.key, spec.path)  # written while this task waited, or just before its claim
            rejected = rejected or found.status == "rejected"
        if found.status == "hit":
            return ["", found.media, "hit"]
        status, media = _decode(spec)
        if media is not None:
            try:
                store.write(spec.key, media)
            except OSError:  # a store that cannot be written costs later runs a decode, never this answer
                pass
        return [status, media, "rejected" if rejected else "decoded"]
    finally:
        if claimed:
            claims.release.remote(spec.key)


def _decode(spec: MediaSpec) -> tuple[str, object]:
    from omnieval.media.decode import decode_media

    try:
        return "", decode_media(spec.path, spec.modality, **dict(spec.params))
    except Exception as exc:  # recorded per instance, never fatal for the run
        return f"{spec.path}: {type(exc).__name__}: {exc}", None


WARM_START_BYTES = 256 * 2**20
"""How much decoded media (by ``decoded_bound``) a pass decodes before its stream asks for it (``warm_start``)."""


AUDIO_UNKNOWN_SECONDS = 30.0
"""The audio length ``decoded_bound`` takes for a file that declares none and a run without ``max_audio_seconds``
(the cache counts such decodes at the largest real size of the pass once one has finished)."""


def decoded_bound(spec: MediaSpec) -> int:
    """A generous bound on the bytes a spec decodes to: video ``num_frames`` (by rate: ``max_frames``) RGB frames
    of ``max_side`` squared or ``max_pixels`` (1080p frames without either), float32 audio of the length the file
    declares cut to the run's cap (``audio_bound_seconds``), one RGB image; a point cloud's rendered views as a few
    images. Only audio opens the file (its header, once per key): a call's length ranges from seconds to an hour,
    and counting a four-minute call as 30 s let the cache launch eight times the bytes its budget allows."""
    params = dict(spec.params)
    side = params.get("max_side")
    frame = 3 * (side * side if side else params.get("max_pixels") or 1920 * 1080)
    if spec.modality == "video":
        return int(params.get("num_frames") or params.get("max_frames") or 8) * frame
    if spec.modality == "audio":
        return 4 * math.ceil(audio_bound_seconds(spec) * int(params.get("sample_rate", 16_000)))
    return 4 * frame if spec.modality == "pointcloud" else frame


def audio_bound_seconds(spec: MediaSpec) -> float:
    """The seconds of audio ``spec`` decodes to at most: the file's declared length (``decode_audio`` trims to it)
    cut to the run's ``max_audio_seconds``; the cap alone, else ``AUDIO_UNKNOWN_SECONDS``, where the file declares
    none."""
    cap = dict(spec.params).get("max_audio_seconds")
    declared = _declared_seconds(spec.key, spec.path)
    if declared and cap:
        return min(declared, float(cap))
    return declared or (float(cap) if cap else AUDIO_UNKNOWN_SECONDS)


@functools.lru_cache(maxsize=65_536)
def _declared_seconds(key: str, path: str) -> float | None:
    """The audio seconds ``path`` declares, read once per key (the key holds the file's content hash)."""
    from omnieval.media.decode import audio_declared_seconds

    return audio_declared_seconds(path)


def media_budget(share: float = MEDIA_STORE_SHARE) -> int:
    """The bytes of decoded media a pass's cache holds at most (beyond what readers are waiting for): ``share`` of
    the cluster's object store."""
    return int(share * ray.cluster_resources().get("object_store_memory", 0))


def warm_start(specs: list[MediaSpec], budget: int = WARM_START_BYTES) -> list[MediaSpec]:
    """The first ``specs`` (in the order the stream will need them) whose decoded bounds fit in ``budget``: what a
    pass decodes while its engines load, so the first batches find their media ready. Bounded, so a large benchmark
    does not land in the object store at once (the rest is decoded as the stream reaches it)."""
    out, used = [], 0
    for spec in specs:
        used += decoded_bound(spec)
        if used > budget:
            break
        out.append(spec)
    return out


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class MediaCache:
    """Named per driver and kept from one pass to the next (``reset`` between them, so each pass decodes its own
    keys once and frees them when it ends); ``lookup`` returns ``[status_ref, payload_ref]`` per spec (refs nested in
    a list are not resolved by Ray on the way out).

    At most ``parallel`` decode tasks run at once (0: no bound of ours; ``parallelism.cpu_parallelism`` says why
    a run bounds them): a lookup of keys not yet launched waits (an async actor: other lookups go on meanwhile)
    until a slot frees, and keys are launched in the order they were first asked for, which is the order the
    stream needs them. ``budget``: the bytes of decoded media held (0: no bound; the module docstring has the
    rule)."""

    def __init__(self, parallel: int = 0, budget: int = 0):
        self._refs: dict[str, list[ray.ObjectRef]] = {}
        self._launched: dict[str, asyncio.Event] = {}  # keys asked for; the event is set once their task exists
        self._decodes: dict[str, int] = {}
        self._kinds: dict[str, list[ray.ObjectRef]] = {}  # key -> the (kind, bytes) ref of each launch
        self._store: str | None = None  # the decoded-media store of this pass, and its claims actor's name
        self._claims: str | None = None
        self._slots = asyncio.Semaphore(parallel) if parallel > 0 else None
        self._generation = 0  # one per pass (``reset``): a lookup of an ended pass launches nothing more
        self._budget = budget
        self._queue: OrderedDict[str, MediaSpec] = OrderedDict()  # prefetched keys waiting for room, in order
        self._sizes: dict[str, int] = {}  # key held -> its bytes (the bound while decoding, then the real size)
        self._asked: OrderedDict[str, None] = OrderedDict()  # held keys a reader asked for: droppable, oldest first
        self._largest: dict[str, int] = {}  # modality -> the largest payload decoded in this pass (``_estimate``)
        self._recent: deque[set[str]] = deque(maxlen=RECENT_LOOKUPS)  # the keys of the latest readers' lookups
        self._pumping = False

    def reset(self, store: str | None = None, claims: str | None = None) -> None:
        """Start a new pass: forget every key and count (the decoded objects are freed once no reader holds them);
        lookups of the ended pass still waiting for a slot give up. ``store``: the pass's decoded-media store
        (``media.decoded_store``), read before decoding and written after; ``claims``: the name of its claims actor."""
        self._generation += 1
        for event in self._launched.values():
            event.set()
        self._refs, self._launched, self._decodes, self._kinds = {}, {}, {}, {}
        self._queue, self._sizes, self._asked, self._largest = OrderedDict(), {}, OrderedDict(), {}
        self._recent.clear()
        self._store, self._claims = store, claims

    async def lookup(self, specs: list[MediaSpec], prefetch: bool = False) -> list[list[ray.ObjectRef]]:
        """The refs of each spec, launching the decodes of keys not held. ``prefetch``: the stream's decode-ahead
        (``CacheClient.request``): its keys are queued for room in the budget, and nothing is returned."""
        generation = self._generation
        if prefetch:
            for spec in specs:
                if spec.key not in self._refs and spec.key not in self._launched:
                    self._queue.setdefault(spec.key, spec)
            await self._pump(generation)
            return []
        keep = {spec.key for spec in specs}
        found: dict[str, list[ray.ObjectRef]] = {}
        while True:
            found |= {spec.key: self._refs[spec.key] for spec in specs if spec.key in self._refs}
            missing = list({spec.key: spec for spec in specs if spec.key not in found}.values())
            if not missing:
                break
            new = [spec for spec in missing if spec.key not in self._launched]
            for spec in new:
                self._queue.pop(spec.key, None)
                self._launched[spec.key] = asyncio.Event()
            for group in task_groups(new):
                if not await self._launch(group, generation, keep):
                    return []
            for spec in missing:
                event = self._launched.get(spec.key)
                if spec.key not in self._refs and event is not None:
                    await event.wait()
            if self._generation != generation:
                return []
        self._recent.append(keep)  # a reader holds these while it answers their rows: not dropped yet
        for key in keep:  # their rows have reached a reader: droppable from now on, the latest asked last
            if key in self._sizes:
                self._asked[key] = None
                self._asked.move_to_end(key)
        if self._queue:
            asyncio.ensure_future(self._pump(generation))  # room may be made now
        return [found[spec.key] for spec in specs]

    async def _launch(self, group: list[MediaSpec], generation: int, keep: set[str] = frozenset()) -> bool:
        """One decode task for ``group`` (keys already marked launched), once a slot is free; False where the pass
        ended while this waited."""
        if self._slots is not None:
            await self._slots.acquire()
        if self._generation != generation:  # the pass ended while this waited
            if self._slots is not None:
                self._slots.release()
            return False
        n = RETURNS_PER_SPEC
        refs = decode_task.options(num_returns=n * len(group)).remote(self._store, self._claims, *group)
        for i, spec in enumerate(group):
            self._refs[spec.key] = [refs[n * i], refs[n * i + 1]]
            self._kinds.setdefault(spec.key, []).append(refs[n * i + 2])
            self._decodes[spec.key] = self._decodes.get(spec.key, 0) + 1
            self._sizes[spec.key] = self._estimate(spec)
            self._launched[spec.key].set()
        self._make_room(keep)
        asyncio.ensure_future(self._finished(group, refs, generation))  # a task's returns are ready together
        return True

    async def _finished(self, group: list[MediaSpec], refs: list, generation: int) -> None:
        """When a task's returns are ready: its slot frees, its keys count their real sizes, and queued keys may
        launch."""
        try:
            await refs[0]
        except Exception:  # a lost task frees its slot too; its readers see the error
            pass
        finally:
            if self._slots is not None:
                self._slots.release()
        for i, spec in enumerate(group):
            info = refs[RETURNS_PER_SPEC * i + 2]
            try:
                _, size = await info
            except Exception:
                continue
            still_held = spec.key in self._sizes and self._kinds.get(spec.key, [None])[-1] == info
            if self._generation == generation and still_held:  # not dropped, nor launched again, meanwhile
                self._sizes[spec.key] = size
            if self._generation == generation:
                self._largest[spec.modality] = max(size, self._largest.get(spec.modality, 0))
        await self._pump(generation)

    async def _pump(self, generation: int) -> None:
        """Launch queued keys, in order and in tasks as ``task_groups`` cuts them, while the held bytes are under
        the budget (after dropping what may be dropped)."""
        if self._pumping:  # one pump at a time keeps the launch order; the running one sees the new keys
            return
        self._pumping = True
        try:
            while self._queue and self._generation == generation:
                self._make_room()
                held = sum(self._sizes.values())
                if self._budget and held >= self._budget:
                    return  # backpressure: readers' asks make keys droppable, and finished decodes pump again
                group = task_groups(list(self._queue.values())[:DECODES_PER_TASK])[0]
                if self._budget:  # as many as fit in the room left (at least one)
                    fits = [sum(self._estimate(s) for s in group[:n + 1]) <= self._budget - held
                            for n in range(len(group))]
                    group = group[:max(1, sum(fits))]
                for spec in group:
                    del self._queue[spec.key]
                for spec in group:
                    self._launched[spec.key] = asyncio.Event()
                if not await self._launch(group, generation):
                    return
        finally:
            self._pumping = False

    def _estimate(self, spec: MediaSpec) -> int:
        """The bytes a decode still running is counted at: the largest payload of its modality decoded in this
        pass, else ``decoded_bound`` (which knows no clip's length: generous for frames sampled by rate)."""
        return self._largest.get(spec.modality) or decoded_bound(spec)

    def _make_room(self, keep: set[str] = frozenset()) -> None:
        """Drop the least recently asked droppable keys (not those in ``keep``) while the budget is exceeded."""
        if not self._budget:
            return
        held = sum(self._sizes.values())
        in_use = set(keep).union(*self._recent)
        for key in list(self._asked):
            if held <= self._budget:
                break
            if key not in in_use:
                held -= self._drop(key)

    def _drop(self, key: str) -> int:
        """Forget a key's refs (its objects are freed once no reader holds them); its bytes."""
        self._refs.pop(key, None)
        self._launched.pop(key, None)
        self._asked.pop(key, None)
        return self._sizes.pop(key, 0)

    def held_bytes(self) -> int:
        """The bytes of decoded media this cache holds refs to (the bound of decodes still running)."""
        return sum(self._sizes.values())

    def forget(self, handed_out: list[tuple[str, list[ray.ObjectRef]]]) -> None:
        """A reader could not fetch these refs (lost with a node and not rebuilt): drop each key whose refs are
        still the ones handed out, so the next lookup decodes it again (a key re-decoded meanwhile is kept)."""
        for key, refs in handed_out:
            if self._refs.get(key) == refs:
                self._drop(key)

    def decode_counts(self) -> dict[str, int]:
        """key -> number of decode tasks launched for it since this actor (re)started (1 for every key in a
        healthy run), whether they decoded or read the store."""
        return dict(self._decodes)

    async def decode_kinds(self) -> dict[str, list[str]]:
        """key -> what each launch for it did (``RETURNS_PER_SPEC``: ``decoded``, ``hit``, ``rejected``), waiting
        for launches still running. A launch whose kind was lost (its task failed for good) counts as decoded."""
        out: dict[str, list[str]] = {}
        for key, refs in list(self._kinds.items()):
            for ref in refs:
                try:
                    kind, _ = await ref
                except Exception:
                    kind = "decoded"
                out.setdefault(key, []).append(kind)
        return out


class CacheClient:
    """A reader of the run's cache (prefetch map, engine replicas, describers, vLLM media fetchers): fetches the
    statuses or payloads of some specs, and when the cache died and took the refs with it, looks them up again."""

    def __init__(self, name: str, namespace: str):
        self.name, self.namespace = name, namespace
        self._actor = None

    def request(self, specs: list[MediaSpec]) -> None:
        """Start the decodes of ``specs`` not started yet, without waiting for them (``stages.prefetch_media``). A
        cache that cannot be reached is left to the readers, which wait for the statuses and say what is wrong."""
        try:
            self._cache().lookup.remote(list(specs), prefetch=True)
        except (RuntimeError, *LOST_ERRORS):
            self._actor = None

    def statuses(self, specs: list[MediaSpec]) -> list[str]:
        """``""`` per spec that decoded, else its error message (waits for the decodes)."""
        return self._fetch(specs, 0)

    def payloads(self, specs: list[MediaSpec]) -> list[object]:
        """The ``DecodedMedia`` per spec (``None`` where the decode failed)."""
        return self._fetch(specs, 1)

    def _fetch(self, specs: list[MediaSpec], which: int) -> list:
        if not specs:
            return []
        for attempt in range(LOOKUP_ATTEMPTS):
            refs = None
            try:
                refs = ray.get(self._cache().lookup.remote(list(specs)))
                return ray.get([r[which] for r in refs])
            except LOST_ERRORS as exc:
                if attempt == LOOKUP_ATTEMPTS - 1:
                    raise RuntimeError(f"the media cache {self.name!r} kept failing ({LOOKUP_ATTEMPTS} lookups): "
                                       f"{type(exc).__name__}: {exc}") from exc
                if refs is not None and not isinstance(exc, OwnerDiedError):  # the cache lives, the objects not
                    self._cache().forget.remote([(s.key, r) for s, r in zip(specs, refs, strict=True)])
                else:
                    self._actor = None  # look the actor up again: it may have been restarted
                time.sleep(min(2.0, 0.1 * 2 ** attempt))
        raise AssertionError("unreachable")

    def _cache(self):
        if self._actor is None:
            try:
                self._actor = ray.get_actor(self.name, namespace=self.namespace)
            except ValueError as exc:  # gone for good (ray.kill without restart, or the run ended)
                raise RuntimeError(f"the media cache {self.name!r} is gone and will not restart") from exc
        return self._actor

NAMESPACE = "omnieval"


@dataclass(frozen=True)
class PassCache:
    """A pass's ``MediaCache`` actor, the name stages find it by, and the pass (the actor outlives it)."""

    actor: object
    name: str
    pass_id: str = ""
    budget: int = 0  # the bytes of decoded media the cache holds (``run.decode_cache.media_budget``; 0: no bound)

    def source(self, specs: dict) -> MediaSource:
        return MediaSource(self.name, NAMESPACE, specs, self.pass_id, reader_bytes(self.budget))

    def decode_kinds(self) -> dict[str, list[str]]:
        """key -> what each of its decode tasks did in this pass (``MediaCache.decode_kinds``)."""
        import ray

        return ray.get(self.actor.decode_kinds.remote())

    def warm_start(self, specs: list) -> None:
        """Start decoding the first media of the pass now (``run.decode_cache.warm_start``: a bounded amount), so they
        decode while the engine actors start and load their models; the stream asks for the rest as it goes. (On
        a resumed run some may be media of finished rows only: a bounded waste, never a wrong answer.)"""

        first = warm_start(specs)
        if first:
            self.actor.lookup.remote(first, prefetch=True)


READER_SHARE = 8
"""Each reader (an engine replica) keeps decoded media it fetched up to 1/8 of the cache's budget (always the
current batch's): what it keeps stays pinned in the object store, beside what the cache holds."""


def reader_bytes(budget: int) -> int:
    return budget // READER_SHARE


_KEPT: dict[tuple[str, str], PassCache] = {}
"""This process's cache per (Ray cluster, job)."""


def _reset(cache: PassCache, store: str | None = None, claims: str | None = None) -> bool:
    """Reset the actor for a new pass (with its decoded-media store, if any); False where it cannot be reached
    (dead, or of another Ray session)."""
    import ray

    try:
        ray.get(cache.actor.reset.remote(store, claims), timeout=60)
        return True
    except Exception:  # a dead actor, a timeout, an actor of a Ray this process no longer talks to
        return False


@contextmanager
def media_cache(store: str | None = None) -> Iterator[PassCache]:
    """The ``MediaCache`` for one pass: the kept one, reset, or a new one (see the module docstring). ``store``: a
    decoded-media store the pass reads before decoding and fills after (``media.decoded_store``), with its claims actor
    started here, on the driver, so that side-by-side passes decode each missing key once (``media.claims``)."""
    from omnieval.media.claims import acquire_claims, release_claims

    claims = acquire_claims(store) if store else None
    try:
        with _pass_of(store, claims) as cache:
            yield cache
    finally:
        if store:
            release_claims(store)


@contextmanager
def _pass_of(store: str | None, claims: str | None) -> Iterator[PassCache]:
    import ray

    from omnieval.run.parallelism import cpu_parallelism

    context = ray.get_runtime_context()
    where = (context.gcs_address, context.get_job_id())
    cache = _KEPT.pop(where, None)
    if cache is not None and not _reset(cache, store, claims):
        cache = None
    if cache is None:
        name = f"media-cache-{uuid.uuid4().hex[:12]}"
        budget = media_budget()
        actor = MediaCache.options(name=name, namespace=NAMESPACE).remote(cpu_parallelism(), budget)
        cache = PassCache(actor, name, budget=budget)
        ray.get(cache.actor.reset.remote(store, claims))
    cache = dataclasses.replace(cache, pass_id=uuid.uuid4().hex[:12])
    try:
        yield cache
    finally:
        if _reset(cache) and where not in _KEPT:  # another pass may have kept its own meanwhile
            _KEPT[where] = cache
        else:
            with contextlib.suppress(Exception):  # already dead, or of a Ray this process left
                ray.kill(cache.actor)


@dataclass(frozen=True)
class MediaSource:
    """Where a stage finds decoded media: the run's ``MediaCache`` actor (by name) and the media specs by media
    ref (``schema.media_ref``). ``pass_id`` tells passes apart: the driver keeps one cache, under one name, for all
    of its passes, and resets it between them. ``reader_bytes``: the decoded media a reader keeps once fetched
    (``ModelStage``; 0: no bound by bytes)."""

    cache_name: str
    namespace: str
    specs: dict
    pass_id: str = ""
    reader_bytes: int = 0

    def client(self):

        return CacheClient(self.cache_name, self.namespace)
