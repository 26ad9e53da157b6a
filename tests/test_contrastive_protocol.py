"""Protocol ``contrastive``: item checks with errors naming file, item and field; expansion into the original and the
permuted orders (targets against an independent itertools computation); the caption baseline; the prompt of
docs/reference.md; the metrics against hand-computed tables; a simulated model with a set position preference; and a
simulated run end to end through the Ray pipeline on the synthetic benchmark."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from omnieval.core.prompts import render_prompt
from omnieval.core.schema import InputError
from omnieval.protocols import contrastive
from omnieval.protocols.contrastive import Item, Options
from omnieval.stats.metrics import metrics_table

LETTERS = "ABCD"


def make_item(item_id="q", n=3, answer=1, selection="random", modalities=None, **kw) -> Item:
    modalities = modalities or ["image", "audio", "video", "pointcloud"][:n]
    suffix = {"image": "png", "audio": "wav", "video": "mp4", "pointcloud": "ply"}
    inputs = [{"modality": m, "path": f"{item_id}/{i}.{suffix[m]}", "caption": f"caption {item_id} {i}"}
              for i, m in enumerate(modalities)]
    return Item(item_id=item_id, question=f"Which scene answers {item_id}?", inputs=inputs, answer=answer,
                selection_type=selection, **kw)


# ---------------------------------------------------------------------------------------------------------------
# Items and their errors
# ---------------------------------------------------------------------------------------------------------------

def test_item_validation_names_the_field():
    with pytest.raises(ValidationError, match="answer index 3 is out of range for 3 inputs") as exc:
        make_item(answer=3)
    assert exc.value.errors()[0]["loc"] == ("answer",)
    with pytest.raises(ValidationError) as exc:
        Item(item_id="x", question="q", answer=0, selection_type="random",
             inputs=[{"modality": "image", "path": "a.png", "caption": "c"},
                     {"modality": "smell", "path": "b.txt", "caption": "c"}])
    assert exc.value.errors()[0]["loc"] == ("inputs", 1, "modality")
    with pytest.raises(ValidationError, match="at most 4"):
        make_item(n=4, modalities=["image", "audio", "video", "pointcloud", "image"])
    with pytest.raises(ValidationError, match="at least 2"):
        make_item(n=1, answer=0)
    with pytest.raises(ValidationError, match="selection_type"):
        make_item(selection="hard")


def test_validate_items_checks_point_cloud_files_and_repeated_scenes():
    bad = make_item(modalities=["image", "pointcloud", "audio"])
    bad = bad.model_copy(update={"inputs": [bad.inputs[0], bad.inputs[1].model_copy(update={"path": "x/c.obj"}),
                                            bad.inputs[2]]})
    with pytest.raises(InputError, match="inputs\\[1\\].path") as exc:
        contrastive.validate_items([bad], None, file="items.jsonl")
    assert exc.value.item == "q" and exc.value.file == "items.jsonl"
    twice = make_item(n=2, answer=0)
    twice = twice.model_copy(update={"inputs": [twice.inputs[0], twice.inputs[0]]})
    with pytest.raises(InputError, match="inputs\\[1\\].path"):
        contrastive.validate_items([twice], None, file="items.jsonl")
    contrastive.validate_items([make_item(n=4)], None)  # a good item passes


def write_bench(root: Path, records: list[dict]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "benchmark.json").write_text(json.dumps({"name": "t", "protocol": "contrastive"}))
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


def test_benchmark_errors_name_file_item_and_field(tmp_path, monkeypatch):
    """Through the benchmark loader and the media pre-flight check (protocol registered for the test)."""
    from omnieval.datasets.benchmark import check_media, load_benchmark
    from omnieval.media import decode, pointcloud

    good = json.loads(make_item("ok", n=2, answer=0, modalities=["image", "pointcloud"]).model_dump_json())
    out_of_range = {**good, "item_id": "bad-answer", "answer": 2}
    root = write_bench(tmp_path / "b1", [good, out_of_range])
    with pytest.raises(InputError) as exc:
        load_benchmark(root)
    assert exc.value.item == "bad-answer" and exc.value.field == "answer"
    assert exc.value.file.endswith("items.jsonl") and "out of range" in str(exc.value)

    unknown = {**good, "item_id": "bad-modality"}
    unknown["inputs"] = [good["inputs"][0], {**good["inputs"][1], "modality": "hologram"}]
    with pytest.raises(InputError) as exc:
        load_benchmark(write_bench(tmp_path / "b2", [unknown]))
    assert exc.value.item == "bad-modality" and exc.value.field == "inputs.1.modality"

    # an unreadable point cloud, found by the pre-flight check with the point cloud probe as the decode hook
    root = write_bench(tmp_path / "b3", [good])
    (root / "ok").mkdir()
    from omnieval.media.synth import still_image

    still_image(root / "ok" / "0.png", colour="red")
    (root / "ok" / "1.ply").write_bytes(b"ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nend_header\n1\n")
    original = decode.probe_media

    def probe(path, modality):
        if modality == "pointcloud":
            return pointcloud.probe_pointcloud(path)
        return original(path, modality)

    monkeypatch.setattr(decode, "probe_media", probe)
    bench = load_benchmark(root)
    with pytest.raises(InputError) as exc:
        check_media(bench)
    assert exc.value.item == "ok" and exc.value.field == "inputs[1].path" and "1.ply" in str(exc.value)


# ---------------------------------------------------------------------------------------------------------------
# Expansion
# ---------------------------------------------------------------------------------------------------------------

def test_all_orders_with_targets_from_itertools():
    for n, answer in ((2, 1), (3, 0), (4, 2)):
        item = make_item(f"i{n}", n=n, answer=answer)
        instances = contrastive.expand_all([item], None, seed=5)
        orders = list(itertools.permutations(range(n)))
        assert [i.condition for i in instances] == ["original"] + ["perm:" + "".join(LETTERS[j] for j in p)
                                                                 for p in orders[1:]]
        for inst, order in zip(instances, orders, strict=True):
            shown = [s.path for s in inst.option_segments]
            assert shown == [item.inputs[j].path for j in order]
            assert inst.target == LETTERS[order.index(answer)]
            assert shown[LETTERS.index(inst.target)] == item.inputs[answer].path  # the target shows the answer
            assert inst.option_labels == list(LETTERS[:n]) and inst.option_texts == [f"Scene {c}" for c in
                                                                                     LETTERS[:n]]
            assert inst.field("n_inputs") == n and inst.field("selection_type") == "random"
            assert inst.field("answer_modality") == item.inputs[answer].modality
            assert inst.instance_id == f"i{n}|{inst.condition}|s5" and inst.segments == []


def test_sampled_orders_are_keyed_distinct_and_never_the_identity():
    item = make_item("s", n=4, answer=3)
    a = [i.condition for i in contrastive.expand_all([item], None, 1, Options(permutations=5))]
    assert a[0] == "original" and len(a) == 6 and len(set(a)) == 6 and "perm:ABCD" not in a
    everything = {i.condition for i in contrastive.expand_all([item], None, 1)}
    assert set(a) <= everything
    # same seed and item: same orders, alone or among other items
    others = [make_item(f"o{k}", n=4, answer=0) for k in range(3)]
    together = [i.condition for i in contrastive.expand_all([*others, item], None, 1, Options(permutations=5))
                if i.item_id == "s"]
    assert together == a
    seeds = {tuple(i.condition for i in contrastive.expand_all([item], None, s, Options(permutations=5)))
             for s in range(6)}
    assert len(seeds) > 1  # the sample moves with the seed
    # a sample larger than n! - 1 is every order; 0 is the original only
    assert len(contrastive.expand_all([make_item(n=3)], None, 0, Options(permutations=50))) == 6
    assert [i.condition for i in contrastive.expand_all([make_item(n=3)], None, 0, Options(permutations=0))] == [
        "original"]
    with pytest.raises(ValidationError):
        Options(permutations=-1)


def test_caption_baseline_and_point_cloud_modes():
    item = make_item(n=3, answer=2, modalities=["image", "audio", "pointcloud"])
    both = contrastive.expand_all([item], None, 0, Options(captions=True))
    media, captions = both[:6], both[6:]
    assert [c.condition for c in captions] == ["captions:" + m.condition for m in media]
    for m, c in zip(media, captions, strict=True):
        assert c.target == m.target and c.instance_id.startswith("q|captions:")
        assert all(s.kind == "text" for s in c.option_segments) and c.media_segments() == []
        assert [s.text for s in c.option_segments] == [item.inputs[int(LETTERS.index(p))].caption for p in
                                                       (m.condition[5:] if m.condition != "original" else "ABC")]
        assert c.simulation_hints["text"] == c.target and m.simulation_hints["pointcloud"] == m.target
    # point clouds are shown as an image (the rendered views) by default, as themselves in native mode
    assert [s.modality for s in media[0].option_segments] == ["image", "audio", "image"]
    assert media[0].option_segments[2].path.endswith(".ply")
    native = contrastive.expand_all([item], None, 0, Options(pointcloud="native"))
    assert [s.modality for s in native[0].option_segments] == ["image", "audio", "pointcloud"]
    only = contrastive.expand_all([item], None, 0, Options(media=False, captions=True))
    assert all(i.condition.startswith("captions:") for i in only) and len(only) == 6
    with pytest.raises(ValidationError, match="nothing to evaluate"):
        Options(media=False)
    refs = contrastive.media_refs(item)
    assert refs == [(item.inputs[i].path, item.inputs[i].modality, f"inputs[{i}].path") for i in range(3)]


def spec_six_prompt(record: dict, condition: str, style: str, pointcloud: str = "views") -> list[tuple]:
    """The prompt written out from an item's record: the inputs in the condition's order, each after its prefix
    ``Scene A.`` (its caption on the same line for the caption baseline), then the question and the instruction.
    Parts as ``(kind, text)`` / ``(kind, modality, path)``; consecutive text lines form one part."""
    from omnieval.core.prompts import INSTRUCTIONS

    captions = condition.startswith("captions:")
    base = condition.removeprefix("captions:")
    order = range(len(record["inputs"])) if base == "original" else [LETTERS.index(c) for c in base[len("perm:"):]]
    parts, lines = [], []
    for label, index in zip(LETTERS, order):
        scene = record["inputs"][index]
        if captions:
            lines.append(f"Scene {label}. {scene['caption']}")
            continue
        shown = "image" if scene["modality"] == "pointcloud" and pointcloud == "views" else scene["modality"]
        parts += [("text", f"Scene {label}."), ("media", shown, scene["path"])]
    lines += [f"Question: {record['question']}", INSTRUCTIONS[style]]
    return [*parts, ("text", "\n".join(lines))]


def engine_prompt(inst) -> dict[str, list[tuple]]:
    """The prompt parts every engine renders for an instance (``prompts.render_prompt``), per prompt style."""
    return {style: [(p.kind, p.text) if p.kind == "text" else (p.kind, p.modality, p.path)
                    for p in render_prompt(inst, style)] for style in ("zs", "cot")}


@pytest.mark.parametrize("pointcloud", ["views", "native"])
def test_engines_get_the_prompt_layout_of_spec_six(pointcloud):
    items = [make_item("two", n=2, answer=1, modalities=["audio", "pointcloud"]),
             make_item("three", n=3, answer=0, modalities=["image", "audio", "video"]),
             make_item("four", n=4, answer=3, selection="similar")]
    records = {item.item_id: item.model_dump() for item in items}
    instances = contrastive.expand_all(items, None, 0, Options(captions=True, pointcloud=pointcloud))
    assert len(instances) == 2 * (2 + 6 + 24)  # every order, with media and as captions
    for inst in instances:
        got = engine_prompt(inst)
        for style in ("zs", "cot"):
            assert got[style] == spec_six_prompt(records[inst.item_id], inst.condition, style, pointcloud), (
                inst.condition, style)
    # the worked layout of one permutation, literally
    cab = next(i for i in instances if i.item_id == "three" and i.condition == "perm:CAB")
    assert engine_prompt(cab)["zs"] == [
        ("text", "Scene A."), ("media", "video", "three/2.mp4"),
        ("text", "Scene B."), ("media", "image", "three/0.png"),
        ("text", "Scene C."), ("media", "audio", "three/1.wav"),
        ("text", "Question: Which scene answers three?\nAnswer with the option's letter from the given choices "
                 "directly.")]
    (caption_text,) = engine_prompt(next(i for i in instances if i.condition == "captions:perm:CAB"))["cot"]
    assert caption_text[1].startswith("Scene A. caption three 2\nScene B. caption three 0\nScene C. caption three 1\n"
                                      "Question: Which scene answers three?\n")
    assert caption_text[1].endswith("Answer: <letter>'.")
    # an answer naming the scene parses through the option texts
    from omnieval.core.prompts import parse_answer

    assert [parse_answer(t, cab.option_labels, cab.option_texts) for t in ("Scene B", "scene c.", "A")] == [
        "B", "C", "A"]


# ---------------------------------------------------------------------------------------------------------------
# Metrics against hand-computed tables
# ---------------------------------------------------------------------------------------------------------------

# item -> (n, original answer index, selection, answer modality)
ITEMS = {"i1": (2, 0, "random", "image"), "i2": (3, 1, "similar", "audio"), "i3": (4, 3, "similar", "pointcloud")}


def order_rows(model: str, choose, prefix: str = "") -> list[dict]:
    """One row per order of each item; ``choose(item, condition, target)`` gives the choice."""
    rows = []
    for item_id, (n, answer, selection, modality) in ITEMS.items():
        for k, order in enumerate(itertools.permutations(range(n))):
            condition = "original" if k == 0 else "perm:" + "".join(LETTERS[j] for j in order)
            target = LETTERS[order.index(answer)]
            rows.append(dict(model=model, prompt="zs", protocol="contrastive", split="all", item_id=item_id,
                             instance_id=f"{item_id}|{prefix}{condition}", condition=prefix + condition,
                             target=target, choice=choose(item_id, condition, target), abstain_label=None,
                             confidence=None, confidence_method=None, n_inputs=n, selection_type=selection,
                             answer_modality=modality, n_options=n))
    return rows


def table_of(rows, resamples=300) -> dict:
    table = metrics_table(pl.DataFrame(rows), resamples=resamples)
    return {(r["model"], r["metric"], r["key"]): (r["value"], r["n"], r["ci_low"], r["ci_high"])
            for r in table.iter_rows(named=True)}


def test_metrics_against_hand_computed_tables():
    always_a = order_rows("always_A", lambda i, c, t: "A")
    perfect = order_rows("perfect", lambda i, c, t: None if (i, c) == ("i3", "perm:DCBA") else t)
    captions = order_rows("always_A", lambda i, c, t: "A", prefix="captions:")
    got = table_of(always_a + perfect + captions)

    def val(model, metric, key=""):
        return got[(model, metric, key)][0]

    # always A: correct only where the target is A. Originals: i1 target A, i2 B, i3 D.
    assert val("always_A", "accuracy", "all") == pytest.approx(1 / 3)
    assert got[("always_A", "accuracy", "all")][1] == 3
    assert val("always_A", "accuracy", "n=2") == 1.0 and val("always_A", "accuracy", "n=4") == 0.0
    assert val("always_A", "accuracy", "selection=random") == 1.0
    assert val("always_A", "accuracy", "selection=similar") == 0.0
    assert val("always_A", "accuracy", "modality=image") == 1.0
    assert val("always_A", "accuracy", "modality=pointcloud") == 0.0
    assert val("always_A", "permutation_consistency") == 0.0
    # 32 instances: expected share of A under uniform choice = (2/2 + 6/3 + 24/4) / 32 = 9/32
    assert val("always_A", "position_bias", "A") == pytest.approx(1 - 9 / 32)
    assert val("always_A", "position_bias", "B") == pytest.approx(-9 / 32)
    assert val("always_A", "position_bias", "C") == pytest.approx(-(6 / 3 + 24 / 4) / 32)
    assert val("always_A", "position_bias", "D") == pytest.approx(-(24 / 4) / 32)
    assert got[("always_A", "position_bias", "A")][1] == 32
    # perfect but one invalid answer (i3 perm:DCBA, whose target is A): excluded from accuracy and bias
    assert val("perfect", "accuracy", "all") == 1.0
    assert val("perfect", "permutation_consistency") == pytest.approx(2 / 3)  # i3 is not correct everywhere
    assert got[("perfect", "permutation_consistency", "")][1] == 3
    # valid targets A: 1 + 2 + 5 = 8 of 31; expected A = (1 + 2 + 23/4) / 31
    assert val("perfect", "position_bias", "A") == pytest.approx((8 - 8.75) / 31)
    for label in "BCD":
        assert val("perfect", "position_bias", label) == pytest.approx(0.25 / 31)
    assert val("perfect", "invalid_rate") == pytest.approx(1 / 32)
    # the caption baseline is its own model with the prefix removed
    for key in ("all", "n=2", "selection=similar"):
        assert val("always_A+captions", "accuracy", key) == val("always_A", "accuracy", key)
    assert val("always_A+captions", "position_bias", "A") == pytest.approx(1 - 9 / 32)
    assert not any(k[2].startswith("captions") for k in got)


def test_position_preference_and_consistency_from_a_hand_written_model():
    """A model that knows i1 and i3, and answers C on every order of i2 (a set preference where it does not know)."""
    rows = order_rows("prefers_C", lambda i, c, t: "C" if i == "i2" else t)
    got = table_of(rows)
    assert got[("prefers_C", "permutation_consistency", "")][0] == pytest.approx(2 / 3)
    # choices: i1 targets (A 1, B 1), i2 all C (6), i3 targets (6 each)
    share = {"A": 7 / 32, "B": 7 / 32, "C": 12 / 32, "D": 6 / 32}
    expected = {"A": 9 / 32, "B": 9 / 32, "C": 8 / 32, "D": 6 / 32}
    for label in LETTERS:
        assert got[("prefers_C", "position_bias", label)][0] == pytest.approx(share[label] - expected[label])
    assert got[("prefers_C", "accuracy", "n=3")][0] == 0.0  # i2's original target is B


def test_cis_bracket_values_and_conditions_are_checked(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for k in range(60):
        ITEMS_K = {f"x{k}": (2 + k % 3, k % 2, ("random", "similar")[k % 2], "video")}
        for item_id, (n, answer, sel, mod) in ITEMS_K.items():
            for j, order in enumerate(itertools.permutations(range(n))):
                cond = "original" if j == 0 else "perm:" + "".join(LETTERS[i] for i in order)
                target = LETTERS[order.index(answer)]
                choice = target if rng.random() < 0.7 else "A"
                rows.append(dict(model="m", prompt="zs", protocol="contrastive", split="all", item_id=item_id,
                                 instance_id=f"{item_id}|{cond}", condition=cond, target=target, choice=choice,
                                 abstain_label=None, confidence=None, confidence_method=None, n_inputs=n,
                                 selection_type=sel, answer_modality=mod))
    table = metrics_table(pl.DataFrame(rows), resamples=400)
    assert set(table["metric"].unique()) == {"accuracy", "permutation_consistency", "position_bias", "invalid_rate",
                                                   "error_rate"}
    ci = table.filter(pl.col("metric") != "invalid_rate")
    assert (ci["ci_low"] <= ci["value"] + 1e-12).all() and (ci["value"] <= ci["ci_high"] + 1e-12).all()
    assert table.filter((pl.col("metric") == "position_bias") & (pl.col("key") == "A"))["value"][0] > 0.05
    # an unknown condition name is an input error naming the file
    from omnieval.stats.read import read_predictions

    bad = pl.DataFrame(rows[:3]).with_columns(condition=pl.lit("perm:AAB"))
    bad.write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(InputError, match="unknown contrastive condition"):
        read_predictions([tmp_path / "bad.parquet"])


# ---------------------------------------------------------------------------------------------------------------
# A simulated model with a set position preference (the engine reads the position percepts of ``evidence``)
# ---------------------------------------------------------------------------------------------------------------

def simulated_rows(items, reliance: dict, name: str, seed: int = 0) -> list[dict]:
    from omnieval.engines.simulated import SimulatedEngine
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.stages import call_rows

    engine = SimulatedEngine(name, reliance=reliance, seed=seed, noise=0.0)  # the decided option is the choice
    instances = contrastive.expand_all(items, None, 0, Options(captions=True))
    batch = call_rows(engine, list(answer_requests(instances, ["mcq"], ["zs"], set(), {})))
    return PredictionRows(name, "simulated")(batch).to_pylist()


def sim_items() -> list[Item]:
    return [make_item(f"s{k}", n=2 + k % 3, answer=k % (2 + k % 3), selection=("random", "similar")[k % 2])
            for k in range(30)]


def test_simulated_position_preference_comes_out_as_set():
    items = sim_items()
    inv_n = np.mean([1 / len(i.option_labels) for i in contrastive.expand_all(items, None, 0)])
    rows = (simulated_rows(items, {"position:A": 1.0}, "always_A")
            + simulated_rows(items, {m: 1.0 for m in contrastive.MODALITIES} | {"text": 0.0}, "sees_all")
            + simulated_rows(items, {"position:B": 0.4}, "leans_B"))
    got = table_of(rows, resamples=500)
    # no knowledge, A on every call: bias A = 1 - mean(1/n); never right under every order
    assert got[("always_A", "position_bias", "A")][0] == pytest.approx(1 - inv_n)
    assert got[("always_A", "permutation_consistency", "")][0] == 0.0
    # perceives every input modality: always right on media, no position bias (all orders balance the targets)
    assert got[("sees_all", "permutation_consistency", "")][0] == 1.0
    assert got[("sees_all", "accuracy", "all")][0] == 1.0
    for label in LETTERS:
        assert got[("sees_all", "position_bias", label)][0] == pytest.approx(0.0, abs=1e-12)
    # ... and at chance on the caption baseline, where it has no text reliance
    assert got[("sees_all+captions", "accuracy", "all")][0] < 0.75
    # B on 40% of calls, else a uniform guess: bias B = 0.4 * (1 - mean(1/n)), within sampling error
    value, _, low, high = got[("leans_B", "position_bias", "B")]
    assert value == pytest.approx(0.4 * (1 - inv_n), abs=0.05)
    assert low <= 0.4 * (1 - inv_n) <= high


# ---------------------------------------------------------------------------------------------------------------
# End to end on the synthetic benchmark (real media, local Ray)
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_simulated_run_end_to_end(ray_session, tmp_path, monkeypatch):
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic_contrastive import make_contrastive_benchmark
    from omnieval.run.pipeline import make_plan, run_evaluation

    # all four modalities: point clouds reach the engines as their rendered views (an image)
    bench = make_contrastive_benchmark(tmp_path / "ct", seed=0, n_entities=4)
    config = parse_run_config({
        "benchmark": str(bench), "output": str(tmp_path / "run"), "protocol": "contrastive",
        "protocol_options": {"captions": True},
        "decode": {"num_frames": 2, "max_side": 64},
        "models": [{"name": "sees", "engine": "simulated",
                    "options": {"reliance": {"image": 1.0, "audio": 1.0, "video": 1.0, "pointcloud": 1.0}, "seed": 1,
                                "noise": 0.0}},
                   {"name": "first", "engine": "simulated",
                    "options": {"reliance": {"position:A": 1.0}, "noise": 0.0}}]})
    # the instances the run hands its engines are prompted in the contrastive layout
    records = {r["item_id"]: r for r in map(json.loads, (bench / "items.jsonl").read_text().splitlines())}
    for inst in make_plan(config).load_instances():
        got = engine_prompt(inst)
        assert all(got[style] == spec_six_prompt(records[inst.item_id], inst.condition, style)
                   for style in ("zs", "cot")), inst.instance_id
    result = run_evaluation(config, progress=False)
    n_items = 4 * 3 * 2  # creatures x n in 2..4 x selection types
    assert result.n_errors == 0
    assert result.n_instances == 2 * (4 * 2 * (2 + 6 + 24))  # media + captions, per creature: (2 + 6 + 24) orders x 2
    assert len(result.decode_counts) == 4 * 4 and set(result.decode_counts.values()) == {1}
    table = metrics_table(pl.read_parquet(result.predictions_path), resamples=200)
    got = {(r["model"], r["metric"], r["key"]): r["value"] for r in table.iter_rows(named=True)}
    assert got[("sees", "accuracy", "all")] == 1.0 and got[("sees", "permutation_consistency", "")] == 1.0
    assert got[("first", "permutation_consistency", "")] == 0.0
    # every valid choice is A; expected share of A = mean of 1 / n_inputs over the 2 + 6 + 24 orders of each item
    assert got[("first", "position_bias", "A")] == pytest.approx(
        1 - (2 / 2 + 6 / 3 + 24 / 4) / (2 + 6 + 24))
    assert {"sees+captions", "first+captions"} <= {k[0] for k in got}
    assert {k for m, metric, k in got if m == "sees" and metric == "accuracy"} == {
        "all", "n=2", "n=3", "n=4", "selection=random", "selection=similar", "modality=image", "modality=audio",
        "modality=video", "modality=pointcloud"}
    assert len({r["item_id"] for r in pl.read_parquet(result.predictions_path).iter_rows(named=True)}) == n_items


# ---------------------------------------------------------------------------------------------------------------
# The built-in synthetic benchmark
# ---------------------------------------------------------------------------------------------------------------

def test_synthetic_benchmark_items_have_one_answering_scene(tmp_path):
    from omnieval.datasets.synthetic_contrastive import RGB, SHAPES, make_contrastive_benchmark
    from omnieval.media.pointcloud import load_pointcloud

    root = make_contrastive_benchmark(tmp_path / "a", seed=3, n_entities=5)
    lines = (root / "items.jsonl").read_text().splitlines()
    items = [Item.model_validate_json(x) for x in lines]
    contrastive.validate_items(items, None, file="items.jsonl")
    assert len(items) == 5 * 3 * 2
    assert {(len(i.inputs), i.selection_type) for i in items} == {(n, s) for n in (2, 3, 4)
                                                                  for s in ("random", "similar")}
    assert {i.answer_modality for i in items} == set(contrastive.MODALITIES)
    assert len({i.answer for i in items}) > 1  # the answer is not always in one position
    for item in items:
        creatures = [inp.id.split("/")[0] for inp in item.inputs]
        assert len(set(creatures)) == len(creatures)  # one creature per scene
        assert len({inp.modality for inp in item.inputs}) == len(item.inputs)
        answer = item.inputs[item.answer]
        if answer.modality == "audio":
            assert item.question.startswith("Which scene has ") and answer.caption.split(" at ")[1][:-3] in \
                item.question
        else:  # the colour named by the question is the answer's, and no other scene shows it
            colour = item.question.removeprefix("Which scene shows something ").rstrip("?")
            assert f" {colour} " in f" {answer.caption} "
            for k, inp in enumerate(item.inputs):
                if k != item.answer:
                    assert f" {colour} " not in f" {inp.caption} "
        for inp in item.inputs:
            assert (root / inp.path).is_file()
    # point clouds: both formats, the creature's colour on every point
    clouds = sorted(root.glob("media/*/cloud.*"))
    assert {p.suffix for p in clouds} == {".ply", ".npy"} and len(clouds) == 5
    for item in items:
        for inp in item.inputs:
            if inp.modality == "pointcloud":
                colour, shape = inp.caption.removeprefix("a ").removesuffix(" made of points").rsplit(" ", 1)
                assert shape in SHAPES
                cloud = load_pointcloud(root / inp.path)
                assert (cloud.colors == np.array(RGB[colour], dtype=np.uint8)).all()
    # the same seed writes the same items
    again = make_contrastive_benchmark(tmp_path / "b", seed=3, n_entities=5, modalities=("image", "audio"))
    assert len((again / "items.jsonl").read_text().splitlines()) == 5 * 1 * 2
    assert make_contrastive_benchmark(tmp_path / "a2", seed=3, n_entities=5).joinpath("items.jsonl").read_text() \
        == "\n".join(lines) + "\n"
