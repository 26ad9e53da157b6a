"""The simulated engine is the known-answer instrument: its accuracies must match the probabilities it is given."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import softmax

from omnieval.engines import EngineRequest, create_engine
from omnieval.protocols import dissonance
from omnieval.schema import Anchor, DissonanceItem, DissonanceMedia


def _instances(n_items=400):
    names = [f"a{i}" for i in range(6)]
    lib = {n: Anchor(anchor=n, split="s", media=DissonanceMedia(video=f"{n}.mp4", audio=f"{n}.wav", text=n))
           for n in names}
    out = []
    for i in range(n_items):
        own = names[i % 6]
        # distractor answers belong to entities outside the benchmark: a replaced modality supports no option
        key = {n: f"ans-{n}" for n in names} | {f"out{j}": f"ans-out{j}" for j in range(3)}
        item = DissonanceItem(item_id=f"it{i}", split="s", question="q", anchor=own, media=lib[own].media,
                              answer_key=key, options=[f"ans-{own}", "ans-out0", "ans-out1", "ans-out2"])
        out.extend(dissonance.expand(item, lib, seed=0))
    return out


INSTANCES = _instances()


def _accuracy(engine, condition, style="zs"):
    reqs = [EngineRequest(i, {}, style) for i in INSTANCES if i.condition == condition]
    res = engine.score(reqs)
    return np.mean([r.choice == q.instance.target for r, q in zip(res, reqs, strict=True)])


@pytest.mark.parametrize("modality, position", [("text", 2), ("video", 0)])
def test_single_modality_model_is_set_accuracy_when_clean_and_chance_when_corrupted(modality, position):
    engine = create_engine("simulated", model=f"{modality}-only", reliance={modality: 0.9},
                           abstain_on_unsupported=0.0, margin=12.0, noise=0.5)
    clean_expected = 0.9 + 0.1 * 0.25  # perceives and answers, else guesses among the 4 answers
    n = 400
    tol = 4 * math.sqrt(clean_expected * (1 - clean_expected) / n)
    for condition in dissonance.CONDITIONS:
        acc = _accuracy(engine, condition)
        corrupted = condition[1 + position] == "1"
        k = dissonance.level(condition)
        if not corrupted and k <= 1:
            assert abs(acc - clean_expected) < tol, (condition, acc)
        if corrupted and k == 1:  # target is the own answer; the model sees no support for any option
            assert abs(acc - 0.25) < 4 * math.sqrt(0.25 * 0.75 / n), (condition, acc)


def test_outputs_are_deterministic_and_consistent():
    engine = create_engine("simulated", model="m", seed=3)
    reqs = [EngineRequest(i, {}, "zs") for i in INSTANCES[:200]]
    a = engine.score(reqs)
    b = engine.score(list(reversed(reqs)))[::-1]
    c = [engine.score([r])[0] for r in reqs]
    assert a == b == c
    for r, q in zip(a, reqs, strict=True):
        probs = softmax(np.array(r.option_logprobs))
        assert r.choice == q.instance.option_labels[int(np.argmax(probs))]
        assert r.confidence == pytest.approx(probs.max())
        assert r.confidence_method == "rs" and "simulated" in r.raw_text
    other = create_engine("simulated", model="m", seed=4).score(reqs)
    assert [r.option_logprobs for r in other] != [r.option_logprobs for r in a]


def test_abstains_on_conflict_as_set():
    engine = create_engine("simulated", model="m", reliance={"video": 1.0, "audio": 1.0, "text": 1.0},
                           abstain_on_conflict=1.0, margin=12.0, noise=0.1)
    # C000: all three agree -> own answer every time
    assert _accuracy(engine, "C000") == 1.0


def test_invalid_rate_and_bad_options():
    engine = create_engine("simulated", model="m", invalid_rate=0.3)
    res = engine.score([EngineRequest(i, {}, "zs") for i in INSTANCES[:1000]])
    share = np.mean([r.choice is None for r in res])
    assert abs(share - 0.3) < 4 * math.sqrt(0.3 * 0.7 / 1000)
    with pytest.raises(ValueError, match="reliance|in \\[0, 1\\]"):
        create_engine("simulated", model="m", reliance={"text": 1.5})
