"""Reorganising the code changes no value: the demo's runs (simulated models) and a two-prompt, two-split sweep over
the four protocols (repeated samples, a random factor, significance tests) give the predictions, metrics, paired
differences, ranks, tests and report numbers recorded in ``tests/data/identity`` (``tests/identity_outputs.py``
says how they were made and how to remake them when a change is meant to change values).

A table may gain columns; every recorded column must keep its name and every value. Floats are compared after
rounding to 12 decimals, as recorded."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests import identity_outputs as ident

pytestmark = pytest.mark.slow


def _same(name: str, recorded, now) -> None:
    assert now is not None, f"{name}: no longer written"
    if isinstance(recorded, list):
        assert now == recorded, f"{name}: the report's numbers changed"
        return
    missing = [c for c in recorded.columns if c not in now.columns]
    assert not missing, f"{name}: columns {missing} no longer written"
    keys = [c for c in recorded.columns if recorded.schema[c] in (pl.String, pl.Categorical, pl.Int64, pl.Boolean)]
    now = now.select(recorded.columns).sort(keys, nulls_last=True)
    assert_frame_equal(now, recorded.sort(keys, nulls_last=True), check_exact=True, check_dtypes=False)


@pytest.mark.parametrize("part", ["demo", "sweep"])
def test_values_are_those_recorded(part, tmp_path):
    recorded = {k.split("/", 1)[1]: v for k, v in ident.load().items() if k.startswith(part + "/")}
    if part == "demo":
        ident.build_demo(tmp_path)
    else:
        ident.build_sweep(tmp_path)
    now = ident.canonical(tmp_path)
    for name, value in recorded.items():
        _same(name, value, now.get(name))
    assert sorted(now) == sorted(recorded), "tables written that were not recorded (remake the record)"
