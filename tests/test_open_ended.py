"""Open-ended runs with judges, and cascades (describe, then answer), end to end through the Ray pipeline on the
synthetic benchmark's real media files: first with simulated models of set behaviour (known answers), then with
tiny random-weight transformers models through the real engine code (free text, judge verdicts that a random
model cannot phrase, so the retry and the invalid path run for real)."""

from __future__ import annotations

import itertools
import json
import math

import polars as pl
import pyarrow.parquet as pq
import pytest

from omnieval.config import parse_run_config
from omnieval.core.schema import InputError
from omnieval.run.pipeline import run_evaluation
from omnieval.run.plan import make_plan
from omnieval.stats.metrics import compute_metrics

pytestmark = pytest.mark.slow


def _config(bench, out, models, **kw):
    data = {"benchmark": str(bench), "output": str(out), "models": models, "prompts": kw.pop("prompts", ["zs"]),
            "decode": {"num_frames": 4, "max_side": 96}, **kw}
    return parse_run_config(data)


SIM = {"name": "sim", "engine": "simulated", "options": {"seed": 1, "reliance": {"text": 1.0}}}
JUDGES = [{"name": "judge-a", "engine": "simulated", "options": {"seed": 2}},
          {"name": "judge-b", "engine": "simulated", "options": {"seed": 3, "judge_error": 0.3,
                                                                  "judge_invalid_rate": 0.5}}]


def test_open_mode_with_two_simulated_judges(ray_session, bench, tmp_path):
    config = _config(bench, tmp_path / "run", [SIM], modes=["mcq", "open"], judges=JUDGES, prompts=["zs", "cot"])
    result = run_evaluation(config, progress=False)
    df = pl.from_arrow(pq.read_table(result.predictions_path))
    n = result.n_instances * 2
    opened, mcq = df.filter(pl.col("mode") == "open"), df.filter(pl.col("mode") == "mcq")
    assert opened.height == n and mcq.height == n and df["error"].null_count() == df.height
    assert opened["choice"].null_count() == n and opened["answer_text"].null_count() == 0
    assert (opened.filter(pl.col("prompt") == "cot")["raw_text"].str.contains("Answer: ")).all()
    verdicts = opened["verdicts"].to_list()
    assert all([v["judge"] for v in vs] == ["judge-a", "judge-b"] for vs in verdicts)
    # judge-a is exact: a text-only model of reliance 1.0 answers the text's anchor; right where it is the target
    for row in opened.iter_rows(named=True):
        a = row["verdicts"][0]
        said_target = row["answer_text"] == row["reference"] and row["target"] != row["abstain_label"]
        assert (a["verdict"] == "correct") == said_target
    b = [vs[1] for vs in verdicts]
    assert any(v["attempts"] == 2 for v in b) and any(v["verdict"] is None for v in b)
    assert {v["template"] for vs in verdicts for v in vs} == {"v1"}

    table = compute_metrics([result.predictions_path], resamples=200)
    got = {(r["prompt"], r["split"], r["metric"], r["key"]): r["value"] for r in table.iter_rows(named=True)}
    for (prompt, split), rows in opened.group_by("prompt", "split"):
        exact = [vs[0]["verdict"] == "correct" or (vs[0]["verdict"] == "abstained" and t == ab)
                 for vs, t, ab in zip(rows["verdicts"], rows["target"], rows["abstain_label"], strict=True)]
        assert got[(prompt, split, "open_accuracy", "all@judge-a")] == pytest.approx(sum(exact) / len(exact))
        assert (prompt, split, "judge_kappa", "cohen") in got and (prompt, split, "mcq_open_gap", "C000") in got

    # A resubmitted run does no model or judge work.
    again = run_evaluation(config, progress=False)
    assert again.n_rows == 0 and again.n_skipped == n * 2
    assert pq.read_table(again.predictions_path).equals(pq.read_table(result.predictions_path))


def test_simulated_audio_cascade_marks_rows_and_keeps_the_descriptions(ray_session, bench, tmp_path):
    cascade = dict(SIM, name="sim+audio-desc", describe={"model": {"name": "describer", "engine": "simulated"}})
    result = run_evaluation(_config(bench, tmp_path / "run", [SIM, cascade]), progress=False)
    df = pl.from_arrow(pq.read_table(result.predictions_path))
    rows = df.filter(pl.col("model") == "sim+audio-desc")
    assert rows.height == result.n_instances and rows["error"].null_count() == rows.height
    assert (rows["cascade"] == "describer:audio").all()
    assert (rows["stage_engines"] == "describe=simulated:describer;answer=simulated:sim+audio-desc").all()
    texts = [json.loads(t) for t in rows["intermediate_text"]]
    assert all(len(t) == 1 and next(iter(t)).endswith(".wav") for t in texts)
    assert all(v.startswith("audio showing ") for t in texts for v in t.values())
    assert df.filter(pl.col("model") == "sim")["cascade"].null_count() == result.n_instances
    # one description per distinct audio file
    described = pq.read_table(tmp_path / "run" / "descriptions" / "describer").to_pylist()
    assert len(described) == len({p for t in texts for p in t})


def test_open_mode_and_describers_need_generation_and_judges(bench, tmp_path):
    with pytest.raises(InputError, match="needs at least one judge"):
        _config(bench, tmp_path / "r", [SIM], modes=["open"])
    vllm_judge = {"name": "v", "engine": "vllm", "options": {"path": "/nowhere", "max_tokens": 8}}
    with pytest.raises(InputError, match="unknown option.*max_tokens") as err:  # before Ray or any model starts
        make_plan(_config(bench, tmp_path / "r", [SIM], modes=["open"], judges=[JUDGES[0], vllm_judge]))
    assert err.value.field == "judges[1].options.max_tokens"


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return {arch: str(tiny_models(arch)) for arch in ("qwen2", "qwen2.5-omni")}


def test_tiny_transformers_open_answers_judges_and_audio_cascade(ray_session, bench, tmp_path, tiny):
    """Real engines: the omni thinker answers open-ended (video + audio + text in), a text model judges (its random
    replies are rarely one verdict word: retried, then invalid), and an audio cascade in which the omni model
    describes the audio and the text model answers from the description."""
    omni = {"name": "tiny-omni", "engine": "hf", "batch_size": 4, "options": {"path": tiny["qwen2.5-omni"],
                                                                              "max_new_tokens": 6}}
    judge = {"name": "tiny-judge", "engine": "hf", "options": {"path": tiny["qwen2"]}}
    cascade = {"name": "tiny-text+omni-audio", "engine": "hf", "options": {"path": tiny["qwen2"], "max_new_tokens": 6},
               "describe": {"model": omni, "max_new_tokens": 8}, "unsupported_media": "note"}
    config = _config(bench, tmp_path / "run", [omni, cascade], modes=["mcq", "open"], judges=[judge],
                     limit_items=1)
    result = run_evaluation(config, progress=False)
    df = pl.from_arrow(pq.read_table(result.predictions_path))
    assert df["error"].null_count() == df.height == 2 * 2 * 8
    opened = df.filter(pl.col("mode") == "open")
    assert opened["raw_text"].null_count() == 0 and (opened["engine"] == "hf").all()
    judged = [vs[0] for vs in opened["verdicts"]]
    assert all(v["judge"] == "tiny-judge" and v["attempts"] in (1, 2) for v in judged)
    # the strict parser's verdicts: a valid one came from a one-word reply; an invalid one was retried once
    for v in judged:
        assert v["verdict"] is not None or v["attempts"] == 2
        assert v["verdict"] is None or v["raw_text"].strip().strip(".").lower() == v["verdict"]
    assert any(v["verdict"] is None and v["attempts"] == 2 for v in judged)
    casc = df.filter(pl.col("model") == "tiny-text+omni-audio")
    assert (casc["cascade"] == "tiny-omni:audio").all()
    assert (casc["stage_engines"] == "describe=hf:tiny-omni;answer=hf:tiny-text+omni-audio").all()
    descriptions = [json.loads(t) for t in casc["intermediate_text"]]
    assert all(len(d) == 1 and all(isinstance(v, str) and v for v in d.values()) for d in descriptions)
    table = compute_metrics([result.predictions_path], resamples=50)
    invalid = table.filter(pl.col("metric") == "open_invalid_verdicts")
    for row in invalid.iter_rows(named=True):
        rows = opened.filter((pl.col("model") == row["model"]) & (pl.col("prompt") == row["prompt"])
                             & (pl.col("split") == row["split"]))
        share = sum(vs[0]["verdict"] is None for vs in rows["verdicts"]) / rows.height
        assert row["value"] == pytest.approx(share)
    assert invalid.height == opened.select("model", "prompt", "split").n_unique()
    # open accuracy exists exactly where some verdict was valid
    assert ("open_accuracy" in set(table["metric"])) == any(v["verdict"] is not None for v in judged)


def test_contrastive_caption_baseline_with_predicted_captions(ray_session, tmp_path):
    """Contra4's caption baseline with captions a describer wrote: every input of every option order is replaced by
    its description (one per distinct file, with its modality's prompt); the options keep their places. Expected
    values come from the benchmark's items.jsonl: its inputs, modalities and captions."""
    from omnieval.config import DEFAULT_DESCRIBE_PROMPTS
    from omnieval.datasets.synthetic_contrastive import make_contrastive_benchmark

    bench = make_contrastive_benchmark(tmp_path / "bench", seed=0, n_entities=4)
    items = {item["item_id"]: item for item in map(json.loads, (bench / "items.jsonl").read_text().splitlines())}
    # every input file of an item (its path in the benchmark) and its modality: a point cloud is described as a 3D
    # model even where it is shown as rendered views
    inputs = {item_id: {i["path"]: i["modality"] for i in item["inputs"]} for item_id, item in items.items()}
    assert {m for files in inputs.values() for m in files.values()} == set(DEFAULT_DESCRIBE_PROMPTS)
    # the original order and 2 sampled permutations, fewer where the inputs have fewer orders (2 inputs: 1)
    orders = {item_id: 1 + min(2, math.factorial(len(item["inputs"])) - 1) for item_id, item in items.items()}
    reader = {"name": "sim-reader", "engine": "simulated", "options": {"seed": 1, "reliance": {"text": 1.0}},
              "describe": {"model": {"name": "captioner", "engine": "simulated"},
                           "prompts": dict(DEFAULT_DESCRIBE_PROMPTS)}}
    config = _config(bench, tmp_path / "run", [reader], protocol="contrastive",
                     protocol_options={"permutations": 2})
    result = run_evaluation(config, progress=False)
    df = pl.from_arrow(pq.read_table(result.predictions_path))
    assert df.height == sum(orders.values()) and df["error"].null_count() == df.height
    assert dict(df.group_by("item_id").len().iter_rows()) == orders
    assert (df["cascade"] == "captioner:audio+image+pointcloud+video").all()
    assert set(df.filter(pl.col("condition") != "original")["condition"]) <= {
        f"perm:{''.join(p)}" for n in (2, 3, 4) for p in itertools.permutations("ABCD"[:n])}
    for row in df.iter_rows(named=True):  # the simulated describer says the modality and the file it was given
        assert json.loads(row["intermediate_text"]) == {
            path: f"{modality} showing {path}" for path, modality in inputs[row["item_id"]].items()}
    described = pq.read_table(tmp_path / "run" / "descriptions" / "captioner").to_pylist()
    every_file = {path: modality for files in inputs.values() for path, modality in files.items()}
    assert sorted(d["path"] for d in described) == sorted(every_file)  # one description per distinct file
    assert all(d["prompt"] == DEFAULT_DESCRIBE_PROMPTS[every_file[d["path"]]] and d["error"] is None
               for d in described)
    # the metrics of the predicted-caption baseline, recomputed from the predictions with plain loops
    table = compute_metrics([result.predictions_path], resamples=50)
    got = {(r["metric"], r["key"]): r["value"] for r in table.filter(pl.col("model") == "sim-reader").to_dicts()}
    original = [r for r in df.iter_rows(named=True) if r["condition"] == "original"]
    assert got[("accuracy", "all")] == pytest.approx(
        sum(r["choice"] == r["target"] for r in original) / len(original), rel=1e-12)
    right_everywhere = {}
    for r in df.iter_rows(named=True):
        right_everywhere[r["item_id"]] = right_everywhere.get(r["item_id"], True) and r["choice"] == r["target"]
    assert got[("permutation_consistency", "")] == pytest.approx(
        sum(right_everywhere.values()) / len(right_everywhere), rel=1e-12)


@pytest.mark.parametrize("protocol", ["crossmodal", "spectrum"])
def test_open_mode_on_other_protocols(ray_session, tmp_path, protocol):
    """Open-ended mode is protocol-agnostic: no options and no candidate media in the prompt, a reference in words,
    two judges' verdicts on every answer, and the open metrics in the protocol's metrics table."""
    if protocol == "crossmodal":
        from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark as make
        kwargs = {"n_entities": 4}
    else:
        from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark as make
        kwargs = {"n_items": 12}
    bench = make(tmp_path / "bench", seed=0, **kwargs)
    config = _config(bench, tmp_path / "run", [SIM], modes=["mcq", "open"], judges=JUDGES, protocol=protocol,
                     limit_items=4)
    plan = make_plan(config)
    result = run_evaluation(config, progress=False)
    df = pl.from_arrow(pq.read_table(result.predictions_path))
    opened = df.filter(pl.col("mode") == "open")
    assert opened.height == df.filter(pl.col("mode") == "mcq").height == len(plan.load_instances())
    assert opened["reference"].null_count() == 0 and opened["error"].null_count() == opened.height
    assert all(len(v) == 2 for v in opened["verdicts"].to_list())
    table = compute_metrics([result.predictions_path], resamples=50)
    got = {(r["protocol"], r["metric"], r["key"]) for r in table.to_dicts()}
    assert {(protocol, "open_accuracy", "all"), (protocol, "judge_kappa", "cohen"),
            (protocol, "mcq_open_gap", "all")} <= got
