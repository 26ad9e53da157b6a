"""The Contra4 release loader: the released file's shape and the paper's description of the fields, media found by
source and id under a media root, and errors that name file, entry and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.contra4 import convert_contra4, load_contra4, parse_answer, read_release
from omnieval.protocols.contrastive import Item

RELEASED = [  # the shape of data/final_data/*.json in the release
    {"id": "similarity_368568", "selection_type": "similarity", "q_type": "mc_2",
     "examples": [{"source": "pointllm", "id": "69865c89", "meta": {}, "url": "https://example.org/a",
                   "caption": "A storyed building"},
                  {"source": "msrvtt_test", "id": "video6747", "caption": "a 16bit game with people in a field",
                   "url": "https://example.org/b", "meta": {"start_time": 1.0, "end_time": 2.0}}],
     "answer": "Scene B", "question": "Which scene involves more physical activity?", "modalities": ["pc", "video"]},
    {"id": "random_524513", "selection_type": "random", "q_type": "mc_4",
     "examples": [{"source": "clotho", "id": "slow crow #1.wav", "url": None, "meta": {},
                   "caption": "A large animal is making a loud growling noise."},
                  {"source": "pointllm", "id": "e73add34", "meta": {}, "caption": "A cubed brown toy"},
                  {"source": "coco_val", "id": 162732, "caption": "People playing a soccer game"},
                  {"source": "audiocaps", "id": 105440, "caption": "Male speech and then sizzling"}],
     "answer": "Scene A", "question": "Which scene is most likely to involve a creature?",
     "modalities": ["audio", "pc", "image", "audio"]},
]
PAPER = [  # the fields as the paper's appendix A (and the README) describe them
    {"id": "p1", "selection_type": "similar", "q_type": "mc_3", "category": "emotion",
     "examples": [{"source": "coco_val", "id": 162732, "caption": "People playing a soccer game"},
                  {"source": "audiocaps", "id": 105440, "caption": "Male speech and then sizzling"},
                  {"source": "msrvtt_test", "id": "video6747", "caption": "a 16bit game"}],
     "modalities": ["image", "audio", "video"], "questions": ["Which scene is the happiest?"], "answers": ["C"]},
    {"id": "p2", "selection_type": "random", "category": "sound",
     "examples": [{"source": "pointllm", "id": "69865c89", "caption": "A storyed building"},
                  {"source": "clotho", "id": "slow crow #1.wav", "caption": "A growl"}],
     "questions": "Which scene is loud?", "gt_answer": "(B)"},  # no modalities: from the sources
]


@pytest.fixture()
def media_root(tmp_path) -> Path:
    root = tmp_path / "media"
    for rel in ("pointllm/69865c89.npy", "pointllm/e73add34.ply", "msrvtt_test/video6747.mp4",
                "clotho/slow crow #1.wav", "coco_val/000000162732.jpg", "audiocaps/105440.flac"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    return root


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_released_shape(tmp_path, media_root):
    items, skipped = load_contra4(write(tmp_path, "test.json", RELEASED), media_root)
    assert skipped == []
    first, second = items
    assert first.item_id == "similarity_368568" and first.split == "test" and first.selection_type == "similar"
    assert first.answer == 1 and first.question == "Which scene involves more physical activity?"
    assert [(i.modality, i.path, i.caption) for i in first.inputs] == [
        ("pointcloud", "pointllm/69865c89.npy", "A storyed building"),
        ("video", "msrvtt_test/video6747.mp4", "a 16bit game with people in a field")]
    assert second.selection_type == "random" and second.answer == 0 and len(second.inputs) == 4
    assert [i.path for i in second.inputs] == ["clotho/slow crow #1.wav", "pointllm/e73add34.ply",
                                               "coco_val/000000162732.jpg", "audiocaps/105440.flac"]
    assert second.inputs[2].source == "coco_val" and second.inputs[2].id == "162732"


def test_paper_shape(tmp_path, media_root):
    items, _ = load_contra4(write(tmp_path, "val.json", PAPER), media_root, split="val")
    p1, p2 = items
    assert p1.question == "Which scene is the happiest?" and p1.answer == 2 and p1.category == "emotion"
    assert p1.selection_type == "similar" and [i.modality for i in p1.inputs] == ["image", "audio", "video"]
    assert p2.answer == 1 and p2.question == "Which scene is loud?" and p2.split == "val"
    assert [i.modality for i in p2.inputs] == ["pointcloud", "audio"]


@pytest.mark.parametrize("text,index", [("Scene A", 0), ("scene b.", 1), ("C", 2), ("(D)", 3), ("Scene  B", 1)])
def test_answer_forms(text, index):
    assert parse_answer(text) == index
    assert parse_answer("the second one") is None


def test_convert_writes_a_self_contained_benchmark(tmp_path, media_root, monkeypatch):
    report = convert_contra4(write(tmp_path, "test.json", RELEASED), media_root, tmp_path / "bench", copy=True)
    assert report.n_items == 2 and "wrote 2 items" in report.summary()
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["protocol"] == "contrastive"
    items = [Item.model_validate_json(x) for x in (tmp_path / "bench" / "items.jsonl").read_text().splitlines()]
    for item in items:
        for inp in item.inputs:
            assert inp.path.startswith("media/") and (tmp_path / "bench" / inp.path).is_file()
    from omnieval.datasets.benchmark import load_benchmark

    bench = load_benchmark(tmp_path / "bench")
    assert [it.item_id for it in bench.items] == ["similarity_368568", "random_524513"]


def test_media_map_in_the_release_layout(tmp_path, media_root):
    (media_root / "coco_val" / "elsewhere.jpg").write_bytes(b"x")
    mapping = {"coco_val": {"key2path": {"162732": "elsewhere.jpg"}}}
    items, _ = load_contra4(write(tmp_path, "t.json", RELEASED[1:]), media_root, media_map=mapping)
    assert items[0].inputs[2].path == "coco_val/elsewhere.jpg"


def bad(entry_update: dict, index: int = 0, base=RELEASED) -> list:
    data = json.loads(json.dumps(base))
    data[index].update(entry_update)
    return data


@pytest.mark.parametrize("update,field,message", [
    ({"answer": "Scene C"}, "answer", "names none of the 2 scenes"),
    ({"answer": "the second"}, "answer", "names none"),
    ({"modalities": ["pc", "smell"]}, "modalities[1]", "unknown modality"),
    ({"modalities": ["pc"]}, "modalities", "one modality per example"),
    ({"q_type": "mc_3"}, "q_type", "does not match"),
    ({"selection_type": "hardest"}, "selection_type", "unknown selection_type"),
    ({"examples": [{"source": "coco_val", "id": 1, "caption": "c"}]}, "examples", "2 to 4"),
    ({"question": ""}, "question", "non-empty"),
])
def test_bad_entries_name_file_entry_and_field(tmp_path, media_root, update, field, message):
    path = write(tmp_path, "bad.json", bad(update))
    with pytest.raises(InputError, match=message) as exc:
        read_release(path)
    assert exc.value.field == field and exc.value.file == str(path)
    assert exc.value.item == "entry 0 (id similarity_368568)"


def test_missing_fields_media_and_duplicates(tmp_path, media_root):
    data = bad({}, 0)
    del data[0]["answer"]
    with pytest.raises(InputError, match="missing 'answer'"):
        read_release(write(tmp_path, "a.json", data))
    data = bad({})
    data[0]["examples"][1]["caption"] = "  "
    with pytest.raises(InputError) as exc:
        read_release(write(tmp_path, "b.json", data))
    assert exc.value.field == "examples[1].caption"
    with pytest.raises(InputError, match="duplicate id"):
        read_release(write(tmp_path, "c.json", [RELEASED[0], RELEASED[0]]))
    data = bad({})
    data[0]["examples"][1]["id"] = "video0000"
    path = write(tmp_path, "d.json", data)
    with pytest.raises(InputError, match="no video file for source 'msrvtt_test' id 'video0000'") as exc:
        load_contra4(path, media_root)
    assert exc.value.field == "examples[1].id" and exc.value.item.startswith("entry 0")
    assert exc.value.file == str(path)
    items, skipped = load_contra4(path, media_root, on_missing="skip")
    assert [i.item_id for i in items] == ["random_524513"] and skipped[0]["id"] == "similarity_368568"
    # an id cannot reach outside the media root
    data = bad({})
    data[0]["examples"][1]["id"] = "../../outside"
    (media_root.parent / "outside.mp4").write_bytes(b"x")
    with pytest.raises(InputError, match="no video file"):
        load_contra4(write(tmp_path, "e.json", data), media_root)
    (tmp_path / "f.json").write_text("{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        read_release(tmp_path / "f.json")
