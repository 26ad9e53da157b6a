"""Release converters read media only under the release folder or an explicit media root: a path naming a file
elsewhere (absolute, ``../``, or a symbolic link pointing out) is an ``InputError`` naming the release file, the
entry and the field, and nothing of that file reaches the new benchmark."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.core.schema import InputError

ROOT = Path(__file__).resolve().parents[1]
SECRET = b"RIFF-not-for-the-benchmark"


@pytest.fixture()
def layout(tmp_path) -> dict[str, Path]:
    """A release folder with one real media file, and a private file beside (outside) it."""
    release = tmp_path / "release"
    (release / "media").mkdir(parents=True)
    (release / "media" / "ok.wav").write_bytes(b"RIFF-inside")
    private = tmp_path / "private"
    private.mkdir()
    (private / "secret.wav").write_bytes(SECRET)
    return {"release": release, "private": private, "secret": private / "secret.wav"}


def xmod_release(release: Path, context_input: str) -> Path:
    folder = release / "01_perception" / "instruments"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"question": "Which text matches?", "conditions": {"modality": "Audio", "input": context_input},
             "options": {k: {"modality": "Text", "input": f"option {k}"} for k in "ABCD"}, "correct_answer": "B"}
    path = folder / "solos_questions_audio_text.json"
    path.write_text(json.dumps([{"question": "Which?", "conditions": {"modality": "Audio", "input": "media/ok.wav"},
                                 "options": entry["options"], "correct_answer": "A"}, entry]))
    return path


def no_secret_in(folder: Path) -> bool:
    return not folder.exists() or all(p.read_bytes() != SECRET for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_xmodbench_refuses_media_outside_the_release(layout, tmp_path, how):
    from omnieval.datasets.xmodbench import convert_xmodbench

    release = layout["release"]
    raw = {"absolute": str(layout["secret"]), "dotdot": "../../../private/secret.wav",
           "symlink": "media/link.wav"}[how]
    if how == "symlink":
        (release / "media" / "link.wav").symlink_to(layout["secret"])
    json_file = xmod_release(release, raw)
    with pytest.raises(InputError) as err:
        convert_xmodbench(release, tmp_path / "out")
    assert err.value.file == str(json_file) and err.value.item == "entry 1"
    assert err.value.field == "conditions.input" and "outside" in str(err.value)
    assert no_secret_in(tmp_path / "out")
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "xmodbench", str(release), "--out",
                           str(tmp_path / "cli-out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "outside" in done.stderr and "Traceback" not in done.stderr
    assert no_secret_in(tmp_path / "cli-out")


def test_xmodbench_media_root_allows_one_more_folder(layout, tmp_path):
    from omnieval.datasets.benchmark import load_benchmark
    from omnieval.datasets.xmodbench import convert_xmodbench

    xmod_release(layout["release"], str(layout["secret"]))
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "xmodbench", str(layout["release"]),
                           "--out", str(tmp_path / "out"), "--media-root", str(layout["private"]), "--copy"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    bench = load_benchmark(tmp_path / "out")
    contexts = sorted(d.context[0].input for it in bench.items for d in it.directions.values())
    assert sorted((tmp_path / "out" / c).read_bytes() for c in contexts) == [b"RIFF-inside", SECRET]
    # the release's builders' absolute paths are still found by their trailing components under the release
    xmod_release(layout["release"], "/home/builder/data/media/ok.wav")
    assert convert_xmodbench(layout["release"], tmp_path / "again").n_entries == 2


def test_contra4_reads_nothing_outside_the_media_root(layout, tmp_path):
    from omnieval.datasets.contra4 import convert_contra4

    root = layout["release"]
    (root / "audiocaps").mkdir()
    (root / "audiocaps" / "1.wav").write_bytes(b"RIFF-inside")
    entry = {"id": "e1", "selection_type": "random", "question": "Which?", "answer": "Scene B",
             "examples": [{"source": "audiocaps", "id": "1", "caption": "a"},
                          {"source": "audiocaps", "id": "2", "caption": "b"}], "modalities": ["audio", "audio"]}
    release = tmp_path / "contra4.json"
    release.write_text(json.dumps([entry]))
    for media_map in ({"audiocaps": {"2": str(layout["secret"])}}, {"audiocaps": {"2": "../private/secret.wav"}}):
        with pytest.raises(InputError) as err:
            convert_contra4(release, root, tmp_path / "out", media_map=media_map)
        assert err.value.file == str(release) and err.value.field == "examples[1].id"
        assert no_secret_in(tmp_path / "out")
    entry["examples"][1]["source"] = "../private"  # a source folder that leaves the root
    entry["examples"][1]["id"] = "secret.wav"
    release.write_text(json.dumps([entry]))
    with pytest.raises(InputError) as err:
        convert_contra4(release, root, tmp_path / "out")
    assert err.value.field == "examples[1].id" and no_secret_in(tmp_path / "out")


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_mcq_image_paths_stay_in_the_source_folder(tmp_path, how):
    from omnieval.datasets.mcq import convert_mcq
    from omnieval.media.synth import still_image

    src, private = tmp_path / "src", tmp_path / "private"
    src.mkdir()
    private.mkdir()
    still_image(src / "red.png", colour="red", size=(8, 8))
    still_image(private / "secret.png", colour="blue", size=(8, 8))
    path = {"absolute": str(private / "secret.png"), "dotdot": "../private/secret.png"}[how]
    tsv = src / "bench.tsv"
    with open(tsv, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(["index", "question", "A", "B", "answer", "image_path"])
        writer.writerow([0, "Colour?", "red", "blue", "A", "red.png"])
        writer.writerow([1, "Colour?", "red", "blue", "B", path])
    with pytest.raises(InputError, match="outside") as err:
        convert_mcq(tsv, tmp_path / "out")
    assert err.value.file == str(tsv) and err.value.item == "1 (row 1)" and err.value.field == "image_path"
    assert not (tmp_path / "out").exists()
    converted = convert_mcq(tsv, tmp_path / "out", media_root=private)
    assert converted.n_media == 2
    written = sorted(p.read_bytes() for p in (tmp_path / "out" / "media").iterdir())
    assert (private / "secret.png").read_bytes() in written
