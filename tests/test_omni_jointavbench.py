"""JointAVBench as its Hugging Face download lays it out (``jointavbench.json`` beside ``video_annotations.json`` and
``subtitle.zip``, no media), with the user's clips named by ``qid`` (``<qid>.mp4``) in a media root: converted to
video items with their soundtracks, the options in the release's order or a seeded one, a missing clip skipped
and listed by its file name; the benchmark run through two simulated models, metrics and report, the accuracy per
task recomputed from the predictions."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni.jointavbench import convert_jointavbench
from tests.omni_release_run import MODELS, items_of, make_clips, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
VIDEOS = ["-CEDoGn0w1s", "-CEDoGn0w1s", "Zq3x_8aBc1Q", "Zq3x_8aBc1Q", "p0Lk9mWv7tE", "p0Lk9mWv7tE"]
TASKS = ["STL", "SEL", "STL", "MER", "SEL", "MER"]


def records() -> list[dict]:
    """Six questions as the release writes them (its README's example is the first)."""
    out = []
    for i, (video, task) in enumerate(zip(VIDEOS, TASKS, strict=True)):
        options = [f"The shovel, mentioned at around {i}.34s", f"The keys, mentioned at around {i}.36s",
                   f"The hat, mentioned at around 1{i}.76s", f"The broom, mentioned at around {i}.34s"]
        out.append({"qid": f"{video}_task{i + 1}_{i % 2}", "video_name": video, "task": task,
                    "question": f"Which object is mentioned only in the dialogue ({i})?",
                    "correct_answer": options[(i + 3) % 4], "explanation": "The broom is mentioned.",
                    "options": options, "video_url": f"https://www.youtube.com/watch?v={video}",
                    "segment_timestamp": [653.444 + i, 699.657 + i]})
    return out


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("jointavbench-media"), len(VIDEOS))


def release(folder: Path, data: list[dict] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "jointavbench.json").write_text(json.dumps(records() if data is None else data, indent=4))
    (folder / "video_annotations.json").write_text("[]")
    with zipfile.ZipFile(folder / "subtitle.zip", "w") as archive:
        archive.writestr("subtitle/-CEDoGn0w1s.json", '{"segments": []}')
    return folder


def user_clips(folder: Path, clips, missing: tuple[int, ...] = ()) -> Path:
    """The user's clips, one per question, named ``<qid>.mp4`` as the release's evaluation script opens them."""
    for i, record in enumerate(records()):
        if i not in missing:
            place(clips[i]["soundtrack"], folder / f"{record['qid']}.mp4")
    return folder


def test_the_release_with_the_users_clips(tmp_path, clips):
    folder, media = release(tmp_path / "JointAVBench"), user_clips(tmp_path / "clips", clips, missing=(4,))
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "jointavbench", str(folder), "--out",
                           str(tmp_path / "bench"), "--media-root", str(media)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    missing_qid = records()[4]["qid"]
    assert "wrote 5 items (all: 5) and 5 media files" in done.stdout
    assert "skipped 1 entry" in done.stdout and f"no media file '{missing_qid}.mp4'" in done.stdout
    items = items_of(tmp_path / "bench")
    assert list(items) == [r["qid"] for i, r in enumerate(records()) if i != 4]
    for i, record in enumerate(records()):
        if i == 4:
            continue
        item = items[record["qid"]]
        assert item["options"] == record["options"]  # the release's order
        assert item["answer"] == "ABCD"[(i + 3) % 4]
        assert (item["task"], item["breakdowns"]) == (record["task"], {"task": record["task"]})
        assert item["media"] == {"video": f"media/media-root/{record['qid']}.mp4",
                                 "audio": f"media/media-root/{record['qid']}.mp4"}
        assert (tmp_path / "bench" / item["media"]["video"]).read_bytes() == clips[i]["soundtrack"].read_bytes()
    skipped = [json.loads(line) for line in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert [(s["item_id"], s["entry"], s["field"]) for s in skipped] == [(missing_qid, f"entry 4 (qid {missing_qid})",
                                                                           "qid")]
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert (meta["scorer"], meta["option_order"], meta["skipped_entries"]) == ("jointavbench", "release", 1)
    assert "option_seed" not in meta


def test_every_missing_clip_is_listed_and_no_clip_at_all_is_refused(tmp_path, clips):
    folder = release(tmp_path / "JointAVBench")
    media = user_clips(tmp_path / "clips", clips, missing=(0, 2, 3, 5))
    converted = convert_jointavbench(folder, tmp_path / "bench", media_root=media)
    assert [s.item_id for s in converted.skipped] == [records()[i]["qid"] for i in (0, 2, 3, 5)]
    lines = (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()
    assert [f"{json.loads(line)['item_id']}.mp4" in json.loads(line)["reason"] for line in lines] == [True] * 4
    (tmp_path / "no-clips").mkdir()
    with pytest.raises(InputError, match=r"none of the 6 entries could be converted; the first: no media file "
                                         rf"'{records()[0]['qid']}\.mp4'"):
        convert_jointavbench(folder, tmp_path / "none", media_root=tmp_path / "no-clips")
    assert not (tmp_path / "none").exists()


def test_the_seeded_option_order(tmp_path, clips):
    """The seeded order is each question's options permuted by ``random.Random("<seed>:<qid>")``, recomputed here;
    the answer follows its text, and the same seed gives the same order on every conversion."""
    folder, media = release(tmp_path / "JointAVBench"), user_clips(tmp_path / "clips", clips)
    convert_jointavbench(folder, tmp_path / "s7", media_root=media, option_order="seeded", seed=7)
    convert_jointavbench(folder, tmp_path / "s7b", media_root=media, option_order="seeded", seed=7)
    convert_jointavbench(folder, tmp_path / "s8", media_root=media, option_order="seeded", seed=8)
    seven, again, eight = (items_of(tmp_path / n) for n in ("s7", "s7b", "s8"))
    assert seven == again
    moved = 0
    for record in records():
        options = list(record["options"])
        random.Random(f"7:{record['qid']}").shuffle(options)
        item = seven[record["qid"]]
        assert item["options"] == options
        assert item["options"]["ABCD".index(item["answer"])] == record["correct_answer"]
        moved += options != record["options"]
    assert moved >= 4 and any(eight[q]["options"] != seven[q]["options"] for q in seven)
    meta = json.loads((tmp_path / "s7" / "benchmark.json").read_text())
    assert (meta["option_order"], meta["option_seed"]) == ("seeded", 7)


@pytest.mark.parametrize("edit, field, message", [
    (lambda r: r.update(correct_answer="The spade"), "correct_answer", "answer 'The spade' is not exactly one of"),
    (lambda r: r.update(qid="../escape"), "qid", "is not a plain file name"),
    (lambda r: r.pop("options"), "options", "options"),
])
def test_an_unsound_question_is_skipped_naming_file_entry_and_field(tmp_path, clips, edit, field, message):
    data = records()
    edit(data[1])
    folder, media = release(tmp_path / "JointAVBench", data), user_clips(tmp_path / "clips", clips)
    converted = convert_jointavbench(folder, tmp_path / "bench", media_root=media)
    assert converted.n_items == 5
    (skip,) = converted.skipped
    assert (skip.file, skip.field) == (str(folder / "jointavbench.json"), field) and message in skip.reason
    assert skip.entry.startswith("entry 1")


def test_a_folder_without_the_question_file_is_refused(tmp_path):
    (tmp_path / "JointAVBench").mkdir()
    with pytest.raises(InputError, match="no jointavbench.json in the release folder"):
        convert_jointavbench(tmp_path / "JointAVBench", tmp_path / "bench")


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, clips):
    folder, media = release(tmp_path / "JointAVBench"), user_clips(tmp_path / "clips", clips)
    convert_jointavbench(folder, tmp_path / "bench", media_root=media)
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text"]
    rows = run_and_check(tmp_path / "bench", tmp_path, conditions)
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    got = {(r["model"], r["key"]): r["value"] for r in table.iter_rows(named=True)
           if r["protocol"] == "spectrum" and r["metric"] == "accuracy"}
    answered = rows.filter(pl.col("choice").is_not_null())
    for model in (m["name"] for m in MODELS):
        for task in set(TASKS):
            cell = answered.filter((pl.col("model") == model) & (pl.col("condition") == "normal")
                                   & (pl.col("task") == task))
            want = float((cell["choice"] == cell["target"]).mean())
            assert got[(model, f"task={task}/normal")] == pytest.approx(want, abs=1e-12)
