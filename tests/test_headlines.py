"""The headline tables of ``omnieval metrics``: one cell per (model, prompt style) metric row, never a merge."""

from __future__ import annotations

import polars as pl
import pytest

from omnieval.stats.headlines import headline_tables
from omnieval.stats.key_parts import key_columns

COLUMNS = ["protocol", "model", "prompt", "split", "metric", "key", "value", "ci_low", "ci_high", "n", "n_items"]


def _table(rows: list[tuple], parts=lambda key: {"leaf": key}) -> pl.DataFrame:
    """A metrics table of ``rows``, each row's key parts ``parts(key)`` (the other parts empty)."""
    table = pl.DataFrame(rows, orient="row", schema=COLUMNS)
    named = [parts(key) for key in table["key"].to_list()]
    return table.with_columns(pl.Series(p, [n.get(p, "") for n in named], dtype=pl.Utf8) for p in key_columns())


def test_two_prompt_styles_are_two_rows_of_every_model():
    # a distinct value per model x prompt x key, so a cell shows which row it came from
    values = {("m1", "zs"): 0.1, ("m1", "cot"): 0.2, ("m2", "zs"): 0.3, ("m2", "cot"): 0.4}
    rows = [("contrastive", m, p, "all", "accuracy", key, v + k / 100, 0.0, 1.0, 10, 10)
            for (m, p), v in values.items() for k, key in enumerate(["all", "n=2"])]
    [(title, frame)] = headline_tables(_table(rows, lambda key: {"n_inputs": "2"} if key == "n=2" else {}))
    assert "contrastive" in title
    assert set(frame.columns) == {"metric", "split", "prompt", "m1", "m2"}
    got = {(r["metric"], r["prompt"]): (r["m1"], r["m2"]) for r in frame.iter_rows(named=True)}
    assert got == {("accuracy all", "zs"): ("0.1 [0.0, 1.0]", "0.3 [0.0, 1.0]"),
                   ("accuracy all", "cot"): ("0.2 [0.0, 1.0]", "0.4 [0.0, 1.0]"),
                   ("accuracy n=2", "zs"): ("0.11 [0.0, 1.0]", "0.31 [0.0, 1.0]"),
                   ("accuracy n=2", "cot"): ("0.21 [0.0, 1.0]", "0.41 [0.0, 1.0]")}


def test_shapley_rows_are_per_model_and_prompt():
    rows = [("dissonance", m, p, "real", "shapley", key, v, v, v, 8, 8)
            for m, p, v in [("m1", "zs", 0.1), ("m1", "cot", 0.2)] for key in ("video", "audio", "text")]
    shapley = dict(headline_tables(_table(rows)))
    frame = next(f for t, f in shapley.items() if "Shapley" in t)
    assert frame.select("model", "prompt", "video").rows() == [("m1", "cot", "0.2 [0.2, 0.2]"),
                                                                ("m1", "zs", "0.1 [0.1, 0.1]")]


def test_two_metric_rows_for_one_cell_are_refused_with_the_cell_named():
    row = ("crossmodal", "m1", "zs", "all", "disparity", "", 0.5, 0.4, 0.6, 10, 10)
    with pytest.raises(ValueError, match="two metric rows for one cell.*'disparity'"):
        headline_tables(_table([row, row], lambda key: {}))
