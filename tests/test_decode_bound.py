"""How much decoding a pass starts, and how much at once: the media cache's bound on decode tasks in flight (seen in
Ray's own task timeline), its byte budget (payload sizes from a decode outside Ray), the warm start's budget (hand
arithmetic from the decode settings), the bound's default, and ``decode.batch_size`` refused."""

from __future__ import annotations

import os
import time

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def many_specs(tmp_path_factory):
    """40 media specs (10 anchors), so looking them all up takes several decode tasks of up to eight files."""
    from conftest import media_specs_of

    specs = media_specs_of(tmp_path_factory.mktemp("bench"), n_anchors=10)
    assert len(specs) == 40
    return specs


def _decode_intervals(ray, since: float) -> list[tuple[float, float]]:
    events = [e for e in ray.timeline()
              if e.get("ph") == "X" and e.get("name") == "omnieval.run.decode_cache.decode_task"
              and e["ts"] / 1e6 >= since]
    return sorted((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6) for e in events)


@pytest.mark.parametrize("parallel", [1, 2])
def test_decode_tasks_in_flight_never_exceed_the_bound(ray_session, many_specs, parallel):
    import ray

    from omnieval.run.decode_cache import CacheClient, MediaCache

    name = f"bound-test-{parallel}"
    since = time.time()
    cache = MediaCache.options(name=name, namespace="omnieval-test").remote(parallel)
    try:
        client = CacheClient(name, "omnieval-test")
        client.request(many_specs[:20])  # started without waiting, as the prefetch map does
        assert client.statuses(many_specs) == [""] * 40  # every file decoded ...
        assert ray.get(cache.decode_counts.remote()) == {s.key: 1 for s in many_specs}  # ... once
        intervals: list = []
        deadline = time.time() + 30
        while len(intervals) < 5 and time.time() < deadline:  # task events reach the timeline about 1 s late
            time.sleep(0.5)
            intervals = _decode_intervals(ray, since)
        time.sleep(1.5)
        intervals = _decode_intervals(ray, since)
        # 40 new files in tasks of up to 8: five tasks where the statuses lookup came first, six (8 + 8 + 4 twice)
        # where the request did (an async actor does not keep the order of calls)
        assert len(intervals) in (5, 6)
    finally:
        ray.kill(cache)
    overlap = max(sum(1 for s, e in intervals if s <= t < e) for t, _ in intervals)
    assert overlap <= parallel


def test_warm_start_takes_the_first_specs_within_the_budget():
    from omnieval.run.decode_cache import MediaSpec, decoded_bound, warm_start

    video = MediaSpec("v", "v.mp4", "video", (("max_side", 160), ("num_frames", 8)))
    audio = MediaSpec("a", "a.wav", "audio", (("sample_rate", 16000),))
    image = MediaSpec("i", "i.png", "image")
    full = MediaSpec("f", "f.mp4", "video", (("max_side", None), ("num_frames", 4)))
    assert decoded_bound(video) == 8 * 160 * 160 * 3 == 614_400
    assert decoded_bound(audio) == 30 * 16000 * 4 == 1_920_000  # a file that declares no length (none here)
    assert decoded_bound(full) == 4 * 1920 * 1080 * 3
    assert decoded_bound(image) == 1920 * 1080 * 3  # no settings: a 1080p frame
    specs = [video, audio, video, image]
    assert warm_start(specs, budget=614_400 + 1_920_000) == [video, audio]  # the next video would pass it
    assert warm_start(specs, budget=614_400 - 1) == []
    assert warm_start(specs, budget=10**9) == specs


def test_an_audio_bound_is_the_length_the_file_declares_cut_to_the_runs_cap(tmp_path):
    """A four-minute call (a WAV written by the standard library's ``wave``, 8 kHz) is bounded at four minutes of
    16 kHz float32, the bytes its decode returns; the run's ``max_audio_seconds`` cuts it; a video's soundtrack (AAC
    by ffmpeg, 90 s) is bounded by its declared length; a file that declares nothing falls back to the cap."""
    import subprocess
    import wave

    from omnieval.media.decode import decode_media
    from omnieval.run.decode_cache import MediaSpec, decoded_bound

    call = tmp_path / "call.wav"
    with wave.open(str(call), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\0\0" * 8000 * 240)
    rate = (("sample_rate", 16000),)
    whole = MediaSpec("call", str(call), "audio", rate)
    assert decoded_bound(whole) == 240 * 16000 * 4 == decode_media(call, "audio").data.nbytes
    assert decoded_bound(MediaSpec("call-60", str(call), "audio", (("max_audio_seconds", 60), *rate))) == 60 * 64000
    assert decoded_bound(MediaSpec("call-600", str(call), "audio", (("max_audio_seconds", 600), *rate))) == 240 * 64000
    clip = tmp_path / "clip.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=300:duration=90",
                    "-f", "lavfi", "-i", "color=s=32x32:r=5:d=90", "-c:a", "aac", "-c:v", "libx264", "-shortest",
                    str(clip)], check=True)
    soundtrack = decode_media(clip, "audio").data.nbytes
    assert 90 * 64000 <= decoded_bound(MediaSpec("clip", str(clip), "audio", rate)) <= 90.1 * 64000
    assert soundtrack <= decoded_bound(MediaSpec("clip", str(clip), "audio", rate))
    missing = MediaSpec("gone", str(tmp_path / "gone.wav"), "audio", (("max_audio_seconds", 20), *rate))
    assert decoded_bound(missing) == 20 * 64000


def test_a_byte_budget_bounds_decoding_ahead_and_drops_what_readers_asked_for(ray_session, many_specs):
    """Room for two payloads: the stream's decode-ahead launches the first two files and waits; a reader asking for
    each file in turn gets every one decoded once, the cache then holds no more than its budget plus the latest
    lookups' payloads, and a file asked for again after it was dropped is decoded again."""
    import ray

    from omnieval.media.decode import decode_media
    from omnieval.run.decode_cache import RECENT_LOOKUPS, CacheClient, MediaCache

    videos = [s for s in many_specs if s.modality == "video"][:10]
    sizes = {decode_media(s.path, "video", **dict(s.params)).data.nbytes for s in videos}
    assert len(sizes) == 1  # every clip of the benchmark has one size: room for exactly two
    size = sizes.pop()
    cache = MediaCache.options(name="budget-test", namespace="omnieval-test").remote(0, 2 * size)
    try:
        client = CacheClient("budget-test", "omnieval-test")
        client.request(videos)
        time.sleep(3)  # the two decodes end; nothing more starts
        assert ray.get(cache.decode_counts.remote()) == {s.key: 1 for s in videos[:2]}
        for spec in videos:
            assert client.statuses([spec]) == [""]
        assert ray.get(cache.decode_counts.remote()) == {s.key: 1 for s in videos}
        assert ray.get(cache.held_bytes.remote()) <= 2 * size + RECENT_LOOKUPS * size
        assert client.statuses(videos[:1]) == [""]
        assert ray.get(cache.decode_counts.remote())[videos[0].key] == 2
    finally:
        ray.kill(cache)


def test_the_bound_on_one_machine_is_its_cores(ray_session):
    from omnieval.run.parallelism import cpu_parallelism

    assert ray_session.cluster_resources()["CPU"] == 8  # logical slots, not cores
    assert cpu_parallelism() == os.cpu_count()


def test_decode_batch_size_is_refused_naming_the_field(tmp_path):
    """``decode.batch_size`` sized the batches of a media stage that existed before the first release: a config
    that sets it is refused like any unknown field, naming it."""
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError

    base = {"benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "out"),
            "models": [{"name": "s", "engine": "simulated"}]}
    with pytest.raises(InputError, match=r"decode\.batch_size"):
        parse_run_config(base | {"decode": {"num_frames": 4, "batch_size": 32}})
    assert parse_run_config(base | {"decode": {"num_frames": 4}}).decode.num_frames == 4


def test_one_cache_per_driver_counts_each_pass_from_zero(ray_session, tmp_path):
    """Two runs in one driver: the same cache actor (no process started for the second), and each run's decode
    counts are its own: every file of its plan decoded once, none carried over from the first."""
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.run.pipeline import run_evaluation
    from omnieval.run.plan import make_plan

    bench = make_dissonance_benchmark(tmp_path / "b", seed=0, n_anchors=2, n_questions=1)

    def config(name: str):
        return parse_run_config({"benchmark": str(bench), "output": str(tmp_path / name),
                                 "models": [{"name": "s", "engine": "simulated"}],
                                 "decode": {"num_frames": 2, "max_side": 32}})

    keys = {spec.key for spec in make_plan(config("plan")).media_specs.values()}
    caches = []
    for name in ("first", "second"):
        result = run_evaluation(config(name), progress=False)
        caches.append({a["ActorID"] for a in ray_session._private.state.state.actor_table(None).values()
                       if a["ActorClassName"] == "MediaCache" and a["State"] == "ALIVE"})
        assert result.decode_counts == dict.fromkeys(keys, 1)
    assert len(caches[0]) == 1 and caches[0] == caches[1]


def test_prefetch_asks_again_in_the_next_pass_of_a_kept_cache(monkeypatch):
    """The driver's cache keeps its name from one pass to the next and forgets every key between them: the prefetch
    map asks once per key within a pass, and again in the next pass."""
    import pyarrow as pa

    from omnieval.run.decode_cache import MediaSource, MediaSpec
    from omnieval.run.stages import prefetch_media

    asked: list[list[str]] = []

    class Recorder:
        def request(self, specs):
            asked.append([s.key for s in specs])

    monkeypatch.setattr(MediaSource, "client", lambda self: Recorder())
    specs = {p: MediaSpec(f"k-{p}", p, "video") for p in ("a.mp4", "b.mp4")}
    batch = pa.table({"media_paths": [["a.mp4", "b.mp4"], ["a.mp4"]]})
    first, second = (MediaSource("cache", "ns", specs, pass_id) for pass_id in ("p1", "p2"))
    for source in (first, first, second):
        assert prefetch_media(batch, media=source) is batch
    assert asked == [["k-a.mp4", "k-b.mp4"], ["k-a.mp4", "k-b.mp4"]]
