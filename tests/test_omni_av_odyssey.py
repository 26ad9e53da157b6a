"""AV-Odyssey in both layouts it is published in: the authors' ``av_odyssey_part<n>.parquet`` files with every
picture, clip and sound embedded (Hugging Face ``Image`` / ``Audio`` structs, a video as bare bytes), and lmms-eval's
``av_odyssey.parquet`` beside the media its path lists name. Each is converted into one benchmark with no sound
question dropped (an unsound row is skipped and listed in ``skipped.jsonl``, the rest converted): items with four
pictures or two sounds keep them all, in the release's numbering, and the tags become numbered markers. Items are
compared with what the release rows say (written here, independently of the converter), media with the bytes
embedded or placed. Then the ``spectrum`` protocol on that mixed benchmark: each item's conditions are those of its
own modalities, a shuffled modality shows a donor's whole set (of the same size), donors of a modality come only
from the items showing it; and a run through local Ray with simulated models."""

from __future__ import annotations

import io
import json
import math
import struct
import subprocess
import sys
import wave
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from omnieval.core.schema import InputError
from omnieval.datasets.benchmark import load_benchmark
from omnieval.datasets.omni.av_odyssey import convert_av_odyssey
from omnieval.protocols import spectrum
from tests.omni_release_run import items_of

ROOT = Path(__file__).resolve().parents[1]
MEDIA_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
AUTHORS = pa.schema([("question_id", pa.string()), ("question_type_id", pa.int64()), ("subfield", pa.string()),
                     ("data_type", pa.string()), ("question", pa.string()), ("options", pa.list_(pa.string())),
                     ("answer", pa.string()), *((f"image_{k}", MEDIA_STRUCT) for k in range(1, 5)),
                     ("video_1", pa.binary()), *((f"audio_{k}", MEDIA_STRUCT) for k in range(1, 5))])
LMMS = pa.schema([("question_id", pa.string()), ("question_type_id", pa.int64()), ("subfield", pa.string()),
                  ("data_type", pa.string()), ("question", pa.string()), ("options", pa.list_(pa.string())),
                  ("answer", pa.string()), ("image_path", pa.list_(pa.string())),
                  ("video_path", pa.list_(pa.string())), ("audio_path", pa.list_(pa.string()))])

# question id -> (data type, question, number of pictures (images or a video), number of sounds)
QUESTIONS = {
    "1_1": ("image", "Which instrument in [img1] makes the sound in [audio1]?", 1, 1),
    "1_2": ("image", "[audio1] Is this the sound of the animal in [img1]?", 1, 1),
    "1_3": ("image", "Listen to [audio1]. Where is it, in [img1]?", 1, 1),
    "1_4": ("image", "Which object in [img1] is heard in [audio1]?", 1, 1),
    "1_5": ("image", "What do the picture and the sound have in common?", 1, 1),
    "2_26": ("image", "Which of [img1] [img2] [img3] [img4] makes [audio1]?", 4, 1),
    "2_27": ("image", "[audio1]: is it [img1], [img2], [img3] or [img4]?", 4, 1),
    "2_28": ("image", "Pick the source of [audio1] among [img1] [img2] [img3] [img4].", 4, 1),
    "31_6": ("image", "Is [audio1] louder than [audio2] in [img1]?", 1, 2),
    "31_7": ("image", "Is [audio2] higher than [audio1] for [img1]?", 1, 2),
    "9_1": ("video", "Does [video1] match [audio1]?", 1, 1),
    "9_2": ("video", "Which moment of [video1] makes [audio1]?", 1, 1),
    "9_3": ("video", "[audio1] then [video1]: which comes first?", 1, 1),
    "9_4": ("video", "Is [audio1] the soundtrack of [video1]?", 1, 1),
}


def picture(i: int) -> bytes:
    """A small PNG, different for every ``i``."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8 + i, 6 + i % 5), ((37 * i) % 256, (91 * i) % 256, (53 * i + 80) % 256)).save(out, "PNG")
    return out.getvalue()


def sound(i: int) -> bytes:
    """A short 8 kHz mono PCM WAV tone, different for every ``i``."""
    out = io.BytesIO()
    with wave.open(out, "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(8000)
        f.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * (200 + 50 * i) * t / 8000)))
                               for t in range(2000)))
    return out.getvalue()


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, dict[str, list[bytes]]]:
    """question id -> modality -> the bytes of each of its files, in the release's numbering."""
    from omnieval.media.synth import moving_box_video

    folder = tmp_path_factory.mktemp("av-odyssey-clips")
    out, pictures, sounds, videos = {}, 0, 0, 0
    for qid, (kind, _, n_pictures, n_sounds) in QUESTIONS.items():
        files = {}
        if kind == "image":
            files["image"] = [picture(pictures + k) for k in range(n_pictures)]
            pictures += n_pictures
        else:
            clip = moving_box_video(folder / f"clip{videos}.mp4", colour=("red", "blue", "green", "white")[videos],
                                    box=8, y=8, size=(32, 24), duration=1.0, fps=4, speed=8.0 + videos)
            files["video"] = [clip.read_bytes()]
            videos += 1
        files["audio"] = [sound(sounds + k) for k in range(n_sounds)]
        sounds += n_sounds
        out[qid] = files
    return out


def row_fields(qid: str, i: int) -> dict:
    kind, question, _, _ = QUESTIONS[qid]
    return {"question_id": qid, "question_type_id": int(qid.split("_")[0]), "subfield": ("Timbre", "Space")[i % 2],
            "data_type": kind, "question": question,
            "options": [f"{label}. Choice {label} for {qid}" for label in "ABCD"], "answer": "ABCD"[i % 4]}


def authors_release(folder: Path, media, edit=None) -> Path:
    """The authors' layout: two part files, each medium in its own column (images and sounds as ``Image`` /
    ``Audio`` structs, the video as bytes)."""
    folder.mkdir(parents=True)
    rows = []
    for i, qid in enumerate(QUESTIONS):
        row = row_fields(qid, i)
        files = media[qid]
        for k in range(4):
            images = files.get("image", [])
            row[f"image_{k + 1}"] = {"bytes": images[k], "path": f"{qid}_{k + 1}.png"} if k < len(images) else None
            row[f"audio_{k + 1}"] = ({"bytes": files["audio"][k], "path": f"{qid}_{k + 1}.wav"}
                                     if k < len(files["audio"]) else None)
        row["video_1"] = files["video"][0] if "video" in files else None
        rows.append(row)
    if edit:
        edit(rows)
    for part, chunk in ((1, rows[:8]), (2, rows[8:])):
        pq.write_table(pa.Table.from_pylist(chunk, schema=AUTHORS), folder / f"av_odyssey_part{part}.parquet")
    return folder


def lmms_release(folder: Path, media, edit=None) -> Path:
    """lmms-eval's layout: ``av_odyssey.parquet`` with path lists, the media unpacked beside it (the images under a
    folder of their archive's name)."""
    folder.mkdir(parents=True)
    rows = []
    for i, qid in enumerate(QUESTIONS):
        row = row_fields(qid, i)
        for modality, suffix, column in (("image", "png", "image_path"), ("video", "mp4", "video_path"),
                                         ("audio", "wav", "audio_path")):
            paths = [f"{modality}/{qid}_{k + 1}.{suffix}" for k in range(len(media[qid].get(modality, [])))]
            row[column] = paths
            for rel, data in zip(paths, media[qid].get(modality, []), strict=True):
                target = folder / (f"image/{rel}" if modality == "image" else rel)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        rows.append(row)
    if edit:
        edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=LMMS), folder / "av_odyssey.parquet")
    return folder


def expected_question(qid: str) -> str:
    """The release's question with its tags as the numbered markers (one medium of a kind: no number)."""
    _, question, n_pictures, n_sounds = QUESTIONS[qid]
    visual = "video" if QUESTIONS[qid][0] == "video" else "image"
    counts = {"img": n_pictures if visual == "image" else 0, "video": n_pictures if visual == "video" else 0,
              "audio": n_sounds}
    for tag, modality in (("img", "image"), ("video", "video"), ("audio", "audio")):
        for k in range(1, 5):
            question = question.replace(f"[{tag}{k}]", f"[{modality}]" if counts[tag] == 1 else f"[{modality} {k}]")
    return question


def check_items(out: Path, media, left_out=()) -> None:
    """The items written are the release's rows (``QUESTIONS``, ``row_fields``) but ``left_out``, in its order."""
    items = items_of(out)
    assert list(items) == [qid for qid in QUESTIONS if qid not in left_out]  # every sound question, in order
    for i, (qid, (kind, _, _, _)) in enumerate(QUESTIONS.items()):
        if qid in left_out:
            continue
        item = items[qid]
        assert item["question"] == expected_question(qid) and "[img" not in item["question"]
        assert item["options"] == [f"Choice {label} for {qid}" for label in "ABCD"]
        subfield = ("Timbre", "Space")[i % 2]
        task = qid.split("_")[0]
        assert (item["answer"], item["category"], item["task"]) == ("ABCD"[i % 4], subfield, task)
        assert item["breakdowns"] == {"subfield": subfield, "task": task, "modalities": f"{kind}+audio"}
        assert set(item["media"]) == {kind, "audio"}
        for modality, files in media[qid].items():
            written = item["media"][modality]
            written = [written] if len(files) == 1 else written  # one file: a path; several: a list
            assert isinstance(written, list) and [(out / p).read_bytes() for p in written] == files


def test_the_authors_release_with_embedded_media_is_one_benchmark_with_every_question(tmp_path, media):
    folder = authors_release(tmp_path / "AV_Odyssey_Bench", media)
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "av-odyssey", str(folder), "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    n_files = sum(len(f) for files in media.values() for f in files.values())
    assert f"wrote 14 items (test: 14) and {n_files} media files to {out}" in done.stdout
    assert "read the authors' release (media embedded); items per set of modalities: image+audio 10, " \
           "video+audio 4" in done.stderr
    meta = json.loads((out / "benchmark.json").read_text())
    assert (meta["name"], meta["converter"], meta["protocol"], meta["splits"]) == ("av-odyssey", "av-odyssey",
                                                                                    "spectrum", {"test": 14})
    assert meta["scorer"] == "av-odyssey"
    check_items(out, media)
    items = items_of(out)
    assert items["9_1"]["media"]["video"].endswith(".mp4") and items["2_26"]["media"]["image"][0].endswith(".png")
    assert sorted(p.name for p in out.iterdir()) == ["benchmark.json", "items.jsonl", "media"]


def test_the_authors_part_files_naming_their_media_by_path_read_the_files_beside_them(tmp_path, media):
    """Part files whose media cells hold a path and no bytes (a text, or an ``Image`` struct without bytes), the
    files beside them: the same items, each file's bytes those of the file the cell names."""
    folder = tmp_path / "AV_Odyssey_Bench"
    folder.mkdir()
    rows = []
    for i, qid in enumerate(QUESTIONS):
        row = row_fields(qid, i)
        for modality, suffix, columns in (("image", "png", [f"image_{k}" for k in range(1, 5)]),
                                          ("video", "mp4", ["video_1"]),
                                          ("audio", "wav", [f"audio_{k}" for k in range(1, 5)])):
            files = media[qid].get(modality, [])
            for k, column in enumerate(columns):
                if k >= len(files):
                    row[column] = None
                    continue
                rel = f"{modality}/{qid}_{k + 1}.{suffix}"
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(files[k])
                row[column] = {"bytes": None, "path": rel} if modality == "image" else rel
        rows.append(row)
    schema = pa.schema([(f.name, f.type) if not f.name.startswith(("video_", "audio_")) else (f.name, pa.string())
                        for f in AUTHORS])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "av_odyssey_part1.parquet")
    out = tmp_path / "bench"
    convert_av_odyssey(folder, out)
    check_items(out, media)


def test_lmms_evals_copy_reads_to_the_same_items(tmp_path, media):
    out = tmp_path / "bench"
    convert_av_odyssey(lmms_release(tmp_path / "AV_Odyssey_Bench_LMMs_Eval", media), out)
    check_items(out, media)
    items = items_of(out)
    assert items["2_26"]["media"]["image"] == [f"media/image/image/2_26_{k}.png" for k in range(1, 5)]
    assert items["31_6"]["media"]["audio"] == ["media/audio/31_6_1.wav", "media/audio/31_6_2.wav"]
    assert list(items["1_2"]["media"]) == ["audio", "image"]  # the order the tags first name them


def test_a_benchmark_is_replaced_only_with_overwrite(tmp_path, media):
    folder = authors_release(tmp_path / "AV_Odyssey_Bench", media)
    out = tmp_path / "bench"
    convert_av_odyssey(folder, out)
    with pytest.raises(InputError, match="pass --overwrite to replace it"):
        convert_av_odyssey(folder, out)
    assert convert_av_odyssey(folder, out, overwrite=True).n_items == 14


def _blank(rows, qid, column):
    next(r for r in rows if r["question_id"] == qid)[column] = None


def skipped_lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "skipped.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("edit, part, row, qid, field, reason", [
    (lambda r: r[0].update(question="Is [img2] the one in [audio1]?"), 1, 0, "1_1", "question",
     "tag [img2] but the row has 1 image"),
    (lambda r: r[8].update(question="Is [audio3] louder?"), 2, 0, "31_6", "question",
     "tag [audio3] but the row has 2 audio clips"),
    (lambda r: r[10].update(question="Does [img1] match [audio1]?"), 2, 2, "9_1", "question",
     "tag [img1] but the row has 0 images"),
    (lambda r: r[1].update(answer="E"), 1, 1, "1_2", "answer", "answer 'E' but the question has 4 options (A..D)"),
    (lambda r: _blank(r, "2_26", "image_2"), 1, 5, "2_26", "image_3",
     "image_3 holds a file but image_2 is empty: the files of one kind are numbered from 1 without gaps"),
    (lambda r: r[2].update(audio_1={"bytes": b"not a sound at all", "path": None}), 1, 2, "1_3", "audio_1",
     "the 18 bytes embedded are no image, audio or video format this reads (they start b'not a so')"),
    (lambda r: r[3].update(image_1={"bytes": b"\x89PNG\r\n\x1a\ncut short", "path": "x.png"}), 1, 3, "1_4", "image_1",
     "image data (PNG, 17 bytes) does not decode: Truncated File Read (a cell cut short, e.g. a truncated base64 "
     "string?)"),
])
def test_an_unsound_row_of_the_authors_release_is_skipped_naming_file_entry_and_field(tmp_path, media, edit, part,
                                                                                      row, qid, field, reason):
    folder = authors_release(tmp_path / "AV_Odyssey_Bench", media, edit)
    convert_av_odyssey(folder, tmp_path / "bench")
    check_items(tmp_path / "bench", media, left_out=[qid])
    assert skipped_lines(tmp_path / "bench") == [
        {"item_id": qid, "file": str(folder / f"av_odyssey_part{part}.parquet"), "entry": f"row {row} (question {qid})",
         "field": field, "reason": reason}]


@pytest.mark.parametrize("edit, row, qid, field, reason", [
    (lambda r: r[2].update(audio_path=["audio/missing.wav"]), 2, "1_3", "audio_path",
     "no media file 'audio/missing.wav', 'audio/audio/missing.wav' under {folder}"),
    (lambda r: r[3].update(image_path=[""]), 3, "1_4", "image_path", "path 0 is ''"),
])
def test_an_unsound_row_of_lmms_evals_copy_is_skipped_naming_file_entry_and_field(tmp_path, media, edit, row, qid,
                                                                                  field, reason):
    folder = lmms_release(tmp_path / "AV-Odyssey", media, edit)
    convert_av_odyssey(folder, tmp_path / "bench")
    check_items(tmp_path / "bench", media, left_out=[qid])
    assert skipped_lines(tmp_path / "bench") == [
        {"item_id": qid, "file": str(folder / "av_odyssey.parquet"), "entry": f"row {row} (question {qid})",
         "field": field, "reason": reason.format(folder=folder)}]


def test_the_authors_part_files_with_unsound_rows_convert_the_rest(tmp_path, media):
    # one answer no label in part 1 (refused as the row is read), one embedded sound that is no sound in part 2
    # (refused as it is written): both listed, the other twelve rows converted, the count per set of modalities
    # only of the items written
    def edit(rows):
        rows[1]["answer"] = "E"
        rows[8]["audio_1"] = {"bytes": b"not a wav", "path": "31_6_1.wav"}

    folder = authors_release(tmp_path / "AV_Odyssey_Bench", media, edit)
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "av-odyssey", str(folder), "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 12 items (test: 12)" in done.stdout and "skipped 2 entries that could not be converted" in done.stdout
    assert "items per set of modalities: image+audio 8, video+audio 4" in done.stderr
    check_items(out, media, left_out=["1_2", "31_6"])
    assert skipped_lines(out) == [
        {"item_id": "1_2", "file": str(folder / "av_odyssey_part1.parquet"), "entry": "row 1 (question 1_2)",
         "field": "answer", "reason": "answer 'E' but the question has 4 options (A..D)"},
        {"item_id": "31_6", "file": str(folder / "av_odyssey_part2.parquet"), "entry": "row 0 (question 31_6)",
         "field": "audio_1", "reason": "embedded audio '31_6_1.wav' (9 bytes) is not WAV, MP3, FLAC or Ogg"}]
    assert json.loads((out / "benchmark.json").read_text())["skipped_entries"] == 2
    # a row skipped as it was written leaves none of its files behind (its picture would be media/embedded/...)
    written = {p for item in items_of(out).values() for m in item["media"].values()
               for p in (m if isinstance(m, list) else [m])}
    assert {p.relative_to(out).as_posix() for p in (out / "media").rglob("*") if p.is_file()} == written


def test_a_folder_with_neither_layout_is_named(tmp_path):
    (tmp_path / "AV-Odyssey").mkdir()
    with pytest.raises(InputError, match="no av_odyssey.parquet .lmms-eval's copy. and no av_odyssey_part<n>.parquet"):
        convert_av_odyssey(tmp_path / "AV-Odyssey", tmp_path / "bench")


# ---------------------------------------------------------------------------------------------------------------
# The spectrum protocol on the mixed benchmark
# ---------------------------------------------------------------------------------------------------------------

CONDITIONS = {  # the conditions of a question with a picture (an image or a video), a sound and its text
    kind: ["normal", f"{kind}_only", "audio_only", "text_only", "random", f"no_{kind}", "no_audio", "no_text"]
    for kind in ("image", "video")}


def test_each_item_gets_its_own_conditions_and_a_shuffle_shows_a_donors_whole_set(tmp_path, media):
    out = tmp_path / "bench"
    convert_av_odyssey(authors_release(tmp_path / "AV_Odyssey_Bench", media), out)
    bench = load_benchmark(out)
    items = {it.item_id: it for it in bench.items}
    instances = spectrum.expand_all(bench.items, bench, seed=0)
    by_item: dict[str, list] = {}
    for inst in instances:
        by_item.setdefault(inst.item_id, []).append(inst)
    for qid, (kind, _, _, _) in QUESTIONS.items():
        assert [i.condition for i in by_item[qid]] == CONDITIONS[kind]
    raw = {qid: json.loads(line)["media"] for qid, line in
           zip(items_of(out), (out / "items.jsonl").read_text().splitlines(), strict=True)}

    def files(qid, modality):
        value = raw[qid][modality]
        return value if isinstance(value, list) else [value]

    for inst in instances:
        donors = inst.donors or {}
        for modality in ("image", "video", "audio"):
            shown = [s.path for s in inst.segments if s.kind == "media" and s.modality == modality]
            if modality not in raw[inst.item_id]:
                assert not shown
                continue
            source = donors.get(modality, inst.item_id)
            assert shown == files(source, modality)  # the whole set, in its numbering
            if modality in donors:
                assert source != inst.item_id and modality in raw[source]  # from an item that shows it
                assert len(files(source, modality)) == len(files(inst.item_id, modality))  # a set of its size
        assert inst.media_unit == files(inst.item_id, "video" if "video" in raw[inst.item_id] else "image")[0]
    four = [i for i in instances if i.item_id == "2_26" and i.condition == "audio_only"][0]
    assert len([s for s in four.segments if s.modality == "image"]) == 4 and four.donors["image"] in ("2_27", "2_28")
    assert items["2_26"].question == "Which of [image 1] [image 2] [image 3] [image 4] makes [audio]?"


def test_a_set_size_too_rare_to_lend_among_itself_borrows_other_sizes(tmp_path, media):
    """With one two-sound item left, no other item lends it two sounds: its donor's one sound replaces its pair
    (and it lends its pair to an item with one)."""
    keep = [q for q in QUESTIONS if q != "31_7"]
    out = tmp_path / "bench"
    convert_av_odyssey(authors_release(tmp_path / "AV_Odyssey_Bench", media,
                                       lambda rows: rows.__setitem__(slice(None), [r for r in rows
                                                                                   if r["question_id"] in keep])),
                       out)
    bench = load_benchmark(out)
    instances = spectrum.expand_all(bench.items, bench, seed=0)
    lone = [i for i in instances if i.item_id == "31_6" and i.condition == "no_audio"][0]
    donor = {it.item_id: it for it in bench.items}[lone.donors["audio"]]
    assert [s.path for s in lone.segments if s.modality == "audio"] == spectrum.media_files(donor, "audio")
    lenders = [i for i in instances if i.condition == "no_audio" and i.donors["audio"] == "31_6"]
    assert len(lenders) == 1 and len([s for s in lenders[0].segments if s.modality == "audio"]) == 2


@pytest.mark.slow
def test_a_mixed_benchmark_with_several_pictures_runs_through_ray(ray_session, tmp_path, media):
    from omnieval.cli import main

    out = tmp_path / "bench"
    convert_av_odyssey(authors_release(tmp_path / "AV_Odyssey_Bench", media), out)
    config = tmp_path / "run.yaml"
    models = [{"name": "sim-sight", "engine": "simulated", "options": {"seed": 3, "reliance": {"image": 0.9,
                                                                                               "video": 0.9}}}]
    config.write_text(yaml.safe_dump({"benchmark": str(out), "output": str(tmp_path / "run"), "protocol": "spectrum",
                                      "decode": {"num_frames": 2, "max_side": 32}, "models": models}))
    assert main(["run", str(config)]) == 0
    rows = pl.read_parquet(tmp_path / "run" / "predictions.parquet")
    assert rows["error"].null_count() == rows.height
    got = {qid: sorted(rows.filter(pl.col("item_id") == qid)["condition"].to_list()) for qid in QUESTIONS}
    assert got == {qid: sorted(CONDITIONS[kind]) for qid, (kind, *_) in QUESTIONS.items()}
    raw = items_of(out)
    for row in rows.filter(pl.col("donors").is_not_null()).iter_rows(named=True):
        for modality, source in json.loads(row["donors"]).items():
            if modality == "text":
                continue
            mine, theirs = raw[row["item_id"]]["media"][modality], raw[source]["media"][modality]
            assert source != row["item_id"] and type(mine) is type(theirs)
            assert not isinstance(mine, list) or len(mine) == len(theirs)
    # the simulated model sees its picture exactly where the item's own picture is shown
    for kind in ("image", "video"):
        own = rows.filter(pl.col("condition").is_in(["normal", f"{kind}_only"])
                          & pl.col("item_id").is_in([q for q, v in QUESTIONS.items() if v[0] == kind]))
        assert float((own["choice"] == own["target"]).mean()) > 0.6
    assert main(["metrics", str(tmp_path / "run" / "predictions.parquet"), "--out", str(tmp_path / "metrics"),
                 "--resamples", "50"]) == 0
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    for condition in ("video_only", "image_only", "normal"):
        cell = rows.filter(pl.col("condition") == condition)
        value = table.filter((pl.col("metric") == "accuracy") & (pl.col("key") == condition))["value"][0]
        assert value == pytest.approx(float((cell["choice"] == cell["target"]).mean()), abs=1e-12)
    # the contrasts per set of modalities: intra of the image over the image items alone
    images = rows.filter(pl.col("item_id").is_in([q for q, v in QUESTIONS.items() if v[0] == "image"]))
    gain = (float(images.filter(pl.col("condition") == "image_only").select(pl.col("choice") == pl.col("target"))
                  .to_series().mean())
            - float(images.filter(pl.col("condition") == "random").select(pl.col("choice") == pl.col("target"))
                    .to_series().mean()))
    intra = table.filter((pl.col("metric") == "intra") & (pl.col("key") == "modalities=image+audio+text/image"))
    assert intra["value"][0] == pytest.approx(gain, abs=1e-12)
    assert table.filter((pl.col("metric") == "intra") & ~pl.col("key").str.starts_with("modalities=")).is_empty()
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--resamples", "50"]) == 0


def test_two_sets_of_pictures_with_one_picture_in_common_never_lend_each_other(tmp_path, media):
    """2_27's second picture is 2_26's third (same bytes): a shuffle of 2_26's pictures must not show it that
    picture again, so neither lends the other its set."""
    shared = {**media, "2_27": {**media["2_27"], "image": [media["2_27"]["image"][0], media["2_26"]["image"][2],
                                                           *media["2_27"]["image"][2:]]}}
    out = tmp_path / "bench"
    convert_av_odyssey(authors_release(tmp_path / "AV_Odyssey_Bench", shared), out)
    bench = load_benchmark(out)
    donors = {(i.item_id, i.condition): i.donors["image"] for i in spectrum.expand_all(bench.items, bench, seed=0)
              if i.donors and "image" in i.donors}
    assert donors[("2_26", "random")] != "2_27" and donors[("2_27", "random")] != "2_26"
    assert all({item, donor} != {"2_26", "2_27"} for (item, _), donor in donors.items())


def test_a_video_most_video_items_share_is_refused_naming_a_video_item(tmp_path, media):
    same = {**media, **{q: {**media[q], "video": media["9_1"]["video"]} for q in ("9_2", "9_3")}}
    out = tmp_path / "bench"
    convert_av_odyssey(authors_release(tmp_path / "AV_Odyssey_Bench", same), out)
    bench = load_benchmark(out)
    with pytest.raises(InputError, match="3 of the 4 items of benchmark 'av-odyssey' split 'test' that show a video "
                                         "show the same video content") as err:
        spectrum.expand_all(bench.items, bench, seed=0)
    assert err.value.item == "9_1"  # a video item, not the first item of the benchmark
