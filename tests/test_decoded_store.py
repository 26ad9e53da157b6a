"""The decoded-media store: what a read gives back equals what ``decode_media`` gives (every modality, bit for bit
and type for type); a corrupted, truncated or misnamed entry is never served but removed and decoded again; a
killed writer leaves no entry; a decode that fails stores nothing. Then runs: a run with a store decodes each key
once and a second run reads them all; damaged entries are counted in ``run.json`` and decoded again; the
predictions equal those of a run without a store, and the store does not enter the run's identity."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from omnieval.media.decode import decode_media
from omnieval.media.decoded import content_hash
from omnieval.media.decoded_store import DecodedStore, encode
from omnieval.media.spec import MediaSpec
from omnieval.media.synth import beep_audio, moving_box_video, still_image
from omnieval.run.decode_cache import decode_through

PARAMS = {"video": {"num_frames": 4, "max_side": 96}, "audio": {"sample_rate": 16_000}, "image": {},
          "pointcloud": {}}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("store-media")
    points = np.random.default_rng(0).normal(size=(500, 3)).astype(np.float32)
    np.save(d / "cloud.npy", points)
    return {"video": moving_box_video(d / "v.mp4", colour="red", speed=100, duration=2.0, fps=8),
            "audio": beep_audio(d / "a.wav", frequency=500, beeps=2, duration=1.0),
            "image": still_image(d / "i.png", colour="blue", size=(40, 30)),
            "pointcloud": d / "cloud.npy"}


def _spec(path, modality: str) -> MediaSpec:
    params = {"modality": modality, **PARAMS[modality]}
    return MediaSpec(content_hash(path, **params), str(path), modality, tuple(sorted(PARAMS[modality].items())))


def _assert_identical(got, want) -> None:
    assert got.data.dtype == want.data.dtype and got.data.shape == want.data.shape
    assert got.data.tobytes() == want.data.tobytes()
    for name in ("modality", "content_hash", "path", "fps", "sample_rate", "meta"):
        assert type(getattr(got, name)) is type(getattr(want, name)), name
        assert getattr(got, name) == getattr(want, name), name
    assert list(got.meta) == list(want.meta)


@pytest.mark.parametrize("modality", ["video", "audio", "image", "pointcloud"])
def test_a_stored_entry_reads_back_as_the_decode(files, tmp_path, modality):
    store = DecodedStore(str(tmp_path / "store"))
    spec = _spec(files[modality], modality)
    direct = decode_media(files[modality], modality, **PARAMS[modality])
    status, first, kind = decode_through(spec, store)
    assert (status, kind) == ("", "decoded") and store.keys() == [spec.key]
    status, again, kind = decode_through(spec, store)
    assert (status, kind) == ("", "hit")
    _assert_identical(first, direct)
    _assert_identical(again, direct)
    # the same bytes under another path: the entry is served with the path asked for
    moved = MediaSpec(spec.key, "/elsewhere/" + Path(spec.path).name, spec.modality, spec.params)
    assert store.read(moved.key, moved.path).media.path == moved.path


def _damage(path: Path, how: str) -> None:
    blob = bytearray(path.read_bytes())
    if how == "flipped":
        blob[len(blob) // 2] ^= 0xFF  # one byte of the array
        path.write_bytes(bytes(blob))
    else:
        path.write_bytes(bytes(blob[: len(blob) - 100]))


@pytest.mark.parametrize("how", ["flipped", "truncated"])
def test_a_damaged_entry_is_rejected_removed_and_decoded_again(files, tmp_path, how):
    store = DecodedStore(str(tmp_path / "store"))
    spec = _spec(files["video"], "video")
    decode_through(spec, store)
    entry = Path(store.entry_path(spec.key))
    _damage(entry, how)
    found = store.read(spec.key, spec.path)
    assert found.status == "rejected" and found.media is None and not entry.exists()
    assert decode_through(spec, store)[2] == "decoded" and entry.exists()  # a miss now: decoded, stored afresh
    _damage(entry, how)
    status, media, kind = decode_through(spec, store)
    assert (status, kind) == ("", "rejected")
    _assert_identical(media, decode_media(files["video"], "video", **PARAMS["video"]))
    assert decode_through(spec, store)[2] == "hit"  # the new entry is whole


def test_the_entry_of_another_key_is_rejected(files, tmp_path):
    store = DecodedStore(str(tmp_path / "store"))
    video, audio = _spec(files["video"], "video"), _spec(files["audio"], "audio")
    decode_through(video, store)
    Path(store.entry_path(audio.key)).parent.mkdir(parents=True, exist_ok=True)
    Path(store.entry_path(video.key)).rename(store.entry_path(audio.key))
    assert store.read(audio.key, audio.path).status == "rejected"


def test_a_killed_writer_leaves_no_entry_and_two_writers_agree(files, tmp_path):
    store = DecodedStore(str(tmp_path / "store"))
    spec = _spec(files["image"], "image")
    media = decode_media(files["image"], "image")
    entry = Path(store.entry_path(spec.key))
    entry.parent.mkdir(parents=True)
    # what a writer killed before its rename leaves: a temporary file, never read as the entry
    Path(f"{entry}.tmp-deadbeef").write_bytes(encode(spec.key, media)[:50])
    assert store.read(spec.key, spec.path).status == "miss" and store.keys() == []
    assert store.write(spec.key, media) and store.write(spec.key, media)
    _assert_identical(store.read(spec.key, spec.path).media, media)
    # the header and checksum as documented: SHA-256 of everything before the last 32 bytes
    blob = entry.read_bytes()
    assert hashlib.sha256(blob[:-32]).digest() == blob[-32:]


def _parts(blob: bytes) -> tuple[bytes, dict, bytes]:
    """The magic, header and stored array of an entry, read by the layout the module documents."""
    (n,) = struct.unpack_from("<Q", blob, 8)
    return blob[:8], json.loads(blob[16:16 + n]), blob[16 + n:-32]


def _entry(magic: bytes, header: dict, array: bytes) -> bytes:
    text = json.dumps(header).encode()
    body = magic + struct.pack("<Q", len(text)) + text + array
    return body + hashlib.sha256(body).digest()


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd command-line tool is not installed")
def test_a_video_entry_holds_its_frames_as_one_standard_zstd_frame(files, tmp_path):
    store = DecodedStore(str(tmp_path / "store"))
    spec = _spec(files["video"], "video")
    media = decode_media(files["video"], "video", **PARAMS["video"])
    assert store.write(spec.key, media)
    magic, header, array = _parts(Path(store.entry_path(spec.key)).read_bytes())
    assert magic == b"OMDM\x00\x00\x00\x02" and header["codec"] == "zstd"
    assert header["shape"] == list(media.data.shape) and header["dtype"] == "|u1"
    raw = subprocess.run(["zstd", "-d", "-c"], input=array, capture_output=True, check=True).stdout
    assert raw == media.data.tobytes()  # lossless, by the reference decoder
    assert len(array) < len(raw) / 2  # the moving box on a flat ground compresses well


def test_an_entry_of_the_uncompressed_format_is_rejected_and_decoded_again(files, tmp_path):
    """The format written before arrays were compressed (magic ``...\\x01``, the array as it is) is not read: a
    read reports it rejected and removes it, and the caller decodes the file again."""
    store = DecodedStore(str(tmp_path / "store"))
    spec = _spec(files["video"], "video")
    media = decode_media(files["video"], "video", **PARAMS["video"])
    header = {"key": spec.key, "modality": "video", "content_hash": media.content_hash, "fps": media.fps,
              "sample_rate": media.sample_rate, "meta": media.meta, "dtype": "|u1", "shape": list(media.data.shape)}
    entry = Path(store.entry_path(spec.key))
    entry.parent.mkdir(parents=True)
    entry.write_bytes(_entry(b"OMDM\x00\x00\x00\x01", header, media.data.tobytes()))
    found = store.read(spec.key, spec.path)
    assert found.status == "rejected" and found.media is None and not entry.exists()
    entry.write_bytes(_entry(b"OMDM\x00\x00\x00\x02", header, media.data.tobytes()))  # today's magic, no codec
    found = store.read(spec.key, spec.path)
    assert found.status == "rejected" and "codec" in found.reason


def test_an_array_that_does_not_decompress_to_its_shape_is_rejected(files, tmp_path):
    store = DecodedStore(str(tmp_path / "store"))
    spec = _spec(files["video"], "video")
    assert store.write(spec.key, decode_media(files["video"], "video", **PARAMS["video"]))
    entry = Path(store.entry_path(spec.key))
    magic, header, array = _parts(entry.read_bytes())
    header["shape"][0] -= 1  # one frame fewer than the array holds, under a valid checksum
    entry.write_bytes(_entry(magic, header, array))
    found = store.read(spec.key, spec.path)
    assert found.status == "rejected" and "decompress" in found.reason and not entry.exists()
    entry.write_bytes(_entry(magic, header | {"shape": [1]}, b"not zstd at all"))
    assert store.read(spec.key, spec.path).status == "rejected"


def test_media_whose_fields_json_would_change_are_not_stored(files, tmp_path):
    from dataclasses import replace

    store = DecodedStore(str(tmp_path / "store"))
    media = decode_media(files["image"], "image")
    assert encode("k", replace(media, meta={"views": ("front", "side")})) is None  # a tuple would come back a list
    assert encode("k", replace(media, fps=np.float64(2.0))) is None
    assert not store.write("k", replace(media, meta={"n": np.int64(3)}))
    assert store.keys() == []


def test_a_failed_decode_stores_nothing(tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video at all")
    store = DecodedStore(str(tmp_path / "store"))
    status, media, kind = decode_through(_spec(bad, "video"), store)
    assert status and media is None and kind == "decoded" and store.keys() == []


# -- where the store lives ----------------------------------------------------------------------------------------

def test_a_relative_store_is_taken_from_the_config_file_and_a_sweeps_runs_share_one(tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.sweep import parse_sweep_config
    from omnieval.sweep.expand import expand_runs

    run = {"benchmark": "bench", "output": "out", "models": [MODEL], "decode": {"store": "cache/media"}}
    assert parse_run_config(run, base_dir=tmp_path).decode.store == str(tmp_path / "cache" / "media")
    assert parse_run_config(run | {"decode": {"store": "s3://b/m"}}, base_dir=tmp_path).decode.store == "s3://b/m"
    sweep = {"output": "sweep-out", "protocols": [{"protocol": "dissonance", "benchmark": "bench"}],
             "models": [{"name": "a", "engine": "simulated"}, {"name": "b", "engine": "simulated"}],
             "prompts": ["zs", "cot"]}
    stores = {spec.config.decode.store for spec in expand_runs(parse_sweep_config(sweep, base_dir=tmp_path))}
    assert stores == {str(tmp_path / "sweep-out" / "media")}
    named = parse_sweep_config(sweep | {"decode": {"store": "shared"}}, base_dir=tmp_path)
    assert {spec.config.decode.store for spec in expand_runs(named)} == {str(tmp_path / "shared")}


def test_a_store_uri_that_cannot_be_opened_fails_before_model_work(small_bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError
    from omnieval.run.pipeline import run_evaluation

    config = parse_run_config(_config(small_bench, tmp_path / "out", "nosuch://bucket/media"))
    with pytest.raises(InputError, match="decode.store") as caught:
        run_evaluation(config, progress=False)
    assert "nosuch://bucket/media" in str(caught.value) and not (tmp_path / "out" / "parts").exists()


# -- runs with a store ---------------------------------------------------------------------------------------------

MODEL = {"name": "sim", "engine": "simulated", "batch_size": 8, "options": {"seed": 4}}


def _config(bench, output, store=None) -> dict:
    decode = {"num_frames": 4, "max_side": 96} | ({"store": str(store)} if store else {})
    return {"benchmark": str(bench), "output": str(output), "prompts": ["zs"], "models": [MODEL], "decode": decode}


def distinct_media(bench) -> int:
    """Distinct media files of a synthetic benchmark by their bytes (each is shown in one modality)."""
    return len({hashlib.sha256(p.read_bytes()).hexdigest() for p in (Path(bench) / "media").rglob("*")
                if p.is_file()})


def _counts(output) -> dict:
    return json.loads((Path(output) / "run.json").read_text())["counts"]


def _predictions(output) -> pl.DataFrame:
    return pl.read_parquet(Path(output) / "predictions.parquet").drop("latency_s")


def test_runs_fill_and_read_the_store_and_damaged_entries_are_decoded_again(ray_session, small_bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    n = distinct_media(small_bench)
    store = tmp_path / "media"
    plain = run_evaluation(parse_run_config(_config(small_bench, tmp_path / "plain")), progress=False)
    assert plain.store_hits == 0 and sum(plain.decode_counts.values()) == n
    filled = run_evaluation(parse_run_config(_config(small_bench, tmp_path / "filled", store)), progress=False)
    counts = _counts(tmp_path / "filled")
    assert (counts["decodes"], counts["decoded_store_hits"], counts["decoded_store_rejected"]) == (n, 0, 0)
    assert len(DecodedStore(str(store)).keys()) == n and filled.store_hits == 0
    read = run_evaluation(parse_run_config(_config(small_bench, tmp_path / "read", store)), progress=False)
    assert read.decode_counts == {} and read.store_hits == n
    counts = _counts(tmp_path / "read")
    assert (counts["decodes"], counts["decoded_store_hits"], counts["decoded_store_rejected"]) == (0, n, 0)

    entries = sorted(Path(store).rglob("*.omdm"))
    _damage(entries[0], "flipped")
    _damage(entries[1], "truncated")
    damaged = run_evaluation(parse_run_config(_config(small_bench, tmp_path / "damaged", store)), progress=False)
    counts = _counts(tmp_path / "damaged")
    assert (counts["decodes"], counts["decoded_store_hits"], counts["decoded_store_rejected"]) == (2, n - 2, 2)
    assert damaged.store_rejected == 2 and "store entries rejected: 2" in damaged.summary()
    assert len(DecodedStore(str(store)).keys()) == n  # written again, whole
    for output in ("filled", "read", "damaged"):
        assert _predictions(tmp_path / output).equals(_predictions(tmp_path / "plain")), output


def test_the_store_is_not_part_of_a_runs_identity(ray_session, small_bench, tmp_path):
    """A run made without a store resumes (every row kept) when run again with one, and the other way round."""
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    out = tmp_path / "out"
    first = run_evaluation(parse_run_config(_config(small_bench, out)), progress=False)
    again = run_evaluation(parse_run_config(_config(small_bench, out, tmp_path / "media")), progress=False)
    assert first.n_rows > 0 and again.n_rows == 0 and again.n_skipped == first.n_rows
    back = run_evaluation(parse_run_config(_config(small_bench, out)), progress=False)
    assert back.n_rows == 0 and back.n_skipped == first.n_rows
