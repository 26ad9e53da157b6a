"""Video-Holmes as ``TencentARC/Video-Holmes`` ships it (the ``Benchmark/`` folder its ``download.py`` writes):
``test_Video-Holmes.json`` (questions with ``Options`` as an object of six labelled texts, ``Question ID`` a number
per film) beside ``videos.zip`` (members ``videos/<video ID>.mp4``), read packed and unpacked as its README unpacks
it; each item carrying its question type; an unsound question skipped and listed by entry and field; the benchmark
run through two simulated models, metrics and report, the accuracy per question type recomputed from
``predictions.parquet``."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni.video_holmes import convert_video_holmes
from tests.omni_release_run import NAMES, items_of, make_clips, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
FILMS = ("RSmjqss0XKQ", "dGS48Kcax5k", "q2Bd3xUkkbY")
TYPES = ("SR", "IMC", "TCI", "TA", "MHR", "PAR", "CTI")


def questions() -> list[dict]:
    out = []
    for f, film in enumerate(FILMS):
        for q in range(4):
            out.append({"video ID": film, "Question ID": q + 1, "Question Type": TYPES[(f + q) % len(TYPES)],
                        "Question": f"Why does the man in film {f} act so, scene {q}?",
                        "Options": {label: f"Reason {f}{q}{i}" for i, label in enumerate("ABCDEF")},
                        "Answer": "ABCDEF"[(f + 2 * q) % 6], "Explanation": "The clues at 00:41 show it."})
    return out


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("video-holmes-media"), len(FILMS))


def write_release(folder: Path, clips, records: list[dict] | None = None, packed: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "test_Video-Holmes.json").write_text(json.dumps(questions() if records is None else records, indent=4))
    if packed:
        with zipfile.ZipFile(folder / "videos.zip", "w", zipfile.ZIP_STORED) as zf:
            for film, clip in zip(FILMS, clips, strict=True):
                zf.write(clip["soundtrack"], f"videos/{film}.mp4")
    else:
        for film, clip in zip(FILMS, clips, strict=True):
            place(clip["soundtrack"], folder / "videos" / f"{film}.mp4")
    return folder


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "video-holmes", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("packed", [True, False])
def test_each_question_shows_its_film_with_its_soundtrack_and_type(tmp_path, clips, packed):
    release = write_release(tmp_path / "Benchmark", clips, packed=packed)
    done = cli(str(release), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert "wrote 12 items (test: 12) and 3 media files" in done.stdout
    items = items_of(tmp_path / "bench")
    assert list(items) == [f"{q['video ID']}/{q['Question ID']}" for q in questions()]
    for q in questions():
        item = items[f"{q['video ID']}/{q['Question ID']}"]
        assert item["options"] == list(q["Options"].values()) and item["answer"] == q["Answer"]
        assert item["question"] == q["Question"] and item["split"] == "test"
        assert item["category"] == q["Question Type"]
        assert item["breakdowns"] == {"question_type": q["Question Type"]}
        name = f"media/videos/{q['video ID']}.mp4"
        assert item["media"] == {"video": name, "audio": name}
        made = clips[FILMS.index(q["video ID"])]["soundtrack"]
        assert (tmp_path / "bench" / name).read_bytes() == made.read_bytes()
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["scorer"] == "video-holmes"


@pytest.mark.parametrize("edit, entry, field, reason", [
    (lambda r: r[2].update(Answer="G"), "entry 2 (question RSmjqss0XKQ/3)", "Answer", "answer 'G' but the question"),
    (lambda r: r[5].update(Options=["x", "y"]), "entry 5 (question dGS48Kcax5k/2)", "Options",
     "expected an object of label -> option text, got list"),
    (lambda r: r[6].update(Options={"A": "x", "C": "y"}), "entry 6 (question dGS48Kcax5k/3)", "Options",
     "option labels A, C; expected A, B, ... in order"),
    (lambda r: r[9].update({"video ID": "../x"}), "entry 9", "video ID", "is not a plain file name"),
])
def test_an_unsound_question_is_skipped_and_listed(tmp_path, clips, edit, entry, field, reason):
    records = questions()
    edit(records)
    converted = convert_video_holmes(write_release(tmp_path / "Benchmark", clips, records), tmp_path / "bench")
    assert converted.n_items == 11
    (skipped,) = [json.loads(line) for line in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert (skipped["entry"], skipped["field"]) == (entry, field) and reason in skipped["reason"]


def test_a_missing_film_is_skipped_naming_the_archive(tmp_path, clips):
    records = questions()
    records[0]["video ID"] = "absent"
    convert_video_holmes(write_release(tmp_path / "Benchmark", clips, records), tmp_path / "bench")
    (skipped,) = [json.loads(line) for line in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert skipped["item_id"] == "absent/1" and skipped["field"] == "video ID"
    assert "videos.zip" in skipped["reason"]


def test_a_release_without_its_question_file_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no test_Video-Holmes.json in the release folder"):
        convert_video_holmes(tmp_path / "empty", tmp_path / "bench")
    done = cli(str(tmp_path / "empty"), "--out", str(tmp_path / "bench"))
    assert done.returncode == 2 and "Traceback" not in done.stderr


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, clips):
    convert_video_holmes(write_release(tmp_path / "Benchmark", clips), tmp_path / "bench")
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text"]
    predictions = run_and_check(tmp_path / "bench", tmp_path, conditions)
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    for model in NAMES:
        for kind in {q["Question Type"] for q in questions()}:
            ids = [f"{q['video ID']}/{q['Question ID']}" for q in questions() if q["Question Type"] == kind]
            cell = predictions.filter((pl.col("model") == model) & (pl.col("condition") == "normal")
                                      & pl.col("item_id").is_in(ids) & pl.col("choice").is_not_null())
            expected = float((cell["choice"] == cell["target"]).mean())
            got = table.filter((pl.col("protocol") == "spectrum") & (pl.col("model") == model)
                               & (pl.col("metric") == "accuracy") & (pl.col("key") == f"question_type={kind}/normal"))
            assert got["value"][0] == pytest.approx(expected, abs=1e-12)
