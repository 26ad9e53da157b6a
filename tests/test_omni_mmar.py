"""MMAR as its repository ships it (``MMAR-meta.jsonl`` with the rubric keys, or the first release's ``MMAR-meta.json``,
beside ``audio/``; the release's keys and quirks: answers as choice texts, a blank last choice, a null ``language``),
converted to audio items whose ``category`` is the sound-type ``modality`` and whose ``breakdowns`` are the three the
release's evaluation reports by; unsound entries (the first release's answers that are none of their choices, entry
43's included) skipped and listed by file, entry and field, the rest converted; the benchmark run through two
simulated models, metrics and report, with the accuracy per sound type recomputed from the predictions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni.mmar import convert_mmar
from tests.omni_release_run import MODELS, items_of, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
IDS = ["f0VchKwpMAk_00-11-10_00-11-30", "qx8hrhBZJ98_00-01-32_00-02-02", "BV1gK4y1t7gv_00-49-43_00-50-13",
       "6kIjOvBVAHQ_00-00-00_00-00-06", "BV1Tm4y1h7JU_00-00-00_00-00-25", "Txj3Qv1lJgs_00-00-00_00-00-16",
       "BV16j411E7Z9_00-00-13_00-00-34", "ztvEag8Y2_Y_00-00-00_00-00-16"]
MODALITIES = ["speech", "music", "mix-sound-speech", "speech", "sound", "music", "mix-sound-speech", "sound"]
LAYERS = ["Semantic Layer", "Cultural Layer", "Perception Layer", "Signal Layer"]


def records(rubrics: bool = True) -> list[dict]:
    out = []
    for i, (qid, modality) in enumerate(zip(IDS, MODALITIES, strict=True)):
        n = 2 if i == 3 else 4
        choices = [f"Answer {k} to question {i}" for k in range(n)]
        if i == 2:
            choices.append("")  # the release ends four questions' choices with a blank one
        record = {"id": qid, "audio_path": f"./audio/{qid}.wav", "question": f"Why is this heard ({i})?",
                  "choices": choices, "answer": choices[i % n], "modality": modality, "category": LAYERS[i % 4],
                  "sub-category": "Speaker Analysis", "language": None if i % 2 else "en", "source": "youtube",
                  "url": f"https://www.youtube.com/watch?v={qid[:11]}", "timestamp": "00:11:10,00:11:30"}
        if rubrics:
            record |= {"thinking": "The speaker laughs.", "cue": ["Laughter"],
                       "rubric": [{"name": "Cue", "scoring_point": "1 point", "note": "", "choices": [0, 1]}]}
        out.append(record)
    return out


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> list[Path]:
    from omnieval.media.synth import beep_audio

    folder = tmp_path_factory.mktemp("mmar-media")
    return [beep_audio(folder / f"s{i}.wav", frequency=250 + 90 * i, beeps=1 + i % 3, duration=0.5,
                       sample_rate=8000) for i in range(len(IDS))]


def release(folder: Path, sounds, data: list[dict] | None = None, first: bool = False) -> Path:
    folder.mkdir(parents=True)
    data = records(rubrics=not first) if data is None else data
    if first:
        (folder / "MMAR-meta.json").write_text(json.dumps(data, indent=4, ensure_ascii=False))
    else:
        (folder / "MMAR-meta.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in data))
    for qid, sound in zip(IDS, sounds, strict=True):
        place(sound, folder / "audio" / f"{qid}.wav")
    return folder


def test_the_current_release(tmp_path, sounds):
    folder = release(tmp_path / "MMAR", sounds)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "mmar", str(folder), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 8 items (all: 8) and 8 media files" in done.stdout
    assert f"left out blank options or merged repeated ones in 1 question ({IDS[2]})" in done.stderr
    items = items_of(tmp_path / "bench")
    assert list(items) == IDS
    for i, record in enumerate(records()):
        item = items[record["id"]]
        assert item["options"] == [c for c in record["choices"] if c]
        assert item["answer"] == "ABCD"[i % len(item["options"])]
        assert (item["category"], item["task"]) == (record["modality"], record["category"])
        assert item["breakdowns"] == {"modality": record["modality"], "category": record["category"],
                                      "sub-category": record["sub-category"]}
        assert "evidence_modality" not in item and "text_alternatives" not in item
        assert item["media"] == {"audio": f"media/audio/{record['id']}.wav"}
        assert (tmp_path / "bench" / item["media"]["audio"]).read_bytes() == sounds[i].read_bytes()
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["question_file"] == "MMAR-meta.jsonl" and meta["changed_options"] == [IDS[2]]
    assert meta["scorer"] == "mmar"


def test_the_first_release_and_which_file_is_read(tmp_path, sounds):
    folder = release(tmp_path / "MMAR", sounds, first=True)
    convert_mmar(folder, tmp_path / "bench")
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["question_file"] == "MMAR-meta.json"
    assert len(items_of(tmp_path / "bench")) == 8
    newer = records()
    newer[0]["question"] = "The corrected question?"
    (folder / "MMAR-meta.jsonl").write_text("".join(json.dumps(r) + "\n" for r in newer))
    convert_mmar(folder, tmp_path / "bench", overwrite=True)  # both there: the .jsonl
    assert items_of(tmp_path / "bench")[IDS[0]]["question"] == "The corrected question?"
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["question_file"] == "MMAR-meta.jsonl"


def skipped_lines(bench: Path) -> list[dict]:
    return [json.loads(line) for line in (bench / "skipped.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("edit, n, item, field, message", [
    (lambda r: r[1].update(answer="American\nColombian"), 1, f"line 2 (id {IDS[1]})", "answer",
     "answer 'American\\nColombian' is not exactly one of the options"),
    (lambda r: r[5].update(choices=["Only one"]), 5, f"line 6 (id {IDS[5]})", "choices",
     "1 options (2 to 26 needed)"),
    (lambda r: r[7].update(audio_path="./audio/gone.wav"), 7, f"line 8 (id {IDS[7]})", "audio_path",
     "no media file './audio/gone.wav'"),
    (lambda r: r[4].update(question=""), 4, f"line 5 (id {IDS[4]})", "question", "missing or empty 'question'"),
])
def test_an_unsound_entry_is_skipped_and_listed_the_rest_converted(tmp_path, sounds, capsys, edit, n, item, field,
                                                                   message):
    data = records()
    edit(data)
    folder = release(tmp_path / "MMAR", sounds, data)
    done = convert_mmar(folder, tmp_path / "bench")
    assert list(items_of(tmp_path / "bench")) == IDS[:n] + IDS[n + 1:]
    line = {"item_id": IDS[n], "file": str(folder / "MMAR-meta.jsonl"), "entry": item, "field": field}
    [got] = skipped_lines(tmp_path / "bench")
    assert {k: got[k] for k in line} == line and got["reason"].startswith(message)
    assert "\n" not in got["reason"]
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["skipped_entries"] == 1 and meta["n_items"] == 7
    assert done.summary().startswith(f"wrote 7 items (all: 7) and 7 media files to {tmp_path / 'bench'}; skipped 1 "
                                     f"entry that could not be converted, each with its reason in "
                                     f"{tmp_path / 'bench' / 'skipped.jsonl'} ({item}: {message}")


FIRST_RELEASE_UNSOUND = [
    # (index in IDS, choices, answer): shaped as the first release's five entries whose answer is no choice
    (1, ["American", "Colombian"], "American\nColombian"),  # its entry 43: both choices joined by a newline
    (3, ["Chromatic descent simulates steps", "Octave interval leap simulates bell"], "Octave interval leap"),
    (6, ["Because he broke a vase", "Because verbal slip, 'terrierst' and 'terrorist' sound similar"],
     "Verbal slip, 'terrierst' and 'terrorist' sound similar"),
]


def test_the_first_release_as_the_hub_ships_it_keeps_every_sound_entry(tmp_path, sounds):
    data = records(rubrics=False)
    for i, choices, answer in FIRST_RELEASE_UNSOUND:
        data[i] |= {"choices": choices, "answer": answer}
    folder = release(tmp_path / "MMAR", sounds, data, first=True)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "mmar", str(folder), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 5 items (all: 5) and 5 media files" in done.stdout
    assert "skipped 3 entries that could not be converted" in done.stdout
    bad = [i for i, _, _ in FIRST_RELEASE_UNSOUND]
    assert list(items_of(tmp_path / "bench")) == [q for i, q in enumerate(IDS) if i not in bad]
    want = [{"item_id": IDS[i], "file": str(folder / "MMAR-meta.json"), "entry": f"entry {i} (id {IDS[i]})",
             "field": "answer", "reason": f"answer {answer!r} is not exactly one of the options"}
            for i, _, answer in FIRST_RELEASE_UNSOUND]
    assert skipped_lines(tmp_path / "bench") == want
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["skipped_entries"] == 3


def test_a_release_with_no_sound_entry_is_refused_naming_the_first(tmp_path, sounds):
    data = records()
    for record in data:
        record["answer"] = "None of these"
    folder = release(tmp_path / "MMAR", sounds, data)
    with pytest.raises(InputError) as err:
        convert_mmar(folder, tmp_path / "bench")
    assert (err.value.file, err.value.item, err.value.field) == (str(folder / "MMAR-meta.jsonl"),
                                                                 f"line 1 (id {IDS[0]})", "answer")
    assert "none of the 8 entries could be converted; the first: answer 'None of these'" in str(err.value)
    assert not (tmp_path / "bench").exists()


def test_a_folder_without_the_question_file_is_refused(tmp_path):
    (tmp_path / "MMAR").mkdir()
    with pytest.raises(InputError, match="neither MMAR-meta.jsonl nor MMAR-meta.json"):
        convert_mmar(tmp_path / "MMAR", tmp_path / "bench")


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, sounds):
    convert_mmar(release(tmp_path / "MMAR", sounds), tmp_path / "bench")
    conditions = ["normal", "audio_only", "text_only", "random"]
    rows = run_and_check(tmp_path / "bench", tmp_path, conditions)
    # the sound types are categories: every accuracy also per sound type
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    got = {(r["model"], r["key"]): r["value"] for r in table.iter_rows(named=True)
           if r["protocol"] == "spectrum" and r["metric"] == "accuracy"}
    answered = rows.filter(pl.col("choice").is_not_null())
    for model in (m["name"] for m in MODELS):
        for modality in set(MODALITIES):
            for condition in conditions:
                cell = answered.filter((pl.col("model") == model) & (pl.col("condition") == condition)
                                       & (pl.col("category") == modality))
                want = float((cell["choice"] == cell["target"]).mean())
                assert got[(model, f"{modality}/{condition}")] == pytest.approx(want, abs=1e-12)
