"""AV-Odyssey as lmms-eval reads it (``av_odyssey.parquet`` beside the media its rows name; some files under a folder
named after their path's first component), with the release's columns and quirks: ``[imgN]`` / ``[videoN]`` /
``[audioN]`` tags in the question, labelled options, lists of paths per kind, ``data_type`` choosing images or
videos. Converted to one benchmark per set of modalities (``image+audio/``, ``video+audio/``), the tags turned into
markers and the media placed in the order the tags give, the items with several media of one kind refused one by one
and listed; the suite replaced only whole and only with ``--overwrite``; refused rows named by file, entry and field;
one of the benchmarks run through two simulated models, metrics and report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni.av_odyssey import convert_av_odyssey
from tests.omni_release_run import items_of, make_clips, make_pictures, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = pa.schema([("question_id", pa.string()), ("question_type_id", pa.int64()), ("subfield", pa.string()),
                    ("data_type", pa.string()), ("question", pa.string()), ("options", pa.list_(pa.string())),
                    ("answer", pa.string()), ("image_path", pa.list_(pa.string())),
                    ("video_path", pa.list_(pa.string())), ("audio_path", pa.list_(pa.string()))])
QUESTIONS = {  # image + audio items: their question texts
    "1_1": "Which instrument in [img1] makes the sound in [audio1]?",
    "1_2": "[audio1] Is this the sound of the animal in [img1]?",
    "1_3": "Listen to [audio1]. Where is it, in [img1]?",
    "1_4": "Which object in [img1] is heard in [audio1]?",
    "1_5": "What do the picture and the sound have in common?",
}
VIDEO_QUESTIONS = {"9_1": "Does [video1] match [audio1]?", "9_2": "Which moment of [video1] makes [audio1]?",
                   "9_3": "[audio1] then [video1]: which comes first?"}


def rows() -> list[dict]:
    out = []
    for i, (qid, question) in enumerate(QUESTIONS.items()):
        out.append(_row(qid, "image", question, images=[f"image/{qid}_1.png"], audios=[f"audio/{qid}_1.wav"], i=i))
    for i, (qid, question) in enumerate(VIDEO_QUESTIONS.items()):
        out.append(_row(qid, "video", question, videos=[f"video/{qid}_1.mp4"], audios=[f"audio/{qid}_1.wav"], i=i))
    out.append(_row("2_26", "image", "Which of [img1] [img2] [img3] [img4] makes [audio1]?",
                    images=[f"image/2_26_{k}.png" for k in range(1, 5)], audios=["audio/2_26_1.wav"], i=1))
    out.append(_row("31_6", "image", "Is [audio1] louder than [audio2] in [img1]?", images=["image/31_6_1.png"],
                    audios=["audio/31_6_1.wav", "audio/31_6_2.wav"], i=2))
    return out


def _row(qid, kind, question, *, images=(), videos=(), audios=(), i=0) -> dict:
    return {"question_id": qid, "question_type_id": int(qid.split("_")[0]), "subfield": ("Timbre", "Space")[i % 2],
            "data_type": kind, "question": question, "options": [f"{label}. Choice {label} for {qid}" for label in
                                                                  "ABCD"], "answer": "ABCD"[i % 4],
            "image_path": list(images), "video_path": list(videos), "audio_path": list(audios)}


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, Path]:
    """A file per relative path the rows name (pictures, silent videos, sounds)."""
    folder = tmp_path_factory.mktemp("av-odyssey-media")
    paths = [p for r in rows() for key in ("image_path", "video_path", "audio_path") for p in r[key]]
    pictures = iter(make_pictures(folder / "pictures", sum(p.endswith(".png") for p in paths)))
    clips = iter(make_clips(folder / "clips", sum(not p.endswith(".png") for p in paths)))
    return {p: next(pictures) if p.endswith(".png") else next(clips)["picture" if p.endswith(".mp4") else "sound"]
            for p in paths}


def release(folder: Path, media, data: list[dict] | None = None) -> Path:
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows() if data is None else data, schema=SCHEMA),
                   folder / "av_odyssey.parquet")
    for rel, made in media.items():  # the pictures unpacked into a folder of their archive's name
        place(made, folder / ("image/" + rel if rel.startswith("image/") else rel))
    return folder


def test_one_benchmark_per_set_of_modalities_and_the_refused_items_listed(tmp_path, media):
    folder = release(tmp_path / "AV-Odyssey", media)
    out = tmp_path / "benches"
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "av-odyssey", str(folder), "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (f"wrote 2 benchmarks to {out} (image+audio/: 5 items, 10 media files; video+audio/: 3 items, 6 media "
            "files); refused 2 items with several media of one kind") in done.stdout
    assert "2 audio clips: 1 (31_6)" in done.stdout and "4 images: 1 (2_26)" in done.stdout
    index = json.loads((out / "benchmarks.json").read_text())
    assert (index["benchmarks"], index["converter"], index["refused"]) == (["image+audio", "video+audio"],
                                                                             "av-odyssey", 2)
    skipped = [json.loads(line) for line in (out / "skipped.jsonl").read_text().splitlines()]
    assert [(s["item_id"], s["reason"], s["row"]) for s in skipped] == [("2_26", "4 images", "row 8"),
                                                                         ("31_6", "2 audio clips", "row 9")]
    for key, questions in (("image+audio", QUESTIONS), ("video+audio", VIDEO_QUESTIONS)):
        meta = json.loads((out / key / "benchmark.json").read_text())
        assert (meta["name"], meta["converter"], meta["splits"]) == (f"av-odyssey-{key}", "av-odyssey",
                                                                     {"test": len(questions)})
        items = items_of(out / key)
        assert list(items) == list(questions)
        by_id = {r["question_id"]: r for r in rows()}
        for qid, question in questions.items():
            item, row = items[qid], by_id[qid]
            for tag, marker in (("[img1]", "[image]"), ("[video1]", "[video]"), ("[audio1]", "[audio]")):
                question = question.replace(tag, marker)
            assert item["question"] == question and "[img" not in item["question"]
            assert item["options"] == [f"Choice {label} for {qid}" for label in "ABCD"]
            assert (item["answer"], item["category"], item["task"]) == (row["answer"], row["subfield"],
                                                                        qid.split("_")[0])
            visual = "image" if key == "image+audio" else "video"
            tagged = [m for m in (visual, "audio") if f"[{m}]" in question]
            order = sorted(tagged, key=question.index) + [m for m in (visual, "audio") if m not in tagged]
            assert list(item["media"]) == order  # the order the tags give
            for modality, column in ((visual, f"{visual}_path"), ("audio", "audio_path")):
                rel = row[column][0]
                want = f"media/image/{rel}" if rel.startswith("image/") else f"media/{rel}"
                assert item["media"][modality] == want
                assert (out / key / want).read_bytes() == media[rel].read_bytes()


def test_the_suite_is_replaced_whole_and_only_with_overwrite(tmp_path, media):
    folder = release(tmp_path / "AV-Odyssey", media)
    out = tmp_path / "benches"
    convert_av_odyssey(folder, out)
    with pytest.raises(InputError, match="pass --overwrite to replace it"):
        convert_av_odyssey(folder, out)
    data = rows()[:5] + rows()[8:]  # the video items gone: their benchmark goes too
    pq.write_table(pa.Table.from_pylist(data, schema=SCHEMA), folder / "av_odyssey.parquet")
    converted = convert_av_odyssey(folder, out, overwrite=True)
    assert list(converted.benchmarks) == ["image+audio"] and not (out / "video+audio").exists()
    assert sorted(p.name for p in out.iterdir()) == ["benchmarks.json", "image+audio", "skipped.jsonl"]
    (out / "image+audio" / "my-notes.txt").write_text("mine")
    with pytest.raises(InputError, match="'image\\+audio/my-notes.txt', which no converter writes"):
        convert_av_odyssey(folder, out, overwrite=True)
    assert (out / "image+audio" / "my-notes.txt").exists()


@pytest.mark.parametrize("edit, item, field, message", [
    (lambda r: r[0].update(question="Is [img2] the one in [audio1]?"), "row 0 (question 1_1)", "question",
     "tag [img2] but the row has 1 image"),
    (lambda r: r[6].update(question="Does [img1] match [audio1]?"), "row 6 (question 9_2)", "question",
     "tag [img1] but the row has 0 images"),
    (lambda r: r[1].update(answer="E"), "row 1 (question 1_2)", "answer", "answer 'E' but the question has 4"),
    (lambda r: r[2].update(audio_path=["audio/missing.wav"]), "row 2 (question 1_3)", "audio_path",
     "no media file 'audio/missing.wav', 'audio/audio/missing.wav'"),
    (lambda r: r[3].update(image_path=[""]), "row 3 (question 1_4)", "image_path", "path 0 is ''"),
])
def test_refused_rows_name_file_entry_and_field(tmp_path, media, edit, item, field, message):
    data = rows()
    edit(data)
    folder = release(tmp_path / "AV-Odyssey", media, data)
    with pytest.raises(InputError) as err:
        convert_av_odyssey(folder, tmp_path / "benches")
    assert (err.value.file, err.value.item, err.value.field) == (str(folder / "av_odyssey.parquet"), item, field)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "benches").exists()


def test_the_release_that_embeds_its_media_is_named(tmp_path):
    (tmp_path / "AV-Odyssey").mkdir()
    (tmp_path / "AV-Odyssey" / "av_odyssey_part1.parquet").write_bytes(b"")
    with pytest.raises(InputError, match="av_odyssey_part1.parquet and the like embed the media"):
        convert_av_odyssey(tmp_path / "AV-Odyssey", tmp_path / "benches")


@pytest.mark.slow
def test_a_converted_benchmark_runs_with_two_simulated_models(ray_session, tmp_path, media):
    convert_av_odyssey(release(tmp_path / "AV-Odyssey", media), tmp_path / "benches")
    conditions = ["normal", "image_only", "audio_only", "text_only", "random", "no_image", "no_audio", "no_text"]
    run_and_check(tmp_path / "benches" / "image+audio", tmp_path, conditions)
