"""Prediction parts, consolidation and resume bookkeeping."""

from __future__ import annotations

import pyarrow.parquet as pq

from omnieval.core.names import folder_name
from omnieval.core.run_outputs import RunOutputs, consolidate


def _row(iid, prompt="zs", model="m", error=None, choice="A"):
    return {"model": model, "prompt": prompt, "protocol": "dissonance", "split": "s", "item_id": iid.split("|")[0],
            "instance_id": iid, "condition": "C000", "target": "A", "choice": None if error else choice,
            "abstain_label": "E", "confidence": None if error else 0.9, "confidence_method": None if error else "rs",
            "error": error}


def test_parts_are_numbered_atomic_and_resume_skips_only_clean_rows(tmp_path):
    store = RunOutputs(str(tmp_path / "run"), writer="w1")
    store.append_part("org/model", [_row("a|C000"), _row("b|C000", error="media decode failed")])
    store.append_part("org/model", [_row("c|C000", prompt="cot"), _row("a|C000") | {"mode": "open"}])
    files = store.part_files("org/model")
    assert [f.rsplit("/", 1)[1] for f in files] == ["part-000000-w1.parquet", "part-000001-w1.parquet"]
    assert all(folder_name("org/model") in f for f in files)
    assert not list((tmp_path / "run").rglob("*.tmp-*"))
    # keyed with the sample (0: rows of one sample, and parts written before the column, read as 0)
    assert store.finished_ids("org/model") == {("mcq", "zs", "a|C000", 0), ("mcq", "cot", "c|C000", 0),
                                               ("open", "zs", "a|C000", 0)}
    assert pq.read_table(files[0]).num_rows == 2


def test_consolidate_prefers_clean_rows_then_later_parts_and_sorts():
    from omnieval.core.run_outputs import predictions_table

    first = predictions_table([_row("b|C000", error="boom"), _row("a|C000", choice="B")])
    second = predictions_table([_row("b|C000", choice="C"), _row("a|C000", error="late failure")])
    out = consolidate([first, second]).to_pylist()
    assert [(r["instance_id"], r["choice"], r["error"]) for r in out] == [("a|C000", "B", None),
                                                                          ("b|C000", "C", None)]
    only_errors = consolidate([predictions_table([_row("x|C000", error="e1")]),
                               predictions_table([_row("x|C000", error="e2")])]).to_pylist()
    assert [r["error"] for r in only_errors] == ["e2"]


def test_parts_of_an_older_omnieval_get_the_error_kind_column_from_their_messages(tmp_path):
    """Parts written before ``error_kind`` existed (no such column): read and consolidated, each errored row gets
    the kind its message's prefix names (written out here by hand), and rows of a newer part keep the kind they
    were written with."""
    import pyarrow as pa

    from omnieval.core.run_outputs import predictions_table

    store = RunOutputs(str(tmp_path / "run"), writer="w1")
    old = predictions_table([_row("a|C000", error="media decode failed: a.mp4: truncated"),
                             _row("b|C000", error="engine error: RuntimeError: CUDA OOM"),
                             _row("c|C000", error="describe failed: media decode failed: c.wav: no audio"),
                             _row("d|C000", error="hf engine: ValueError: bad input"), _row("e|C000")])
    old = old.drop_columns(["error_kind"])
    folder = tmp_path / "run" / "parts" / folder_name("m")
    folder.mkdir(parents=True)
    pq.write_table(old, folder / "part-000000-w0.parquet")
    store.append_part("m", predictions_table([_row("f|C000", error="engine error: x") | {"error_kind": "other"}]))
    parts = store.read_parts("m")
    assert "error_kind" in parts.column_names
    want = {"a|C000": "media", "b|C000": "engine", "c|C000": "describe", "d|C000": "other", "e|C000": None,
            "f|C000": "other"}
    assert dict(zip(parts["instance_id"].to_pylist(), parts["error_kind"].to_pylist(), strict=True)) == want
    merged = consolidate([old])
    assert merged.schema.field("error_kind").type == pa.string()
    assert merged["error_kind"].to_pylist() == [want[i] for i in merged["instance_id"].to_pylist()]


def test_description_parts_written_before_error_kind_are_read(tmp_path):
    """A describer's parts without the ``error_kind`` column are read (a cast to the new schema would refuse
    them), their failures of kind ``describe``."""
    import pyarrow as pa

    from omnieval.run.cascade import DESCRIPTION_SCHEMA, read_descriptions

    store = RunOutputs(str(tmp_path / "run"), writer="w1")
    old_schema = pa.schema([f for f in DESCRIPTION_SCHEMA if f.name != "error_kind"])
    rows = [{"path": "a.wav", "modality": "audio", "describer": "d", "prompt": "Describe.", "text": "a dog",
             "error": None},
            {"path": "b.wav", "modality": "audio", "describer": "d", "prompt": "Describe.", "text": None,
             "error": "describe failed: media decode failed: b.wav: no audio stream"}]
    folder = tmp_path / "run" / "descriptions" / folder_name("d")
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=old_schema), folder / "part-000000-w0.parquet")
    got = read_descriptions(store, "d")
    assert {p: (r["text"], r["error_kind"]) for p, r in got.items()} == {"a.wav": ("a dog", None),
                                                                         "b.wav": (None, "describe")}
