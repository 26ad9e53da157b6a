"""``omnieval power`` and ``compute``'s tests and power one split per Ray task (``stats.distributed.ray_power``,
``ray_tests``) against the single process: the same tables bit for bit in process, with one worker and with four;
the models taken in the order of the whole input's multiple-choice rows; a protocol whose splits would take
different resampling units computed again as one task; a prediction given in two splits refused as the reader
refuses it; ``compute`` on Ray never reading the whole input in the driver."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from omnieval.core.schema import InputError
from omnieval.dev.bench_stats import synthetic_crossmodal, synthetic_dissonance
from omnieval.stats import distributed
from omnieval.stats.power import power_table
from omnieval.stats.read import read_predictions
from tests.test_stats_distributed import _open_copy

RESAMPLES = 100


def _exactly(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Every value the same bits (polars' own check allows a relative 1e-5), the row order and the types."""
    assert_frame_equal(got, want, check_exact=True)


def _crossmodal() -> pl.DataFrame:
    """Crossmodal in two splits (items parted by parity) and two prompts (``cot`` answers redrawn on a third of
    the rows), three models."""
    rng = np.random.default_rng(5)
    xm = synthetic_crossmodal(n_models=3, n_items=40, seed=2).with_columns(
        split=pl.when(pl.col("item_id").str.slice(1).cast(pl.Int64) % 2 == 0).then(pl.lit("even"))
        .otherwise(pl.lit("odd")), mode=pl.lit("mcq"))
    flip = pl.Series(rng.random(xm.height) < 0.33)
    cot = xm.with_columns(prompt=pl.lit("cot"),
                          choice=pl.when(flip).then(pl.col("target").shift(1, fill_value="A"))
                          .otherwise(pl.col("choice")))
    return pl.concat([xm, cot])


def _study() -> list[pl.DataFrame]:
    """Per-run frames of two protocols x two splits x two prompts x three models. The first rows of the input are
    model01's open-ended answers, then model00's rows it was not asked (``skipped``): the first model to appear
    among the multiple-choice rows power reads (model02) is neither the first model of the input nor the first
    asked one."""
    dis = synthetic_dissonance(n_models=3, n_items=24, seed=1).with_columns(
        instance_id=pl.col("split") + ":" + pl.col("instance_id"), mode=pl.lit("mcq"))
    xm = _crossmodal()
    not_asked = (pl.col("model") == "model00") & (pl.col("item_id").is_in(["x0", "x1", "x3"]))
    first = pl.concat([_open_copy(dis.filter((pl.col("model") == "model01") & (pl.col("prompt") == "zs")), 3),
                       xm.filter(not_asked).with_columns(skipped=pl.lit("audio"))], how="diagonal_relaxed")
    runs = [first]
    runs += [xm.filter((pl.col("model") == model) & ~not_asked) for model in ("model02", "model00", "model01")]
    runs += [dis.filter(pl.col("model") == model) for model in ("model00", "model01", "model02")]
    return runs


def _write(runs: list[pl.DataFrame], folder) -> list[str]:
    paths = []
    for i, run in enumerate(runs):
        path = folder / f"run{i}" / "predictions.parquet"
        path.parent.mkdir()
        run.write_parquet(path, row_group_size=256)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    return _write(_study(), tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def single_process(run_files):
    return power_table(read_predictions(run_files))


def _recording(jobs: list):
    """``distributed.in_process`` that notes each task's (protocol, split)."""
    def each(body, paths, given, workers=None):
        jobs.extend(args[:2] for _, args in given)
        return distributed.in_process(body, paths, given, workers)
    return each


def test_power_tasks_in_process_give_the_single_process_table(run_files, single_process):
    """One task per split of each protocol: the rows of every protocol, prompt, split and condition, in
    ``power_table``'s order, bit for bit; the models taken in the order of the whole input's asked
    multiple-choice rows, not the input's first appearance (model01's open rows, model00's skipped ones)."""
    found = distributed.plan(run_files)
    assert found.model_order == ("model01", "model00", "model02")
    assert found.asked_model_order == ("model01", "model02", "model00")
    assert distributed.power_model_order(run_files) == ("model02", "model00", "model01")
    assert single_process.select("protocol", "prompt", "split").unique().height == 8
    assert set(single_process["correlation_source"]) == {"observed (3 pairs)"}
    jobs: list = []
    got = distributed.ray_power(run_files, power_table, each=_recording(jobs))
    assert sorted(jobs) == [("crossmodal", "even"), ("crossmodal", "odd"), ("dissonance", "real"),
                            ("dissonance", "synthetic")]
    _exactly(got, single_process)


def test_power_options_and_a_protocol_filter_reach_the_tasks(run_files):
    """``effect``, ``alpha``, ``power`` and ``correlation`` as ``power_table`` takes them; ``protocol``: that
    protocol's rows alone, the models in their order there (as ``compute`` reads one protocol)."""
    options = {"effect": 0.05, "alpha": 0.1, "power": 0.9, "correlation": 0.3}
    whole = read_predictions(run_files)
    want = power_table(whole, cluster="item", **options)
    assert want["items_needed"].drop_nulls().len() == want.height
    got = distributed.ray_power(run_files, power_table, cluster="item", each=distributed.in_process, **options)
    _exactly(got, want)
    want = power_table(whole.filter(pl.col("protocol") == "dissonance"))
    got = distributed.ray_power(run_files, power_table, each=distributed.in_process, protocol="dissonance")
    assert set(got["protocol"]) == {"dissonance"}
    _exactly(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 4])
def test_power_on_ray_is_the_single_process_table(ray_session, run_files, single_process, workers):
    _exactly(distributed.ray_power(run_files, power_table, workers=workers), single_process)


@pytest.mark.parametrize("cluster", [None, "anchor"])
def test_a_protocol_whose_splits_take_different_units_is_computed_again_whole(tmp_path, cluster):
    """Dissonance without anchors in its synthetic split: by its default unit that split alone falls back to the
    question, and a named ``anchor`` is refused there alone, while the whole protocol has anchors (a question
    without one its own cluster). The protocol is computed again as one task: the single process's table."""
    dis = synthetic_dissonance(n_models=3, n_items=24, n_anchors=6, seed=1).with_columns(
        instance_id=pl.col("split") + ":" + pl.col("instance_id"),
        anchor=pl.when(pl.col("split") == "real").then(pl.col("anchor")).otherwise(None))
    paths = _write([dis.filter(pl.col("split") == split) for split in ("real", "synthetic")], tmp_path)
    want = power_table(read_predictions(paths), cluster=cluster)
    assert (want.filter(pl.col("split") == "real")["n_clusters"] < 24).all()  # anchors: fewer clusters
    jobs: list = []
    got = distributed.ray_power(paths, power_table, cluster=cluster, each=_recording(jobs))
    assert jobs == [("dissonance", "real"), ("dissonance", "synthetic"), ("dissonance", None)]
    _exactly(got, want)


def test_a_prediction_in_two_splits_is_refused_as_the_single_process_refuses_it(tmp_path):
    runs = _study()
    copy = runs[4].filter(pl.col("split") == "real").slice(2, 1).with_columns(split=pl.lit("synthetic"))
    paths = _write([runs[4], copy], tmp_path)
    with pytest.raises(InputError) as single:
        read_predictions(paths)
    with pytest.raises(InputError) as grouped:
        distributed.ray_power(paths, power_table, each=distributed.in_process)
    assert str(grouped.value) == str(single.value)
    assert f"{paths[0]} row 3 and {paths[1]} row 1" in str(grouped.value)


@pytest.mark.slow
def test_compute_on_ray_never_reads_the_whole_input_and_gives_the_same_result(ray_session, run_files,
                                                                              monkeypatch):
    """``compute`` with tests and power through Ray (``address``): the single process's tests, power, metrics and
    prediction count, the driver never reading the predictions whole."""
    from omnieval.stats import compute as compute_module
    from omnieval.stats import read
    from omnieval.stats.compute import Inputs, Settings, compute

    inputs = Inputs(paths=tuple(run_files))
    settings = Settings(resamples=RESAMPLES, permutations=RESAMPLES, seed=3, tests=True, power=True)
    want = compute(inputs, settings)
    assert want.tests is not None and want.tests.height and want.power is not None

    def whole(*_, **__):
        raise AssertionError("the driver read the whole input")
    monkeypatch.setattr(compute_module, "_read", whole)
    monkeypatch.setattr(read, "read_predictions", whole)
    for metrics in (True, False):
        got = compute(inputs, Settings(resamples=RESAMPLES, permutations=RESAMPLES, seed=3, tests=True, power=True,
                                       address="auto", metrics=metrics))
        _exactly(got.tests, want.tests)
        _exactly(got.power, want.power)
        assert got.n_predictions == want.n_predictions == sum(len(r) for r in _study())
        if metrics:
            _exactly(got.metrics, want.metrics)
            _exactly(got.paired, want.paired)


@pytest.mark.slow
def test_the_power_command_above_the_threshold_writes_the_single_process_table(ray_session, run_files, tmp_path,
                                                                              monkeypatch, capsys):
    from omnieval.stats.power import power_command

    power_command(run_files, str(tmp_path / "one"))
    monkeypatch.setattr(distributed, "SCALE_THRESHOLD_ROWS", 1)
    monkeypatch.setattr("omnieval.stats.read.read_predictions", _never)
    power_command(run_files, str(tmp_path / "ray"))
    for name in ("power.csv", "power.parquet"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name


def _never(*_, **__):
    raise AssertionError("read whole")


def test_a_jsonl_input_is_read_whole_for_the_order_and_filtered_in_its_tasks(tmp_path):
    """A file without Parquet's column index (JSONL) beside a Parquet one: the driver reads it whole for the
    models' order, each task reads it whole and keeps its split; the single process's table."""
    runs = _study()
    parquet, jsonl = tmp_path / "xm.parquet", tmp_path / "dis.jsonl"
    pl.concat(runs[1:4]).write_parquet(parquet)
    pl.concat(runs[4:]).write_ndjson(jsonl)
    paths = [str(jsonl), str(parquet)]
    assert distributed.power_model_order(paths) == ("model00", "model01", "model02")
    want = power_table(read_predictions(paths))
    jobs: list = []
    _exactly(distributed.ray_power(paths, power_table, each=_recording(jobs)), want)
    assert len(jobs) == 4
