"""Contra4 releases as their authors publish them (``data/final_data/test.json`` and ``val.json``: int and str ids,
``null`` urls, Clotho file names with spaces, ``"A"`` and ``"Scene A"`` answers, ``data2path.json`` with the
authors' absolute folders), converted against real media files laid out as the release's baselines read them (one
folder per source: ``<n>.jpg``, ``<id>.wav``, ``<id>.mp4``, ``<id>_8192.npz``) and as the datasets ship (COCO
val2014 names, ULIP's ``<id>/<id>_8192.npz``, PointLLM's ``<id>_8192.npy``, aac-datasets' ``<youtube>_<start>.flac``,
Clotho's split folders); then through the simulated engine, metrics checked against pandas on the predictions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.contra4 import convert_contra4, load_contra4, read_media_map

ROOT = Path(__file__).resolve().parents[1]

POINTLLM = {"ulip": "69865c89fc7344be8ed5c1a54dbddc20", "pllm": "f5bb897cbeb24f829c289f4d30150036"}
COCO = {"clock": 173057, "zebra": 291861}
MSRVTT = {"game": "video6747", "flip": "video6532"}
AUDIOCAPS = {"sizzle": (105440, "bQNX7vDalQw", 0), "crying": (105253, "paetCbEqp2w", 60)}
CLOTHO = {"rain": "Rain hitting window.wav", "crow": "slow crow #1.wav"}


def pc(key: str) -> dict:
    return {"source": "pointllm", "id": POINTLLM[key], "meta": {},
            "url": f"https://sketchfab.com/models/{POINTLLM[key]}/embed", "caption": f"a 3d model ({key})"}


def coco(key: str) -> dict:
    return {"source": "coco_val", "id": COCO[key], "caption": f"a photo ({key})",
            "url": f"http://images.cocodataset.org/val2017/{COCO[key]:012d}.jpg"}


def video(key: str) -> dict:
    return {"source": "msrvtt_test", "id": MSRVTT[key], "caption": f"a clip ({key})",
            "url": "https://www.youtube.com/watch?v=2fZswgVxzYE", "meta": {"start_time": 1137.05, "end_time": 1160.68}}


def audiocaps(key: str) -> dict:
    ident, youtube, start = AUDIOCAPS[key]
    return {"source": "audiocaps", "id": ident, "url": f"https://www.youtube.com/watch?v={youtube}",
            "meta": {"start_time": start, "end_time": start + 10}, "caption": f"a sound ({key})"}


def clotho(key: str) -> dict:
    return {"source": "clotho", "id": CLOTHO[key], "url": None, "meta": {}, "caption": f"a recording ({key})"}


MODALITY = {"pointllm": "pc", "coco_val": "image", "msrvtt_test": "video", "audiocaps": "audio", "clotho": "audio"}


def entry(ident: str, selection: str, examples: list[dict], answer: str, question: str,
          category: str | None) -> dict:
    """One entry with the release's key order (``category`` only in test.json)."""
    out = {"id": ident, "selection_type": selection, "q_type": f"mc_{len(examples)}", "examples": examples}
    if category is not None:
        out["category"] = category
    return out | {"answer": answer, "question": question, "modalities": [MODALITY[e["source"]] for e in examples]}


def release_entries(scene: bool) -> list[dict]:
    """test.json answers ``"B"`` and has categories; val.json answers ``"Scene B"`` and has none."""
    def ans(letter: str) -> str:
        return f"Scene {letter}" if scene else letter

    cat = (lambda c: None) if scene else (lambda c: c)
    return [
        entry("random_371627", "random", [pc("pllm"), video("game")], ans("A"),
              "Which scene is less realistic?", cat("Other")),
        entry("random_343125", "random", [audiocaps("crying"), video("flip"), coco("clock")], ans("B"),
              "Which scene evokes joy?", cat("Emotions & Sentory Experiences")),
        entry("similarity_368568", "similarity", [clotho("rain"), pc("ulip"), coco("zebra"), audiocaps("sizzle")],
              ans("C"), "Which scene shows an animal?", cat("Objects")),
        entry("similarity_402211", "similarity", [clotho("crow"), coco("clock")], ans("A"),
              "Which scene has a bird?", cat("Animals")),
    ]


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, Path]:
    """One real file per example, made once: JPEGs, H.264 clips, PCM and FLAC audio, xyz and xyz+rgb clouds."""
    from omnieval.media.synth import beep_audio, moving_box_video, still_image

    folder = tmp_path_factory.mktemp("made")
    rng = np.random.default_rng(0)
    made = {}
    for i, key in enumerate(COCO):
        made[f"coco:{key}"] = still_image(folder / f"{key}.jpg", colour=("red", "blue")[i], size=(48, 32))
    for i, key in enumerate(MSRVTT):
        made[f"video:{key}"] = moving_box_video(folder / f"{key}.mp4", colour=("green", "yellow")[i], box=16, y=16,
                                                size=(64, 48), duration=1.0, fps=4)
    for i, key in enumerate(AUDIOCAPS):
        made[f"audiocaps:{key}"] = beep_audio(folder / f"{key}.wav", frequency=300 + 200 * i, beeps=2, duration=0.5)
        made[f"audiocaps-flac:{key}"] = beep_audio(folder / f"{key}.flac", frequency=300 + 200 * i, beeps=2,
                                                   duration=0.5)
    for i, key in enumerate(CLOTHO):
        made[f"clotho:{key}"] = beep_audio(folder / f"clotho-{key}.wav", frequency=700 + 100 * i, beeps=3,
                                           duration=0.5)
    xyz = rng.normal(size=(256, 3)).astype(np.float32)
    np.savez(folder / "ulip.npz", xyz)  # ULIP: xyz under arr_0
    made["npz"] = folder / "ulip.npz"
    np.save(folder / "pllm.npy", np.hstack([xyz, rng.uniform(0, 1, (256, 3))]).astype(np.float32))  # PointLLM
    made["npy"] = folder / "pllm.npy"
    return made


def link(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.link(src, dest)


def baselines_layout(root: Path, made: dict[str, Path]) -> dict[str, Path]:
    """One folder per source, named as the baselines read them from COCO_DIR, AUDIOCAPS_DIR, MSRVTT_DIR,
    CLOTHO_DIR and OBJAVERSE_DIR."""
    dirs = {s: root / d for s, d in (("coco_val", "COCO"), ("audiocaps", "AUDIOCAPS"), ("msrvtt_test", "MSRVTT"),
                                     ("clotho", "CLOTHO"), ("pointllm", "OBJAVERSE"))}
    for key, n in COCO.items():
        link(made[f"coco:{key}"], dirs["coco_val"] / f"{n:012d}.jpg")
    for key, (ident, _, _) in AUDIOCAPS.items():
        link(made[f"audiocaps:{key}"], dirs["audiocaps"] / f"{ident}.wav")
    for key, ident in MSRVTT.items():
        link(made[f"video:{key}"], dirs["msrvtt_test"] / f"{ident}.mp4")
    for key, name in CLOTHO.items():
        link(made[f"clotho:{key}"], dirs["clotho"] / name)
    for key in POINTLLM:
        link(made["npz"], dirs["pointllm"] / f"{POINTLLM[key]}_8192.npz")
    return dirs


def downloads_layout(root: Path, made: dict[str, Path]) -> Path:
    """One root, one folder per source, each as the dataset ships: COCO val2014, ULIP's objaverse_pc_parallel
    (``<id>/<id>_8192.npz``) and PointLLM's ``<id>_8192.npy``, aac-datasets' AudioCaps, Clotho's split folders."""
    for key, n in COCO.items():
        link(made[f"coco:{key}"], root / "coco_val" / "val2014" / f"COCO_val2014_{n:012d}.jpg")
    for key, (_, youtube, start) in AUDIOCAPS.items():
        link(made[f"audiocaps-flac:{key}"], root / "audiocaps" / f"{youtube}_{start}.flac")
    for key, ident in MSRVTT.items():
        link(made[f"video:{key}"], root / "msrvtt_test" / f"{ident}.mp4")
    link(made["clotho:rain"], root / "clotho" / "evaluation" / CLOTHO["rain"])
    link(made["clotho:crow"], root / "clotho" / "validation" / CLOTHO["crow"])
    link(made["npz"], root / "pointllm" / "shards" / "07" / f"{POINTLLM['ulip']}_8192.npz")  # only the map knows
    link(made["npy"], root / "pointllm" / f"{POINTLLM['pllm']}_8192.npy")
    return root


def write_release(folder: Path, name: str, entries: list[dict]) -> Path:
    path = folder / "data" / "final_data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries, indent=4))
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "contra4", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_baselines_folders_given_per_source(tmp_path, media):
    dirs = baselines_layout(tmp_path / "data", media)
    release = write_release(tmp_path / "contra4", "test.json", release_entries(scene=False))
    roots = [arg for source, d in dirs.items() for arg in ("--media-root", f"{source}={d}")]
    done = cli(str(release), *roots, "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert "wrote 4 items from 4 entries" in done.stdout
    lines = (tmp_path / "bench" / "items.jsonl").read_text().splitlines()
    items = {json.loads(x)["item_id"]: json.loads(x) for x in lines}
    assert list(items) == [e["id"] for e in release_entries(scene=False)]
    third = items["similarity_368568"]
    assert [i["path"] for i in third["inputs"]] == [
        "media/clotho/Rain hitting window.wav", f"media/pointllm/{POINTLLM['ulip']}_8192.npz",
        "media/coco_val/000000291861.jpg", "media/audiocaps/105440.wav"]
    assert [i["modality"] for i in third["inputs"]] == ["audio", "pointcloud", "image", "audio"]
    assert third["answer"] == 2 and third["category"] == "Objects" and third["selection_type"] == "similar"
    assert [i["id"] for i in third["inputs"]][2:] == ["291861", "105440"]  # int ids kept as text
    for item in items.values():  # every file is the one made for it, byte for byte
        for inp in item["inputs"]:
            assert (tmp_path / "bench" / inp["path"]).read_bytes() == source_bytes(inp, media)


def source_bytes(inp: dict, made: dict[str, Path]) -> bytes:
    """The bytes made for one converted input, looked up by its source and id (independently of the converter)."""
    source, ident = inp["source"], inp["id"]
    if source == "coco_val":
        key = next(k for k, n in COCO.items() if str(n) == ident)
        return made[f"coco:{key}"].read_bytes()
    if source == "msrvtt_test":
        return made[f"video:{next(k for k, v in MSRVTT.items() if v == ident)}"].read_bytes()
    if source == "audiocaps":
        key = next(k for k, v in AUDIOCAPS.items() if str(v[0]) == ident)
        return made[f"audiocaps{'-flac' if inp['path'].endswith('.flac') else ''}:{key}"].read_bytes()
    if source == "clotho":
        return made[f"clotho:{next(k for k, v in CLOTHO.items() if v == ident)}"].read_bytes()
    return made["npz" if inp["path"].endswith(".npz") else "npy"].read_bytes()


def test_the_datasets_as_downloaded_under_one_root_with_data2path(tmp_path, media):
    root = downloads_layout(tmp_path / "raw", media)
    release = write_release(tmp_path / "contra4", "val.json", release_entries(scene=True))
    data2path = tmp_path / "contra4" / "data" / "data2path.json"  # the release's shape, the authors' folders
    data2path.write_text(json.dumps({
        "objaverse_val": {"directory": "/export/einstein-vision/3d_vision/objaverse/objaverse_pc_parallel",
                          "key2path": {POINTLLM["ulip"]: f"shards/07/{POINTLLM['ulip']}_8192.npz"}},
        "coco_val": {"directory": "/export/share/datasets/vision/coco/images",
                     "key2path": {"val2014/COCO_val2014_000000184613.jpg": "val2014/COCO_val2014_000000184613.jpg"}},
    }))
    done = cli(str(release), "--media-root", str(root), "--media-map", str(data2path), "--out", str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    items = [json.loads(x) for x in (tmp_path / "b" / "items.jsonl").read_text().splitlines()]
    paths = {(i["source"], i["id"]): i["path"] for it in items for i in it["inputs"]}
    assert paths == {
        ("pointllm", POINTLLM["pllm"]): f"media/pointllm/{POINTLLM['pllm']}_8192.npy",
        ("pointllm", POINTLLM["ulip"]): f"media/pointllm/shards/07/{POINTLLM['ulip']}_8192.npz",
        ("msrvtt_test", "video6747"): "media/msrvtt_test/video6747.mp4",
        ("msrvtt_test", "video6532"): "media/msrvtt_test/video6532.mp4",
        ("audiocaps", "105253"): "media/audiocaps/paetCbEqp2w_60.flac",
        ("audiocaps", "105440"): "media/audiocaps/bQNX7vDalQw_0.flac",
        ("coco_val", "173057"): "media/coco_val/val2014/COCO_val2014_000000173057.jpg",
        ("coco_val", "291861"): "media/coco_val/val2014/COCO_val2014_000000291861.jpg",
        ("clotho", CLOTHO["rain"]): f"media/clotho/evaluation/{CLOTHO['rain']}",
        ("clotho", CLOTHO["crow"]): f"media/clotho/validation/{CLOTHO['crow']}",
    }
    assert [it["answer"] for it in items] == [0, 1, 2, 0] and all("category" not in it for it in items)
    assert {it["split"] for it in items} == {"val"}
    for item in items:
        for inp in item["inputs"]:
            assert (tmp_path / "b" / inp["path"]).read_bytes() == source_bytes(inp, media)
    # without the map, the one file only the map names is missing: file, entry and field named
    done = cli(str(release), "--media-root", str(root), "--out", str(tmp_path / "c"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"file '{release}'" in done.stderr and "item 'entry 2 (id similarity_368568)'" in done.stderr
    assert "field 'examples[1].id'" in done.stderr and f"{POINTLLM['ulip']}_8192.npz" in done.stderr


def test_refusals_name_file_entry_and_field(tmp_path, media):
    dirs = baselines_layout(tmp_path / "data", media)
    entries = release_entries(scene=False)
    release = write_release(tmp_path / "contra4", "test.json", entries)
    per_source = {s: d for s, d in dirs.items()}
    (dirs["msrvtt_test"] / "video6532.mp4").unlink()  # a clip the download lacks
    with pytest.raises(InputError, match="no video file for source 'msrvtt_test' id 'video6532'") as err:
        convert_contra4(release, None, tmp_path / "out", media_dirs=per_source)
    assert (err.value.file, err.value.item, err.value.field) == (
        str(release), "entry 1 (id random_343125)", "examples[1].id")
    assert str(dirs["msrvtt_test"]) in str(err.value) and "'video6532.mp4'" in str(err.value)
    items, skipped = load_contra4(release, media_dirs=per_source, on_missing="skip")
    assert [i.item_id for i in items] == ["random_371627", "similarity_368568", "similarity_402211"]
    assert [s["id"] for s in skipped] == ["random_343125"]
    # a link inside a source's folder that points out of it is never followed
    private = tmp_path / "private"
    private.mkdir()
    (private / "video6532.mp4").write_bytes(media["video:flip"].read_bytes())
    (dirs["msrvtt_test"] / "video6532.mp4").symlink_to(private / "video6532.mp4")
    with pytest.raises(InputError, match="resolves outside those folders and was not read") as err:
        convert_contra4(release, None, tmp_path / "out2", media_dirs=per_source)
    assert err.value.field == "examples[1].id" and not (tmp_path / "out2" / "media").exists()
    # a folder for a source no example has: a typo, refused naming the sources there are
    done = cli(str(release), "--media-root", f"cocoval={dirs['coco_val']}", "--out", str(tmp_path / "o3"))
    assert done.returncode == 2 and "source 'cocoval', which no example has" in done.stderr
    assert "audiocaps, clotho, coco_val, msrvtt_test, pointllm" in done.stderr
    done = cli(str(release), "--media-root", str(tmp_path), "--media-root", str(tmp_path), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "--media-root DIR given 2 times" in done.stderr
    bad_map = tmp_path / "map.json"
    bad_map.write_text(json.dumps({"coco_val": ["not", "a", "table"]}))
    with pytest.raises(InputError, match="expected") as err:
        read_media_map(bad_map)
    assert err.value.file == str(bad_map) and err.value.field == "coco_val"


@pytest.mark.slow
def test_converted_release_through_the_simulated_engine(ray_session, tmp_path, media):
    """Counts and metrics of a simulated run on the converted test.json against pandas on its predictions."""
    import pandas as pd
    import polars as pl

    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation
    from omnieval.stats.metrics import metrics_table

    dirs = baselines_layout(tmp_path / "data", media)
    release = write_release(tmp_path / "contra4", "test.json", release_entries(scene=False))
    convert_contra4(release, None, tmp_path / "bench", media_dirs=dirs)
    config = parse_run_config({
        "benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "run"), "protocol": "contrastive",
        "decode": {"num_frames": 2, "max_side": 64},
        "models": [{"name": "sim", "engine": "simulated",
                    "options": {"reliance": {"image": 0.9, "audio": 0.6, "video": 0.8, "pointcloud": 0.7,
                                             "position:A": 0.3}, "seed": 3}}]})
    result = run_evaluation(config, progress=False)
    orders = {2: 2, 3: 6, 4: 24}  # every order of each item's scenes
    assert result.n_errors == 0 and result.n_instances == sum(orders[len(e["examples"])]
                                                              for e in release_entries(scene=False))
    assert len(result.decode_counts) == 9  # the distinct files: 2 images, 2 clips, 4 sounds, 1 shared npz
    pred = pd.read_parquet(result.predictions_path)
    assert pred.groupby("item_id").size().to_dict() == {"random_371627": 2, "random_343125": 6,
                                                         "similarity_368568": 24, "similarity_402211": 2}
    table = metrics_table(pl.read_parquet(result.predictions_path), resamples=50)
    got = {(r["metric"], r["key"]): r["value"] for r in table.iter_rows(named=True) if r["model"] == "sim"}

    pred["correct"] = pred["choice"].notna() & (pred["choice"] == pred["target"])
    valid = pred[pred["choice"].notna()]
    original = valid[valid["condition"] == "original"]
    n_scenes = pred["item_id"].map({e["id"]: len(e["examples"]) for e in release_entries(scene=False)})
    expected_a = (1.0 / n_scenes[valid.index]).mean()
    assert got[("accuracy", "all")] == pytest.approx(original["correct"].mean())
    assert got[("accuracy", "n=2")] == pytest.approx(
        original[original["item_id"].isin(["random_371627", "similarity_402211"])]["correct"].mean())
    assert got[("permutation_consistency", "")] == pytest.approx(pred.groupby("item_id")["correct"].all().mean())
    assert got[("position_bias", "A")] == pytest.approx((valid["choice"] == "A").mean() - expected_a)
    assert 0 < (valid["choice"] == "A").mean() < 1  # the run is not degenerate
