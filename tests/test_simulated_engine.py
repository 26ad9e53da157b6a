"""The simulated engine is the known-answer instrument: its accuracies must match the probabilities it is given."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import softmax

from omnieval.core.schema import Anchor, DissonanceItem, DissonanceMedia
from omnieval.engines import EngineRequest, create_engine
from omnieval.protocols import dissonance
from omnieval.protocols.dissonance import MODALITIES


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


def _conflict_instances(n_items=400):
    """Items whose distractors are answers of anchors in the benchmark: a replaced modality supports another option
    (3 of the 5 replacement anchors), so two or three modalities can back different options."""
    names = [f"a{i}" for i in range(6)]
    lib = {n: Anchor(anchor=n, split="s", media=DissonanceMedia(video=f"{n}.mp4", audio=f"{n}.wav", text=n))
           for n in names}
    out = []
    for i in range(n_items):
        own = names[i % 6]
        others = [n for n in names if n != own]
        distractors = [others[(i // 6 + j) % 5] for j in range(3)]
        item = DissonanceItem(item_id=f"c{i}", split="s", question="q", anchor=own, media=lib[own].media,
                              answer_key={n: f"ans-{n}" for n in names},
                              options=[f"ans-{n}" for n in [own, *distractors]])
        out.extend(dissonance.expand(item, lib, seed=0))
    return out


@pytest.fixture(scope="module")
def conflicting():
    return _conflict_instances()


def _support(inst) -> dict[str, str | None]:
    """Which option each modality backs, read from the media the instance shows (``a3.mp4`` shows anchor a3, whose
    answer is ``ans-a3``): None where that answer is not an option."""
    video, audio, text = inst.segments
    shown = {"video": video.path.removesuffix(".mp4"), "audio": audio.path.removesuffix(".wav"),
             "text": text.text.removeprefix("Text: ")}
    label_of = dict(zip(inst.option_texts, inst.option_labels, strict=True))
    return {m: label_of.get(f"ans-{anchor}") for m, anchor in shown.items()}


def _tied(votes: list[str]) -> list[str]:
    """The options with the most votes when two or more share the top, else []."""
    counts = {label: votes.count(label) for label in set(votes)}
    top = [label for label, c in counts.items() if c == max(counts.values())]
    return sorted(top) if len(top) > 1 else []


def _abstain_probability(support, reliance, on_conflict, on_unsupported) -> float:
    """Every subset of perceived modalities with its probability: a tie abstains with ``on_conflict``, no vote with
    ``on_unsupported``, a unique top vote never."""
    total = 0.0
    for seen in itertools.product((False, True), repeat=3):
        p = math.prod(reliance[m] if s else 1 - reliance[m] for m, s in zip(MODALITIES, seen, strict=True))
        votes = [support[m] for m, s in zip(MODALITIES, seen, strict=True) if s and support[m] is not None]
        total += p * (on_unsupported if not votes else on_conflict if _tied(votes) else 0.0)
    return total


@pytest.mark.parametrize("on_conflict", [1.0, 0.0])
def test_a_model_that_sees_everything_abstains_exactly_on_conflicts_as_set(conflicting, on_conflict):
    engine = create_engine("simulated", model="m", reliance={m: 1.0 for m in MODALITIES},
                           abstain_on_conflict=on_conflict, abstain_on_unsupported=0.0, margin=12.0, noise=0.1)
    results = engine.score([EngineRequest(i, {}, "zs") for i in conflicting])
    conflicts = {condition: 0 for condition in dissonance.CONDITIONS}
    for inst, res in zip(conflicting, results, strict=True):
        votes = [label for label in _support(inst).values() if label is not None]
        tied = _tied(votes)
        conflicts[inst.condition] += bool(tied)
        if not votes:  # nothing backs an option: a guess, never an abstention (abstain_on_unsupported=0)
            assert res.choice != inst.abstain_label, inst.instance_id
        elif not tied:  # a unique majority (the own answer wherever two modalities are clean) is chosen
            assert res.choice == max(set(votes), key=votes.count), inst.instance_id
        elif on_conflict == 1.0:
            assert res.choice == inst.abstain_label, inst.instance_id
        else:
            assert res.choice in tied, inst.instance_id
    # ties need two replaced modalities: none at k <= 1, many at k = 2 and 3
    assert all(conflicts[c] == 0 for c in dissonance.CONDITIONS if dissonance.level(c) <= 1)
    assert all(conflicts[c] >= 100 for c in dissonance.CONDITIONS if dissonance.level(c) >= 2), conflicts


def test_abstention_rates_per_condition_match_the_perception_model(conflicting):
    reliance = {"video": 0.8, "audio": 0.6, "text": 0.9}
    on_conflict, on_unsupported = 0.7, 0.3
    engine = create_engine("simulated", model="m", reliance=reliance, abstain_on_conflict=on_conflict,
                           abstain_on_unsupported=on_unsupported, margin=12.0, noise=0.1)
    results = engine.score([EngineRequest(i, {}, "zs") for i in conflicting])
    p = np.array([_abstain_probability(_support(inst), reliance, on_conflict, on_unsupported) for inst in conflicting])
    abstained = np.array([res.choice == inst.abstain_label for inst, res in zip(conflicting, results, strict=True)])
    conditions = np.array([inst.condition for inst in conflicting])
    for condition in (*dissonance.CONDITIONS, None):  # each condition, then all pooled
        keep = conditions == condition if condition else np.ones(len(p), bool)
        sd = math.sqrt(float(np.sum(p[keep] * (1 - p[keep])))) / keep.sum()  # independent Bernoulli draws
        assert abs(abstained[keep].mean() - p[keep].mean()) <= 4 * sd, (condition, abstained[keep].mean(),
                                                                          p[keep].mean(), sd)
    # the clean condition abstains only when nothing is perceived; the conflicting ones far more often
    assert np.allclose(p[conditions == "C000"], 0.2 * 0.4 * 0.1 * on_unsupported)
    assert p[conditions == "C011"].mean() > 0.3


def test_invalid_rate_and_bad_options():
    engine = create_engine("simulated", model="m", invalid_rate=0.3)
    res = engine.score([EngineRequest(i, {}, "zs") for i in INSTANCES[:1000]])
    share = np.mean([r.choice is None for r in res])
    assert abs(share - 0.3) < 4 * math.sqrt(0.3 * 0.7 / 1000)
    with pytest.raises(ValueError, match="reliance|in \\[0, 1\\]"):
        create_engine("simulated", model="m", reliance={"text": 1.5})


def test_load_s_and_batch_s_take_their_time_and_change_no_answer():
    """``load_s`` is paid once when the engine is built (never by the driver's option check), ``batch_s`` once per
    batch whatever its size; neither changes an answer. Times against the wall clock, with the sleeps' lower
    bound and a generous upper one for a loaded machine."""
    import time

    from omnieval.engines.base import OptionError, engine_class

    reqs = [EngineRequest(i, {}, "zs") for i in INSTANCES[:40]]
    t0 = time.monotonic()
    engine = create_engine("simulated", "m", seed=3, load_s=0.3, batch_s=0.2)
    built = time.monotonic() - t0
    assert 0.3 <= built < 2.0
    t0 = time.monotonic()
    engine_class("simulated").check_options({"seed": 3, "load_s": 30.0, "batch_s": 0.2})
    assert time.monotonic() - t0 < 2.0  # the check does not load
    t0 = time.monotonic()
    one_batch = engine.score(reqs)  # 40 requests, one batch: 0.2 s, not 40 x 0.2
    assert 0.2 <= time.monotonic() - t0 < 1.5
    t0 = time.monotonic()
    for req in reqs[:3]:
        engine.score([req])
    assert 0.6 <= time.monotonic() - t0 < 2.5
    plain = create_engine("simulated", "m", seed=3).score(reqs)
    assert [r.option_logprobs for r in one_batch] == [r.option_logprobs for r in plain]
    for bad in ({"load_s": -1}, {"batch_s": "1"}, {"load_s": float("nan")}):
        with pytest.raises(OptionError, match=next(iter(bad))):
            engine_class("simulated").check_options(bad)
