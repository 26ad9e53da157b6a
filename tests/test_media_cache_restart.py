"""The run's media cache survives its own death: Ray restarts the actor, refs the dead one handed out are lost
(their owner is gone: a reader still holding one gets ``OwnerDiedError`` once the object is freed), and every
reader (``CacheClient``) looks the keys up again and gets fresh decodes. Whole runs that lose the cache midway are
in ``test_faults.py``."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    from conftest import media_specs_of

    return media_specs_of(tmp_path_factory.mktemp("bench"), n_anchors=2)


def _pid(cache) -> int:
    import ray

    actor_id = cache._actor_id.hex()
    deadline = time.time() + 60
    while time.time() < deadline:
        row = ray._private.state.state.actor_table(actor_id)
        if row.get("State") == "ALIVE" and row.get("Pid"):
            return row["Pid"]
        time.sleep(0.1)
    raise AssertionError("the cache actor did not come up")


def test_killed_cache_restarts_and_readers_recover(ray_session, specs):
    import numpy as np
    import ray

    from omnieval.run.decode_cache import CacheClient, MediaCache

    cache = MediaCache.options(name="cache-restart-test", namespace="omnieval-test").remote()
    client = CacheClient("cache-restart-test", "omnieval-test")
    try:
        assert client.statuses(specs) == [""] * len(specs)
        before = client.payloads(specs)
        assert ray.get(cache.decode_counts.remote()) == {s.key: 1 for s in specs}  # decode once
        assert client.payloads(specs) and ray.get(cache.decode_counts.remote()) == {s.key: 1 for s in specs}
        old_refs = ray.get(cache.lookup.remote(specs[:1]))[0]

        os.kill(_pid(cache), signal.SIGKILL)
        after = client.payloads(specs)  # the client looks up again on the restarted actor
        for a, b in zip(after, before, strict=True):  # a fresh decode of the same file: the same arrays
            assert a.content_hash == b.content_hash and np.array_equal(a.data, b.data)
        # the new actor started empty and decoded each key once more
        assert ray.get(cache.decode_counts.remote()) == {s.key: 1 for s in specs}
        assert ray._private.state.state.actor_table(cache._actor_id.hex())["NumRestarts"] == 1
        assert ray.get(cache.lookup.remote(specs[:1]))[0] != old_refs  # the old refs died with their owner

        # objects lost while the cache lives: a reader makes it forget them, and the next lookup decodes again
        pair = ray.get(cache.lookup.remote(specs[:1]))[0]
        ray.get(cache.forget.remote([(specs[0].key, pair)]))
        fresh = ray.get(cache.lookup.remote(specs[:1]))[0]
        assert fresh != pair and ray.get(cache.decode_counts.remote())[specs[0].key] == 2
        ray.get(cache.forget.remote([(specs[0].key, pair)]))  # stale news: the fresh decode is kept
        assert ray.get(cache.lookup.remote(specs[:1]))[0] == fresh

        ray.kill(cache, no_restart=False)  # a kill that allows the restart: the same
        assert client.statuses(specs) == [""] * len(specs)

        ray.kill(cache)  # asked never to come back: a clear error, not a hang
        time.sleep(0.5)
        with pytest.raises(RuntimeError, match="media cache 'cache-restart-test'"):
            CacheClient("cache-restart-test", "omnieval-test").statuses(specs)
    finally:
        ray.kill(cache)
