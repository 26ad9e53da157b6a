"""The claims that let side-by-side passes decode each missing key once (``omnieval/media/claims.py``).

Passes that start together each ask for the store's claims actor; the actor must outlive that (a found handle does
not keep a named actor alive: when one replaced the creating one, Ray ended the actor and every decode of the
sweep went uncoordinated, two passes decoding one file each). Waiters whose holder left no entry claim the key in
turn rather than decoding all at once, and a claim whose holder is gone is given to the next waiter."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np

import omnieval.run.decode_cache as cache_module
from omnieval.media.claims import NAMESPACE, acquire_claims, release_claims
from omnieval.media.decoded import content_hash
from omnieval.media.decoded_store import DecodedStore
from omnieval.media.spec import MediaSpec
from omnieval.media.synth import still_image
from omnieval.run.decode_cache import decode_through


def _together(n: int, work) -> list:
    """``work(i)`` in ``n`` threads released at once; their results in order (a thread's exception re-raised)."""
    barrier, out = threading.Barrier(n), [None] * n

    def one(i):
        barrier.wait()
        try:
            out[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for result in out:
        if isinstance(result, BaseException):
            raise result
    return out


def _alive(name: str) -> bool:
    import ray

    try:
        actor = ray.get_actor(name, namespace=NAMESPACE)
        ray.get(actor.release.remote("probe"), timeout=30)  # answers: it lives
        return True
    except (ValueError, ray.exceptions.RayActorError):  # not found by name, or ended
        return False


def _gone(name: str, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:  # Ray ends an actor whose creating handle is gone asynchronously
        if not _alive(name):
            return True
        time.sleep(0.2)
    return False


def test_passes_starting_together_share_one_claims_actor_that_the_last_lets_go(ray_session, tmp_path):
    for i in range(5):
        store = str(tmp_path / f"store-{i}")
        names = _together(3, lambda _, store=store: acquire_claims(store))
        assert len(set(names)) == 1
        gc.collect()
        time.sleep(0.5)
        assert _alive(names[0]), f"round {i}"  # one creating handle kept, whichever pass made it
        release_claims(store)
        release_claims(store)
        assert _alive(names[0]), f"round {i}"  # one pass still uses it
        release_claims(store)
        assert _gone(names[0]), f"round {i}"  # no idle actor per store left behind
        assert acquire_claims(store) != names[0]  # a later pass gets a new one, never one that is ending
        release_claims(store)


def test_a_claim_whose_holder_is_gone_goes_to_the_next_waiter(ray_session, tmp_path):
    import ray

    actor = ray.get_actor(acquire_claims(str(tmp_path / "store")), namespace=NAMESPACE)
    assert ray.get(actor.claim.remote("k")) is True  # held, never released
    assert ray.get(actor.claim.remote("k", 0.3)) is False  # waited, gave up on the holder
    assert ray.get(actor.claim.remote("k")) is True  # the next one holds it
    actor.release.remote("k")
    assert ray.get(actor.claim.remote("k")) is True


class _RefusingStore(DecodedStore):
    """A store that takes no entry (as one that cannot be written): every waiter finds the key still missing."""

    def write(self, key, media):
        return False


def test_waiters_whose_holder_stored_nothing_decode_one_at_a_time(ray_session, tmp_path, monkeypatch):
    import ray

    path = still_image(tmp_path / "i.png", colour="blue", size=(40, 30))
    spec = MediaSpec(content_hash(path, modality="image"), str(path), "image", ())
    store = _RefusingStore(str(tmp_path / "store"))
    claims = ray.get_actor(acquire_claims(store.uri), namespace=NAMESPACE)
    decode, lock = cache_module._decode, threading.Lock()
    running, most, calls = [0], [0], [0]

    def slow_decode(s):
        with lock:
            running[0] += 1
            calls[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.3)  # long enough for the waiters to pile up on the claim
        try:
            return decode(s)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(cache_module, "_decode", slow_decode)
    results = _together(4, lambda _: decode_through(spec, store, claims))
    assert [(status, kind) for status, _, kind in results] == [("", "decoded")] * 4
    assert all(np.array_equal(media.data, results[0][1].data) for _, media, _ in results)
    assert calls[0] == 4 and most[0] == 1
