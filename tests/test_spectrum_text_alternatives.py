"""Spectrum's text alternatives (``<m>_as_text``: a medium shown as its text stand-in) and evidence labels (every
metric also per the benchmark's ``evidence_modality``), checked against hand-built expectations and plain polars
recomputations of the rows (the converters' tests take them through ``omnieval run`` / ``metrics`` / ``report``)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from omnieval.core.prompts import render_prompt
from omnieval.core.schema import LABELS, InputError
from omnieval.engines import EngineRequest, create_engine
from omnieval.protocols import spectrum
from omnieval.protocols.spectrum import Item, Options
from omnieval.stats.metrics import metrics_table
from omnieval.stats.paired import paired_table


def omni_items(n: int = 12, alternatives=("image", "audio"), evidence=None) -> list[Item]:
    """Image + audio items (OmniBench's shape); a caption and a transcript for the media in ``alternatives``."""
    out = []
    for i in range(n):
        texts = {"image": f"a caption of picture {i}", "audio": f"the words spoken in clip {i}"}
        out.append(Item(item_id=f"q{i:03d}", question=f"question {i}", options=[f"o{i}-{j}" for j in range(4)],
                        answer=LABELS[i % 4], media={"image": f"img/{i}.png", "audio": f"wav/{i}.wav"},
                        text_alternatives={m: texts[m] for m in alternatives} or None,
                        evidence_modality=evidence[i % len(evidence)] if evidence else None))
    return out


def test_the_as_text_conditions_show_the_stand_in_instead_of_the_medium():
    items = omni_items()
    instances = spectrum.expand_all(items, None, seed=0)
    conditions = list(dict.fromkeys(i.condition for i in instances))
    assert conditions == ["normal", "image_only", "audio_only", "text_only", "random", "no_image", "no_audio",
                          "no_text", "image_as_text", "audio_as_text"]
    by = {(i.item_id, i.condition): i for i in instances}
    audio_text = by[("q003", "audio_as_text")]
    assert [(s.kind, s.modality, s.path) for s in audio_text.media_segments()] == [("media", "image", "img/3.png")]
    assert audio_text.donors is None and audio_text.target == "D" and audio_text.question == "question 3"
    prompt = "".join(p.text or "" for p in render_prompt(audio_text) if p.kind == "text")
    assert "Audio transcript: the words spoken in clip 3" in prompt
    assert prompt.index("Audio transcript") < prompt.index("Question: question 3")
    assert [p.modality for p in render_prompt(audio_text) if p.kind == "media"] == ["image"]
    image_text = by[("q003", "image_as_text")]
    assert [s.modality for s in image_text.media_segments()] == ["audio"]
    assert "Image description: a caption of picture 3" in render_prompt(image_text)[-1].text
    # for the simulated engine: the medium itself is not shown, its stand-in supports the target
    assert audio_text.simulation_hints["audio"] is None and audio_text.simulation_hints["audio+text"] is None
    assert audio_text.simulation_hints["audio_as_text"] == "D" and audio_text.simulation_hints["image+text"] == "D"


def test_a_stand_in_missing_on_some_items_runs_on_the_others_and_asking_for_one_no_item_has_is_refused():
    items = omni_items(alternatives=("audio",))
    for i in (5, 8):
        items[i] = items[i].model_copy(update={"text_alternatives": None})
    instances = spectrum.expand_all(items, None, seed=0)
    by_condition: dict[str, list[str]] = {}
    for inst in instances:
        by_condition.setdefault(inst.condition, []).append(inst.item_id)
    everyone = [f"q{i:03d}" for i in range(12)]
    assert by_condition["normal"] == everyone and "image_as_text" not in by_condition
    assert by_condition["audio_as_text"] == [i for i in everyone if i not in ("q005", "q008")]
    assert spectrum.condition_coverage(items) == {"audio_as_text": (10, 12)}
    assert spectrum.condition_coverage(items, Options(conditions=["normal"])) == {}
    only = spectrum.expand_all(items, None, seed=0, options=Options(conditions=["normal", "audio_as_text"]))
    assert len(only) == 12 + 10
    with pytest.raises(InputError) as caught:  # no item gives a caption
        spectrum.expand_all(items, None, seed=0, options=Options(conditions=["normal", "image_as_text"]))
    assert caught.value.field == "protocol_options.conditions" and "no item gives one" in str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="does not apply"):  # a medium the benchmark does not show
        spectrum.expand_all(items, None, seed=0, options=Options(conditions=["video_as_text"]))


def test_a_stand_in_for_a_medium_the_item_does_not_show_or_an_empty_one_is_refused():
    with pytest.raises(ValidationError, match="text_alternatives for video"):
        Item(item_id="a", question="q", options=["x", "y"], answer="A", media={"image": "i.png"},
             text_alternatives={"video": "a description"})
    with pytest.raises(ValidationError, match="empty"):
        Item(item_id="a", question="q", options=["x", "y"], answer="A", media={"image": "i.png"},
             text_alternatives={"image": "  "})


N = 300


def rows(model: str, reliance: dict, instances) -> list[dict]:
    engine = create_engine("simulated", model=model, reliance=reliance, margin=12.0, noise=0.5)
    requests = [EngineRequest(inst, {}, "zs") for inst in instances]
    out = []
    for inst, res in zip(instances, engine.score(requests), strict=True):
        out.append({"model": model, "prompt": "zs", "protocol": "spectrum", "split": "all", "item_id": inst.item_id,
                    "instance_id": inst.instance_id, "condition": inst.condition, "target": inst.target,
                    "choice": res.choice, "abstain_label": None, "confidence": res.confidence,
                    "confidence_method": res.confidence_method, "n_options": len(inst.option_labels),
                    "evidence_modality": inst.field("evidence_modality")})
    return out


def test_as_text_gap_and_per_evidence_accuracy_equal_the_rows_recomputed():
    instances = spectrum.expand_all(omni_items(N, evidence=("vision", "audio", "vision+audio")), None, seed=0)
    # reads the audio well but a transcript poorly (text 0.3): audio_as_text loses what the audio gave
    listener = rows("listener", {"audio": 0.95, "text": 0.3}, instances)
    reader = rows("reader", {"text": 0.95}, instances)
    frame = pl.DataFrame(listener + reader, schema_overrides={"abstain_label": pl.Utf8, "choice": pl.Utf8})
    table = metrics_table(frame, resamples=300, seed=0)
    got = {(r["model"], r["metric"], r["key"]): r for r in table.iter_rows(named=True)}

    def acc(model, condition, evidence=None):
        part = frame.filter((pl.col("model") == model) & (pl.col("condition") == condition))
        if evidence:
            part = part.filter(pl.col("evidence_modality") == evidence)
        return float((part["choice"] == part["target"]).mean()), part.height

    for model in ("listener", "reader"):
        for m in ("image", "audio"):
            gap = got[(model, "as_text_gap", m)]
            want = acc(model, f"{m}_as_text")[0] - acc(model, "normal")[0]
            assert gap["value"] == pytest.approx(want, abs=1e-12)
            assert gap["n"] == 2 * N and gap["ci_low"] < gap["value"] < gap["ci_high"]
        for evidence in ("vision", "audio", "vision+audio"):
            for condition in ("normal", "audio_only", "audio_as_text"):
                row = got[(model, "accuracy", f"evidence={evidence}/{condition}")]
                value, n = acc(model, condition, evidence)
                assert row["value"] == pytest.approx(value, abs=1e-12) and row["n"] == n == N // 3
    # the listener loses most of the audio's help as a transcript it barely reads; the reader gains by it
    assert got[("listener", "as_text_gap", "audio")]["ci_high"] < -0.3
    assert got[("reader", "as_text_gap", "audio")]["value"] == pytest.approx(0.0, abs=4 * math.sqrt(0.05 / N))
    assert got[("listener", "accuracy", "normal")]["value"] > 0.9
    # the model comparison covers the gap, per medium
    paired = paired_table(frame, resamples=300, seed=0)
    gaps = paired.filter((pl.col("metric") == "as_text_gap") & (pl.col("a") != "ensemble")
                         & (pl.col("b") != "ensemble"))
    assert sorted(gaps["key"].to_list()) == ["audio", "image"]
    want = (got[("listener", "as_text_gap", "audio")]["value"] - got[("reader", "as_text_gap", "audio")]["value"])
    audio = gaps.filter(pl.col("key") == "audio").row(0, named=True)
    assert {audio["a"], audio["b"]} == {"listener", "reader"}
    sign = 1 if audio["a"] == "listener" else -1
    assert audio["estimate"] == pytest.approx(sign * want, abs=1e-12)


def test_items_without_labels_have_no_evidence_rows():
    instances = spectrum.expand_all(omni_items(40), None, seed=0)
    frame = pl.DataFrame(rows("r", {"text": 0.9}, instances),
                         schema_overrides={"abstain_label": pl.Utf8, "choice": pl.Utf8,
                                           "evidence_modality": pl.Utf8})
    keys = metrics_table(frame, resamples=50, seed=0)["key"].to_list()
    assert not any(k.startswith("evidence=") for k in keys) and "normal" in keys
    assert np.isfinite([v for v in metrics_table(frame, resamples=0)["value"].to_list() if v is not None]).all()
