"""Pooled runs (the report's tables over several runs, a sweep's ``combined/`` result): the naming rule
(``stats.pooling``) on hand-worked cases, and the pooled compute one group per Ray task (``stats.distributed``, each
file's models renamed by the task that reads it) against the single process, bit for bit."""

from __future__ import annotations

import functools

import polars as pl
import pytest
from polars.testing import assert_frame_equal as frames_equal

from omnieval.dev.bench_stats import synthetic_crossmodal, synthetic_dissonance
from omnieval.stats import compute as compute_module
from omnieval.stats import distributed
from omnieval.stats.compute import Inputs, Settings, compute, pool
from omnieval.stats.pooling import pooled_names

RESAMPLES = 200

assert_frame_equal = functools.partial(frames_equal, check_exact=True)  # bit for bit, not within 1e-5


def test_sibling_prompt_runs_are_one_model_and_a_run_that_ends_with_its_model_is_named_by_it():
    names = pooled_names({"sweep/m1/zs": [("m1", "zs")], "sweep/m1/cot": [("m1", "cot")],
                          "sweep/m2/zs": [("org/m2", "zs")], "other": [("x", "zs"), ("x", "cot")],
                          "zs": [("y", "zs")]})
    assert names == {"sweep/m1/zs": {"m1": "sweep/m1"}, "sweep/m1/cot": {"m1": "sweep/m1"},
                     "sweep/m2/zs": {"org/m2": "sweep/m2:org/m2"}, "other": {"x": "other:x"}, "zs": {"y": "y"}}


def test_two_runs_giving_one_model_the_same_prompt_keep_their_full_labels():
    # "a/zs" and "a" (holding zs and cot) both name their model "a:m" with prompt zs
    names = pooled_names({"a/zs": [("m", "zs")], "a": [("m", "zs"), ("m", "cot")]})
    assert names == {"a/zs": {"m": "a/zs:m"}, "a": {"m": "a:m"}}


def _samples(run: str, prompt: str) -> list[dict]:
    return [{"run": run, "model": "m1", "prompt": prompt, "mode": "mcq", "instance_id": f"i{i}", "sample": s}
            for i in range(3) for s in range(2)]


def test_repeated_samples_are_not_taken_for_a_second_run():
    """A run's repeated samples share (model, prompt, mode, instance): before the rule read the runs' models and
    prompts, they sent every run to its full label and the sibling prompts' cot - zs pair was lost."""
    pooled = pool(pl.DataFrame(_samples("s/m1/zs", "zs") + _samples("s/m1/cot", "cot")))
    assert pooled["model"].unique().to_list() == ["s/m1"]
    assert pooled.height == 12


def _runs(tmp_path) -> dict[str, list[str]]:
    """A sweep's layout: one run folder per model and prompt style (``<model>/<prompt>``), each a file of its own,
    models named as the engine names them. One run also holds crossmodal rows (the protocol filter); model01's cot
    run lacks some questions (its cot - zs pair is compared on the common ones, reading the two runs' rows again)."""
    dis = synthetic_dissonance(n_models=3, n_items=24, seed=1).with_columns(
        instance_id=pl.col("split") + ":" + pl.col("instance_id"), mode=pl.lit("mcq"))
    xm = synthetic_crossmodal(n_models=1, n_items=30, seed=2).with_columns(mode=pl.lit("mcq"), prompt=pl.lit("zs"))
    runs = {}
    for model in ("model02", "model00", "model01"):
        for prompt in ("zs", "cot"):
            rows = dis.filter((pl.col("model") == model) & (pl.col("prompt") == prompt))
            if (model, prompt) == ("model01", "cot"):
                rows = rows.filter(~pl.col("item_id").is_in(["q0", "q5", "q9"]))
            if (model, prompt) == ("model00", "zs"):
                rows = pl.concat([xm.with_columns(model=pl.lit(model)), rows], how="diagonal_relaxed")
            path = tmp_path / "runs" / model / prompt / "predictions.parquet"
            path.parent.mkdir(parents=True)
            rows.write_parquet(path, row_group_size=128)
            runs[f"sweep/{model}/{prompt}"] = [str(path)]
    return runs


@pytest.fixture
def pooled(tmp_path) -> Inputs:
    return Inputs.pooled(_runs(tmp_path), protocol="dissonance")


def test_renamed_files_name_models_as_the_single_process_pools_them(pooled):
    files = distributed.renamed(pooled.runs, pooled.protocol)
    assert [dict(f.models) for f in files] == [{"model02": "sweep/model02"}] * 2 + \
        [{"model00": "sweep/model00"}] * 2 + [{"model01": "sweep/model01"}] * 2
    want = compute_module._read(pooled)
    assert set(want["model"]) == {"sweep/model00", "sweep/model01", "sweep/model02"}
    assert distributed.plan(files, "dissonance").model_order == tuple(want["model"].unique(maintain_order=True))


def test_pooled_groups_in_process_are_the_single_process_tables(pooled):
    settings = Settings(resamples=RESAMPLES, seed=5, permutations=RESAMPLES)
    want = compute(pooled, settings)
    assert want.paired.filter(pl.col("comparison") == "prompts").height > 0
    files = distributed.renamed(pooled.runs, pooled.protocol)
    metrics, paired, groups = distributed._tables(files, RESAMPLES, 5, RESAMPLES, None, want.settings.interval, None,
                                                  None, True, distributed.in_process, "dissonance")
    assert {g.prompt for g in groups if g.metrics is not None} == {"zs", "cot"}  # one task per split and prompt
    assert set(metrics["protocol"]) == {"dissonance"}
    assert_frame_equal(metrics, want.metrics)
    assert_frame_equal(paired, want.paired)
    assert_frame_equal(distributed.gather_ranks(groups), want.ranks)


@pytest.mark.slow
def test_a_pooled_compute_above_the_threshold_goes_to_ray_and_gives_the_same_tables(ray_session, pooled,
                                                                                    monkeypatch):
    """Metrics, paired differences, ranks, tests and power of pooled runs through Ray tasks: the single process's
    tables bit for bit, the pooled predictions never read whole in this process."""
    settings = Settings(resamples=RESAMPLES, seed=5, permutations=RESAMPLES, tests=True, power=True)
    want = compute(pooled, settings)
    assert want.tests.height and want.power.height
    monkeypatch.setattr(distributed, "SCALE_THRESHOLD_ROWS", 1)

    def whole(_):
        raise AssertionError("the pooled input was read whole in the driver")
    monkeypatch.setattr(compute_module, "_read", whole)
    got = compute(pooled, settings)
    for name in ("metrics", "paired", "ranks", "tests", "power"):
        assert_frame_equal(getattr(got, name), getattr(want, name))
    assert got.units == want.units and got.n_predictions == want.n_predictions
