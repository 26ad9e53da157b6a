"""WorldSense as the dataset ships it, unpacked (``worldsense_qa.json`` keyed by video, ``task0``.. questions with
three or four labelled candidates, ``videos/<video>.mp4`` carrying their own sound, ``subtitles/<video>.srt`` for
some videos), converted to items whose video and audio are the one mp4, the subtitles kept as the audio's text
stand-in and WorldSense's own score breakdowns on each item; the snapshot as downloaded (``worldsense_videos_*.zip``
holding the mp4s at their top, ``worldsense_subtitles.zip``, never unpacked); a key written twice refused naming both
places; an unsound entry skipped and listed in ``skipped.jsonl`` by file, entry and field, in the packed snapshot too
(a member failing its CRC-32, a video in no archive, a subtitle member not UTF-8); the benchmark run through two
simulated models, metrics and report."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni import common
from omnieval.datasets.omni.worldsense import convert_worldsense
from tests.omni_release_run import damage_member, items_of, listing, make_clips, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
VIDEOS = {"rEJpeDVXqfI": 2, "Zk8Jx2k9wLc": 2, "0aQ4bmX6C1s": 1, "hFh5Zj5aQ0o": 3}  # video -> questions
SUBTITLED = ("rEJpeDVXqfI", "hFh5Zj5aQ0o")
SRT = ("1\n00:00:00,000 --> 00:00:01,500\nWelcome back to the\nchannel\n\n"
       "2\n00:00:01,500 --> 00:00:03,000\n<i>today we cook</i>\n\n"
       "3\n00:00:03,000 --> 00:00:04,000\n<i>today we cook</i>\n\n")


def qa(n_options=lambda v, t: 4 if (v + t) % 3 else 3) -> dict:
    data = {}
    for v, (video, n_tasks) in enumerate(VIDEOS.items()):
        record = {"video_id": video, "video_duration": "60s", "duration": "<1min",
                  "domain": ("Daily Life", "Sports", "Music", "Games")[v], "sub_category": "Cooking",
                  "audio_class": ["Speech", "Event"], "video_caption": f"A long description of video {v}."}
        for t in range(n_tasks):
            n = n_options(v, t)
            record[f"task{t}"] = {"task_domain": "Recognition",
                                  "task_type": ("Audio Recognition", "Event Sorting")[t % 2],
                                  "question": f"What is heard in video {v} ({t})?",
                                  "candidates": [f"{label}. Sound {label} of video {v}" for label in "ABCD"[:n]],
                                  "answer": "ABCD"[(v + t) % n]}
        data[video] = record
    return data


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("worldsense-media"), len(VIDEOS))


def write_release(folder: Path, clips, data: dict | None = None, subtitled=SUBTITLED) -> Path:
    for video, clip in zip(VIDEOS, clips, strict=True):
        place(clip["soundtrack"], folder / "videos" / f"{video}.mp4")
    for video in subtitled:
        (folder / "subtitles").mkdir(parents=True, exist_ok=True)
        (folder / "subtitles" / f"{video}.srt").write_text(SRT, encoding="utf-8")
    (folder / "worldsense_qa.json").write_text(json.dumps(qa() if data is None else data, indent=2))
    return folder


def test_each_question_shows_its_video_with_its_own_soundtrack(tmp_path, clips):
    release = write_release(tmp_path / "WorldSense", clips)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "worldsense", str(release), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 8 items (all: 8) and 4 media files" in done.stdout
    assert "a text stand-in for audio on 5 of 8 items" in done.stdout  # the two subtitled videos' 2 + 3 questions
    items = items_of(tmp_path / "bench")
    data = qa()
    assert list(items) == [f"{video}/task{t}" for video, n in VIDEOS.items() for t in range(n)]
    for item_id, item in items.items():
        video, key = item_id.split("/")
        task = data[video][key]
        assert item["question"] == task["question"]
        assert item["options"] == [c.split(". ", 1)[1] for c in task["candidates"]]
        assert item["answer"] == task["answer"] and len(item["options"]) in (3, 4)
        assert (item["category"], item["task"]) == (task["task_type"], data[video]["domain"])
        assert item["breakdowns"] == {"duration": "<1min", "domain": data[video]["domain"], "sub_category": "Cooking",
                                      "task_domain": "Recognition", "task_type": task["task_type"],
                                      "audio_class:Speech": "yes", "audio_class:Event": "yes"}
        assert item["media"] == {"video": f"media/videos/{video}.mp4", "audio": f"media/videos/{video}.mp4"}
        made = clips[list(VIDEOS).index(video)]["soundtrack"]
        assert (tmp_path / "bench" / item["media"]["video"]).read_bytes() == made.read_bytes()
        if video in SUBTITLED:  # cue text, markup gone, the repeated rolling cue once
            assert item["text_alternatives"] == {"audio": "Welcome back to the channel\ntoday we cook"}
        else:
            assert "text_alternatives" not in item


def test_the_switch_leaves_the_stand_ins_out(tmp_path, clips, monkeypatch):
    monkeypatch.setattr(common, "WRITE_TEXT_ALTERNATIVES", False)
    converted = convert_worldsense(write_release(tmp_path / "WorldSense", clips), tmp_path / "bench")
    assert converted.text_alternatives == {}
    assert all("text_alternatives" not in item for item in items_of(tmp_path / "bench").values())


def question_ids(data: dict) -> list[str]:
    """The item ids of a ``worldsense_qa.json`` as the test wrote it, in file order."""
    return [f"{video}/{key}" for video, record in data.items() for key in record if key.startswith("task")]


def skipped_lines(bench: Path) -> list[dict]:
    return [json.loads(line) for line in (bench / "skipped.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("edit, item_id, entry, field, reason", [
    (lambda d: d["rEJpeDVXqfI"]["task0"].update(answer="D"), "rEJpeDVXqfI/task0", "rEJpeDVXqfI/task0", "answer",
     "answer 'D' but the question has 3 options (A..C)"),
    (lambda d: d["Zk8Jx2k9wLc"]["task1"].update(candidates=None), "Zk8Jx2k9wLc/task1", "Zk8Jx2k9wLc/task1",
     "candidates", "expected a list of options, got NoneType"),
    (lambda d: d["hFh5Zj5aQ0o"]["task2"].pop("question"), "hFh5Zj5aQ0o/task2", "hFh5Zj5aQ0o/task2", "question",
     "missing or empty 'question'"),
    (lambda d: d["0aQ4bmX6C1s"].update(task0="What?"), "0aQ4bmX6C1s/task0", "0aQ4bmX6C1s/task0", "task0",
     "expected an object, got str"),
    (lambda d: d.update({"gone1234": d.pop("0aQ4bmX6C1s")}), "gone1234/task0", "gone1234/task0", "video",
     "no media file 'videos/gone1234.mp4' under {release}"),
    (lambda d: d.update({"../videos/x": {"task0": {}}}), None, "video ../videos/x", "video",
     "'../videos/x' is not a plain file name (keys name videos/<key>.mp4)"),
])
def test_an_unsound_entry_is_skipped_and_listed_naming_file_entry_and_field(tmp_path, clips, edit, item_id, entry,
                                                                            field, reason):
    data = qa()
    edit(data)
    release = write_release(tmp_path / "WorldSense", clips, data)
    convert_worldsense(release, tmp_path / "bench")
    dropped = [i for i in question_ids(data) if i == item_id or i.startswith("../")]
    assert list(items_of(tmp_path / "bench")) == [i for i in question_ids(data) if i not in dropped]
    assert skipped_lines(tmp_path / "bench") == [{"item_id": item_id, "file": str(release / "worldsense_qa.json"),
                                                  "entry": entry, "field": field,
                                                  "reason": reason.format(release=release)}]


def test_a_subtitle_file_that_is_not_utf8_skips_its_video(tmp_path, clips):
    release = write_release(tmp_path / "WorldSense", clips)
    srt = release / "subtitles" / "hFh5Zj5aQ0o.srt"
    srt.write_bytes(b"1\n00:00:00,000 --> 00:00:01,000\ncaf\xe9\n")
    convert_worldsense(release, tmp_path / "bench")
    assert list(items_of(tmp_path / "bench")) == [i for i in question_ids(qa()) if not i.startswith("hFh5Zj5aQ0o/")]
    [line] = skipped_lines(tmp_path / "bench")
    assert (line["item_id"], line["entry"], line["field"]) == (None, "video hFh5Zj5aQ0o", "subtitles")
    assert str(srt) in line["reason"] and "not UTF-8" in line["reason"] and "\n" not in line["reason"]


def zip_release(folder: Path, clips, data: dict | None = None) -> Path:
    """The snapshot as downloaded from honglyhly/WorldSense: ``worldsense_qa.json`` beside two video archives holding
    ``<video>.mp4`` at their top (one deflated, one stored) and ``worldsense_subtitles.zip``, none unpacked."""
    folder.mkdir(parents=True)
    (folder / "worldsense_qa.json").write_text(json.dumps(qa() if data is None else data, indent=2))
    for number, method in ((0, zipfile.ZIP_DEFLATED), (1, zipfile.ZIP_STORED)):
        with zipfile.ZipFile(folder / f"worldsense_videos_{number}.zip", "w", method) as zf:
            for video, clip in list(zip(VIDEOS, clips, strict=True))[2 * number: 2 * number + 2]:
                zf.write(clip["soundtrack"], f"{video}.mp4")
    with zipfile.ZipFile(folder / "worldsense_subtitles.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for video in SUBTITLED:
            zf.writestr(f"subtitles/{video}.srt", SRT)
    return folder


def test_the_snapshot_as_downloaded_is_read_inside_its_archives(tmp_path, clips):
    release = zip_release(tmp_path / "WorldSense", clips)
    before = listing(release)
    members = {}
    for number in (0, 1):
        with zipfile.ZipFile(release / f"worldsense_videos_{number}.zip") as zf:
            members.update({name: zf.read(name) for name in zf.namelist()})
    for attempt in ([], ["--overwrite"]):
        done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "worldsense", str(release), "--out",
                               str(tmp_path / "bench"), *attempt], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert "wrote 8 items (all: 8) and 4 media files" in done.stdout
        assert "a text stand-in for audio on 5 of 8 items" in done.stdout
        items = items_of(tmp_path / "bench")
        assert list(items) == [f"{video}/task{t}" for video, n in VIDEOS.items() for t in range(n)]
        for item_id, item in items.items():
            video = item_id.split("/")[0]
            assert item["media"] == {"video": f"media/videos/{video}.mp4", "audio": f"media/videos/{video}.mp4"}
            assert (tmp_path / "bench" / item["media"]["video"]).read_bytes() == members[f"{video}.mp4"]
            if video in SUBTITLED:
                assert item["text_alternatives"] == {"audio": "Welcome back to the channel\ntoday we cook"}
            else:
                assert "text_alternatives" not in item
        assert sorted(p.relative_to(tmp_path / "bench").as_posix() for p in (tmp_path / "bench").rglob("*")
                      if p.is_file()) == sorted(["benchmark.json", "items.jsonl"] + [f"media/videos/{m}"
                                                                                     for m in members])
        assert listing(release) == before
        assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["scorer"] == "worldsense"


def test_the_packed_snapshot_with_unsound_entries_converts_the_rest(tmp_path, clips):
    # as downloaded: one answer no label, one video in no archive, one member failing its CRC-32 (its video's three
    # questions), one subtitle member not UTF-8 (its video's two questions, one line); the rest converted
    data = qa()
    data["Zk8Jx2k9wLc"]["task1"]["answer"] = "E"
    data["gone1234"] = data.pop("0aQ4bmX6C1s")
    release = zip_release(tmp_path / "WorldSense", clips, data)
    damage_member(release / "worldsense_videos_1.zip", "hFh5Zj5aQ0o.mp4")
    with zipfile.ZipFile(release / "worldsense_subtitles.zip", "w") as zf:
        zf.writestr("subtitles/rEJpeDVXqfI.srt", b"1\n00:00:00,000 --> 00:00:01,000\ncaf\xe9\n")
    converted = convert_worldsense(release, tmp_path / "bench")
    assert converted.n_items == 1 and converted.n_media == 1
    items = items_of(tmp_path / "bench")
    assert list(items) == ["Zk8Jx2k9wLc/task0"]
    task = data["Zk8Jx2k9wLc"]["task0"]
    item = items["Zk8Jx2k9wLc/task0"]
    assert (item["question"], item["answer"]) == (task["question"], task["answer"])
    assert item["options"] == [c.split(". ", 1)[1] for c in task["candidates"]]
    assert (tmp_path / "bench" / item["media"]["video"]).read_bytes() == clips[1]["soundtrack"].read_bytes()
    qa_file = str(release / "worldsense_qa.json")
    crc = (f"cannot read member 'hFh5Zj5aQ0o.mp4' of {release / 'worldsense_videos_1.zip'}: Bad CRC-32 for file "
           "'hFh5Zj5aQ0o.mp4'")
    missing = (f"no media file 'videos/gone1234.mp4' under {release}, nor as a member of "
               f"{release / 'worldsense_videos_0.zip'}, {release / 'worldsense_videos_1.zip'}")
    not_utf8 = (f"member 'subtitles/rEJpeDVXqfI.srt' of {release / 'worldsense_subtitles.zip'}, line 3: not UTF-8 "
                "text (byte 0xe9 at byte offset 35: invalid continuation byte)")
    assert skipped_lines(tmp_path / "bench") == [
        {"item_id": None, "file": qa_file, "entry": "video rEJpeDVXqfI", "field": "subtitles", "reason": not_utf8},
        {"item_id": "Zk8Jx2k9wLc/task1", "file": qa_file, "entry": "Zk8Jx2k9wLc/task1", "field": "answer",
         "reason": "answer 'E' but the question has 4 options (A..D)"},
        *({"item_id": f"hFh5Zj5aQ0o/task{t}", "file": qa_file, "entry": f"hFh5Zj5aQ0o/task{t}", "field": "video",
           "reason": crc} for t in range(3)),
        {"item_id": "gone1234/task0", "file": qa_file, "entry": "gone1234/task0", "field": "video",
         "reason": missing}]


def test_a_video_key_written_twice_is_refused_naming_both(tmp_path, clips):
    # json.loads keeps the last of two equal keys: the first record's questions would vanish without a word
    data = qa()
    text = json.dumps(data, indent=2)
    first = json.dumps({"rEJpeDVXqfI": data["rEJpeDVXqfI"]}, indent=2)[1:-1].strip("\n")
    text = text[:-2] + ",\n" + first.replace('"task0"', '"task5"') + "\n}"
    assert text.count('"rEJpeDVXqfI": {') == 2
    lines = [n for n, line in enumerate(text.splitlines(), start=1) if line.startswith('  "rEJpeDVXqfI": {')]
    release = write_release(tmp_path / "WorldSense", clips)
    (release / "worldsense_qa.json").write_text(text)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "worldsense", str(release), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"omnieval: error: file {str(release / 'worldsense_qa.json')!r}, item 'video rEJpeDVXqfI', field 'video': "
        f"video key 'rEJpeDVXqfI' is written more than once (line {lines[0]} and line {lines[1]}): a JSON reader "
        "keeps only the last record, dropping the others' questions"]
    assert not (tmp_path / "bench").exists()


def test_a_task_key_written_twice_is_refused(tmp_path, clips):
    text = json.dumps(qa(), indent=2).replace('"task1": {', '"task0": {', 1)
    release = write_release(tmp_path / "WorldSense", clips)
    (release / "worldsense_qa.json").write_text(text)
    with pytest.raises(InputError) as err:
        convert_worldsense(release, tmp_path / "bench")
    assert (err.value.item, err.value.field) == ("video rEJpeDVXqfI", "task0")
    assert "task key 'task0' is written twice in the video's record (key 8 of its object and key 9 of its object)" \
        in str(err.value)


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, clips):
    # every video subtitled: the audio_as_text condition shows each item its subtitles instead of the soundtrack
    convert_worldsense(write_release(tmp_path / "WorldSense", clips, subtitled=list(VIDEOS)), tmp_path / "bench")
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text",
                  "audio_as_text"]
    rows = run_and_check(tmp_path / "bench", tmp_path, conditions)
    # questions on one video never lend each other its picture or its sound
    donors = rows.filter(rows["condition"] == "random")["donors"].to_list()
    for item_id, lent in zip(rows.filter(rows["condition"] == "random")["item_id"].to_list(), donors, strict=True):
        for modality in ("video", "audio"):
            assert json.loads(lent)[modality].split("/")[0] != item_id.split("/")[0]
