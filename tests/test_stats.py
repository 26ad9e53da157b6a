"""``omnieval stats``: each test row against the same scipy / statsmodels test fed by aggregation written here."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from omnieval.stats.significance import stats_command, stats_table

CONDITIONS = ["C000", "C001", "C010", "C011", "C100", "C101", "C110", "C111"]


@pytest.fixture(scope="module")
def study() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for m, model in enumerate(("m1", "m2", "m3")):
        for prompt in ("zs", "cot"):
            for i in range(48):
                for c in CONDITIONS:
                    k = sum(int(d) for d in c[1:])
                    p = 0.9 - 0.1 * m - 0.12 * k - 0.1 * (c[3] == "1") + 0.05 * (prompt == "cot")
                    ok = rng.random() < p
                    rows.append(dict(model=model, prompt=prompt, protocol="dissonance", split="s",
                                     item_id=f"q{i:02d}", instance_id=f"q{i}|{c}", condition=c, target="A",
                                     choice=None if rng.random() < 0.03 else ("A" if ok else "B"),
                                     abstain_label="E", confidence=None, confidence_method=None,
                                     anchor=f"a{i % 8}"))
    return pl.DataFrame(rows, schema_overrides={"confidence": pl.Float64, "confidence_method": pl.Utf8})


@pytest.fixture(scope="module")
def table(study) -> pl.DataFrame:
    return stats_table(study, permutations=4000, seed=0)


def per_anchor(study, model, prompt, condition):
    out = {}
    for r in study.filter((pl.col("model") == model) & (pl.col("prompt") == prompt)
                          & (pl.col("condition") == condition) & pl.col("choice").is_not_null()).to_dicts():
        out.setdefault(r["anchor"], []).append(r["choice"] == r["target"])
    return {a: np.mean(v) for a, v in sorted(out.items())}


def row(table, **where):
    sel = table
    for col, val in where.items():
        sel = sel.filter(pl.col(col) == val)
    assert len(sel) == 1, where
    return sel.row(0, named=True)


def test_wilcoxon_over_anchor_drops(study, table):
    base = per_anchor(study, "m2", "zs", "C000")
    drop = {m: {a: base[a] - v for a, v in per_anchor(study, "m2", "zs", c).items()}
            for m, c in (("video", "C100"), ("audio", "C010"), ("text", "C001"))}
    x, y = np.array(list(drop["text"].values())), np.array(list(drop["audio"].values()))
    ref = stats.wilcoxon(x, y)
    got = row(table, test="wilcoxon", model="m2", prompt="zs", comparison="text_vs_audio")
    assert got["p_value"] == pytest.approx(ref.pvalue) and got["statistic"] == pytest.approx(ref.statistic)
    assert got["estimate"] == pytest.approx(np.mean(x - y)) and got["n"] == 8


def test_friedman_across_models_per_level(study, table):
    k1 = ["C001", "C010", "C100"]
    cols = []
    for model in ("m1", "m2", "m3"):
        acc = {}
        for r in study.filter((pl.col("model") == model) & (pl.col("prompt") == "cot")
                              & pl.col("condition").is_in(k1) & pl.col("choice").is_not_null()).to_dicts():
            acc.setdefault(r["anchor"], []).append(r["choice"] == r["target"])
        cols.append([np.mean(acc[a]) for a in sorted(acc)])
    ref = stats.friedmanchisquare(*cols)
    got = row(table, test="friedman", prompt="cot", comparison="k=1")
    assert got["p_value"] == pytest.approx(ref.pvalue) and got["statistic"] == pytest.approx(ref.statistic)


def test_mcnemar_pairs_with_benjamini_hochberg(study, table):
    base = study.filter((pl.col("condition") == "C000") & (pl.col("prompt") == "zs"))
    correct = {}
    for r in base.filter(pl.col("choice").is_not_null()).to_dicts():
        correct[(r["model"], r["item_id"])] = r["choice"] == r["target"]
    p = []
    for a, b in itertools.combinations(("m1", "m2", "m3"), 2):
        items = sorted({i for (m, i) in correct if m == a} & {i for (m, i) in correct if m == b})
        t = np.zeros((2, 2), int)
        for i in items:
            t[1 - correct[(a, i)], 1 - correct[(b, i)]] += 1
        ref = mcnemar(t, exact=True)
        got = row(table, test="mcnemar", prompt="zs", model=f"{a} vs {b}")
        assert got["p_value"] == pytest.approx(ref.pvalue) and got["n"] == len(items)
        p.append(got["p_value"])
    adjusted = multipletests(p, method="fdr_bh")[1]
    got = table.filter((pl.col("test") == "mcnemar") & (pl.col("prompt") == "zs")).sort("model")["p_adjusted"]
    assert np.allclose(got.to_numpy(), adjusted)


def test_permutation_zs_vs_cot_matches_scipy(study, table):
    """Dissonance resamples anchors: per anchor, the mean over its (item, condition) pairs of cot minus zs, signs
    flipped per anchor (8 anchors: every sign vector, as scipy's exact test)."""
    part = study.filter((pl.col("model") == "m3") & pl.col("choice").is_not_null()).to_dicts()
    by = {}
    for r in part:
        by.setdefault((r["anchor"], r["item_id"], r["condition"]), {})[r["prompt"]] = float(r["choice"] == r["target"])
    diffs = {}
    for (anchor, _, _), v in by.items():
        if "zs" in v and "cot" in v:
            diffs.setdefault(anchor, []).append(v["cot"] - v["zs"])
    d = np.array([np.mean(diffs[a]) for a in sorted(diffs)])
    assert len(d) == 8
    ref = stats.permutation_test((d,), lambda x, axis: x.mean(axis), permutation_type="samples",
                                 n_resamples=4000, vectorized=True, rng=np.random.default_rng(1)).pvalue
    got = row(table, test="permutation", model="m3")
    assert got["estimate"] == pytest.approx(d.mean()) and got["comparison"] == "cot_vs_zs"
    assert abs(got["p_value"] - ref) < 5 * np.sqrt(2 * max(ref, 0.002) / 4000) + 1e-3


def test_stats_command_writes_tests_csv(study, tmp_path):
    study.write_parquet(tmp_path / "p.parquet")
    assert stats_command([str(tmp_path / "p.parquet")], str(tmp_path / "out"), permutations=500) == 0
    out = pl.read_csv(tmp_path / "out" / "tests.csv")
    assert {"protocol", "model", "split", "test", "comparison", "statistic", "p_value", "p_adjusted",
            "n"} <= set(out.columns)
    assert set(out["test"]) == {"wilcoxon", "friedman", "mcnemar", "permutation", "permutation_models"}
