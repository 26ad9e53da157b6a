"""MMAU-Pro as its Hugging Face dataset lays it out (``test.parquet`` beside ``data.zip``, whose members are the
``data/<uuid>.wav`` clips the rows' ``audio_path`` lists name), read with the archive packed or unpacked: closed-form
questions become audio items whose answers are the choices ``answer`` names by text (several clips kept in order),
``open`` questions open items with their reference, instruction-following ones open items scored by the release's
checks; closed-form questions with fewer than two choices and answers that are no choice are skipped and listed.
The benchmark is run through two simulated models (multiple-choice and open-ended, zero-shot and chain-of-thought)
and a simulated judge, then ``metrics`` and ``report``: the accuracies recomputed from the predictions by plain
loops, the closed-form official verdict, whose rule (NV-Embed similarity) is not computed here, shown as not
computed, never as a number, and the instruction checks' success rate as ``open_official_accuracy``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from html import unescape
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from omnieval.cli import main
from omnieval.core.schema import InputError
from omnieval.datasets.omni.mmau_pro import convert_mmau_pro
from omnieval.scoring.base import NOT_COMPUTED
from omnieval.scoring.mmau_pro import REASON
from tests.omni_release_run import MODELS, NAMES, _Cells, items_of, place

ROOT = Path(__file__).resolve().parents[1]
JUDGE = {"name": "judge", "engine": "simulated", "options": {"seed": 2}}
UUIDS = [f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(12)]


def rows() -> list[dict]:
    """Eleven rows as the release writes them: five closed-form (one with two clips, one whose answer differs from
    its choice in case only, one of musical notes), two open, two instruction-following (their arguments in the
    release's struct, null where unused), one closed-form with a single choice and one whose answer is no choice."""
    def row(i, category, choices, answer, clips=(0,), **more):
        return {"id": f"q{i:03d}", "audio_path": [f"data/{UUIDS[c]}.wav" for c in clips],
                "question": f"Question {i} about the sound?", "answer": answer, "choices": choices,
                "length_type": "short" if i % 2 else "long", "perceptual_skills": ["timbre"],
                "reasoning_skills": ["temporal"], "category": category, "transcription": None,
                "task_classification": "perception" if i % 2 else "reasoning",
                "task_identifier": more.get("task_identifier"), "kwargs": more.get("kwargs"),
                "sub-cat": more.get("sub_cat", "")}

    return [
        row(0, "sound", ["a dog barking", "a car horn", "rain falling", "a door closing"], "rain falling", (0,)),
        row(1, "music", ["piano", "violin", "flute"], "piano", (1,), sub_cat="instrument"),
        row(2, "speech", ["the first speaker", "the second speaker", "both", "neither"], "both", (2, 3)),
        row(3, "multi", ["Birds Singing", "a siren", "thunder", "applause"], "a Siren", (4,)),
        row(4, "music", ["A", "B", "C", "D"], "C", (5,), sub_cat="notes"),  # "C" is the choice reading C
        row(5, "open", [], "A dog barks twice near a busy road.", (6,)),
        row(6, "open", [], "Two people argue about the weather.", (7,)),
        row(7, "instruction following", [], None, (8,), task_identifier="All Uppercase", kwargs={"N": None}),
        row(10, "instruction following", [], None, (11,), task_identifier="Number Words (range)",
            kwargs={"N1": 1, "N2": 4}),
        row(8, "spatial", ["left"], "left", (9,)),
        row(9, "sound", ["wind", "waves", "fire", "traffic"], "a waterfall", (10,)),
    ]


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> list[Path]:
    from omnieval.media.synth import beep_audio

    folder = tmp_path_factory.mktemp("mmau-pro-media")
    return [beep_audio(folder / f"s{i}.wav", frequency=240 + 70 * i, beeps=1 + i % 3, duration=0.5,
                       sample_rate=8000) for i in range(len(UUIDS))]


def release(folder: Path, sounds, data: list[dict] | None = None, packed: bool = True) -> Path:
    """``test.parquet`` with the release's columns and types, and the clips as ``data.zip`` (members
    ``data/<uuid>.wav``) or, ``packed=False``, unpacked to ``data/``."""
    data = rows() if data is None else data
    folder.mkdir(parents=True)
    strings = pa.list_(pa.string())
    schema = pa.schema([("id", pa.string()), ("audio_path", strings), ("question", pa.string()),
                        ("answer", pa.string()), ("choices", strings), ("length_type", pa.string()),
                        ("perceptual_skills", strings), ("reasoning_skills", strings), ("category", pa.string()),
                        ("transcription", pa.string()), ("task_classification", pa.string()),
                        ("task_identifier", pa.string()),
                        ("kwargs", pa.struct([("N", pa.int64()), ("N1", pa.int64()), ("N2", pa.int64()),
                                              ("keyword", pa.string()), ("keywords", pa.string())])),
                        ("sub-cat", pa.string())])
    pq.write_table(pa.Table.from_pylist(data, schema=schema), folder / "test.parquet")
    if packed:
        with zipfile.ZipFile(folder / "data.zip", "w", zipfile.ZIP_STORED) as zf:
            for uuid, sound in zip(UUIDS, sounds, strict=True):
                zf.write(sound, f"data/{uuid}.wav")
    else:
        for uuid, sound in zip(UUIDS, sounds, strict=True):
            place(sound, folder / "data" / f"{uuid}.wav")
    (folder / "README.md").write_text("---\nlicense: cc-by-nc-4.0\n---\n")
    return folder


def check_items(bench: Path, sounds) -> None:
    items = items_of(bench)
    assert sorted(items) == [f"q{i:03d}" for i in (*range(8), 10)]
    answers = {"q000": "C", "q001": "A", "q002": "C", "q003": "B", "q004": "C"}
    for record in rows()[:9]:
        item = items[record["id"]]
        clips = [sounds[UUIDS.index(Path(p).stem)].read_bytes() for p in record["audio_path"]]
        assert [(bench / m).read_bytes() for m in item["media"]["audio"]] == clips  # every clip, in order
        assert (item["split"], item["category"]) == ("test", record["category"])
        expected = {k: record[k] for k in ("category", "sub-cat", "length_type", "task_classification") if record[k]}
        if record["category"] == "instruction following":  # the check and its non-null arguments
            expected |= {"task_identifier": record["task_identifier"],
                         "aif_kwargs": json.dumps({k: v for k, v in record["kwargs"].items() if v is not None})}
        assert item["breakdowns"] == expected
        if record["category"] == "instruction following":
            assert not item.get("options") and "answer" not in item and not item.get("reference")
        elif record["category"] == "open":
            assert "options" not in item or not item["options"]
            assert item["reference"] == record["answer"] and "answer" not in item
        else:
            assert item["options"] == record["choices"] and item["answer"] == answers[record["id"]]
    info = json.loads((bench / "benchmark.json").read_text())
    assert (info["scorer"], info["skipped_entries"]) == ("mmau-pro", 2)
    skipped = {s["item_id"]: s for s in map(json.loads, (bench / "skipped.jsonl").read_text().splitlines())}
    assert sorted(skipped) == ["q008", "q009"]
    assert skipped["q008"]["field"] == "choices" and "1 choice" in skipped["q008"]["reason"]
    assert skipped["q009"]["field"] == "answer" and "'a waterfall' is not exactly one" in skipped["q009"]["reason"]


def test_the_release_with_data_zip_packed(tmp_path, sounds):
    folder = release(tmp_path / "MMAU-Pro", sounds)
    before = sorted(p.name for p in folder.iterdir())
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "mmau-pro", str(folder), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 9 items (test: 9) and 10 media files" in done.stdout
    assert "skipped 2 entries" in done.stdout
    check_items(tmp_path / "bench", sounds)
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing unpacked into the release
    assert all(m.startswith("media/data/") for it in items_of(tmp_path / "bench").values()
               for m in it["media"]["audio"])


def test_the_release_unpacked(tmp_path, sounds):
    convert_mmau_pro(release(tmp_path / "MMAU-Pro", sounds, packed=False), tmp_path / "bench")
    check_items(tmp_path / "bench", sounds)


def test_a_clip_in_neither_place_is_skipped_and_listed(tmp_path, sounds):
    data = rows()
    data[1]["audio_path"] = ["data/not-there.wav"]
    converted = convert_mmau_pro(release(tmp_path / "MMAU-Pro", sounds, data), tmp_path / "bench")
    assert converted.n_items == 8
    missing = next(s for s in converted.skipped if s.item_id == "q001")
    assert missing.field == "audio_path" and "'data/not-there.wav'" in missing.reason and "data.zip" in missing.reason


def test_a_folder_without_test_parquet_is_refused(tmp_path):
    (tmp_path / "MMAU-Pro").mkdir()
    with pytest.raises(InputError, match=r"no test.parquet"):
        convert_mmau_pro(tmp_path / "MMAU-Pro", tmp_path / "bench")


def test_parse_refuses_the_official_rule_it_cannot_compute(tmp_path, capsys):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "q", "options": ["piano", "violin"], "answer": "A", "text": "piano"}) + "\n")
    assert main(["parse", "--scorer", "mmau-pro", str(answers), "--out", str(tmp_path / "scored.jsonl")]) != 0
    error = capsys.readouterr().err
    assert "the official rule of mmau-pro is not computed here" in error and "NV-Embed-v2" in error
    assert not (tmp_path / "scored.jsonl").exists()
    assert main(["parse", "--scorer", "mmau-pro", str(answers), "--out", str(tmp_path / "scored.jsonl"),
                 "--robust"]) == 0
    assert json.loads((tmp_path / "scored.jsonl").read_text())["choice"] == "A"


def test_a_run_writes_no_official_verdict_only_why():
    """The verdict columns of one chain-of-thought answer: the robust reading as for any benchmark, the official
    ones empty but for the reason (a scorer with a computable rule fills them: ``mmau`` here, as a contrast)."""
    from omnieval.core.schema import Instance, Segment
    from omnieval.scoring.verdicts import answer_verdicts

    inst = Instance(instance_id="q|normal", item_id="q", protocol="spectrum", benchmark="mmau-pro", split="test",
                    condition="normal", segments=[Segment(kind="text", text="Which instrument?")],
                    question="Which instrument?", option_labels=["A", "B", "C"],
                    option_texts=["piano", "violin", "flute"], target="B")
    text = "It sounds bowed.\nAnswer: B"
    got = answer_verdicts(inst, text, "mmau-pro")
    assert (got["robust_choice"], got["robust_source"]) == ("B", "parsed")
    assert (got["official_choice"], got["official_correct"], got["official_source"]) == (None, None, None)
    assert got["official_how"] == f"not computed: {REASON}"
    computed = answer_verdicts(inst, "violin", "mmau")  # MMAU's word match: the gold's words and no other's
    assert (computed["official_choice"], computed["official_correct"]) == ("B", True)


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, sounds, capsys):
    convert_mmau_pro(release(tmp_path / "MMAU-Pro", sounds), tmp_path / "bench")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "run"),
                                      "protocol": "spectrum", "modes": ["mcq", "open"], "prompts": ["zs", "cot"],
                                      "judges": [JUDGE], "decode": {"num_frames": 2, "max_side": 32},
                                      "models": MODELS}))
    assert main(["run", str(config)]) == 0
    rows_ = pl.read_parquet(tmp_path / "run" / "predictions.parquet")
    assert rows_["error"].null_count() == rows_.height
    conditions = ["normal", "audio_only", "text_only", "random"]
    mcq = rows_.filter(pl.col("mode") != "open")
    opened = rows_.filter(pl.col("mode") == "open")
    assert mcq.height == 5 * len(conditions) * 2 * len(MODELS)
    # every question is asked open-ended too; the open ones only so
    assert opened.height == 9 * len(conditions) * 2 * len(MODELS)
    assert set(mcq["item_id"]) == {f"q00{i}" for i in range(5)}
    references = dict(opened.select("item_id", "reference").unique().iter_rows())
    assert (references["q005"], references["q006"]) == (rows()[5]["answer"], rows()[6]["answer"])

    # the official rule is never computed: no verdict, the reason instead; the robust one reads the text
    cot = mcq.filter(pl.col("prompt") == "cot")
    assert cot["official_correct"].null_count() == cot.height and cot["official_choice"].null_count() == cot.height
    assert set(cot["official_how"]) == {NOT_COMPUTED + REASON}
    for text, robust in cot.select("raw_text", "robust_choice").iter_rows():  # simulated: "Answer: X (simulated)"
        assert robust == re.fullmatch(r"Answer: ([A-E]) \(simulated\)", text).group(1)

    capsys.readouterr()
    assert main(["metrics", str(tmp_path / "run" / "predictions.parquet"), "--out", str(tmp_path / "metrics"),
                 "--resamples", "200", "--permutations", "200"]) == 0
    printed = capsys.readouterr().out.split("Answer verdicts", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert printed and all(line.split(" | ")[5] == "official rule not computed"
               and line.split(" | ")[-1].endswith(f"official rule not computed ({REASON})") for line in printed)
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    got = {(r["model"], r["prompt"], r["metric"], r["key"] or ""): r["value"] for r in table.iter_rows(named=True)
           if r["protocol"] == "spectrum"}
    assert not any(k[2] == "official_accuracy" for k in got)
    records = mcq.select("model", "prompt", "condition", "category", "choice", "target").to_dicts()
    for model in NAMES:
        for prompt in ("zs", "cot"):
            for condition in conditions:
                hits = [r["choice"] == r["target"] for r in records if (r["model"], r["prompt"], r["condition"])
                        == (model, prompt, condition) and r["choice"] is not None]
                assert got[(model, prompt, "accuracy", condition)] == pytest.approx(sum(hits) / len(hits),
                                                                                    abs=1e-12)
            for category in ("sound", "music", "speech", "multi"):
                hits = [r["choice"] == r["target"] for r in records if (r["model"], r["prompt"], r["condition"],
                        r["category"]) == (model, prompt, "normal", category) and r["choice"] is not None]
                key = f"category={category}/normal"
                assert got[(model, prompt, "accuracy", key)] == pytest.approx(sum(hits) / len(hits), abs=1e-12)
    # open-ended answers: judged against the reference (the simulated judge: correct where the answer is it)
    judged = opened.with_columns(verdict=pl.col("verdicts").list.first().struct.field("verdict"))
    open_records = judged.select("model", "prompt", "answer_text", "reference", "verdict").to_dicts()
    assert all(r["verdict"] == ("correct" if r["answer_text"] == r["reference"] else "incorrect")
               for r in open_records if r["reference"] is not None)
    assert all(r["verdict"] is None for r in open_records if r["reference"] is None)  # instruction following
    for model in NAMES:
        for prompt in ("zs", "cot"):
            verdicts = [r["verdict"] == "correct" for r in open_records if (r["model"], r["prompt"])
                        == (model, prompt) and r["reference"] is not None]  # no reference: not judged
            assert got[(model, prompt, "open_accuracy", "all")] == pytest.approx(sum(verdicts) / len(verdicts),
                                                                                 abs=1e-12)
    # instruction-following answers: the release's checks, worked here by plain loops (q007: all upper-case;
    # q010: 1 to 4 white-space words), and its success rate, the mean over those answers, as open_official_accuracy
    checked = opened.select("model", "prompt", "item_id", "answer_text", "official_correct", "official_how")
    aif = [r for r in checked.to_dicts() if r["item_id"] in ("q007", "q010")]
    assert len(aif) == 2 * len(conditions) * 2 * len(MODELS)
    for r in aif:
        text = str(r["answer_text"])
        expected = text.isupper() if r["item_id"] == "q007" else 1 <= len(text.split()) <= 4
        assert r["official_correct"] is expected
        assert r["official_how"] == ("instruction check " + ("All Uppercase" if r["item_id"] == "q007"
                                                              else "Number Words (range)"))
    others = checked.filter(~pl.col("item_id").is_in(["q007", "q010"]))
    assert others["official_correct"].null_count() == others.height  # the open questions: the judges only
    for model in NAMES:
        for prompt in ("zs", "cot"):
            hits = [r["official_correct"] for r in aif if (r["model"], r["prompt"]) == (model, prompt)]
            assert got[(model, prompt, "open_official_accuracy", "all")] == pytest.approx(sum(hits) / len(hits),
                                                                                          abs=1e-12)

    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--resamples", "200",
                 "--permutations", "200"]) == 0
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    page = _Cells()
    page.feed(html)
    shown = {(c["data-model"], c["data-key"]): float(c["data-value"]) for c in page.cells
             if c["data-metric"] == "accuracy" and c.get("data-protocol") == "spectrum" and c.get("data-value")
             and c.get("data-prompt", "zs") == "zs"}
    for model in NAMES:
        assert shown[(model, "normal")] == pytest.approx(got[(model, "zs", "accuracy", "normal")], abs=1e-12)
    official = {(c["data-model"], c.get("data-prompt", "zs")): float(c["data-value"]) for c in page.cells
                if c["data-metric"] == "open_official_accuracy" and c.get("data-key", "all") == "all"
                and c.get("data-value")}
    assert official and all(v == pytest.approx(got[(m, p, "open_official_accuracy", "all")], abs=1e-12)
                            for (m, p), v in official.items())
    # each chain-of-thought cell's official accuracy: not computed, the flag saying why, no number
    verdict_cells = [c for c in page.cells if c.get("data-metric") == "official_accuracy"]
    assert not verdict_cells
    verdict_rows = [c for c in page.cells if c["data-metric"] == "unparsed_share"]
    assert verdict_rows and {c["data-prompt"] for c in verdict_rows} == {"cot"}
    text = unescape(html)
    assert text.count('"v">official rule not computed</span>') == len(verdict_rows)
    assert text.count(f'"v">official rule not computed ({REASON})</span>') == len(verdict_rows)


def test_an_instruction_following_row_without_its_check_is_skipped_and_listed(tmp_path, sounds):
    data = rows()
    data[7]["task_identifier"] = None
    converted = convert_mmau_pro(release(tmp_path / "MMAU-Pro", sounds, data), tmp_path / "bench")
    missing = next(s for s in converted.skipped if s.item_id == "q007")
    assert missing.field == "task_identifier"
