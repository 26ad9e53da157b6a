"""Repeated samples (``stats.samples``): the variance split of the metrics table against the law of total variance
computed by hand with numpy, the one-sample table unchanged, the (instance, sample) key; and two edge cases of the
intervals: no percentile interval on one cluster, and a NaN confidence refused in a frame built in code."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.stats.intervals import intervals
from omnieval.stats.metrics import metrics_table
from omnieval.stats.paired import metrics_and_paired
from omnieval.stats.read import read_predictions


def sampled_frame(n_items: int = 200, k: int = 5, seed: int = 1, model: str = "m", shift: float = 0.0,
                  clips: int = 0) -> pl.DataFrame:
    """One model answering ``n_items`` questions ``k`` times each (column ``sample``), item i right with probability
    p_i ~ Beta(2, 2) (+ ``shift``): the data noise is the spread of the p_i, the prediction noise the k draws."""
    rng = np.random.default_rng(seed)
    p = np.clip(rng.beta(2, 2, n_items) + shift, 0, 1)
    right = rng.random((n_items, k)) < p[:, None]
    rows = [(model, "zs", "crossmodal", "all", f"x{i:03d}", f"x{i:03d}", "A->T", "A", "A" if right[i, s] else "B", s,
             f"clip{i % clips}" if clips else None)
            for i in range(n_items) for s in range(k)]
    frame = pl.DataFrame(rows, orient="row", schema=["model", "prompt", "protocol", "split", "item_id",
                                                     "instance_id", "condition", "target", "choice", "sample",
                                                     "clip"])
    return frame.with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                              confidence_method=pl.lit(None, pl.Utf8))


def outcomes(frame: pl.DataFrame) -> np.ndarray:
    """items x samples matrix of right answers (rows sorted by item, then sample)."""
    ordered = frame.sort("item_id", "sample")
    k = ordered["sample"].max() + 1
    return (ordered["choice"] == ordered["target"]).to_numpy().astype(float).reshape(-1, k)


def accuracy_row(table: pl.DataFrame, model: str = "m") -> dict:
    return table.filter((pl.col("metric") == "accuracy") & (pl.col("model") == model)).row(0, named=True)


def test_the_split_of_k_5_samples_equals_the_law_of_total_variance_by_hand():
    frame = sampled_frame()
    y = outcomes(frame)
    n, k = y.shape
    se_total = y.mean(axis=1).std(ddof=1) / np.sqrt(n)  # Var(item means) / n
    se_prediction = np.sqrt(np.mean(y.var(axis=1, ddof=1) / k) / n)  # E[within-item variance / k] / n
    se_data = np.sqrt(se_total ** 2 - se_prediction ** 2)
    row = accuracy_row(metrics_table(frame, resamples=4_000, seed=3))
    assert row["value"] == pytest.approx(y.mean())
    # bootstrap error of a standard deviation from R resamples: about 1 / sqrt(2 R) relative (1.1% - 1.6%)
    assert row["se_total"] == pytest.approx(se_total, rel=0.05)
    assert row["se_prediction"] == pytest.approx(se_prediction, rel=0.05)
    assert row["se_data"] == pytest.approx(se_data, rel=0.10)
    # the interval is the unit bootstrap's: it covers both sources, its half-width about 1.97 se_total
    assert (row["ci_high"] - row["ci_low"]) / 2 == pytest.approx(1.97 * se_total, rel=0.06)


def test_with_clusters_of_items_the_prediction_noise_is_still_within_items():
    frame = sampled_frame(n_items=120, clips=30)
    y = outcomes(frame)
    n, k = y.shape
    se_prediction = np.sqrt(np.sum(y.var(axis=1, ddof=1) / k)) / n
    clip_of = np.arange(n) % 30
    clip_means = np.array([y[clip_of == c].sum() / y[clip_of == c].size for c in range(30)])
    se_total = clip_means.std(ddof=1) / np.sqrt(30)  # equal clip sizes: the mean of clip means
    row = accuracy_row(metrics_table(frame, resamples=4_000, seed=3, cluster="clip"))
    assert row["n_clusters"] == 30
    assert row["se_total"] == pytest.approx(se_total, rel=0.05)
    assert row["se_prediction"] == pytest.approx(se_prediction, rel=0.05)


def test_one_sample_per_instance_keeps_the_table_as_it_was():
    frame = sampled_frame(k=1)
    before = metrics_table(frame.drop("sample"), resamples=500)
    after = metrics_table(frame, resamples=500)
    assert after.columns == before.columns and "se_total" not in after.columns
    assert after.equals(before)


def test_a_table_mixing_one_and_k_samples_leaves_the_one_sample_rows_without_a_split():
    frame = pl.concat([sampled_frame(k=1, model="single"), sampled_frame(k=3, model="sampled")])
    table = metrics_table(frame, resamples=500)
    assert accuracy_row(table, "single")["se_total"] is None
    assert accuracy_row(table, "sampled")["se_prediction"] > 0
    # beside a second model on the same items (so resampled the same paired way), without any samples
    plain = pl.concat([sampled_frame(k=1, model="single"), sampled_frame(k=1, model="sampled", seed=2)])
    alone = metrics_table(plain.drop("sample"), resamples=500).filter(pl.col("model") == "single")
    for column in alone.columns:  # the one-sample model's numbers are those of a table without samples
        assert table.filter(pl.col("model") == "single")[column].to_list() == alone[column].to_list()


def test_samples_of_one_instance_are_rows_of_their_own_but_one_sample_twice_is_refused(tmp_path):
    frame = sampled_frame(n_items=4, k=2)
    frame.write_csv(tmp_path / "ok.csv")
    assert len(read_predictions([tmp_path / "ok.csv"])) == 8
    pl.concat([frame, frame.head(1)]).write_csv(tmp_path / "twice.csv")
    with pytest.raises(InputError, match="instance 'x000', sample 0|instance 'x000':"):
        read_predictions([tmp_path / "twice.csv"])
    frame.with_columns(sample=pl.lit(-1)).write_csv(tmp_path / "negative.csv")
    with pytest.raises(InputError, match="field 'sample'.*negative"):
        read_predictions([tmp_path / "negative.csv"])


def test_no_percentile_interval_rests_on_one_cluster():
    values = np.vstack([np.r_[0.5, np.full(100, 0.5)], np.r_[0.5, np.linspace(0.4, 0.6, 100)]])
    low, high = intervals(values, 100, "percentile", np.array([1, 2]))
    assert np.isnan(low[0]) and np.isnan(high[0])  # docs/reference.md: no interval rests on one cluster
    assert low[1] == pytest.approx(np.quantile(values[1, 1:], 0.025))
    one_clip = sampled_frame(n_items=10, k=1, clips=1)
    row = accuracy_row(metrics_table(one_clip, resamples=200, cluster="clip", interval="percentile"))
    assert row["n_clusters"] == 1 and row["ci_low"] is None and row["ci_high"] is None


def test_a_nan_confidence_built_in_code_is_refused_as_in_a_file():
    frame = sampled_frame(n_items=10, k=1).with_columns(confidence=pl.lit(0.7), confidence_method=pl.lit("rs"))
    bad = frame.with_columns(confidence=pl.when(pl.col("item_id") == "x003").then(float("nan"))
                             .otherwise(pl.col("confidence")))
    with pytest.raises(InputError, match="item 'x003', field 'confidence'"):
        metrics_table(bad, resamples=50)


def test_a_paired_difference_splits_by_item_and_sample_index():
    a, b = sampled_frame(seed=1, model="a"), sampled_frame(seed=2, model="b", shift=-0.1)
    d = outcomes(a) - outcomes(b)  # paired by item and sample index
    n, k = d.shape
    se_total = d.mean(axis=1).std(ddof=1) / np.sqrt(n)
    se_prediction = np.sqrt(np.mean(d.var(axis=1, ddof=1) / k) / n)
    _, paired = metrics_and_paired(pl.concat([a, b]), resamples=4_000, seed=5, permutations=200)
    row = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy")).row(0, named=True)
    assert row["estimate"] == pytest.approx(d.mean())
    assert row["se_total"] == pytest.approx(se_total, rel=0.05)
    assert row["se_prediction"] == pytest.approx(se_prediction, rel=0.05)
    assert row["se_data"] == pytest.approx(np.sqrt(se_total ** 2 - se_prediction ** 2), rel=0.10)


def test_the_coverage_bench_truths_of_repeated_samples_are_the_beta_moments():
    from scipy.stats import beta

    from omnieval.dev.bench_coverage_samples import SHRINK, SampleDesign, simulate_samples

    design = SampleDesign(200, 5, 0.5, 1.5)
    p = beta(0.5, 1.5)
    within = p.expect(lambda x: x * (1 - x))  # E[p (1 - p)]: the within-item variance of one answer
    truth = design.truth()
    assert truth["accuracy"] == pytest.approx(p.mean())
    assert truth["se_data"] == pytest.approx(np.sqrt(p.var() / 200))
    assert truth["se_prediction"] == pytest.approx(np.sqrt(within / (5 * 200)))
    big = simulate_samples(SampleDesign(20_000, 2, 0.5, 1.5), np.random.default_rng(0))
    right = (big["choice"] == big["target"]).cast(pl.Float64)
    means = big.with_columns(right=right).group_by("model").agg(pl.col("right").mean()).sort("model")["right"]
    assert means[0] == pytest.approx(p.mean(), abs=0.005)
    assert means[1] == pytest.approx(SHRINK * p.mean(), abs=0.005)


def test_the_report_shows_the_split_of_a_sampled_run(tmp_path):
    from omnieval.report import report_command

    table = metrics_table(pl.concat([sampled_frame(k=5), sampled_frame(k=1, model="single", seed=4)]),
                          resamples=500)
    folder = tmp_path / "metrics"
    folder.mkdir()
    table.write_parquet(folder / "metrics.parquet")
    assert report_command([str(folder)], str(tmp_path / "out")) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Noise: data vs prediction" in md
    row = accuracy_row(table)
    share = row["se_prediction"] ** 2 / row["se_total"] ** 2
    want = (f"| {row['se_total']:.4f} | {row['se_data']:.4f} | {row['se_prediction']:.4f} | {share:.0%} |")
    assert want in md
    assert "| single |" not in md.split("Noise: data vs prediction")[1].split("\n#")[0]  # no split, no row


# ---------------------------------------------------------------------------------------------------------------
# samples: k on a model: k rows per instance through the model stage's code (``stages.call_rows``, without Ray)
# ---------------------------------------------------------------------------------------------------------------

def _instance(n: int):
    from omnieval.core.schema import Instance, Segment

    return Instance(instance_id=f"q{n}|C000", item_id=f"q{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=[Segment(kind="text", text=f"Text: fox number {n}")],
                    question="Which animal is it?", option_labels=list("ABCDE"),
                    option_texts=["a fox", "a cat", "a car", "a drum", "I cannot answer"], target="A",
                    abstain_label="E", protocol_fields={"k": 0},
                    simulation_hints={"text": "A"})


def sampled_rows(k: int, temperature: float | None = None, top_p: float | None = None, done=frozenset(),
                 n: int = 4) -> list[dict]:
    from omnieval.engines.simulated import SimulatedEngine
    from omnieval.run.answers import PredictionRows, SampleDraws, answer_requests
    from omnieval.run.stages import call_rows

    engine = SimulatedEngine("sim", reliance={"text": 0.6}, noise=1.5, margin=1.0)
    rows = list(answer_requests([_instance(i) for i in range(n)], ["mcq"], ["zs"], set(done), {},
                                draws=SampleDraws(k, 7, temperature, top_p)))
    return PredictionRows("sim", "simulated")(call_rows(engine, rows)).to_pylist()


def test_samples_k_gives_k_rows_per_instance_each_with_its_own_seed_and_label_draw():
    from omnieval.core.keyed import keyed_seed

    rows = sampled_rows(200, temperature=1.0, n=1)
    assert [r["sample"] for r in rows] == list(range(200))
    seeds = [json.loads(r["sampling"])["seed"] for r in rows]
    assert seeds == [keyed_seed(7, "sample", i) for i in range(200)]  # from the run seed and the index
    logprobs = np.array(rows[0]["option_logprobs"])
    assert all(r["option_logprobs"] == rows[0]["option_logprobs"] for r in rows)  # one model, one distribution
    want = np.exp(logprobs - logprobs.max()) / np.exp(logprobs - logprobs.max()).sum()
    got = np.array([sum(r["choice"] == c for r in rows) for c in "ABCDE"]) / len(rows)
    assert np.abs(got - want).max() < 4 * np.sqrt(want.max() * (1 - want.max()) / len(rows))
    for r in rows:  # the confidence is the drawn label's probability
        assert r["confidence"] == pytest.approx(want["ABCDE".index(r["choice"])])


def test_top_p_keeps_the_nucleus_and_one_sample_keeps_the_engine_answer():
    rows = sampled_rows(50, temperature=1.0, top_p=0.01, n=1)
    logprobs = np.array(rows[0]["option_logprobs"])
    assert {r["choice"] for r in rows} == {"ABCDE"[int(np.argmax(logprobs))]}  # only the most probable label
    single = sampled_rows(1, n=3)
    assert [r["sample"] for r in single] == [0, 0, 0] and all(r["sampling"] is None for r in single)
    for r in single:  # the engine's own answer: the argmax of its logits
        assert r["choice"] == "ABCDE"[int(np.argmax(r["option_logprobs"]))]


def test_resume_skips_the_samples_already_done_and_consolidation_keeps_each_sample():
    import pyarrow as pa

    from omnieval.core.run_outputs import consolidate

    rows = sampled_rows(3, n=2, done={("mcq", "zs", "q0|C000", 1)})
    assert sorted((r["instance_id"], r["sample"]) for r in rows) == \
        [("q0|C000", 0), ("q0|C000", 2), ("q1|C000", 0), ("q1|C000", 1), ("q1|C000", 2)]
    from omnieval.core.schema import PREDICTION_SCHEMA

    table = pa.Table.from_pylist(rows, schema=PREDICTION_SCHEMA)
    merged = consolidate([table, table])  # a part written twice: one row per (instance, sample)
    assert merged.num_rows == 5


def test_a_model_with_samples_is_refused_in_open_mode_and_its_identity_changes_only_when_set():
    from omnieval.config import ModelConfig, RunConfig
    from omnieval.run.identity import model_identity

    plain = ModelConfig(name="m", engine="simulated")
    assert "samples" not in model_identity(plain)  # configs written before keep their identity
    assert model_identity(ModelConfig(name="m", engine="simulated", samples=5))["samples"] == 5
    with pytest.raises(ValueError, match="samples: 5 repeats multiple-choice answers only"):
        RunConfig(benchmark="b", output="o", models=[ModelConfig(name="m", engine="simulated", samples=5)],
                  modes=["mcq", "open"], judges=[ModelConfig(name="j", engine="simulated")])
    with pytest.raises(ValueError, match="give samples: k"):
        RunConfig(benchmark="b", output="o", models=[ModelConfig(name="m", engine="simulated", temperature=0.7)])


def test_a_simulated_reasoning_differs_between_samples():
    from omnieval.engines.base import EngineRequest
    from omnieval.engines.simulated import SimulatedEngine

    engine = SimulatedEngine("sim", reliance={"text": 0.3}, noise=2.0)
    inst = _instance(0)
    one = [engine.score([EngineRequest(inst, prompt_style="thinking")])[0].choice for _ in range(3)]
    assert len(set(one)) == 1  # one sample: the same answer every time
    sampled = {engine.score([EngineRequest(inst, prompt_style="thinking", sample_seed=s)])[0].choice
               for s in range(40)}
    assert len(sampled) > 1


def test_a_thinking_seed_is_the_engine_seed_for_one_sample_and_the_sample_seed_for_repeats():
    from omnieval.core.keyed import keyed_seed
    from omnieval.engines.base import EngineRequest

    inst = _instance(3)
    one = EngineRequest(inst, prompt_style="thinking")
    assert one.thinking_seed(5, "m", "thinking") == keyed_seed(5, "m", "q3|C000", "thinking")  # as before samples
    repeats = [EngineRequest(inst, prompt_style="thinking", sample_seed=s).thinking_seed(5, "m", "thinking")
               for s in (11, 12)]
    assert repeats == [keyed_seed(11, "m", "q3|C000", "thinking"), keyed_seed(12, "m", "q3|C000", "thinking")]
