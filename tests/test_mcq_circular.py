"""VLMEvalKit's circular copies, from a TSV in the release's exact layout to the metrics.

The TSV is written as VLMEvalKit's own are (pandas ``to_csv(sep='\\t')``): every question once per rotation of its
options, the copies at ``index + k * 1,000,000`` with the options and the answer rotated and the ``image`` cell
holding the original's index as a string, ``'nan'`` where a field is empty, an ``l2-category`` column, rows not in
index order. Checked: the converter's counts, groups, shared images and task; that no spectrum donor is a copy of
the item's own question (a plain loop over the expanded instances); then a simulated model's predictions (no Ray):
CircularEval, three more metrics and the bootstrap's unit count against pandas on the predictions."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pandas as pd
import polars as pl
import pytest

from omnieval.core.run_outputs import predictions_table
from omnieval.core.schema import LABELS, InputError
from omnieval.datasets.mcq import convert_mcq
from omnieval.engines import EngineRequest, create_engine
from omnieval.protocols import spectrum
from omnieval.run.predictions import Prediction
from omnieval.stats.metrics import metrics_table
from omnieval.stats.read import read_predictions

STRIDE = 1_000_000
CATEGORIES = ("attribute_recognition", "object_localization")
L2 = {"attribute_recognition": "fine-grained_perception", "object_localization": "coarse_perception"}
# 12 questions: two per (category, option count), so that donor_within [category, n_options] leaves every copy
# exactly one other question to borrow from (the tightest case).
QUESTIONS = [(7 + 13 * q, CATEGORIES[q % 2], 2 + (q // 2) % 3) for q in range(12)]
COLOURS = [f"0x{(37 * q + 11) % 256:02x}{(91 * q + 50) % 256:02x}{(53 * q + 200) % 256:02x}" for q in range(12)]


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> list[bytes]:
    """One distinct PNG per question, made by ffmpeg."""
    from omnieval.media.synth import still_image

    folder = tmp_path_factory.mktemp("circular-pictures")
    return [still_image(folder / f"q{q}.png", colour=c, size=(24, 16)).read_bytes() for q, c in enumerate(COLOURS)]


def release_rows(pictures: list[bytes]) -> list[dict]:
    """The rows of the release: question q's options are words, its answer the option ``q % n``; copy k rotates
    the options by k (VLMEvalKit's circular shift), so the correct option moves with them."""
    rows = []
    for q, (index, category, n) in enumerate(QUESTIONS):
        options = [f"choice {q}-{j}" for j in range(n)]
        correct = options[q % n]
        for k in range(n):
            rotated = options[k:] + options[:k]
            row = {"index": index + k * STRIDE, "question": f"What is shown in picture {q}?",
                   "hint": "nan" if q % 3 else f"Picture {q} is one flat colour.",
                   **{LABELS[j]: rotated[j] if j < n else "nan" for j in range(4)},
                   "answer": LABELS[rotated.index(correct)], "category": category, "l2-category": L2[category],
                   "split": "dev", "source": "synthetic", "comment": "nan",
                   "image": base64.b64encode(pictures[q]).decode() if k == 0 else str(index)}
            rows.append(row)
    # not in index order: some copies come before their original
    return rows[1::2] + rows[0::2]


def write_release(folder: Path, rows: list[dict]) -> Path:
    path = folder / "MMBench_DEV_EN.tsv"
    pd.DataFrame(rows).to_csv(path, sep="\t", index=False)
    return path


@pytest.fixture(scope="module")
def converted(tmp_path_factory, pictures):
    folder = tmp_path_factory.mktemp("circular")
    rows = release_rows(pictures)
    report = convert_mcq(write_release(folder, rows), folder / "bench")
    items = [spectrum.Item.model_validate_json(line)
             for line in (folder / "bench" / "items.jsonl").read_text().splitlines()]
    return folder / "bench", report, items, rows


def test_copies_become_items_of_one_group_sharing_the_originals_image(converted, pictures):
    bench, report, items, rows = converted
    n_items = sum(n for _, _, n in QUESTIONS)
    assert report.n_items == len(items) == len(rows) == n_items == 36
    assert report.n_questions == len(QUESTIONS) and report.n_media == len(QUESTIONS)
    assert "circular copies of 12 questions" in report.summary()
    assert json.loads((bench / "benchmark.json").read_text())["n_questions"] == 12
    by_id = {it.item_id: it for it in items}
    for row in rows:
        it = by_id[str(row["index"])]
        q = next(q for q, (index, _, _) in enumerate(QUESTIONS) if index == row["index"] % STRIDE)
        assert it.group == str(row["index"] % STRIDE)
        assert (bench / it.media["image"]).read_bytes() == pictures[q]
        assert it.media == by_id[it.group].media  # one file for every copy
        assert it.task == row["l2-category"] and it.category == row["category"]
        assert it.options == [row[label] for label in LABELS[:len(it.options)]] and it.answer == row["answer"]
        assert it.question == (row["question"] if row["hint"] == "nan" else f"{row['hint']}\n{row['question']}")
    assert len(list((bench / "media").iterdir())) == len(QUESTIONS)


def test_a_copy_that_is_not_a_rotation_is_refused_naming_its_row(tmp_path, pictures):
    rows = release_rows(pictures)
    bad = next(r for r in rows if r["index"] == QUESTIONS[4][0] + STRIDE)
    bad["A"] = "something else"
    with pytest.raises(InputError, match=r"circular copy of index 59 .* not a reordering") as err:
        convert_mcq(write_release(tmp_path, rows), tmp_path / "bench")
    assert err.value.field == "options" and err.value.item.startswith(f"{bad['index']} (row ")
    assert err.value.file.endswith("MMBench_DEV_EN.tsv")


def test_ids_that_only_look_circular_are_not_grouped(tmp_path, pictures):
    """Large indices with no original among the rows are plain items."""
    rows = [r for r in release_rows(pictures) if r["index"] < STRIDE]
    for r in rows:
        r["index"] += 5 * STRIDE
    report = convert_mcq(write_release(tmp_path, rows), tmp_path / "bench")
    assert report.n_questions is None
    assert all('"group"' not in line for line in (tmp_path / "bench" / "items.jsonl").read_text().splitlines())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("donor_within", [[], ["category", "n_options"]])
def test_no_donor_is_a_copy_of_the_items_own_question(converted, donor_within, seed):
    bench, _, items, _ = converted
    instances = spectrum.expand_all(items, None, seed=seed, options=spectrum.Options(donor_within=donor_within))
    assert len(instances) == 4 * len(items)
    image_owners: dict[str, set[str]] = {}
    question_owners: dict[str, set[str]] = {}
    for it in items:
        image_owners.setdefault(it.media["image"], set()).add(it.group)
        question_owners.setdefault(it.question, set()).add(it.group)
    by_id = {it.item_id: it for it in items}
    shown = {"image": {}, "text": {}}  # per condition: how often each image / stem is shown
    for inst in instances:
        it = by_id[inst.item_id]
        (segment,) = inst.segments
        image_from, text_from = image_owners[segment.path], question_owners[inst.question]
        assert len(image_from) == len(text_from) == 1
        swapped = spectrum.replaced(inst.condition, it.modalities)
        assert (it.group in image_from) == ("image" not in swapped), (inst.instance_id, image_from)
        assert (it.group in text_from) == ("text" not in swapped), (inst.instance_id, text_from)
        assert inst.field("group") == it.group and inst.option_texts == it.options and inst.target == it.answer
        if donor_within:
            donor = next(o for o in items if o.group in (image_from if "image" in swapped else {it.group}))
            assert (donor.category, len(donor.options)) == (it.category, len(it.options))
        shown["image"].setdefault(inst.condition, []).append(segment.path)
        shown["text"].setdefault(inst.condition, []).append(inst.question)
    for modality, per_condition in shown.items():  # marginals kept: each shown as often as its copies
        want = sorted(it.media["image"] if modality == "image" else it.question for it in items)
        for condition, seen in per_condition.items():
            assert sorted(seen) == want, (modality, condition)


def simulated_predictions(items, models=(("sim", {"image": 0.7, "text": 0.3}),), prompts=("zs",)) -> pl.DataFrame:
    """Predictions rows as the pipeline writes them (``Prediction.scored``), from the simulated engine; some
    answers invalid, which CircularEval counts as wrong."""
    instances = spectrum.expand_all(items, None, seed=0)
    rows = []
    for name, reliance in models:
        engine = create_engine("simulated", model=name, reliance=reliance, invalid_rate=0.04, seed=5)
        for prompt in prompts:
            requests = [EngineRequest(inst, {}, prompt) for inst in instances]
            for req, res in zip(requests, engine.score(requests), strict=True):
                rows.append(Prediction.scored(req.instance, name, "simulated", prompt, choice=res.choice,
                                              confidence=res.confidence, confidence_method=res.confidence_method))
    return pl.from_arrow(predictions_table(r.row() for r in rows))


def test_circular_accuracy_and_metrics_against_pandas(converted, tmp_path):
    _, _, items, _ = converted
    path = tmp_path / "predictions.parquet"
    simulated_predictions(items).write_parquet(path)
    frame = read_predictions([path])
    table = metrics_table(frame, resamples=300, seed=0)
    got = {(r["metric"], r["key"]): r for r in table.iter_rows(named=True) if r["model"] == "sim"}

    pred = pd.read_parquet(path)
    assert len(pred) == 4 * 36 and pred["group"].nunique() == 12
    # the bootstrap draws questions, not their 36 copies: a row counts the questions behind it (all 12, or those of
    # its category)
    groups_of = pred.groupby("category")["group"].nunique().to_dict()
    for r in table.iter_rows(named=True):
        scope = next((c for c in groups_of if r["key"] == c or r["key"].startswith(f"{c}/")), None)
        assert r["n_items"] == (groups_of[scope] if scope else 12), (r["metric"], r["key"], r["n_items"])
    pred["correct"] = pred["choice"].notna() & (pred["choice"] == pred["target"])
    circ = pred.groupby(["condition", "group"])["correct"].all().groupby("condition").mean()
    assert 0 < circ["normal"] < 1 and circ.nunique() > 1  # not degenerate
    for condition in ("normal", "image_only", "text_only", "random"):
        row = got[("circular_accuracy", condition)]
        assert row["value"] == pytest.approx(circ[condition]) and row["n"] == 12
        assert row["ci_low"] <= row["value"] <= row["ci_high"]
    assert got[("circular_accuracy", "normal")]["ci_low"] < got[("circular_accuracy", "normal")]["ci_high"]
    per_category = pred.groupby(["category", "condition", "group"])["correct"].all().groupby(
        ["category", "condition"]).mean()
    for (category, condition), value in per_category.items():
        assert got[("circular_accuracy", f"{category}/{condition}")]["value"] == pytest.approx(value)

    valid = pred[pred["choice"].notna()]
    acc = valid.groupby("condition")["correct"].mean()
    assert got[("accuracy", "normal")]["value"] == pytest.approx(acc["normal"])
    assert got[("accuracy", "normal")]["n"] == (valid["condition"] == "normal").sum()
    assert got[("intra", "image")]["value"] == pytest.approx(acc["image_only"] - acc["random"])
    assert got[("inter", "")]["value"] == pytest.approx(acc["normal"] - max(acc["image_only"], acc["text_only"]))
    assert got[("chance", "")]["value"] == pytest.approx((1 / pred["n_options"]).mean())
    assert got[("invalid_rate", "")]["value"] == pytest.approx(pred["choice"].isna().mean()) and \
        got[("invalid_rate", "")]["value"] > 0
    assert circ["normal"] <= acc["normal"]


def test_without_groups_copies_are_independent_items_and_no_circular_accuracy(converted):
    _, _, items, _ = converted
    frame = simulated_predictions(items).with_columns(group=pl.lit(None, dtype=pl.Utf8))
    table = metrics_table(frame, resamples=50, seed=0)
    assert max(table["n_items"]) == 36  # rows over every item count all 36 copies (sub-scoped rows fewer)
    assert "circular_accuracy" not in set(table["metric"])


def test_two_models_ensemble_and_paired_differences_resample_questions(converted):
    from omnieval.stats.paired import metrics_and_paired

    _, _, items, _ = converted
    frame = simulated_predictions(items, (("a", {"image": 0.7}), ("b", {"text": 0.6})))
    metrics, paired = metrics_and_paired(frame, resamples=100, seed=0, permutations=200)
    assert set(metrics["model"]) == {"a", "b", "ensemble"} and max(metrics["n_items"]) == 12
    assert max(paired["n_items"]) == 12 and len(paired) > 0
    ensemble = metrics.filter((pl.col("model") == "ensemble") & (pl.col("metric") == "circular_accuracy")
                              & (pl.col("key") == "normal"))
    assert ensemble.height == 1


def test_sign_flip_tests_and_power_take_questions_as_units(converted):
    """``omnieval stats``' zs-vs-cot sign-flip test averages the copies of a question into one difference (pandas
    reference), and ``omnieval power`` counts questions."""
    from omnieval.stats.power import power_table
    from omnieval.stats.significance import stats_table

    _, _, items, _ = converted
    frame = simulated_predictions(items, prompts=("zs", "cot"))
    tests = stats_table(frame, permutations=500, seed=0)
    (row,) = tests.filter(pl.col("test") == "permutation").iter_rows(named=True)
    pred = frame.to_pandas()
    pred = pred[pred["choice"].notna()].assign(correct=lambda d: (d["choice"] == d["target"]).astype(float))
    cells = pred.pivot_table(index=["group", "item_id", "condition"], columns="prompt", values="correct").dropna()
    per_question = (cells["cot"] - cells["zs"]).groupby("group").mean()
    assert row["n"] == len(per_question) == 12
    assert row["estimate"] == pytest.approx(per_question.mean()) and 0 <= row["p_value"] <= 1
    power = power_table(frame)
    assert max(power["n_items"]) == 12


@pytest.mark.slow
def test_the_pipeline_writes_each_items_group(ray_session, converted, tmp_path):
    """Through Ray and the real prediction writer: every row carries its item's group, and the metrics resample
    the 12 questions."""
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    bench, _, items, _ = converted
    config = parse_run_config({
        "benchmark": str(bench), "output": str(tmp_path / "run"), "protocol": "spectrum", "decode": {"max_side": 32},
        "models": [{"name": "sim", "engine": "simulated", "options": {"reliance": {"image": 0.7}, "seed": 1}}]})
    result = run_evaluation(config, progress=False)
    assert result.n_errors == 0 and result.n_instances == 4 * len(items)
    pred = pd.read_parquet(result.predictions_path)
    assert dict(zip(pred["item_id"], pred["group"], strict=True)) == {it.item_id: it.group for it in items}
    table = metrics_table(pl.read_parquet(result.predictions_path), resamples=50)
    assert max(table["n_items"]) == 12 and "circular_accuracy" in set(table["metric"])
