"""``omnieval bench decode --quick``: the table has a row per clip and frame count, its derived figures agree with
the figures printed beside them, and its frames equal both references' (the full decode's arrays, ffmpeg's bytes).

No timing is asserted (the machine may be loaded); the ratio and the verdicts are recomputed from the printed
seconds within their display rounding."""

from __future__ import annotations

import re

import pytest

from omnieval.dev.bench_decode import QUICK, TARGETS

ROW = re.compile(r"^(\S+\.(?:mp4|mkv|webm))\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+"
                 r"([\d.]+)x\s+(\d+)/(\d+)\s+(\S+)/(\S+)/(\S+)\s+(.+)$")


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    import contextlib
    import io

    from omnieval.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "decode", "--quick", "--workdir", str(tmp_path_factory.mktemp("bench-decode"))])
    return code, out.getvalue()


@pytest.mark.slow
def test_quick_bench_has_a_row_per_clip_and_count_with_the_reference_frames(printed):
    code, text = printed
    assert code == 0, text
    rows = [ROW.match(line) for line in text.splitlines() if ROW.match(line)]
    names = [f"h264-90p-{c.seconds:g}s.mp4" for c in QUICK["clips"]]
    assert [(m[1], int(m[2])) for m in rows] == [(name, n) for name in names for n in QUICK["counts"]], text
    for m in rows:
        seek, full, ffmpeg = (float(m[i]) for i in (3, 4, 5))
        assert m[14] == "yes", m[0]  # the seek path's frames equal the full decode's and ffmpeg's
        best, n = min(full, ffmpeg), int(m[2])
        slack = 1000 * 0.0005 / n + 0.006  # seconds printed to 3 decimals, ms per frame to 2
        assert float(m[6]) == pytest.approx(1000 * seek / n, abs=slack)
        assert float(m[7]) == pytest.approx(1000 * best / n, abs=slack)
        if best > 0.01:  # ratios of seconds printed to 3 decimals
            lo, hi = (seek - 0.0005) / (best + 0.0005), (seek + 0.0005) / max(best - 0.0005, 1e-9)
            assert lo - 0.006 <= float(m[8]) <= hi + 0.006, m[0]
        assert 0 < int(m[9]) <= int(m[10]), m[0]  # never more frames decoded than by the full decode


@pytest.mark.slow
def test_quick_bench_marks_each_target_met_or_missed(printed):
    _, text = printed
    verdicts = [line.strip() for line in text.split("verdicts:")[1].splitlines() if line.strip()]
    n_rows = len(QUICK["clips"]) * len(QUICK["counts"])
    assert len(verdicts) == 1 + 2 * n_rows  # long vs short at the fewest frames; per frame and memory per row
    assert re.fullmatch(rf"(met|MISSED) \(<= {TARGETS['long_vs_short']:g}x\): h264-90p-8s\.mp4 vs h264-90p-2s\.mp4, "
                        r"4 frames: [\d.]+x", verdicts[0])
    for line in verdicts[1:]:
        assert re.fullmatch(r"(met|MISSED) \(<= [\d.]+(x| MiB)\): (per sampled frame|memory), .+|not measured: .+",
                            line), line


def test_the_ffmpeg_reference_returns_the_frame_the_rule_picks(tmp_path):
    """ffmpeg's ``-ss`` keeps the first frame at or after the time; a quarter frame before the picked frame's time
    it returns that frame: compared with PyAV's own decode of every frame, in YUV."""
    import av
    import numpy as np

    from omnieval.dev.bench_decode import Clip, _ffmpeg_frames, make_clip

    path = make_clip(Clip("h264", "mp4", 2, 160, 90), tmp_path, keyint=12)
    with av.open(str(path)) as container:
        every = list(container.decode(video=0))
    picks = [every[i] for i in (0, 7, 13, 40)]
    outs, peak = _ffmpeg_frames(path, [float(f.pts * f.time_base) for f in picks], 30.0)
    assert peak > 0
    for frame, raw in zip(picks, outs, strict=True):
        assert np.array_equal(frame.to_ndarray(format="yuv420p").reshape(-1), np.frombuffer(raw, np.uint8))
