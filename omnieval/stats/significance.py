"""``omnieval stats``: significance tests on predictions files (docs/reference.md, Statistics
common to all protocols and Protocol `dissonance`; OMD-Bench paper, appendix A.11).

Tests (one row each in ``tests.csv``). The first three run for a protocol whose metric spec names the conditions
they compare (``ProtocolMetrics.tests``, a ``core.protocol_views.ConditionTests``); the examples are dissonance's:

* ``wilcoxon`` (per model x prompt x split): per block (anchor), the accuracy drop caused by altering one thing
  (corrupting one modality, ``acc[C000] - acc[C_m]``); Wilcoxon signed-rank between the drops of two of them over
  blocks (``text_vs_video``, ``text_vs_audio``, ``video_vs_audio``; estimate = mean drop difference, positive =
  the first one's drop is larger).
* ``friedman`` (per prompt x split x level, e.g. k): models as treatments, blocks (anchors) as blocks, per-block
  accuracy at the level as the observation (blocks every model answered).
* ``mcnemar`` (per prompt x split): every model pair in the baseline condition (C000) on the items both answered
  validly (exact binomial McNemar from statsmodels; estimate = accuracy difference).
* ``permutation`` (every protocol, per model x split): paired sign-flip test between two prompt styles (``zs`` vs
  ``cot``; any pair present) on matched instances; per item the mean correctness difference over its matched
  instances; ``omnieval.kernels.permutation`` (estimate = mean per-item difference, second minus first).
* ``permutation_models`` (every protocol, per prompt x split): the same paired sign-flip test between every pair of
  models (``model_a``, ``model_b``, in order of first appearance; ``model`` = ``a vs b`` for people), on the
  instances both answered validly, pooled
  over all conditions (``comparison`` = ``all``) and per condition; estimate = mean per-item difference, a minus b.
* ``mcq_vs_open`` (every protocol with both modes, per model x prompt x split): paired sign-flip test between
  multiple-choice correctness and a judge's open-ended verdict on the same instances (``comparison`` =
  ``mcq_vs_open@<judge>``; with several judges also ``mcq_vs_open``, the share of judges that said right); per item
  the mean difference over its instances; estimate = mcq minus open, the sign of ``mcq_open_gap``.
* ``mcnemar_judges`` (every protocol with 2+ judges, per model x prompt x split): every pair of judges grading the
  same open answers (``comparison`` = ``a vs b``), exact McNemar on the answers both graded validly; estimate = a's
  accuracy minus b's. The pairs are answers, not items: a judge pair disagreeing systematically is what it detects.

"Item" in the sign-flip tests is the resampling unit of the bootstrap (``stats.clusters``: the question by default,
whose rotated copies (``group``) are one unit; an anchor where the protocol's unit is the anchor): a unit's
differences are averaged, so a flip moves them together. McNemar's tests compare answers and the Wilcoxon and
Friedman tests their protocol's blocks, whatever the unit.

The classical tests come from scipy / statsmodels, never re-implemented. ``p_adjusted`` is Benjamini-Hochberg
(``multiple_testing.benjamini_hochberg``, statsmodels' ``fdr_bh`` to the bit) within a family: one test x
protocol x prompt x split (permutation: test x protocol).
Invalid predictions (null choice) and errored ones (``error`` set: never answered) are left out, as in every
accuracy.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Iterable

import numpy as np
import polars as pl

from omnieval.core.keyed import keyed_seed
from omnieval.core.metric_types import CLUSTER
from omnieval.core.protocol_views import ConditionTests
from omnieval.core.storage import local_folder
from omnieval.kernels.permutation import sign_flip_test
from omnieval.stats.clusters import ClusterChoice, with_clusters
from omnieval.stats.multiple_testing import adjust_tests
from omnieval.stats.read import prepare, read_predictions

TEST_COLUMNS = ("protocol", "model", "prompt", "split", "test", "comparison", "statistic", "estimate", "p_value",
                "p_adjusted", "n", "model_a", "model_b")
"""``model`` names the row's model for people (``a vs b`` for a pair, ``all (3)`` for a test across models);
``model_a`` / ``model_b`` are the two models of a test between two models (``""`` on other rows): what readers
select pairs by, so a model named with `` vs `` in it is never misread."""


def _finite(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _row(protocol, model, prompt, split, test, comparison, statistic, estimate, p, n,
         pair: tuple[str, str] = ("", "")) -> dict:
    f = _finite
    return {"protocol": protocol, "model": model, "prompt": prompt, "split": split, "test": test,
            "comparison": comparison, "statistic": f(statistic), "estimate": f(estimate), "p_value": f(p),
            "p_adjusted": None, "n": int(n), "model_a": pair[0], "model_b": pair[1]}


def pair_label(a: str, b: str) -> str:
    """The ``model`` label of a row about two models (for people; readers use ``model_a`` / ``model_b``)."""
    return f"{a} vs {b}"


def _safe(test, *args, **kwargs):
    """Run a scipy/statsmodels test; degenerate input (all differences zero, one block...) gives NaNs."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = test(*args, **kwargs)
        return float(result.statistic), float(result.pvalue)
    except (ValueError, ZeroDivisionError):
        return np.nan, np.nan


def _block_accuracy(valid: pl.DataFrame, block: str, by: list[str]) -> pl.DataFrame:
    return valid.group_by(["model", "prompt", "split", block, *by]).agg(acc=pl.col("correct").mean())


def wilcoxon_tests(frame: pl.DataFrame, protocol: str, tests: ConditionTests) -> list[dict]:
    """Per model x prompt x split, the drops ``baseline - condition`` per block of each of ``tests.drops``, and a
    Wilcoxon signed-rank test between the drops of each pair in ``tests.drop_pairs``."""
    from scipy.stats import wilcoxon

    block, base, drops = tests.block, tests.baseline, dict(tests.drops)
    valid = frame.filter(pl.col("valid") & pl.col(block).is_not_null()
                         & pl.col("condition").is_in([base, *drops.values()]))
    rows = []
    acc = _block_accuracy(valid, block, ["condition"])
    for (model, prompt, split), g in sorted(acc.partition_by(["model", "prompt", "split"], as_dict=True).items()):
        wide = g.pivot("condition", index=block, values="acc")
        if not all(c in wide.columns for c in [base, *drops.values()]):
            continue
        wide = wide.drop_nulls()
        drop = {m: (wide[base] - wide[c]).to_numpy() for m, c in drops.items()}
        for a, b in tests.drop_pairs:
            stat, p = _safe(wilcoxon, drop[a], drop[b])
            rows.append(_row(protocol, model, prompt, split, "wilcoxon", f"{a}_vs_{b}", stat,
                             float(np.mean(drop[a] - drop[b])) if len(wide) else np.nan, p, len(wide)))
    return rows


def friedman_tests(frame: pl.DataFrame, protocol: str, tests: ConditionTests) -> list[dict]:
    """Per prompt x split x value of ``tests.level``: models as treatments, blocks as blocks, per-block accuracy as
    the observation (blocks every model answered; three or more models)."""
    from scipy.stats import friedmanchisquare

    block, level = tests.block, tests.level
    valid = frame.filter(pl.col("valid") & pl.col(block).is_not_null())
    rows = []
    acc = _block_accuracy(valid, block, [level])
    for (prompt, split, k), g in sorted(acc.partition_by(["prompt", "split", level], as_dict=True).items()):
        wide = g.pivot("model", index=block, values="acc").drop_nulls()
        models = sorted(c for c in wide.columns if c != block)
        if len(models) < 3 or len(wide) < 2:
            continue
        stat, p = _safe(friedmanchisquare, *(wide[m].to_numpy() for m in models))
        rows.append(_row(protocol, f"all ({len(models)})", prompt, split, "friedman", f"{level}={k}", stat, np.nan,
                         p, len(wide)))
    return rows


def exact_mcnemar(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(statistic, p) of the exact McNemar test (statsmodels) of two right/wrong vectors over the same answers: the
    2x2 table rows are x right / wrong, columns y right / wrong, so the discordant cells are x-only and y-only."""
    from statsmodels.stats.contingency_tables import mcnemar

    x, y = np.asarray(x, dtype=bool), np.asarray(y, dtype=bool)
    table = [[int(np.sum(x & y)), int(np.sum(x & ~y))], [int(np.sum(~x & y)), int(np.sum(~x & ~y))]]
    return _safe(mcnemar, table, exact=True)


def mcnemar_tests(frame: pl.DataFrame, protocol: str, baseline: str) -> list[dict]:
    base = frame.filter(pl.col("valid") & (pl.col("condition") == baseline))
    rows = []
    for (prompt, split), g in sorted(base.partition_by(["prompt", "split"], as_dict=True).items()):
        wide = g.group_by(["item_id", "model"]).agg(pl.col("correct").mean() >= 0.5) \
            .pivot("model", index="item_id", values="correct")
        models = sorted(c for c in wide.columns if c != "item_id")
        for a, b in itertools.combinations(models, 2):
            pair = wide.select(a, b).drop_nulls()
            x, y = pair[a].to_numpy(), pair[b].to_numpy()
            stat, p = exact_mcnemar(x, y)
            rows.append(_row(protocol, pair_label(a, b), prompt, split, "mcnemar", baseline, stat,
                             float(x.mean() - y.mean()) if len(pair) else np.nan, p, len(pair), (a, b)))
    return rows


def permutation_tests(frame: pl.DataFrame, permutations: int, seed: int) -> list[dict]:
    valid = frame.filter("valid")
    rows = []
    for (protocol, model, split), g in sorted(valid.partition_by(["protocol", "model", "split"],
                                                                 as_dict=True).items()):
        wide = g.group_by([CLUSTER, "item_id", "condition", "prompt"]) \
            .agg(pl.col("correct").cast(pl.Float64).mean()) \
            .pivot("prompt", index=[CLUSTER, "item_id", "condition"], values="correct")
        prompts = sorted(c for c in wide.columns if c not in (CLUSTER, "item_id", "condition"))
        if {"zs", "cot"} <= set(prompts):
            prompts = ["zs", "cot", *[p for p in prompts if p not in ("zs", "cot")]]
        for a, b in itertools.combinations(prompts, 2):
            per_item = wide.drop_nulls([a, b]).group_by(CLUSTER).agg((pl.col(b) - pl.col(a)).mean().alias("d"))
            d = np.ascontiguousarray(per_item.sort(CLUSTER)["d"].to_numpy(), dtype=np.float64)
            stream = keyed_seed(0, "permutation", protocol, model, split, a, b)
            estimate, p = sign_flip_test(d, permutations, np.uint64(seed % 2**64), np.uint64(stream))
            rows.append(_row(protocol, model, f"{a}|{b}", split, "permutation", f"{b}_vs_{a}", estimate, estimate,
                             p, len(d)))
    return rows


def model_permutation_tests(frame: pl.DataFrame, permutations: int, seed: int,
                            model_order: list[str] | None = None) -> list[dict]:
    """``model_order``: the models in order of first appearance among the asked rows of the whole input (default:
    this frame's), which orients each pair."""
    valid = frame.filter("valid")
    if model_order is None:
        model_order = frame["model"].unique(maintain_order=True).to_list()
    order = {m: i for i, m in enumerate(model_order)}
    rows = []
    for (protocol, prompt, split), g in sorted(valid.partition_by(["protocol", "prompt", "split"],
                                                                  as_dict=True).items()):
        wide = g.group_by([CLUSTER, "item_id", "condition", "model"]) \
            .agg(pl.col("correct").cast(pl.Float64).mean()) \
            .pivot("model", index=[CLUSTER, "item_id", "condition"], values="correct")
        models = sorted((c for c in wide.columns if c not in (CLUSTER, "item_id", "condition")),
                        key=order.__getitem__)
        conditions = sorted(wide["condition"].unique().to_list())
        for a, b in itertools.combinations(models, 2):
            pair = wide.drop_nulls([a, b])
            for comparison in ["all", *conditions] if len(conditions) > 1 else ["all"]:
                sel = pair if comparison == "all" else pair.filter(pl.col("condition") == comparison)
                per_item = sel.group_by(CLUSTER).agg((pl.col(a) - pl.col(b)).mean().alias("d")).sort(CLUSTER)
                d = np.ascontiguousarray(per_item["d"].to_numpy(), dtype=np.float64)
                if not len(d):
                    continue
                stream = keyed_seed(0, "permutation_models", protocol, prompt, split, a, b, comparison)
                estimate, p = sign_flip_test(d, permutations, np.uint64(seed % 2**64), np.uint64(stream))
                rows.append(_row(protocol, pair_label(a, b), prompt, split, "permutation_models", comparison,
                                 estimate, estimate, p, len(d), (a, b)))
    return rows


def open_tests(frame: pl.DataFrame, permutations: int, seed: int, judges: list[str] | None = None) -> list[dict]:
    """``mcq_vs_open`` and ``mcnemar_judges`` on a prepared frame holding open rows (nothing without judges).
    ``judges``: the judges of the whole input where ``frame`` holds part of it (default: ``frame``'s)."""
    from omnieval.stats.open_metrics import judges_of, open_frame

    opened = frame.filter(pl.col("mode") == "open")
    if judges is None or not len(opened):
        judges = judges_of(opened) if len(opened) else []
    if not judges:
        return []
    graded = open_frame(opened, judges).with_columns(
        right_mean=pl.mean_horizontal([pl.when(pl.col(f"ok{i}")).then(pl.col(f"right{i}").cast(pl.Float64))
                                       for i in range(len(judges))]))
    unit = ["protocol", "model", "prompt", "split"]
    rows = []
    mcq = frame.filter((pl.col("mode") != "open") & pl.col("valid")).select(
        *unit, "instance_id", "item_id", mcq_correct=pl.col("correct").cast(pl.Float64))
    paired = graded.join(mcq, on=[*unit, "instance_id", "item_id"], how="inner")
    columns = [(f"@{j}", f"right{i}", f"ok{i}") for i, j in enumerate(judges)]
    if len(judges) > 1:
        columns.append(("", "right_mean", None))
    for key, g in sorted(paired.partition_by(unit, as_dict=True).items()):
        for suffix, right, ok in columns:
            sel = g.filter(pl.col(ok)) if ok else g.filter(pl.col(right).is_not_null())
            per_item = sel.group_by(CLUSTER).agg(
                (pl.col("mcq_correct") - pl.col(right).cast(pl.Float64)).mean().alias("d")).sort(CLUSTER)
            d = np.ascontiguousarray(per_item["d"].to_numpy(), dtype=np.float64)
            if not len(d):
                continue
            stream = keyed_seed(0, "mcq_vs_open", *key, suffix)
            estimate, p = sign_flip_test(d, permutations, np.uint64(seed % 2**64), np.uint64(stream))
            rows.append(_row(*key, "mcq_vs_open", f"mcq_vs_open{suffix}", estimate, estimate, p, len(d)))
    for key, g in sorted(graded.partition_by(unit, as_dict=True).items()):
        for (i, a), (j, b) in itertools.combinations(enumerate(judges), 2):
            both = g.filter(pl.col(f"ok{i}") & pl.col(f"ok{j}"))
            if both.is_empty():
                continue
            x, y = both[f"right{i}"].to_numpy(), both[f"right{j}"].to_numpy()
            stat, p = exact_mcnemar(x, y)
            rows.append(_row(*key, "mcnemar_judges", f"{a} vs {b}", stat, float(x.mean() - y.mean()), p, len(both)))
    return rows


def adjust_p(table: pl.DataFrame) -> pl.DataFrame:
    """``p_adjusted`` within a family: test x protocol x prompt x split (permutation: test x protocol;
    ``multiple_testing.adjust_tests``)."""
    return adjust_tests(table)


def stats_table(predictions: pl.DataFrame, permutations: int = 10_000, seed: int = 0,
                cluster: ClusterChoice = None, model_order: list[str] | None = None,
                judges: list[str] | None = None) -> pl.DataFrame:
    """All tests of a predictions frame (as returned by ``read_predictions``) as one table: a protocol's tests on its
    conditions (its ``ProtocolMetrics.tests``: Wilcoxon and Friedman first, McNemar after the permutation tests),
    the permutation tests of every protocol (over the units ``cluster`` names: ``stats.clusters``), the open-ended
    tests. ``model_order``: how model pairs are oriented (``model_permutation_tests``; ``stats.distributed``
    passes the whole input's to a task holding one protocol); ``judges``: the open rows' judges of the whole input
    (``open_tests``; default: the frame's)."""
    from omnieval.protocols import metric_spec

    frame = with_clusters(prepare(predictions), cluster)
    first, last = [], []
    for protocol in sorted(frame["protocol"].unique().drop_nulls().to_list()):
        spec = metric_spec(protocol)
        if spec is None or spec.tests is None:
            continue
        part = frame.filter(pl.col("protocol") == protocol)
        part = spec.derive(part) if spec.derive is not None else part
        tests = spec.tests
        if tests.block is not None and tests.block in part.columns:
            first += wilcoxon_tests(part, protocol, tests) if tests.drops else []
            first += friedman_tests(part, protocol, tests) if tests.level in part.columns else []
        last += mcnemar_tests(part, protocol, tests.baseline)
    rows = first + permutation_tests(frame, permutations, seed)
    rows += model_permutation_tests(frame, permutations, seed, model_order)
    rows += last + open_tests(frame, permutations, seed, judges)
    schema = {c: pl.Utf8 for c in TEST_COLUMNS[:6]} | {c: pl.Float64 for c in TEST_COLUMNS[6:10]} | {
        "n": pl.Int64, "model_a": pl.Utf8, "model_b": pl.Utf8}
    table = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    return adjust_p(table)


def stats_command(paths: Iterable[str], out: str, permutations: int = 10_000, seed: int = 0,
                  cluster: ClusterChoice = None, address: str | None = None) -> int:
    """Write ``tests.csv`` and ``tests.parquet`` to ``out``; large inputs, or any with ``address`` (a Ray
    cluster), one protocol or split per Ray task (``stats.distributed``: the same table)."""
    from omnieval.stats import distributed

    start = time.perf_counter()
    paths = list(paths)
    folder = local_folder(out)  # a bad --out stops here, before the computing
    if distributed.use_ray(paths, address):
        started = distributed.connect(address)
        try:
            table = distributed.ray_tests(paths, stats_table, permutations=permutations, seed=seed, cluster=cluster)
        finally:
            if started:
                import ray

                ray.shutdown()
    else:
        table = stats_table(read_predictions(paths), permutations=permutations, seed=seed, cluster=cluster)
    folder.mkdir(parents=True, exist_ok=True)
    table.write_csv(folder / "tests.csv")
    table.write_parquet(folder / "tests.parquet")
    print(f"omnieval stats: {len(table)} tests in {time.perf_counter() - start:.1f} s -> {folder}")
    return 0
