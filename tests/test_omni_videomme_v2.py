"""Video-MME-v2 as ``MME-Benchmarks/Video-MME-v2`` ships it: ``test.parquet`` (groups of four questions per clip,
eight options written ``"A. ..."`` one a line, ``level`` / ``second_head`` / ``third_head`` on each group's last row
only), ``videos/001.zip`` ... with the clips as members, ``subtitle.zip`` with word-level ``subtitle/<id>.jsonl``;
read packed and unpacked (the release's ``videos/``, lmms-eval's ``data/``), each item carrying its group's
breakdowns, a group with an unsound row (or an unreadable subtitle line) skipped whole and listed; the benchmark
run through two simulated models, metrics and report, the group score recomputed by hand from ``predictions.parquet``
(relevance: (right / 4)^2; a chain by its structure's table)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni.videomme_v2 import convert_videomme_v2
from tests.omni_release_run import NAMES, _Cells, items_of, make_clips, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
GROUPS = [("001", "relevance", "[1,2,3,4]", "1", "Recognition", "Objects"),
          ("002", "logic", "[1,[2,3],4]", "2", "Temporal", "Order"),
          ("003", "logic", "[[1,2],3,4]", "3", "Reasoning", "Social")]
COLUMNS = ("video_id", "url", "group_type", "group_structure", "question_id", "question", "options", "answer",
           "level", "second_head", "third_head")
WORDS = [{"text": "Hello", "start_time": 0.5, "end_time": 0.8}, {"text": "world.", "start_time": 0.8,
                                                                  "end_time": 1.1}]


def rows() -> list[dict]:
    out = []
    for g, (video, kind, structure, level, second, third) in enumerate(GROUPS):
        for q in range(4):
            last = q == 3
            out.append({"video_id": video, "url": f"https://www.youtube.com/watch?v=v{video}", "group_type": kind,
                        "group_structure": structure, "question_id": f"{video}-{q + 1}",
                        "question": f"What happens in clip {video}, step {q + 1}?",
                        "options": "\n".join(f"{label}. Event {g}{q}{i}." for i, label in enumerate("ABCDEFGH")),
                        "answer": "ABCDEFGH"[(g + 3 * q) % 8], "level": level if last else None,
                        "second_head": second if last else None, "third_head": third if last else None})
    return out


def write_table(path: Path, records: list[dict]) -> None:
    schema = pa.schema([pa.field(c, pa.string()) for c in COLUMNS])
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("videomme-v2-media"), len(GROUPS))


def write_release(folder: Path, clips, records: list[dict] | None = None, packed: bool = True,
                  subtitled: tuple[str, ...] = ("001",)) -> Path:
    write_table(folder / "test.parquet", rows() if records is None else records)
    if packed:  # 001 and 002 in videos/001.zip, 003 in videos/002.zip (twenty a zip in the release)
        (folder / "videos").mkdir(parents=True)
        for archive, members in (("001.zip", ("001", "002")), ("002.zip", ("003",))):
            with zipfile.ZipFile(folder / "videos" / archive, "w", zipfile.ZIP_STORED) as zf:
                for video in members:
                    zf.write(clips[int(video) - 1]["soundtrack"], f"{video}.mp4")
        with zipfile.ZipFile(folder / "subtitle.zip", "w") as zf:
            for video in subtitled:
                zf.writestr(f"subtitle/{video}.jsonl", "".join(json.dumps(w) + "\n" for w in WORDS))
    else:
        for video, *_ in GROUPS:
            place(clips[int(video) - 1]["soundtrack"], folder / "videos" / f"{video}.mp4")
        (folder / "subtitle").mkdir()
        (folder / "subtitle" / "001.jsonl").write_text("".join(json.dumps(w) + "\n" for w in WORDS))
    return folder


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "videomme-v2", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("packed", [True, False])
def test_each_question_carries_its_groups_breakdowns(tmp_path, clips, packed):
    release = write_release(tmp_path / "Video-MME-v2", clips, packed=packed)
    before = sorted(p.relative_to(release).as_posix() for p in release.rglob("*"))
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert "wrote 12 items (test: 12) and 3 media files" in done.stdout
    assert "a text stand-in for audio on 4 of 12 items" in done.stdout
    assert sorted(p.relative_to(release).as_posix() for p in release.rglob("*")) == before  # nothing unpacked there
    items = items_of(tmp_path / "bench")
    assert list(items) == [r["question_id"] for r in rows()]
    for row in rows():
        item = items[row["question_id"]]
        video, kind, structure, level, second, third = GROUPS[int(row["video_id"]) - 1]
        assert item["options"] == [f"Event {line.split('Event ')[1]}" for line in row["options"].splitlines()]
        assert len(item["options"]) == 8 and item["answer"] == row["answer"] and item["split"] == "test"
        # the group's level and heads, given on its last row only, on all four of its questions
        assert item["breakdowns"] == {"group_type": kind, "group_structure": structure, "level": level,
                                      "second_head": second, "third_head": third}
        assert (item["category"], item["task"]) == (second, third)
        name = f"media/videos/{video}.mp4"
        assert item["media"] == {"video": name, "audio": name}
        assert (tmp_path / "bench" / name).read_bytes() == clips[int(video) - 1]["soundtrack"].read_bytes()
        if video == "001":
            assert item["text_alternatives"] == {"audio": "Hello world."}
        else:
            assert "text_alternatives" not in item
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["scorer"] == "videomme-v2"


def test_a_group_with_an_unsound_row_is_skipped_whole(tmp_path, clips):
    records = rows()
    records[5]["answer"] = "Z"  # question 002-2
    release = write_release(tmp_path / "Video-MME-v2", clips, records)
    converted = convert_videomme_v2(release, tmp_path / "bench")
    assert sorted(items_of(tmp_path / "bench")) == ["001-1", "001-2", "001-3", "001-4", "003-1", "003-2", "003-3",
                                                     "003-4"]
    skipped = [json.loads(line) for line in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert [s["entry"] for s in skipped] == ["row 4", "row 5 (question 002-2)", "row 6", "row 7"]
    assert skipped[1]["field"] == "answer" and "'Z'" in skipped[1]["reason"]
    assert all("another question of its group cannot be converted (row 5 (question 002-2)" in s["reason"]
               for s in (skipped[0], *skipped[2:]))
    assert len(converted.skipped) == 4


@pytest.mark.parametrize("edit, entry, field, reason", [
    (lambda r: r[6].update(question_id="002-4"), "row 6", "question_id",
     "question '002-4' where the group of video '002' (its rows row 4..row 7) needs 002-3"),
    (lambda r: r[9].update(group_structure="[1,2,[3,4]]"), "row 9", "group_structure", "group_structure differs"),
    (lambda r: [x.update(group_structure="[1,2,[3,4]]") for x in r[8:12]], "row 11", "group_structure",
     "is none of [1, 2, 3, 4], [1, [2, 3], 4], [[1, 2], 3, 4]"),
    (lambda r: [x.update(group_type="coherence") for x in r[0:4]], "row 3", "group_type",
     "group_type 'coherence' is none of relevance, logic"),
])
def test_a_group_the_release_script_would_misread_is_skipped_naming_row_and_field(tmp_path, clips, edit, entry,
                                                                                   field, reason):
    records = rows()
    edit(records)
    convert_videomme_v2(write_release(tmp_path / "Video-MME-v2", clips, records), tmp_path / "bench")
    skipped = [json.loads(line) for line in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert len(skipped) == 4 and len(items_of(tmp_path / "bench")) == 8
    named = next(s for s in skipped if s["field"] is not None)
    assert named["entry"].startswith(entry) and named["field"] == field and reason in named["reason"]


def test_a_release_without_its_question_file_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no test.parquet in the release folder"):
        convert_videomme_v2(tmp_path / "empty", tmp_path / "bench")
    done = cli(str(tmp_path / "empty"), "--out", str(tmp_path / "bench"))
    assert done.returncode == 2 and "Traceback" not in done.stderr and "no test.parquet" in done.stderr


SQUARES = {0: 0.0, 1: 1 / 16, 2: 4 / 16, 3: 9 / 16, 4: 1.0}


def hand_group_score(correct: list[bool], kind: str, structure: str) -> float:
    """One group's score worked out from the release's tables (``scoring.videomme_v2`` module doc)."""
    if kind == "relevance":
        return SQUARES[sum(correct)]
    run = next((i for i, c in enumerate(correct) if not c), 4)
    if structure == "[1,[2,3],4]":
        run = 2 if run == 1 and correct[2] else run
        return {0: 0.0, 1: 1 / 12, 2: 4 / 12, 3: 7 / 12, 4: 1.0}[run]
    if structure == "[[1,2],3,4]":
        run = 1 if run == 0 and correct[1] else run
        return {0: 0.0, 1: 1 / 10, 2: 2 / 10, 3: 5 / 10, 4: 1.0}[run]
    return SQUARES[run]


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, clips):
    # every clip subtitled: audio_as_text shows all four questions of each group
    convert_videomme_v2(write_release(tmp_path / "Video-MME-v2", clips, subtitled=("001", "002", "003")),
                        tmp_path / "bench")
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text",
                  "audio_as_text"]
    predictions = run_and_check(tmp_path / "bench", tmp_path, conditions)
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    scores = table.filter((pl.col("protocol") == "spectrum") & (pl.col("metric") == "group_score"))
    page = _Cells()
    page.feed((tmp_path / "report" / "report.html").read_text(encoding="utf-8"))
    shown = {(c["data-model"], c["data-key"]): tuple(float(c[a]) if c.get(a) else None
                                                     for a in ("data-value", "data-ci-low", "data-ci-high"))
             for c in page.cells if c["data-metric"] == "group_score" and c.get("data-value")}
    kinds = {video: (kind, structure) for video, kind, structure, *_ in GROUPS}
    for model in NAMES:
        for condition in conditions:
            cell = predictions.filter((pl.col("model") == model) & (pl.col("condition") == condition))
            per_group = []
            for video in kinds:
                group = cell.filter(pl.col("item_id").str.starts_with(f"{video}-")).sort("item_id")
                right = [c is not None and c == t for c, t in zip(group["choice"], group["target"], strict=True)]
                per_group.append(hand_group_score(right, *kinds[video]))
            expected = sum(per_group) / len(per_group)
            row = scores.filter((pl.col("model") == model) & (pl.col("key") == condition)).row(0, named=True)
            assert row["value"] == pytest.approx(expected, abs=1e-12)
            assert row["n"] == 3 and row["n_clusters"] == 3  # one value per group, groups resampled whole
            assert row["ci_low"] is None or row["ci_low"] <= row["value"] <= row["ci_high"]
            # the report shows the same score with the same interval
            value, low, high = shown[(model, condition)]
            assert value == pytest.approx(expected, abs=1e-12)
            assert (low, high) == ((None, None) if row["ci_low"] is None else
                                   (pytest.approx(row["ci_low"], abs=1e-12), pytest.approx(row["ci_high"], abs=1e-12)))
        # per group type: the mean over that type's groups only
        logic = scores.filter((pl.col("model") == model) & (pl.col("key") == "group_type=logic/normal"))
        normal = predictions.filter((pl.col("model") == model) & (pl.col("condition") == "normal"))
        expected = []
        for video in ("002", "003"):
            group = normal.filter(pl.col("item_id").str.starts_with(f"{video}-")).sort("item_id")
            expected.append(hand_group_score([c == t for c, t in zip(group["choice"], group["target"], strict=True)],
                                             *kinds[video]))
        assert logic["value"][0] == pytest.approx(sum(expected) / 2, abs=1e-12)


def test_lmms_evals_unpacked_folders_are_read_too(tmp_path, clips):
    # lmms-eval unpacks the archives into data/ and subtitle/ (lmms_eval/tasks/videomme_v2/utils.py)
    release = tmp_path / "Video-MME-v2"
    write_table(release / "test.parquet", rows())
    for video, *_ in GROUPS:
        place(clips[int(video) - 1]["soundtrack"], release / "data" / f"{video}.mp4")
    (release / "subtitle").mkdir()
    (release / "subtitle" / "002.jsonl").write_text("".join(json.dumps(w) + "\n" for w in WORDS))
    convert_videomme_v2(release, tmp_path / "bench")
    items = items_of(tmp_path / "bench")
    assert items["003-2"]["media"] == {"video": "media/data/003.mp4", "audio": "media/data/003.mp4"}
    assert items["002-4"]["text_alternatives"] == {"audio": "Hello world."}
    assert "text_alternatives" not in items["001-1"]


def test_a_subtitle_line_that_is_no_word_skips_its_group_naming_the_line(tmp_path, clips):
    release = write_release(tmp_path / "Video-MME-v2", clips, packed=False)
    (release / "subtitle" / "001.jsonl").write_text(json.dumps(WORDS[0]) + "\n{\"start_time\": 1.0}\n")
    convert_videomme_v2(release, tmp_path / "bench")
    assert sorted(items_of(tmp_path / "bench")) == [f"{v}-{k}" for v in ("002", "003") for k in range(1, 5)]
    skipped = [json.loads(line) for line in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert len(skipped) == 4 and skipped[0]["entry"] == "row 0 (question 001-1)"
    assert "001.jsonl, line 2: no 'text'" in skipped[0]["reason"] and skipped[0]["field"] == "video_id"
