"""The XModBench release converter, on small releases laid out as the release's generator writes them:
``tasks/01_perception/<subtask>/<prefix>_questions_<context>_<candidates>.json`` (six parallel lists, entry ``i`` the
same question in every file) beside a ``<prefix>_generation_stats.json``, media and per-clip metadata JSON under
``Data/`` named by the absolute paths of the machine that built the release, one clip drawn per class (so one clip
is the answer of several questions), ``Audio``/``Image``/``Text`` modalities, optional keys present or not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.benchmark import check_media, load_benchmark
from omnieval.datasets.xmodbench import convert_xmodbench
from omnieval.protocols import crossmodal

ROOT = Path(__file__).resolve().parents[1]
AUTHORS = "/home/someone/scratch/2025/AudioBench/benchmark"  # the builders' absolute paths, absent here
CLIPS = {"Violin": "violin_01", "Cello": "cello_07", "Flute": "flute_03", "Trumpet": "trumpet_11"}
# (the four classes in option order, the correct label): the violin clip is the answer of two questions
QUESTIONS = [(["Cello", "Violin", "Flute", "Trumpet"], "B"), (["Violin", "Trumpet", "Cello", "Flute"], "A"),
             (["Trumpet", "Flute", "Violin", "Cello"], "B")]
PREFIX = "solos_audio_bench"
PAIRS = [(c, k) for c in ("audio", "vision", "text") for k in ("audio", "vision", "text") if c != k]
LETTER = {"audio": "A", "vision": "V", "text": "T"}


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    """``Data/solos/<Class>/<clip>.wav`` with its frame folder and a per-clip metadata JSON, as in the release."""
    from omnieval.media.synth import beep_audio, still_image

    root = tmp_path_factory.mktemp("release-data")
    for i, (name, clip) in enumerate(CLIPS.items()):
        folder = root / "Data" / "solos" / name
        beep_audio(folder / f"{clip}.wav", frequency=300 + 120 * i, beeps=1 + i, duration=0.4)
        still_image(folder / f"{clip}_frames" / "000001.jpg", colour=["red", "blue", "green", "gray"][i],
                    size=(64, 48))
        (folder / f"{clip}.json").write_text(json.dumps({"youtube_id": clip, "url": None, "start": 12.5}))
    (root / "Data" / "solos_meta.json").write_text(json.dumps([{"file": c, "class": n} for n, c in CLIPS.items()]))
    return root


def _side(kind: str, name: str, *, as_context: bool) -> dict:
    wav = f"{AUTHORS}/Data/solos/{name}/{CLIPS[name]}.wav"
    if kind == "audio":
        return {"modality": "Audio", "input": wav, "class": name, "url": None}
    if kind == "vision":
        return {"modality": "Image", "input": wav.replace(".wav", "_frames/000001.jpg"), "class": name}
    return {"modality": "Text", "input": name.lower() if as_context else name}  # no class key on text sides


def entry(ctx: str, cand: str, classes: list[str], answer: str) -> dict:
    correct = classes["ABCD".index(answer)]
    out = {"question": f"Which {cand} goes with this {ctx}? Reply with A, B, C, or D",
           "conditions": _side(ctx, correct, as_context=True),
           "options": {lab: _side(cand, c, as_context=False) for lab, c in zip("ABCD", classes, strict=True)},
           "correct_answer": answer}
    if ctx != "text":
        out["correct_class"] = correct
    return out


def write_release(root: Path, media: Path, edit=None) -> Path:
    """The three questions in all six direction files; ``edit(ctx, cand, entries)`` may change a file's list."""
    release = root / "XModBench"
    if release.exists():
        shutil.rmtree(release)
    shutil.copytree(media, release)
    folder = release / "tasks" / "01_perception" / "instruments"
    folder.mkdir(parents=True)
    for ctx, cand in PAIRS:
        entries = [entry(ctx, cand, classes, answer) for classes, answer in QUESTIONS]
        if (ctx, cand) == ("audio", "text"):
            entries[0]["id"], entries[1]["correct_class"] = 7, "nan"  # an int id, a 'nan' in an optional key
        if (ctx, cand) == ("text", "audio"):
            entries[2]["id"] = "7"
        if edit:
            entries = edit(ctx, cand, entries)
        (folder / f"{PREFIX}_questions_{ctx}_{cand}.json").write_text(json.dumps(entries, indent=4))
    stats = {"dataset": "solos", "questions_generated": len(QUESTIONS), "combinations": [f"{c}_{k}" for c, k in PAIRS]}
    (folder / f"{PREFIX}_generation_stats.json").write_text(json.dumps(stats, indent=4))
    return release


def test_question_files_only_and_items_joined_by_position(tmp_path, media):
    release = write_release(tmp_path, media)
    report = convert_xmodbench(release, tmp_path / "bench")
    # 6 question files; the generation stats and the two metadata JSON files are skipped
    assert (report.n_files, report.n_skipped) == (6, 1 + len(CLIPS) + 1)
    assert report.n_entries == 18 and report.n_items == 3 and report.unmatched == []
    assert "skipped 6 other JSON files" in report.summary()
    bench = load_benchmark(tmp_path / "bench")
    assert bench.protocol == "crossmodal"
    assert check_media(bench, "probe") == 8  # 4 clips + 4 frames, linked inside the benchmark folder
    by_position = sorted(bench.items, key=lambda it: it.item_id)
    for (classes, answer), item in zip(QUESTIONS, by_position, strict=True):
        assert sorted(item.directions) == sorted(crossmodal.DIRECTIONS)
        assert item.task == "perception" and item.subtask == "instruments"
        correct = classes["ABCD".index(answer)]
        assert item.directions["T->A"].context[0].input == correct.lower()
        assert [o.input for o in item.directions["V->T"].options] == classes
        assert {d.answer for d in item.directions.values()} == {answer}
    # the violin clip answers questions 0 and 1, which stay two complete items
    violin = [it for it in by_position if it.directions["T->V"].context[0].input == "violin"]
    assert len(violin) == 2 and violin[0].directions["A->V"].context == violin[1].directions["A->V"].context
    instances = crossmodal.expand_all(bench.items, bench, seed=0)
    assert len(instances) == 18 and all(len(i.option_segments) == 4 for i in instances)


def _swap_last_two(ctx, cand, entries):
    return [entries[0], entries[2], entries[1]] if (ctx, cand) == ("text", "audio") else entries


def test_positions_whose_answers_disagree_are_not_joined_and_say_where(tmp_path, media):
    release = write_release(tmp_path, media, _swap_last_two)  # the T->A file's questions 1 and 2 swapped
    report = convert_xmodbench(release, tmp_path / "bench")
    assert report.n_entries == 18 and report.n_items == 1 + 12
    assert sorted({(r["entry"]) for r in report.unmatched}) == [1, 2] and len(report.unmatched) == 12
    reason = next(r["reason"] for r in report.unmatched if r["entry"] == 1)
    # files in name order: audio_text (context: the violin clip) against text_audio (answer: the flute clip)
    assert reason == (f"not joined: mismatch in the correct answer's audio: tasks/01_perception/instruments/{PREFIX}"
                      f"_questions_audio_text.json entry 1 has 'Data/solos/Violin/violin_01.wav', tasks/01_perception"
                      f"/instruments/{PREFIX}_questions_text_audio.json entry 1 has 'Data/solos/Flute/flute_03.wav'")
    lines = [json.loads(x) for x in (tmp_path / "bench" / "unmatched.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and {x["file"].split("/")[-1] for x in lines} == {
        f"{PREFIX}_questions_{c}_{k}.json" for c, k in PAIRS}
    bench = load_benchmark(tmp_path / "bench")
    assert len(crossmodal.expand_all(bench.items, bench, seed=0)) == 18  # every entry is still evaluated


def test_files_of_different_lengths_are_not_aligned(tmp_path, media):
    release = write_release(tmp_path, media, lambda c, k, e: e[:2] if (c, k) == ("vision", "text") else e)
    report = convert_xmodbench(release, tmp_path / "bench")
    assert report.n_entries == 17 and report.n_items == 17 and len(report.unmatched) == 17
    assert all("differ in length" in r["reason"] for r in report.unmatched)


def _mutated(ctx, cand, index, mutate):
    def edit(c, k, entries):
        if (c, k) == (ctx, cand):
            entries[index] = json.loads(json.dumps(entries[index]))
            mutate(entries[index])
        return entries
    return edit


def _as_video_labelled_image(e):
    e["options"]["C"]["input"] = e["options"]["C"]["input"].replace("_frames/000001.jpg", ".mp4")


@pytest.mark.parametrize("ctx, cand, mutate, field", [
    ("audio", "text", lambda e: e.pop("correct_answer"), "correct_answer"),
    ("audio", "text", lambda e: e["options"]["B"].update(modality="Smell"), "options.B.modality"),
    ("text", "audio", lambda e: e["options"]["C"].update(input=f"{AUTHORS}/Data/solos/x.wav"), "options.C.input"),
    ("audio", "text", lambda e: e.update(correct_answer="E"), "correct_answer"),
    ("audio", "vision", _as_video_labelled_image, "options.C.modality"),
    ("text", "vision", lambda e: e["conditions"].update(input="nan"), "conditions.input"),
    ("audio", "text", lambda e: e["conditions"].update(modality="Image", input=e["conditions"]["input"].replace(
        ".wav", "_frames/000001.jpg")), "conditions"),  # an image context in the audio_text file
])
def test_malformed_entries_name_file_entry_and_field(tmp_path, media, ctx, cand, mutate, field):
    release = write_release(tmp_path, media, _mutated(ctx, cand, 1, mutate))
    with pytest.raises(InputError) as err:
        convert_xmodbench(release, tmp_path / "bench")
    assert err.value.field == field and err.value.item == "entry 1"
    assert err.value.file.endswith(f"{PREFIX}_questions_{ctx}_{cand}.json")
    assert not (tmp_path / "bench").exists()  # nothing half-written


def test_release_without_question_files_is_refused(tmp_path, media):
    with pytest.raises(InputError, match=r"no question files .* \(5 other JSON files\)"):
        convert_xmodbench(media, tmp_path / "bench")


def test_cli_converts_a_release(tmp_path, media):
    release = write_release(tmp_path, media)
    out = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "xmodbench", str(release), "--out",
                          str(tmp_path / "b")], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "wrote 3 items from 18 entries of 6 question files" in out.stdout
    assert "skipped 6 other JSON files" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "xmodbench", str(tmp_path / "nope"),
                          "--out", str(tmp_path / "c")], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "release folder does not exist" in bad.stderr


@pytest.mark.slow
def test_converted_release_through_the_simulated_engine(ray_session, tmp_path, media):
    """Metrics of a simulated run on the converted release against a pandas computation from its predictions."""
    import pandas as pd
    import polars as pl

    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation
    from omnieval.stats.metrics import metrics_table

    convert_xmodbench(write_release(tmp_path, media), tmp_path / "bench")
    reliance = {"audio->text": 1.0, "text->audio": 0.5, "image->text": 0.6, "text->image": 1.0,
                "audio->image": 0.6, "image->audio": 0.3}
    config = parse_run_config({
        "benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "run"), "protocol": "crossmodal",
        "decode": {"max_side": 64},
        "models": [{"name": "sim", "engine": "simulated", "options": {"reliance": reliance, "seed": 5}}]})
    result = run_evaluation(config, progress=False)
    assert result.n_instances == 18 and result.n_errors == 0
    pred = pd.read_parquet(result.predictions_path)
    assert pred.groupby("item_id").size().tolist() == [6, 6, 6]
    table = metrics_table(pl.read_parquet(result.predictions_path), resamples=50)
    got = {(r["metric"], r["key"]): r["value"] for r in table.iter_rows(named=True)}

    pred["correct"] = pred["choice"].notna() & (pred["choice"] == pred["target"])
    valid = pred[pred["choice"].notna()]
    acc = valid.groupby("condition")["correct"].mean()
    consistency = pred.groupby("item_id")["correct"].all().mean()
    assert acc["A->T"] == 1.0 and acc["T->V"] == 1.0  # reliance 1: the engine saw the release's answers
    t_vs_v = (acc["A->V"] - acc["A->T"]) + (acc["V->A"] - acc["T->A"])
    assert got[("consistency", "")] == pytest.approx(consistency)
    assert got[("accuracy", "T->A")] == pytest.approx(acc["T->A"])
    assert got[("accuracy", "perception/instruments/A->V")] == pytest.approx(acc["A->V"])
    assert got[("disparity", "T_vs_V")] == pytest.approx(t_vs_v)
    assert got[("consistency", "perception/instruments")] == pytest.approx(consistency)
