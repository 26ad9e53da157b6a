"""The media cache of a pass (one model's requests over one or more runs): this driver's ``MediaCache`` actor, kept
from one pass to the next and reset between them.

Kept, because a new actor per pass made every pass wait for an actor process to start (about half a second of a
2-core machine) before its first decode; reset at the start and end of each pass, so a pass's decodes are counted
from zero (decode once per pass) and its decoded media are freed when it ends. Where the kept actor is gone (killed,
or Ray was restarted in this process) or another pass of this process holds it, a pass gets a new one."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from omnieval.run.stages import MediaSource

NAMESPACE = "omnieval"


@dataclass(frozen=True)
class PassCache:
    """A pass's ``MediaCache`` actor, the name stages find it by, and the pass (the actor outlives it)."""

    actor: object
    name: str
    pass_id: str = ""
    budget: int = 0  # the bytes of decoded media the cache holds (``media.cache.media_budget``; 0: no bound)

    def source(self, specs: dict) -> MediaSource:
        return MediaSource(self.name, NAMESPACE, specs, self.pass_id, reader_bytes(self.budget))

    def decode_kinds(self) -> dict[str, list[str]]:
        """key -> what each of its decode tasks did in this pass (``MediaCache.decode_kinds``)."""
        import ray

        return ray.get(self.actor.decode_kinds.remote())

    def warm_start(self, specs: list) -> None:
        """Start decoding the first media of the pass now (``media.cache.warm_start``: a bounded amount), so they
        decode while the engine actors start and load their models; the stream asks for the rest as it goes. (On
        a resumed run some may be media of finished rows only: a bounded waste, never a wrong answer.)"""
        from omnieval.media.cache import warm_start

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
    decoded-media store the pass reads before decoding and fills after (``media.store``), with its claims actor
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

    from omnieval.media.cache import MediaCache, media_budget
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
