"""``permutation_models``: the paired sign-flip test between models, against an exact enumeration of all sign
flips (a plain numpy loop) on a small table."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from omnieval.stats.significance import stats_table


def _row(model, item, condition, correct):
    return dict(model=model, prompt="zs", protocol="crossmodal", split="all", item_id=item,
                instance_id=f"{item}|{condition}", condition=condition, target="A",
                choice=None if correct is None else ("A" if correct else "B"), abstain_label=None,
                confidence=None, confidence_method=None)


def exact_p(d: np.ndarray) -> float:
    """Two-sided p of the mean over all 2^n sign flips (the permutation test's exact value)."""
    observed = abs(d.mean())
    flips = np.array(list(itertools.product((1, -1), repeat=len(d))))
    return float(np.mean(np.abs((flips * d).mean(axis=1)) >= observed - 1e-12))


def test_model_pairs_match_exact_enumeration():
    rng = np.random.default_rng(4)
    n = 11
    a = (rng.random((n, 2)) < 0.85).astype(float)
    b = (rng.random((n, 2)) < 0.45).astype(float)
    rows = []
    for i in range(n):
        for j, cond in enumerate(("A->T", "T->A")):
            rows.append(_row("first", f"q{i:02d}", cond, bool(a[i, j])))
            rows.append(_row("second", f"q{i:02d}", cond, bool(b[i, j]) if (i, j) != (3, 1) else None))
    table = stats_table(pl.DataFrame(rows), permutations=20_000, seed=1)
    tests = table.filter(pl.col("test") == "permutation_models")
    assert set(tests["model"]) == {"first vs second"}  # order of first appearance
    # pooled: per item, mean over the conditions both answered validly (item q03 keeps only A->T)
    d = np.array([(a[i, 0] - b[i, 0]) if i == 3 else (a[i] - b[i]).mean() for i in range(n)], dtype=float)
    pooled = tests.filter(pl.col("comparison") == "all").row(0, named=True)
    assert pooled["estimate"] == pytest.approx(d.mean())
    assert pooled["p_value"] == pytest.approx(exact_p(d), abs=0.01)
    assert pooled["n"] == n
    per = tests.filter(pl.col("comparison") == "T->A").row(0, named=True)
    keep = [i for i in range(n) if i != 3]
    d2 = (a[keep, 1].astype(float) - b[keep, 1])
    assert per["estimate"] == pytest.approx(d2.mean()) and per["n"] == n - 1
    assert per["p_value"] == pytest.approx(exact_p(d2), abs=0.01)
    assert tests["p_adjusted"].is_not_null().all()
