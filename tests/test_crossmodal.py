"""Protocol ``crossmodal``: expansion into the six directions, prompts that show every candidate, the worked
example of docs/reference.md through ``omnieval metrics``, consistency and agreement against a hand-computed table, the
real omni model receiving every candidate's media, and a simulated run end to end on the synthetic benchmark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from omnieval.core.prompts import render_prompt
from omnieval.protocols import crossmodal
from omnieval.protocols.crossmodal import DIRECTIONS, Entity, Item, Options
from omnieval.stats.metrics import metrics_table

ROOT = Path(__file__).resolve().parents[1]


def entity(name: str, vision: str = "image") -> Entity:
    return Entity(id=name, text=f"the {name}", audio=f"{name}.wav", **{vision: f"{name}.{vision}"})


def item(item_id: str = "q1", vision: str = "image", **kw) -> Item:
    return Item(item_id=item_id, task="perception", subtask="animals", context=entity("dog", vision),
                distractors=[entity(n, vision) for n in ("cat", "cow", "owl")], **kw)


def rendered(inst, seg) -> str:
    return seg.text if seg.kind == "text" else seg.path


# ---------------------------------------------------------------------------------------------------------------
# Expansion and prompts
# ---------------------------------------------------------------------------------------------------------------

def test_six_directions_show_the_context_and_the_four_candidates_in_their_modalities():
    letter_of = {"audio": "A", "image": "V", "video": "V", "text": "T"}
    instances = crossmodal.expand_all([item()], None, seed=3)
    assert [i.condition for i in instances] == list(DIRECTIONS)
    for inst in instances:
        x, y = inst.condition.split("->")
        (ctx,) = inst.segments
        assert letter_of["text" if ctx.kind == "text" else ctx.modality] == x
        assert (ctx.text == "Context: the dog") if x == "T" else ctx.path.startswith("dog.")
        shown = [rendered(inst, s) for s in inst.option_segments]
        assert {letter_of["text" if s.kind == "text" else s.modality] for s in inst.option_segments} == {y}
        names = sorted(s.split(".")[0].replace("the ", "") for s in shown)
        assert names == ["cat", "cow", "dog", "owl"]  # every entity exactly once
        target_shown = shown[inst.option_labels.index(inst.target)]
        assert "dog" in target_shown  # the target is the context entity, in the candidate modality
        modality = {"A": "audio", "V": "image", "T": "text"}
        assert inst.simulation_hints == {f"{modality[x]}->{modality[y]}": inst.target}
        assert inst.task == "perception" and inst.field("subtask") == "animals" and len(inst.option_labels) == 4


def test_options_are_shuffled_with_keyed_randomness():
    a = crossmodal.expand_all([item()], None, seed=3)
    b = crossmodal.expand_all([item()], None, seed=3)
    assert [i.model_dump() for i in a] == [i.model_dump() for i in b]
    targets = {i.target for s in range(6) for i in crossmodal.expand_all([item()], None, seed=s)}
    assert len(targets) >= 3  # the correct candidate moves between labels
    assert a[0].instance_id == "q1|A->T|s3"


def test_extra_conditions():
    instances = crossmodal.expand_all([item(vision="video")], None, seed=0,
                                      options=Options(directions=["V->A"], extra=["AV->T", "none->T"]))
    assert [i.condition for i in instances] == ["V->A", "AV->T", "none->T"]
    av, none = instances[1], instances[2]
    assert [s.modality for s in av.segments] == ["audio", "video"]
    assert av.simulation_hints == {"audio->text": av.target, "video->text": av.target}
    assert none.segments == [] and none.simulation_hints == {}


def test_prompt_interleaves_every_candidate_after_its_label():
    inst = next(i for i in crossmodal.expand_all([item()], None, seed=0) if i.condition == "A->V")
    parts = render_prompt(inst, "zs")
    media = [p for p in parts if p.kind == "media"]
    assert [p.modality for p in media] == ["audio", "image", "image", "image", "image"]
    for label, seg in zip(inst.option_labels, inst.option_segments, strict=True):
        k = next(j for j, p in enumerate(parts) if p.kind == "media" and p.path == seg.path)
        assert parts[k - 1].kind == "text" and parts[k - 1].text.endswith(f"{label}.")
    assert "Answer with the option's letter" in parts[-1].text
    text_dir = next(i for i in crossmodal.expand_all([item()], None, seed=0) if i.condition == "A->T")
    body = render_prompt(text_dir, "zs")[-1].text
    for label, text in zip(text_dir.option_labels, text_dir.option_texts, strict=True):
        assert f"{label}. {text}" in body


def test_item_errors_name_the_field():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="context"):
        Item(item_id="x")
    with pytest.raises(ValidationError, match="unknown direction"):
        Item(item_id="x", directions={"A->A": {"question": "q", "options": [
            {"modality": "text", "input": "a"}, {"modality": "text", "input": "b"}], "answer": "A"}})
    from omnieval.core.schema import InputError

    bad = Item(item_id="x", context=Entity(text="t", image="i.png"), distractors=[entity("cat")])
    with pytest.raises(InputError, match="context.audio"):
        crossmodal.validate_items([bad], None, file="items.jsonl")


# ---------------------------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------------------------

def row(item_id: str, direction: str, correct: bool | None, task: str | None = None, model: str = "m") -> dict:
    choice = None if correct is None else ("A" if correct else "B")
    return dict(model=model, prompt="zs", protocol="crossmodal", split="all", item_id=item_id,
                instance_id=f"{item_id}|{direction}", condition=direction, target="A", choice=choice,
                abstain_label=None, confidence=None, confidence_method=None, task=task, n_options=4)


def test_worked_example_through_the_cli(tmp_path):
    """The Gemini 2.5 Pro check of docs/reference.md, Protocol `crossmodal`: direction accuracies -> average, std,
    disparity, imbalance."""
    acc = {"A->T": .710, "A->V": .589, "T->A": .644, "T->V": .798, "V->A": .608, "V->T": .886}
    rows = [row(f"x{i}", d, i < a * 1000, task="all-tasks") for d, a in acc.items() for i in range(1000)]
    pl.DataFrame(rows).write_parquet(tmp_path / "pred.parquet")
    subprocess.run([sys.executable, "-m", "omnieval.cli", "metrics", str(tmp_path / "pred.parquet"), "--out",
                    str(tmp_path / "m"), "--resamples", "200"], check=True, cwd=ROOT, capture_output=True)
    table = pl.read_csv(tmp_path / "m" / "metrics.csv")
    got = {(r["metric"], r["key"] or ""): r["value"] for r in table.iter_rows(named=True)}
    expected = {("average", ""): .706, ("std", ""): .117, ("disparity", "T_vs_V"): -.157,
                ("disparity", "T_vs_A"): -.487, ("disparity", "V_vs_A"): -.330, ("imbalance", "V<->T"): .088,
                ("imbalance", "A<->T"): .710 - .644, ("imbalance", "V<->A"): .608 - .589}
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=0.0005), key
        task_key = (key[0], f"all-tasks/{key[1]}" if key[1] else "all-tasks")
        assert got[task_key] == pytest.approx(value, abs=0.0005), task_key
    assert {k for m, k in got if m == "disparity"} >= {"T_vs_V", "T_vs_A", "V_vs_A"}
    assert {k for m, k in got if m == "imbalance"} >= {"A<->T", "V<->T", "V<->A"}
    assert got[("accuracy", "all-tasks/A->T")] == pytest.approx(.710)


# correctness per item and direction (None = invalid answer; a missing key = no prediction), tasks p and q
TABLE = {
    "i1": ("p", dict.fromkeys(DIRECTIONS, True)),
    "i2": ("p", {**dict.fromkeys(DIRECTIONS, True), "A->T": False}),
    "i3": ("p", dict.fromkeys(DIRECTIONS, False)),
    "i4": ("q", {d: True for d in DIRECTIONS if d != "V->T"}),
    "i5": ("q", {**dict.fromkeys(DIRECTIONS, True), "A->T": None}),
}


def test_consistency_and_agreement_against_a_hand_computed_table():
    rows = [row(i, d, c, task=t) for i, (t, dirs) in TABLE.items() for d, c in dirs.items()]
    table = metrics_table(pl.DataFrame(rows), resamples=300)
    got = {(r["metric"], r["key"]): (r["value"], r["n"]) for r in table.iter_rows(named=True)}
    # consistency: items with all six directions (i1, i2, i3, i5); consistent: i1 only (i5's invalid is not correct)
    assert got[("consistency", "")] == (pytest.approx(1 / 4), 4)
    assert got[("consistency", "p")] == (pytest.approx(1 / 3), 3)
    assert got[("consistency", "q")] == (0.0, 1)
    # A->T vs A->V: i1 agree, i2 no, i3 agree, i4 agree, i5 no (invalid vs correct)
    assert got[("agreement", "A->T|A->V")] == (pytest.approx(3 / 5), 5)
    # A->T vs V->T: i4 has no V->T; i1 agree, i2 no, i3 agree, i5 no
    assert got[("agreement", "A->T|V->T")] == (pytest.approx(2 / 4), 4)
    assert got[("agreement", "q/A->T|A->V")] == (pytest.approx(1 / 2), 2)
    # accuracy excludes the invalid answer from its denominator: i1, i4 correct of i1..i4
    assert got[("accuracy", "A->T")] == (pytest.approx(2 / 4), 4)
    assert got[("invalid_rate", "")] == (pytest.approx(1 / 29), 29)


def test_agreement_pairs_cover_all_fifteen_and_ci_brackets_value():
    rng = np.random.default_rng(0)
    rows = [row(f"i{i}", d, bool(rng.random() < 0.7)) for i in range(200) for d in DIRECTIONS]
    table = metrics_table(pl.DataFrame(rows), resamples=500)
    agree = table.filter(pl.col("metric") == "agreement")
    assert agree.height == 15
    assert (agree["ci_low"] <= agree["value"]).all() and (agree["value"] <= agree["ci_high"]).all()
    # independent 0.7 draws: P(same) = 0.7^2 + 0.3^2 = 0.58
    assert agree["value"].mean() == pytest.approx(0.58, abs=0.03)


# ---------------------------------------------------------------------------------------------------------------
# A real omni model receives every candidate
# ---------------------------------------------------------------------------------------------------------------

def test_omni_model_sees_every_candidate_media(tiny_models):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from omnieval.engines import EngineRequest, create_engine
    from omnieval.media.decoded import DecodedMedia

    path = tiny_models("qwen2.5-omni")
    engine = create_engine("hf", model="tiny-omni", path=str(path))
    inst = next(i for i in crossmodal.expand_all([item()], None, seed=0) if i.condition == "A->V")
    rng = np.random.default_rng(0)
    t = np.arange(16000) / 16000
    media = {"dog.wav": DecodedMedia("audio", (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), "a",
                                     sample_rate=16000)}
    for name in ("dog", "cat", "cow", "owl"):
        media[f"{name}.image"] = DecodedMedia("image", rng.integers(0, 256, (56, 56, 3), dtype=np.uint8), name)
    parts, text = engine._prepare(EngineRequest(inst, media, "zs"))
    encoded = engine.encode(media, parts, text)
    # four images (56 x 56: 4 x 4 patches each) and one clip, in the processor's tensors
    assert encoded.tensors["image_grid_thw"].tolist() == [[1, 4, 4]] * 4
    assert encoded.tensors["input_features"].shape[0] == 1
    before = engine.score([EngineRequest(inst, media, "zs")])[0]
    last = inst.option_segments[-1].path  # the last candidate's image changes -> the scores change
    changed = {**media, last: DecodedMedia("image", 255 - media[last].data, "changed")}
    after = engine.score([EngineRequest(inst, changed, "zs")])[0]
    assert before.error is None and after.error is None
    assert not np.allclose(before.option_logprobs, after.option_logprobs)


# ---------------------------------------------------------------------------------------------------------------
# End to end on the synthetic benchmark (real media, local Ray)
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_simulated_run_end_to_end(ray_session, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark
    from omnieval.run.pipeline import run_evaluation

    bench = make_crossmodal_benchmark(tmp_path / "xm", seed=0, n_entities=6)
    skew = {"audio->text": 1.0, "text->audio": 0.0, "video->text": 1.0, "image->text": 1.0,
            "text->video": 1.0, "text->image": 1.0}
    config = parse_run_config({
        "benchmark": str(bench), "output": str(tmp_path / "run"), "protocol": "crossmodal",
        "decode": {"num_frames": 4, "max_side": 96},
        "models": [{"name": "skew", "engine": "simulated", "options": {"reliance": skew, "seed": 2}}]})
    result = run_evaluation(config, progress=False)
    assert result.n_instances == 12 * 6 and result.n_errors == 0
    assert len(result.decode_counts) == 6 * 3 and set(result.decode_counts.values()) == {1}
    table = metrics_table(pl.read_parquet(result.predictions_path), resamples=200)
    got = {(r["metric"], r["key"]): r["value"] for r in table.iter_rows(named=True)}
    assert got[("accuracy", "A->T")] == 1.0 and got[("accuracy", "T->V")] == 1.0
    assert got[("accuracy", "T->A")] < 0.6  # a guess among four
    assert got[("imbalance", "A<->T")] == pytest.approx(1.0 - got[("accuracy", "T->A")])
    assert {"perception/A->T", "appearance/colour/A->T"} <= {k for m, k in got if m == "accuracy"}


def test_config_protocol_must_match_the_benchmark(tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark
    from omnieval.run.plan import make_plan

    bench = make_crossmodal_benchmark(tmp_path / "xm", seed=0, n_entities=4)
    base = {"benchmark": str(bench), "output": str(tmp_path / "o"),
            "models": [{"name": "s", "engine": "simulated"}]}
    with pytest.raises(InputError, match="protocol"):
        make_plan(parse_run_config({**base, "protocol": "dissonance"}))
    with pytest.raises(InputError, match="protocol_options.directions"):
        make_plan(parse_run_config({**base, "protocol_options": {"directions": ["A->Q"]}}))
    with pytest.raises(InputError, match="unknown protocol"):
        parse_run_config({**base, "protocol": "nope"})
    plan = make_plan(parse_run_config({**base, "protocol_options": {"directions": ["A->T"], "extra": ["none->T"]}}))
    assert plan.n_instances == 8 * 2 and len(plan.media_specs) == 4  # only the audio is shown: decode only it
