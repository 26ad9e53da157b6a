"""lmms-eval's MMBench as it ships (``lmms-lab/MMBench_EN``: ``data/dev-00000-of-00001-<hash>.parquet`` and
``data/test-...``, Hugging Face ``Image`` structs, ``'nan'`` strings for empty hints and options, the test split's
answers withheld): every split with answers is converted by default and each answerless one skipped with a note;
``--split`` chooses, and asking for an answerless split is refused naming file and field. The converted dev split
then runs through the simulated engine, its metrics checked against pandas on the predictions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.mcq import convert_mcq

ROOT = Path(__file__).resolve().parents[1]
FEATURES = {"index": {"dtype": "int64", "_type": "Value"}, "image": {"_type": "Image"},
            **{c: {"dtype": "string", "_type": "Value"}
               for c in ("question", "hint", "A", "B", "C", "D", "answer", "category", "source", "l2-category",
                         "comment", "split")}}
COLOURS = ("red", "blue", "green", "yellow")
DEV_ROWS = 8
TEST_ROWS = 5


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> dict[str, bytes]:
    from omnieval.media.synth import still_image

    folder = tmp_path_factory.mktemp("pictures")
    return {c: still_image(folder / f"{c}.jpg", colour=c, size=(32, 24)).read_bytes() for c in COLOURS}


def mmbench_rows(split: str, n: int, pictures: dict[str, bytes], missing_answer) -> pa.Table:
    """MMBench's columns and quirks: 'nan' for an empty hint, C/D and comment; three- and four-option rows."""
    rows = []
    for i in range(n):
        colour = COLOURS[i % 4]
        four = i % 3 != 0
        options = [colour, *[c for c in COLOURS if c != colour]][: 4 if four else 3]
        options = options[i % len(options):] + options[: i % len(options)]  # the answer is not always A
        rows.append({
            "index": (0 if split == "dev" else 1000) + i, "question": "What colour fills the picture?",
            "hint": "nan" if i % 2 else "The picture is one flat colour.",
            "A": options[0], "B": options[1], "C": options[2], "D": options[3] if four else "nan",
            "answer": "ABCD"[options.index(colour)] if split == "dev" else missing_answer,
            "category": ("attribute_recognition", "color_recognition")[i % 2], "source": "synthetic",
            "l2-category": "fine-grained_perception", "comment": "nan", "split": split,
            "image": {"bytes": pictures[colour], "path": f"{i}.jpg"}})
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    fields = [pa.field("index", pa.int64()), *(pa.field(c, pa.string()) for c in FEATURES if c not in
                                                ("index", "image")), pa.field("image", image)]
    meta = {b"huggingface": json.dumps({"info": {"features": FEATURES}}).encode()}
    return pa.Table.from_pylist(rows, schema=pa.schema(fields, metadata=meta))


def write_snapshot(folder: Path, pictures, missing_answer=None) -> Path:
    """``MMBench_EN/data/`` as the Hub holds it: shard names with the upload's hash suffix."""
    data = folder / "MMBench_EN" / "data"
    data.mkdir(parents=True)
    pq.write_table(mmbench_rows("dev", DEV_ROWS, pictures, missing_answer),
                   data / "dev-00000-of-00001-75b6649fb044d38b.parquet")
    pq.write_table(mmbench_rows("test", TEST_ROWS, pictures, missing_answer),
                   data / "test-00000-of-00001-f74a6f1f762e33f2.parquet")
    return folder / "MMBench_EN"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "mcq", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("missing", [None, "nan"])
def test_default_converts_the_splits_with_answers_and_notes_the_rest(tmp_path, pictures, missing):
    snapshot = write_snapshot(tmp_path, pictures, missing)
    done = cli(str(snapshot), "--out", str(tmp_path / "bench"))
    assert done.returncode == 0, done.stderr
    assert f"skipped split 'test' ({TEST_ROWS} rows): none of its rows has an answer in column 'answer'" in \
        done.stderr
    assert f"wrote {DEV_ROWS} items (dev: {DEV_ROWS})" in done.stdout
    items = [json.loads(x) for x in (tmp_path / "bench" / "items.jsonl").read_text().splitlines()]
    source = pq.read_table(snapshot / "data" / "dev-00000-of-00001-75b6649fb044d38b.parquet").to_pandas()
    assert [it["item_id"] for it in items] == [str(i) for i in source["index"]]  # one split: bare ids
    for item, (_, row) in zip(items, source.iterrows(), strict=True):
        hint = row["hint"] if row["hint"] != "nan" else None
        assert item["question"] == (f"{hint}\n{row['question']}" if hint else row["question"])
        assert item["options"] == [row[c] for c in "ABCD" if row[c] != "nan"]
        assert item["answer"] == row["answer"] and item["split"] == "dev" and item["category"] == row["category"]
        assert (tmp_path / "bench" / item["media"]["image"]).read_bytes() == row["image"]["bytes"]
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["splits"] == {"dev": DEV_ROWS} and meta["skipped_splits"] == {"test": TEST_ROWS}


def test_split_flag_chooses_and_refuses_answerless_or_unknown_splits(tmp_path, pictures):
    snapshot = write_snapshot(tmp_path, pictures)
    test_shard = snapshot / "data" / "test-00000-of-00001-f74a6f1f762e33f2.parquet"
    for flags in (["--split", "test"], ["--split", "dev,test"], ["--split", "dev", "--split", "test"]):
        done = cli(str(snapshot), "--out", str(tmp_path / "o"), *flags)
        assert done.returncode == 2 and "Traceback" not in done.stderr, flags
        assert f"file '{test_shard}'" in done.stderr and "field 'answer'" in done.stderr
        assert f"split 'test' has no answers: none of its {TEST_ROWS} rows" in done.stderr
        assert not (tmp_path / "o").exists()
    done = cli(str(snapshot), "--out", str(tmp_path / "o"), "--split", "validation")
    assert done.returncode == 2 and "no split 'validation' in the source" in done.stderr
    assert f"dev ({DEV_ROWS} rows, {DEV_ROWS} with answers), test ({TEST_ROWS} rows, 0 with answers)" in done.stderr
    done = cli(str(snapshot), "--out", str(tmp_path / "dev"), "--split", "dev")
    assert done.returncode == 0 and done.stderr == "" and f"dev: {DEV_ROWS}" in done.stdout
    # a row without an answer inside a split that has answers is still an error naming its row
    table = mmbench_rows("dev", DEV_ROWS, pictures, None).to_pylist()
    table[3]["answer"] = "nan"
    data = tmp_path / "partial"
    data.mkdir()
    pq.write_table(pa.Table.from_pylist(table, schema=mmbench_rows("dev", 1, pictures, None).schema),
                   data / "dev-00000-of-00001.parquet")
    with pytest.raises(InputError, match="no answer") as err:
        convert_mcq(data, tmp_path / "p")
    assert err.value.item == "3 (row 3)" and err.value.field == "answer"
    # VLMEvalKit's MMBench_TEST_EN.tsv has no answer column at all: nothing to score, said so
    (tmp_path / "MMBench_TEST_EN.tsv").write_text("index\tquestion\tA\tB\timage\n0\tWhich?\tx\ty\tabc\n")
    with pytest.raises(InputError, match="no split has answers in column 'answer'") as err:
        convert_mcq(tmp_path / "MMBench_TEST_EN.tsv", tmp_path / "t")
    assert err.value.file == str(tmp_path / "MMBench_TEST_EN.tsv") and err.value.field == "answer"


@pytest.mark.slow
def test_converted_dev_split_through_the_simulated_engine(ray_session, tmp_path, pictures):
    """Counts and metrics of a simulated run on the converted dev split against pandas on its predictions."""
    import pandas as pd
    import polars as pl

    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation
    from omnieval.stats.metrics import metrics_table

    convert_mcq(write_snapshot(tmp_path, pictures), tmp_path / "bench")
    config = parse_run_config({
        "benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "run"), "protocol": "spectrum",
        "decode": {"max_side": 32},
        "models": [{"name": "sim", "engine": "simulated", "options": {"reliance": {"image": 0.7, "text": 0.4},
                                                                      "seed": 2}}]})
    result = run_evaluation(config, progress=False)
    conditions = ["image_only", "normal", "random", "text_only"]
    assert result.n_errors == 0 and result.n_instances == DEV_ROWS * len(conditions)
    pred = pd.read_parquet(result.predictions_path)
    assert sorted(pred["condition"].unique()) == conditions and set(pred["split"]) == {"dev"}
    assert pred.groupby("item_id").size().tolist() == [len(conditions)] * DEV_ROWS
    table = metrics_table(pl.read_parquet(result.predictions_path), resamples=50)
    got = {(r["metric"], r["key"]): r["value"] for r in table.iter_rows(named=True) if r["model"] == "sim"}

    valid = pred[pred["choice"].notna()].copy()
    valid["correct"] = valid["choice"] == valid["target"]
    acc = valid.groupby("condition")["correct"].mean()
    assert got[("accuracy", "normal")] == pytest.approx(acc["normal"])
    assert got[("accuracy", "text_only")] == pytest.approx(acc["text_only"])
    assert got[("intra", "image")] == pytest.approx(acc["image_only"] - acc["random"])
    assert got[("invalid_rate", "")] == pytest.approx(pred["choice"].isna().mean())
    assert 0 < acc["normal"] <= 1 and acc.nunique() > 1  # not degenerate
