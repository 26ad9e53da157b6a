"""Prediction parts, consolidation and resume bookkeeping."""

from __future__ import annotations

import pyarrow.parquet as pq

from omnieval.core.names import folder_name
from omnieval.core.store import RunStore, consolidate


def _row(iid, prompt="zs", model="m", error=None, choice="A"):
    return {"model": model, "prompt": prompt, "protocol": "dissonance", "split": "s", "item_id": iid.split("|")[0],
            "instance_id": iid, "condition": "C000", "target": "A", "choice": None if error else choice,
            "abstain_label": "E", "confidence": None if error else 0.9, "confidence_method": None if error else "rs",
            "error": error}


def test_parts_are_numbered_atomic_and_resume_skips_only_clean_rows(tmp_path):
    store = RunStore(str(tmp_path / "run"), writer="w1")
    store.append_part("org/model", [_row("a|C000"), _row("b|C000", error="media decode failed")])
    store.append_part("org/model", [_row("c|C000", prompt="cot"), _row("a|C000") | {"mode": "open"}])
    files = store.part_files("org/model")
    assert [f.rsplit("/", 1)[1] for f in files] == ["part-000000-w1.parquet", "part-000001-w1.parquet"]
    assert all(folder_name("org/model") in f for f in files)
    assert not list((tmp_path / "run").rglob("*.tmp-*"))
    assert store.finished_ids("org/model") == {("mcq", "zs", "a|C000"), ("mcq", "cot", "c|C000"),
                                               ("open", "zs", "a|C000")}
    assert pq.read_table(files[0]).num_rows == 2


def test_consolidate_prefers_clean_rows_then_later_parts_and_sorts():
    from omnieval.core.store import predictions_table

    first = predictions_table([_row("b|C000", error="boom"), _row("a|C000", choice="B")])
    second = predictions_table([_row("b|C000", choice="C"), _row("a|C000", error="late failure")])
    out = consolidate([first, second]).to_pylist()
    assert [(r["instance_id"], r["choice"], r["error"]) for r in out] == [("a|C000", "B", None),
                                                                          ("b|C000", "C", None)]
    only_errors = consolidate([predictions_table([_row("x|C000", error="e1")]),
                               predictions_table([_row("x|C000", error="e2")])]).to_pylist()
    assert [r["error"] for r in only_errors] == ["e2"]
