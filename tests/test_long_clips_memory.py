"""A sweep and a run over long clips stream through a small object store without spilling, the bytes the run holds
stay under a bound set by the payloads' sizes and the cache's budget (not by the number of clips), and the driver's
memory stays flat. (The sweep's passes peak higher than one run's bound, by about the payloads a pass's readers
still hold when the next pass starts; they are held to no spilling here.)

The clips are three minutes long but tiny (160x90 at 10 fps, a keyframe every 10 s), made once per test session;
each is sampled to 45 frames upscaled to a ~115k-pixel budget (~17 MiB decoded), and each anchor's call is four
minutes of audio (~15 MiB decoded), against an object store of 200 MiB that the benchmark's eight clips and eight
calls together (~260 MiB) would overflow. The held and spilled bytes are Ray's own (the raylet's store statistics),
sampled while the passes stream. Held bytes are the primary copies: the objects someone still references, which Ray
must keep and spills past its threshold. The store's used bytes are not bounded here: they also count objects every
reader has let go of that Ray has not deleted yet (it deletes them asynchronously, the more slowly the busier the
machine: here up to ~50 MB above the held bytes), which Ray evicts when it needs the room and never spills. The run's
held bytes are counted above what the sweep left once Ray had freed what it would."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STORE_BYTES = 200 * 2**20
SPILL_THRESHOLD = 0.8
"""Ray's default ``object_spilling_threshold``: above this share of the store, Ray spills."""
DECODE = {"fps": 0.25, "min_pixels": 115_200, "max_pixels": 115_200, "size_factor": 28, "media_check": "exists"}
MODEL = {"name": "sim", "engine": "simulated", "replicas": 1, "num_cpus": 0.5, "batch_size": 1,
         "options": {"seed": 4}}


@pytest.fixture(scope="session")
def long_clip(tmp_path_factory) -> Path:
    """A three-minute clip with motion everywhere (ffmpeg's ``testsrc2``) and a four-minute call, made once per
    session."""
    out = tmp_path_factory.mktemp("long-clips") / "base.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration=240",
                    "-ar", "16000", str(out.with_suffix(".wav"))], check=True)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=s=160x90:r=10:d=180",
                    "-c:v", "libx264", "-preset", "ultrafast", "-g", "100", "-pix_fmt", "yuv420p", str(out)],
                   check=True)
    return out


@pytest.fixture(scope="module")
def long_bench(small_bench, long_clip, tmp_path_factory) -> Path:
    """The small synthetic benchmark with each of its eight videos and calls replaced by the long ones, each copy made
    distinct (a comment in its container) so that every one is its own decode key."""
    bench = tmp_path_factory.mktemp("long-bench") / "b"
    shutil.copytree(small_bench, bench)
    for i, video in enumerate(sorted(bench.rglob("video.mp4"))):
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(long_clip), "-c", "copy",
                        "-metadata", f"comment=copy {i}", str(video)], check=True)
    for i, audio in enumerate(sorted(bench.rglob("audio.wav"))):
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(long_clip.with_suffix(".wav")), "-c", "copy",
                        "-metadata", f"comment=copy {i}", str(audio)], check=True)
    return bench


@pytest.fixture(scope="module")
def small_store_ray():
    """A local Ray of its own with a 100 MiB object store; the session's Ray is put back afterwards."""
    import ray
    from conftest import start_local_ray

    had = ray.is_initialized()
    if had:
        ray.shutdown()
    ray.init(address="local", num_cpus=8, object_store_memory=STORE_BYTES, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
    if had:
        start_local_ray()


class StoreWatch:
    """The object store's held bytes (primary copies), sampled every 0.1 s on a thread, and its spilled bytes, from
    the raylet."""

    def __init__(self, ray):
        from ray._private.internal_api import node_stats

        node = ray.nodes()[0]
        self._stats = lambda: node_stats(node["NodeManagerAddress"], node["NodeManagerPort"],
                                         include_memory_info=False).store_stats
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._stats().object_store_bytes_primary_copy)
            self._stop.wait(0.1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def spilled(self) -> int:
        return self._stats().spilled_bytes_total


def _settled_store_bytes(ray, quiet_s: float = 2.0, limit_s: float = 60.0) -> int:
    """The object store's held bytes once they stop falling (Ray frees a finished pass's objects asynchronously, the
    more slowly the busier the machine): sampled every 0.2 s until unchanged for ``quiet_s`` or ``limit_s`` passed."""
    import time

    watch = StoreWatch(ray)
    last, still_since, start = watch._stats().object_store_bytes_primary_copy, time.monotonic(), time.monotonic()
    while time.monotonic() - start < limit_s and time.monotonic() - still_since < quiet_s:
        time.sleep(0.2)
        now = watch._stats().object_store_bytes_primary_copy
        if now != last:
            last, still_since = now, time.monotonic()
    return last


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _payload_bytes(bench: Path) -> tuple[int, int]:
    """One clip's and one call's decoded bytes, by the decoder outside Ray."""
    from omnieval.media.decode import decode_media

    params = {k: v for k, v in DECODE.items() if k != "media_check"}
    video = decode_media(next(bench.rglob("video.mp4")), "video", num_frames=None, **params)
    return video.data.nbytes, decode_media(next(bench.rglob("audio.wav")), "audio").data.nbytes


def test_a_run_and_a_sweep_over_long_clips_keep_the_object_store_and_the_driver_flat(small_store_ray, long_bench,
                                                                                       tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.run.decode_cache import MEDIA_STORE_SHARE
    from omnieval.run.pipeline import run_evaluation
    from omnieval.sweep import SweepRunner, parse_sweep_config

    ray = small_store_ray
    video, audio = _payload_bytes(long_bench)
    files = len(list(long_bench.rglob("video.mp4")))
    assert files * (video + audio) > STORE_BYTES  # all the payloads at once would not fit
    # what may be held at once: the cache's budget, one prefetched payload past it, the payloads of the batch (one
    # row: a clip and a call) the replica answers and of the one before (freed a moment after the reader lets go),
    # and Ray Data's blocks: whatever the number of clips
    bound = MEDIA_STORE_SHARE * STORE_BYTES + max(video, audio) + 2 * (video + audio) + 8 * 2**20
    assert bound < SPILL_THRESHOLD * STORE_BYTES

    sweep = {"name": "long", "output": str(tmp_path / "sweep"), "prompts": ["zs"],
             "protocols": [{"protocol": "dissonance", "benchmark": str(long_bench)}],
             "models": [MODEL, MODEL | {"name": "sim-b", "options": {"seed": 5}}], "decode": DECODE,
             "metrics": {"resamples": 20}, "max_concurrent_models": 1}
    swept = SweepRunner(parse_sweep_config(sweep), log=lambda m: None).run()
    assert [r.status for r in swept.runs] == ["done", "done"]
    run = {"benchmark": str(long_bench), "output": str(tmp_path / "run"), "prompts": ["zs"], "models": [MODEL],
           "decode": DECODE}
    before = _rss()
    settled = _settled_store_bytes(ray)  # the sweep's objects Ray has not freed yet: not the run's
    with StoreWatch(ray) as watch:
        result = run_evaluation(parse_run_config(run), progress=False)
    assert sum(result.decode_counts.values()) >= 2 * files  # no store: every payload decoded again
    for output in [*(Path(r.output) for r in swept.runs), tmp_path / "run"]:
        counts = json.loads((output / "run.json").read_text())["counts"]
        assert counts["errors"] == 0 and counts["predictions"] == counts["instances"], counts
    assert watch.peak - settled <= bound, (watch.peak, settled, bound)
    assert watch.spilled() == 0  # Ray's count since it started: the sweep's passes spilled nothing either
    # the payloads never pass through the driver: over a run that decodes them all (~260 MiB), it grows by less
    # than one payload
    assert _rss() - before < min(video, audio), (_rss() - before, video, audio)
