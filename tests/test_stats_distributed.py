"""``omnieval metrics`` one group per Ray task (``omnieval.stats.distributed``: a protocol, or one split of it with
the whole protocol's choices from a first pass, ``stats.first_pass``) against the single process: the same tables
bit for bit with one worker and with four, from per-run Parquet files read in place; each task reads only its
group's rows (predicate pushdown) and not the free-text columns (column pushdown); a refused row and a duplicate are
named by their row numbers in the files, as the single-process reader names them."""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal as frames_equal

from omnieval.core.schema import InputError
from omnieval.dev.bench_stats import synthetic_crossmodal, synthetic_dissonance
from omnieval.stats import distributed
from omnieval.stats.paired import metrics_and_paired
from omnieval.stats.read import read_predictions

RESAMPLES = 300

assert_frame_equal = functools.partial(frames_equal, check_exact=True)  # bit for bit, not within 1e-5


def _open_copy(frame: pl.DataFrame, seed: int, second_judge_in: str | None = None) -> pl.DataFrame:
    """Open-ended answers to the same instances with two judges' verdicts (the ``modes`` rows of paired); the
    second judge only on the rows of split ``second_judge_in`` where one is named."""
    rng = np.random.default_rng(seed)
    splits = frame["split"].to_list()
    verdicts = [[{"judge": judge, "verdict": "correct" if rng.random() < 0.6 else "incorrect", "raw_text": "",
                  "attempts": 1, "template": "v1"} for judge in ("ja", "jb")
                 if judge == "ja" or second_judge_in in (None, split)] for split in splits]
    return frame.with_columns(mode=pl.lit("open"), choice=pl.lit(None, pl.Utf8),
                              verdicts=pl.Series(verdicts))


def _study() -> list[pl.DataFrame]:
    """Per-run frames of two protocols, runs listed so that the first model to appear (model02, a crossmodal
    run) is not the first of the dissonance runs: the orientation of model pairs is the whole input's."""
    dis = synthetic_dissonance(n_models=3, n_items=24, seed=1).with_columns(
        instance_id=pl.col("split") + ":" + pl.col("instance_id"), mode=pl.lit("mcq"),
        reasoning=pl.lit("free text no statistic reads"))
    dis = dis.with_columns(  # rows a decoder could not read: error rates on one protocol and one of its splits only
        error=pl.when((pl.int_range(pl.len()) % 97 == 5) & (pl.col("split") == "real")).then(pl.lit("decode failed"))
        .otherwise(None))
    dis = dis.with_columns(  # a second confidence method in one split: every confidence metric gets its @method
        confidence_method=pl.when((pl.col("split") == "synthetic") & (pl.col("model") == "model00"))
        .then(pl.lit("tp")).otherwise(pl.col("confidence_method")))
    xm = synthetic_crossmodal(n_models=3, n_items=80, seed=2).with_columns(mode=pl.lit("mcq"))
    runs = []
    for model in ("model02", "model00", "model01"):
        run = xm.filter(pl.col("model") == model)
        if model == "model00":  # modes rows in both protocols: all of them follow every protocol's pairs
            run = pl.concat([run, _open_copy(run, 4)], how="diagonal_relaxed")
        runs.append(run)
    for model in ("model00", "model01", "model02"):
        run = dis.filter(pl.col("model") == model)
        if model == "model01":
            run = pl.concat([run, _open_copy(run.filter(pl.col("prompt") == "zs"), 3, second_judge_in="real")],
                            how="diagonal_relaxed")
        runs.append(run)
    return runs


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    paths = []
    for i, run in enumerate(_study()):
        path = folder / f"run{i}" / "predictions.parquet"
        path.parent.mkdir()
        run.write_parquet(path, row_group_size=256)  # several row groups: the protocol filter skips some
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def single_process(run_files):
    return metrics_and_paired(read_predictions(run_files), resamples=RESAMPLES, seed=3, permutations=RESAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 4])
def test_ray_tasks_give_the_single_process_tables_bit_for_bit(ray_session, run_files, single_process, workers):
    metrics, paired, groups = distributed.ray_tables(run_files, resamples=RESAMPLES, seed=3,
                                                     permutations=RESAMPLES, workers=workers)
    want_metrics, want_paired = single_process
    assert {(g.protocol, g.split) for g in groups} == {("crossmodal", None), ("dissonance", "real"),
                                                       ("dissonance", "synthetic")}
    assert sum(g.n_predictions for g in groups) == len(read_predictions(run_files))
    assert set(want_paired.filter(pl.col("comparison") == "modes")["protocol"]) == {"crossmodal", "dissonance"}
    assert set(want_paired["comparison"]) == {"models", "prompts", "modes"}
    assert want_metrics["metric"].str.starts_with("error_rate").any()
    assert_frame_equal(metrics, want_metrics)  # every value, interval and count, and the row order
    assert_frame_equal(paired, want_paired)


def _in_process(paths, random: str | None = None, facts: bool = True) -> list[distributed.GroupResult]:
    """``ray_tables``'s groups without Ray (``facts=False``: each split's task left to its own rows' choices)."""
    found = distributed.plan(paths)
    if random:  # crossmodal has one prompt style: its task alone would refuse the factor the input has
        distributed.check_random(paths, random)
    return [distributed.group_tables(paths, protocol, found.model_order, RESAMPLES, 3, RESAMPLES, None, "t", random,
                                     split, known if facts else None)
            for protocol, split, known, _ in distributed.groups(paths, found, random=random,
                                                                each=distributed.in_process)]


def test_groups_in_process_match_and_model_pairs_keep_the_input_order(run_files, single_process):
    """The task bodies without Ray: gathering the groups' rows (dissonance one task per split, crossmodal, which
    has one split, one task) gives the same tables, ranks included; model pairs are oriented by the whole input's
    first appearance (model02 first), not by the dissonance runs' own (model00 first)."""
    from omnieval.stats.paired import Collector
    from omnieval.stats.ranks import ranks_table

    found = distributed.plan(run_files)
    assert found.model_order == ("model02", "model00", "model01")
    groups = _in_process(run_files)
    assert {(g.protocol, g.split) for g in groups} == {("crossmodal", None), ("dissonance", "real"),
                                                       ("dissonance", "synthetic")}
    metrics, paired = distributed.gather(groups)
    assert_frame_equal(metrics, single_process[0])
    assert_frame_equal(paired, single_process[1])
    pairs = paired.filter((pl.col("protocol") == "dissonance") & (pl.col("comparison") == "models"))
    assert ("model02", "model00") in set(zip(pairs["a"], pairs["b"], strict=True))
    collector = Collector()
    metrics_and_paired(read_predictions(run_files), resamples=RESAMPLES, seed=3, permutations=RESAMPLES,
                       collector=collector)
    want_ranks = ranks_table(collector.units, single_process[1], RESAMPLES, single_process[0])
    assert set(want_ranks["split"]) >= {"real", "synthetic"}
    assert_frame_equal(distributed.gather_ranks(groups), want_ranks)


def test_split_tasks_need_the_whole_protocols_choices(run_files, single_process):
    """Without the first pass's facts, the synthetic split's task would leave out what only the real split has: an
    error kind's rate and each judge's own rows (the second judge grades in the real split only); and the real
    split's task the ``@rs`` suffix that the synthetic split's ``tp`` confidences put on every confidence key."""
    metrics, _ = distributed.gather(_in_process(run_files, facts=False))
    want = single_process[0].filter((pl.col("protocol") == "dissonance") & (pl.col("split") == "synthetic"))
    got = metrics.filter((pl.col("protocol") == "dissonance") & (pl.col("split") == "synthetic"))
    missing = want.join(got, on=["model", "prompt", "metric", "key"], how="anti")
    assert set(missing.filter(pl.col("metric") == "error_rate")["key"]) == {"other"}  # "decode failed": a kind
    # two judges in the protocol (the second in the real split only): each judge's own row beside the average
    assert missing.filter(pl.col("metric") == "open_accuracy")["key"].str.ends_with("@ja").any()
    real = single_process[0].filter((pl.col("protocol") == "dissonance") & (pl.col("split") == "real"))
    assert real["key"].str.ends_with("@rs").any()
    assert not metrics.filter((pl.col("protocol") == "dissonance") & (pl.col("split") == "real"))["key"] \
        .str.ends_with("@rs").any()


def test_a_task_reads_its_protocol_rows_only_and_not_the_free_text(run_files):
    frame = distributed.read_group(run_files, "crossmodal")
    assert set(frame["protocol"]) == {"crossmodal"} and frame.height == 4 * 80 * 6  # one model's open copy
    dis = distributed.read_group(run_files, "dissonance")
    assert "reasoning" not in dis.columns and "reasoning" in read_predictions(run_files[3:4]).columns


def test_a_split_task_reads_its_split_rows_alike_from_a_local_path_and_through_a_filesystem(run_files):
    """A split's rows, in the input's order, through polars' local reader and through pyarrow's scanner (what
    ``s3://`` takes; ``file://`` here), equal to the whole input's rows of that protocol and split."""
    want = read_predictions(run_files).filter((pl.col("protocol") == "dissonance") & (pl.col("split") == "real"))
    local = distributed.read_group(run_files, "dissonance", split="real")
    scanned = distributed.read_group([f"file://{p}" for p in run_files], "dissonance", split="real")
    assert_frame_equal(local, scanned)
    assert local.height == want.height > 0 and set(local["split"]) == {"real"}
    assert local["instance_id"].to_list() == want["instance_id"].to_list()
    assert_frame_equal(local, want.select(local.columns), check_dtypes=False)


def test_a_refused_row_is_named_by_its_row_in_the_file(tmp_path):
    """The crossmodal run comes first in the file: the dissonance rows' 41st is row 521, as the error says."""
    runs = _study()
    both = pl.concat([runs[0], runs[3]], how="diagonal_relaxed").with_row_index("n").with_columns(
        target=pl.when(pl.col("n") == len(runs[0]) + 40).then(pl.lit("AB")).otherwise(pl.col("target"))).drop("n")
    path = tmp_path / "bad.parquet"
    both.write_parquet(path)
    with pytest.raises(InputError) as single:
        read_predictions([path])
    with pytest.raises(InputError) as grouped:
        distributed.read_group([str(path)], "dissonance")
    assert str(grouped.value) == str(single.value) and f"row {len(runs[0]) + 41}:" in str(grouped.value)


def test_a_duplicate_across_files_is_named_by_its_rows_in_the_files(tmp_path):
    """The second file holds a crossmodal run, then a copy of the first file's 4th row: that copy is its row
    len(crossmodal) + 1, as the single-process reader names it."""
    runs = _study()
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    runs[3].head(10).write_parquet(first)
    pl.concat([runs[0], runs[3].slice(3, 1)], how="diagonal_relaxed").write_parquet(second)
    with pytest.raises(InputError) as single:
        read_predictions([first, second])
    with pytest.raises(InputError) as grouped:
        distributed.read_group([str(first), str(second)], "dissonance")
    assert str(grouped.value) == str(single.value)
    assert f"row 4 and {second} row {len(runs[0]) + 1}" in str(grouped.value)


def test_threshold_reads_the_parquet_footers(run_files):
    assert distributed.parquet_rows(run_files) == sum(len(r) for r in _study())
    assert not distributed.use_ray(run_files, None) and distributed.use_ray(run_files, "auto")


@pytest.mark.slow
def test_metrics_files_above_the_threshold_are_the_same_bytes(ray_session, run_files, monkeypatch):
    """``omnieval metrics``'s files (tables, metrics.json with its units and inputs) from the Ray path are the
    single process's bytes."""
    from omnieval.stats.command import metrics_files

    want = metrics_files(run_files, resamples=RESAMPLES, seed=3, permutations=RESAMPLES)
    monkeypatch.setattr(distributed, "SCALE_THRESHOLD_ROWS", 1)
    assert distributed.use_ray(run_files, None)
    got = metrics_files(run_files, resamples=RESAMPLES, seed=3, permutations=RESAMPLES)
    assert got.n_predictions == want.n_predictions
    assert got.files.keys() == want.files.keys()
    assert "ranks.csv" in want.files  # three models: each protocol's ranks come from its own task
    for name in want.files:
        assert got.files[name] == want.files[name], name


@pytest.mark.slow
def test_significance_tests_on_ray_are_the_single_process_table(ray_session, run_files):
    """``omnieval stats`` one protocol per task: every kind of test of both protocols, in the single process's
    order, the same p-values (keyed permutations) and the same Benjamini-Hochberg adjustment."""
    from omnieval.stats.significance import stats_table

    want = stats_table(read_predictions(run_files), permutations=RESAMPLES, seed=3)
    assert {"wilcoxon", "friedman", "permutation", "permutation_models", "mcq_vs_open"} <= set(want["test"])
    assert set(want["protocol"]) == {"crossmodal", "dissonance"}
    for workers in (1, 4):
        got = distributed.ray_tests(run_files, stats_table, permutations=RESAMPLES, seed=3, workers=workers)
        assert_frame_equal(got, want)
    models = want.filter(pl.col("test") == "permutation_models")["model"].to_list()
    assert "model02 vs model00" in models  # oriented by the whole input's first model, not dissonance's own


def test_tests_gathered_in_process_match_the_single_process_table(run_files):
    """Dissonance one task per split, crossmodal one: every kind's rows back in the single process's order (a
    split's contexts interleaved with the other's) and the permutation family (test x protocol, across splits)
    adjusted again over the gathered p-values."""
    from omnieval.stats.significance import stats_table

    want = stats_table(read_predictions(run_files), permutations=RESAMPLES, seed=3)
    found = distributed.plan(run_files)
    parts = [distributed.split_tests(run_files, "dissonance", split, stats_table, found.asked_model_order,
                                     RESAMPLES, 3, None)[2] for split in ("real", "synthetic")]
    permutation = want.filter((pl.col("test") == "permutation") & (pl.col("protocol") == "dissonance"))
    assert set(permutation["split"]) == {"real", "synthetic"}
    alone = pl.concat(parts).filter(pl.col("test") == "permutation")
    assert not np.allclose(alone.sort("model", "split")["p_adjusted"].to_numpy(),  # each split's own family
                           permutation.sort("model", "split")["p_adjusted"].to_numpy())
    got = distributed.ray_tests(run_files, stats_table, permutations=RESAMPLES, seed=3, each=distributed.in_process)
    assert_frame_equal(got, want)


def _sampled_study() -> list[pl.DataFrame]:
    """Dissonance answered three times per instance (a ``sample`` column, answers redrawn on later samples) beside
    crossmodal answered once: the variance split on one protocol only."""
    rng = np.random.default_rng(7)
    dis = synthetic_dissonance(n_models=3, n_items=24, seed=1).with_columns(
        instance_id=pl.col("split") + ":" + pl.col("instance_id"))
    samples = []
    for k in range(3):
        flip = rng.random(dis.height) < (0.3 if k else 0.0)
        samples.append(dis.with_columns(sample=pl.lit(k, pl.Int64),
                                        choice=pl.when(pl.Series(flip)).then(pl.col("target").shift(1, fill_value="A"))
                                        .otherwise(pl.col("choice"))))
    xm = synthetic_crossmodal(n_models=3, n_items=80, seed=2)
    return [xm, pl.concat(samples)]


@pytest.mark.parametrize("random", [None, "prompt"])
def test_repeated_samples_and_random_factors_reach_the_tasks(tmp_path, random):
    """A task runs the single process's own pass: the variance split (``se_*``, null on the protocol without
    repeated samples) and a random factor's pooling are the same gathered from the protocols' tasks."""
    paths = []
    for i, run in enumerate(_sampled_study()):
        paths.append(str(tmp_path / f"run{i}.parquet"))
        run.write_parquet(paths[-1])
    want = metrics_and_paired(read_predictions(paths), resamples=RESAMPLES, seed=3, permutations=RESAMPLES,
                              random=random)
    assert want[0].filter(pl.col("protocol") == "dissonance")["se_prediction"].drop_nulls().len() > 0
    assert want[0].filter(pl.col("protocol") == "crossmodal")["se_prediction"].null_count() == \
        want[0].filter(pl.col("protocol") == "crossmodal").height
    groups = _in_process(paths, random)
    assert ("dissonance", "synthetic") in {(g.protocol, g.split) for g in groups}
    metrics, paired = distributed.gather(groups)
    assert_frame_equal(metrics, want[0])
    assert_frame_equal(paired, want[1])


def test_a_protocol_whose_splits_fall_back_to_different_units_stays_one_task(tmp_path):
    """Dissonance resamples anchors; where one split has no anchors its questions are the unit there, but the
    single process decides from the whole protocol (anchors present: the unit is the anchor, a question without one
    its own cluster). A split's task alone would fall back to ``item``, so the protocol stays one task: the same
    tables."""
    dis = synthetic_dissonance(n_models=3, n_items=24, seed=1).with_columns(
        instance_id=pl.col("split") + ":" + pl.col("instance_id"),
        anchor=pl.when(pl.col("split") == "real").then(pl.col("anchor")).otherwise(None))
    paths = []
    for split in ("real", "synthetic"):
        paths.append(str(tmp_path / f"{split}.parquet"))
        dis.filter(pl.col("split") == split).write_parquet(paths[-1])
    found = distributed.plan(paths)
    firsts = distributed.in_process(distributed.group_facts, paths,
                                    [(0, ("dissonance", split, None)) for split in ("real", "synthetic")])
    assert [units for _, units in firsts] == [{"dissonance": "anchor"}, {"dissonance": "item"}]
    assert [(p, s) for p, s, _, _ in distributed.groups(paths, found, each=distributed.in_process)] == \
        [("dissonance", None)]
    want = metrics_and_paired(read_predictions(paths), resamples=RESAMPLES, seed=3, permutations=RESAMPLES)
    metrics, paired = distributed.gather(_in_process(paths))
    assert_frame_equal(metrics, want[0])
    assert_frame_equal(paired, want[1])


def test_prompt_tasks_and_the_prompt_pairs_stage_give_the_single_process_tables(run_files, single_process):
    """Dissonance (2 prompts x 2 splits x 3 models) one task per split and prompt, then one small stage per split
    for its prompt pairs (cot - zs per model) from the prompt tasks' resampled values: the same tables and ranks
    as the single process, bit for bit."""
    from omnieval.stats.paired import Collector
    from omnieval.stats.ranks import ranks_table

    metrics, paired, groups = distributed._tables(run_files, RESAMPLES, 3, RESAMPLES, None, "t", None, None, True,
                                                  distributed.in_process)
    tasks = {(g.protocol, g.split, g.prompt) for g in groups if g.metrics is not None}
    assert tasks == {("crossmodal", None, None)} | {("dissonance", s, p) for s in ("real", "synthetic")
                                                    for p in ("zs", "cot")}
    stages = [g for g in groups if g.metrics is None]
    assert sorted(g.split for g in stages) == ["real", "synthetic"]
    assert {row["comparison"] for g in stages for row in g.paired} == {"prompts"}
    assert len([row for g in stages for row in g.paired]) == \
        single_process[1].filter((pl.col("protocol") == "dissonance") & (pl.col("comparison") == "prompts")).height
    assert_frame_equal(metrics, single_process[0])
    assert_frame_equal(paired, single_process[1])
    collector = Collector()
    metrics_and_paired(read_predictions(run_files), resamples=RESAMPLES, seed=3, permutations=RESAMPLES,
                       collector=collector)
    assert_frame_equal(distributed.gather_ranks(groups),
                       ranks_table(collector.units, single_process[1], RESAMPLES, single_process[0]))


def _lone_units_study(tmp_path) -> list[str]:
    """Crossmodal, 2 prompts x 2 splits x 3 models, where model00 has answered a question fewer under cot than
    under zs (its prompt pair is compared on the common questions, in a pass reading that model's rows of both
    prompts), and where model01 under zs and model02 under cot both lack question x5: these two units share their
    clusters with each other alone, across prompts, so the single process draws them paired (index resampling),
    where a task holding one prompt would see a unit of its own and take the pattern shortcut."""
    runs = []
    for i, (prompt, split) in enumerate([(p, s) for p in ("zs", "cot") for s in ("a", "b")]):
        runs.append(synthetic_crossmodal(n_models=3, n_items=600, seed=10 + i).with_columns(
            prompt=pl.lit(prompt), split=pl.lit(split), instance_id=pl.lit(split + ":") + pl.col("instance_id")))
    xm = pl.concat(runs)
    drop = ((pl.col("model") == "model00") & (pl.col("prompt") == "cot") & (pl.col("item_id") == "x3")) | \
        ((pl.col("model") == "model01") & (pl.col("prompt") == "zs") & (pl.col("item_id") == "x5")) | \
        ((pl.col("model") == "model02") & (pl.col("prompt") == "cot") & (pl.col("item_id") == "x5"))
    xm = xm.filter(~drop)
    paths = []
    for model in ("model00", "model01", "model02"):
        paths.append(str(tmp_path / f"{model}.parquet"))
        xm.filter(pl.col("model") == model).write_parquet(paths[-1])
    return paths


def test_prompt_tasks_draw_paired_the_units_that_share_clusters_across_prompts(tmp_path):
    from omnieval.protocols import metric_spec
    from omnieval.stats.bootstrap import _compress, _pattern_shortcut, shared_item_sets, unit_data
    from omnieval.stats.clusters import with_clusters
    from omnieval.stats.read import prepare

    paths = _lone_units_study(tmp_path)
    frame = read_predictions(paths)
    spec = metric_spec("crossmodal")
    part = with_clusters(prepare(frame), None)
    units = {u.key: u for u in unit_data(part if spec.derive is None else spec.derive(part), spec)}
    lone, other = ("model01", "zs", "a"), ("model02", "cot", "a")
    assert lone in shared_item_sets(list(units.values()))
    assert {k for k, u in units.items() if u.cluster_ids == units[lone].cluster_ids and k[2] == "a"} == \
        {other, lone}
    # alone in its prompt's task, the unit would be resampled through the shortcut: other draws
    assert _pattern_shortcut(_compress(np.hstack([units[lone].sums, units[lone].counts]))[0],
                             units[lone].n_clusters) is not None
    want = metrics_and_paired(frame, resamples=RESAMPLES, seed=3, permutations=RESAMPLES)
    metrics, paired, groups = distributed._tables(paths, RESAMPLES, 3, RESAMPLES, None, "t", None, None, True,
                                                  distributed.in_process)
    assert {(g.split, g.prompt) for g in groups if g.metrics is not None} == \
        {(s, p) for s in ("a", "b") for p in ("zs", "cot")}
    assert_frame_equal(metrics, want[0])
    assert_frame_equal(paired, want[1])
    model00 = paired.filter((pl.col("comparison") == "prompts") & (pl.col("model") == "model00")
                            & (pl.col("split") == "a"))
    assert set(model00["n_items"]) == {599}  # compared on the 599 questions both prompts answered


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 4])
def test_prompt_tasks_on_ray_are_the_single_process_tables(ray_session, tmp_path, workers):
    paths = _lone_units_study(tmp_path)
    want = metrics_and_paired(read_predictions(paths), resamples=RESAMPLES, seed=3, permutations=RESAMPLES)
    metrics, paired, groups = distributed.ray_tables(paths, resamples=RESAMPLES, seed=3, permutations=RESAMPLES,
                                                     workers=workers)
    assert len([g for g in groups if g.prompt is not None]) == 4
    assert_frame_equal(metrics, want[0])
    assert_frame_equal(paired, want[1])


@pytest.mark.parametrize("across", ["splits", "protocols", "one group"])
def test_a_duplicate_in_two_groups_is_refused_as_the_single_process_refuses_it(tmp_path, across):
    """The same (model, prompt, mode, instance) written in two splits of a protocol, in two protocols, or twice
    in one group: each task alone holds one copy in the first two cases; the driver finds the shared key from the
    tasks' digests and names both rows as the single-process reader does."""
    runs = _study()
    dis = runs[3].filter(pl.col("prompt") == "zs")
    copy = dis.filter(pl.col("split") == "real").slice(7, 1)
    if across == "splits":
        copy = copy.with_columns(split=pl.lit("synthetic"))
    elif across == "protocols":  # a crossmodal row given the dissonance row's instance
        copy = runs[1].filter(pl.col("mode") == "mcq").slice(0, 1).with_columns(
            model=copy["model"], prompt=copy["prompt"], instance_id=copy["instance_id"])
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    dis.write_parquet(first)
    pl.concat([runs[0], copy], how="diagonal_relaxed").write_parquet(second)
    with pytest.raises(InputError) as single:
        read_predictions([first, second])
    with pytest.raises(InputError) as grouped:
        distributed._tables([str(first), str(second)], RESAMPLES, 3, RESAMPLES, None, "t", None, None, True,
                            distributed.in_process)
    assert str(grouped.value) == str(single.value)
    assert f"{first} row 8 and {second} row {len(runs[0]) + 1}" in str(grouped.value)
