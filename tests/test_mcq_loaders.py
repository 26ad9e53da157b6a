"""MCQ loaders: small files written here in each real format (Parquet with Hugging Face ``Image`` structs,
``save_to_disk`` folders, VLMEvalKit TSV with base64 images and row references) become spectrum benchmark folders
that load, expand and keep every image byte for byte; errors name file, row and column."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.mcq import Columns, convert_mcq
from omnieval.protocols import spectrum


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, bytes]:
    """Three real images made by ffmpeg: two PNGs and a JPEG."""
    from omnieval.media.synth import still_image

    folder = tmp_path_factory.mktemp("img")
    out = {}
    for name, colour in (("red.png", "red"), ("blue.png", "blue"), ("green.jpg", "green")):
        out[name] = still_image(folder / name, colour=colour, size=(32, 24)).read_bytes()
    return out


def read_items(folder: Path) -> list[spectrum.Item]:
    lines = (folder / "items.jsonl").read_text().splitlines()
    return [spectrum.Item.model_validate_json(line) for line in lines]


def image_bytes(folder: Path, item: spectrum.Item) -> bytes:
    return (folder / item.media["image"]).read_bytes()


# ---------------------------------------------------------------------------------------------------------------
# Parquet (lmms-eval / Hugging Face snapshot layout)
# ---------------------------------------------------------------------------------------------------------------

def mmbench_table(images) -> pa.Table:
    """MMBench-like columns: index, question, hint, A..D (D empty where there are three options), answer,
    category, image as the Hugging Face Image struct {bytes, path}."""
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    return pa.table({
        "index": pa.array([10, 11, 12], pa.int64()),
        "question": ["What colour is this?", "Is it warm?", "Which shape?"],
        "hint": [None, "Look closely.", ""],
        "A": ["red", "yes", "square"], "B": ["blue", "no", "circle"], "C": ["green", None, "triangle"],
        "D": ["pink", None, None],
        "answer": ["A", "B", "C"],
        "category": ["colour", "temperature", "shape"],
        "image": pa.array([{"bytes": images["red.png"], "path": "a.png"},
                           {"bytes": images["green.jpg"], "path": "b.jpg"},
                           {"bytes": images["red.png"], "path": "a.png"}], image_type),
    })


def test_parquet_shards_become_a_spectrum_benchmark(tmp_path, images, monkeypatch):
    data = tmp_path / "snapshot" / "data"
    data.mkdir(parents=True)
    pq.write_table(mmbench_table(images), data / "dev-00000-of-00001.parquet")
    report = convert_mcq(tmp_path / "snapshot", tmp_path / "bench", name="mmbench-mini")
    assert report.splits == {"dev": 3} and report.n_media == 2  # the red image is stored once
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["name"] == "mmbench-mini" and meta["protocol"] == "spectrum"
    items = read_items(tmp_path / "bench")
    assert [it.item_id for it in items] == ["10", "11", "12"]
    assert [it.options for it in items] == [["red", "blue", "green", "pink"], ["yes", "no"],
                                             ["square", "circle", "triangle"]]
    assert [it.answer for it in items] == ["A", "B", "C"]
    assert items[1].question == "Look closely.\nIs it warm?" and items[2].question == "Which shape?"
    assert [it.category for it in items] == ["colour", "temperature", "shape"]
    assert image_bytes(tmp_path / "bench", items[0]) == images["red.png"]
    assert image_bytes(tmp_path / "bench", items[1]) == images["green.jpg"]
    assert items[1].media["image"].endswith(".jpg") and items[0].media["image"].startswith("media/")
    assert all(it.split == "dev" and it.benchmark == "mmbench-mini" for it in items)
    # the folder loads as a benchmark (with spectrum registered) and every image probes as an image
    from omnieval.datasets.benchmark import check_media, load_benchmark

    bench = load_benchmark(tmp_path / "bench")
    assert check_media(bench, "probe") == 2
    # two of its three items show the red image: no shuffle can keep both away from it, and the run says so
    with pytest.raises(InputError, match=r"2 of the 3 items .* show the same image content"):
        spectrum.expand_all(bench.items, bench, seed=0)
    bench.items.append(bench.items[1].model_copy(update={"item_id": "13"}))  # another green one: now it can
    assert len(spectrum.expand_all(bench.items, bench, seed=0)) == 4 * 4


def test_list_options_index_answers_and_paths(tmp_path, images):
    """ScienceQA / AI2D style: a list column of choices, 0-based integer or digit answers, an image path."""
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "b.png").write_bytes(images["blue.png"])
    table = pa.table({
        "question_id": ["s1", "s2", "s3", "s4"],
        "question": ["q1", "q2", "q3", "q4"],
        "choices": [["x", "y"], ["u", "v", "w"], ["1", "2", "3"], ["ten", "eleven"]],
        "answer": ["1", "0", "2", "eleven"],  # index, index, ambiguous (see below), option text
        "image": [{"bytes": None, "path": "imgs/b.png"}, {"bytes": images["red.png"], "path": None},
                  {"bytes": images["red.png"], "path": None}, {"bytes": images["red.png"], "path": None}],
    })
    pq.write_table(table, tmp_path / "sqa.parquet")
    with pytest.raises(InputError, match="ambiguous") as err:  # '2' is option C by index, option B by text
        convert_mcq(tmp_path / "sqa.parquet", tmp_path / "out")
    assert err.value.item == "s3 (row 2)" and err.value.field == "answer"
    assert err.value.file.endswith("sqa.parquet")
    report = convert_mcq(tmp_path / "sqa.parquet", tmp_path / "out", answer_format="index",
                         columns=Columns(answer="answer"), limit=3)
    items = read_items(report.out)
    assert [it.answer for it in items] == ["B", "A", "C"]
    assert image_bytes(report.out, items[0]) == images["blue.png"]
    with pytest.raises(InputError, match="not exactly one of the options") as err:
        convert_mcq(tmp_path / "sqa.parquet", tmp_path / "out2", answer_format="text")
    assert err.value.item == "s1 (row 0)"
    assert not (tmp_path / "out2").exists()  # nothing half-written


def test_answer_formats(tmp_path, images):
    def one(answer, options=("red", "blue", "green"), fmt="auto"):
        table = pa.table({"question": ["q"], "options": [list(options)], "answer": [answer],
                          "image": [images["red.png"]]})
        path = tmp_path / "one.parquet"
        pq.write_table(table, path)
        return read_items(convert_mcq(path, tmp_path / "o", answer_format=fmt, overwrite=True).out)[0].answer

    assert one("C") == "C"
    assert one("blue") == "B"
    assert one("2") == "C"
    assert one("1", fmt="index") == "B"
    assert one("green", fmt="text") == "C"
    for bad, fmt, msg in [("D", "auto", "has 3 options"), ("7", "auto", "outside"), ("purple", "auto", "neither"),
                          ("blue", "label", "not one of the labels"), ("B", "text", "not exactly one")]:
        with pytest.raises(InputError, match=msg) as err:
            one(bad, fmt=fmt)
        assert err.value.field == "answer" and err.value.item == "0 (row 0)"


def test_errors_name_file_row_and_column(tmp_path, images):
    base = {"index": [1, 2], "question": ["q1", "q2"], "A": ["a", "a"], "B": ["b", "b"], "C": [None, "c"],
            "answer": ["A", "B"], "image": [images["red.png"], images["blue.png"]]}

    def convert(**changes):
        path = tmp_path / "t.parquet"
        pq.write_table(pa.table({**base, **changes}), path)
        return convert_mcq(path, tmp_path / "o", overwrite=True)

    convert()
    cases = [
        ({"B": [None, "b"], "C": ["c", "c"]}, "empty option before", "B", "1 (row 0)"),
        ({"B": [None, "b"]}, "1 options", "A..", "1 (row 0)"),
        ({"image": [images["red.png"], b"not an image"]}, "not PNG", "image", "2 (row 1)"),
        ({"image": [images["red.png"], None]}, "no image", "image", "2 (row 1)"),
        ({"question": ["q1", " "]}, "empty question", "question", "2 (row 1)"),
        ({"index": [1, 1]}, "duplicate item id", "index", "1 (row 1)"),
        ({"answer": ["A", None]}, "no answer", "answer", "2 (row 1)"),
        ({"image": [images["red.png"], "bm90IGFuIGltYWdl" * 8]}, "not PNG", "image", "2 (row 1)"),
    ]
    for change, msg, column, where in cases:
        with pytest.raises(InputError, match=msg) as err:
            convert(**change)
        assert err.value.field == column and err.value.item == where and err.value.file.endswith("t.parquet")
    pq.write_table(pa.table({**base, "image": [images["red.png"], None]}), tmp_path / "t.parquet")
    report = convert_mcq(tmp_path / "t.parquet", tmp_path / "o", overwrite=True, skip_missing_image=True)
    assert report.n_items == 1 and report.skipped == ["2 (row 1)"]
    with pytest.raises(InputError, match="not empty"):
        convert_mcq(tmp_path / "t.parquet", tmp_path / "o", skip_missing_image=True)


# ---------------------------------------------------------------------------------------------------------------
# save_to_disk folders
# ---------------------------------------------------------------------------------------------------------------

def write_save_to_disk(folder: Path, table: pa.Table, features: dict, split: str | None) -> None:
    """The layout ``datasets.Dataset.save_to_disk`` writes: an Arrow *stream* file, state.json naming it,
    dataset_info.json with the features."""
    folder.mkdir(parents=True)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=2)
    (folder / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_fingerprint": "0", "_format_columns": None,
        "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": split}))
    (folder / "dataset_info.json").write_text(json.dumps({"features": features}))


def test_save_to_disk_dataset_dict_with_classlabel_answers(tmp_path, images):
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    features = {"id": {"dtype": "string", "_type": "Value"}, "question": {"dtype": "string", "_type": "Value"},
                "options": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
                "answer": {"names": ["B", "C", "A"], "_type": "ClassLabel"}, "image": {"_type": "Image"}}
    for split, colours in (("validation", ("red.png", "blue.png", "red.png")), ("test", ("green.jpg",) * 3)):
        table = pa.table({
            "id": ["a", "b", "c"], "question": ["q1", "q2", "q3"],
            "options": [["x", "y", "z"]] * 3, "answer": pa.array([2, 0, 1], pa.int64()),
            "image": pa.array([{"bytes": images[c], "path": None} for c in colours], image_type)})
        write_save_to_disk(tmp_path / "ds" / split, table, features, split)
    (tmp_path / "ds" / "dataset_dict.json").write_text(json.dumps({"splits": ["validation", "test"]}))
    report = convert_mcq(tmp_path / "ds", tmp_path / "bench")
    assert report.splits == {"validation": 3, "test": 3} and report.n_media == 3
    items = read_items(tmp_path / "bench")
    assert [it.item_id for it in items] == ["validation/a", "validation/b", "validation/c", "test/a", "test/b",
                                             "test/c"]
    assert [it.answer for it in items] == ["A", "B", "C"] * 2  # ClassLabel ids 2, 0, 1 through their names
    assert image_bytes(tmp_path / "bench", items[1]) == images["blue.png"]


def test_real_datasets_library_output(tmp_path, images):
    """The same through the ``datasets`` package itself, where installed: ``save_to_disk`` and ``to_parquet``."""
    datasets = pytest.importorskip("datasets")
    from datasets.table import InMemoryTable

    feats = datasets.Features({"question": datasets.Value("string"),
                               "choices": datasets.Sequence(datasets.Value("string")),
                               "answer": datasets.ClassLabel(names=["y", "w", "x"]),
                               "image": datasets.Image(), "category": datasets.Value("string")})
    table = pa.table({  # already in the Image feature's storage form, so no image library is needed to encode
        "question": ["q1", "q2"], "choices": [["x", "y", "z"], ["u", "v", "w"]], "answer": pa.array([2, 1], pa.int64()),
        "image": [{"bytes": images["red.png"], "path": None}, {"bytes": images["green.jpg"], "path": None}],
        "category": ["c1", "c2"]}).cast(feats.arrow_schema)
    ds = datasets.Dataset(InMemoryTable(table), info=datasets.DatasetInfo(features=feats),
                          split=datasets.NamedSplit("test"))
    ds.save_to_disk(str(tmp_path / "disk"))
    ds.to_parquet(str(tmp_path / "test-00000-of-00001.parquet"))
    for source in (tmp_path / "disk", tmp_path / "test-00000-of-00001.parquet"):
        report = convert_mcq(source, tmp_path / "bench", overwrite=True)
        items = read_items(report.out)
        # class 1 = "w" (option C of row 2), class 2 = "x" (option A of row 1): names, not indices
        assert [it.answer for it in items] == ["A", "C"], source
        assert [it.split for it in items] == ["test", "test"]
        assert image_bytes(report.out, items[1]) == images["green.jpg"]
        assert [it.category for it in items] == ["c1", "c2"]


# ---------------------------------------------------------------------------------------------------------------
# VLMEvalKit TSV
# ---------------------------------------------------------------------------------------------------------------

def write_tsv(path: Path, rows: list[dict]) -> None:
    """As pandas ``to_csv(sep='\\t')`` writes VLMEvalKit's files: minimal quoting, empty cells for NaN."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        writer.writeheader()
        writer.writerows(rows)


def test_vlmevalkit_tsv_with_base64_images_and_row_references(tmp_path, images):
    b64 = {k: base64.b64encode(v).decode() for k, v in images.items()}
    rows = [
        {"index": 0, "question": "Colour?", "hint": "", "A": "red", "B": "blue", "C": "green", "D": "",
         "answer": "A", "category": "colour", "image": b64["red.png"]},
        {"index": 1, "question": 'Say "warm"\tor cold?', "hint": "Two lines\nof hint", "A": "warm", "B": "cold",
         "C": "", "D": "", "answer": "B", "category": "temp", "image": "0"},  # shares row 0's image
        {"index": 2, "question": "Shape?", "hint": "", "A": "a", "B": "b", "C": "c", "D": "d", "answer": "D",
         "category": "shape", "image": b64["green.jpg"]},
    ]
    write_tsv(tmp_path / "MMBench_DEV_EN.tsv", rows)
    report = convert_mcq(tmp_path / "MMBench_DEV_EN.tsv", tmp_path / "bench")
    assert report.n_media == 2 and report.splits == {"all": 3}
    items = read_items(tmp_path / "bench")
    assert [it.item_id for it in items] == ["0", "1", "2"]
    assert items[1].question == 'Two lines\nof hint\nSay "warm"\tor cold?'
    assert [len(it.options) for it in items] == [3, 2, 4] and [it.answer for it in items] == ["A", "B", "D"]
    assert items[1].media == items[0].media and image_bytes(tmp_path / "bench", items[0]) == images["red.png"]
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["name"] == "MMBench_DEV_EN"
    rows[1]["image"] = "7"
    write_tsv(tmp_path / "bad.tsv", rows)
    with pytest.raises(InputError, match="row index '7'") as err:
        convert_mcq(tmp_path / "bad.tsv", tmp_path / "bad")
    assert err.value.item == "1 (row 1)" and err.value.field == "image" and err.value.file.endswith("bad.tsv")
    rows[1]["image"] = str([b64["red.png"], b64["blue.png"]])
    write_tsv(tmp_path / "multi.tsv", rows)
    with pytest.raises(InputError, match="multi-image"):
        convert_mcq(tmp_path / "multi.tsv", tmp_path / "multi")


def test_tsv_with_an_image_path_column(tmp_path, images):
    """A TSV whose ``image_path`` column names image files relative to the TSV's folder (as lmms-eval users export
    local copies): each file is read and written once by content; a path that does not exist is an error naming
    the file, row and column, and the folder paths are resolved against."""
    (tmp_path / "src" / "imgs").mkdir(parents=True)
    for name in ("red.png", "green.jpg"):
        (tmp_path / "src" / "imgs" / name).write_bytes(images[name])
    rows = [{"index": i, "question": f"Colour {i}?", "A": "red", "B": "green", "answer": answer,
             "category": "colour", "image_path": path}
            for i, (answer, path) in enumerate([("A", "imgs/red.png"), ("B", "imgs/green.jpg"),
                                                ("A", "imgs/red.png")])]
    write_tsv(tmp_path / "src" / "local.tsv", rows)
    report = convert_mcq(tmp_path / "src" / "local.tsv", tmp_path / "bench")
    assert report.n_media == 2 and report.splits == {"all": 3}
    items = read_items(tmp_path / "bench")
    assert [it.answer for it in items] == ["A", "B", "A"] and items[2].media == items[0].media
    assert image_bytes(tmp_path / "bench", items[0]) == images["red.png"]
    assert image_bytes(tmp_path / "bench", items[1]) == images["green.jpg"]
    assert items[1].media["image"].endswith(".jpg")
    rows[1]["image_path"] = "imgs/missing.png"
    write_tsv(tmp_path / "src" / "missing.tsv", rows)
    with pytest.raises(InputError, match="nor is it an existing file") as err:
        convert_mcq(tmp_path / "src" / "missing.tsv", tmp_path / "bad")
    assert err.value.item == "1 (row 1)" and err.value.field == "image_path"
    assert err.value.file.endswith("missing.tsv") and str(tmp_path / "src") in str(err.value)


def test_cli_maps_renamed_columns_and_refuses_a_bad_column_flag(tmp_path, images, capsys):
    """``omnieval datasets mcq`` with ``--column ROLE=NAME`` for a source whose question and answer columns have
    other names, and ``--limit``; a ``--column`` without ``=`` or with an unknown role is a usage error (exit 2)."""
    from omnieval.cli import main

    b64 = base64.b64encode(images["red.png"]).decode()
    rows = [{"qid": i, "prompt": f"Question {i}?", "A": "x", "B": "y", "gold": gold, "image": b64}
            for i, gold in enumerate(["B", "A", "B"])]
    write_tsv(tmp_path / "renamed.tsv", rows)
    assert main(["datasets", "mcq", str(tmp_path / "renamed.tsv"), "--out", str(tmp_path / "bench"),
                 "--column", "question=prompt", "--column", "answer=gold", "--column", "id=qid",
                 "--limit", "2"]) == 0
    assert "wrote 2 items (all: 2) and 1 images" in capsys.readouterr().out
    items = read_items(tmp_path / "bench")
    assert [(it.item_id, it.question, it.answer) for it in items] == [("0", "Question 0?", "B"),
                                                                      ("1", "Question 1?", "A")]
    for bad, message in (("question", "expected ROLE=NAME"), ("prompt=question", "unknown column role 'prompt'")):
        with pytest.raises(SystemExit) as info:
            main(["datasets", "mcq", str(tmp_path / "renamed.tsv"), "--out", str(tmp_path / "b2"), "--column", bad])
        assert info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "b2").exists()
