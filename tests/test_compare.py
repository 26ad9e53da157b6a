"""The non-inferiority gate (``stats.compare``, ``omnieval compare``): single-question p-values and bounds against
Tango's score statistic computed here with its restricted MLE found by brute force (a grid over the paired-cell
likelihood), and at margin 0 against statsmodels' McNemar test; the clustered bootstrap-t against Student's t on
normal unit means (where t is exact); Holm's adjustment by hand, unparseable answers counted wrong, and the exit
codes through the real command line, the README's example included."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import norm
from scipy.stats import t as student
from statsmodels.stats.contingency_tables import mcnemar

from omnieval.cli import main
from omnieval.core.keyed import keyed_rng
from omnieval.stats.compare import bootstrap_t_test, compare_table, score_test

MARGIN = 0.02


def answers(model: str, right: dict[str, np.ndarray], missing: dict[str, set[int]] | None = None) -> pl.DataFrame:
    """Dissonance-layout predictions of one model: per split, question i answered right where ``right[split][i]``,
    one instance in condition ``C000``; ``missing[split]``: questions answered without a choice (unparseable)."""
    rows = []
    for split, ok in right.items():
        for i, good in enumerate(ok):
            blank = missing is not None and i in missing.get(split, set())
            rows.append((model, "zs", "dissonance", split, f"{split}q{i:04d}", f"{split}q{i:04d}|0", "C000", "A",
                         None if blank else ("A" if good else "B")))
    frame = pl.DataFrame(rows, orient="row", schema=["model", "prompt", "protocol", "split", "item_id",
                                                     "instance_id", "condition", "target", "choice"])
    return frame.with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                              confidence_method=pl.lit(None, pl.Utf8))


def grid_score_z(b: int, c: int, n: int, delta0: float) -> float:
    """Tango's statistic ``(b - c - n delta0) / sqrt(n (2 q21 + delta0 (1 - delta0)))`` with ``q21`` the maximiser
    of the paired-cell log-likelihood ``b log q12 + c log q21 + (n - b - c) log(1 - q12 - q21)`` on the line
    ``q12 = q21 + delta0``, found on a fine grid and refined once around the best point (no closed form)."""
    low, high = max(0.0, -delta0), (1.0 - delta0) / 2
    for _ in range(2):
        q21 = np.linspace(low, high, 200_001)[1:-1]
        q12 = q21 + delta0
        with np.errstate(divide="ignore", invalid="ignore"):
            loglik = (b * np.log(q12) if b else 0) + (c * np.log(q21) if c else 0) + \
                (n - b - c) * np.log1p(-(q12 + q21))
        best = q21[np.nanargmax(loglik)]
        step = (high - low) / 200_000
        low, high = max(low, best - 2 * step), min(high, best + 2 * step)
    return (b - c - n * delta0) / np.sqrt(n * (2 * best + delta0 * (1 - delta0)))


def reference_p(d: np.ndarray, margin: float) -> float:
    """Upper-tail normal p of Tango's statistic at ``delta0 = -margin`` on the discordant pairs of ``d``."""
    return float(norm.sf(grid_score_z(int(np.sum(d > 0)), int(np.sum(d < 0)), len(d), -margin)))


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, by hand."""
    order = np.argsort(p)
    out = np.empty(len(p))
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (len(p) - rank) * p[i])
        out[i] = min(1.0, running)
    return out.tolist()


@pytest.fixture(scope="module")
def two_benchmarks():
    rng = np.random.default_rng(7)
    base = {"s1": rng.random(300) < 0.7, "s2": rng.random(200) < 0.6}
    # the candidate: equal on s1 but for a few flips, clearly worse on s2; two unparseable answers on s1
    cand = {"s1": np.where(rng.random(300) < 0.08, ~base["s1"], base["s1"]),
            "s2": np.where(rng.random(200) < 0.25, False, base["s2"])}
    missing = {"s1": {3, 10}}
    return base, cand, missing


def test_p_values_and_holm_match_the_formula_on_the_raw_answers(two_benchmarks):
    base, cand, missing = two_benchmarks
    table = compare_table(answers("new", cand, missing), answers("old", base), margin=MARGIN).sort("split")
    refs = []
    for split in ("s1", "s2"):
        c = cand[split].astype(float)
        for i in missing.get(split, set()):
            c[i] = 0.0  # an answer without a choice counts wrong
        d = c - base[split].astype(float)
        refs.append(reference_p(d, MARGIN))
        row = table.filter(pl.col("split") == split).row(0, named=True)
        assert row["n_clusters"] == len(d)
        assert row["difference"] == pytest.approx(d.mean(), abs=1e-12)
        assert row["candidate"] == pytest.approx(c.mean(), abs=1e-12)
        # the bound inverts the test: there, Tango's statistic equals z_0.95
        z = grid_score_z(int(np.sum(d > 0)), int(np.sum(d < 0)), len(d), row["lower_bound"])
        assert z == pytest.approx(norm.ppf(0.95), abs=1e-4)
    assert table["p_value"].to_list() == pytest.approx(refs, rel=1e-5)
    assert table["p_adjusted"].to_list() == pytest.approx(holm(refs), rel=1e-5)
    assert table["verdict"].to_list() == ["non-inferior" if q <= 0.05 else "not shown" for q in holm(refs)]
    assert table["verdict"].to_list()[1] == "not shown"


@pytest.mark.parametrize(("b", "c", "n", "margin"), [(12, 30, 500, 0.02), (0, 9, 200, 0.05), (7, 0, 60, 0.1),
                                                    (40, 41, 2000, 0.01), (3, 3, 10, 0.2)])
def test_score_test_is_tangos_statistic_with_the_restricted_mle(b, c, n, margin):
    d = np.concatenate([np.ones(b), -np.ones(c), np.zeros(n - b - c)])
    p, lower = score_test(d, margin, 0.05)
    assert p == pytest.approx(norm.sf(grid_score_z(b, c, n, -margin)), rel=1e-5, abs=1e-12)
    assert grid_score_z(b, c, n, lower) == pytest.approx(norm.ppf(0.95), abs=1e-4)


def test_at_margin_zero_the_score_test_is_mcnemars():
    """Tango's statistic at ``delta0 = 0`` is ``(b - c) / sqrt(b + c)``, the uncorrected McNemar test's root."""
    b, c = 31, 17
    d = np.concatenate([np.ones(b), -np.ones(c), np.zeros(400)])
    chi2 = mcnemar(np.array([[300, b], [c, 100]]), exact=False, correction=False).statistic
    assert score_test(d, 0.0, 0.05)[0] == pytest.approx(norm.sf(np.sqrt(chi2)), rel=1e-9)


def test_bootstrap_t_on_normal_unit_means_agrees_with_students_t():
    """Where the unit means are normal, Student's t is the exact null distribution of the studentized mean: the
    bootstrap-t's p and bound must agree with it within resampling error."""
    d = np.random.default_rng(5).normal(-0.01, 0.2, size=400)
    margin = 0.03
    p, lower = bootstrap_t_test(d, margin, 0.05, keyed_rng(0, "test"), resamples=20_000)
    se = d.std(ddof=1) / np.sqrt(len(d))
    t_p = student.sf((d.mean() + margin) / se, len(d) - 1)
    assert 0.005 < t_p < 0.2  # a p where the comparison means something
    assert p == pytest.approx(t_p, abs=0.008)
    assert lower == pytest.approx(d.mean() - student.ppf(0.95, len(d) - 1) * se, abs=0.1 * se)


def test_clustered_units_take_the_bootstrap_t_and_the_same_table_every_time(two_benchmarks):
    """Anchors of ten questions: the row's p is the bootstrap-t's on the anchors' mean differences, keyed, so two
    runs print the same table."""
    base, cand, _ = two_benchmarks
    new, old = answers("new", cand), answers("old", base)
    new, old = (f.with_columns(anchor_id=pl.col("item_id").str.slice(0, 6)) for f in (new, old))  # 10 questions
    first = compare_table(new, old, margin=MARGIN, cluster="anchor_id").sort("split")
    assert first.equals(compare_table(new, old, margin=MARGIN, cluster="anchor_id").sort("split"))
    d = (cand["s1"].astype(float) - base["s1"].astype(float)).reshape(-1, 10).mean(axis=1)
    row = first.row(0, named=True)
    assert row["n_clusters"] == 30
    p, lower = bootstrap_t_test(d, MARGIN, 0.05, keyed_rng(0, "compare", "dissonance", "zs", "s1"))
    assert (row["p_value"], row["lower_bound"]) == pytest.approx((p, lower), rel=1e-12)


def _write(folder: Path, frame: pl.DataFrame) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(folder / "predictions.parquet")
    return folder


def test_exit_codes_through_the_command_line(tmp_path, two_benchmarks, capsys):
    base, cand, missing = two_benchmarks
    old = _write(tmp_path / "old", answers("old", base))
    same = _write(tmp_path / "same", answers("same", {"s1": base["s1"]}))
    worse = _write(tmp_path / "worse", answers("worse", cand, missing))
    assert main(["compare", str(same), str(old), "--margin", "0.05"]) == 0
    assert "non-inferior on every benchmark" in capsys.readouterr().out
    assert main(["compare", str(worse), str(old), "--margin", str(MARGIN)]) == 1
    assert "not shown on" in capsys.readouterr().out
    assert main(["compare", str(tmp_path / "nowhere"), str(old), "--margin", str(MARGIN)]) == 2
    assert "no such predictions file" in capsys.readouterr().err
    both = _write(tmp_path / "both", pl.concat([answers("x", base), answers("y", base)]))
    assert main(["compare", str(both), str(old), "--margin", str(MARGIN)]) == 2
    assert "holds 2 models (x, y)" in capsys.readouterr().err
    assert main(["compare", str(same), str(old), "--margin", "-0.1"]) == 2


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch, two_benchmarks):
    """The README's ``omnieval compare`` line, run in a folder holding the two runs it names."""
    base, _, _ = two_benchmarks
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    line = re.search(r"^omnieval compare .*$", readme, flags=re.M).group(0).split("#", 1)[0]
    argv = shlex.split(line)[1:]
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / argv[1], answers("checkpoint", {"s1": base["s1"]}))
    _write(tmp_path / argv[2], answers("release", {"s1": base["s1"]}))
    assert main(argv) == 0  # the same answers: non-inferior at any margin with 300 questions


def test_the_bound_follows_alpha_on_both_sides_of_the_estimate():
    """A one-sided bound at alpha above one half lies above the estimate; both invert Tango's statistic."""
    d = np.concatenate([np.ones(20), -np.ones(35), np.zeros(445)])
    for alpha in (0.05, 0.7):
        _, lower = score_test(d, 0.02, alpha)
        assert grid_score_z(20, 35, 500, lower) == pytest.approx(norm.ppf(1 - alpha), abs=1e-4)
        assert (lower < d.mean()) == (alpha < 0.5)
