"""``omnieval bench stats``: how fast the statistics core is, measured in one run, against scipy as the baseline.

Prints one table:

(a) a paper-scale dissonance study (10 models x 2 prompts x 2 splits x 255 items x 8 conditions): every metric
    of docs/reference.md, Protocol `dissonance`, with 10,000-resample clustered CIs through ``metrics_table``
    (target < 5 s once compiled); the same with the paired differences of every pair (``omnieval.stats.paired``),
    the whole ``omnieval metrics`` command on it in a fresh process, as a user runs it (imports and numba's cache
    loads included; the median of 3 runs, target < 5 s), beside the in-process figure of the same work measured
    just before (what the process adds: start-up, reading, writing), and ``omnieval power`` on it;
(b) an XModBench-scale table (14 models x 10,138 items x 6 directions): accuracy per direction, average, std,
    disparity and imbalance with CIs (target < 30 s);
(c) per-CI time against ``scipy.stats.bootstrap`` (percentile, same resample count) on the same cell: a clustered
    metric (Shapley value, ACE of one unit: index resampling) and pattern-shortcut metrics (one 0/1 accuracy cell,
    the disparity of one XModBench model);
(d) numba compile time in a cold process and the cached time in a second process (both spawned, with a private
    cache folder, so the numbers do not depend on what ran before);
(e) one warm derangement (``omnieval.kernels.derangement.derange``, the spectrum protocol's shuffle) of 5,000,000 items
    in 1,000 random groups, best of 3 (the figures of that module's docstring).

Synthetic predictions come from numpy with a fixed seed; the timings include building cells from the polars frame.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import polars as pl

from omnieval.protocols.crossmodal import DIRECTIONS
from omnieval.protocols.dissonance import CONDITIONS, level


def synthetic_dissonance(n_models: int = 10, prompts: tuple[str, ...] = ("zs", "cot"),
                         splits: tuple[str, ...] = ("real", "synthetic"), n_items: int = 255, n_anchors: int = 27,
                         seed: int = 0) -> pl.DataFrame:
    """Dissonance predictions with model-, item- and condition-dependent accuracy, abstention, invalid outputs
    and rs confidences (items correlated across conditions, so clustering matters)."""
    rng = np.random.default_rng(seed)
    shape = (n_models, len(prompts), len(splits), n_items, len(CONDITIONS))
    k = np.array([level(c) for c in CONDITIONS])
    skill = rng.normal(1.5, 0.5, size=(n_models, 1, 1, 1, 1)) + rng.normal(0, 0.2, size=(1, len(prompts), 1, 1, 1))
    ease = rng.normal(0, 1, size=(1, 1, len(splits), n_items, 1))
    logit = skill + ease - 0.9 * k.reshape(1, 1, 1, 1, -1)
    p_correct = 1 / (1 + np.exp(-logit))
    correct = rng.random(shape) < p_correct
    human = rng.random(shape) < np.array([0.0, 0.0, 0.012, 0.976])[k]
    labels = np.array(list("ABCDE"))
    target = np.where(human, 4, rng.integers(0, 4, size=shape))
    wrong = (target + rng.integers(1, 5, size=shape)) % 5
    choice = np.where(correct, target, wrong)
    invalid = rng.random(shape) < 0.01
    confidence = np.clip(np.where(correct, rng.beta(6, 2, size=shape), rng.beta(3, 3, size=shape)), 0, 1)
    idx = np.indices(shape).reshape(5, -1)
    item = idx[3]
    split = np.array(splits)[idx[2]]
    frame = pl.DataFrame({
        "model": np.array([f"model{m:02d}" for m in range(n_models)])[idx[0]],
        "prompt": np.array(prompts)[idx[1]],
        "protocol": "dissonance",
        "split": split,
        "item_id": np.char.add("q", item.astype(str)),
        "instance_id": np.char.add(np.char.add("q", item.astype(str)), np.array(CONDITIONS)[idx[4]]),
        "condition": np.array(CONDITIONS)[idx[4]],
        "target": labels[target.reshape(-1)],
        "choice": labels[choice.reshape(-1)],
        "abstain_label": "E",
        "confidence": confidence.reshape(-1),
        "confidence_method": "rs",
        "k": k[idx[4]],
        "anchor": np.char.add("anchor", (item % n_anchors).astype(str)),
    })
    return frame.with_columns(pl.when(pl.Series(invalid.reshape(-1))).then(None).otherwise(pl.col("choice"))
                              .alias("choice"))


def synthetic_crossmodal(n_models: int = 14, n_items: int = 10_138, seed: int = 0) -> pl.DataFrame:
    """Crossmodal predictions: 0/1 correctness per direction with direction- and item-dependent accuracy."""
    rng = np.random.default_rng(seed)
    shape = (n_models, n_items, len(DIRECTIONS))
    logit = (rng.normal(1.0, 0.4, size=(n_models, 1, 1)) + rng.normal(0, 1.2, size=(1, n_items, 1))
             + rng.normal(0, 0.4, size=(1, 1, len(DIRECTIONS))))
    correct = rng.random(shape) < 1 / (1 + np.exp(-logit))
    idx = np.indices(shape).reshape(3, -1)
    item_ids = np.char.add("x", idx[1].astype(str))
    target = np.array(list("ABCD"))[rng.integers(0, 4, size=idx.shape[1])]
    wrong = np.array(list("BCDA"))[np.searchsorted(list("ABCD"), target)]
    return pl.DataFrame({
        "model": np.array([f"model{m:02d}" for m in range(n_models)])[idx[0]],
        "prompt": "zs", "protocol": "crossmodal", "split": "all",
        "item_id": item_ids,
        "instance_id": np.char.add(item_ids, np.array(DIRECTIONS)[idx[2]]),
        "condition": np.array(DIRECTIONS)[idx[2]],
        "target": target,
        "choice": np.where(correct.reshape(-1), target, wrong),
        "abstain_label": None, "confidence": None, "confidence_method": None,
    }, schema_overrides={"abstain_label": pl.Utf8, "confidence": pl.Float64, "confidence_method": pl.Utf8})


def _timed(fn, repeat: int = 1) -> float:
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _scipy_ci(data: tuple, statistic, resamples: int) -> float:
    from scipy.stats import bootstrap

    return _timed(lambda: bootstrap(data, statistic, n_resamples=resamples, method="percentile", vectorized=True,
                                    axis=-1, rng=np.random.default_rng(0)))


def _ci_rows(resamples: int, xmod_items: int) -> list[tuple[str, float, float]]:
    """(what, ours, scipy) seconds per CI on the same cell."""
    from omnieval.kernels.bootstrap import cluster_sums, pattern_sums, percentile_interval
    from omnieval.kernels.shapley import shapley_values
    from omnieval.protocols.crossmodal import disparity
    from omnieval.protocols.dissonance import clean_set_condition

    u64 = np.uint64
    frame = synthetic_dissonance(n_models=1, prompts=("zs",), splits=("synthetic",), seed=1)
    wide = frame.with_columns(c=pl.col("choice") == pl.col("target")).pivot("condition", index="item_id",
                                                                            values="c")
    order = [clean_set_condition(mask) for mask in range(8)]
    correct = wide.select(order).to_numpy().astype(np.float64)  # items x coalition (NaN where invalid)
    valid = ~np.isnan(correct)
    values = np.ascontiguousarray(np.hstack([np.nan_to_num(correct), valid.astype(np.float64)]))
    rows = []

    def ours_shapley():
        s = cluster_sums(values, 0, resamples, u64(0), u64(1))
        phi = shapley_values(np.ascontiguousarray(s[:, :8] / s[:, 8:]))
        percentile_interval(np.ascontiguousarray(phi[:, :1]), 0.025, 0.975)

    def scipy_shapley(x, y, axis=-1):
        acc = x.sum(axis) / y.sum(axis)  # (8, B)
        return shapley_values(np.ascontiguousarray(np.moveaxis(acc, 0, -1).reshape(-1, 8)))[:, 0]

    ours_shapley()
    rows.append(("Shapley value (clustered, 255 items x 8 cond.)", _timed(ours_shapley, 3),
                 _scipy_ci((np.nan_to_num(correct).T, valid.T.astype(float)), scipy_shapley, resamples)))

    k = np.array([sum(int(d) for d in c[1:]) for c in order])
    abst = frame.with_columns(a=(pl.col("choice") == "E").fill_null(False), h=pl.col("target") == "E")
    per_item = []
    for col in ("a", "h"):
        w = abst.pivot("condition", index="item_id", values=col).select(order).to_numpy().astype(float)
        per_item.append(np.column_stack([w[:, k == lv].sum(1) for lv in range(4)]))
    counts = np.column_stack([valid[:, k == lv].sum(1) for lv in range(4)]
                             + [np.full(len(valid), (k == lv).sum()) for lv in range(4)])
    ace_values = np.ascontiguousarray(np.hstack([per_item[0], per_item[1], counts]), dtype=np.float64)

    def ours_ace():
        s = cluster_sums(ace_values, 0, resamples, u64(0), u64(2))
        a = np.abs(s[:, :4] / s[:, 8:12] - s[:, 4:8] / s[:, 12:16]).mean(1)
        percentile_interval(np.ascontiguousarray(a[:, None]), 0.025, 0.975)

    def scipy_ace(x, axis=-1):
        s = x.sum(axis)  # (16, B)
        return np.abs(s[:4] / s[8:12] - s[4:8] / s[12:16]).mean(0)

    ours_ace()
    rows.append(("ACE (clustered, 255 items)", _timed(ours_ace, 3), _scipy_ci((ace_values.T,), scipy_ace, resamples)))

    rng = np.random.default_rng(2)
    cell = (rng.random(xmod_items) < 0.71).astype(np.float64)
    pats, cnt = np.unique(cell[:, None], axis=0, return_counts=True)

    def ours_binomial():
        s = pattern_sums(np.ascontiguousarray(pats), cnt.astype(np.int64), 0, resamples, u64(0), u64(3))
        percentile_interval(np.ascontiguousarray(s / xmod_items), 0.025, 0.975)

    ours_binomial()
    rows.append((f"accuracy, one 0/1 cell ({xmod_items:,} items, pattern shortcut)", _timed(ours_binomial, 3),
                 _scipy_ci((cell,), lambda x, axis=-1: x.mean(axis), resamples)))

    xm = synthetic_crossmodal(n_models=1, n_items=xmod_items, seed=3)
    c6 = (xm.with_columns(c=pl.col("choice") == pl.col("target")).pivot("condition", index="item_id", values="c")
          .select(list(DIRECTIONS)).to_numpy().astype(np.float64))
    pats6, cnt6 = np.unique(c6, axis=0, return_counts=True)

    def ours_disparity():
        s = pattern_sums(np.ascontiguousarray(pats6), cnt6.astype(np.int64), 0, resamples, u64(0), u64(4))
        d = disparity({dname: s[:, j] / xmod_items for j, dname in enumerate(DIRECTIONS)})["T_vs_V"]
        percentile_interval(np.ascontiguousarray(d[:, None]), 0.025, 0.975)

    def scipy_disparity(x, axis=-1):
        acc = x.mean(axis)
        return disparity({dname: acc[j] for j, dname in enumerate(DIRECTIONS)})["T_vs_V"]

    ours_disparity()
    rows.append((f"disparity T_vs_V, one model ({xmod_items:,} items x 6, pattern shortcut)",
                 _timed(ours_disparity, 3), _scipy_ci((c6.T,), scipy_disparity, resamples)))
    return rows


_COMPILE_SNIPPET = """
import time
start = time.perf_counter()
from omnieval.dev.bench_stats import synthetic_dissonance
from omnieval.stats.metrics import metrics_table
from omnieval.kernels.permutation import sign_flip_test
import numpy as np
metrics_table(synthetic_dissonance(n_models=2, prompts=("zs",), splits=("s",), n_items=40), resamples=50)
metrics_table(synthetic_dissonance(n_models=1, prompts=("zs",), splits=("s",), n_items=400)
              .with_columns(confidence=None), resamples=50)
sign_flip_test(np.ones(80), 100, np.uint64(0), np.uint64(1))
print(time.perf_counter() - start)
"""


def _compile_times() -> tuple[float, float]:
    """Seconds for the same small metrics run in a cold process (empty numba cache) and in a second process."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = []
        for _ in range(2):
            done = subprocess.run([sys.executable, "-c", _COMPILE_SNIPPET], env=env, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"compile-time probe failed:\n{done.stderr}")
            out.append(float(done.stdout.strip().splitlines()[-1]))
    return out[0], out[1]


def whole_command_seconds(predictions: pl.DataFrame, resamples: int, repeat: int = 1) -> float:
    """Seconds of ``omnieval metrics`` on ``predictions`` (written to Parquet, instance ids made unique per split)
    as a whole process, from its start to its exit; the median of ``repeat`` runs (a busy machine's one slow run
    does not make the figure)."""
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "predictions.parquet")
        predictions.with_columns(instance_id=pl.col("split") + ":" + pl.col("instance_id")).write_parquet(path)
        command = [sys.executable, "-m", "omnieval.cli", "metrics", path, "--out", os.path.join(folder, "metrics"),
                   "--resamples", str(resamples), "--permutations", str(resamples)]
        for _ in range(repeat):
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True)
            runs.append(time.perf_counter() - start)
            if done.returncode:
                raise RuntimeError(f"omnieval metrics failed:\n{done.stderr[-3000:]}")
    return float(np.median(runs))


def derange_seconds(n: int = 5_000_000, n_groups: int = 1_000, seed: int = 0, repeat: int = 3) -> float:
    """Seconds for one warm ``derange`` of ``n`` items in ``n_groups`` random groups, the best of ``repeat``."""
    from omnieval.kernels.derangement import derange

    rng = np.random.default_rng(seed)
    groups = rng.integers(0, n_groups, n).astype(np.int64)
    keys = rng.integers(0, 2**63, n).astype(np.uint64)
    derange(groups[:100], 1, 2, keys[:100])  # compile or load the cached machine code first
    return _timed(lambda: derange(groups, 1, 2, keys), repeat)


def bench_stats(quick: bool = False) -> int:
    """Measure and print the table; ``quick`` shrinks every size (a smoke test of the bench itself)."""
    from omnieval.stats.metrics import metrics_table

    resamples = 1_000 if quick else 10_000
    paper = dict(n_models=2, n_items=60) if quick else {}
    xmod = dict(n_models=2, n_items=2_000) if quick else {}
    lines: list[tuple[str, str, str, str, str]] = []

    dis = synthetic_dissonance(**paper)
    metrics_table(dis.head(2_000), resamples=20)  # compile (or load the cache) outside the timing
    start = time.perf_counter()
    table = metrics_table(dis, resamples=resamples)
    seconds = time.perf_counter() - start
    n_ci = table["ci_low"].is_not_null().sum()
    lines.append((f"(a) dissonance {dis['model'].n_unique()} models x 2 prompts x 2 splits x "
                  f"{dis['item_id'].n_unique()} items x 8 cond.: {len(table):,} metrics, {n_ci:,} CIs, "
                  f"{resamples:,} resamples", f"{seconds:.2f} s", "", "", _verdict(seconds < 5, "< 5 s")))

    from omnieval.stats.paired import metrics_and_paired
    from omnieval.stats.power import power_table

    start = time.perf_counter()
    _, paired = metrics_and_paired(dis, resamples=resamples, permutations=resamples)
    in_process = time.perf_counter() - start
    lines.append((f"(a) the same metrics and their paired differences in one pass: {len(paired):,} paired rows "
                  f"(every model and prompt pair, {resamples:,} permutations)", f"{in_process:.2f} s", "", "", ""))
    start = time.perf_counter()
    power = power_table(dis)
    lines.append((f"(a) omnieval power on the same study: MDE of {len(power)} cells",
                  f"{time.perf_counter() - start:.2f} s", "", "", ""))

    repeat = 1 if quick else 3
    seconds = whole_command_seconds(dis, resamples, repeat)
    lines.append((f"(a) the same study as a user runs it: `omnieval metrics` in a fresh process (imports, reading, "
                  f"metrics, paired differences, files), median of {repeat}", f"{seconds:.2f} s",
                  f"in-process {in_process:.2f} s", f"{seconds / in_process:,.1f}x", _verdict(seconds < 5, "< 5 s")))

    xm = synthetic_crossmodal(**xmod)
    start = time.perf_counter()
    table = metrics_table(xm, resamples=resamples)
    seconds = time.perf_counter() - start
    lines.append((f"(b) crossmodal {xm['model'].n_unique()} models x {xm['item_id'].n_unique():,} items x 6 "
                  f"directions: {len(table):,} metrics with CIs", f"{seconds:.2f} s", "", "",
                  _verdict(seconds < 30, "< 30 s")))

    for what, ours, scipy_s in _ci_rows(resamples, xmod.get("n_items", 10_138)):
        lines.append((f"(c) per CI: {what}", f"{ours * 1e3:.2f} ms", f"scipy {scipy_s * 1e3:.0f} ms",
                      f"{scipy_s / ours:,.1f}x", _verdict(scipy_s / ours >= 30, ">= 30x scipy")))

    cold, warm = _compile_times()
    lines.append(("(d) small metrics run in a fresh process, empty numba cache (compiles)", f"{cold:.2f} s", "", "",
                  ""))
    lines.append(("(d) the same in a second process (numba cache=True)", f"{warm:.2f} s", "", f"{cold / warm:.1f}x",
                  ""))

    items, groups = (1_000_000, 1_000) if quick else (5_000_000, 1_000)
    lines.append((f"(e) derangement of {items:,} items in {groups:,} groups (warm, best of 3)",
                  f"{derange_seconds(items, groups):.2f} s", "", "", ""))

    width = max(len(line[0]) for line in lines)
    print(f"omnieval bench stats ({os.cpu_count()} cores, numba threads {_threads()})")
    print(f"{'measurement':<{width}}  {'ours':>10}  {'baseline':>16}  {'ratio':>8}  target")
    for what, ours, base, ratio, verdict in lines:
        print(f"{what:<{width}}  {ours:>10}  {base:>16}  {ratio:>8}  {verdict}")
    verdicts = [line[4] for line in lines if line[4]]
    missed = [v for v in verdicts if v.startswith("MISSED")]
    print(f"targets: {len(verdicts) - len(missed)} met, {len(missed)} missed"
          + (" (a loaded machine slows every row: rerun on a quiet one before drawing conclusions)" if missed else ""))
    return 0


def _verdict(met: bool, target: str) -> str:
    return f"met ({target})" if met else f"MISSED ({target})"


def _threads() -> int:
    import numba

    return numba.get_num_threads()
