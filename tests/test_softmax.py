"""The restricted softmax (``omnieval.kernels.softmax``) against ``scipy.special.softmax``, its all-invalid case as its
docstring says (every probability NaN), and both callers: an engine scoring from logits (an errored answer) and
the metrics reader filling a missing confidence (left null)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.special import softmax

from omnieval.engines.base import result_from_option_logprobs
from omnieval.kernels.softmax import restricted_softmax
from omnieval.stats.read import read_predictions


def test_matches_scipy_and_gives_labels_without_a_logprob_zero():
    rng = np.random.default_rng(2)
    for row in rng.normal(-3, 2, size=(20, 5)):
        assert restricted_softmax(row.tolist()) == pytest.approx(softmax(row).tolist(), rel=1e-12)
    row = [-1.5, None, float("nan"), -0.25, float("-inf"), float("inf")]
    got = restricted_softmax(row)
    assert got[1] == got[2] == got[4] == got[5] == 0.0
    assert [got[0], got[3]] == pytest.approx(softmax([-1.5, -0.25]).tolist(), rel=1e-12)


@pytest.mark.parametrize("row", [[None, None], [float("-inf")] * 3, [float("nan"), float("inf")]])
def test_no_finite_logprob_has_no_distribution(row):
    got = restricted_softmax(row)
    assert len(got) == len(row) and all(math.isnan(p) for p in got)
    assert restricted_softmax([]) == []


def test_an_engine_with_no_finite_label_logprob_records_an_error_not_a_confidence():
    res = result_from_option_logprobs(["A", "B", "C"], [float("-inf"), float("nan"), float("-inf")])
    assert res.choice is None and res.confidence is None and res.error == "no finite option-label logprob"
    res = result_from_option_logprobs(["A", "B", "C"], [-2.0, float("-inf"), -0.5])
    expected = 1 / (1 + math.exp(-1.5))  # B has no logprob: a two-way softmax of A and C
    assert res.choice == "C" and res.confidence == pytest.approx(expected, rel=1e-12) and res.error is None


def test_the_reader_fills_confidence_from_logprobs_and_leaves_it_null_without_any(tmp_path):
    base = {"model": "m", "prompt": "zs", "protocol": "crossmodal", "split": "s", "condition": "A->T",
            "target": "A", "abstain_label": None, "confidence": None, "confidence_method": None}
    rows = [base | {"item_id": "i1", "instance_id": "i1", "choice": "B", "option_logprobs": [-1.0, -0.2, None]},
            base | {"item_id": "i2", "instance_id": "i2", "choice": "A",
                    "option_logprobs": [float("-inf"), None, float("nan")]},
            base | {"item_id": "i3", "instance_id": "i3", "choice": "C", "option_logprobs": [-0.1, -3.0]}]
    path = tmp_path / "predictions.parquet"
    pl.DataFrame(rows, schema_overrides={"confidence": pl.Float64, "confidence_method": pl.Utf8,
                                         "abstain_label": pl.Utf8}).write_parquet(path)
    got = read_predictions([path]).sort("item_id")
    assert got["confidence"][0] == pytest.approx(1 / (1 + math.exp(-0.8)), rel=1e-12)
    assert got["confidence_method"].to_list() == ["rs", None, "rs"]
    assert got["confidence"][1] is None  # no finite logprob: no confidence
    assert got["confidence"][2] == 0.0  # C has no logprob of its own beside A's and B's
