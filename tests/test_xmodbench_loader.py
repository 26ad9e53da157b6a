"""The XModBench release converter, on small release folders written in the released layout and entry format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.datasets.benchmark import check_media, load_benchmark
from omnieval.datasets.xmodbench import convert_xmodbench
from omnieval.protocols import crossmodal
from omnieval.schema import InputError

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["violin", "cello", "flute", "drum"]
FILE_MODALITY = {"audio": "Audio", "vision": "Image", "text": "Text"}
AUTHORS_ROOT = "/home/someone/scratch/XModBench/data"  # the builders' absolute paths, absent here


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    from omnieval.media.synth import beep_audio, still_image

    root = tmp_path_factory.mktemp("media-src")
    for i, name in enumerate(NAMES):
        beep_audio(root / "solos" / f"{name}.wav", frequency=300 + 100 * i, beeps=1 + i, duration=0.5)
        still_image(root / "solos" / f"{name}_frames" / "0001.png", colour=["red", "blue", "green", "gray"][i])
    return root


def _input(kind: str, name: str) -> dict:
    if kind == "audio":
        return {"modality": "Audio", "input": f"{AUTHORS_ROOT}/solos/{name}.wav"}
    if kind == "vision":
        return {"modality": "Image", "input": f"solos/{name}_frames/0001.png", "class": name}
    return {"modality": "Text", "input": f"a {name} playing"}


def entry(ctx: str, cand: str, context: str, order: list[str]) -> dict:
    return {"question": f"Which {cand} matches? Answer with A, B, C, or D", "category": "instruments",
            "conditions": _input(ctx, context),
            "options": {lab: _input(cand, n) for lab, n in zip("ABCD", order, strict=True)},
            "correct_answer": "ABCD"[order.index(context)], "correct_class": context}


def write_release(root: Path, media: Path, extra: dict | None = None) -> Path:
    """Two questions (contexts violin, flute) in all six directions, options in varying released orders."""
    import shutil

    release = root / "release"
    if release.exists():
        shutil.rmtree(release)
    shutil.copytree(media, release)
    folder = release / "01_perception" / "instruments"
    folder.mkdir(parents=True)
    orders = {"violin": ["cello", "violin", "flute", "drum"], "flute": ["drum", "cello", "violin", "flute"]}
    for ctx in ("audio", "vision", "text"):
        for cand in ("audio", "vision", "text"):
            if ctx == cand:
                continue
            entries = [entry(ctx, cand, c, orders[c]) for c in ("violin", "flute")]
            entries += (extra or {}).get((ctx, cand), [])
            (folder / f"solos_questions_{ctx}_{cand}.json").write_text(json.dumps(entries, indent=1))
    return release


def test_six_direction_files_become_items_matched_through_media(tmp_path, media):
    release = write_release(tmp_path, media)
    report = convert_xmodbench(release, tmp_path / "bench")
    assert report.n_entries == 12 and report.n_items == 2 and report.unmatched == []
    bench = load_benchmark(tmp_path / "bench")
    assert bench.protocol == "crossmodal"
    assert check_media(bench, "probe") == 8  # 4 audio + 4 images, linked inside the benchmark folder
    for item in bench.items:
        assert sorted(item.directions) == sorted(crossmodal.DIRECTIONS)
        assert item.task == "perception" and item.subtask == "instruments"
    instances = crossmodal.expand_all(bench.items, bench, seed=0)
    assert len(instances) == 12
    for inst in instances:  # the released answer is the target
        released = next(i for i in bench.items if i.item_id == inst.item_id).directions[inst.condition]
        assert inst.target == released.answer and len(inst.option_segments) == 4
    # V->T of the violin question: the text options in the released order, answer B
    violin = next(i for i in bench.items if i.directions["T->A"].context[0].input == "a violin playing")
    vt = violin.directions["V->T"]
    assert [o.input for o in vt.options] == ["a cello playing", "a violin playing", "a flute playing",
                                             "a drum playing"]
    assert vt.answer == "B"


def test_unmatched_and_ambiguous_entries_are_reported_and_kept(tmp_path, media):
    lone = entry("audio", "text", "drum", ["drum", "cello", "violin", "flute"])  # drum's audio is no other context
    twice = entry("text", "vision", "violin", ["violin", "drum", "cello", "flute"])  # a second T->V for violin
    release = write_release(tmp_path, media, {("audio", "text"): [lone], ("text", "vision"): [twice]})
    report = convert_xmodbench(release, tmp_path / "bench")
    assert report.n_entries == 14
    reasons = sorted(r["reason"].split(":")[0] for r in report.unmatched)
    # the violin component (7 entries, T->V twice) is split into single entries; the drum entry stands alone
    assert reasons.count("ambiguous") == 7 and len(reasons) == 8
    assert report.n_items == 1 + 7 + 1
    lines = (tmp_path / "bench" / "unmatched.jsonl").read_text().splitlines()
    assert len(lines) == 8 and all("file" in json.loads(x) and "entry" in json.loads(x) for x in lines)
    bench = load_benchmark(tmp_path / "bench")
    assert len(crossmodal.expand_all(bench.items, bench, seed=0)) == 14  # every entry is still evaluated


@pytest.mark.parametrize("mutate, field", [
    (lambda e: e.pop("correct_answer"), "correct_answer"),
    (lambda e: e["options"]["B"].update(modality="Smell"), "options.B.modality"),
    (lambda e: e["options"]["C"].update(input="solos/missing.wav"), "options.C.input"),
    (lambda e: e.update(correct_answer="E"), "correct_answer"),
])
def test_malformed_entries_name_file_entry_and_field(tmp_path, media, mutate, field):
    bad = entry("audio", "text", "violin", ["cello", "violin", "flute", "drum"])
    bad["options"] = {k: dict(v) for k, v in bad["options"].items()}
    if field == "options.C.input":
        bad = entry("text", "audio", "violin", ["cello", "violin", "flute", "drum"])
    mutate(bad)
    release = write_release(tmp_path, media, {("audio", "text") if field != "options.C.input"
                                              else ("text", "audio"): [bad]})
    with pytest.raises(InputError) as err:
        convert_xmodbench(release, tmp_path / "bench")
    assert err.value.field == field and err.value.item == "entry 2"
    assert err.value.file.endswith(".json")
    assert not (tmp_path / "bench").exists()  # nothing half-written


def test_cli_converts_a_release(tmp_path, media):
    release = write_release(tmp_path, media)
    out = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "xmodbench", str(release), "--out",
                          str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "wrote 2 items from 12 entries" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "xmodbench", str(tmp_path / "nope"),
                          "--out", str(tmp_path / "c")], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "release folder does not exist" in bad.stderr
