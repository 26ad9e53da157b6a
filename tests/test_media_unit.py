"""The media file an item's questions share (``Instance.media_unit``, the ``media_unit`` column) and the default
resampling unit of the protocols whose items share media: each protocol's rule checked on hand-built items, the
spectrum interval over clips against a plain numpy / scipy t interval over clip means, and rows written before the
column existed resumed beside rows that have it."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from omnieval.core.schema import LABELS
from omnieval.protocols import contrastive, crossmodal, spectrum
from omnieval.stats.clusters import units_used
from omnieval.stats.metrics import metrics_table


def test_spectrum_names_the_video_else_the_image_else_the_audio_in_every_condition():
    items = [spectrum.Item(item_id=f"q{i}", question=f"question {i}", options=["a", "b", "c"], answer="A",
                           media={"video": f"v{i // 3}.mp4", "audio": f"s{i}.wav"}) for i in range(9)]
    instances = spectrum.expand_all(items, None, seed=1)
    shuffled = [inst for inst in instances if inst.donors]
    assert shuffled  # conditions that show another item's media keep the item's own unit
    for inst in instances:
        assert inst.media_unit == f"v{int(inst.item_id[1:]) // 3}.mp4"
    image = spectrum.Item(item_id="p", question="q", options=["a", "b"], answer="B",
                          media={"image": "p.png", "audio": "p.wav"})
    audio = spectrum.Item(item_id="s", question="q", options=["a", "b"], answer="B", media={"audio": "s.wav"})
    assert spectrum.media_unit(image) == "p.png" and spectrum.media_unit(audio) == "s.wav"


def test_crossmodal_names_the_context_entity_in_both_forms():
    def entity(name, vision="video"):
        return crossmodal.Entity(text=f"the {name}", audio=f"{name}.wav", **{vision: f"{name}.{vision}"})

    item = crossmodal.Item(item_id="x", question="Which {candidates} matches the {context}?",
                           context=entity("dog"), distractors=[entity("cat"), entity("cow"), entity("owl")])
    instances = crossmodal.expand_all([item], None, seed=0)
    assert len(instances) == 6 and {inst.media_unit for inst in instances} == {"dog.video"}
    audio_only = crossmodal.Entity(text="a bark", audio="bark.wav")
    assert crossmodal.media_unit(item.model_copy(update={"context": audio_only})) == "bark.wav"
    released = crossmodal.Item(item_id="y", directions={
        "T->A": {"question": "q", "context": [{"modality": "text", "input": "a bark"}],
                 "options": [{"modality": "audio", "input": f"o{i}.wav"} for i in range(4)], "answer": "B"},
        "V->A": {"question": "q", "context": [{"modality": "video", "input": "dog.mp4"}],
                 "options": [{"modality": "audio", "input": f"o{i}.wav"} for i in range(4)], "answer": "B"},
        "A->T": {"question": "q", "context": [{"modality": "audio", "input": "bark.wav"}],
                 "options": [{"modality": "text", "input": f"t{i}"} for i in range(4)], "answer": "C"}})
    # A->T comes first in DIRECTIONS: its context is the item's clip
    assert {inst.media_unit for inst in crossmodal.expand_all([released], None, seed=0)} == {"bark.wav"}
    text_only = crossmodal.Item(item_id="z", directions={"T->A": released.directions["T->A"]})
    assert crossmodal.media_unit(text_only) is None


def test_contrastive_names_the_input_that_answers():
    inputs = [{"modality": m, "path": f"{m}/{i}", "caption": f"c{i}"} for i, m in enumerate(("image", "audio",
                                                                                             "video"))]
    item = contrastive.Item(item_id="c", question="Which scene?", inputs=inputs, answer=2, selection_type="random")
    instances = contrastive.expand_all([item], None, seed=0)
    assert len(instances) == 6 and {inst.media_unit for inst in instances} == {"video/2"}


def clip_study(n_clips: int = 20, per_clip: int = 3, seed: int = 0) -> pl.DataFrame:
    """One model's spectrum predictions, ``n_clips`` videos of ``per_clip`` questions each, in every condition: a
    question is right with a probability set by its clip (so questions of a clip are correlated)."""
    items = [spectrum.Item(item_id=f"q{i:03d}", question=f"question {i}", options=["a", "b", "c", "d"],
                           answer=LABELS[i % 4], media={"video": f"clip{i // per_clip:02d}.mp4"})
             for i in range(n_clips * per_clip)]
    instances = spectrum.expand_all(items, None, seed=seed)
    rng = np.random.default_rng(seed)
    ease = dict(zip((f"clip{c:02d}.mp4" for c in range(n_clips)), rng.uniform(0.1, 0.95, n_clips), strict=True))
    right = rng.random(len(instances)) < np.array([ease[inst.media_unit] for inst in instances])
    wrong = {"A": "B", "B": "C", "C": "D", "D": "A"}
    return pl.DataFrame({
        "model": "m", "prompt": "zs", "protocol": "spectrum", "split": "s",
        "item_id": [i.item_id for i in instances], "instance_id": [i.instance_id for i in instances],
        "condition": [i.condition for i in instances], "target": [i.target for i in instances],
        "choice": [i.target if r else wrong[i.target] for i, r in zip(instances, right, strict=True)],
        "media_unit": [i.media_unit for i in instances],
    }).with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                    confidence_method=pl.lit(None, pl.Utf8))


def test_spectrum_resamples_clips_by_default_with_the_t_interval_over_clip_means():
    frame = clip_study()
    assert units_used(frame) == {"spectrum": "media_unit"}
    table = metrics_table(frame, resamples=20_000, seed=4)
    row = table.filter((pl.col("metric") == "accuracy") & (pl.col("key") == "normal")).row(0, named=True)
    normal = frame.filter(pl.col("condition") == "normal")
    per_clip = normal.group_by("media_unit").agg((pl.col("choice") == pl.col("target")).mean().alias("acc"))
    means = per_clip["acc"].to_numpy()
    c = len(means)
    assert row["n_clusters"] == c == 20 and row["n_items"] == 60
    assert row["value"] == pytest.approx(means.mean(), abs=1e-12)  # equal clip sizes: the mean of clip means
    # the textbook clustered t interval: t(0.975, C - 1) x the clip means' standard error
    half = stats.t.ppf(0.975, c - 1) * means.std(ddof=1) / np.sqrt(c)
    assert (row["ci_high"] - row["ci_low"]) / 2 == pytest.approx(half, rel=0.03)
    assert (row["ci_high"] + row["ci_low"]) / 2 == pytest.approx(row["value"], abs=1e-12)
    # resampled by question instead, the interval is narrower: it ignores that a clip's questions go together
    by_item = metrics_table(frame, resamples=20_000, seed=4, cluster="item")
    item_row = by_item.filter((pl.col("metric") == "accuracy") & (pl.col("key") == "normal")).row(0, named=True)
    assert item_row["n_clusters"] == 60 and item_row["ci_high"] - item_row["ci_low"] < row["ci_high"] - row["ci_low"]


def test_rows_without_the_column_go_with_their_questions_other_rows():
    """A run resumed across versions: a second model's rows (an older part) lack ``media_unit``; its questions
    still fall in the clips the first model's rows name, and its figures equal those of the complete file."""
    one = clip_study(seed=2)
    full = pl.concat([one, one.with_columns(model=pl.lit("n"))])
    older = pl.concat([one, one.with_columns(model=pl.lit("n"), media_unit=pl.lit(None, pl.Utf8))])
    a = metrics_table(full, resamples=500, seed=1).sort(["model", "metric", "key"])
    b = metrics_table(older, resamples=500, seed=1).sort(["model", "metric", "key"])
    assert a["n_clusters"].to_list() == b["n_clusters"].to_list()
    assert a.select("value", "ci_low", "ci_high").equals(b.select("value", "ci_low", "ci_high"))
    assert set(b.filter(pl.col("metric") == "accuracy")["n_clusters"].to_list()) == {20}
    # a file written before the column existed at all: each question is its own unit, as before
    bare = one.drop("media_unit")
    assert units_used(bare) == {"spectrum": "item"}
    assert set(metrics_table(bare, resamples=100).filter(pl.col("metric") == "accuracy")["n_clusters"]) == {60}


def test_an_interval_is_cut_to_the_values_its_metric_can_take():
    """On 4 clips the textbook t interval of an accuracy reaches past [0, 1] (t(0.975, 3) = 3.18 standard errors):
    the table shows it cut to [0, 1] (a share cannot lie outside; coverage is unchanged, the true value being inside),
    and a paired difference of two accuracies cut to [-1, 1]; where it stays inside, it is the whole t interval."""
    from omnieval.stats.paired import paired_table

    frame = clip_study(n_clips=4, per_clip=2, seed=3)
    table = metrics_table(frame, resamples=20_000, seed=4)
    outside = 0
    for condition in ("normal", "video_only", "text_only", "random"):
        row = table.filter((pl.col("metric") == "accuracy") & (pl.col("key") == condition)).row(0, named=True)
        rows = frame.filter(pl.col("condition") == condition)
        means = rows.group_by("media_unit").agg((pl.col("choice") == pl.col("target")).mean())["choice"].to_numpy()
        c = len(means)
        half = stats.t.ppf(0.975, c - 1) * means.std(ddof=1) / np.sqrt(c)
        low, high = means.mean() - half, means.mean() + half  # the textbook interval, uncut
        outside += low < 0 or high > 1
        assert row["ci_low"] == pytest.approx(max(low, 0.0), abs=0.06 * half + 1e-9), condition
        assert row["ci_high"] == pytest.approx(min(high, 1.0), abs=0.06 * half + 1e-9), condition
        assert 0.0 <= row["ci_low"] <= row["value"] <= row["ci_high"] <= 1.0
    assert outside >= 2  # the case this is about: the uncut interval leaves [0, 1]
    other = frame.with_columns(model=pl.lit("n"), choice=pl.col("target"))  # always right: 1 - a share
    paired = paired_table(pl.concat([frame, other]), resamples=2_000, seed=1)
    diffs = paired.filter(pl.col("comparison") == "models")
    assert diffs.height and diffs["ci_low"].min() >= -1.0 and diffs["ci_high"].max() <= 1.0
