"""``omnieval power``: the MDE against the closed-form paired-proportions (McNemar) power formula on unclustered
data, and against simulated clustered studies (at the MDE, ~80% of paired tests are significant)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from omnieval.kernels.permutation import sign_flip_test
from omnieval.stats.power import from_numbers, power_table


def connor_mde(psi: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Connor (1987): ``n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2`` for a paired-proportions test with
    discordant share ``psi``, solved for the difference ``d``."""
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    return brentq(lambda d: (za * math.sqrt(psi) + zb * math.sqrt(psi - d * d)) ** 2 / d ** 2 - n, 1e-6,
                  math.sqrt(psi) - 1e-9)


def sig(x):
    return 1 / (1 + np.exp(-x))


def study(n_items: int, per_item: int, shift: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Correct counts (items x 2 models) of ``per_item`` instances: a shared item ease (models correlated, items
    clusters), a model-item deviation, model a's logit ``shift`` higher."""
    ease = rng.normal(0.5, 1.2, n_items)
    out = []
    for side in (shift / 2, -shift / 2):
        p = sig(ease + rng.normal(0, 0.6, n_items) + side)
        out.append(rng.binomial(per_item, p))
    return np.column_stack(out), np.full((n_items, 2), per_item)


def as_predictions(correct: np.ndarray, per_item: int) -> pl.DataFrame:
    n = correct.shape[0]
    model, item, choice = [], [], []
    for m, name in enumerate(("a", "b")):
        for i in range(n):
            for j in range(per_item):
                model.append(name)
                item.append(f"q{i:05d}")
                choice.append("A" if j < correct[i, m] else "B")
    return pl.DataFrame({"model": model, "prompt": "zs", "protocol": "toy", "split": "s", "item_id": item,
                         "instance_id": [f"{it}|{k}" for k, it in enumerate(item)], "condition": "c1",
                         "target": "A", "choice": choice, "abstain_label": None, "confidence": None,
                         "confidence_method": None},
                        schema_overrides={"abstain_label": pl.Utf8, "confidence": pl.Float64,
                                          "confidence_method": pl.Utf8})


@pytest.mark.parametrize(("n", "p", "rho"), [(255, 0.7, 0.5), (1000, 0.5, 0.0), (120, 0.85, 0.3)])
def test_mde_from_numbers_matches_the_paired_proportions_formula(n, p, rho):
    row = from_numbers(n, p, rho, effect=0.05).row(0, named=True)
    psi = 2 * p * (1 - p) * (1 - rho)  # discordant share of two binaries with margin p and correlation rho
    assert row["mde"] == pytest.approx(connor_mde(psi, n), rel=0.02)
    # and the items needed for the MDE are n again (the formula inverted)
    back = from_numbers(n, p, rho, effect=row["mde"]).row(0, named=True)
    assert back["items_needed"] in (n, n + 1)


def test_mde_from_unclustered_predictions_matches_the_formula_with_the_observed_discordance():
    rng = np.random.default_rng(3)
    correct, _ = study(3000, 1, 0.0, rng)
    row = power_table(as_predictions(correct, 1)).filter(pl.col("key") == "c1").row(0, named=True)
    psi = float(np.mean(correct[:, 0] != correct[:, 1]))
    assert row["correlation_source"].startswith("observed") and row["n_items"] == 3000
    assert row["mde"] == pytest.approx(connor_mde(psi, 3000), rel=0.03)
    assert row["correlation"] == pytest.approx(np.corrcoef(correct[:, 0], correct[:, 1])[0, 1], abs=0.01)


def test_share_of_significant_studies_at_the_mde_is_eighty_percent():
    """Pilot (4,000 items) -> MDE for 120 items -> 400 studies with that true difference: the sign-flip test is
    significant in 80% +- 3.5 Monte Carlo sd (2%) of them."""
    rng = np.random.default_rng(7)
    per_item, n = 4, 120
    pilot, _ = study(4000, per_item, 0.0, rng)
    sd_diff = power_table(as_predictions(pilot, per_item)).row(0, named=True)["sd_diff"]
    target = 2.8016 * sd_diff / math.sqrt(n)
    assert from_numbers(n, 0.6, 0.0).row(0, named=True)["alpha"] == 0.05
    u = rng.normal(0.5, 1.2, 200_000)
    e = rng.normal(0, 0.6, (2, 200_000))
    shift = brentq(lambda s: np.mean(sig(u + e[0] + s / 2) - sig(u + e[1] - s / 2)) - target, 0.0, 3.0)
    studies, hits = 400, 0
    for r in range(studies):
        correct, _ = study(n, per_item, shift, rng)
        d = (correct[:, 0] - correct[:, 1]) / per_item
        hits += sign_flip_test(d, 1000, np.uint64(r), np.uint64(1))[1] < 0.05
    assert abs(hits / studies - 0.80) < 3.5 * math.sqrt(0.8 * 0.2 / studies)


def test_power_cli_from_numbers_and_from_a_file(tmp_path, capsys):
    from omnieval.cli import main

    assert main(["power", "--items", "255", "--accuracy", "0.7", "--correlation", "0.5", "--effect", "0.05"]) == 0
    assert "0.080" in capsys.readouterr().out  # 2.80 * sqrt(0.21 / 255)
    rng = np.random.default_rng(1)
    path = tmp_path / "p.parquet"
    # the CLI reads files like ``metrics`` does: a registered protocol and its condition names
    as_predictions(study(80, 2, 0.0, rng)[0], 2).with_columns(protocol=pl.lit("spectrum"),
                                                              condition=pl.lit("normal")).write_parquet(path)
    assert main(["power", str(path), "--out", str(tmp_path / "o")]) == 0
    table = pl.read_csv(tmp_path / "o" / "power.csv")
    assert set(table["key"]) == {"all", "normal"} and (table["n_items"] == 80).all()
    assert main(["power", "--items", "10"]) == 2
    assert "--accuracy" in capsys.readouterr().err


def test_a_cell_has_the_same_bits_alone_as_among_other_rows():
    """A cell's figures are sums over its clusters and models: taken in one order (clusters sorted, models in
    the given order), a split's rows alone give the bits they give among the whole input's, as a Ray task holding
    one split computes them (``stats.distributed.ray_power``); grouped in the order the hashing left them, they
    differed in the last bits, from run to run too."""
    from polars.testing import assert_frame_equal

    from omnieval.dev.bench_stats import synthetic_dissonance

    frame = synthetic_dissonance(n_models=3, n_items=200, seed=1).with_columns(
        instance_id=pl.col("split") + ":" + pl.col("instance_id"))
    whole = power_table(frame)
    assert whole.select("split", "prompt").unique().height == 4
    for (split, prompt), part in frame.partition_by("split", "prompt", as_dict=True).items():
        want = whole.filter((pl.col("split") == split) & (pl.col("prompt") == prompt))
        assert_frame_equal(power_table(part, model_order=["model00", "model01", "model02"]), want, check_exact=True)
    assert_frame_equal(power_table(frame.sample(fraction=1.0, shuffle=True, seed=4),
                                   model_order=["model00", "model01", "model02"]), whole, check_exact=True)
