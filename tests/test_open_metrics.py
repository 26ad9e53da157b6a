"""Open-ended metrics (``omnieval/stats/open_metrics.py``) against independent references: judge agreement and Cohen's
kappa against ``sklearn.metrics.cohen_kappa_score`` on judges simulated with set agreement rates, Fleiss' kappa
against ``statsmodels`` and a hand-computed table, judge-averaged accuracy and the MCQ-open gap against
hand-computed tables, and every CI against a plain numpy bootstrap loop over items."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from omnieval.stats.metrics import metrics_table

VERDICTS = ("correct", "incorrect", "abstained")


def _open_rows(verdicts: dict[str, list[str | None]], conditions: list[str], targets_abstain: list[bool] | None = None,
               model: str = "m", prompt: str = "zs") -> list[dict]:
    n = len(conditions)
    targets_abstain = targets_abstain or [False] * n
    rows = []
    for i in range(n):
        rows.append({
            "model": model, "prompt": prompt, "protocol": "dissonance", "split": "s", "item_id": f"it{i // 2}",
            "instance_id": f"in{i}", "condition": conditions[i], "target": "E" if targets_abstain[i] else "A",
            "choice": None, "abstain_label": "E", "confidence": None, "confidence_method": None, "mode": "open",
            "verdicts": [{"judge": j, "verdict": v[i], "raw_text": str(v[i]), "attempts": 1, "template": "v1"}
                         for j, v in verdicts.items()],
        })
    return rows


def _table(rows: list[dict], resamples: int = 0) -> pl.DataFrame:
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return metrics_table(frame, resamples=resamples, seed=0)


def _value(table: pl.DataFrame, metric: str, key: str) -> float:
    hit = table.filter((pl.col("metric") == metric) & (pl.col("key") == key))
    assert len(hit) == 1, (metric, key, table.filter(pl.col("metric") == metric)["key"].to_list())
    return hit["value"][0]


def _simulated_judges(n: int, agreement: float, seed: int, m: int = 2) -> dict[str, list[str]]:
    """Judge 0 grades at random (60% correct, 30% incorrect, 10% abstained); each other judge copies it with
    probability ``agreement`` and otherwise says another verdict."""
    rng = np.random.default_rng(seed)
    first = rng.choice(VERDICTS, size=n, p=[0.6, 0.3, 0.1])
    out = {"j0": list(first)}
    for j in range(1, m):
        copy = rng.random(n) < agreement
        other = [rng.choice([v for v in VERDICTS if v != f]) for f in first]
        out[f"j{j}"] = [f if c else o for f, c, o in zip(first, copy, other, strict=True)]
    return out


@pytest.mark.parametrize("agreement", [0.95, 0.7])
def test_agreement_and_cohen_kappa_match_sklearn(agreement):
    n = 600
    judges = _simulated_judges(n, agreement, seed=int(agreement * 100))
    conditions = ["C000" if i % 2 == 0 else "C001" for i in range(n)]
    table = _table(_open_rows(judges, conditions))
    a, b = np.array(judges["j0"]), np.array(judges["j1"])
    assert _value(table, "judge_agreement", "all") == pytest.approx(np.mean(a == b))
    assert abs(_value(table, "judge_agreement", "all") - agreement) < 0.06  # the rate we set
    assert _value(table, "judge_kappa", "cohen") == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    c0 = np.array(conditions) == "C000"
    assert _value(table, "judge_agreement", "C000") == pytest.approx(np.mean(a[c0] == b[c0]))


def test_fleiss_kappa_matches_statsmodels_and_a_hand_table():
    # Hand table: 4 predictions x 3 judges.
    judges = {"j0": ["correct", "correct", "incorrect", "abstained"],
              "j1": ["correct", "incorrect", "incorrect", "abstained"],
              "j2": ["correct", "correct", "incorrect", "correct"]}
    table = _table(_open_rows(judges, ["C000"] * 4))
    # n_ic (correct, incorrect, abstained): [3,0,0], [2,1,0], [0,3,0], [1,0,2]
    # P_i = (sum n^2 - 3) / 6: 1, 1/3, 1, 1/3 -> P = 2/3; p_c = (6/12, 4/12, 2/12) -> Pe = 56/144
    p_bar, p_e = 2 / 3, 56 / 144
    assert _value(table, "judge_kappa", "fleiss") == pytest.approx((p_bar - p_e) / (1 - p_e))
    # Agreement: only predictions 1 and 3 have three identical verdicts.
    assert _value(table, "judge_agreement", "all") == pytest.approx(0.5)

    sim = _simulated_judges(500, 0.8, seed=3, m=4)
    ratings = np.array([[VERDICTS.index(v) for v in sim[j]] for j in sorted(sim)]).T
    reference = fleiss_kappa(aggregate_raters(ratings, n_cat=3)[0], method="fleiss")
    table = _table(_open_rows(sim, ["C000"] * 500))
    assert _value(table, "judge_kappa", "fleiss") == pytest.approx(reference, abs=1e-12)


def test_judge_averaged_accuracy_abstention_and_mcq_gap_by_hand():
    # 6 open predictions; the last two have the abstention as ground truth.
    judges = {"a": ["correct", "incorrect", "correct", None, "abstained", "abstained"],
              "b": ["correct", "correct", "incorrect", "correct", "incorrect", "abstained"]}
    conditions = ["C000", "C000", "C000", "C000", "C111", "C111"]
    abstain = [False, False, False, False, True, True]
    rows = _open_rows(judges, conditions, abstain)
    for r in list(rows):  # the same instances answered as multiple choice: 3 of 4 right at C000, 1 of 2 at C111
        rows.append(r | {"mode": "mcq", "verdicts": None,
                         "choice": {"in0": "A", "in1": "A", "in2": "B", "in3": "A", "in4": "E", "in5": "A"}[
                             r["instance_id"]]})
    table = _table(rows)
    # Judge a at C000: valid verdicts correct, incorrect, correct (one invalid) -> 2/3; judge b: 3/4.
    assert _value(table, "open_accuracy", "C000@a") == pytest.approx(2 / 3)
    assert _value(table, "open_accuracy", "C000@b") == pytest.approx(3 / 4)
    assert _value(table, "open_accuracy", "C000") == pytest.approx((2 / 3 + 3 / 4) / 2)
    # C111 (target = abstain): judge a abstained twice -> 1.0; judge b: incorrect, abstained -> 0.5.
    assert _value(table, "open_accuracy", "C111") == pytest.approx(0.75)
    assert _value(table, "open_abstention", "C111@b") == pytest.approx(0.5)
    # Overall: a = (2 + 2) / 5, b = (3 + 1) / 6.
    assert _value(table, "open_accuracy", "all") == pytest.approx((4 / 5 + 4 / 6) / 2)
    assert _value(table, "mcq_open_gap", "C000") == pytest.approx(3 / 4 - (2 / 3 + 3 / 4) / 2)
    assert _value(table, "mcq_open_gap", "C111") == pytest.approx(1 / 2 - 0.75)
    assert _value(table, "open_invalid_verdicts", "a") == pytest.approx(1 / 6)
    # k: C000 -> k=0, C111 -> k=3 (pooled over the level's instances).
    assert _value(table, "open_accuracy", "k=3@a") == pytest.approx(1.0)
    # The multiple-choice metrics are unchanged by the open rows next to them.
    mcq_only = _table([r for r in rows if r["mode"] == "mcq"])
    assert _value(table, "accuracy", "C000") == _value(mcq_only, "accuracy", "C000") == pytest.approx(3 / 4)


def test_open_metric_cis_match_a_plain_item_bootstrap():
    n = 120
    judges = _simulated_judges(n, 0.85, seed=7)
    conditions = ["C000"] * n
    rows = _open_rows(judges, conditions)
    table = _table(rows, resamples=2000)
    # Items are pairs of consecutive instances (item_id = i // 2): resample items, recompute.
    a = np.array([v == "correct" for v in judges["j0"]], float).reshape(-1, 2)
    b = np.array([v == "correct" for v in judges["j1"]], float).reshape(-1, 2)
    agree = (np.array(judges["j0"]) == np.array(judges["j1"])).astype(float).reshape(-1, 2)
    rng = np.random.default_rng(0)
    acc, agr = [], []
    for _ in range(4000):
        idx = rng.integers(0, n // 2, n // 2)
        acc.append((a[idx].mean() + b[idx].mean()) / 2)
        agr.append(agree[idx].mean())
    for metric, key, ref in (("open_accuracy", "C000", acc), ("judge_agreement", "all", agr)):
        row = table.filter((pl.col("metric") == metric) & (pl.col("key") == key))
        lo, hi = np.percentile(ref, [2.5, 97.5])
        assert row["ci_low"][0] == pytest.approx(lo, abs=0.02)
        assert row["ci_high"][0] == pytest.approx(hi, abs=0.02)


def test_wide_verdict_columns_from_other_tools():
    judges = {"x": ["correct", "incorrect", "correct", "correct"], "y": ["correct", "correct", "correct", "incorrect"]}
    rows = _open_rows(judges, ["C000"] * 4)
    for r in rows:
        for v in r.pop("verdicts"):
            r[f"verdict@{v['judge']}"] = v["verdict"]
    table = _table(rows)
    assert _value(table, "open_accuracy", "C000@x") == pytest.approx(0.75)
    assert _value(table, "judge_kappa", "cohen") == pytest.approx(
        cohen_kappa_score(judges["x"], judges["y"]))
