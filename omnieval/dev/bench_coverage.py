"""``omnieval bench coverage``: how often each interval covers a known truth, on simulated predictions shaped like the
seed papers' benchmarks, with and without cluster-level effects (docs/reference.md, Statistics common to all
protocols, Intervals and resampling unit).

Designs (each replicate a fresh simulated study; the truth is the population value, not the sample's):

(a) OMD-Bench, protocol ``dissonance``: 27 anchors x 10 questions, every question in all 8 conditions, two models.
    Model a answers right with probability ``expit(0.8 + condition effect + anchor effect + item effect)``, the item
    effect N(0, 0.5^2) shared by both models, the anchor effect N(0, sd^2) for sd 0, 0.5 and 1.0, model b's
    anchor effect correlated 0.5 with a's and its base 0.3 lower; corrupting video, audio, text lowers the logit by
    0.6, 0.2, 1.0. Human targets abstain with the paper's rates per level k (0, 0, .012, .976), a wrong answer
    abstains with probability .05, .1, .2, .4. Headline metrics: accuracy C000, ACE and the Shapley values of model
    a, and the paired difference a - b of accuracy C000. The truth of an accuracy is ``E expit(logit + N(0, sd^2 +
    0.5^2))`` by Gauss-Hermite quadrature, and ACE, Shapley and the difference are the same formulas of those.
(b) XModBench, protocol ``crossmodal``: 10,138 items (the size ``bench stats`` uses), 4 questions per clip (clip
    effect sd 0 or 1.0, item effect sd 0.5), the six directions at different ease; accuracy ``A->T`` and disparity
    ``T_vs_V``.
(c) The few-cluster study: design (a) with anchor effect sd 1.0 at 5 to 40 anchors of 10 questions, and (d) design
    (b) with one question per clip (so the questions are the clusters, each one right or wrong answer per direction)
    at 5 to 40 questions: where the default interval starts to cover (``report.tables.FEW_CLUSTERS``).
(e) Many models (``omnieval.dev.bench_ranks``): 30 models, 10 of them equal, per-question success from a beta: the
    rank intervals' simultaneous coverage, false groupings and the non-inferiority gate's error rate.
(f) Repeated samples: k = 1, 5, 10 answers per question with per-question success probabilities drawn from a beta
    (``dev.bench_coverage_samples``): the default interval's coverage and the variance split against its truth.

Interval methods, all from the project's own metrics table and paired differences (``stats.metrics``,
``stats.paired``), measured in the same run: today's ``item`` unit with the percentile interval, the design's unit
(anchor, clip) with the percentile, t (C - 1 df) and BCa intervals (one pass: the same resamples), and a two-stage
bootstrap (clusters drawn with replacement, then questions within each drawn cluster; percentile interval). Each
coverage comes with its Monte Carlo standard error ``sqrt(p (1 - p) / replicates)``; the default (each protocol's
own unit and ``stats.intervals.DEFAULT_METHOD``) is marked, with a verdict against 0.93-0.97.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from omnieval.protocols.crossmodal import DIRECTIONS
from omnieval.protocols.dissonance import CONDITIONS, MODALITIES, condition_vector, level

NOMINAL = 0.95
DEFAULT_REPLICATES = {"dissonance": 1_000, "crossmodal": 400}
"""Studies per design: 1,000 for OMD-Bench's design (0.2 s a study; Monte Carlo se 0.007 at 0.95, small enough to
tell 0.93 from 0.95), 400 for XModBench's 10,140 questions (2 s a study)."""
BAND = (0.93, 0.97)
CORRUPTION = np.array([0.6, 0.2, 1.0])  # logit lost when video, audio, text show another anchor
HUMAN_ABSTAIN = np.array([0.0, 0.0, 0.012, 0.976])  # per level k (the OMD-Bench paper's human targets)
WRONG_ABSTAIN = np.array([0.05, 0.1, 0.2, 0.4])  # a wrong answer picks the abstention option, per level k
DIRECTION_EASE = dict(zip(DIRECTIONS, (0.4, 0.0, 0.2, 1.0, 0.1, 1.4), strict=True))
METHODS = ("item percentile", "item t", "percentile", "t", "bca", "two-stage")
"""Columns: the question as the unit with the percentile interval (the only interval before the unit was a choice) and
with the t interval, the design's unit with three intervals, and the two-stage bootstrap."""
HEADER = ("item percentile (before)", "item t", "unit percentile", "unit t (C-1 df)", "unit BCa",
          "two-stage percentile")


UNIT_NOUNS = {"media_unit": "clip"}  # design (b)'s unit is the predictions' media_unit column: one clip


@dataclass(frozen=True)
class Design:
    protocol: str  # dissonance | crossmodal
    n_clusters: int
    per_cluster: int
    cluster_sd: float
    item_sd: float = 0.5
    unit: str = "anchor"  # the column naming the cluster

    @property
    def label(self) -> str:
        noun = UNIT_NOUNS.get(self.unit, self.unit)
        return f"{self.protocol} {self.n_clusters} {noun}s x {self.per_cluster}, {noun} sd {self.cluster_sd:g}"


def expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def mean_expit(shift: float, sd: float) -> float:
    """``E expit(shift + Z)``, Z ~ N(0, sd^2), by 120-point Gauss-Hermite quadrature."""
    z, w = np.polynomial.hermite_e.hermegauss(120)
    return float(np.sum(w * expit(shift + sd * z)) / np.sum(w))


# --- (a) dissonance ------------------------------------------------------------------------------------------------

BASE = {"a": 0.8, "b": 0.5}


def condition_shift(condition: str) -> float:
    return -float(np.dot(CORRUPTION, condition_vector(condition)))


def dissonance_truth(design: Design) -> dict[tuple[str, str], float]:
    """Population values of the headline metrics: (metric, key) -> value (``paired`` for the difference)."""
    sd = math.hypot(design.cluster_sd, design.item_sd)
    acc = {m: {c: mean_expit(BASE[m] + condition_shift(c), sd) for c in CONDITIONS} for m in BASE}
    truth = {("accuracy", "C000"): acc["a"]["C000"], ("paired accuracy", "C000"): acc["a"]["C000"] - acc["b"]["C000"]}
    abst = []
    for k in range(4):
        cs = [c for c in CONDITIONS if level(c) == k]
        p = np.mean([acc["a"][c] for c in cs])
        abst.append(HUMAN_ABSTAIN[k] * p + (1 - HUMAN_ABSTAIN[k]) * (1 - p) * WRONG_ABSTAIN[k])
    truth[("ace", "")] = float(np.mean(np.abs(np.array(abst) - HUMAN_ABSTAIN)))
    clean = lambda s: "C" + "".join("0" if m in s else "1" for m in MODALITIES)  # noqa: E731
    for m in MODALITIES:
        others = [o for o in MODALITIES if o != m]
        phi = 0.0
        for size in range(3):
            weight = math.factorial(size) * math.factorial(2 - size) / math.factorial(3)
            for s in itertools.combinations(others, size):
                phi += weight * (acc["a"][clean({*s, m})] - acc["a"][clean(set(s))])
        truth[("shapley", m)] = phi
    return truth


def simulate_dissonance(design: Design, rng: np.random.Generator) -> pl.DataFrame:
    """Two models' predictions on every question in all 8 conditions (module docstring, design (a))."""
    n_anchor, per = design.n_clusters, design.per_cluster
    n = n_anchor * per
    anchor = np.repeat(np.arange(n_anchor), per)
    item = rng.normal(0, design.item_sd, n)
    a_eff = rng.normal(0, design.cluster_sd, n_anchor)
    b_eff = 0.5 * a_eff + math.sqrt(0.75) * rng.normal(0, design.cluster_sd, n_anchor)
    shifts = np.array([condition_shift(c) for c in CONDITIONS])
    ks = np.array([level(c) for c in CONDITIONS])
    human = rng.random((n, len(CONDITIONS))) < HUMAN_ABSTAIN[ks][None, :]  # one target per instance, both models
    target = np.where(human, "E", "A")
    frames = []
    for model, effect in (("a", a_eff), ("b", b_eff)):
        logit = BASE[model] + effect[anchor][:, None] + item[:, None] + shifts[None, :]  # questions x conditions
        right = rng.random(logit.shape) < expit(logit)
        wrong_abstains = rng.random(logit.shape) < WRONG_ABSTAIN[ks][None, :]
        wrong = np.where(human, "B", np.where(wrong_abstains, "E", "B"))
        choice = np.where(right, target, wrong)
        q, c = np.indices(logit.shape).reshape(2, -1)
        frames.append(pl.DataFrame({
            "model": model, "prompt": "zs", "protocol": "dissonance", "split": "s",
            "item_id": np.char.add("q", q.astype(str)),
            "instance_id": np.char.add(np.char.add("q", q.astype(str)), np.array(CONDITIONS)[c]),
            "condition": np.array(CONDITIONS)[c], "target": target.reshape(-1), "choice": choice.reshape(-1),
            "abstain_label": "E", "k": ks[c], "anchor": np.char.add("anchor", anchor[q].astype(str)),
        }))
    return pl.concat(frames).with_columns(confidence=pl.lit(None, pl.Float64),
                                          confidence_method=pl.lit(None, pl.Utf8))


# --- (b) crossmodal ------------------------------------------------------------------------------------------------

def crossmodal_truth(design: Design) -> dict[tuple[str, str], float]:
    sd = math.hypot(design.cluster_sd, design.item_sd)
    acc = {d: mean_expit(0.3 + e, sd) for d, e in DIRECTION_EASE.items()}
    disparity = (acc["A->V"] - acc["A->T"]) + (acc["V->A"] - acc["T->A"])  # T vs V, A the third modality
    return {("accuracy", "A->T"): acc["A->T"], ("disparity", "T_vs_V"): disparity}


def simulate_crossmodal(design: Design, rng: np.random.Generator) -> pl.DataFrame:
    """One model's predictions in the six directions on ``n_clusters x per_cluster`` items, questions of one clip
    sharing its effect (module docstring, design (b))."""
    n = design.n_clusters * design.per_cluster
    clip = np.repeat(np.arange(design.n_clusters), design.per_cluster)
    ease = rng.normal(0, design.cluster_sd, design.n_clusters)[clip] + rng.normal(0, design.item_sd, n)
    logit = 0.3 + ease[:, None] + np.array(list(DIRECTION_EASE.values()))[None, :]
    right = rng.random(logit.shape) < expit(logit)
    q, d = np.indices(logit.shape).reshape(2, -1)
    return pl.DataFrame({
        "model": "a", "prompt": "zs", "protocol": "crossmodal", "split": "s",
        "item_id": np.char.add("x", q.astype(str)),
        "instance_id": np.char.add(np.char.add("x", q.astype(str)), np.array(DIRECTIONS)[d]),
        "condition": np.array(DIRECTIONS)[d], "target": "A", "choice": np.where(right.reshape(-1), "A", "B"),
        design.unit: np.char.add("clip", clip[q].astype(str)),
    }).with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                    confidence_method=pl.lit(None, pl.Utf8))


SIMULATE = {"dissonance": (simulate_dissonance, dissonance_truth), "crossmodal": (simulate_crossmodal,
                                                                                  crossmodal_truth)}


# --- one replicate -------------------------------------------------------------------------------------------------

class _Pass:
    """One resampling pass of the project's own code: the metrics table and the paired table with the interval of
    ``interval``, plus every unit's values over [data, resamples (, jackknife)] and the unit itself."""

    def __init__(self, frame: pl.DataFrame, cluster: str, interval: str, resamples: int, seed: int):
        from omnieval.stats.metrics import metrics_table
        from omnieval.stats.paired import Collector, paired_rows, table_of

        collector = Collector()
        self.units: dict[str, tuple] = {}

        def hook(spec, unit, rows, values):
            collector(spec, unit, rows, values)
            self.units[unit.key[0]] = (spec, unit, rows, values)

        self.table = metrics_table(frame, resamples=resamples, seed=seed, on_unit=hook, cluster=cluster,
                                   interval=interval)
        self.paired = table_of(paired_rows(collector, frame, resamples, seed, 1, cluster, interval))

    def values(self, model: str, metric: str, key: str) -> tuple[np.ndarray, int, np.ndarray]:
        """A row's values, its cluster count and its clusters (a mask)."""
        _, unit, rows, values = self.units[model]
        from omnieval.stats.bootstrap import row_items, row_size

        for j, row in enumerate(rows):
            if (row.metric, row.key) == (metric, key):
                return values[j], row_size(row.support, unit)[2], unit.cluster_mask(row_items(row.support, unit))
        raise KeyError((metric, key))


def _targets(design: Design) -> list[tuple[str, str]]:
    if design.protocol == "dissonance":
        return [("accuracy", "C000"), ("ace", ""), *(("shapley", m) for m in MODALITIES),
                ("paired accuracy", "C000")]
    return [("accuracy", "A->T"), ("disparity", "T_vs_V")]


def _interval_of(one: _Pass, metric: str, key: str, method: str, resamples: int) -> tuple[float, float]:
    """The interval of ``method`` on a pass's own resamples (a paired difference: the two models' values, as the
    paired table forms them)."""
    from omnieval.stats.intervals import intervals

    if metric.startswith("paired "):
        va, c, mask = one.values("a", metric[7:], key)
        vb, _, _ = one.values("b", metric[7:], key)
        values = va - vb
    else:
        values, c, mask = one.values("a", metric, key)
    low, high = intervals(values[None, :], resamples, method, np.array([c]), NOMINAL, mask[None, :])
    return float(low[0]), float(high[0])


def _production(one: _Pass, metric: str, key: str) -> tuple[float, float]:
    """The interval the pass's tables hold (the metrics table, or the paired table for a difference)."""
    if metric.startswith("paired "):
        row = one.paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == metric[7:])
                                & (pl.col("key") == key)).row(0, named=True)
    else:
        row = one.table.filter((pl.col("model") == "a") & (pl.col("metric") == metric)
                               & (pl.col("key") == key)).row(0, named=True)
    return (np.nan if row["ci_low"] is None else row["ci_low"]), (np.nan if row["ci_high"] is None else row["ci_high"])


def two_stage_weights(cluster_of_item: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Item multiplicities (resamples x items) of the two-stage bootstrap: clusters drawn with replacement, then
    within each drawn cluster as many of its items as it has, with replacement."""
    n = len(cluster_of_item)
    order = np.argsort(cluster_of_item, kind="stable")
    sizes = np.bincount(cluster_of_item)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    n_clusters = len(sizes)
    w = np.zeros((resamples, n))
    for r in range(resamples):
        drawn = rng.integers(0, n_clusters, n_clusters)
        m = sizes[drawn]
        pos = starts[np.repeat(drawn, m)] + (rng.random(m.sum()) * np.repeat(m, m)).astype(np.int64)
        np.add.at(w[r], order[pos], 1.0)
    return w


def _two_stage(item_pass: _Pass, frame: pl.DataFrame, design: Design, targets, resamples: int,
               rng: np.random.Generator) -> dict[tuple[str, str], tuple[float, float]]:
    """Percentile intervals of the two-stage bootstrap: the metric function of the protocol on the questions'
    cells, weighted by ``two_stage_weights`` (the same weights for both models: paired)."""
    from omnieval.core.metric_types import Cells
    from omnieval.stats.intervals import intervals

    spec, unit, _, _ = item_pass.units["a"]
    owner = dict(frame.select("item_id", design.unit).unique().iter_rows())
    clusters = {c: i for i, c in enumerate(sorted(set(owner.values())))}
    w = two_stage_weights(np.array([clusters[owner[q]] for q in unit.item_ids]), resamples, rng)
    values = {}
    for model, (_, u, _, _) in item_pass.units.items():
        assert u.item_ids == unit.item_ids
        channels = np.hstack([u.sums, u.counts])
        rows = np.vstack([channels.sum(axis=0), w @ channels])
        n_cells = len(u.cells)
        cells = Cells(sums=rows[:, :n_cells], counts=rows[:, n_cells:],
                      index={name: i for i, name in enumerate(u.cells)}, present=u.present)
        values[model] = {(row.metric, row.key): row.values for row in spec.metrics(cells)}
    out = {}
    for metric, key in targets:
        v = values["a"][(metric[7:], key)] - values["b"][(metric[7:], key)] if metric.startswith("paired ") \
            else values["a"][(metric, key)]
        low, high = intervals(v[None, :], resamples, "percentile", np.array([len(clusters)]), NOMINAL)
        out[(metric, key)] = (float(low[0]), float(high[0]))
    return out


def replicate(design: Design, rng: np.random.Generator, resamples: int, methods=METHODS) -> dict:
    """``(method, metric, key) -> covered`` for one simulated study."""
    simulate, truth_of = SIMULATE[design.protocol]
    truth = truth_of(design)
    frame = simulate(design, rng)
    targets = _targets(design)
    seed = int(rng.integers(1 << 31))
    out = {}
    if design.protocol != "dissonance":  # thousands of clusters: a two-stage pass would change nothing but the time
        methods = tuple(m for m in methods if m != "two-stage")
    needs_item = {"item percentile", "item t", "two-stage"} & set(methods)
    item_pass = _Pass(frame, "item", "percentile", resamples, seed) if needs_item else None
    unit_pass = _Pass(frame, design.unit, "bca", resamples, seed) \
        if {"percentile", "t", "bca"} & set(methods) else None
    staged = _two_stage(item_pass, frame, design, targets, resamples, rng) if "two-stage" in methods else {}
    for metric, key in targets:
        for method in methods:
            if method == "item percentile":
                low, high = _production(item_pass, metric, key)
            elif method == "item t":
                low, high = _interval_of(item_pass, metric, key, "t", resamples)
            elif method == "bca":
                low, high = _production(unit_pass, metric, key)
            elif method == "two-stage":
                low, high = staged[(metric, key)]
            else:
                low, high = _interval_of(unit_pass, metric, key, method, resamples)
            out[(method, metric, key)] = bool(low <= truth[(metric, key)] <= high)
    return out


# --- the bench -----------------------------------------------------------------------------------------------------

def default_method(design: Design) -> str:
    """The column the project's default gives this design (its protocol's unit and the default interval)."""
    from omnieval.stats.clusters import QUESTION_UNITS, cluster_for
    from omnieval.stats.intervals import DEFAULT_METHOD

    unit = cluster_for(design.protocol)
    if unit in QUESTION_UNITS:
        return f"item {DEFAULT_METHOD}"
    return DEFAULT_METHOD if unit == design.unit else f"{unit} {DEFAULT_METHOD}"


def coverage(design: Design, replicates: int, resamples: int, seed: int, methods=METHODS) -> dict:
    """``(method, metric, key) -> share covered`` over ``replicates`` studies of ``design``."""
    rng = np.random.default_rng(seed)
    hits: dict = {}
    for _ in range(replicates):
        for key, covered in replicate(design, rng, resamples, methods).items():
            hits[key] = hits.get(key, 0) + covered
    return {key: count / replicates for key, count in hits.items()}


def _cell(p: float | None, replicates: int, default: bool) -> str:
    if p is None:
        return "—"
    se = math.sqrt(max(p * (1 - p), 1e-12) / replicates)
    return f"{p:.3f}±{se:.3f}" + ("*" if default else "")


PARTS = ("main", "few-anchors", "few-items", "ranks", "samples")
SAMPLE_REPLICATES = 400
"""Studies per design of part ``samples`` (``dev.bench_coverage_samples``; 0.3-0.7 s a study)."""


def designs(quick: bool) -> dict[str, list[Design]]:
    """The designs of each part: ``main`` (a) and (b), ``few-anchors`` (c), ``few-items`` (d)."""
    if quick:
        return {"main": [Design("dissonance", 6, 3, 1.0), Design("crossmodal", 20, 3, 1.0, unit="media_unit")],
                "few-anchors": [Design("dissonance", 5, 3, 1.0)],
                "few-items": [Design("crossmodal", 5, 1, 0.0, unit="media_unit")]}
    return {"main": [*(Design("dissonance", 27, 10, sd) for sd in (0.0, 0.5, 1.0)),
                     *(Design("crossmodal", 2_535, 4, sd, unit="media_unit") for sd in (0.0, 1.0))],  # 10,140 items
            "few-anchors": [Design("dissonance", c, 10, 1.0) for c in (5, 8, 10, 12, 18, 40)],
            "few-items": [Design("crossmodal", c, 1, 0.0, unit="media_unit") for c in (5, 8, 10, 12, 18, 27, 40)]}


FEW_TITLES = {"few-anchors": "(c) few clusters: design (a), anchor sd 1.0, {per} questions per anchor, anchors "
                             "resampled",
              "few-items": "(d) few clusters of one question each: design (b) with no clip effect and one question "
                           "per clip (item sd 0.5), questions resampled"}


def bench_coverage(quick: bool = False, replicates: int | None = None, resamples: int | None = None,
                   seed: int = 0, parts: tuple[str, ...] = PARTS) -> int:
    """Measure and print the coverage tables of ``parts``; ``quick`` shrinks every size (a smoke test of the bench
    itself)."""
    from omnieval.stats.intervals import DEFAULT_METHOD

    resamples = resamples or (100 if quick else 2_000)
    asked = replicates  # the loops below reuse the name per design
    per_design = {d: replicates or (3 if quick else DEFAULT_REPLICATES[d.protocol]) for ds in designs(quick).values()
                  for d in ds}
    judged = min(per_design.values()) >= 100  # fewer replicates cannot tell 0.93 from 0.97
    plan = designs(quick)
    start = time.perf_counter()
    counts = " / ".join(f"{n:,} ({p})" for p, n in {d.protocol: n for d, n in per_design.items()}.items())
    print(f"omnieval bench coverage: {counts} replicates x {resamples:,} resamples per design, nominal "
          f"{NOMINAL:.0%}, Monte Carlo se after ±; * = the default interval (target {BAND[0]}-{BAND[1]}); "
          f"{os.cpu_count()} cores")
    missed = 0
    if "main" in parts:
        header = ["design", "metric", *HEADER, "default"]
        lines = []
        for i, design in enumerate(plan["main"]):
            replicates = per_design[design]
            got = coverage(design, replicates, resamples, seed + i)
            default = default_method(design)
            for metric, key in _targets(design):
                p_default = got.get((default, metric, key))
                verdict = "—" if p_default is None or not judged else \
                    ("met" if BAND[0] <= p_default <= BAND[1] else "MISSED")
                missed += verdict == "MISSED"
                lines.append([design.label, f"{metric} {key}".strip(),
                              *(_cell(got.get((m, metric, key)), replicates, m == default) for m in METHODS),
                              verdict])
        _print(header, lines)
    few_methods = ("percentile", "t", "bca")
    for offset, part in ((100, "few-anchors"), (200, "few-items")):
        if part not in parts:
            continue
        per = plan[part][0].per_cluster
        print("\n" + FEW_TITLES[part].format(per=per))
        lines = []
        for j, design in enumerate(plan[part]):
            replicates = per_design[design]
            got = coverage(design, replicates, resamples, seed + offset + j, methods=few_methods)
            for metric, key in _targets(design):
                lines.append([str(design.n_clusters), f"{metric} {key}".strip(),
                              *(_cell(got.get((m, metric, key)), replicates, m == DEFAULT_METHOD)
                                for m in few_methods)])
        _print(["clusters", "metric", "percentile", "t (C-1 df)", "BCa"], lines)
    if "ranks" in parts:  # (e) many models: rank intervals, groups, the gate (omnieval.dev.bench_ranks)
        from omnieval.dev.bench_ranks import ranks_part

        ranks_part(quick, replicates, resamples, seed)  # its own verdicts, printed with its table
    if "samples" in parts:  # design (f): repeated samples (dev.bench_coverage_samples)
        from omnieval.dev.bench_coverage_samples import HEADER as SAMPLE_HEADER
        from omnieval.dev.bench_coverage_samples import sample_rows

        print()
        _print(SAMPLE_HEADER, sample_rows(quick, asked or (3 if quick else SAMPLE_REPLICATES), resamples, seed + 300))
    if "main" in parts:
        print(f"\n{missed} default interval(s) outside {BAND[0]}-{BAND[1]}" if judged else
              f"\n(too few replicates to judge the default against {BAND[0]}-{BAND[1]})", end="")
    print(f"; {time.perf_counter() - start:.0f} s")
    return 0


def _print(header: list[str], lines: list[list[str]]) -> None:
    widths = [max(len(h), *(len(row[j]) for row in lines)) if lines else len(h) for j, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in lines:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
