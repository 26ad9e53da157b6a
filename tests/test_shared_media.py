"""A shuffled condition never hands an item its own media: several questions about one clip (its video and its
soundtrack one mp4), and one clip copied under another name, in a spectrum benchmark of real files.

The reference is the files themselves: for every instance of every shuffled condition, the SHA-256 of the bytes of
each replaced modality's file (computed here with hashlib) differs from the item's own; and the ``donors`` column of
the predictions names items whose files are those shown.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from omnieval.core.schema import InputError

N_CLIPS = 6
QUESTIONS_PER_CLIP = 3  # colour, sound, and a third; three questions share each mp4


def _clip(path: Path, colour: str, freq: int) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"color=c={colour}:s=32x32:d=1:r=8",
                    "-f", "lavfi", "-i", f"sine=frequency={freq}:duration=1", "-shortest", "-c:v", "libx264",
                    "-pix_fmt", "yuv420p", "-c:a", "aac", str(path)], check=True)


@pytest.fixture(scope="module")
def clip_bench(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shared") / "bench"
    (root / "media").mkdir(parents=True)
    colours = ["red", "green", "blue", "yellow", "white", "black"]
    for c in range(N_CLIPS):
        _clip(root / "media" / f"clip{c}.mp4", colours[c], 300 + 100 * c)
    # clip 5's file again under another name: the same content must count as the same media
    shutil.copyfile(root / "media" / "clip5.mp4", root / "media" / "clip5-copy.mp4")
    items = []
    for c in range(N_CLIPS):
        for q in range(QUESTIONS_PER_CLIP):
            # the last question of clip 5 points at the copy
            path = f"media/clip{c}{'-copy' if (c == 5 and q == 2) else ''}.mp4"
            items.append({"item_id": f"c{c}q{q}", "question": f"Question {q} about this clip?",
                          "options": ["one", "two", "three"], "answer": "ABC"[(c + q) % 3],
                          "media": {"video": path, "audio": path}, "category": f"kind{q}"})
    (root / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    (root / "benchmark.json").write_text(json.dumps({"name": "clips", "protocol": "spectrum"}))
    return root


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _config(bench: Path, out: Path, **kw):
    from omnieval.config import parse_run_config

    return parse_run_config({"benchmark": str(bench), "output": str(out), "decode": {"num_frames": 2, "max_side": 32},
                             "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 0}}], **kw})


@pytest.mark.parametrize("seed", range(4))
def test_no_shuffled_instance_shows_a_file_equal_to_its_own(clip_bench, tmp_path, seed):
    from omnieval.run.plan import make_plan

    items = {json.loads(line)["item_id"]: json.loads(line) for line in open(clip_bench / "items.jsonl")}
    plan = make_plan(_config(clip_bench, tmp_path / "out", seed=seed))
    shuffled = 0
    for inst in plan.load_instances():
        own = items[inst.item_id]["media"]
        shown = {seg.modality: seg.path for seg in inst.segments}
        donors = inst.donors or {}
        for modality in ("video", "audio"):
            if modality in donors:  # replaced: by another item's file, never one with the item's own bytes
                shuffled += 1
                assert items[donors[modality]]["media"][modality] == shown[modality]
                assert _sha(clip_bench / shown[modality]) != _sha(clip_bench / own[modality]), (
                    f"{inst.instance_id}: its {modality} from {donors[modality]} has the content of its own")
            else:
                assert shown[modality] == own[modality]
    # media replaced per item: video_only 1, audio_only 1, text_only 2, random 2, no_video 1, no_audio 1, no_text 0
    assert shuffled == len(items) * 8


def test_the_donors_are_in_the_predictions(ray_session, clip_bench, tmp_path):
    from omnieval.run.pipeline import run_evaluation

    result = run_evaluation(_config(clip_bench, tmp_path / "out"), progress=False)
    assert result.ok
    rows = pl.read_parquet(tmp_path / "out" / "predictions.parquet")
    items = {json.loads(line)["item_id"]: json.loads(line) for line in open(clip_bench / "items.jsonl")}
    for condition, item_id, donors in rows.select("condition", "item_id", "donors").iter_rows():
        if condition == "normal":
            assert donors is None
            continue
        named = json.loads(donors)
        replaced = {"video_only": {"audio", "text"}, "audio_only": {"video", "text"},
                    "text_only": {"video", "audio"}, "random": {"video", "audio", "text"},
                    "no_video": {"video"}, "no_audio": {"audio"}, "no_text": {"text"}}[condition]
        assert set(named) == replaced
        for modality in replaced - {"text"}:
            assert _sha(clip_bench / items[named[modality]]["media"][modality]) != \
                _sha(clip_bench / items[item_id]["media"][modality])


def test_a_clip_with_most_of_its_splits_questions_is_refused_naming_the_item(clip_bench, tmp_path):
    from omnieval.run.plan import make_plan

    bench = tmp_path / "bench"
    shutil.copytree(clip_bench, bench)
    lines = [json.loads(line) for line in open(bench / "items.jsonl")]
    keep = [it for it in lines if it["item_id"].startswith(("c0", "c1"))]
    for it in keep[:4]:  # 4 of 6 items show clip 0's file: no derangement keeps them all apart
        it["media"] = {"video": "media/clip0.mp4", "audio": "media/clip0.mp4"}
    (bench / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in keep))
    with pytest.raises(InputError, match=r"4 of the 6 items .* show the same video content \(media/clip0.mp4\)") as err:
        make_plan(_config(bench, tmp_path / "out"), expand=True)
    assert err.value.item == "c0q0"


def test_datasets_check_shows_each_conditions_files_and_donors(clip_bench, capsys):
    from omnieval.cli import main

    assert main(["datasets", "check", str(clip_bench), "--item", "c5q0", "--media-check", "exists"]) == 0
    out = capsys.readouterr().out
    assert "spectrum benchmark 'clips', 18 items, 144 instances" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert set(lines) == {"normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio",
                          "no_text"}
    assert "<-" not in lines["normal"] and "video media/clip5.mp4;" in lines["normal"]
    own = _sha(clip_bench / "media" / "clip5.mp4")
    for condition in ("audio_only", "text_only", "random", "no_video"):  # the video shown came from a donor
        video = lines[condition].split(" target ", 1)[1].split("video ", 1)[1].split(" <- ")[0]
        assert _sha(clip_bench / video) != own, lines[condition]
    assert main(["datasets", "check", str(clip_bench), "--item", "nope"]) == 2
    assert "no item 'nope'" in capsys.readouterr().err
