"""Paired differences (``stats.paired``): intervals against a plain numpy clustered-bootstrap loop, coverage of a
known difference, the per-item correlation against numpy, and the pass on common items when item sets differ."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from omnieval.dev.bench_stats import synthetic_dissonance
from omnieval.stats.paired import metrics_and_paired

R = 4_000


def clustered_pair(n_items: int, per_item: int, shift: float, rng: np.random.Generator, protocol: str = "dissonance",
                   models=("a", "b"), prompts=("zs",)) -> pl.DataFrame:
    """Two models on the same items, ``per_item`` instances of each item in condition ``C000``; per-item difficulty
    shared by both (so the two are correlated and items are clusters); model a's logit is ``shift`` higher."""
    ease = rng.normal(0, 1.2, n_items)
    rows = []
    for m, model in enumerate(models):
        for prompt in prompts:
            logit = 0.3 + ease + (shift if m == 0 else 0.0)
            p = 1 / (1 + np.exp(-logit))
            correct = rng.random((n_items, per_item)) < p[:, None]
            for i in range(n_items):
                for j in range(per_item):
                    rows.append((model, prompt, protocol, "s", f"q{i:04d}", f"q{i:04d}|{j}", "C000", "A",
                                 "A" if correct[i, j] else "B"))
    frame = pl.DataFrame(rows, orient="row", schema=["model", "prompt", "protocol", "split", "item_id", "instance_id",
                                                     "condition", "target", "choice"])
    return frame.with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                              confidence_method=pl.lit(None, pl.Utf8))


def true_difference(shift: float) -> float:
    """E over items of sigmoid(0.3 + u + shift) - sigmoid(0.3 + u), u ~ N(0, 1.2^2), by quadrature."""
    u, w = np.polynomial.hermite_e.hermegauss(80)
    u = u * 1.2
    w = w / w.sum()
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    return float(np.sum(w * (sig(0.3 + u + shift) - sig(0.3 + u))))


def numpy_interval(a_sums, a_counts, b_sums, b_counts, fn, rng, resamples=R):
    """A plain clustered bootstrap: draw items with replacement, recompute both sides' statistic, difference."""
    n = len(a_sums)
    out = np.empty(resamples)
    for r in range(resamples):
        idx = rng.integers(0, n, n)
        out[r] = fn(a_sums[idx].sum(0), a_counts[idx].sum(0)) - fn(b_sums[idx].sum(0), b_counts[idx].sum(0))
    return np.percentile(out, [2.5, 97.5])


def per_item(frame: pl.DataFrame, model: str, value: pl.Expr, where: pl.Expr, by: str, keys: list) -> tuple:
    """Items x keys sums and counts of ``value`` over the rows where ``where`` holds (items sorted)."""
    sel = frame.filter((pl.col("model") == model) & where).with_columns(_v=value.cast(pl.Float64))
    items = sorted(frame["item_id"].unique().to_list())
    sums = np.zeros((len(items), len(keys)))
    counts = np.zeros((len(items), len(keys)))
    pos = {k: j for j, k in enumerate(keys)}
    row = {it: i for i, it in enumerate(items)}
    for it, k, v in zip(sel["item_id"], sel[by], sel["_v"], strict=True):
        if k in pos:
            sums[row[it], pos[k]] += v
            counts[row[it], pos[k]] += 1
    return sums, counts


@pytest.fixture(scope="module")
def dissonance_pair():
    frame = synthetic_dissonance(n_models=2, prompts=("zs",), splits=("s",), n_items=90, seed=5)
    # the references below resample questions and take percentiles: so does this pass
    metrics, paired = metrics_and_paired(frame, resamples=R, seed=3, permutations=2_000, cluster="item",
                                         interval="percentile")
    return frame, metrics, paired


def test_accuracy_and_ace_differences_match_a_numpy_clustered_bootstrap(dissonance_pair):
    frame, metrics, paired = dissonance_pair
    rng = np.random.default_rng(0)
    frame = frame.with_columns(k=pl.col("condition").str.slice(1).str.count_matches("1"),
                               valid=pl.col("choice").is_not_null())
    row = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy")
                        & (pl.col("key") == "C101")).row(0, named=True)
    assert (row["a"], row["b"]) == ("model00", "model01")
    sides = [per_item(frame, m, pl.col("choice") == pl.col("target"), pl.col("valid"), "condition", ["C101"])
             for m in ("model00", "model01")]
    acc = lambda s, c: s[0] / c[0]  # noqa: E731
    want = acc(sides[0][0].sum(0), sides[0][1].sum(0)) - acc(sides[1][0].sum(0), sides[1][1].sum(0))
    assert row["estimate"] == pytest.approx(want, abs=1e-12)
    lo, hi = numpy_interval(*sides[0], *sides[1], acc, rng)
    assert row["ci_low"] == pytest.approx(lo, abs=0.012) and row["ci_high"] == pytest.approx(hi, abs=0.012)

    def ace(s, c):  # s, c over 8 columns: abstained per level (valid rows), human abstention per level (all rows)
        return np.mean(np.abs(s[:4] / c[:4] - s[4:] / c[4:]))

    sides = []
    for m in ("model00", "model01"):
        a = per_item(frame, m, pl.col("choice") == "E", pl.col("valid"), "k", [0, 1, 2, 3])
        h = per_item(frame, m, pl.col("target") == "E", pl.lit(True), "k", [0, 1, 2, 3])
        sides.append((np.hstack([a[0], h[0]]), np.hstack([a[1], h[1]])))
    row = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "ace")).row(0, named=True)
    want = ace(sides[0][0].sum(0), sides[0][1].sum(0)) - ace(sides[1][0].sum(0), sides[1][1].sum(0))
    assert row["estimate"] == pytest.approx(want, abs=1e-12) and row["p_method"] == "bootstrap"
    lo, hi = numpy_interval(*sides[0], *sides[1], ace, rng)
    assert row["ci_low"] == pytest.approx(lo, abs=0.012) and row["ci_high"] == pytest.approx(hi, abs=0.012)
    # the table's own values are the metrics table's values of a and b
    for side, model in (("a_value", "model00"), ("b_value", "model01")):
        value = metrics.filter((pl.col("model") == model) & (pl.col("metric") == "ace"))["value"][0]
        assert row[side] == pytest.approx(value, abs=1e-12)


def test_item_correlation_and_permutation_rows(dissonance_pair):
    frame, _, paired = dissonance_pair
    row = paired.filter((pl.col("comparison") == "models") & (pl.col("key") == "C000")
                        & (pl.col("metric") == "accuracy")).row(0, named=True)
    wide = (frame.filter(pl.col("condition") == "C000").drop_nulls("choice")
            .with_columns(c=(pl.col("choice") == pl.col("target")).cast(pl.Float64))
            .pivot("model", index="item_id", values="c").drop_nulls())
    x, y = wide["model00"].to_numpy(), wide["model01"].to_numpy()
    assert row["item_corr"] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert row["n_items"] == len(wide) and row["p_method"] == "permutation"
    from scipy.stats import permutation_test

    ref = permutation_test((x - y,), np.mean, permutation_type="samples", n_resamples=2_000,
                           rng=np.random.default_rng(1)).pvalue
    assert row["p_value"] == pytest.approx(ref, abs=0.05)
    pooled = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "ace")).row(0, named=True)
    every = (frame.drop_nulls("choice").with_columns(c=(pl.col("choice") == pl.col("target")).cast(pl.Float64))
             .group_by("item_id", "model").agg(pl.col("c").mean()).pivot("model", index="item_id", values="c")
             .drop_nulls())
    assert pooled["item_corr"] == pytest.approx(np.corrcoef(every["model00"], every["model01"])[0, 1], abs=1e-12)
    # one family here (models, one prompt, one split): BH over all its rows, as statsmodels computes it
    fam = paired.filter(pl.col("comparison") == "models")
    from statsmodels.stats.multitest import multipletests

    assert np.allclose(fam["p_adjusted"].to_numpy(), multipletests(fam["p_value"].to_numpy(), method="fdr_bh")[1])


def test_interval_covers_a_known_difference_at_the_nominal_rate():
    """200 simulated studies, 60 items x 4 instances, true difference known: the 95% interval covers it in
    95% +- Monte Carlo error (binomial sd 1.5%; the band is 3.5 sd wide)."""
    rng = np.random.default_rng(11)
    truth = true_difference(0.5)
    hits = 0
    studies = 200
    for _ in range(studies):
        frame = clustered_pair(60, 4, 0.5, rng)
        _, paired = metrics_and_paired(frame, resamples=1_000, seed=int(rng.integers(1 << 30)), permutations=200)
        row = paired.filter(pl.col("metric") == "accuracy").row(0, named=True)
        hits += row["ci_low"] <= truth <= row["ci_high"]
    assert abs(hits / studies - 0.95) < 3.5 * np.sqrt(0.95 * 0.05 / studies)


def test_units_with_different_items_are_compared_on_their_common_items():
    rng = np.random.default_rng(2)
    frame = clustered_pair(50, 3, 0.4, rng)
    dropped = frame.filter(~((pl.col("model") == "b") & pl.col("item_id").is_in(["q0000", "q0001", "q0002"])))
    _, paired = metrics_and_paired(dropped, resamples=500, seed=0, permutations=200)
    row = paired.row(0, named=True)
    common = frame.filter(~pl.col("item_id").is_in(["q0000", "q0001", "q0002"]))
    acc = common.group_by("model").agg((pl.col("choice") == pl.col("target")).mean()).sort("model")["choice"]
    assert row["n_items"] == 47 and row["estimate"] == pytest.approx(acc[0] - acc[1], abs=1e-12)
    assert row["ci_low"] < row["estimate"] < row["ci_high"]


def test_prompt_pairs_are_cot_minus_zs():
    rng = np.random.default_rng(4)
    frame = clustered_pair(40, 2, 0.0, rng, models=("a",), prompts=("zs", "cot"))
    _, paired = metrics_and_paired(frame, resamples=300, seed=0, permutations=200)
    row = paired.row(0, named=True)
    assert (row["comparison"], row["model"], row["a"], row["b"]) == ("prompts", "a", "cot", "zs")
    acc = frame.group_by("prompt").agg((pl.col("choice") == pl.col("target")).mean())
    by = dict(zip(acc["prompt"], acc["choice"], strict=True))
    assert row["estimate"] == pytest.approx(by["cot"] - by["zs"], abs=1e-12)


def test_modes_rows_are_the_open_gap_with_per_item_sides():
    """Multiple-choice vs open-ended on the same instances: the row is ``mcq_open_gap`` (estimate and interval),
    its correlation and permutation test on per-item mcq correctness against the judges' mean verdict."""
    rng = np.random.default_rng(6)
    n = 40
    mcq_right = rng.random(n) < 0.7
    judge = [np.where(rng.random(n) < 0.8, mcq_right, ~mcq_right) for _ in range(2)]
    base = {"model": "m", "prompt": "zs", "protocol": "dissonance", "split": "s", "condition": "C000",
            "target": "A", "abstain_label": "E", "confidence": None, "confidence_method": None}
    rows = []
    for i in range(n):
        rows.append({**base, "item_id": f"it{i:02d}", "instance_id": f"in{i}", "choice": "A" if mcq_right[i] else "B",
                     "mode": "mcq", "verdicts": None})
        rows.append({**base, "item_id": f"it{i:02d}", "instance_id": f"in{i}", "choice": None, "mode": "open",
                     "verdicts": [{"judge": f"j{j}", "verdict": "correct" if judge[j][i] else "incorrect",
                                   "raw_text": "", "attempts": 1, "template": "v1"} for j in range(2)]})
    frame = pl.DataFrame(rows, infer_schema_length=None)
    metrics, paired = metrics_and_paired(frame, resamples=2_000, seed=0, permutations=2_000)
    row = paired.filter((pl.col("comparison") == "modes") & (pl.col("key") == "all")).row(0, named=True)
    gap = metrics.filter((pl.col("metric") == "mcq_open_gap") & (pl.col("key") == "all")).row(0, named=True)
    assert (row["a"], row["b"]) == ("mcq", "open")
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == (gap["value"], gap["ci_low"], gap["ci_high"])
    opened = (judge[0].astype(float) + judge[1]) / 2
    assert row["estimate"] == pytest.approx(mcq_right.mean() - opened.mean(), abs=1e-12)
    assert row["item_corr"] == pytest.approx(np.corrcoef(mcq_right.astype(float), opened)[0, 1], abs=1e-12)
    assert row["p_method"] == "permutation" and row["n_items"] == n


def test_report_matrices_show_every_pair_of_models_and_prompts():
    """The report's compact matrices: one per comparison and split, a row per pair, each cell one paired row."""
    from omnieval.report.blocks import fmt
    from omnieval.report.paired import matrices
    from omnieval.report.tables import FEW_CLUSTERS

    rng = np.random.default_rng(8)
    frame = clustered_pair(20, 2, 0.3, rng, models=("a", "b", "c"), prompts=("zs", "cot"))
    _, paired = metrics_and_paired(frame, resamples=200, seed=0, permutations=100)
    # "toy": a protocol with no matrix columns of its own, so the default columns (accuracy per key) are shown
    tables = {t.caption: t for t in matrices(paired, "toy")}
    assert set(tables) == {"Paired differences: model pairs, split s", "Paired differences: prompt styles, split s"}
    models = tables["Paired differences: model pairs, split s"]
    assert models.header == ["a − b", "prompt", "accuracy C000"] and len(models.rows) == 3 * 2
    prompts = tables["Paired differences: prompt styles, split s"]
    assert [r[0].text for r in prompts.rows] == ["cot − zs"] * 3 and prompts.header[1] == "model"
    by_id = {(r["comparison"], r["a"], r["b"], r["model"], r["prompt"]): r for r in paired.to_dicts()}
    for table in tables.values():
        for row in table.rows:
            cell = row[-1]
            want = by_id[(cell.data["comparison"], cell.data["a"], cell.data["b"], cell.data["model"],
                          cell.data["prompt"])]
            assert float(cell.data["paired_value"]) == want["estimate"]
            assert cell.ci.startswith(f"[{fmt(want['ci_low'])}, {fmt(want['ci_high'])}] p=")
            assert cell.ci.endswith("‡") == (want["n_clusters"] < FEW_CLUSTERS)


def test_item_correlation_is_numpys_corrcoef_to_the_bit():
    """``item_corr`` repeats ``np.corrcoef``'s operations without its argument handling: the same bits on finite
    pairs, None below three pairs or where a side is constant (0/1 outcomes, NaN gaps, wide scales alike)."""
    from omnieval.stats.paired import _corr

    rng = np.random.default_rng(3)
    for k in range(600):
        n = int(rng.integers(1, 300))
        x = rng.normal(size=n) * 10.0 ** rng.uniform(-4, 4)
        y = 0.4 * x + rng.normal(size=n)
        if k % 3 == 0:
            x, y = (rng.random(n) < 0.6).astype(float), (rng.random(n) < 0.5).astype(float)
        if k % 5 == 0:
            x[rng.random(n) < 0.2] = np.nan
        if k % 11 == 0:
            y[:] = 0.25
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.sum() < 3 or np.std(x[ok]) == 0 or np.std(y[ok]) == 0:
            assert _corr(x, y) is None, k
        else:
            assert _corr(x, y) == float(np.corrcoef(x[ok], y[ok])[0, 1]), k
