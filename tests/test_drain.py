"""The drain writes each finished block as it arrives: the parts are the run's resume log, so a block held back
on the driver is work a crash loses (Ray Data's default prefetch held each block until the next had finished)."""

from __future__ import annotations

import time

import pyarrow as pa


def test_each_block_is_written_before_the_next_one_finishes(ray_session, monkeypatch):
    import ray.data
    from ray.data import ActorPoolStrategy

    from omnieval.run import stages

    class Slow:  # defined here, so that Ray ships it by value (workers cannot import a test module)
        """One block at a time (an actor pool of one), each taking ``seconds``; stamps when it finished."""

        def __init__(self, seconds: float):
            self.seconds = seconds

        def __call__(self, batch: pa.Table) -> pa.Table:
            time.sleep(self.seconds)
            return batch.append_column("finished", pa.array([time.time()] * batch.num_rows))

    monkeypatch.setattr(stages, "FLUSH_SECONDS", 0.0)  # write whatever has arrived, at once
    ds = ray.data.range(3, override_num_blocks=3).map_batches(
        Slow, fn_constructor_kwargs={"seconds": 1.5}, compute=ActorPoolStrategy(size=1), batch_size=None,
        batch_format="pyarrow", num_cpus=0.5)
    writes: list[tuple[float, list[float]]] = []
    n = stages.drain(ds, 3, "test", lambda table: writes.append((time.time(), table["finished"].to_pylist())),
                     progress=False)
    assert n == 3 and len(writes) == 3
    finished = sorted(f for _, stamps in writes for f in stamps)
    first_written = writes[0][0]
    assert first_written < finished[1], (first_written - finished[0], finished[1] - finished[0])
