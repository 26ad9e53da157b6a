"""The non-inferiority gate (``stats.compare``, ``omnieval compare``): p-values against the t formula computed here
from the raw answers with numpy and scipy's t distribution, Holm's adjustment by hand, unparseable answers counted
wrong, and the exit codes through the real command line, the README's example included."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.stats import t as student

from omnieval.cli import main
from omnieval.stats.compare import compare_table

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


def reference_p(d: np.ndarray, margin: float) -> float:
    """One-sided t test of mean(d) > -margin, written out: t = (mean + margin) / (sd / sqrt(n)), n - 1 df."""
    t = (d.mean() + margin) / (d.std(ddof=1) / np.sqrt(len(d)))
    return float(student.sf(t, len(d) - 1))


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
        lower = d.mean() - student.ppf(0.95, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        assert row["lower_bound"] == pytest.approx(lower, abs=1e-12)
    assert table["p_value"].to_list() == pytest.approx(refs, rel=1e-9)
    assert table["p_adjusted"].to_list() == pytest.approx(holm(refs), rel=1e-9)
    assert table["verdict"].to_list() == ["non-inferior" if q <= 0.05 else "not shown" for q in holm(refs)]
    assert table["verdict"].to_list()[1] == "not shown"


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
