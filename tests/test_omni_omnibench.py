"""OmniBench in both layouts it ships: the GitHub release (``dataset/batch-5_1142_20240817.jsonl`` with the release's
keys, base names under ``mm_data/audio/`` (MP3) and ``mm_data/image/``, odd names such as ``6-0044.mp4.mp3.mp3.mp3``
and ``007_1(1).png``, one picture asked about twice) and the Hugging Face release (``data/train-*.parquet`` embedding
each file as ``{bytes, path}``); answers given as option texts; the human transcript and the caption kept as text
stand-ins; the audio type (lower case, as the release's metrics script reads it) and task type as breakdowns; unsound
entries skipped and listed by file, entry and field; the benchmark run through two simulated models, metrics and
report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.datasets.omni.omnibench import convert_omnibench
from tests.omni_release_run import items_of, make_pictures, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
JSONL = "batch-5_1142_20240817.jsonl"
AUDIO = ["2_009_four_people.mp3", "6-002.mp4.mp3", "6-0044.mp4.mp3.mp3.mp3", "1_24.mp3", "3_011jenny.mp3",
         "1_26.mp3", "2_011_drinking.mp3", "6-013.mp4.mp3.mp3.mp3"]
IMAGES = ["2_009_four_people.png", "6-002.png", "007_1(1).png", "1_024.png", "3_011jenny.jpg", "1_024.png",
          "2_011_drinking.png", "6-013.png"]  # entries 3 and 5 ask about one picture
TASKS = ["Action and Activity", "Story Description", "Plot Inference", "Identity & Relationship"]
AUDIO_TYPES = ["speech", "sound event", "music"]
WRITTEN_AS = {7: "Sound event"}  # an entry whose audio type is capitalised: the release's metrics script lower-cases


def entries() -> list[dict]:
    out = []
    for i, (audio, image) in enumerate(zip(AUDIO, IMAGES, strict=True)):
        options = [f"The man in picture {i} is doing thing {k}." for k in range(4)]
        audio_type = WRITTEN_AS.get(i, AUDIO_TYPES[i % 3])
        out.append({"task type": TASKS[i % 4], "audio type": audio_type, "question": f"What happens ({i})?",
                    "audio content": "" if i == 6 else f"A: line {i}.\nB: reply {i}.",
                    "image content": f"The image depicts scene {i}.", "audio_path": audio, "image_path": image,
                    "index": i, "answer": options[(i * 3) % 4], "options": options})
    return out


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, Path]:
    """One MP3 per entry and one picture per distinct image name (PNG or JPEG by its suffix)."""
    import ffmpeg

    from omnieval.media.synth import beep_audio

    folder = tmp_path_factory.mktemp("omnibench-media")
    made = {}
    for i, name in enumerate(AUDIO):
        wav = beep_audio(folder / f"a{i}.wav", frequency=300 + 90 * i, beeps=1 + i % 3, duration=0.6,
                         sample_rate=16000)
        mp3 = folder / f"a{i}.mp3"
        ffmpeg.input(str(wav)).output(str(mp3), acodec="libmp3lame", ac=1).overwrite_output().run(quiet=True)
        made[name] = mp3
    names = list(dict.fromkeys(IMAGES))
    for name, picture in zip(names, make_pictures(folder, len(names)), strict=True):
        if name.endswith(".jpg"):
            picture = make_pictures(folder / "jpeg", 1, ".jpg")[0]
        made[name] = picture
    return made


def github_release(folder: Path, media, records: list[dict] | None = None) -> Path:
    (folder / "dataset").mkdir(parents=True)
    (folder / "dataset" / JSONL).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                    for r in (entries() if records is None else records)))
    for name in AUDIO:
        place(media[name], folder / "mm_data" / "audio" / name)
    for name in set(IMAGES):
        place(media[name], folder / "mm_data" / "image" / name)
    return folder


def hf_release(folder: Path, media, records: list[dict] | None = None) -> Path:
    """``m-a-p/OmniBench``: two ``train`` shards, the files embedded as ``Audio`` / ``Image`` structs."""
    records = entries() if records is None else records
    blob = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    fields = [pa.field(k, pa.int64() if k == "index" else pa.list_(pa.string()) if k == "options" else pa.string())
              for k in entries()[0]] + [pa.field("audio", blob), pa.field("image", blob)]
    rows = [r | {"audio": {"bytes": media[r["audio_path"]].read_bytes(), "path": r["audio_path"]},
                 "image": {"bytes": media[r["image_path"]].read_bytes(), "path": r["image_path"]}} for r in records]
    (folder / "data").mkdir(parents=True)
    for shard, part in enumerate((rows[:5], rows[5:])):
        pq.write_table(pa.Table.from_pylist(part, schema=pa.schema(fields)),
                       folder / "data" / f"train-0000{shard}-of-00002.parquet")
    return folder


def check_items(bench: Path, media, split: str, embedded: bool) -> None:
    items = items_of(bench)
    assert list(items) == [str(i) for i in range(len(AUDIO))]
    for record in entries():
        item = items[str(record["index"])]
        assert item["question"] == record["question"] and item["options"] == record["options"]
        assert item["answer"] == "ABCD"[record["options"].index(record["answer"])] and item["split"] == split
        assert (item["category"], item["task"]) == (record["task type"], record["audio type"])
        assert item["breakdowns"] == {"audio type": AUDIO_TYPES[record["index"] % 3], "task type": record["task type"]}
        expected = {"image": record["image content"]} | ({"audio": record["audio content"]} if record["audio content"]
                                                         else {})
        assert item["text_alternatives"] == expected
        for modality in ("audio", "image"):
            name = record[f"{modality}_path"]
            path = item["media"][modality]
            assert path.startswith("media/embedded/") if embedded else path == f"media/mm_data/{modality}/{name}"
            assert Path(path).suffix == Path(name).suffix
            assert (bench / path).read_bytes() == media[name].read_bytes()
    assert items["3"]["media"]["image"] == items["5"]["media"]["image"]  # one picture, one file


def test_the_github_release(tmp_path, media):
    release = github_release(tmp_path / "OmniBench", media)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "omnibench", str(release), "--out",
                           str(tmp_path / "bench")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert ("wrote 8 items (all: 8) and 15 media files" in done.stdout
            and "a text stand-in for image on 8 of 8 items; a text stand-in for audio on 7 of 8 items" in done.stdout)
    check_items(tmp_path / "bench", media, "all", embedded=False)


def test_the_hugging_face_release(tmp_path, media):
    convert_omnibench(hf_release(tmp_path / "OmniBench", media), tmp_path / "bench")
    check_items(tmp_path / "bench", media, "train", embedded=True)
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["scorer"] == "omnibench"


def skipped_lines(bench: Path) -> list[dict]:
    return [json.loads(t) for t in (bench / "skipped.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("edit, index, item, field, message", [
    (lambda r: r[2].update(answer="Something else."), 2, "line 3 (index 2)", "answer",
     "'Something else.' is not exactly one of the options"),
    (lambda r: r[4].update(options="A, B"), 4, "line 5 (index 4)", "options", "expected a list of options, got str"),
    (lambda r: r[1].update(audio_path="missing.mp3"), 1, "line 2 (index 1)", "audio_path",
     "no media file 'mm_data/audio/missing.mp3'"),
    (lambda r: r[0].pop("index"), 0, "line 1", "index", "missing or empty 'index'"),
])
def test_an_unsound_entry_is_skipped_and_listed(tmp_path, media, edit, index, item, field, message):
    records = entries()
    edit(records)
    release = github_release(tmp_path / "OmniBench", media, records)
    done = convert_omnibench(release, tmp_path / "bench")
    assert list(items_of(tmp_path / "bench")) == [str(i) for i in range(len(AUDIO)) if i != index]
    [line] = skipped_lines(tmp_path / "bench")
    assert line == {"item_id": str(index) if index else None, "file": str(release / "dataset" / JSONL),
                    "entry": item, "field": field, "reason": line["reason"]}
    assert message in line["reason"] and "\n" not in line["reason"]
    assert done.n_items == len(AUDIO) - 1 and len(done.skipped) == 1


def test_a_picture_cut_short_in_a_parquet_cell_is_skipped_and_named(tmp_path, media):
    release = hf_release(tmp_path / "OmniBench", media)
    shard = release / "data" / "train-00001-of-00002.parquet"
    rows = pq.read_table(shard).to_pylist()
    rows[1]["image"]["bytes"] = rows[1]["image"]["bytes"][: len(rows[1]["image"]["bytes"]) // 2]
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(shard)), shard)
    convert_omnibench(release, tmp_path / "bench")
    [line] = skipped_lines(tmp_path / "bench")
    assert (line["file"], line["entry"], line["field"], line["item_id"]) == (str(shard), "row 1 (index 6)", "image",
                                                                             "6")
    assert "does not decode" in line["reason"]
    assert "6" not in items_of(tmp_path / "bench")


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, media):
    records = entries()
    records[6]["audio content"] = "A: the line of item 6."  # every item a transcript and a caption
    convert_omnibench(github_release(tmp_path / "OmniBench", media, records), tmp_path / "bench")
    # the text-alternative setting of the OmniBench paper: each medium replaced by its stand-in, beside normal
    conditions = ["normal", "image_only", "audio_only", "text_only", "random", "no_image", "no_audio", "no_text",
                  "image_as_text", "audio_as_text"]
    rows = run_and_check(tmp_path / "bench", tmp_path, conditions)
    # items 3 and 5 share their picture: neither lends it to the other
    for row in rows.filter(rows["condition"] == "random").iter_rows(named=True):
        if row["item_id"] in ("3", "5"):
            assert json.loads(row["donors"])["image"] not in ("3", "5")
