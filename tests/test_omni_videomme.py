"""Video-MME with audio as ``lmms-lab/Video-MME`` ships it, unpacked: ``videomme/test-00000-of-00001.parquet``
(Hugging Face features, three questions per video, labelled options), ``data/<videoID>.mp4`` with their own sound
(one ``.MP4``, a name lmms-eval also tries), ``subtitle/<videoID>.srt`` in Video-MME's ``<font>`` markup for some
videos; converted to items whose video and audio are the one file and whose subtitles are the audio's text
stand-in, each item carrying Video-MME's own score breakdowns, ``--duration`` filtering, answerless shards skipped
with a note, an unsound row skipped and listed in ``skipped.jsonl`` by file, row and field; the release as
downloaded (``videos_chunked_*.zip`` with ``data/`` members, ``subtitle.zip`` with ``subtitle/`` members, never
unpacked), unsound rows skipped there too (a member failing its CRC-32, a video in no archive) and an archive whose
central directory is damaged refusing the release; VLMEvalKit's unpacked ``video/`` folder; the benchmark run
through two simulated models, metrics and report."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni import archives
from omnieval.datasets.omni.archives import ReleaseArchives
from omnieval.datasets.omni.videomme import convert_videomme
from tests.omni_release_run import damage_member, items_of, listing, make_clips, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
VIDEOS = [("001", "fFjv93ACGo8", "short", "Knowledge"), ("002", "AYSYelOQtQI", "short", "Film & Television"),
          ("301", "q2Bd3xUkkbY", "medium", "Sports Competition"), ("601", "Wb2y5Yc1e3E", "long", "Life Record")]
UPPER = "Wb2y5Yc1e3E"  # stored as data/<id>.MP4
SUBTITLED = ("fFjv93ACGo8", "q2Bd3xUkkbY")
SRT = ('1\n00:00:01,520 --> 00:00:05,040\n<font color="white" size=".72c">next track final</font>\n\n'
       '2\n00:00:03,520 --> 00:00:06,000\n<font color="white" size=".72c">is the</font>\n')
COLUMNS = ("video_id", "duration", "domain", "sub_category", "url", "videoID", "question_id", "task_type", "question",
           "options", "answer")


def rows(answers: bool = True) -> list[dict]:
    out = []
    for v, (number, youtube, duration, domain) in enumerate(VIDEOS):
        for q in range(3):
            out.append({"video_id": number, "duration": duration, "domain": domain,
                        "sub_category": "Humanity & History", "url": f"https://www.youtube.com/watch?v={youtube}",
                        "videoID": youtube, "question_id": f"{number}-{q + 1}",
                        "task_type": ("Counting Problem", "Object Recognition")[q % 2],
                        "question": f"How many things happen in video {number} ({q})?",
                        "options": [f"{label}. {v + q + i} things." for i, label in enumerate("ABCD")],
                        "answer": "ABCD"[(v + q) % 4] if answers else None})
    return out


def table(records: list[dict]) -> pa.Table:
    features = {c: {"dtype": "string", "_type": "Value"} for c in COLUMNS}
    features["options"] = {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"}
    schema = pa.schema([pa.field(c, pa.list_(pa.string()) if c == "options" else pa.string()) for c in COLUMNS],
                       metadata={b"huggingface": json.dumps({"info": {"features": features}}).encode()})
    return pa.Table.from_pylist(records, schema=schema)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("videomme-media"), len(VIDEOS))


def write_release(folder: Path, clips, records: list[dict] | None = None, subtitled=SUBTITLED) -> Path:
    (folder / "videomme").mkdir(parents=True)
    pq.write_table(table(rows() if records is None else records), folder / "videomme" / "test-00000-of-00001.parquet")
    for (_, youtube, _, _), clip in zip(VIDEOS, clips, strict=True):
        place(clip["soundtrack"], folder / "data" / f"{youtube}.{'MP4' if youtube == UPPER else 'mp4'}")
    for youtube in subtitled:
        (folder / "subtitle").mkdir(exist_ok=True)
        (folder / "subtitle" / f"{youtube}.srt").write_text(SRT, encoding="utf-8")
    return folder


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "videomme", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_each_question_shows_its_video_with_its_soundtrack_and_subtitles(tmp_path, clips):
    release = write_release(tmp_path / "Video-MME", clips)
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert "wrote 12 items (test: 12) and 4 media files" in done.stdout
    assert "a text stand-in for audio on 6 of 12 items" in done.stdout
    items = items_of(tmp_path / "bench")
    assert list(items) == [r["question_id"] for r in rows()]
    for row in rows():
        item = items[row["question_id"]]
        youtube = row["videoID"]
        assert item["question"] == row["question"] and item["split"] == "test"
        assert item["options"] == [o.split(". ", 1)[1] for o in row["options"]]
        assert item["answer"] == row["answer"]
        assert (item["category"], item["task"]) == (row["task_type"], row["domain"])
        assert item["breakdowns"] == {"duration": row["duration"], "domain": row["domain"],
                                      "sub_category": row["sub_category"], "task_type": row["task_type"]}
        name = f"media/data/{youtube}.{'MP4' if youtube == UPPER else 'mp4'}"
        assert item["media"] == {"video": name, "audio": name}
        made = clips[[v[1] for v in VIDEOS].index(youtube)]["soundtrack"]
        assert (tmp_path / "bench" / name).read_bytes() == made.read_bytes()
        if youtube in SUBTITLED:
            assert item["text_alternatives"] == {"audio": "next track final\nis the"}
        else:
            assert "text_alternatives" not in item
    # --duration keeps the questions on videos of those durations
    done = cli(str(release), "--out", str(tmp_path / "short"), "--duration", "short")
    assert done.returncode == 0 and "kept the short videos' questions" in done.stderr
    assert sorted(items_of(tmp_path / "short")) == [r["question_id"] for r in rows() if r["duration"] == "short"]
    done = cli(str(release), "--out", str(tmp_path / "x"), "--duration", "short,brief")
    assert done.returncode == 2
    assert "unknown duration 'brief'; Video-MME's durations: short, medium, long" in done.stderr


def test_a_shard_without_answers_is_skipped_with_a_note(tmp_path, clips):
    release = write_release(tmp_path / "Video-MME", clips)
    pq.write_table(table(rows(answers=False)[:3]), release / "videomme" / "private-00000-of-00001.parquet")
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert "note: skipped split 'private' (3 questions): none of its questions has an answer" in done.stderr
    assert {item["split"] for item in items_of(tmp_path / "bench").values()} == {"test"}
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["skipped_splits"] == {"private": 3}
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["scorer"] == "videomme"


@pytest.mark.parametrize("edit, row, field, reason", [
    (lambda r: r[4].update(answer=None), 4, "answer", "no answer, though split 'test' has answers"),
    (lambda r: r[5].update(answer="F"), 5, "answer", "answer 'F' but the question has 4 options (A..D)"),
    (lambda r: r[6].update(answer="17 things."), 6, "answer",
     "answer '17 things.' is neither a label A..D nor exactly one of the options"),
    (lambda r: r[1].update(options=["A. one"]), 1, "options", "1 options (2 to 26 needed)"),
    (lambda r: r[7].update(videoID="nOtThErE"), 7, "videoID",
     "no media file 'data/nOtThErE.mp4', 'data/nOtThErE.MP4', 'data/nOtThErE.mkv', 'video/nOtThErE.mp4', "
     "'video/nOtThErE.MP4', 'video/nOtThErE.mkv' under {release}"),
    (lambda r: r[2].update(question=" "), 2, "question", "missing or empty 'question'"),
])
def test_an_unsound_row_is_skipped_and_listed_naming_file_row_and_field(tmp_path, clips, edit, row, field, reason):
    records = rows()
    edit(records)
    release = write_release(tmp_path / "Video-MME", clips, records)
    converted = convert_videomme(release, tmp_path / "bench")
    assert list(items_of(tmp_path / "bench")) == [r["question_id"] for i, r in enumerate(records) if i != row]
    shard = release / "videomme" / "test-00000-of-00001.parquet"
    qid = records[row]["question_id"]
    assert skipped_lines(tmp_path / "bench") == [
        {"item_id": qid, "file": str(shard), "entry": f"row {row} (question {qid})", "field": field,
         "reason": reason.format(release=release)}]
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["skipped_entries"] == 1
    assert "skipped 1 entry that could not be converted" in converted.summary()


def skipped_lines(bench: Path) -> list[dict]:
    return [json.loads(line) for line in (bench / "skipped.jsonl").read_text(encoding="utf-8").splitlines()]


def zip_release(folder: Path, clips, records: list[dict] | None = None) -> Path:
    """The release as downloaded from lmms-lab/Video-MME: the parquet beside two video archives whose members are
    ``data/<videoID>.mp4`` (one ``.MP4``; one archive deflated, one stored) and ``subtitle.zip`` with
    ``subtitle/<videoID>.srt`` members, none unpacked."""
    (folder / "videomme").mkdir(parents=True)
    pq.write_table(table(rows() if records is None else records), folder / "videomme" / "test-00000-of-00001.parquet")
    for chunk, method in ((1, zipfile.ZIP_DEFLATED), (2, zipfile.ZIP_STORED)):
        with zipfile.ZipFile(folder / f"videos_chunked_{chunk:02d}.zip", "w", method) as zf:
            for (_, youtube, _, _), clip in list(zip(VIDEOS, clips, strict=True))[2 * chunk - 2: 2 * chunk]:
                zf.write(clip["soundtrack"], f"data/{youtube}.{'MP4' if youtube == UPPER else 'mp4'}")
    with zipfile.ZipFile(folder / "subtitle.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for youtube in SUBTITLED:
            zf.writestr(f"subtitle/{youtube}.srt", SRT)
    return folder


def test_the_release_as_downloaded_is_read_inside_its_archives(tmp_path, clips):
    release = zip_release(tmp_path / "Video-MME", clips)
    before = listing(release)
    for attempt in ("first", "again with --overwrite"):
        done = cli(str(release), "--out", str(tmp_path / "bench"), *(["--overwrite"] if attempt != "first" else []))
        assert done.returncode == 0, (attempt, done.stderr)
        assert "wrote 12 items (test: 12) and 4 media files" in done.stdout
        assert "a text stand-in for audio on 6 of 12 items" in done.stdout
        items = items_of(tmp_path / "bench")
        assert list(items) == [r["question_id"] for r in rows()]
        members = {}
        for chunk in ("01", "02"):
            with zipfile.ZipFile(release / f"videos_chunked_{chunk}.zip") as zf:
                members.update({name: zf.read(name) for name in zf.namelist()})
        for row in rows():
            item, youtube = items[row["question_id"]], row["videoID"]
            member = f"data/{youtube}.{'MP4' if youtube == UPPER else 'mp4'}"
            assert item["media"] == {"video": f"media/{member}", "audio": f"media/{member}"}
            assert (tmp_path / "bench" / "media" / member).read_bytes() == members[member]
            if youtube in SUBTITLED:
                assert item["text_alternatives"] == {"audio": "next track final\nis the"}
            else:
                assert "text_alternatives" not in item
        # only the members the questions need, each once, nothing half-written
        assert sorted(p.relative_to(tmp_path / "bench").as_posix() for p in (tmp_path / "bench").rglob("*")
                      if p.is_file()) == sorted(["benchmark.json", "items.jsonl"] + [f"media/{m}" for m in members])
        assert listing(release) == before  # nothing extracted into the release, nothing changed there


def test_only_the_members_the_questions_need_are_extracted_once(tmp_path, clips, monkeypatch):
    extracted = []
    extract = ReleaseArchives.extract
    monkeypatch.setattr(ReleaseArchives, "extract",
                        lambda self, member, *a: (extracted.append(member.info.filename), extract(self, member, *a)))
    release = zip_release(tmp_path / "Video-MME", clips)
    converted = convert_videomme(release, tmp_path / "bench", durations=["medium"])  # one video, three questions
    assert converted.n_items == 3 and converted.n_media == 1
    assert extracted == ["data/q2Bd3xUkkbY.mp4"]
    assert [p.name for p in (tmp_path / "bench" / "media" / "data").iterdir()] == ["q2Bd3xUkkbY.mp4"]


def test_a_replaced_output_keeps_the_members_it_already_extracted(tmp_path, clips, monkeypatch):
    release = zip_release(tmp_path / "Video-MME", clips)
    bench = tmp_path / "bench"
    convert_videomme(release, bench)
    media = sorted(p for p in (bench / "media").rglob("*") if p.is_file())
    inodes = {p: p.stat().st_ino for p in media}
    spoiled = bench / "media" / "data" / "fFjv93ACGo8.mp4"  # same size, one byte changed: its CRC-32 differs
    data = bytearray(spoiled.read_bytes())
    data[len(data) // 2] ^= 0xFF
    spoiled.write_bytes(bytes(data))
    opened = []
    real_open = archives._opened
    monkeypatch.setattr(archives, "_opened", lambda zf, member, *a: (opened.append(member.path),
                                                                     real_open(zf, member, *a))[1])
    convert_videomme(release, bench, overwrite=True)
    # only the spoiled copy is extracted again (the subtitles, read into the items, are read each time)
    assert [path for path in opened if path.startswith("data/")] == ["data/fFjv93ACGo8.mp4"]
    assert {p: p.stat().st_ino for p in media if p != spoiled} == {p: i for p, i in inodes.items() if p != spoiled}
    members = {}
    for chunk in ("01", "02"):
        with zipfile.ZipFile(release / f"videos_chunked_{chunk}.zip") as zf:
            members.update({name: zf.read(name) for name in zf.namelist()})
    assert {p.relative_to(bench / "media").as_posix(): p.read_bytes() for p in media} == members


def test_archives_under_the_media_root_are_read_too(tmp_path, clips):
    archives = zip_release(tmp_path / "downloads", clips)
    release = tmp_path / "Video-MME"  # the questions here, the archives downloaded elsewhere
    release.mkdir()
    (archives / "videomme").rename(release / "videomme")
    convert_videomme(release, tmp_path / "bench", media_root=archives)
    for row in rows():
        member = f"data/{row['videoID']}.{'MP4' if row['videoID'] == UPPER else 'mp4'}"
        assert items_of(tmp_path / "bench")[row["question_id"]]["media"]["video"] == f"media/{member}"
        made = clips[[v[1] for v in VIDEOS].index(row["videoID"])]["soundtrack"]
        assert (tmp_path / "bench" / "media" / member).read_bytes() == made.read_bytes()


def test_vlmevalkit_video_folder_keeps_each_members_suffix(tmp_path, clips):
    # VLMEvalKit unpacks every member into video/<its file name>, so the .MP4 and an .mkv keep their suffixes
    release = tmp_path / "Video-MME"
    (release / "videomme").mkdir(parents=True)
    pq.write_table(table(rows()), release / "videomme" / "test-00000-of-00001.parquet")
    suffixes = {"fFjv93ACGo8": "mp4", "AYSYelOQtQI": "mkv", "q2Bd3xUkkbY": "mp4", UPPER: "MP4"}
    for (_, youtube, _, _), clip in zip(VIDEOS, clips, strict=True):
        place(clip["soundtrack"], release / "video" / f"{youtube}.{suffixes[youtube]}")
    convert_videomme(release, tmp_path / "bench")
    for row in rows():
        name = f"media/video/{row['videoID']}.{suffixes[row['videoID']]}"
        assert items_of(tmp_path / "bench")[row["question_id"]]["media"] == {"video": name, "audio": name}
        made = clips[[v[1] for v in VIDEOS].index(row["videoID"])]["soundtrack"]
        assert (tmp_path / "bench" / name).read_bytes() == made.read_bytes()


def test_an_archive_whose_central_directory_is_damaged_refuses_the_release(tmp_path, clips):
    # every video in it is lost: the release's error, not one row's
    release = zip_release(tmp_path / "Video-MME", clips)
    archive = release / "videos_chunked_02.zip"
    archive.write_bytes(archive.read_bytes()[:100])
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 2
    shard = release / "videomme" / "test-00000-of-00001.parquet"
    assert done.stderr.strip().splitlines() == [  # the first lookup reads every video archive
        f"omnieval: error: file {str(shard)!r}, item 'row 0 (question 001-1)', field 'videoID': cannot read the zip "
        f"archive {archive} (looking for 'data/fFjv93ACGo8.mp4' in it): File is not a zip file"]
    assert not (tmp_path / "bench").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".videomme-")]  # no half-built folder left


def test_the_packed_release_with_unsound_rows_converts_the_rest(tmp_path, clips):
    # as downloaded: one answer no label, one member failing its CRC-32 (its video's three questions), one video
    # in no archive; each listed with its reason, every other row converted from the archives
    records = rows()
    records[1]["answer"] = "F"
    records[10]["videoID"] = "nOtThErE"
    release = zip_release(tmp_path / "Video-MME", clips, records)
    damage_member(release / "videos_chunked_02.zip", "data/q2Bd3xUkkbY.mp4")
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert "wrote 7 items (test: 7) and 3 media files" in done.stdout
    assert f"skipped 5 entries that could not be converted, each with its reason in {tmp_path / 'bench'}" \
        in done.stdout
    bad = {1, 6, 7, 8, 10}
    items = items_of(tmp_path / "bench")
    assert list(items) == [r["question_id"] for i, r in enumerate(records) if i not in bad]
    with zipfile.ZipFile(release / "videos_chunked_01.zip") as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    made = {youtube: clip["soundtrack"].read_bytes() for (_, youtube, _, _), clip in zip(VIDEOS, clips, strict=True)}
    for row in (r for i, r in enumerate(records) if i not in bad):
        item = items[row["question_id"]]
        assert (item["question"], item["answer"]) == (row["question"], row["answer"])
        assert item["options"] == [o.split(". ", 1)[1] for o in row["options"]]
        member = f"data/{row['videoID']}.{'MP4' if row['videoID'] == UPPER else 'mp4'}"
        assert item["media"] == {"video": f"media/{member}", "audio": f"media/{member}"}
        assert (tmp_path / "bench" / "media" / member).read_bytes() == made[row["videoID"]]
        assert member not in members or members[member] == made[row["videoID"]]
    shard = str(release / "videomme" / "test-00000-of-00001.parquet")
    crc = (f"cannot read member 'data/q2Bd3xUkkbY.mp4' of {release / 'videos_chunked_02.zip'}: Bad CRC-32 for file "
           "'data/q2Bd3xUkkbY.mp4'")
    missing = ("no media file 'data/nOtThErE.mp4', 'data/nOtThErE.MP4', 'data/nOtThErE.mkv', 'video/nOtThErE.mp4', "
               f"'video/nOtThErE.MP4', 'video/nOtThErE.mkv' under {release}, nor as a member of "
               f"{release / 'videos_chunked_01.zip'}, {release / 'videos_chunked_02.zip'}")
    expected = [(1, "answer", "answer 'F' but the question has 4 options (A..D)"), (6, "videoID", crc),
                (7, "videoID", crc), (8, "videoID", crc), (10, "videoID", missing)]
    assert skipped_lines(tmp_path / "bench") == [
        {"item_id": (qid := records[i]["question_id"]), "file": shard, "entry": f"row {i} (question {qid})",
         "field": field, "reason": reason} for i, field, reason in expected]
    assert not list((tmp_path / "bench" / "media" / "data").glob("*q2Bd3xUkkbY*"))  # no partial file left
    assert not list((tmp_path / "bench" / "media" / "data").glob(".*"))


def test_a_damaged_subtitle_archive_is_named(tmp_path, clips):
    release = zip_release(tmp_path / "Video-MME", clips)
    (release / "subtitle.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(InputError) as err:
        convert_videomme(release, tmp_path / "bench")
    assert err.value.item == "row 0 (question 001-1)" and err.value.field == "videoID"
    assert f"cannot read the zip archive {release / 'subtitle.zip'} (looking for 'subtitle/fFjv93ACGo8.srt' in it)" \
        in str(err.value)


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, clips):
    # every video subtitled: the audio_as_text condition shows each item its subtitles instead of the soundtrack
    convert_videomme(write_release(tmp_path / "Video-MME", clips, subtitled=[v[1] for v in VIDEOS]), tmp_path / "bench")
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text",
                  "audio_as_text"]
    rows_ = run_and_check(tmp_path / "bench", tmp_path, conditions)
    assert set(rows_["split"].to_list()) == {"test"}
