"""Bad benchmark input fails before any model work with an error naming file, item and field."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.benchmark import check_media, load_benchmark
from omnieval.datasets.synthetic import make_dissonance_benchmark


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return make_dissonance_benchmark(tmp_path_factory.mktemp("b") / "bench", n_anchors=2, n_questions=1,
                                     splits=("real",))


@pytest.fixture
def bench(pristine, tmp_path):
    return shutil.copytree(pristine, tmp_path / "bench")


def _edit_first_item(bench, fn):
    lines = (bench / "items.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    fn(record)
    lines[0] = json.dumps(record)
    (bench / "items.jsonl").write_text("\n".join(lines) + "\n")
    return record["item_id"]


def _error(fn) -> str:
    with pytest.raises(InputError) as err:
        fn()
    return str(err.value)


def _names(msg: str, file: str, item: str, field: str) -> bool:
    return file in msg and f"item {item!r}" in msg and f"field {field!r}" in msg


@pytest.mark.parametrize("edit, field", [
    (lambda r: r.pop("question"), "question"),
    (lambda r: r.__setitem__("options", "not a list"), "options"),
    (lambda r: r["media"].__setitem__("audio", 7), "media.audio"),
    (lambda r: r.__setitem__("qestion", "typo"), "qestion"),
    (lambda r: r.__setitem__("anchor", "Nobody"), "anchor"),
])
def test_bad_item_names_file_item_and_field(bench, edit, field):
    item = _edit_first_item(bench, edit)
    assert _names(_error(lambda: load_benchmark(bench)), "items.jsonl", item, field)


@pytest.mark.parametrize("text", ["text/clip_01.txt", "EXISTING"])
def test_a_dissonance_text_given_as_a_file_path_is_refused(bench, text):
    """``media.text`` is shown to the model as written: a path would be read out as the passage."""
    (bench / "text").mkdir()
    (bench / "text" / "passage").write_text("The dog barks twice.")
    value = "text/passage" if text == "EXISTING" else text
    item = _edit_first_item(bench, lambda r: r["media"].__setitem__("text", value))
    msg = _error(lambda: load_benchmark(bench))
    assert _names(msg, "items.jsonl", item, "media.text") and "looks like a file path" in msg


def test_media_path_leaving_the_benchmark(bench):
    item = _edit_first_item(bench, lambda r: r["media"].__setitem__("video", "../../etc/passwd"))
    msg = _error(lambda: load_benchmark(bench))
    assert "outside the benchmark folder" in msg and _names(msg, "items.jsonl", item, "media.video")


def test_missing_media_file(bench):
    first = json.loads((bench / "items.jsonl").read_text().splitlines()[0])
    (bench / first["media"]["audio"]).unlink()
    msg = _error(lambda: check_media(load_benchmark(bench), "exists"))
    assert "does not exist" in msg and _names(msg, "items.jsonl", first["item_id"], "media.audio")


def test_corrupt_video_is_caught_by_the_probe(bench):
    first = json.loads((bench / "items.jsonl").read_text().splitlines()[0])
    (bench / first["media"]["video"]).write_bytes(b"\x00" * 1000)
    loaded = load_benchmark(bench)
    assert check_media(loaded, "exists") == 4  # exists: no file is opened
    msg = _error(lambda: check_media(loaded, "probe"))
    assert "not a readable video" in msg and _names(msg, "items.jsonl", first["item_id"], "media.video")


def test_invalid_json_line_and_duplicate_ids(bench):
    path = bench / "items.jsonl"
    good = path.read_text()
    path.write_text(good + "{not json\n")
    msg = _error(lambda: load_benchmark(bench))
    assert "line 3 is not valid JSON" in msg and "items.jsonl" in msg
    first = good.splitlines()[0]
    path.write_text(good + first + "\n")
    msg = _error(lambda: load_benchmark(bench))
    assert "duplicate item_id" in msg and _names(msg, "items.jsonl", json.loads(first)["item_id"], "item_id")


def test_items_parquet_loads_like_jsonl(bench):
    """Arrow turns ``answer_key`` dicts into structs holding every row's keys (None where absent): still loads."""
    jsonl = bench / "items.jsonl"
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(records), bench / "items.parquet")
    expected = load_benchmark(bench).items
    jsonl.unlink()
    loaded = load_benchmark(bench)
    assert loaded.items == expected and loaded.items_file.endswith("items.parquet")
    records[1]["options"] = 3
    pq.write_table(pa.Table.from_pylist(records[1:]), bench / "items.parquet")
    assert _names(_error(lambda: load_benchmark(bench)), "items.parquet", records[1]["item_id"], "options")


def test_two_anchors_with_the_same_video_content_are_refused(bench):
    """A corrupted video shows another anchor's: a copy of the item's own video under another name would hand the
    item its own video in a condition that claims to have replaced it."""
    anchors = [json.loads(line) for line in (bench / "anchors.jsonl").read_text().splitlines()]
    first = anchors[0]
    other = next(a for a in anchors if a["split"] == first["split"] and a["anchor"] != first["anchor"])
    (bench / other["media"]["video"]).write_bytes((bench / first["media"]["video"]).read_bytes())
    msg = _error(lambda: load_benchmark(bench))
    assert "field 'media.video'" in msg and "has the same content as anchor" in msg


@pytest.mark.parametrize("scorer", ["mmua", 3])
def test_benchmark_json_names_a_known_scorer_or_none(bench, scorer):
    """``scorer`` is optional; a name no scorer is registered under is refused, naming the known ones."""
    assert load_benchmark(bench).scorer is None
    meta = json.loads((bench / "benchmark.json").read_text())
    (bench / "benchmark.json").write_text(json.dumps({**meta, "scorer": "mmau"}))
    assert load_benchmark(bench).scorer == "mmau"
    (bench / "benchmark.json").write_text(json.dumps({**meta, "scorer": scorer}))
    msg = _error(lambda: load_benchmark(bench))
    assert (f"unknown scorer {scorer!r}; known scorers: av-odyssey, daily-omni, jointavbench, mmar, mmau, mmau-pro, "
            "mmsu, omnibench, omnivideobench, robust, video-holmes, videomme, videomme-v2, voicebench, "
            "worldsense") in msg
    assert str(bench / "benchmark.json") in msg and "field 'scorer'" in msg


def test_a_benchmark_without_a_protocol_says_how_its_items_were_read(bench, capsys):
    (bench / "benchmark.json").unlink()
    assert load_benchmark(bench).protocol == "dissonance"
    err = capsys.readouterr().err
    assert f"{bench}: no protocol named (benchmark.json), so its items are read as dissonance items" in err
