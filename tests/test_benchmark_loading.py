"""Bad benchmark input fails before any model work with an error naming file, item and field."""

from __future__ import annotations

import json
import shutil

import pytest

from omnieval.datasets.benchmark import check_media, load_benchmark
from omnieval.datasets.synthetic import make_dissonance_benchmark
from omnieval.schema import InputError


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


def test_item_missing_a_field(bench):
    item = _edit_first_item(bench, lambda r: r.pop("question"))
    msg = _error(lambda: load_benchmark(bench))
    assert "items.jsonl" in msg and repr(item) in msg and "field 'question'" in msg


def test_media_path_leaving_the_benchmark(bench):
    item = _edit_first_item(bench, lambda r: r["media"].__setitem__("video", "../../etc/passwd"))
    msg = _error(lambda: load_benchmark(bench))
    assert "outside the benchmark folder" in msg and repr(item) in msg and "media.video" in msg


def test_missing_media_file(bench):
    victim = next((bench / "media").rglob("audio.wav"))
    victim.unlink()
    msg = _error(lambda: check_media(load_benchmark(bench), "exists"))
    assert "does not exist" in msg and "media.audio" in msg and "item '" in msg


def test_corrupt_video_is_caught_by_the_probe(bench):
    victim = next((bench / "media").rglob("video.mp4"))
    victim.write_bytes(b"\x00" * 1000)
    msg = _error(lambda: check_media(load_benchmark(bench), "probe"))
    assert "not a readable video" in msg and "media.video" in msg and "item '" in msg


def test_invalid_json_line_and_duplicate_ids(bench):
    path = bench / "items.jsonl"
    good = path.read_text()
    path.write_text(good + "{not json\n")
    assert "line 3 is not valid JSON" in _error(lambda: load_benchmark(bench))
    first = good.splitlines()[0]
    path.write_text(good + first + "\n")
    msg = _error(lambda: load_benchmark(bench))
    assert "duplicate item_id" in msg and "field 'item_id'" in msg
