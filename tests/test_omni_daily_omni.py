"""Daily-Omni as its README places it (``qa.json`` beside ``Videos/<id>/<id>_video.mp4`` and ``<id>_audio.wav``, the
release's keys and quirks: labelled choices, optional ``content_*_category`` and ``Explaination`` keys, the clip
segments ``_video_0.mp4`` beside the whole clip), converted to video + audio items with the three breakdowns its test
scripts print, unsound entries skipped and listed by file, entry and field (ids unchanged for the rest), and the
benchmark run through two simulated models, metrics and report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.datasets.omni.daily_omni import convert_daily_omni
from tests.omni_release_run import items_of, make_clips, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
VIDEOS = ["Ec_lQgZ9wlg", "XUWxQYmiBQY", "-oC3FVOx62g", "rieb8cBb2z8"]
TYPES = ["Event Sequence", "AV Event Alignment", "Reasoning", "Context understanding"]


def qa_entries() -> list[dict]:
    """Two questions per clip, answers spread over A..D, the optional keys on some entries only."""
    entries = []
    for v, video in enumerate(VIDEOS):
        for q in range(2):
            answer = "ABCD"[(2 * v + q) % 4]
            entry = {"Question": f"What happens in clip {v} (question {q})?",
                     "Choice": [f"{label}. Option {label} of clip {v}, question {q}" for label in "ABCD"],
                     "Answer": answer, "video_id": video, "Type": TYPES[(v + q) % 4]}
            if v % 2 == 0:
                entry |= {"content_parent_category": "Lifestyle", "content_fine_category": "Skincare Routines"}
            if q == 1:
                entry["Explaination"] = f"Because option {answer} is what the clip shows."
            entries.append(entry | {"video_category": ("Howto & Style", "Sports")[v % 2],
                                    "video_duration": ("30s", "60s")[v % 2]})
    return entries


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("daily-omni-media"), len(VIDEOS))


def write_release(folder: Path, clips, entries: list[dict] | None = None) -> Path:
    for video, clip in zip(VIDEOS, clips, strict=True):
        place(clip["soundtrack"], folder / "Videos" / video / f"{video}_video.mp4")
        place(clip["sound"], folder / "Videos" / video / f"{video}_audio.wav")
        place(clip["picture"], folder / "Videos" / video / f"{video}_video_0.mp4")  # a segment: not read
    (folder / "qa.json").write_text(json.dumps(qa_entries() if entries is None else entries, indent=4))
    return folder


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "daily-omni", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_release_becomes_video_and_audio_items(tmp_path, clips):
    release = write_release(tmp_path / "Daily-Omni", clips)
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert f"wrote 8 items (all: 8) and 8 media files to {tmp_path / 'bench'}" in done.stdout
    items = items_of(tmp_path / "bench")
    assert list(items) == [f"{video}/{q}" for video in VIDEOS for q in range(2)]
    for entry, item in zip(qa_entries(), items.values(), strict=True):
        video = entry["video_id"]
        assert item["question"] == entry["Question"]
        assert item["options"] == [c[3:] for c in entry["Choice"]]  # "A. " dropped
        assert item["answer"] == entry["Answer"] and item["split"] == "all"
        assert (item["category"], item["task"]) == (entry["Type"], entry["video_category"])
        assert item["breakdowns"] == {"Type": entry["Type"], "video_category": entry["video_category"],
                                      "video_duration": entry["video_duration"]}
        assert item["media"] == {"video": f"media/Videos/{video}/{video}_video.mp4",
                                 "audio": f"media/Videos/{video}/{video}_audio.wav"}
        assert "text_alternatives" not in item and item["benchmark"] == "daily-omni"
        for modality, source in (("video", "soundtrack"), ("audio", "sound")):
            made = clips[VIDEOS.index(video)][source]
            assert (tmp_path / "bench" / item["media"][modality]).read_bytes() == made.read_bytes()
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert (meta["protocol"], meta["converter"], meta["n_items"]) == ("spectrum", "daily-omni", 8)
    assert meta["scorer"] == "daily-omni"
    assert os.stat(release / "qa.json").st_nlink == 1  # nothing of the release was replaced
    # a second conversion into the same folder needs --overwrite, and then replaces it
    again = cli(str(release), "--out", str(tmp_path / "bench"))
    assert again.returncode == 2 and "pass --overwrite" in again.stderr
    assert cli(str(release), "--out", str(tmp_path / "bench"), "--overwrite").returncode == 0


@pytest.mark.parametrize("edit, n, item, item_id, field, message", [
    (lambda e: e[3].pop("Answer"), 3, "entry 3 (video XUWxQYmiBQY)", "XUWxQYmiBQY/1", "Answer",
     "no answer, though split 'all' has"),
    (lambda e: e[2].update(Answer="E"), 2, "entry 2 (video XUWxQYmiBQY)", "XUWxQYmiBQY/0", "Answer",
     "answer 'E' but the question has 4 options (A..D)"),
    (lambda e: e[1].update(Choice="A. one B. two"), 1, "entry 1 (video Ec_lQgZ9wlg)", "Ec_lQgZ9wlg/1", "Choice",
     "expected a list of options, got str"),
    (lambda e: e[5].update(Choice=["A. x", "B. x ", "C. y", "D. z"]), 5, "entry 5 (video -oC3FVOx62g)",
     "-oC3FVOx62g/1", "Choice", "'x'"),
    (lambda e: e[0].update(video_id="../Videos/rieb8cBb2z8"), 0, "entry 0", None, "video_id",
     "is not a plain file name"),
    (lambda e: e[6].update(video_id="missing123"), 6, "entry 6 (video missing123)", "missing123/0", "video_id",
     "no media file 'Videos/missing123/missing123_video.mp4'"),
    (lambda e: e[4].update(Question=""), 4, "entry 4 (video -oC3FVOx62g)", "-oC3FVOx62g/0", "Question",
     "missing or empty 'Question'"),
])
def test_an_unsound_entry_is_skipped_and_listed(tmp_path, clips, edit, n, item, item_id, field, message):
    entries = qa_entries()
    edit(entries)
    release = write_release(tmp_path / "Daily-Omni", clips, entries)
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "wrote 7 items (all: 7)" in done.stdout and "skipped 1 entry that could not be converted" in done.stdout
    [line] = [json.loads(t) for t in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert {k: line[k] for k in ("item_id", "file", "entry", "field")} == \
        {"item_id": item_id, "file": str(release / "qa.json"), "entry": item, "field": field}
    assert message in line["reason"] and "\n" not in line["reason"]
    # the other questions keep their ids: a clip's n counts its questions in file order, the skipped one too
    videos = [e["video_id"] for e in entries]
    want = [f"{v}/{videos[:i].count(v)}" for i, v in enumerate(videos) if i != n]
    assert list(items_of(tmp_path / "bench")) == want


def test_a_release_with_no_sound_entry_is_refused_in_one_line(tmp_path, clips):
    entries = qa_entries()
    for entry in entries:
        entry["Answer"] = "E"
    release = write_release(tmp_path / "Daily-Omni", clips, entries)
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert "none of the 8 entries could be converted; the first: answer 'E'" in done.stderr
    assert "item 'entry 0 (video Ec_lQgZ9wlg)'" in done.stderr and "field 'Answer'" in done.stderr
    assert not (tmp_path / "bench").exists()


def test_media_outside_the_release_are_never_read(tmp_path, clips):
    release = write_release(tmp_path / "Daily-Omni", clips)
    private = place(clips[0]["sound"], tmp_path / "private" / "secret.wav")
    wav = release / "Videos" / VIDEOS[0] / f"{VIDEOS[0]}_audio.wav"
    wav.unlink()
    wav.symlink_to(private)
    converted = convert_daily_omni(release, tmp_path / "bench")
    assert [(s.entry, s.field) for s in converted.skipped] == [(f"entry {i} (video {VIDEOS[0]})", "video_id")
                                                               for i in (0, 1)]
    assert all("outside" in s.reason for s in converted.skipped)
    assert not any(p.name == "secret.wav" or p.resolve() == private.resolve()
                   for p in (tmp_path / "bench").rglob("*") if p.is_file())
    # the same files under --media-root are found there, and only there
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (release / "Videos").rename(elsewhere / "Videos")
    wav = elsewhere / "Videos" / VIDEOS[0] / f"{VIDEOS[0]}_audio.wav"
    wav.unlink()
    place(clips[0]["sound"], wav)
    converted = convert_daily_omni(release, tmp_path / "bench", media_root=elsewhere, overwrite=True)
    assert converted.n_items == 8 and not converted.skipped
    media = items_of(tmp_path / "bench")[f"{VIDEOS[0]}/0"]["media"]
    assert media["audio"] == f"media/media-root/Videos/{VIDEOS[0]}/{VIDEOS[0]}_audio.wav"


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, clips):
    release = write_release(tmp_path / "Daily-Omni", clips)
    convert_daily_omni(release, tmp_path / "bench")
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text"]
    rows = run_and_check(tmp_path / "bench", tmp_path, conditions)
    # the run showed each item's own files in "normal": the picture and the separate sound file
    normal = rows.filter(rows["condition"] == "normal")
    assert set(normal["item_id"].to_list()) == set(items_of(tmp_path / "bench"))
