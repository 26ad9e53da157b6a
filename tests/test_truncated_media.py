"""Media cut short: a WAV whose header declares 2.0 s but whose data holds 1.0 s, and videos whose container
declares more than the frames that decode, raise ``MediaError`` naming the file instead of decoding as a shorter,
complete-looking clip. The files are made by ffmpeg and by Python's ``wave`` module, then cut with their headers
kept."""

from __future__ import annotations

import json
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.benchmark import check_media, load_benchmark
from omnieval.media import decode

RATE = 16000


def wave_module_wav(path: Path, seconds: float = 2.0) -> Path:
    samples = (np.sin(np.arange(int(seconds * RATE)) * 2 * np.pi * 440 / RATE) * 20000).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.tobytes())
    return path


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True, timeout=60)


def cut_data(path: Path, out: Path, keep_seconds: float, byte_rate: int) -> Path:
    """Keep the header and ``keep_seconds`` of the data chunk (the header still declares the whole clip)."""
    data = path.read_bytes()
    start = data.index(b"data") + 8
    out.write_bytes(data[: start + int(keep_seconds * byte_rate)])
    return out


@pytest.fixture(scope="module")
def wavs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("wav")
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=2", "-ar", str(RATE), "-ac", "1", str(d / "ff.wav"))
    full = {"wave": wave_module_wav(d / "wave.wav"), "ffmpeg": d / "ff.wav"}
    out = dict(full)
    for name, path in full.items():
        out[f"{name}-half"] = cut_data(path, d / f"{name}-half.wav", 1.0, 2 * RATE)
        out[f"{name}-nearly"] = cut_data(path, d / f"{name}-nearly.wav", 1.95, 2 * RATE)  # 0.05 s short: kept
    return out


@pytest.mark.parametrize("name", ["wave", "ffmpeg"])
def test_a_wav_cut_in_half_is_refused_by_decode_and_probe(wavs, name):
    with wave.open(str(wavs[f"{name}-half"])) as w:  # the header still says 2.0 s
        assert w.getnframes() == 2 * RATE
    assert decode.decode_audio(wavs[name]).data.shape == (2 * RATE,)
    for check in (decode.decode_audio, lambda p: decode.probe_media(p, "audio"),
                  lambda p: decode.decode_media(p, "audio")):
        with pytest.raises(decode.MediaError, match=rf"{name}-half\.wav: truncated audio.*2\.00 s"):
            check(wavs[f"{name}-half"])
    nearly = decode.decode_audio(wavs[f"{name}-nearly"])  # within the tolerance: decodes what is there
    assert abs(len(nearly.data) / RATE - 1.95) < 0.002
    decode.probe_media(wavs[f"{name}-nearly"], "audio")


def test_tolerance():
    assert decode.allowed_shortfall(1.0) == pytest.approx(0.1)
    assert decode.allowed_shortfall(60.0) == pytest.approx(3.0)


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("video")
    src = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=25:duration=2", "-c:v", "libx264", "-pix_fmt", "yuv420p",
           "-g", "5"]
    ffmpeg(*src, "-movflags", "+faststart", str(d / "v.mp4"))  # index first: a cut keeps the declared duration
    ffmpeg(*src, str(d / "v.mkv"))
    out = {}
    for name in ("v.mp4", "v.mkv"):
        data = (d / name).read_bytes()
        out[name] = d / name
        out[f"half-{name}"] = d / f"half-{name}"
        out[f"half-{name}"].write_bytes(data[: len(data) // 2])
    return out


@pytest.mark.parametrize("name", ["v.mp4", "v.mkv"])
def test_a_video_cut_in_half_is_refused_by_decode(videos, name):
    assert decode.decode_video(videos[name], num_frames=8).meta["duration"] == pytest.approx(2.0)
    with pytest.raises(decode.MediaError, match=rf"half-{name.replace('.', '[.]')}: "):
        decode.decode_video(videos[f"half-{name}"], num_frames=8)


def test_check_media_probe_catches_a_truncated_wav(tmp_path, wavs):
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    bench = make_dissonance_benchmark(tmp_path / "bench", n_anchors=2, n_questions=1, splits=("real",))
    item = json.loads((bench / "items.jsonl").read_text().splitlines()[0])
    audio = bench / item["media"]["audio"]
    assert check_media(load_benchmark(bench), "probe") > 0
    shutil.copy(wavs["wave-half"], audio)
    with pytest.raises(InputError, match="truncated audio") as err:
        check_media(load_benchmark(bench), "probe")
    assert item["media"]["audio"] in str(err.value) and err.value.field.endswith("audio")
    assert check_media(load_benchmark(bench), "exists") > 0  # exists mode checks presence only, as documented
