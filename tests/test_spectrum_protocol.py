"""Protocol ``spectrum``: conditions per modality count, donors (never the item, within benchmark/split/category,
marginals kept, one donor per modality shared by every condition), the target and the text unit, keyed ids and
order-free expansion, item checks; then the simulated engine end to end without Ray, through ``metrics_table``."""

from __future__ import annotations

import collections
import math

import numpy as np
import polars as pl
import pytest

from omnieval.core.schema import LABELS, InputError
from omnieval.engines import EngineRequest, create_engine
from omnieval.protocols import spectrum
from omnieval.protocols.spectrum import Item, Options
from omnieval.stats.metrics import metrics_table


def make_items(n: int = 12, media=("image",), n_options=4, split="all", categories=("x", "y"), prefix="q"):
    out = []
    for i in range(n):
        k = n_options if isinstance(n_options, int) else n_options[i % len(n_options)]
        out.append(Item(item_id=f"{prefix}{i:03d}", split=split, question=f"question of {prefix}{i}",
                        options=[f"{prefix}{i}-opt{j}" for j in range(k)], answer=LABELS[i % k],
                        media={m: f"{m}/{prefix}{i}.{m[:3]}" for m in media},
                        category=categories[i % len(categories)] if categories else None))
    return out


def owner(path: str) -> str:
    """Item id from a media path as made by ``make_items`` (``image/q3.ima`` -> ``q003``)."""
    stem = path.split("/")[1].split(".")[0]
    return f"{stem.rstrip('0123456789')}{int(stem.lstrip('abcdefghijklmnopqrstuvwxyz')):03d}"


def shown(inst) -> dict[str, str]:
    """Which item each modality of an instance comes from (media paths and the question text say it)."""
    out = {s.modality: owner(s.path) for s in inst.segments}
    stem = inst.question.removeprefix("question of ")
    out["text"] = f"{stem.rstrip('0123456789')}{int(stem.lstrip('abcdefghijklmnopqrstuvwxyz')):03d}"
    return out


# ---------------------------------------------------------------------------------------------------------------
# Conditions and donors
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("media, expected", [
    (("image",), ["normal", "image_only", "text_only", "random"]),
    (("video", "audio"), ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio",
                          "no_text"]),
    (("audio", "image", "video"), ["normal", "image_only", "video_only", "audio_only", "text_only", "random",
                                   "no_image", "no_video", "no_audio", "no_text"]),
])
def test_conditions_per_modality_count(media, expected):
    instances = spectrum.expand_all(make_items(6, media), None, seed=0)
    assert [i.condition for i in instances if i.item_id == "q000"] == expected
    assert len(instances) == 6 * len(expected)


@pytest.mark.parametrize("media", [("image",), ("video", "audio"), ("image", "video", "audio")])
def test_each_condition_replaces_exactly_its_modalities_by_another_items(media):
    items = make_items(15, media)
    instances = spectrum.expand_all(items, None, seed=4)
    modalities = [*media, "text"]
    for inst in instances:
        src = shown(inst)
        c = inst.condition
        if c == "normal":
            swapped = set()
        elif c == "random":
            swapped = set(modalities)
        elif c.endswith("_only"):
            swapped = set(modalities) - {c.removesuffix("_only")}
        else:
            swapped = {c.removeprefix("no_")}
        for m in modalities:
            if m in swapped:
                assert src[m] != inst.item_id, (inst.instance_id, m)
            else:
                assert src[m] == inst.item_id, (inst.instance_id, m)


def test_one_donor_per_modality_shared_by_every_condition_and_marginals_kept():
    items = make_items(20, ("video", "audio"))
    instances = spectrum.expand_all(items, None, seed=1)
    donor_of: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for inst in instances:
        for m, src in shown(inst).items():
            if src != inst.item_id:
                donor_of[(inst.item_id, m)].add(src)
    # every condition that replaces m shows the same donor's m
    assert all(len(v) == 1 for v in donor_of.values())
    # within each condition, every item's modality is shown exactly once (a permutation: marginals kept)
    ids = sorted(it.item_id for it in items)
    for c in spectrum.conditions_for(["video", "audio", "text"]):
        rows = [shown(i) for i in instances if i.condition == c]
        for m in ("video", "audio", "text"):
            assert sorted(r[m] for r in rows) == ids, (c, m)
    # the modalities' derangements are independent draws, not one shared shuffle
    video = {i: next(iter(donor_of[(i, "video")])) for i in ids}
    audio = {i: next(iter(donor_of[(i, "audio")])) for i in ids}
    assert video != audio


def test_donors_stay_in_their_split_and_with_donor_within_in_their_category():
    items = make_items(12, split="a") + make_items(9, split="b", prefix="r")
    by_id = {it.item_id: it for it in items}
    for options in (Options(), Options(donor_within=["category"])):
        for inst in spectrum.expand_all(items, None, seed=2, options=options):
            for src in shown(inst).values():
                assert by_id[src].split == inst.split
                if options.donor_within:
                    assert by_id[src].category == inst.category


def test_target_stays_and_options_stay_with_the_item_by_default():
    items = make_items(10)
    by_id = {it.item_id: it for it in items}
    for inst in spectrum.expand_all(items, None, seed=0):
        item = by_id[inst.item_id]
        assert inst.target == item.answer
        assert inst.option_texts == item.options and inst.option_labels == list("ABCD")
        assert inst.abstain_label is None and inst.category == item.category


def test_question_plus_options_moves_the_options_and_keeps_option_counts_equal():
    items = make_items(18, n_options=(3, 4, 5))
    by_id = {it.item_id: it for it in items}
    instances = spectrum.expand_all(items, None, seed=0, options=Options(text_unit="question+options"))
    for inst in instances:
        text_from = by_id[shown(inst)["text"]]
        assert inst.option_texts == text_from.options
        assert len(inst.option_labels) == len(by_id[inst.item_id].options)  # the target label exists
        assert inst.target == by_id[inst.item_id].answer


def test_evidence_supports_the_target_only_through_the_items_own_modalities():
    items = make_items(6, ("video", "audio"))
    for inst in spectrum.expand_all(items, None, seed=0):
        src = shown(inst)
        own = {m for m, s in src.items() if s == inst.item_id}
        assert len(inst.simulation_hints) == 7  # 3 modalities + 3 pairs + the triple
        for percept, label in inst.simulation_hints.items():
            parts = set(percept.split("+"))
            assert label == (inst.target if parts <= own else None), (inst.condition, percept)


def test_ids_are_stable_and_expansion_is_free_of_the_input_order():
    items = make_items(16, ("image",))
    a = spectrum.expand_all(items, None, seed=3)
    b = spectrum.expand_all(list(reversed(items)), None, seed=3)
    assert [i.model_dump() for i in a] == [i.model_dump() for i in b]
    assert a[0].instance_id == "q000|normal|s3"
    assert len({i.instance_id for i in a}) == len(a)
    c = spectrum.expand_all(items, None, seed=4)
    assert [shown(i) for i in a] != [shown(i) for i in c]  # another seed, other donors


def test_adding_items_to_another_split_leaves_a_splits_instances_alone():
    items = make_items(10, split="a")
    alone = spectrum.expand_all(items, None, seed=0)
    more = spectrum.expand_all(items + make_items(5, split="b", prefix="r"), None, seed=0)
    assert [i.model_dump() for i in alone] == [i.model_dump() for i in more if i.split == "a"]


def test_conditions_option():
    items = make_items(5)
    run = spectrum.expand_all(items, None, 0, Options(conditions=["random", "normal"]))
    assert [i.condition for i in run if i.item_id == "q000"] == ["normal", "random"]
    with pytest.raises(InputError, match="no_image") as err:
        spectrum.expand_all(items, None, 0, Options(conditions=["no_image"]))  # two modalities: not run twice
    assert err.value.field == "protocol_options.conditions"
    with pytest.raises(ValueError, match="unknown spectrum condition"):
        Options(conditions=["image-only"])


# ---------------------------------------------------------------------------------------------------------------
# Item and benchmark checks
# ---------------------------------------------------------------------------------------------------------------

def test_item_checks_name_the_field():
    good = dict(item_id="q", question="Which?", options=["a", "b"], answer="B", media={"image": "x.png"})
    Item(**good)
    for bad, msg in [({"answer": "C"}, "answer 'C'"), ({"answer": "1"}, "label"), ({"options": ["a"]}, "at least"),
                     ({"media": {}}, "at least"), ({"media": {"text": "x"}}, "image"),
                     ({"question": ""}, "at least"), ({"item_id": " "}, "non-empty"), ({"extra": 1}, "xtra")]:
        with pytest.raises(ValueError, match=msg):
            Item(**{**good, **bad})
    refs = spectrum.media_refs(Item(**{**good, "media": {"audio": "a.wav", "image": "i.png"}}))
    assert refs == [("i.png", "image", "media.image"), ("a.wav", "audio", "media.audio")]


def test_a_lone_modality_and_lone_items_are_refused_naming_the_item():
    items = make_items(4) + make_items(1, ("image", "audio"), prefix="z")  # z000 alone shows a sound
    spectrum.validate_items(items, None, file="items.jsonl")  # items may differ in their modalities
    with pytest.raises(InputError, match="the only item of benchmark 'benchmark' split 'all' that shows an audio") \
            as err:
        spectrum.expand_all(items, type("Bench", (), {"items_file": "items.jsonl"})())
    assert err.value.item == "z000" and err.value.field == "media" and err.value.file == "items.jsonl"
    with pytest.raises(InputError) as err:
        spectrum.validate_items(make_items(4, split="a") + make_items(1, split="b", prefix="r"))
    assert err.value.item == "r000" and err.value.field == "split"


def test_lone_item_in_its_category_errors_or_is_pooled():
    items = make_items(9, categories=("x", "x", "x", "y", "y", "y", "z", "w", "v"))  # z, w, v alone
    with pytest.raises(InputError, match="only item .* with its category") as err:
        spectrum.expand_all(items, None, 0, Options(donor_within=["category"]))
    assert err.value.item == "q006" and err.value.field == "protocol_options.donor_within"
    by_id = {it.item_id: it for it in items}
    pooled = spectrum.expand_all(items, None, 0, Options(donor_within=["category"], singletons="pool"))
    for inst in pooled:
        for src in shown(inst).values():
            if by_id[inst.item_id].category in ("x", "y"):
                assert by_id[src].category == inst.category  # grouped items keep their group
            else:
                assert by_id[src].category in ("z", "w", "v")  # the lone ones lend to each other
    # one lone item joins the smallest other group (size 3 each here: the first in sorted order)
    one = make_items(7, categories=("x", "x", "x", "y", "y", "y", "z"))
    inst = spectrum.expand_all(one, None, 0, Options(donor_within=["category"], singletons="pool"))
    donors = {shown(i)["text"] for i in inst if i.item_id == "q006" and i.condition == "image_only"}
    assert {by_id[d].category for d in donors} <= {"x"}


def copies_of(items, sizes):
    """Circular copies as VLMEvalKit lays them out: question j of ``items`` asked ``sizes[j]`` times, the copies
    with the same media and stem, ids ``<id>+<k>`` and ``group`` = the original's id."""
    out = []
    for it, size in zip(items, sizes, strict=True):
        out.append(it.model_copy(update={"group": it.item_id}))
        out += [it.model_copy(update={"item_id": f"{it.item_id}+{k}", "group": it.item_id}) for k in range(1, size)]
    return out


def test_copies_of_one_question_never_lend_to_each_other():
    items = copies_of(make_items(6, categories=("x", "y")), [4, 3, 2, 4, 3, 2])
    by_id = {it.item_id: it for it in items}
    for options in (Options(), Options(donor_within=["category"]), Options(text_unit="question+options",
                                                                           singletons="pool")):
        for seed in range(3):
            instances = spectrum.expand_all(items, None, seed, options)
            for inst in instances:
                swapped = spectrum.replaced(inst.condition, ("image", "text"))
                for modality, source in shown(inst).items():  # media paths and stems name the original
                    assert (source == by_id[inst.item_id].group) == (modality not in swapped), inst.instance_id
            for condition in ("image_only", "text_only"):  # every image still shown once per copy
                seen = sorted(shown(i)["image"] for i in instances if i.condition == condition)
                assert seen == sorted(it.group for it in items)


def test_a_donor_group_of_one_questions_copies_errors_or_is_pooled():
    items = copies_of(make_items(5, categories=("x", "x", "y", "y", "z")), [2, 2, 2, 2, 3])  # z: one question
    with pytest.raises(InputError, match="3 of the 3 items .* copies of question 'q004'") as err:
        spectrum.expand_all(items, None, 0, Options(donor_within=["category"]))
    assert err.value.item == "q004" and err.value.field == "protocol_options.donor_within"
    # y with 3 copies of q002 and 2 of q003: more than half are one question's, so some copy would borrow its own
    uneven = copies_of(make_items(4, categories=("x", "x", "y", "y")), [2, 2, 3, 2])
    with pytest.raises(InputError, match="3 of the 5 items .* copies of question 'q002'") as err:
        spectrum.expand_all(uneven, None, 0, Options(donor_within=["category"]))
    assert err.value.item == "q002"
    pooled = spectrum.expand_all(items, None, 0, Options(donor_within=["category"], singletons="pool"))
    by_id = {it.item_id: it for it in items}
    for inst in pooled:
        if inst.condition != "normal":
            assert shown(inst)["image" if inst.condition == "text_only" else "text"] != by_id[inst.item_id].group
    lopsided = copies_of(make_items(1), [3]) + copies_of(make_items(1, prefix="r"), [1])
    with pytest.raises(InputError, match="3 of the 4 items are copies of question 'q000'") as err:  # no pool
        spectrum.expand_all(lopsided, None, 0, Options(singletons="pool"))
    assert err.value.item == "q000" and err.value.field == "split"


def test_question_plus_options_needs_a_donor_with_the_same_option_count():
    items = make_items(5, n_options=(4, 4, 4, 4, 3))  # q004 is the only 3-option item
    spectrum.expand_all(items, None, 0)  # options stay with the item: any donor will do
    with pytest.raises(InputError, match="option count") as err:
        spectrum.expand_all(items, None, 0, Options(text_unit="question+options"))
    assert err.value.item == "q004" and err.value.field == "protocol_options.text_unit"
    with pytest.raises(InputError, match="option count"):
        spectrum.expand_all(items, None, 0, Options(text_unit="question+options", singletons="pool"))


# ---------------------------------------------------------------------------------------------------------------
# The simulated engine end to end (no Ray): known reliances -> known accuracies and dependency labels
# ---------------------------------------------------------------------------------------------------------------

N_ITEMS = 400
INSTANCES = spectrum.expand_all(make_items(N_ITEMS, ("image",)), None, seed=0)


def predictions(model: str, reliance: dict[str, float], instances=INSTANCES) -> list[dict]:
    engine = create_engine("simulated", model=model, reliance=reliance, margin=12.0, noise=0.5)
    requests = [EngineRequest(inst, {}, "zs") for inst in instances]
    rows = []
    for req, res in zip(requests, engine.score(requests), strict=True):
        inst = req.instance
        rows.append({"model": model, "prompt": "zs", "protocol": inst.protocol, "split": inst.split,
                     "item_id": inst.item_id, "instance_id": inst.instance_id, "condition": inst.condition,
                     "target": inst.target, "choice": res.choice, "abstain_label": inst.abstain_label,
                     "confidence": res.confidence, "confidence_method": res.confidence_method,
                     "n_options": len(inst.option_labels), "category": inst.category})
    return rows


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema_overrides={"abstain_label": pl.Utf8, "choice": pl.Utf8})


def values(table: pl.DataFrame, model: str) -> dict[tuple[str, str], dict]:
    return {(r["metric"], r["key"]): r for r in table.filter(pl.col("model") == model).iter_rows(named=True)}


def test_image_reliant_model_has_image_intra_dependency():
    table = metrics_table(frame(predictions("img", {"image": 0.9})), resamples=400, seed=0)
    got = values(table, "img")
    clean, chance = 0.9 + 0.1 / 4, 0.25
    tol_clean = 4 * math.sqrt(clean * (1 - clean) / N_ITEMS)
    tol_chance = 4 * math.sqrt(chance * (1 - chance) / N_ITEMS)
    assert abs(got[("accuracy", "normal")]["value"] - clean) < tol_clean
    assert abs(got[("accuracy", "image_only")]["value"] - clean) < tol_clean
    assert abs(got[("accuracy", "text_only")]["value"] - chance) < tol_chance
    assert abs(got[("accuracy", "random")]["value"] - chance) < tol_chance
    assert got[("chance", "")]["value"] == pytest.approx(0.25)
    assert got[("intra", "image")]["ci_low"] > 0.5
    assert got[("intra", "text")]["ci_low"] < 0 < got[("intra", "text")]["ci_high"]
    assert [k for m, k in got if m == "dependency" and "/" not in k] == ["image-intra"]
    dep = got[("dependency", "image-intra")]
    assert dep["value"] is None and dep["ci_low"] is None and dep["n"] == 3 * N_ITEMS
    assert got[("perceptual_score", "image")]["value"] > 0.5  # normal - text_only
    assert abs(got[("perceptual_score", "text")]["value"]) < 2 * tol_clean  # normal - image_only
    assert got[("invalid_rate", "")]["value"] == 0.0
    # per category: the same picture, keys prefixed with the category
    assert [k for m, k in got if m == "dependency" and "/" in k] == ["x/image-intra", "y/image-intra"]
    assert got[("accuracy", "x/normal")]["n"] == N_ITEMS // 2


def test_model_needing_image_and_text_together_is_inter_only():
    table = metrics_table(frame(predictions("joint", {"image+text": 0.9})), resamples=400, seed=0)
    got = values(table, "joint")
    clean, chance = 0.9 + 0.1 / 4, 0.25
    tol = 4 * math.sqrt(chance * (1 - chance) / N_ITEMS)
    assert abs(got[("accuracy", "normal")]["value"] - clean) < 4 * math.sqrt(clean * (1 - clean) / N_ITEMS)
    for c in ("image_only", "text_only", "random"):
        assert abs(got[("accuracy", c)]["value"] - chance) < tol, c
    assert [k for m, k in got if m == "dependency" and "/" not in k] == ["inter-only"]
    assert got[("inter", "")]["value"] == pytest.approx(
        got[("accuracy", "normal")]["value"] - max(got[("accuracy", "image_only")]["value"],
                                                   got[("accuracy", "text_only")]["value"]))
    assert got[("inter", "")]["ci_low"] > 0.5


def test_both_models_together_add_the_ensemble_and_three_modalities_work():
    rows = predictions("img", {"image": 0.9}) + predictions("joint", {"image+text": 0.9})
    table = metrics_table(frame(rows), resamples=100, seed=0)
    assert set(table["model"].unique()) == {"img", "joint", "ensemble"}
    # two voters with confidences: where they disagree the more confident one wins (worked out here row by row)
    by_instance: dict[str, list[dict]] = {}
    for r in rows:
        by_instance.setdefault(r["instance_id"], []).append(r)
    want = []
    for votes in by_instance.values():
        if votes[0]["condition"] != "image_only":
            continue
        valid = [v for v in votes if v["choice"] is not None]
        if valid:
            best = max(valid, key=lambda v: (v["confidence"], v["model"] == "img"))
            want.append(best["choice"] == best["target"])
    assert values(table, "ensemble")[("accuracy", "image_only")]["value"] == pytest.approx(sum(want) / len(want))
    assert values(table, "ensemble")[("accuracy", "image_only")]["value"] != \
        values(table, "img")[("accuracy", "image_only")]["value"]
    three = spectrum.expand_all(make_items(300, ("video", "audio")), None, seed=0)
    table = metrics_table(frame(predictions("va", {"video": 0.9, "audio": 0.9}, three)), resamples=300, seed=0)
    got = values(table, "va")
    deps = [k for m, k in got if m == "dependency" and "/" not in k]
    assert deps == ["video-intra+audio-intra"]
    assert {k for m, k in got if m == "perceptual_score" and "/" not in k} == {"video", "audio", "text"}
    # only text removed: both clean media still vote -> perceptual_score[text] ~ 0; video removed: audio still there
    assert abs(got[("perceptual_score", "text")]["value"]) < 0.06
    assert got[("accuracy", "no_video")]["value"] == pytest.approx(got[("accuracy", "audio_only")]["value"], abs=0.08)


def test_dependency_matches_the_printed_intra_intervals():
    """The label is read off the same intervals the table prints for ``intra``, overall and per category."""
    rows = []
    for model, rel in [("m1", {"image": 0.3, "text": 0.3}), ("m2", {"text": 0.15}), ("m3", {"image": 0.05})]:
        rows += predictions(model, rel, INSTANCES[: 4 * 200])
    table = metrics_table(frame(rows), resamples=300, seed=5)
    labels = set()
    for model in ("m1", "m2", "m3", "ensemble"):
        got = values(table, model)
        for scope in ("", "x/", "y/"):
            above = [m for m in ("image", "text") if got[("intra", f"{scope}{m}")]["ci_low"] > 0]
            normal = got[("accuracy", f"{scope}normal")]["value"]
            chance = got[("chance", scope.rstrip("/"))]["value"]
            # with no modality above 0, at chance unless accuracy[normal] - chance is clearly above 0 (a wide margin
            # either way here: the check reads the label, the exact interval is the metrics' own)
            fallback = "at-chance" if normal - chance < 0.05 else "inter-only"
            label = "+".join(f"{m}-intra" for m in above) or fallback
            assert [k for m, k in got if m == "dependency" and k.startswith(scope) and
                    ("/" in k) == bool(scope)] == [f"{scope}{label}"], (model, scope)
            labels.add(label)
    assert len(labels) >= 3  # the models differ: the check is not one label everywhere


# ---------------------------------------------------------------------------------------------------------------
# The built-in synthetic benchmark
# ---------------------------------------------------------------------------------------------------------------

def test_synthetic_benchmark_answers_match_its_pictures(tmp_path, monkeypatch):
    """Every answer is checked against the picture read back from disk (nearest palette colour of the decoded
    pixels, width vs height) or the question's own numbers; the folder loads and is deterministic."""
    import re

    from omnieval.datasets.benchmark import check_media, load_benchmark
    from omnieval.datasets.synthetic_spectrum import RGB, make_spectrum_benchmark
    from omnieval.media.decode import decode_image

    root = make_spectrum_benchmark(tmp_path / "a", seed=3, n_items=16)
    bench = load_benchmark(root)
    assert check_media(bench, "probe") == len({it.media["image"] for it in bench.items})
    assert collections.Counter(it.category for it in bench.items) == dict.fromkeys(
        ("colour", "layout", "arithmetic", "check"), 4)
    for item in bench.items:
        pixels = decode_image(root / item.media["image"]).data
        mean = pixels.reshape(-1, 3).mean(axis=0)
        colour = min(RGB, key=lambda c: float(((np.array(RGB[c]) - mean) ** 2).sum()))
        assert float(np.abs(np.array(RGB[colour]) - mean).max()) < 8, (item.item_id, mean)
        h, w = pixels.shape[:2]
        layout = "landscape" if w > h else "portrait" if h > w else "square"
        answer = item.options[LABELS.index(item.answer)]
        if item.category == "colour":
            assert answer == colour and len(set(item.options)) == 4
        elif item.category == "layout":
            assert answer == layout
        elif item.category == "arithmetic":
            a, b = map(int, re.findall(r"\d+", item.question))
            assert answer == str(a + b) and len(set(item.options)) == 4
        else:
            asked = item.question.removeprefix("Is the picture ").removesuffix("?")
            assert answer == ("yes" if asked == colour else "no")
    assert sum(it.answer == "A" for it in bench.items if it.category == "check") == 2  # balanced yes / no
    assert len(spectrum.expand_all(bench.items, bench, seed=0, options=Options(donor_within=["category"]))) == 64
    again = make_spectrum_benchmark(tmp_path / "b", seed=3, n_items=16)
    files = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((root / f).read_bytes() == (again / f).read_bytes() for f in files)
    other = make_spectrum_benchmark(tmp_path / "c", seed=4, n_items=16)
    assert (other / "items.jsonl").read_text() != (root / "items.jsonl").read_text()


def test_the_report_figure_shows_every_modality_and_keeps_each_models_colour(monkeypatch):
    """A video-reliant and an audio-reliant model, each under two prompt styles: the figure has a bar group for
    video, audio and text, the audio model's audio gain is the one whose interval lies above 0, and each model keeps
    one colour across its prompt styles (another style, another hatch)."""
    from omnieval.report import plots
    from omnieval.report import spectrum as section_module
    from omnieval.report.inputs import ProtocolInput

    instances = spectrum.expand_all(make_items(200, ("video", "audio")), None, seed=0)
    rows = []
    for model, reliance in (("vid", {"video": 0.9}), ("aud", {"audio": 0.9})):
        for prompt in ("zs", "cot"):
            rows += [{**r, "prompt": prompt} for r in predictions(model, reliance, instances)]
    table = metrics_table(frame(rows), resamples=200, seed=0).with_columns(run=pl.lit("r"), _rid=pl.lit(0))
    drawn = []
    monkeypatch.setattr(plots, "bar_panels", lambda panels, **kw: drawn.append(panels) or b"png")
    section_module.section(ProtocolInput("spectrum", table, None, None, ["r"]))
    (panels,) = drawn
    (_title, _ylabel, series, _xlabel), = panels
    assert [p[0] for p in series[0].points] == ["video", "audio", "text"]
    by_label = {s.label: s for s in series}
    assert by_label["aud · zs"].colour == by_label["aud · cot"].colour != by_label["vid · zs"].colour
    assert by_label["aud · zs"].style == 0 and by_label["aud · cot"].style == 1  # zs first, as every table
    audio = {s.label: dict((p[0], p[1:]) for p in s.points)["audio"] for s in series}
    assert audio["aud · zs"][1] > 0 and audio["vid · zs"][2] > -0.2 and audio["vid · zs"][1] < 0.1


def test_a_benchmark_of_two_modality_sets_gives_its_contrasts_per_set():
    """Image+audio items beside video+audio items: each condition's accuracy is over the items that have it, and
    intra / perceptual_score compare conditions over one set's items (recounted here from the rows), never across
    sets."""
    items = make_items(120, ("image", "audio")) + make_items(120, ("video", "audio"), prefix="v")
    instances = spectrum.expand_all(items, None, seed=0)
    rows = frame(predictions("img", {"image": 0.9}, instances))
    table = metrics_table(rows, resamples=50, seed=0)
    got = {k: r["value"] for k, r in values(table, "img").items()}
    correct = (pl.col("choice") == pl.col("target")).cast(pl.Float64)

    def acc(condition: str, prefix: str | None = None) -> float:
        cell = rows.filter((pl.col("condition") == condition)
                           & (pl.col("item_id").str.starts_with(prefix) if prefix else pl.lit(True)))
        return float(cell.select(correct.mean()).item())

    assert got[("accuracy", "image_only")] == pytest.approx(acc("image_only"), abs=1e-12)
    assert rows.filter(pl.col("condition") == "image_only")["item_id"].str.starts_with("q").all()
    assert got[("accuracy", "random")] == pytest.approx(acc("random"), abs=1e-12)  # over all 240 items
    image_set, video_set = "modalities=image+audio+text", "modalities=video+audio+text"
    assert got[("intra", f"{image_set}/image")] == pytest.approx(acc("image_only", "q") - acc("random", "q"),
                                                                 abs=1e-12)
    assert got[("intra", f"{video_set}/video")] == pytest.approx(acc("video_only", "v") - acc("random", "v"),
                                                                 abs=1e-12)
    assert got[("perceptual_score", f"{image_set}/image")] == pytest.approx(acc("normal", "q") - acc("no_image", "q"),
                                                                            abs=1e-12)
    assert got[("intra", f"{image_set}/image")] > 0.4  # the model sees the images: a large, real contrast
    across = [k for k in got if k[0] in ("intra", "inter", "perceptual_score", "dependency")
              and not k[1].startswith("modalities=")]
    assert across == []  # image_only (image items) minus random (all items) would compare different questions
    single = values(metrics_table(frame(predictions("img", {"image": 0.9})), resamples=0, seed=0), "img")
    assert not any(k.startswith("modalities=") for _, k in single)
