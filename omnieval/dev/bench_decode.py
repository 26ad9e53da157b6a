"""``omnieval bench decode``: what sampling N frames of a long clip costs, against two references in the same run.

Clips are made here by the ``ffmpeg`` command line (``testsrc2``, a moving test pattern; 30 fps; x264 ``veryfast``
at its default keyframe interval of 250 frames, CRF 23) and kept in ``--workdir`` when given, since a 10-minute
720p clip takes minutes to encode on two cores. Default: 1- and 10-minute 720p H.264 MP4. ``--long`` adds
what takes long to encode: a 30-minute clip, 1080p, HEVC (x265 ``ultrafast``), VP9 (libvpx ``realtime``) and an
MKV copy. ``--quick``: clips of seconds at 160x90 (a smoke test of the bench itself).

For each clip and each frame count (8, 32, 128) the table gives seconds per clip and milliseconds per sampled
frame of

- ``seek``: ``decode_video`` as runs use it (``media.frames``: seek to the keyframe before each sampled frame),
  frames returned as RGB with the longer side at 320 px;
- ``full``: ``decode_video(strategy="full")``, every frame decoded up to the last one sampled (the reference the
  seek path must equal, and what decoding cost before it);
- ``ffmpeg -ss``: ffmpeg's own input seeking, one ``ffmpeg -ss T -i clip -frames:v 1`` process per sampled frame
  (``T`` a quarter frame before the frame the rule picks, so ffmpeg, which keeps the first frame at or after
  ``T``, returns the same one), raw YUV at the stored size: no scaling or RGB conversion, slightly less work.

and the peak memory of one decode: for the in-process decoders the growth of this process's peak RSS (Linux
``VmHWM``, reset before each decode) over its RSS before; for ffmpeg the peak RSS of its largest process, whole
(its libraries included), read from ``/proc`` while it runs. Every decoder runs with 2 threads
(``frames.decode_threads()`` outside Ray). Timings are the best of ``repeats`` after one untimed warm-up decode
(the machine may be shared; other load only adds time). The frames are checked, untimed: the seek path's arrays
equal the full decode's, and its frames' YUV planes equal ffmpeg's bytes.

Targets, each marked met or MISSED: the long clip's 8 frames cost at most 2x the short clip's (per codec and size);
per sampled frame, ``seek`` within 1.25x of the best reference; the memory of one seek decode at most the sampled
frames (RGB) plus one keyframe interval and the decoder threads' frames (YUV at the stored size).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnieval.dev.bench_pipeline import _proc_status, _reset_peak_rss, bench_folder, status_field

THREADS = 2
MAX_SIDE = 320
KEYINT = 250


@dataclass(frozen=True)
class Clip:
    """One generated clip: codec (h264, hevc, vp9), container suffix, length in seconds, width x height."""

    codec: str
    suffix: str
    seconds: float
    width: int
    height: int

    @property
    def name(self) -> str:
        length = f"{self.seconds / 60:g}min" if self.seconds >= 60 else f"{self.seconds:g}s"
        return f"{self.codec}-{self.height}p-{length}.{self.suffix}"


DEFAULT = {"clips": [Clip("h264", "mp4", 60, 1280, 720), Clip("h264", "mp4", 600, 1280, 720)],
           "counts": (8, 32, 128), "repeats": 2, "keyint": KEYINT}
LONG = {"clips": [*DEFAULT["clips"], Clip("h264", "mp4", 1800, 1280, 720), Clip("h264", "mkv", 600, 1280, 720),
                  Clip("h264", "mp4", 60, 1920, 1080), Clip("h264", "mp4", 600, 1920, 1080),
                  Clip("hevc", "mp4", 60, 1280, 720), Clip("hevc", "mp4", 600, 1280, 720),
                  Clip("vp9", "webm", 60, 1280, 720), Clip("vp9", "webm", 600, 1280, 720)],
        "counts": (8, 32, 128), "repeats": 2, "keyint": KEYINT}
QUICK = {"clips": [Clip("h264", "mp4", 2, 160, 90), Clip("h264", "mp4", 8, 160, 90)],
         "counts": (4, 16), "repeats": 1, "keyint": 30}

TARGETS = {"long_vs_short": 2.0, "per_frame": 1.25}
CODECS = {"h264": ["-c:v", "libx264", "-preset", "veryfast", "-crf", "23"],
          "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error"],
          "vp9": ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "2M"]}


def make_clip(clip: Clip, folder: Path, keyint: int) -> Path:
    """The clip's file in ``folder``, encoded unless already there (written under a temporary name first)."""
    path = folder / clip.name
    if path.exists():
        return path
    if clip.suffix == "mkv":  # a stream copy of the MP4 of the same clip
        source = make_clip(Clip(clip.codec, "mp4", clip.seconds, clip.width, clip.height), folder, keyint)
        args = ["-i", str(source), "-c", "copy"]
    else:
        args = ["-f", "lavfi", "-i", f"testsrc2=s={clip.width}x{clip.height}:r=30:d={clip.seconds}",
                *CODECS[clip.codec], "-g", str(keyint), "-pix_fmt", "yuv420p", "-threads", str(THREADS)]
    part = path.with_name(f"part-{path.name}")
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *args, str(part)], check=True)
    part.rename(path)
    return path


def bench_decode(quick: bool = False, long: bool = False, workdir: str | None = None) -> int:
    """Make the clips, measure, print the table; 0 when every frame check passed (targets only reported)."""
    from omnieval.media.decode import decode_video

    size = QUICK if quick else LONG if long else DEFAULT
    with bench_folder(workdir, "omnieval-bench-decode-") as (folder, _runs):
        started = time.perf_counter()
        paths = {clip: make_clip(clip, folder, size["keyint"]) for clip in size["clips"]}
        setup = time.perf_counter() - started
        decode_video(paths[size["clips"][0]], 1)  # warm-up: lazy imports, the codec libraries
        rows = [measure(clip, paths[clip], n, size["repeats"], size["keyint"])
                for clip in size["clips"] for n in size["counts"]]
    print_table(rows, size, setup)
    return 0 if all(row["same_frames"] for row in rows) else 1


# ---------------------------------------------------------------------------------------------------------------
# The measurements
# ---------------------------------------------------------------------------------------------------------------

def _best(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _peak_growth(fn) -> int | None:
    """Growth of this process's peak RSS during ``fn()`` over its RSS before (None where Linux cannot say)."""
    if not _reset_peak_rss():
        return None
    before = _proc_status("VmRSS")
    fn()
    return max(0, _proc_status("VmHWM") - before)


def _picked_times(path: Path, n: int) -> tuple[list, list[float]]:
    """The frames the seek path picks (PyAV frames) and their times from the clip's start."""
    from omnieval.media import decode, frames

    with decode._open(path) as container:
        stream = container.streams.video[0]
        duration = decode._stream_duration(stream, container)
    found = frames.pick_by_seeking(lambda: decode._open(path), decode.sample_times(duration, n), duration,
                                   decode.allowed_shortfall(duration))
    if found is None:
        raise RuntimeError(f"{path}: the seek path fell back to the full decode")
    return found[0], [float(f.pts * f.time_base) for f in found[0]]


def _ffmpeg_frame(path: Path, at: float) -> tuple[bytes, int]:
    """One frame by ffmpeg's input seeking (raw YUV 4:2:0) and the peak RSS of its process in bytes.

    The peak is read from the process's own ``VmHWM`` while it runs (the last reading before it exits): the
    ``ru_maxrss`` that ``wait4`` reports would include this Python process's RSS at the fork before ``exec``."""
    import threading

    proc = subprocess.Popen(["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", str(THREADS), "-ss",
                             f"{at:.6f}", "-i", str(path), "-frames:v", "1", "-f", "rawvideo", "-pix_fmt",
                             "yuv420p", "pipe:"], stdout=subprocess.PIPE)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()))
    reader.start()
    peak = 0
    while proc.poll() is None:
        peak = max(peak, status_field(proc.pid, "VmHWM") or 0)
        time.sleep(0.001)
    reader.join()
    proc.stdout.close()
    if proc.returncode:
        raise RuntimeError(f"ffmpeg failed on {path} at {at:.3f} s")
    return b"".join(chunks), peak


    return None


def _ffmpeg_frames(path: Path, times: list[float], rate: float) -> tuple[list[bytes], int]:
    outs, peak = [], 0
    for t in times:
        out, rss = _ffmpeg_frame(path, max(0.0, t - 0.25 / rate))
        outs.append(out)
        peak = max(peak, rss)
    return outs, peak


def measure(clip: Clip, path: Path, n: int, repeats: int, keyint: int) -> dict:
    """One row: seconds per clip of each decoder, peak memory, and whether the frames agree."""
    from omnieval.media import decode, frames

    threads = frames.decode_threads()
    seek_s, seek = _best(lambda: decode.decode_video(path, n, MAX_SIDE), repeats)
    full_s, full = _best(lambda: decode.decode_video(path, n, MAX_SIDE, strategy="full"), 1)
    seek_mem = _peak_growth(lambda: decode.decode_video(path, n, MAX_SIDE))
    full_mem = _peak_growth(lambda: decode.decode_video(path, n, MAX_SIDE, strategy="full"))
    picked, times = _picked_times(path, n)
    ff_s, (ff_out, ff_mem) = _best(lambda: _ffmpeg_frames(path, times, 30.0), repeats)
    same_yuv = all(np.array_equal(f.to_ndarray(format="yuv420p").reshape(-1), np.frombuffer(raw, np.uint8))
                   for f, raw in zip(picked, ff_out, strict=True))
    frame_bytes = 3 * seek.data.shape[1] * seek.data.shape[2]
    yuv_bytes = clip.width * clip.height * 3 // 2
    return {"clip": clip, "n": n, "seek_s": seek_s, "full_s": full_s, "ffmpeg_s": ff_s, "seek_mem": seek_mem,
            "full_mem": full_mem, "ffmpeg_mem": ff_mem, "same_full": np.array_equal(seek.data, full.data),
            "same_ffmpeg": same_yuv, "same_frames": np.array_equal(seek.data, full.data) and same_yuv,
            "decoded": (seek.meta["decoded_frames"], full.meta["decoded_frames"]),
            "memory_bound": n * frame_bytes + (keyint + threads + 1) * yuv_bytes}


# ---------------------------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------------------------

def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f}"


def _verdict(met: bool | None, target: str) -> str:
    return "not measured" if met is None else f"met ({target})" if met else f"MISSED ({target})"


def print_table(rows: list[dict], size: dict, setup_s: float) -> None:
    """The rows, then the verdicts of the targets (module docstring)."""
    print(f"omnieval bench decode ({os.cpu_count()} cores; {THREADS} decoder threads; frames at {MAX_SIDE} px; "
          f"clips made in {setup_s:.1f} s, keyframe every {size['keyint']} frames)")
    head = (f"{'clip':<24} {'frames':>6} {'seek s':>9} {'full s':>9} {'ffmpeg s':>9} {'seek ms/f':>10} "
            f"{'best ref ms/f':>13} {'ratio':>7} {'decoded':>13} {'MiB seek/full/ffmpeg':>22}  same frames")
    print(head)
    for r in rows:
        n, best = r["n"], min(r["full_s"], r["ffmpeg_s"])
        mem = f"{_mib(r['seek_mem'])}/{_mib(r['full_mem'])}/{_mib(r['ffmpeg_mem'])}"
        same = "yes" if r["same_frames"] else f"NO (full {r['same_full']}, ffmpeg {r['same_ffmpeg']})"
        print(f"{r['clip'].name:<24} {n:>6} {r['seek_s']:>9.3f} {r['full_s']:>9.3f} {r['ffmpeg_s']:>9.3f} "
              f"{1000 * r['seek_s'] / n:>10.2f} {1000 * best / n:>13.2f} {r['seek_s'] / best:>6.2f}x "
              f"{r['decoded'][0]:>6}/{r['decoded'][1]:<6} {mem:>22}  {same}")
    print("verdicts:")
    for met, what, figure, target in verdicts(rows):
        print(f"  {_verdict(met, target)}: {what}: {figure}")


def verdicts(rows: list[dict]) -> list[tuple[bool | None, str, str, str]]:
    """(met, what, figure, target) for every target the rows allow."""
    out = []
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        c = r["clip"]
        groups.setdefault((c.codec, c.suffix, c.height, r["n"]), []).append(r)
    for (*_, n), group in groups.items():
        if n != min(r["n"] for r in rows) or len(group) < 2:
            continue
        short = min(group, key=lambda r: r["clip"].seconds)
        for long in (r for r in group if r is not short):
            ratio = long["seek_s"] / short["seek_s"]
            out.append((ratio <= TARGETS["long_vs_short"], f"{long['clip'].name} vs {short['clip'].name}, {n} frames",
                        f"{ratio:.2f}x", f"<= {TARGETS['long_vs_short']:g}x"))
    for r in rows:
        ratio = r["seek_s"] / min(r["full_s"], r["ffmpeg_s"])
        out.append((ratio <= TARGETS["per_frame"], f"per sampled frame, {r['clip'].name}, {r['n']} frames",
                    f"{ratio:.2f}x the best reference", f"<= {TARGETS['per_frame']:g}x"))
        mem = r["seek_mem"]
        out.append((None if mem is None else mem <= r["memory_bound"], f"memory, {r['clip'].name}, {r['n']} frames",
                    f"{_mib(mem)} MiB", f"<= {_mib(r['memory_bound'])} MiB"))
    return out
