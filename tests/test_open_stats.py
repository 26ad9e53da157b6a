"""Significance tests of open-ended runs (``omnieval.stats.significance.open_tests``) against independent references:
``mcq_vs_open`` against ``scipy.stats.permutation_test`` (exact, one-sample sign flips) on per-item differences
computed by a plain loop, ``mcnemar_judges`` against ``scipy.stats.binomtest`` on the discordant answers."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import binomtest, permutation_test

from omnieval.stats.significance import stats_table

N_ITEMS = 10
CONDITIONS = ("C000", "C100")


@pytest.fixture(scope="module")
def study():
    """10 items x 2 conditions; the model answers MCQ right 80% of the time and open-ended 50% (judge a) — judge b
    says correct where a does, plus on half of a's incorrect verdicts; one of b's verdicts is unparseable."""
    rng = np.random.default_rng(7)
    rows, truth = [], []
    for i in range(N_ITEMS):
        for c in CONDITIONS:
            inst = f"it{i}|{c}"
            mcq_right = bool(rng.random() < 0.8)
            a = "correct" if rng.random() < 0.5 else "incorrect"
            b = "correct" if a == "correct" or rng.random() < 0.5 else "incorrect"
            if i == 3 and c == "C100":
                b = None
            base = {"model": "m", "prompt": "zs", "protocol": "dissonance", "split": "s", "item_id": f"it{i}",
                    "instance_id": inst, "condition": c, "target": "A", "abstain_label": "E",
                    "confidence": None, "confidence_method": None}
            rows.append(base | {"mode": "mcq", "choice": "A" if mcq_right else "B", "verdicts": None})
            rows.append(base | {"mode": "open", "choice": None, "verdicts": [
                {"judge": "ja", "verdict": a, "raw_text": a, "attempts": 1, "template": "v1"},
                {"judge": "jb", "verdict": b, "raw_text": str(b), "attempts": 1 if b else 2, "template": "v1"}]})
            truth.append((f"it{i}", mcq_right, a, b))
    table = stats_table(pl.DataFrame(rows, infer_schema_length=None), permutations=10_000, seed=0)
    return truth, table


def _row(table: pl.DataFrame, **where) -> dict:
    hit = table.filter(pl.all_horizontal([pl.col(k) == v for k, v in where.items()]))
    assert len(hit) == 1, (where, table.select("test", "comparison").rows())
    return hit.row(0, named=True)


def _exact_p(d: list[float]) -> tuple[float, float]:
    res = permutation_test((np.array(d),), np.mean, permutation_type="samples", n_resamples=np.inf,
                           alternative="two-sided")
    return float(np.mean(d)), float(res.pvalue)


@pytest.mark.parametrize("judge", ["ja", "jb", None])
def test_mcq_vs_open_matches_scipy_exact_permutation(study, judge):
    truth, table = study
    per_item: dict[str, list[float]] = {}
    for item, mcq_right, a, b in truth:
        if judge is None:  # share of judges that said right, over the judges with a valid verdict
            said = [v for v in (a, b) if v is not None]
            open_right = sum(v == "correct" for v in said) / len(said)
        else:
            v = a if judge == "ja" else b
            if v is None:
                continue
            open_right = float(v == "correct")
        per_item.setdefault(item, []).append(float(mcq_right) - open_right)
    d = [sum(v) / len(v) for _, v in sorted(per_item.items())]
    estimate, p = _exact_p(d)
    got = _row(table, test="mcq_vs_open", comparison="mcq_vs_open" + (f"@{judge}" if judge else ""))
    assert got["n"] == N_ITEMS
    assert got["estimate"] == pytest.approx(estimate, abs=1e-12)
    assert got["p_value"] == pytest.approx(p, rel=1e-9)
    assert got["model"] == "m" and got["prompt"] == "zs" and got["split"] == "s"


def test_mcnemar_between_judges_matches_binomtest(study):
    truth, table = study
    pairs = [(a == "correct", b == "correct") for _, _, a, b in truth if b is not None]
    only_a = sum(x and not y for x, y in pairs)
    only_b = sum(y and not x for x, y in pairs)
    got = _row(table, test="mcnemar_judges", comparison="ja vs jb")
    assert only_b > 0  # the study has discordant answers, so the test is not vacuous
    assert got["n"] == len(pairs) == 2 * N_ITEMS - 1
    assert got["p_value"] == pytest.approx(binomtest(only_a, only_a + only_b, 0.5).pvalue, rel=1e-9)
    assert got["estimate"] == pytest.approx((only_a - only_b) / len(pairs), abs=1e-12)
    assert got["statistic"] == min(only_a, only_b)


def test_no_open_tests_without_judges():
    rows = [{"model": "m", "prompt": "zs", "protocol": "dissonance", "split": "s", "item_id": f"it{i}",
             "instance_id": f"it{i}", "condition": "C000", "target": "A", "choice": "A", "abstain_label": "E",
             "confidence": None, "confidence_method": None} for i in range(4)]
    table = stats_table(pl.DataFrame(rows), permutations=100)
    assert not set(table["test"]) & {"mcq_vs_open", "mcnemar_judges"}
