"""Who decodes a key that the decoded-media store does not hold yet, when several passes want it at once.

Models of a sweep run side by side, each pass with its own ``MediaCache``; with a store, each pass's decode task
would find the same entries missing and decode them all again. One ``DecodeClaims`` actor per store and driver
(named after both, owned by the driver) hands each missing key to one decode task; the others wait until that task
releases it and then read the entry it wrote. A claim is held only while one file decodes and is written, and a
waiter holds no claim, so no task waits on a task that waits on it. A claim whose holder died is given up after
``CLAIM_TIMEOUT_S``: a waiter then claims the key itself (a decode more, never a missing answer).

The driver keeps the handle that created the actor. A named actor lives while its creating handle does: handles
found by name (``ray.get_actor``, ``get_if_exists``) do not keep it alive. So one lock makes the passes that start
together share the one creating handle; when the second pass's found handle replaced the first's creating one,
Ray ended the actor and every decode task of the sweep went uncoordinated (``tests/test_media_store.py``). The
name carries the driver's job, so each driver owns the actor it relies on (another driver on the same store
coordinates its own passes only).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading

import ray

NAMESPACE = "omnieval"
CLAIM_TIMEOUT_S = 120.0

_HELD: dict[tuple, object] = {}
"""This process's claims actors, by (Ray cluster, job, name): each the handle that created it."""
_HELD_LOCK = threading.Lock()


def claims_name(store_uri: str, job_id: str = "") -> str:
    return "decode-claims-" + hashlib.sha256(f"{job_id}\n{store_uri}".encode()).hexdigest()[:16]


def ensure_claims(store_uri: str) -> str:
    """Start (or find) this driver's claims actor of a store, from the driver, so it outlives every pass; returns
    its name. Safe from several threads (passes side by side): one creates it, the others get its name."""
    context = ray.get_runtime_context()
    name = claims_name(store_uri, context.get_job_id())
    where = (context.gcs_address, context.get_job_id(), name)
    with _HELD_LOCK:
        if where not in _HELD:
            _HELD[where] = DecodeClaims.options(name=name, namespace=NAMESPACE, get_if_exists=True).remote()
    return name


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class DecodeClaims:
    def __init__(self):
        self._busy: dict[str, asyncio.Event] = {}

    async def claim(self, key: str, timeout_s: float = CLAIM_TIMEOUT_S) -> bool:
        """True: the caller decodes ``key`` and then calls ``release``. False: another task held it and has
        released it (or timed out): the caller reads the store."""
        event = self._busy.get(key)
        if event is None:
            self._busy[key] = asyncio.Event()
            return True
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            if self._busy.get(key) is event:  # its holder is gone: nobody else waits on it from now on
                del self._busy[key]
        return False

    def release(self, key: str) -> None:
        event = self._busy.pop(key, None)
        if event is not None:
            event.set()


def claims_of(name: str | None):
    """The claims actor by name, or None (no store, or it cannot be found: decode without coordination)."""
    if not name:
        return None
    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None
