"""The spectrum metrics against hand-computed tables: accuracy, chance, intra, inter, perceptual_score overall and per
category, invalid_rate, the dependency label, and the majority-vote ensemble with its tie rules."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from omnieval.protocols import spectrum
from omnieval.stats.metrics import metrics_table


def row(model, item, condition, choice, target="A", n_options=4, category=None, prompt="zs"):
    return {"model": model, "prompt": prompt, "protocol": "spectrum", "split": "all", "item_id": item,
            "instance_id": f"{item}|{condition}|s0", "condition": condition, "target": target, "choice": choice,
            "abstain_label": None, "confidence": None, "confidence_method": None, "n_options": n_options,
            "category": category}


def frame(rows):
    return pl.DataFrame(rows, schema_overrides={"choice": pl.Utf8, "abstain_label": pl.Utf8, "confidence": pl.Float64,
                                                "confidence_method": pl.Utf8, "category": pl.Utf8})


def table_of(table: pl.DataFrame, model: str) -> dict[tuple[str, str], tuple[float | None, int]]:
    return {(r["metric"], r["key"]): (r["value"], r["n"])
            for r in table.filter(pl.col("model") == model).iter_rows(named=True)}


# choices of one model; target A everywhere; i4 has two options; None = invalid answer
CHOICES = {            # i1   i2   i3    i4
    "normal":          ("A", "A", "A", "B"),
    "image_only":      ("A", "B", "A", None),
    "text_only":       ("B", "B", "A", "A"),
    "random":          ("B", "C", None, "B"),
}
CATEGORY = {"i1": "x", "i2": "x", "i3": "y", "i4": "y"}


def hand_rows(model="m1"):
    return [row(model, item, c, choice, n_options=2 if item == "i4" else 4, category=CATEGORY[item])
            for c, choices in CHOICES.items() for item, choice in zip(CATEGORY, choices, strict=True)]


# worked by hand from CHOICES (valid answers only in accuracy denominators)
EXPECTED = {
    ("accuracy", "normal"): (3 / 4, 4), ("accuracy", "image_only"): (2 / 3, 3),
    ("accuracy", "text_only"): (2 / 4, 4), ("accuracy", "random"): (0.0, 3),
    ("chance", ""): ((3 * 0.25 + 0.5) / 4, 16),
    ("intra", "image"): (2 / 3 - 0, 6), ("intra", "text"): (0.5 - 0, 7),
    ("inter", ""): (0.75 - 2 / 3, 11),
    ("perceptual_score", "image"): (0.75 - 0.5, 8), ("perceptual_score", "text"): (0.75 - 2 / 3, 7),
    ("invalid_rate", ""): (2 / 16, 16),
    ("error_rate", ""): (0.0, 16),  # no row has an error
    # category x = i1, i2
    ("accuracy", "x/normal"): (1.0, 2), ("accuracy", "x/image_only"): (0.5, 2),
    ("accuracy", "x/text_only"): (0.0, 2), ("accuracy", "x/random"): (0.0, 2),
    ("chance", "x"): (0.25, 8), ("intra", "x/image"): (0.5, 4), ("intra", "x/text"): (0.0, 4),
    ("inter", "x"): (0.5, 6), ("perceptual_score", "x/image"): (1.0, 4), ("perceptual_score", "x/text"): (0.5, 4),
    # category y = i3, i4
    ("accuracy", "y/normal"): (0.5, 2), ("accuracy", "y/image_only"): (1.0, 1),
    ("accuracy", "y/text_only"): (1.0, 2), ("accuracy", "y/random"): (0.0, 1),
    ("chance", "y"): ((0.25 + 0.5) / 2, 8), ("intra", "y/image"): (1.0, 2), ("intra", "y/text"): (1.0, 3),
    ("inter", "y"): (-0.5, 5), ("perceptual_score", "y/image"): (-0.5, 4), ("perceptual_score", "y/text"): (-0.5, 3),
}


def test_formulas_overall_and_per_category_against_a_hand_computed_table():
    got = table_of(metrics_table(frame(hand_rows()), resamples=0), "m1")
    assert set(got) == set(EXPECTED)  # no dependency without resamples, nothing unexpected
    for key, (value, n) in EXPECTED.items():
        assert got[key][0] == pytest.approx(value, abs=1e-12), key
        assert got[key][1] == n, key


def test_with_resamples_the_same_values_and_a_dependency_row_per_scope():
    table = metrics_table(frame(hand_rows()), resamples=200, seed=1)
    got = table_of(table, "m1")
    for key, (value, _) in EXPECTED.items():
        assert got[key][0] == pytest.approx(value, abs=1e-12), key
    deps = table.filter(pl.col("metric") == "dependency")
    assert sorted(k.split("/")[0] if "/" in k else "" for k in deps["key"]) == ["", "x", "y"]
    assert deps["value"].is_null().all() and deps["ci_low"].is_null().all()


def test_chance_needs_the_option_count():
    got = table_of(metrics_table(frame(hand_rows()).drop("n_options"), resamples=0), "m1")
    assert ("chance", "") not in got and got[("accuracy", "normal")][0] == pytest.approx(0.75)


def test_three_modality_formulas():
    """Exact rates by construction (20 items): every metric follows from the condition accuracies."""
    correct = {"normal": 18, "video_only": 12, "audio_only": 8, "text_only": 6, "random": 5, "no_video": 14,
               "no_audio": 16, "no_text": 17}
    rows = [row("m", f"i{i:02d}", c, "A" if i < k else "B") for c, k in correct.items() for i in range(20)]
    got = table_of(metrics_table(frame(rows), resamples=0), "m")
    acc = {c: k / 20 for c, k in correct.items()}
    expected = {
        ("intra", "video"): acc["video_only"] - acc["random"], ("intra", "audio"): acc["audio_only"] - acc["random"],
        ("intra", "text"): acc["text_only"] - acc["random"],
        ("inter", ""): acc["normal"] - max(acc["video_only"], acc["audio_only"], acc["text_only"]),
        ("perceptual_score", "video"): acc["normal"] - acc["no_video"],
        ("perceptual_score", "audio"): acc["normal"] - acc["no_audio"],
        ("perceptual_score", "text"): acc["normal"] - acc["no_text"],
    }
    for key, value in expected.items():
        assert got[key][0] == pytest.approx(value, abs=1e-12), key
    assert got[("inter", "")][0] == pytest.approx(0.3)


def test_missing_conditions_leave_their_metrics_out():
    rows = [r for r in hand_rows() if r["condition"] != "random"]
    got = table_of(metrics_table(frame(rows), resamples=0), "m1")
    assert not any(m == "intra" for m, _ in got)
    assert ("inter", "") in got and ("perceptual_score", "image") in got


def test_dependency_label_from_resampled_intra_values():
    above = np.r_[0.2, np.linspace(0.01, 0.5, 1000)]  # 2.5% point 0.022 > 0
    straddles = np.r_[0.1, np.linspace(-0.1, 0.3, 1000)]
    assert spectrum.dependency({"image": above, "text": straddles}) == "image-intra"
    assert spectrum.dependency({"image": above, "text": above}) == "image-intra+text-intra"
    assert spectrum.dependency({"image": straddles, "text": -above}) == "inter-only"
    assert spectrum.dependency({"image": above[:1], "text": above[:1]}) is None  # no resamples, no interval
    assert spectrum.dependency({"image": np.full(10, np.nan)}) is None
    # a resample missing a cell (NaN) is dropped, as in every printed interval
    assert spectrum.dependency({"image": np.r_[above, np.nan]}) == "image-intra"


# --- the ensemble -----------------------------------------------------------------------------------------------

# per item: (target, category, {model: choice}); model order of first appearance: m2, m1, m3 (not alphabetical)
VOTES = {
    "i1": ("A", "x", {"m2": "C", "m1": "B", "m3": "C"}),   # majority C
    "i2": ("A", "x", {"m2": "C", "m1": "B", "m3": None}),  # tie B/C: m2 appears first -> C
    "i3": ("A", "x", {"m2": None, "m1": None, "m3": None}),  # no valid vote -> invalid
    "i4": ("A", "y", {"m2": "B", "m1": "A", "m3": "D"}),   # three-way tie -> m2's B
    "i5": ("A", "y", {"m1": "A", "m3": "A"}),              # m2 has no prediction: A
    "i6": ("B", "y", {"m2": None, "m1": "B", "m3": "C"}),  # tie B/C among m1 (earlier) and m3 -> B
}
ENSEMBLE_CHOICE = {"i1": "C", "i2": "C", "i3": None, "i4": "B", "i5": "A", "i6": "B"}


def vote_rows():
    rows = []
    for model in ("m2", "m1", "m3"):  # rows of m2 come first in the input
        for item, (target, category, votes) in VOTES.items():
            if model in votes:
                rows.append(row(model, item, "normal", votes[model], target=target, category=category))
    return rows


def test_ensemble_is_the_majority_with_ties_to_the_earliest_model():
    rows = vote_rows()
    derived = spectrum.derive_columns(
        frame(rows).with_columns(valid=pl.col("choice").is_not_null(), correct=pl.col("choice") == pl.col("target")))
    ens = derived.filter(pl.col("model") == "ensemble")
    assert dict(zip(ens["item_id"], ens["choice"], strict=True)) == ENSEMBLE_CHOICE
    assert ens["valid"].to_list() == [c is not None for c in ens["choice"]]
    got = table_of(metrics_table(frame(rows), resamples=0), "ensemble")
    # valid: i1 C, i2 C, i4 B, i5 A (correct), i6 B (correct, target B) -> 2 / 5; i3 invalid
    assert got[("accuracy", "normal")] == (pytest.approx(2 / 5), 5)
    assert got[("invalid_rate", "")] == (pytest.approx(1 / 6), 6)
    assert got[("accuracy", "x/normal")] == (0.0, 2)
    assert got[("accuracy", "y/normal")] == (pytest.approx(2 / 3), 3)


def test_ensemble_order_follows_first_appearance_not_names():
    rows = vote_rows()
    reordered = [r for r in rows if r["model"] == "m1"] + [r for r in rows if r["model"] != "m1"]
    ens = spectrum.ensemble_rows(frame(reordered).with_columns(valid=pl.col("choice").is_not_null(),
                                                               correct=pl.lit(False)))
    got = dict(zip(ens["item_id"], ens["choice"], strict=True))
    assert got["i2"] == "B" and got["i4"] == "A"  # m1 now comes first and wins its ties
    assert got["i1"] == "C"  # a majority is a majority in any order


def test_ensemble_matches_per_prompt_and_only_with_two_models():
    rows = vote_rows() + [{**r, "prompt": "cot"} for r in vote_rows() if r["model"] == "m1"]
    table = metrics_table(frame(rows), resamples=0)
    # under cot only m1 answered: a one-model vote is m1 itself, so there is no ensemble there
    cot = table.filter(pl.col("prompt") == "cot")
    assert set(cot["model"]) == {"m1"} and "ensemble" in set(table["model"])
    single = metrics_table(frame([r for r in rows if r["model"] == "m1"]), resamples=0)
    assert set(single["model"]) == {"m1"}
    named = [{**r, "model": "ensemble"} if r["model"] == "m3" else r for r in vote_rows()]
    assert sorted(set(metrics_table(frame(named), resamples=0)["model"])) == ["ensemble", "m1", "m2"]


def _ensemble_choices(rows) -> dict[str, str | None]:
    ens = spectrum.ensemble_rows(frame(rows).with_columns(valid=pl.col("choice").is_not_null(),
                                                          correct=pl.lit(False)))
    return dict(zip(ens["item_id"], ens["choice"], strict=True))


def _with_conf(model, item, choice, conf):
    return {**row(model, item, "normal", choice), "confidence": conf}


def test_two_models_break_ties_by_confidence_and_without_confidences_make_no_ensemble():
    # worked by hand: agreement stands; a disagreement goes to the more confident model
    rows = [_with_conf("a", "i1", "A", 0.9), _with_conf("b", "i1", "A", 0.2),   # agree -> A
            _with_conf("a", "i2", "A", 0.6), _with_conf("b", "i2", "C", 0.8),   # b more confident -> C
            _with_conf("a", "i3", "B", 0.7), _with_conf("b", "i3", "D", 0.4),   # a more confident -> B
            _with_conf("a", "i4", None, None), _with_conf("b", "i4", "D", 0.3)]  # a invalid: b alone -> D
    assert _ensemble_choices(rows) == {"i1": "A", "i2": "C", "i3": "B", "i4": "D"}
    table = metrics_table(frame(rows), resamples=0)
    assert table_of(table, "ensemble")[("accuracy", "normal")] == (pytest.approx(1 / 4), 4)  # only i1's A is right
    # the same votes without confidences: b could never win a tie, the vote would be a under another name
    plain = [{**r, "confidence": None} for r in rows]
    assert _ensemble_choices(plain) == {}
    assert set(metrics_table(frame(plain), resamples=0)["model"]) == {"a", "b"}


def test_three_models_tied_go_to_the_most_confident_label_or_else_the_earliest_model():
    tie = [_with_conf("m1", "i1", "A", 0.5), _with_conf("m2", "i1", "B", 0.9), _with_conf("m3", "i1", "C", 0.4)]
    two_one = [_with_conf("m1", "i2", "A", 0.3), _with_conf("m2", "i2", "A", 0.3), _with_conf("m3", "i2", "B", 0.99)]
    # i3: A and B tie 1-1 (m3 invalid); mean confidences A 0.4 < B 0.6 -> B
    pair = [_with_conf("m1", "i3", "A", 0.4), _with_conf("m2", "i3", "B", 0.6), _with_conf("m3", "i3", None, None)]
    # i4: a tied vote without a confidence: back to the earliest model's label (m1: A)
    partial = [_with_conf("m1", "i4", "A", None), _with_conf("m2", "i4", "B", 0.9), _with_conf("m3", "i4", "C", 0.1)]
    got = _ensemble_choices(tie + two_one + pair + partial)
    assert got == {"i1": "B", "i2": "A", "i3": "B", "i4": "A"}


# CircularEval on a hand-made table: g1 = a, a2; g2 = b, b2, b3; c alone. Invalid answers count as wrong, errored
# rows (never answered) leave their question's verdict to the answered copies.
CIRCULAR = {            # a    a2   b    b2    b3     c
    "normal":          ("A", "A", "A", None, "A", "A"),
    "text_only":       ("A", "B", "A", "A", "err", "B"),
}
GROUP = {"a": "g1", "a2": "g1", "b": "g2", "b2": "g2", "b3": "g2", "c": None}


def circular_rows(with_groups=True):
    out = []
    for condition, choices in CIRCULAR.items():
        for item, choice in zip(GROUP, choices, strict=True):
            r = row("m1", item, condition, None if choice == "err" else choice, category="x")
            out.append({**r, "group": GROUP[item] if with_groups else None,
                        "error": "engine error: timeout" if choice == "err" else None})
    return out


def test_circular_accuracy_by_hand():
    table = metrics_table(frame(circular_rows()).with_columns(pl.col("group").cast(pl.Utf8),
                                                              pl.col("error").cast(pl.Utf8)), resamples=0)
    got = table_of(table, "m1")
    # normal: g1 both right, g2 has an invalid copy, c right -> 2 of 3 questions
    assert got[("circular_accuracy", "normal")] == (pytest.approx(2 / 3), 3)
    # text_only: g1 a2 wrong, g2 right on its answered copies (b3 errored), c wrong -> 1 of 3
    assert got[("circular_accuracy", "text_only")] == (pytest.approx(1 / 3), 3)
    assert got[("circular_accuracy", "x/normal")] == (pytest.approx(2 / 3), 3)
    assert got[("accuracy", "normal")] == (1.0, 5) and got[("accuracy", "text_only")] == (pytest.approx(3 / 5), 5)
    assert max(table["n_items"]) == 3  # questions, not the six items


def test_no_circular_accuracy_without_copies():
    table = metrics_table(frame(circular_rows(with_groups=False)).with_columns(
        pl.col("group").cast(pl.Utf8), pl.col("error").cast(pl.Utf8)), resamples=0)
    assert "circular_accuracy" not in set(table["metric"]) and max(table["n_items"]) == 6


def test_no_modality_above_zero_is_at_chance_unless_the_model_beats_chance():
    rng = np.random.default_rng(0)
    around_zero = np.r_[0.0, rng.normal(0.0, 0.05, 2000)]  # row 0: the data, then the resamples
    above = np.r_[0.3, rng.normal(0.3, 0.05, 2000)]
    assert spectrum.dependency({"image": around_zero, "text": around_zero}, around_zero) == "at-chance"
    assert spectrum.dependency({"image": around_zero, "text": around_zero}, above) == "inter-only"
    assert spectrum.dependency({"image": above, "text": around_zero}, around_zero) == "image-intra"
    assert spectrum.dependency({"image": around_zero}) == "inter-only"  # without chance: inter-only or <m>-intra


def test_a_model_that_perceives_nothing_is_labelled_at_chance():
    from omnieval.engines import EngineRequest, create_engine

    instances = spectrum.expand_all([spectrum.Item(item_id=f"q{i:03d}", question=f"q{i}", options=list("wxyz"),
                                                   answer="ABCD"[i % 4], media={"image": f"i{i}.png"})
                                     for i in range(200)], None, seed=0)
    engine = create_engine("simulated", model="blind", reliance={"audio": 0.9}, seed=3)  # no audio here
    results = engine.score([EngineRequest(inst, {}, "zs") for inst in instances])
    rows = [{**row("blind", inst.item_id, inst.condition, res.choice, target=inst.target), "instance_id":
             inst.instance_id} for inst, res in zip(instances, results, strict=True)]
    table = metrics_table(frame(rows), resamples=400, seed=0)
    labels = table.filter((pl.col("metric") == "dependency") & ~pl.col("key").str.contains("/"))["key"].to_list()
    assert labels == ["at-chance"]
