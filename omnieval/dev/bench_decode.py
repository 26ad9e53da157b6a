"""``omnieval bench decode``: what sampling N frames of a long clip costs, against three references in the same run.

Clips are made here by the ``ffmpeg`` command line (``testsrc2``, a moving test pattern; 30 fps; x264 ``veryfast``
at its default keyframe interval of 250 frames, CRF 23) and kept in ``--workdir`` when given. A clip longer than a
minute is its one-minute clip repeated by a stream copy (ffmpeg's concat demuxer: one minute's encoding, then a
copy; each minute starts with a keyframe, which a real clip would have within 250 frames anyway), and an MKV is a
stream copy of the MP4: a 30-minute clip costs what a 1-minute one costs to make. Default: 1- and 10-minute 720p
H.264 MP4. ``--long``: 1, 10 and 30 minutes, 720p and 1080p, H.264, HEVC (x265 ``ultrafast``) and VP9 (libvpx
``realtime``), MP4, MKV and WebM, at 8, 32, 128 frames and at 2 fps up to 768 frames (``2fps``: the rate rule of
``media.sampling`` with its defaults); ``--only NAME`` keeps the clips named, ``--counts 8,32`` those counts.
``--quick``: clips of seconds at 160x90 (a smoke test of the bench itself).

For each clip and each frame count the table gives seconds per clip and milliseconds per sampled frame of

- ``seek``: ``decode_video`` as runs use it (``media.frames``: seek to the keyframe before each sampled frame),
  frames returned as RGB with the longer side at 320 px;
- ``full``: ``decode_video(strategy="full")``, every frame decoded up to the last one sampled (the reference the
  seek path must equal, and what decoding cost before it); in ``--long`` only on clips of a minute (its cost is the
  clip's length: minutes for a long clip, ``-`` in the table);
- ``ffmpeg``: ffmpeg's own input seeking, one ``ffmpeg -ss T -i clip -frames:v 1`` process per sampled frame
  (``T`` a quarter frame before the frame the rule picks, so ffmpeg, which keeps the first frame at or after
  ``T``, returns the same one), raw YUV at the stored size: no scaling or RGB conversion, slightly less work.
  Above ``FFMPEG_MAX_FRAMES`` sampled frames it runs at that many of the picked times, spread evenly over them, and
  its seconds and CPU seconds are scaled to the row's count (each frame is its own process, so the frames run are a
  sample of the per-frame cost; the table marks the row);
- ``tc exact`` / ``tc approx``: torchcodec's ``VideoDecoder(...).get_frames_played_at(times)`` at the sampled
  times themselves (its rule is the on-screen rule), ``seek_mode="exact"`` (the file scanned when opened) and
  ``"approximate"`` (the header's frame rate trusted), resized in the decoder to the same 320 px RGB (``Resize``);
  ``n/a`` with the reason printed where torchcodec cannot be imported.

and the peak memory of one decode: for the in-process decoders the growth of this process's peak RSS (Linux
``VmHWM``, reset before each decode) over its RSS before; for ffmpeg the peak RSS of its largest process, whole
(its libraries included), read from ``/proc`` while it runs. Every decoder runs with 2 threads
(``frames.decode_threads()`` outside Ray). Timings are the best of ``repeats`` (one in ``--long``) after one
untimed warm-up decode (the machine may be shared; other load only adds time), the memory that of the last. Each
decoder's CPU seconds are given too (``getrusage``: this process's for the in-process decoders, the ffmpeg
processes' for ffmpeg; least of the repeats), with the seek path's CPU over the best reference's: other load
stretches the seconds, hardly the CPU seconds, so on a shared machine the CPU ratio is the one to read.

The frames are checked, untimed: the seek path's arrays equal the full decode's; and at up to ``CHECKED`` of the
sampled times, spread over them, the frames the seek path picks equal ffmpeg's bytes (YUV planes) and torchcodec's
full-size RGB in both seek modes, pixel for pixel (its resized frames are not compared: its scaler differs).

Targets, each marked met or MISSED: the long clip's 8 frames cost at most 2x the short clip's (per codec, size and
container); per sampled frame, ``seek`` within 1.25x of the best reference (in seconds, and in CPU seconds); the
memory of one seek decode at most the sampled frames (RGB) plus one keyframe interval and the decoder threads'
frames (YUV at the stored size).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from omnieval.dev.bench_pipeline import _proc_status, _reset_peak_rss, bench_folder, status_field

THREADS = 2
MAX_SIDE = 320
KEYINT = 250
SEGMENT = 60  # seconds: a longer clip whose length is a multiple of this is that clip repeated (module docstring)
CHECKED = 8  # sampled frames compared pixel for pixel with ffmpeg's and torchcodec's, spread over a row's
FFMPEG_MAX_FRAMES = 128  # above this the ffmpeg reference (a process per frame) runs on this many spread times, scaled
RATE = "2fps"  # a row sampled by rate: 2 fps within media.sampling's bounds (4 to 768 frames, a multiple of 2)
RATE_FPS = 2.0
NATIVE = {"h264": "mp4", "hevc": "mp4", "vp9": "webm"}  # the container a codec is encoded into; others are copies


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


def _clips(codec: str, suffix: str, width: int, height: int, *minutes: float) -> list[Clip]:
    return [Clip(codec, suffix, 60 * m, width, height) for m in minutes]


DEFAULT = {"clips": _clips("h264", "mp4", 1280, 720, 1, 10), "counts": (8, 32, 128), "repeats": 2,
           "keyint": KEYINT, "full_max_s": None}
LONG = {"clips": [*_clips("h264", "mp4", 1280, 720, 1, 10, 30), *_clips("h264", "mkv", 1280, 720, 1, 10),
                  *_clips("h264", "mp4", 1920, 1080, 1, 10), *_clips("hevc", "mkv", 1920, 1080, 1, 10),
                  *_clips("hevc", "mp4", 1280, 720, 1, 10), *_clips("vp9", "webm", 1280, 720, 1, 10)],
        "counts": (8, 32, 128, RATE), "repeats": 1, "keyint": KEYINT, "full_max_s": SEGMENT}
QUICK = {"clips": [Clip("h264", "mp4", 2, 160, 90), Clip("h264", "mp4", 8, 160, 90)],
         "counts": (4, 16, RATE), "repeats": 1, "keyint": 30, "full_max_s": None}

TARGETS = {"long_vs_short": 2.0, "per_frame": 1.25}
CODECS = {"h264": ["-c:v", "libx264", "-preset", "veryfast", "-crf", "23"],
          "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error"],
          "vp9": ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "2M"]}


def make_clip(clip: Clip, folder: Path, keyint: int) -> Path:
    """The clip's file in ``folder``, made unless already there (written under a temporary name first): encoded,
    or a stream copy of the same clip in its codec's own container, or its one-minute clip repeated."""
    path = folder / clip.name
    if path.exists():
        return path
    listing = None
    if clip.suffix != NATIVE[clip.codec]:
        args = ["-i", str(make_clip(replace(clip, suffix=NATIVE[clip.codec]), folder, keyint)), "-c", "copy"]
    elif clip.seconds > SEGMENT and clip.seconds % SEGMENT == 0:
        segment = make_clip(replace(clip, seconds=SEGMENT), folder, keyint).resolve()
        listing = folder / f"concat-{clip.name}.txt"
        listing.write_text(f"file '{segment}'\n" * int(clip.seconds // SEGMENT))
        args = ["-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy"]
    else:
        args = ["-f", "lavfi", "-i", f"testsrc2=s={clip.width}x{clip.height}:r=30:d={clip.seconds}",
                *CODECS[clip.codec], "-g", str(keyint), "-pix_fmt", "yuv420p", "-threads", str(THREADS)]
    part = path.with_name(f"part-{path.name}")
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *args, str(part)], check=True)
    part.rename(path)
    if listing is not None:
        listing.unlink()
    return path


def torchcodec_missing() -> str | None:
    """None where torchcodec decodes here, else why not, in a line (the bench then runs without it)."""
    try:
        import torch
    except ImportError:
        return "not installed (torch is not)"
    try:
        from torchcodec.decoders import VideoDecoder  # noqa: F401
    except ModuleNotFoundError:
        return f"not installed (torch {torch.__version__})"
    except Exception as exc:  # a wheel built for another torch, or for CUDA libraries absent here
        return f"not loadable with torch {torch.__version__} ({str(exc).strip().splitlines()[0]})"
    return None


def bench_decode(quick: bool = False, long: bool = False, workdir: str | None = None,
                 only: list[str] | None = None, counts: list[str] | None = None) -> int:
    """Make the clips, measure, print the table; 0 when every frame check passed (targets only reported).

    ``only``: clip names to keep (the table's names); ``counts``: frame counts to keep (numbers or ``2fps``)."""
    from omnieval.media.decode import decode_video

    size = dict(QUICK if quick else LONG if long else DEFAULT)
    size["clips"] = [c for c in size["clips"] if not only or c.name in only]
    size["counts"] = [n for n in size["counts"] if not counts or str(n) in counts]
    if not size["clips"] or not size["counts"]:
        print(f"omnieval bench decode: no clip or count left (clips: {', '.join(c.name for c in LONG['clips'])}; "
              f"counts: 8, 32, 128, {RATE})")
        return 2
    missing = torchcodec_missing()
    with bench_folder(workdir, "omnieval-bench-decode-") as (folder, _runs):
        started = time.perf_counter()
        paths = {clip: make_clip(clip, folder, size["keyint"]) for clip in size["clips"]}
        setup = time.perf_counter() - started
        decode_video(paths[size["clips"][0]], 1)  # warm-up: lazy imports, the codec libraries
        print_head(size, setup, missing)
        rows = []
        for clip in size["clips"]:
            for n in size["counts"]:
                rows.append(measure(clip, paths[clip], n, size, missing is None))
                print_row(rows[-1])  # as it comes: a long set runs for long, a stopped one keeps its rows
    print_verdicts(rows)
    return 0 if all(row["same_frames"] for row in rows) else 1


# ---------------------------------------------------------------------------------------------------------------
# The measurements
# ---------------------------------------------------------------------------------------------------------------

def _cpu_seconds(children: bool) -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(fn, repeats: int, children: bool = False) -> tuple[float, float, int | None, object]:
    """(best seconds, least CPU seconds, peak RSS growth of the last run, its result) of ``repeats`` runs of ``fn``.

    CPU seconds are this process's (``children``: those of the processes it waited for, ffmpeg's), all threads
    together: on a shared machine other load stretches the seconds, hardly the CPU seconds."""
    best, cpu, peak, out = float("inf"), float("inf"), None, None
    for _ in range(repeats):
        out = None  # the last run's result is freed before the next one is measured
        reset = _reset_peak_rss()
        before, cpu_before = _proc_status("VmRSS"), _cpu_seconds(children)
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
        cpu = min(cpu, _cpu_seconds(children) - cpu_before)
        peak = max(0, _proc_status("VmHWM") - before) if reset else None
    return best, cpu, peak, out


@dataclass(frozen=True)
class Sampled:
    """A row's sampled times: from the first frame (``targets``), absolute (``seconds``: what torchcodec is asked
    for), and the absolute time of the frame the on-screen rule picks for each (``picked``), from the demuxer."""

    targets: np.ndarray
    seconds: np.ndarray
    picked: np.ndarray
    duration: float


def _sampled(path: Path, n: int) -> Sampled:
    from omnieval.media import decode, frames

    with decode._open(path) as container:
        stream = container.streams.video[0]
        duration = decode._stream_duration(stream, container)
        index = frames.packet_index(container, stream)
    start, targets = index.times[0], decode.sample_times(duration, n)
    at = np.searchsorted(index.times - start, targets + frames.EPS, side="right") - 1
    return Sampled(targets, start + targets, index.times[np.clip(at, 0, None)], duration)


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


def _ffmpeg_frames(path: Path, times: list[float], rate: float) -> tuple[list[bytes], int]:
    outs, peak = [], 0
    for t in times:
        out, rss = _ffmpeg_frame(path, max(0.0, t - 0.25 / rate))
        outs.append(out)
        peak = max(peak, rss)
    return outs, peak


def _torchcodec_frames(path: Path, seconds: np.ndarray, mode: str, size: tuple[int, int] | None = None):
    """torchcodec's frames played at ``seconds`` (NHWC uint8), resized in its decoder to ``(height, width)`` when
    given; the decoder is made here, so an exact-mode call pays for its scan of the file as a run would."""
    from torchcodec.decoders import VideoDecoder
    from torchcodec.transforms import Resize

    decoder = VideoDecoder(str(path), seek_mode=mode, num_ffmpeg_threads=THREADS, dimension_order="NHWC",
                           transforms=[Resize(size)] if size else None)
    return decoder.get_frames_played_at([float(s) for s in seconds]).data.numpy()


def _rule_args(n: int | str) -> dict:
    return {"num_frames": None, "fps": RATE_FPS} if n == RATE else {"num_frames": n}


def measure(clip: Clip, path: Path, n: int | str, size: dict, torchcodec: bool) -> dict:
    """One row: seconds per clip of each decoder, peak memory, and whether the frames agree."""
    from omnieval.media import decode, frames

    repeats, threads = size["repeats"], frames.decode_threads()
    seek_s, seek_cpu, seek_mem, seek = _timed(
        lambda: decode.decode_video(path, max_side=MAX_SIDE, **_rule_args(n)), repeats)
    count, height, width = seek.data.shape[:3]
    sampled = _sampled(path, count)
    row = {"clip": clip, "n": n, "count": count, "seek_s": seek_s, "seek_cpu": seek_cpu, "seek_mem": seek_mem,
           "decoded": seek.meta["decoded_frames"], "checks": {}}
    if size["full_max_s"] is None or clip.seconds <= size["full_max_s"]:
        row["full_s"], row["full_cpu"], row["full_mem"], full = _timed(
            lambda: decode.decode_video(path, max_side=MAX_SIDE, strategy="full", **_rule_args(n)), 1)
        row["full_decoded"] = full.meta["decoded_frames"]
        row["checks"]["full"] = np.array_equal(seek.data, full.data)
    ff_at = _spread(count, FFMPEG_MAX_FRAMES)
    row["ffmpeg_run"] = len(ff_at)
    row["ffmpeg_s"], row["ffmpeg_cpu"], _, (ff_run, row["ffmpeg_mem"]) = _timed(
        lambda: _ffmpeg_frames(path, list(sampled.picked[ff_at]), 30.0), repeats, children=True)
    row["ffmpeg_s"] *= count / len(ff_at)
    row["ffmpeg_cpu"] *= count / len(ff_at)
    checked = set(_spread(count, CHECKED).tolist())  # only these are compared: the others are not held
    ff_out = {i: raw for i, raw in zip(ff_at.tolist(), ff_run, strict=True) if i in checked}
    del ff_run
    for mode in ("exact", "approximate") if torchcodec else ():
        row[f"tc_{mode}_s"], row[f"tc_{mode}_cpu"], row[f"tc_{mode}_mem"], _ = _timed(
            lambda mode=mode: _torchcodec_frames(path, sampled.seconds, mode, (height, width)), repeats)
    row["checks"].update(_check_picks(path, sampled, ff_out, torchcodec))
    row["same_frames"] = all(row["checks"].values())
    yuv_bytes = clip.width * clip.height * 3 // 2
    row["memory_bound"] = count * 3 * height * width + (size["keyint"] + threads + 1) * yuv_bytes
    return row


def _spread(count: int, most: int) -> np.ndarray:
    """At most ``most`` indices of ``count`` sampled frames, spread evenly over them, first and last included."""
    return np.unique(np.linspace(0, count - 1, min(most, count)).round().astype(int))


def _check_picks(path: Path, sampled: Sampled, ff_out: dict[int, bytes], torchcodec: bool) -> dict:
    """Whether the seek path's picks at up to ``CHECKED`` spread sampled times equal ffmpeg's YUV bytes and
    torchcodec's full-size RGB (both seek modes), by reference. ``ff_out``: ffmpeg's frames of the timed run by
    sampled index; a checked index it did not run is asked of ffmpeg here, untimed."""
    from omnieval.media import decode, frames

    at = _spread(len(sampled.targets), CHECKED)
    found = frames.pick_by_seeking(lambda: decode._open(path), sampled.targets[at], sampled.duration,
                                   decode.allowed_shortfall(sampled.duration), path)
    if found is None:
        return {"seek path": False}  # it fell back to the full decode: nothing of its own to compare
    picks = found[0]
    checks = {"picked time": [float(f.pts * f.time_base) for f in picks] == list(sampled.picked[at])}
    missing = [i for i in at.tolist() if i not in ff_out]
    ff_out = {**ff_out, **dict(zip(missing, _ffmpeg_frames(path, list(sampled.picked[missing]), 30.0)[0],
                                    strict=True))}
    checks["ffmpeg"] = all(np.array_equal(f.to_ndarray(format="yuv420p").reshape(-1), np.frombuffer(raw, np.uint8))
                           for f, raw in zip(picks, [ff_out[i] for i in at.tolist()], strict=True))
    for mode in ("exact", "approximate") if torchcodec else ():
        theirs = _torchcodec_frames(path, sampled.seconds[at], mode)
        checks[f"torchcodec {mode}"] = all(np.array_equal(f.to_ndarray(format="rgb24"), x)
                                           for f, x in zip(picks, theirs, strict=True))
    return checks


# ---------------------------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------------------------

REFERENCES = ("full", "ffmpeg", "tc_exact", "tc_approximate")


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f}"


def _secs(row: dict, ref: str) -> str:
    return f"{row[ref + '_s']:.3f}" if ref + "_s" in row else "-"


def best_reference(row: dict, unit: str = "s") -> float:
    """The fastest reference measured in the row: seconds (``unit`` ``"s"``) or CPU seconds (``"cpu"``)."""
    return min(row[f"{ref}_{unit}"] for ref in REFERENCES if ref + "_s" in row)


def cpu_ratio(row: dict) -> float:
    """The seek path's CPU seconds over the best reference's (1 ms at least: CPU time is counted in ticks)."""
    return row["seek_cpu"] / max(best_reference(row, "cpu"), 1e-3)


def _verdict(met: bool | None, target: str) -> str:
    return "not measured" if met is None else f"met ({target})" if met else f"MISSED ({target})"


def print_head(size: dict, setup_s: float, torchcodec_missing: str | None) -> None:
    """The table's title, torchcodec's absence (why) and the column names; rows follow (module docstring)."""
    print(f"omnieval bench decode ({os.cpu_count()} cores; {THREADS} decoder threads; frames at {MAX_SIDE} px; "
          f"clips made in {setup_s:.1f} s, keyframe every {size['keyint']} frames)")
    if torchcodec_missing:
        print(f"torchcodec: {torchcodec_missing}")
    print(f"{'clip':<24} {'rule':>5} {'frames':>6} {'seek s':>9} {'full s':>9} {'ffmpeg s':>9} {'tc exact s':>10} "
          f"{'tc approx s':>11} {'seek ms/f':>10} {'best ref ms/f':>13} {'ratio':>7} {'decoded':>13} "
          f"{'MiB seek/full/ffmpeg/tc exact/tc approx':>40} {'CPU s seek/full/ffmpeg/tc exact/tc approx':>42} "
          f"{'ratio':>7}  same frames", flush=True)


def print_row(r: dict) -> None:
    n, best = r["count"], best_reference(r)
    mem = "/".join(_mib(r.get(k + "_mem")) if k + "_s" in r or k == "seek" else "-" for k in ("seek", *REFERENCES))
    cpu = "/".join(f"{r[k + '_cpu']:.2f}" if k + "_s" in r else "-" for k in ("seek", *REFERENCES))
    failed = [name for name, ok in r["checks"].items() if not ok]
    same = "yes" if not failed else f"NO ({', '.join(failed)})"
    print(f"{r['clip'].name:<24} {r['n']!s:>5} {n:>6} {r['seek_s']:>9.3f} {_secs(r, 'full'):>9} "
          f"{_secs(r, 'ffmpeg'):>9} {_secs(r, 'tc_exact'):>10} {_secs(r, 'tc_approximate'):>11} "
          f"{1000 * r['seek_s'] / n:>10.2f} {1000 * best / n:>13.2f} {r['seek_s'] / best:>6.2f}x "
          f"{r['decoded']:>6}/{r.get('full_decoded', '-')!s:<6} {mem:>40} {cpu:>42} "
          f"{cpu_ratio(r):>6.2f}x  {same}", flush=True)
    if r["ffmpeg_run"] < n:
        print(f"  (ffmpeg run at {r['ffmpeg_run']} of the {n} sampled times, spread over them; its seconds and CPU "
              f"seconds scaled by {n / r['ffmpeg_run']:.2f})", flush=True)


def print_verdicts(rows: list[dict]) -> None:
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
    fewest = min((r["n"] for r in rows if r["n"] != RATE), default=None)
    for (*_, n), group in groups.items():
        if n != fewest or len(group) < 2:
            continue
        short = min(group, key=lambda r: r["clip"].seconds)
        for long in (r for r in group if r is not short):
            ratio = long["seek_s"] / short["seek_s"]
            out.append((ratio <= TARGETS["long_vs_short"], f"{long['clip'].name} vs {short['clip'].name}, {n} frames",
                        f"{ratio:.2f}x", f"<= {TARGETS['long_vs_short']:g}x"))
    for r in rows:
        ratio = r["seek_s"] / best_reference(r)
        what = f"{r['clip'].name}, {r['count']} frames" + (f" ({r['n']})" if r["n"] == RATE else "")
        out.append((ratio <= TARGETS["per_frame"], f"per sampled frame, {what}", f"{ratio:.2f}x the best reference",
                    f"<= {TARGETS['per_frame']:g}x"))
        ratio = cpu_ratio(r)
        out.append((ratio <= TARGETS["per_frame"], f"CPU per sampled frame, {what}",
                    f"{ratio:.2f}x the best reference", f"<= {TARGETS['per_frame']:g}x"))
        mem = r["seek_mem"]
        out.append((None if mem is None else mem <= r["memory_bound"], f"memory, {what}", f"{_mib(mem)} MiB",
                    f"<= {_mib(r['memory_bound'])} MiB"))
    return out
