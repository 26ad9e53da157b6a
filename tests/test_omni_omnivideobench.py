"""OmniVideoBench as its README places it (``data.json`` beside ``videos/<video>.mp4``; the repository's example
folder ``video/`` also read), with the release's keys and quirks: options written ``"A.xxx"``, ``"A. xxx"`` and ``"A
xxx"``, an ``answer`` text that paraphrases the correct option, misspelled and punctuated step tags, a step whose
``modality`` key is mangled, a question without steps, a repeated option. Converted to items showing each video with
its own soundtrack and carrying the evidence label its steps give; refused entries named by file, entry and field;
the benchmark run through two simulated models, metrics and report, the accuracy per evidence label recomputed from
the predictions and the report's "By evidence label" table present."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni.omnivideobench import convert_omnivideobench
from tests.omni_release_run import MODELS, items_of, make_clips, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
VIDEOS = {"video_1": 3, "video_2": 2, "video_10": 3, "video_27": 2}  # video -> questions
IN_EXAMPLE_FOLDER = "video_27"  # under video/, as the repository's data_example has it
STEP_TAGS = [  # per question, in order: the tags of its steps (None: a step with the key "nmodality")
    ["vision", "audio"], ["aduio", "audio,"], ["Vision.", "vison"],
    ["audio", "vision"], ["vision"],
    ["audio"], [], ["vision", None, "auido."],
    ["vision", "audio"], [None],
]
LABELS = ["vision+audio", "audio", "vision", "vision+audio", "vision", "audio", None, "vision+audio",
          "vision+audio", None]
STYLES = ["{}.{}", "{}. {}", "{} {}"]


def data() -> list[dict]:
    out, q = [], 0
    for v, (video, n) in enumerate(VIDEOS.items()):
        questions = []
        for k in range(n):
            texts = [f"Event {j} in {video}, question {k}" for j in range(4)]
            if q == 4:
                texts[3] = texts[2]  # a repeated distractor: merged
            steps = [{"modality": tag, "evidence": f"At 0:{10 + s}, something.", "inference": "So."}
                     if tag is not None else {"nmodality": "audio", "evidence": "x", "inference": "y"}
                     for s, tag in enumerate(STEP_TAGS[q])]
            correct = "ABCD"[q % 4] if q != 4 else "B"
            questions.append({
                "question": f"What happens in {video} ({k})?", "question_type": ("counting", "causal reasoning")[q % 2],
                "audio_type": "Speech", "reasoning_steps": steps,
                "answer": f"Something like {texts['ABCD'.index(correct)].lower()}",
                "options": [STYLES[q % 3].format(label, text) for label, text in zip("ABCD", texts, strict=True)],
                "correct_option": correct})
            q += 1
        out.append({"video": video, "video_type": ("Vlog", "Cartoon")[v % 2], "duration": "04:23",
                    "questions": questions})
    return out


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("omnivideobench-media"), len(VIDEOS))


def release(folder: Path, clips, qa: list[dict] | None = None) -> Path:
    for video, clip in zip(VIDEOS, clips, strict=True):
        sub = "video" if video == IN_EXAMPLE_FOLDER else "videos"
        place(clip["soundtrack"], folder / sub / f"{video}.mp4")
    (folder / "data.json").write_text(json.dumps(data() if qa is None else qa, indent=2))
    return folder


def test_each_question_shows_its_video_with_its_soundtrack_and_its_evidence_label(tmp_path, clips):
    folder = release(tmp_path / "OmniVideoBench", clips)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "omnivideobench", str(folder), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 10 items (all: 10) and 4 media files" in done.stdout
    assert "2 questions have no tagged reasoning step: no evidence label" in done.stderr
    assert "merged repeated ones in 1 question (video_2/1)" in done.stderr
    items = items_of(tmp_path / "bench")
    ids = [f"{video}/{k}" for video, n in VIDEOS.items() for k in range(n)]
    assert list(items) == ids
    source = [(video, question) for video in data() for question in video["questions"]]
    for q, (item_id, (video, question)) in enumerate(zip(ids, source, strict=True)):
        item = items[item_id]
        assert item.get("evidence_modality") == LABELS[q], item_id
        texts = [f"Event {j} in {video['video']}, question {item_id.split('/')[1]}" for j in range(4)]
        if q == 4:
            assert (item["options"], item["answer"]) == (texts[:3], "B")
        else:
            assert item["options"] == texts and item["answer"] == question["correct_option"]
        assert (item["category"], item["task"]) == (question["question_type"], video["video_type"])
        assert item["breakdowns"] == {"audio_type": "Speech", "question_type": question["question_type"]}
        sub = "video" if video["video"] == IN_EXAMPLE_FOLDER else "videos"
        path = f"media/{sub}/{video['video']}.mp4"
        assert item["media"] == {"video": path, "audio": path}
        made = clips[list(VIDEOS).index(video["video"])]["soundtrack"]
        assert (tmp_path / "bench" / path).read_bytes() == made.read_bytes()


@pytest.mark.parametrize("edit, skipped, field, message", [
    (lambda d: d[0]["questions"][1]["reasoning_steps"][0].update(modality="smell"), {"video_1/1": "video_1/1"},
     "reasoning_steps[0].modality", "step tag 'smell' is neither vision nor audio"),
    (lambda d: d[2]["questions"][0].update(correct_option="E"), {"video_10/0": "video_10/0"}, "correct_option",
     "answer 'E' but the question has 4 options (A..D)"),
    (lambda d: d[1]["questions"][0].update(options=["A. one"]), {"video_2/0": "video_2/0"}, "options", "1 options"),
    (lambda d: d[3].update(video="../outside"), {"entry 3": None}, "video", "not a plain file name"),
    (lambda d: d[3].update(video="video_99"), {"video_99/0": "video_99/0", "video_99/1": "video_99/1"}, "video",
     "no media file 'videos/video_99.mp4'"),
    (lambda d: d[1]["questions"][1].update(reasoning_steps={"modality": "audio"}), {"video_2/1": "video_2/1"},
     "reasoning_steps", "expected a list of steps, got dict"),
])
def test_an_unsound_question_or_video_is_skipped_and_listed(tmp_path, clips, edit, skipped, field, message):
    qa = data()
    edit(qa)
    folder = release(tmp_path / "OmniVideoBench", clips, qa)
    done = convert_omnivideobench(folder, tmp_path / "bench")
    lines = [json.loads(t) for t in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert [(ln["entry"], ln["item_id"], ln["file"], ln["field"]) for ln in lines] == \
        [(entry, item_id, str(folder / "data.json"), field) for entry, item_id in skipped.items()]
    assert all(message in ln["reason"] and "\n" not in ln["reason"] for ln in lines)
    kept = 10 - (2 if "entry 3" in skipped else len(skipped))
    assert done.n_items == kept == len(items_of(tmp_path / "bench"))
    assert not set(skipped) & set(items_of(tmp_path / "bench"))
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["skipped_entries"] == len(skipped)


def test_a_release_with_no_sound_question_is_refused(tmp_path, clips):
    qa = data()
    for video in qa:
        video["video"] = "gone"
    folder = release(tmp_path / "OmniVideoBench", clips, qa)
    with pytest.raises(InputError, match="none of the 10 entries could be converted; the first: no media file") as err:
        convert_omnivideobench(folder, tmp_path / "bench")
    assert (err.value.item, err.value.field) == ("gone/0", "video")
    assert not (tmp_path / "bench").exists()


@pytest.mark.parametrize("written, correct, options, answer", [
    # labels written A B A B: every one stripped; correct_option is the position (C: the third option)
    (["A. a calm tone", "B. a sad tone", "A. an angry tone", "B. a happy tone"], "C",
     ["a calm tone", "a sad tone", "an angry tone", "a happy tone"], "C"),
    # one option without its label, the rest with theirs
    (["A.Two", "B.Three", "Four", "D.Five"], "D", ["Two", "Three", "Four", "Five"], "D"),
    # real first words, never labels: no punctuation after the letter
    (["A man is talking", "A woman is singing", "I think so", "Nobody"], "A",
     ["A man is talking", "A woman is singing", "I think so", "Nobody"], "A"),
    # a lone option that starts like a label, in a question that writes none
    (["C.S. Lewis", "Tolkien", "Orwell", "Austen"], "A", ["C.S. Lewis", "Tolkien", "Orwell", "Austen"], "A"),
    # a letter past the question's labels is no label
    (["U.S. Army", "E. coli", "B. the navy", "A. nobody"], "B", ["U.S. Army", "E. coli", "B. the navy", "A. nobody"],
     "B"),
])
def test_written_labels_are_stripped_wherever_written(tmp_path, clips, written, correct, options, answer):
    qa = data()
    qa[0]["questions"][0] |= {"options": written, "correct_option": correct}
    folder = release(tmp_path / "OmniVideoBench", clips, qa)
    done = convert_omnivideobench(folder, tmp_path / "bench")
    item = items_of(tmp_path / "bench")["video_1/0"]
    assert (item["options"], item["answer"]) == (options, answer)
    out_of_order = written[0].startswith("A. a calm")
    assert any("write option labels out of order (video_1/0)" in n for n in done.notes) == out_of_order
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta.get("labels_out_of_order") == (["video_1/0"] if out_of_order else None)
    assert meta["scorer"] == "omnivideobench"


class _Sections(HTMLParser):
    """The ids of a report page's sections and the ``data-key`` of every accuracy cell."""

    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.keys: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "td" and attrs.get("data-metric") == "accuracy" and attrs.get("data-key"):
            self.keys.add(attrs["data-key"])


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, clips):
    convert_omnivideobench(release(tmp_path / "OmniVideoBench", clips), tmp_path / "bench")
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text"]
    rows = run_and_check(tmp_path / "bench", tmp_path, conditions)
    assert sorted(rows["evidence_modality"].drop_nulls().unique().to_list()) == ["audio", "vision", "vision+audio"]
    # every accuracy also per evidence label, recomputed from the predictions; unlabelled items in none
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    spectrum = table.filter(pl.col("protocol") == "spectrum")
    got = {(r["model"], r["key"]): (r["value"], r["n"]) for r in spectrum.filter(pl.col("metric") == "accuracy")
           .iter_rows(named=True)}
    answered = rows.filter(pl.col("choice").is_not_null())
    for model in (m["name"] for m in MODELS):
        for label in ("vision", "audio", "vision+audio"):
            for condition in conditions:
                cell = answered.filter((pl.col("model") == model) & (pl.col("condition") == condition)
                                       & (pl.col("evidence_modality") == label))
                value, n = got[(model, f"evidence={label}/{condition}")]
                assert value == pytest.approx(float((cell["choice"] == cell["target"]).mean()), abs=1e-12)
                assert n == cell.height == LABELS.count(label)
    labels = {k.split("/")[0] for k in spectrum["key"].drop_nulls().to_list() if k.startswith("evidence=")}
    assert labels == {"evidence=vision", "evidence=audio", "evidence=vision+audio"}
    page = _Sections()
    page.feed((tmp_path / "report" / "report.html").read_text(encoding="utf-8"))
    assert "spectrum-evidence" in page.ids
    assert {f"evidence={label}/normal" for label in ("vision", "audio", "vision+audio")} <= page.keys
