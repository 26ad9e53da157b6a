"""Who decodes a key that the decoded-media store does not hold yet, when several passes want it at once.

Models of a sweep run side by side, each pass with its own ``MediaCache``; with a store, each pass's decode task
would find the same entries missing and decode them all again. One ``DecodeClaims`` actor per store and driver
(owned by the driver) hands each missing key to one decode task; the others wait until that task releases it and
then read the entry it wrote. A claim is held only while one file decodes and is written, and a waiter holds no
claim, so no task waits on a task that waits on it. A claim whose holder died is given up after
``CLAIM_TIMEOUT_S``: a waiter then claims the key itself (a decode more, never a missing answer).

The actor lives while a pass of this driver uses its store: passes ``acquire_claims`` on starting and
``release_claims`` on ending, and the last to leave lets it go, so a long-lived process running sweep after sweep
keeps no idle actor per store. A named actor lives while its creating handle does (handles found by name do not keep
it alive), so the driver keeps that handle, under one lock: when a second pass's found handle replaced the first's
creating one, Ray ended the actor and every decode task of the sweep went uncoordinated
(``tests/test_decode_claims.py``). Each actor gets a name of its own (store, job and a serial), so a pass never
finds one that is ending.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import threading
from dataclasses import dataclass

import ray

NAMESPACE = "omnieval"
CLAIM_TIMEOUT_S = 120.0


@dataclass
class _Held:
    name: str
    handle: object  # the handle that created the actor: it lives while this does
    users: int


_HELD: dict[tuple, _Held] = {}
"""This process's claims actors in use, by (Ray cluster, job, store)."""
_HELD_LOCK = threading.Lock()
_SERIAL = itertools.count()


def claims_name(store_uri: str, job_id: str, serial: int) -> str:
    digest = hashlib.sha256("\n".join((job_id, store_uri)).encode()).hexdigest()[:16]
    return f"decode-claims-{digest}-{serial}"


def acquire_claims(store_uri: str) -> str:
    """This driver's claims actor of a store, started by the first pass that uses it (from the driver); its name.
    Safe from several threads (passes side by side): one creates it, the others share it. Pair with
    ``release_claims``."""
    context = ray.get_runtime_context()
    where = (context.gcs_address, context.get_job_id(), store_uri)
    with _HELD_LOCK:
        held = _HELD.get(where)
        if held is None:
            name = claims_name(store_uri, context.get_job_id(), next(_SERIAL))
            held = _HELD[where] = _Held(name, DecodeClaims.options(name=name, namespace=NAMESPACE).remote(), 0)
        held.users += 1
        return held.name


def release_claims(store_uri: str) -> None:
    """A pass that acquired the store's claims ended; the last one lets the actor go."""
    context = ray.get_runtime_context()
    where = (context.gcs_address, context.get_job_id(), store_uri)
    with _HELD_LOCK:
        held = _HELD.get(where)
        if held is not None:
            held.users -= 1
            if held.users <= 0:
                del _HELD[where]


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
