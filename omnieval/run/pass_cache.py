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

    def source(self, specs: dict) -> MediaSource:
        return MediaSource(self.name, NAMESPACE, specs, self.pass_id)

    def decode_counts(self) -> dict[str, int]:
        import ray

        return ray.get(self.actor.decode_counts.remote())

    def warm_start(self, specs: list) -> None:
        """Start decoding the first media of the pass now (``media.cache.warm_start``: a bounded amount), so they
        decode while the engine actors start and load their models; the stream asks for the rest as it goes. (On
        a resumed run some may be media of finished rows only: a bounded waste, never a wrong answer.)"""
        from omnieval.media.cache import warm_start

        first = warm_start(specs)
        if first:
            self.actor.lookup.remote(first)


_KEPT: dict[tuple[str, str], PassCache] = {}
"""This process's cache per (Ray cluster, job)."""


def _reset(cache: PassCache) -> bool:
    """Reset the actor for a new pass; False where it cannot be reached (dead, or of another Ray session)."""
    import ray

    try:
        ray.get(cache.actor.reset.remote(), timeout=60)
        return True
    except Exception:  # a dead actor, a timeout, an actor of a Ray this process no longer talks to
        return False


@contextmanager
def media_cache() -> Iterator[PassCache]:
    """The ``MediaCache`` for one pass: the kept one, reset, or a new one (see the module docstring)."""
    import ray

    from omnieval.media.cache import MediaCache
    from omnieval.run.parallelism import cpu_parallelism

    context = ray.get_runtime_context()
    where = (context.gcs_address, context.get_job_id())
    cache = _KEPT.pop(where, None)
    if cache is not None and not _reset(cache):
        cache = None
    if cache is None:
        name = f"media-cache-{uuid.uuid4().hex[:12]}"
        cache = PassCache(MediaCache.options(name=name, namespace=NAMESPACE).remote(cpu_parallelism()), name)
    cache = dataclasses.replace(cache, pass_id=uuid.uuid4().hex[:12])
    try:
        yield cache
    finally:
        if _reset(cache) and where not in _KEPT:  # another pass may have kept its own meanwhile
            _KEPT[where] = cache
        else:
            with contextlib.suppress(Exception):  # already dead, or of a Ray this process left
                ray.kill(cache.actor)
