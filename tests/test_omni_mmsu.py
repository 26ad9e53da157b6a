"""MMSU as its Hugging Face dataset lays it out (``data/train-*.parquet`` with each clip embedded in the ``audio``
cell, or named by its path under ``audio/``), converted to audio items whose answers are the choices ``answer_gt``
names by text, whose ``task`` is ``task_name`` and whose ``breakdowns`` are the release's five taxonomy fields; an
answer that is no choice's text skipped and listed; the benchmark run through two simulated models, metrics and
report, the accuracy per task and per category recomputed from the predictions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni.mmsu import convert_mmsu
from tests.omni_release_run import MODELS, items_of, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["emotion_recognition", "stress_detection", "emotion_recognition", "pitch_comparison", "stress_detection",
         "pitch_comparison"]
CATEGORIES = ["Perception", "Reasoning", "Reasoning", "Perception", "Perception", "Reasoning"]


def rows() -> list[dict]:
    out = []
    for i, (task, category) in enumerate(zip(TASKS, CATEGORIES, strict=True)):
        choices = [f"happy {i}", f"sad {i}", f"angry {i}", f"neutral {i}"]
        if i == 3:
            choices = ["D", "C", "B", "A"]  # notes: the answer "C" is the choice that reads C, the second
        out.append({"id": f"{task}_{i:04d}", "question": f"What does the speaker feel ({i})?",
                    "choice_a": choices[0], "choice_b": choices[1], "choice_c": choices[2], "choice_d": choices[3],
                    "answer_gt": choices[(i + 2) % 4], "task_name": task, "category": category,
                    "sub-category": "Paralinguistics", "sub-sub-category": "Speaker Traits",
                    "linguistics_sub_discipline": "prosody" if i % 2 else ""})
    return out


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> list[Path]:
    from omnieval.media.synth import beep_audio

    folder = tmp_path_factory.mktemp("mmsu-media")
    return [beep_audio(folder / f"s{i}.wav", frequency=250 + 90 * i, beeps=1 + i % 3, duration=0.5,
                       sample_rate=8000) for i in range(len(TASKS))]


def release(folder: Path, sounds, data: list[dict] | None = None, embedded: bool = True) -> Path:
    """``data/train-00000-of-00001.parquet`` as the Hugging Face dataset writes it: the audio feature a struct of
    ``bytes`` and ``path``; ``embedded=False`` leaves the bytes out and places the clips under ``audio/``."""
    data = rows() if data is None else data
    (folder / "data").mkdir(parents=True)
    cells = []
    for record, sound in zip(data, sounds, strict=True):
        name = f"{record['id']}.wav"
        cells.append({"bytes": sound.read_bytes() if embedded else None, "path": name})
        if not embedded:
            place(sound, folder / "audio" / name)
    columns = {"id": [r["id"] for r in data], "audio": cells}
    for key in ("question", "choice_a", "choice_b", "choice_c", "choice_d", "answer_gt", "task_name", "category",
                "sub-category", "sub-sub-category", "linguistics_sub_discipline"):
        columns[key] = [r[key] for r in data]
    table = pa.table(columns, schema=pa.schema([("id", pa.string()),
                                                ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                                                *((k, pa.string()) for k in list(columns)[2:])]))
    pq.write_table(table, folder / "data" / "train-00000-of-00001.parquet")
    (folder / "README.md").write_text("---\nlicense: mit\n---\n")
    return folder


def test_the_hugging_face_release(tmp_path, sounds):
    folder = release(tmp_path / "MMSU", sounds)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "mmsu", str(folder), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 6 items (train: 6) and 6 media files" in done.stdout
    items = items_of(tmp_path / "bench")
    for i, record in enumerate(rows()):
        item = items[record["id"]]
        assert item["options"] == [record[k] for k in ("choice_a", "choice_b", "choice_c", "choice_d")]
        assert item["answer"] == "ABCD"[(i + 2) % 4]
        assert (item["task"], item["category"], item["split"]) == (record["task_name"], record["category"], "train")
        assert item["breakdowns"] == {k: record[k] for k in ("task_name", "category", "sub-category",
                                                             "sub-sub-category", "linguistics_sub_discipline")
                                      if record[k]}
        assert (tmp_path / "bench" / item["media"]["audio"]).read_bytes() == sounds[i].read_bytes()
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["scorer"] == "mmsu"


def test_clips_named_under_audio(tmp_path, sounds):
    convert_mmsu(release(tmp_path / "MMSU", sounds, embedded=False), tmp_path / "bench")
    items = items_of(tmp_path / "bench")
    assert [items[r["id"]]["media"]["audio"] for r in rows()] == [f"media/audio/{r['id']}.wav" for r in rows()]


def test_an_answer_that_is_no_choice_is_skipped_and_listed(tmp_path, sounds):
    data = rows()
    data[2]["answer_gt"] = "furious"
    converted = convert_mmsu(release(tmp_path / "MMSU", sounds, data), tmp_path / "bench")
    assert converted.n_items == 5
    (skip,) = converted.skipped
    assert (skip.item_id, skip.entry, skip.field) == (data[2]["id"], f"row 2 (id {data[2]['id']})", "answer_gt")
    assert "answer 'furious' is not exactly one of the options" in skip.reason


def test_a_folder_without_parquet_is_refused(tmp_path):
    (tmp_path / "MMSU").mkdir()
    with pytest.raises(InputError, match=r"no data/\*.parquet"):
        convert_mmsu(tmp_path / "MMSU", tmp_path / "bench")


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, sounds):
    convert_mmsu(release(tmp_path / "MMSU", sounds), tmp_path / "bench")
    conditions = ["normal", "audio_only", "text_only", "random"]
    rows_ = run_and_check(tmp_path / "bench", tmp_path, conditions)
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    got = {(r["model"], r["key"]): r["value"] for r in table.iter_rows(named=True)
           if r["protocol"] == "spectrum" and r["metric"] == "accuracy"}
    answered = rows_.filter(pl.col("choice").is_not_null())
    for model in (m["name"] for m in MODELS):
        for name, column, values in (("task_name", "task", TASKS), ("category", "category", CATEGORIES)):
            for value in set(values):
                cell = answered.filter((pl.col("model") == model) & (pl.col("condition") == "normal")
                                       & (pl.col(column) == value))
                want = float((cell["choice"] == cell["target"]).mean())
                assert got[(model, f"{name}={value}/normal")] == pytest.approx(want, abs=1e-12)
