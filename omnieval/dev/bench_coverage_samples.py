"""``omnieval bench coverage --part samples``: design (e), repeated samples (docs/reference.md, Statistics common to
all protocols, Repeated samples).

Each simulated study: ``n_items`` questions (protocol ``crossmodal``, direction ``A->T``), question i with a success
probability p_i ~ Beta(alpha, beta) drawn afresh per study, model a answering it ``k`` times (k Bernoulli(p_i)
samples, column ``sample``), model b ``k`` times with probability ``SHRINK * p_i``. The truths are population values:
the accuracy ``alpha / (alpha + beta)``, the difference ``(1 - SHRINK)`` times it, the data noise
``sqrt(Var(p) / n)`` and the prediction noise ``sqrt(E[p (1 - p)] / (k n))`` (Beta moments). The table gives the
coverage of the default interval (the one the metrics and paired tables hold) and the mean of each split column
over the studies divided by its truth (1 = unbiased).

With ``paraphrases`` P > 0, model a is asked every question in P prompt paraphrases (the predictions' ``prompt``),
each shifting the logit of every answer by its own effect u_j ~ N(0, ``paraphrase_sd``^2) drawn afresh per study:
the truth is then the population over paraphrases, ``E expit(logit(p) + u)`` (Beta and normal quadrature), and the
interval is that of ``metrics --random prompt`` (``stats.factors``); no difference is measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

SHRINK = 0.8
"""Model b's success probability on a question, as a share of model a's."""


@dataclass(frozen=True)
class SampleDesign:
    n_items: int
    k: int
    alpha: float = 2.0
    beta: float = 2.0
    paraphrases: int = 0
    paraphrase_sd: float = 0.3

    @property
    def label(self) -> str:
        label = f"{self.n_items} items x k={self.k}, p ~ Beta({self.alpha:g}, {self.beta:g})"
        return label + (f", {self.paraphrases} paraphrases (sd {self.paraphrase_sd:g})" if self.paraphrases else "")

    def paraphrase_truth(self) -> float:
        """``E expit(logit(p) + u)``, p ~ Beta, u ~ N(0, paraphrase_sd^2): Gauss-Jacobi-free quadrature (the
        Beta expectation of the normal integral, each by scipy / Gauss-Hermite)."""
        from scipy.stats import beta

        z, w = np.polynomial.hermite_e.hermegauss(60)
        w = w / w.sum()

        def given(p: float) -> float:
            return float(np.sum(w / (1.0 + np.exp(-(np.log(p / (1 - p)) + self.paraphrase_sd * z)))))
        return float(beta(self.alpha, self.beta).expect(given))

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def var(self) -> float:
        a, b = self.alpha, self.beta
        return a * b / ((a + b) ** 2 * (a + b + 1))

    def truth(self) -> dict[str, float]:
        """Population values of model a's accuracy, the difference a - b and the split of a's accuracy."""
        return {"accuracy": self.mean, "difference": (1 - SHRINK) * self.mean,
                "se_data": math.sqrt(self.var / self.n_items),
                "se_prediction": math.sqrt((self.mean * (1 - self.mean) - self.var) / (self.k * self.n_items))}


def simulate_paraphrases(design: SampleDesign, rng: np.random.Generator) -> pl.DataFrame:
    """Model a's k answers to every question in each paraphrase (module docstring)."""
    p = rng.beta(design.alpha, design.beta, design.n_items)
    shift = rng.normal(0.0, design.paraphrase_sd, design.paraphrases)
    logit = np.log(p / (1 - p))[:, None, None] + shift[None, :, None]
    right = rng.random((design.n_items, design.paraphrases, design.k)) < 1.0 / (1.0 + np.exp(-logit))
    q, j, s = np.indices(right.shape).reshape(3, -1)
    ids = np.char.add("x", q.astype(str))
    return pl.DataFrame({
        "model": "a", "prompt": np.char.add("para", j.astype(str)), "protocol": "crossmodal", "split": "s",
        "item_id": ids, "instance_id": ids, "condition": "A->T", "target": "A",
        "choice": np.where(right.reshape(-1), "A", "B"), "sample": s.astype(np.int64)}) \
        .with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                      confidence_method=pl.lit(None, pl.Utf8))


def simulate_samples(design: SampleDesign, rng: np.random.Generator) -> pl.DataFrame:
    """Both models' k answers to every question (module docstring)."""
    p = rng.beta(design.alpha, design.beta, design.n_items)
    frames = []
    for model, prob in (("a", p), ("b", SHRINK * p)):
        right = rng.random((design.n_items, design.k)) < prob[:, None]
        q, s = np.indices(right.shape).reshape(2, -1)
        ids = np.char.add("x", q.astype(str))
        frames.append(pl.DataFrame({
            "model": model, "prompt": "zs", "protocol": "crossmodal", "split": "s", "item_id": ids,
            "instance_id": ids, "condition": "A->T", "target": "A", "choice": np.where(right.reshape(-1), "A", "B"),
            "sample": s.astype(np.int64)}))
    return pl.concat(frames).with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                                          confidence_method=pl.lit(None, pl.Utf8))


def replicate(design: SampleDesign, rng: np.random.Generator, resamples: int) -> dict[str, float]:
    """One study: whether the two intervals cover their truths (1/0), and the split columns of a's accuracy."""
    from omnieval.stats.paired import metrics_and_paired

    if design.paraphrases:
        return _paraphrase_replicate(design, rng, resamples)
    truth = design.truth()
    frame = simulate_samples(design, rng)
    table, paired = metrics_and_paired(frame, resamples=resamples, seed=int(rng.integers(1 << 31)), permutations=1)
    acc = table.filter((pl.col("model") == "a") & (pl.col("metric") == "accuracy")).row(0, named=True)
    diff = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy")).row(0, named=True)
    out = {"accuracy": float(acc["ci_low"] <= truth["accuracy"] <= acc["ci_high"]),
           "difference": float(diff["ci_low"] <= truth["difference"] <= diff["ci_high"])}
    for column in ("se_data", "se_prediction"):
        out[column] = acc.get(column) if acc.get(column) is not None else math.nan
    return out


def _paraphrase_replicate(design: SampleDesign, rng: np.random.Generator, resamples: int) -> dict[str, float]:
    from omnieval.stats.metrics import metrics_table

    truth = design.paraphrase_truth()
    table = metrics_table(simulate_paraphrases(design, rng), resamples=resamples, seed=int(rng.integers(1 << 31)),
                          random="prompt")
    acc = table.filter(pl.col("metric") == "accuracy").row(0, named=True)
    return {"accuracy": float(acc["ci_low"] <= truth <= acc["ci_high"]), "difference": math.nan,
            "se_data": math.nan, "se_prediction": math.nan}


def designs(quick: bool) -> list[SampleDesign]:
    if quick:
        return [SampleDesign(20, k) for k in (1, 5)] + [SampleDesign(20, 1, 3.0, 2.0, paraphrases=3)]
    return [SampleDesign(200, k) for k in (1, 5, 10)] + [SampleDesign(200, 5, 0.5, 0.5)] + \
        [SampleDesign(200, k, 3.0, 2.0, paraphrases=p) for k, p in ((1, 4), (5, 4), (1, 10))]


def sample_rows(quick: bool, replicates: int, resamples: int, seed: int) -> list[list[str]]:
    """One line per design: coverage of a's accuracy and of the difference (with Monte Carlo se), and the mean
    se_data and se_prediction over the studies as a share of their truth."""
    lines = []
    for j, design in enumerate(designs(quick)):
        rng = np.random.default_rng(seed + j)
        runs = [replicate(design, rng, resamples) for _ in range(replicates)]
        truth = design.truth()
        cells = []
        for name in ("accuracy", "difference"):
            p = float(np.mean([r[name] for r in runs]))
            cells.append("—" if math.isnan(p) else f"{p:.3f}±{math.sqrt(max(p * (1 - p), 1e-12) / replicates):.3f}")
        for name in ("se_data", "se_prediction"):
            got = np.array([r[name] for r in runs])
            cells.append("—" if np.isnan(got).all() else f"{np.nanmean(got) / truth[name]:.3f}")
        lines.append([design.label, *cells])
    return lines


HEADER = ["design (e): repeated samples (and paraphrases: --random prompt)", "accuracy, t (default)",
          "difference a - b, t", "se_data / truth", "se_prediction / truth"]
