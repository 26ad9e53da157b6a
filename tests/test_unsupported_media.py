"""A modality a model cannot take: ``unsupported_media: skip | note | describe`` per model.

References are independent of the code under test: which instances show which media is worked out from the items
file and the protocol's directions by hand, metrics are recomputed with pandas over the rows that were asked, and
engine calls are counted on a wrapper around the real engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

DIRECTIONS = ["A->T", "A->V", "T->A", "T->V", "V->A", "V->T", "AV->T", "none->T"]


@pytest.fixture(scope="module")
def xm_bench(tmp_path_factory):
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark

    return make_crossmodal_benchmark(tmp_path_factory.mktemp("xm") / "xm", seed=0, n_entities=4)


def expected_media(bench: Path) -> dict[tuple[str, str], set[str]]:
    """(item_id, direction) -> the media modalities its prompt shows, from the items file: A is the item's audio,
    V its vision file (video, or image where an entity has no video), T text, ``none`` nothing."""
    out = {}
    for line in (Path(bench) / "items.jsonl").read_text().splitlines():
        item = json.loads(line)
        vision = "video" if "video" in item["context"] else "image"
        letter = {"A": {"audio"}, "V": {vision}, "T": set()}
        for direction in DIRECTIONS:
            source, target = direction.split("->")
            shown = set().union(*(letter[c] for c in ("" if source == "none" else source)), letter[target])
            out[(item["item_id"], direction)] = shown
    return out


def run_config(bench, out, models, **extra) -> dict:
    return {"benchmark": str(bench), "output": str(out), "models": models,
            "protocol_options": {"extra": ["AV->T", "none->T"]}, "decode": {"media_check": "exists"}, **extra}


# -- config ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "field", "words"), [
    ({"unsupported_media": "ignore"}, "models[0].unsupported_media", "'skip', 'note' or 'describe'"),
    ({"unsupported_media": "describe"}, "models[0].unsupported_media", "needs a describer"),
    ({"options": {"modalities": ["smell"]}}, "models[0].options.modalities", "modalities must be a list"),
    ({"unsupported_media": "describe", "options": {"modalities": ["audio"]},
      "describe": {"model": {"name": "d", "engine": "simulated"}, "prompts": {"audio": "Describe."}}},
     "models[0].describe.prompts", "it takes audio"),
])
def test_bad_policies_are_refused_naming_the_field(small_bench, tmp_path, model, field, words):
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError
    from omnieval.run.plan import make_plan

    data = run_config(small_bench, tmp_path / "out", [{"name": "m", "engine": "simulated", **model}])
    data.pop("protocol_options")
    with pytest.raises(InputError) as err:
        make_plan(parse_run_config(data), expand=False)
    assert f"'{field}'" in str(err.value) and words in str(err.value)


def test_sweep_models_carry_the_policy_and_refuse_describe():
    from omnieval.core.schema import InputError
    from omnieval.sweep.config import parse_sweep_config

    base = {"output": "o", "protocols": [{"protocol": "dissonance", "benchmark": "b"}]}
    sweep = parse_sweep_config(base | {"models": [{"name": "m", "engine": "simulated", "unsupported_media": "note"}]})
    assert sweep.models[0].as_model_config().unsupported_media == "note"
    with pytest.raises(InputError, match="not available in a sweep"):
        parse_sweep_config(base | {"models": [{"name": "m", "engine": "simulated", "unsupported_media": "describe",
                                              "describe": {"model": {"name": "d", "engine": "simulated"}}}]})
    # a cascade or open-ended modes in a sweep would be dropped without a word: refused, naming the field
    for extra in ({"describe": {"model": {"name": "d", "engine": "simulated"}}}, {"modes": ["mcq", "open"]}):
        with pytest.raises(InputError, match="not available in a sweep") as err:
            parse_sweep_config(base | {"models": [{"name": "m", "engine": "simulated", **extra}]})
        assert "models[0]" in str(err.value) or "models.0" in str(err.value), str(err.value)


def test_what_each_engine_takes(tiny_models, tmp_path):
    from omnieval.engines.base import OptionError, engine_class

    for arch, want in (("qwen2", set()), ("qwen2.5-omni", {"video", "audio", "image"})):
        folder = tiny_models(arch)
        assert json.loads((folder / "config.json").read_text())["model_type"].startswith("qwen2_5_omni") == bool(want)
        for engine in ("hf", "vllm"):
            assert engine_class(engine).accepted_modalities({"path": str(folder)}) == want
    # registered families (engines/families/), read from config.json alone (no processor, no weights)
    for model_type, want in (("qwen2_audio", {"audio"}), ("qwen2_5_vl", {"image", "video"}),
                             ("gemma3n", {"image", "audio"}), ("llama", set())):
        folder = tmp_path / model_type
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
        for engine in ("hf", "vllm"):
            assert engine_class(engine).accepted_modalities({"path": str(folder)}) == want, (model_type, engine)
    with pytest.raises(OptionError) as err:
        engine_class("hf").accepted_modalities({"path": str(tmp_path / "missing")})
    assert err.value.option == "path"
    assert engine_class("openai").accepted_modalities({"base_url": "http://x/v1"}) == {"image", "audio", "video"}
    assert engine_class("openai").accepted_modalities({"base_url": "http://x/v1", "modalities": []}) == set()
    assert engine_class("simulated").accepted_modalities({}) == {"video", "audio", "image", "pointcloud"}
    assert engine_class("simulated").accepted_modalities({"modalities": ["audio"]}) == {"audio"}


# -- the model is never called for a skipped row ---------------------------------------------------------------------

class Counting:
    """A real engine whose ``score`` calls are recorded (instance id per request)."""

    def __init__(self, engine):
        self.engine, self.asked = engine, []

    def score(self, requests):
        self.asked += [r.instance.instance_id for r in requests]
        return self.engine.score(requests)


def answered_in_process(engine, bench, model_config, fetch=None):
    """Request rows of every instance of ``bench`` under the model's policy, through the model stage's code
    (``ModelCalls``) and the row builder, without Ray: (predictions frame, ids the engine was asked)."""
    import pyarrow as pa

    from omnieval.config import parse_run_config
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.media_policy import media_policy
    from omnieval.run.plan import make_plan
    from omnieval.run.stages import call_rows

    config = parse_run_config(run_config(bench, "unused", [model_config]))
    plan = make_plan(config)
    instances = plan.load_instances()
    policy = media_policy(config.models[0], plan.expanded.media)
    rows = list(answer_requests(instances, ["mcq"], ["zs"], set(), {}, policy))
    counting = Counting(engine)
    batch = call_rows(counting, rows, fetch)
    table = PredictionRows(config.models[0].name, config.models[0].engine)(batch)
    return pa.table(table).to_pandas(), counting.asked


def test_skipped_rows_never_reach_the_engine(xm_bench):
    from omnieval.engines.simulated import SimulatedEngine

    shown = expected_media(xm_bench)
    model = {"name": "sim-audio", "engine": "simulated", "options": {"modalities": ["audio"]}}
    frame, asked = answered_in_process(SimulatedEngine("sim-audio", modalities=["audio"]), xm_bench, model)
    want_skipped = {key for key, media in shown.items() if media - {"audio"}}
    got_skipped = {(r.item_id, r.condition) for r in frame.itertuples() if isinstance(r.skipped, str)}
    assert got_skipped == want_skipped and 0 < len(want_skipped) < len(shown)
    asked_keys = {tuple(i.split("|")[:2]) for i in asked}
    assert len(asked) == len(shown) - len(want_skipped) == len(set(asked))
    assert not ({(r.item_id, r.condition) for r in frame.itertuples() if r.instance_id in set(asked)} & want_skipped)
    assert asked_keys and all(frame[frame.skipped.notna()].choice.isna())
    for row in frame[frame.skipped.notna()].itertuples():
        assert row.skipped == "+".join(sorted(shown[(row.item_id, row.condition)] - {"audio"}))
        assert pd.isna(row.error) and pd.isna(row.confidence) and pd.isna(row.latency_s)


def test_text_model_on_hf_is_asked_only_text_instances(xm_bench, tiny_models):
    from omnieval.engines.hf import HFEngine

    folder = str(tiny_models("qwen2"))
    model = {"name": "qwen2", "engine": "hf", "options": {"path": folder}}
    frame, asked = answered_in_process(HFEngine("qwen2", path=folder), xm_bench, model,
                                       fetch=lambda keys: dict.fromkeys(keys))
    shown = expected_media(xm_bench)
    text_only = {key for key, media in shown.items() if not media}
    assert {(r.item_id, r.condition) for r in frame.itertuples() if r.instance_id in set(asked)} == text_only
    assert len(asked) == len(text_only) == frame.skipped.isna().sum() > 0
    assert frame[frame.skipped.isna()].choice.notna().all()  # answered by the model's logits


def test_a_family_model_without_its_package_is_a_one_line_error(tmp_path, monkeypatch):
    import importlib.util

    from omnieval.engines.families import load_processor

    folder = tmp_path / "gemma3n"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma3n"}))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "timm" else real(name, *a))
    with pytest.raises(RuntimeError, match=r"a gemma3n model needs the 'timm' package") as err:
        load_processor(folder)
    assert str(folder) in str(err.value) and "\n" not in str(err.value)


# -- whole runs ------------------------------------------------------------------------------------------------------

def test_skip_run_metrics_summary_and_resume(ray_session, xm_bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError
    from omnieval.run.pipeline import run_evaluation
    from omnieval.stats.metrics import compute_metrics

    out = tmp_path / "run"
    models = [{"name": "sim-all", "engine": "simulated", "options": {"reliance": {"audio": 0.7, "video": 0.8,
                                                                                  "text": 0.9}}},
              {"name": "sim-audio", "engine": "simulated",
               "options": {"modalities": ["audio"], "reliance": {"audio": 0.7, "text": 0.9}, "invalid_rate": 0.2}}]
    config = parse_run_config(run_config(xm_bench, out, models))
    result = run_evaluation(config, progress=False)
    shown = expected_media(xm_bench)
    want = {key for key, media in shown.items() if media - {"audio"}}
    by_modality = {m: sum(1 for k in want if m in shown[k]) for m in ("image", "video")}
    by_modality = {m: n for m, n in by_modality.items() if n}

    pred = pd.read_parquet(out / "predictions.parquet")
    audio = pred[pred.model == "sim-audio"]
    assert {(r.item_id, r.condition) for r in audio.itertuples() if isinstance(r.skipped, str)} == want
    assert pred[pred.model == "sim-all"].skipped.isna().all()
    record = json.loads((out / "run.json").read_text())
    assert record["skipped"] == {"count": len(want), "by_model": {"sim-audio": {
        "rows": len(want), "of": len(shown), "by_modality": by_modality}}}
    text = result.summary()
    assert f"sim-audio: {len(want)} of {len(shown)} rows (" in text and result.ok

    # metrics over the asked rows only: accuracy per direction, invalid_rate and error_rate denominators
    metrics = compute_metrics([out / "predictions.parquet"], resamples=200).to_pandas()
    asked = audio[audio.skipped.isna()]
    mine = metrics[(metrics.model == "sim-audio") & (metrics.split == "all")]
    valid = asked[asked.choice.notna()]
    for direction, group in valid.groupby("condition"):
        row = mine[(mine.metric == "accuracy") & (mine.key == direction)]
        assert len(row) == 1 and row.value.iloc[0] == pytest.approx((group.choice == group.target).mean())
        assert row.n.iloc[0] == len(group)
    overall = mine[(mine.metric == "accuracy") & ~mine.key.str.contains("/")]  # not per task / subtask
    assert set(overall.key) == set(valid.condition)
    for name, value, n in (("invalid_rate", asked.choice.isna().mean(), len(asked)),
                           ("error_rate", 0.0, len(asked))):
        row = mine[(mine.metric == name) & (mine.key == "")]
        assert row.value.iloc[0] == pytest.approx(value) and row.n.iloc[0] == n

    # the report's runs table says how many rows were skipped
    from omnieval.report import skipped_text
    from omnieval.stats.read import read_predictions

    assert skipped_text(read_predictions([out / "predictions.parquet"])) == (
        f"sim-audio {len(want)}: " + ", ".join(f"{m} {n}" for m, n in sorted(by_modality.items())))

    # resume: skipped rows are finished rows, not errors to retry
    again = run_evaluation(config, progress=False)
    assert again.n_rows == 0 and again.n_skipped == 2 * len(shown)
    # switching the policy is another identity: refused without --overwrite
    noted = [models[0], models[1] | {"unsupported_media": "note"}]
    with pytest.raises(InputError, match=r"unsupported_media: \"skip\" -> \"note\""):
        run_evaluation(parse_run_config(run_config(xm_bench, out, noted)), progress=False)
    result = run_evaluation(parse_run_config(run_config(xm_bench, out, noted)), progress=False, overwrite=True)
    pred = pd.read_parquet(out / "predictions.parquet")
    audio = pred[pred.model == "sim-audio"]
    assert audio.skipped.isna().all() and result.ok and "skipped:" not in result.summary()
    for row in audio.itertuples():
        media = shown[(row.item_id, row.condition)] - {"audio"}
        assert (row.media_noted if isinstance(row.media_noted, str) else None) == (
            "+".join(sorted(media)) if media else None)
    # under note, the simulated model does not perceive what it cannot take: a vision-only direction is at chance
    assert audio[audio.condition == "V->T"].choice.notna().any()


def test_a_run_where_every_row_is_skipped_fails(ray_session, small_bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    config = parse_run_config({"benchmark": str(small_bench), "output": str(tmp_path / "out"),
                               "decode": {"media_check": "exists"},
                               "models": [{"name": "text-sim", "engine": "simulated", "options": {"modalities": []}}]})
    result = run_evaluation(config, progress=False)
    n_items = len((Path(small_bench) / "items.jsonl").read_text().splitlines())
    assert result.n_predictions == 8 * n_items == result.skipped["count"]  # every condition shows video and audio
    assert not result.ok
    text = result.summary()
    assert "WARNING: every row of text-sim was skipped" in text and "FAILED: every row of the run was skipped" in text


def small_bench_splits(bench) -> set[str]:
    import json

    return {json.loads(line)["split"] for line in (Path(bench) / "items.jsonl").open()}


def test_a_sweep_says_which_runs_skipped_rows_and_which_measured_nothing(ray_session, small_bench, tmp_path):
    """A sweep pairs every model with every benchmark: a model that takes no audio on a benchmark whose every
    condition shows audio measures nothing. Its run is complete (resuming it would change nothing) but said so, in
    its closing line, in the table (a skipped column counted from the predictions) and in the summary's totals, on
    the first pass and on a rerun that finds it complete."""
    import json

    import polars as pl

    from omnieval.sweep import SweepRunner, parse_sweep_config

    data = {"name": "reach", "output": str(tmp_path / "sweep"), "prompts": ["zs"],
            "protocols": [{"protocol": "dissonance", "benchmark": str(small_bench)}],
            "models": [{"name": "sim-all", "engine": "simulated", "options": {"seed": 1}},
                       {"name": "sim-video", "engine": "simulated", "options": {"modalities": ["video"]}}],
            "decode": {"media_check": "exists"}, "metrics": {"resamples": 20}}
    for attempt in ("first", "rerun"):
        logged: list[str] = []
        result = SweepRunner(parse_sweep_config(data), log=logged.append).run()
        by_model = {r.model: r for r in result.runs}
        table = result.summary()
        for name, run in by_model.items():
            preds = pl.read_parquet(Path(run.output) / "predictions.parquet")
            assert run.skipped_rows == preds["skipped"].is_not_null().sum(), (attempt, name)
            row = next(line for line in table.splitlines() if line.startswith(run.key))
            assert row.split()[-2] == str(run.skipped_rows)
        assert by_model["sim-all"].skipped_rows == 0 and by_model["sim-video"].skipped_rows == by_model[
            "sim-video"].predictions > 0
        assert ("WARNING: 1 run(s) measured nothing, every row skipped" in table
                and table.rstrip().count(by_model["sim-video"].key) == 2), table
        totals = json.loads((tmp_path / "sweep" / "summary.json").read_text())["totals"]
        assert totals["skipped_rows"] == by_model["sim-video"].predictions
        if attempt == "first":
            closing = next(m for m in logged if by_model["sim-video"].key in m and " done in " in m)
            assert "WARNING: every row skipped (audio" in closing
    # the report's runs table still names what the run was (it has no metric to read that from)
    from omnieval.report import build_report

    report = build_report([str(tmp_path / "sweep")], resamples=50, permutations=50)
    rows = {row[0].text: [cell.text for cell in row] for row in report.sections[0].blocks[0].rows}
    (label,) = [k for k in rows if "sim-video" in k]
    assert rows[label][1:4] == ["dissonance", "sim-video", "zs"]
    assert set(rows[label][4].split(", ")) == small_bench_splits(small_bench)


@pytest.mark.slow
def test_describe_turns_exactly_what_the_model_cannot_take_into_text(ray_session, small_bench, tmp_path):
    """``unsupported_media: describe`` on a model that takes audio but not video: the describer describes the videos
    (each distinct file once) and nothing else, although a plain ``describe:`` would describe the audio; every row is
    asked, none skipped or noted, and each carries the description of the one video its instance shows."""
    import polars as pl
    import pyarrow.parquet as pq

    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation
    from omnieval.run.plan import make_plan

    model = {"name": "hears", "engine": "simulated", "options": {"seed": 3, "modalities": ["audio"]},
             "unsupported_media": "describe", "describe": {"model": {"name": "describer", "engine": "simulated"}}}
    config = parse_run_config({"benchmark": str(small_bench), "output": str(tmp_path / "run"), "models": [model],
                               "decode": {"num_frames": 4, "max_side": 96}})
    result = run_evaluation(config, progress=False)
    rows = pl.read_parquet(result.predictions_path)
    instances = make_plan(config).load_instances()
    assert rows.height == len(instances) and rows["error"].null_count() == rows.height
    assert rows["skipped"].null_count() == rows.height and rows["media_noted"].null_count() == rows.height
    assert (rows["cascade"] == "describer:video").all()
    videos = {i.instance_id: [s.path for s in i.media_segments() if s.modality == "video"] for i in instances}
    for iid, text in zip(rows["instance_id"], rows["intermediate_text"], strict=True):
        assert sorted(json.loads(text)) == videos[iid]  # the instance's own video, and only it
    described = pq.read_table(tmp_path / "run" / "descriptions" / "describer").to_pylist()
    assert sorted(d["path"] for d in described) == sorted({p for paths in videos.values() for p in paths})
    assert {d["modality"] for d in described} == {"video"}
