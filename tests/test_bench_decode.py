"""``omnieval bench decode --quick``: the table has a row per clip and frame count, its derived figures agree with
the figures printed beside them, and its frames equal every reference's (the full decode's arrays, ffmpeg's bytes,
torchcodec's pixels where it is installed). The clip generation and the two out-of-process references are checked
against PyAV's own decode of every frame.

No timing is asserted (the machine may be loaded); the ratio and the verdicts are recomputed from the printed
seconds within their display rounding."""

from __future__ import annotations

import re

import pytest

from omnieval.dev import bench_decode
from omnieval.dev.bench_decode import QUICK, RATE, TARGETS, torchcodec_missing

SECS = r"([\d.]+|-)"
ROW = re.compile(rf"^(\S+\.(?:mp4|mkv|webm))\s+(\S+)\s+(\d+)\s+([\d.]+)\s+{SECS}\s+{SECS}\s+{SECS}\s+{SECS}\s+"
                 r"([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+(\d+)/(\S+)\s+(\S+)\s+(\S+)\s+([\d.]+)x\s+(.+)$")


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    import contextlib
    import io

    from omnieval.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "decode", "--quick", "--workdir", str(tmp_path_factory.mktemp("bench-decode"))])
    return code, out.getvalue()


def _frames_at_2fps(seconds: float) -> int:
    """Qwen's rule, written out: round(duration * 2) clamped to 4..768, down to a multiple of 2."""
    return min(max(round(seconds * 2), 4), 768) // 2 * 2


@pytest.mark.slow
def test_quick_bench_has_a_row_per_clip_and_count_with_the_reference_frames(printed):
    code, text = printed
    assert code == 0, text
    rows = [ROW.match(line) for line in text.splitlines() if ROW.match(line)]
    assert [(m[1], m[2]) for m in rows] == [(f"h264-90p-{c.seconds:g}s.mp4", str(n)) for c in QUICK["clips"]
                                            for n in QUICK["counts"]], text
    expected = [n if n != RATE else _frames_at_2fps(c.seconds) for c in QUICK["clips"] for n in QUICK["counts"]]
    assert [int(m[3]) for m in rows] == expected
    tc = torchcodec_missing() is None
    assert ("torchcodec: " in text) != tc, text  # the reason it is left out, exactly when it is
    for m in rows:
        n, seek = int(m[3]), float(m[4])
        refs = [float(m[i]) for i in (5, 6, 7, 8) if m[i] != "-"]
        assert (m[7] != "-") == (m[8] != "-") == tc, m[0]
        assert m[17] == "yes", m[0]  # the seek path's frames equal every reference's
        cpu = [float(x) if x != "-" else None for x in m[15].split("/")]
        assert [x is None for x in cpu[1:]] == [m[i] == "-" for i in (5, 6, 7, 8)], m[0]
        best_cpu = max(min(x for x in cpu[1:] if x is not None), 0.001)
        if best_cpu >= 0.05:  # CPU seconds printed to 2 decimals
            lo, hi = (cpu[0] - 0.005) / (best_cpu + 0.005), (cpu[0] + 0.005) / (best_cpu - 0.005)
            assert lo - 0.006 <= float(m[16]) <= hi + 0.006, m[0]
        best = min(refs)
        slack = 1000 * 0.0005 / n + 0.006  # seconds printed to 3 decimals, ms per frame to 2
        assert float(m[9]) == pytest.approx(1000 * seek / n, abs=slack)
        assert float(m[10]) == pytest.approx(1000 * best / n, abs=slack)
        if best > 0.01:  # ratios of seconds printed to 3 decimals
            lo, hi = (seek - 0.0005) / (best + 0.0005), (seek + 0.0005) / max(best - 0.0005, 1e-9)
            assert lo - 0.006 <= float(m[11]) <= hi + 0.006, m[0]
        assert 0 < int(m[12]) <= int(m[13]), m[0]  # never more frames decoded than by the full decode


@pytest.mark.slow
def test_quick_bench_marks_each_target_met_or_missed(printed):
    _, text = printed
    verdicts = [line.strip() for line in text.split("verdicts:")[1].splitlines() if line.strip()]
    n_rows = len(QUICK["clips"]) * len(QUICK["counts"])
    assert len(verdicts) == 1 + 3 * n_rows  # long vs short at the fewest frames; per frame (seconds, CPU), memory
    assert re.fullmatch(rf"(met|MISSED) \(<= {TARGETS['long_vs_short']:g}x\): h264-90p-8s\.mp4 vs h264-90p-2s\.mp4, "
                        r"4 frames: [\d.]+x", verdicts[0])
    for line in verdicts[1:]:
        assert re.fullmatch(r"(met|MISSED) \(<= [\d.]+(x| MiB)\): (per sampled frame|CPU per sampled frame|memory), "
                            r".+|not measured: .+",
                            line), line


def _every_frame(path):
    import av

    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def test_the_ffmpeg_reference_returns_the_frame_the_rule_picks(tmp_path):
    """ffmpeg's ``-ss`` keeps the first frame at or after the time; a quarter frame before the picked frame's time
    it returns that frame: compared with PyAV's own decode of every frame, in YUV."""
    import numpy as np

    from omnieval.dev.bench_decode import Clip, _ffmpeg_frames, make_clip

    path = make_clip(Clip("h264", "mp4", 2, 160, 90), tmp_path, keyint=12)
    picks = [_every_frame(path)[i] for i in (0, 7, 13, 40)]
    outs, peak = _ffmpeg_frames(path, [float(f.pts * f.time_base) for f in picks], 30.0)
    assert peak > 0
    for frame, raw in zip(picks, outs, strict=True):
        assert np.array_equal(frame.to_ndarray(format="yuv420p").reshape(-1), np.frombuffer(raw, np.uint8))


def test_the_torchcodec_reference_returns_the_frame_on_screen(tmp_path):
    """torchcodec's frame played at a time between two frames is the earlier one, in both seek modes: compared with
    PyAV's own decode of every frame, in RGB at the stored size."""
    if torchcodec_missing():
        pytest.skip(f"torchcodec: {torchcodec_missing()}")
    import numpy as np

    from omnieval.dev.bench_decode import Clip, _torchcodec_frames, make_clip

    path = make_clip(Clip("h264", "mp4", 2, 160, 90), tmp_path, keyint=12)
    every = _every_frame(path)
    picks = [0, 7, 13, 40, 59]
    seconds = np.array([float(every[i].pts * every[i].time_base) + 0.6 / 30 for i in picks])
    for mode in ("exact", "approximate"):
        got = _torchcodec_frames(path, seconds, mode)
        for i, x in zip(picks, got, strict=True):
            assert np.array_equal(every[i].to_ndarray(format="rgb24"), x), (mode, i)


def test_a_long_clip_is_its_segment_repeated_and_an_mkv_its_stream_copy(tmp_path, monkeypatch):
    """A clip of k segments has k times the segment's frames, at increasing times a frame apart, each equal to the
    segment's frame at the same place (PyAV's decode of the segment, in YUV); the MKV's frames equal the MP4's."""
    import numpy as np

    from omnieval.dev.bench_decode import Clip, make_clip

    monkeypatch.setattr(bench_decode, "SEGMENT", 1)
    segment = _every_frame(make_clip(Clip("h264", "mp4", 1, 160, 90), tmp_path, keyint=12))
    long = _every_frame(make_clip(Clip("h264", "mkv", 3, 160, 90), tmp_path, keyint=12))
    assert not list(tmp_path.glob("*.txt")) and not list(tmp_path.glob("part-*"))  # no leftovers
    as_mp4 = _every_frame(tmp_path / "h264-90p-3s.mp4")
    assert len(segment) == 30 and len(long) == len(as_mp4) == 90
    times = np.array([float(f.pts * f.time_base) for f in long])
    assert np.allclose(np.diff(times), 1 / 30, atol=1e-3) and times[0] == pytest.approx(0, abs=1e-3)
    for i, (frame, copy) in enumerate(zip(long, as_mp4, strict=True)):
        ours = frame.to_ndarray(format="yuv420p")
        assert np.array_equal(ours, segment[i % 30].to_ndarray(format="yuv420p")), i
        assert np.array_equal(ours, copy.to_ndarray(format="yuv420p")), i


def test_only_and_counts_keep_what_they_name_and_say_what_is_there(capsys):
    assert bench_decode.bench_decode(long=True, only=["no-such-clip.mp4"]) == 2
    out = capsys.readouterr().out
    assert "h264-720p-30min.mp4" in out and "2fps" in out  # the names that can be given


def test_above_the_cap_ffmpeg_runs_at_spread_times_its_cost_scaled_and_the_checked_frames_compared(tmp_path,
                                                                                                   monkeypatch):
    """A row of more sampled frames than ``FFMPEG_MAX_FRAMES`` runs ffmpeg at that many of the picked times, spread
    evenly (first and last included), and scales its seconds and CPU seconds by count / run; the checked times it
    did not run are asked of ffmpeg untimed, and compared. The picked times are worked out here from PyAV's decode
    of every frame and the on-screen rule (16 bin centres over the 2 s clip), the costs from fixed timings."""
    from omnieval.dev.bench_decode import Clip, make_clip, measure

    path = make_clip(Clip("h264", "mp4", 2, 160, 90), tmp_path, keyint=12)
    times = [float(f.pts * f.time_base) for f in _every_frame(path)]
    assert len(times) == 60
    on_screen = [max(t for t in times if t - times[0] <= (i + 0.5) * 2.0 / 16 + 1e-9) for i in range(16)]
    asked = []
    real = bench_decode._ffmpeg_frames

    def ffmpeg_frames(clip, at, rate):
        asked.append(list(at))
        return real(clip, at, rate)

    def timed(fn, repeats, children=False):
        return 3.0, 1.5, 0, fn()

    monkeypatch.setattr(bench_decode, "FFMPEG_MAX_FRAMES", 3)
    monkeypatch.setattr(bench_decode, "_ffmpeg_frames", ffmpeg_frames)
    monkeypatch.setattr(bench_decode, "_timed", timed)
    row = measure(Clip("h264", "mp4", 2, 160, 90), path, 16, {"repeats": 1, "keyint": 12, "full_max_s": None},
                  torchcodec=False)
    assert row["count"] == 16 and row["ffmpeg_run"] == 3
    assert asked[0] == [on_screen[i] for i in (0, 8, 15)]  # linspace(0, 15, 3) rounded: 0, 7.5 -> 8, 15
    assert row["ffmpeg_s"] == pytest.approx(3.0 * 16 / 3) and row["ffmpeg_cpu"] == pytest.approx(1.5 * 16 / 3)
    assert asked[1] == [on_screen[i] for i in (2, 4, 6, 9, 11, 13)]  # the 8 checked, less those run
    assert row["checks"]["ffmpeg"] and row["same_frames"], row["checks"]
