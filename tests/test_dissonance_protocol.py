"""The dissonance expansion against docs/reference.md, Protocol `dissonance`, checked by independent re-derivation in
the test."""

from __future__ import annotations

import itertools

import pytest

from omnieval.core.schema import Anchor, DissonanceItem, DissonanceMedia, InputError
from omnieval.protocols import dissonance


def _anchor(name: str, split: str = "real") -> Anchor:
    return Anchor(anchor=name, split=split, media=DissonanceMedia(
        video=f"media/{name}/v.mp4", audio=f"media/{name}/a.wav", text=f"passage about {name}"))


ANCHORS = [_anchor(n) for n in ("cat", "dog", "owl", "fox")]
LIB = {a.anchor: a for a in ANCHORS}


def _item(**kw) -> DissonanceItem:
    base = dict(item_id="i1", split="real", question="What animal?", anchor="cat", media=LIB["cat"].media,
                answer_key={"cat": "meow", "dog": "woof", "owl": "hoot", "fox": "ring"},
                options=["meow", "woof", "quack", "moo"])
    base.update(kw)
    return DissonanceItem(**base)


def test_eight_conditions_levels_and_ids_stable():
    inst = dissonance.expand(_item(), LIB, seed=7)
    assert [i.condition for i in inst] == ["C" + "".join(b) for b in itertools.product("01", repeat=3)]
    assert [i.field("k") for i in inst] == [0, 1, 1, 2, 1, 2, 2, 3]
    assert len({i.instance_id for i in inst}) == 8
    again = dissonance.expand(_item(), LIB, seed=7)
    assert [i.model_dump() for i in inst] == [i.model_dump() for i in again]
    other_seed = dissonance.expand(_item(), LIB, seed=8)
    assert {i.instance_id for i in other_seed}.isdisjoint({i.instance_id for i in inst})


def test_options_are_answers_plus_abstention_labelled_a_to_e():
    for inst in dissonance.expand(_item(), LIB, seed=1):
        assert inst.option_labels == list("ABCDE")
        assert sorted(inst.option_texts) == sorted(["meow", "woof", "quack", "moo", "I cannot answer"])
        assert inst.option_texts[inst.option_labels.index(inst.abstain_label)] == "I cannot answer"


def test_option_order_is_shuffled_across_conditions():
    orders = {tuple(i.option_texts) for i in dissonance.expand(_item(), LIB, seed=3)}
    assert len(orders) > 1


def _reference_target(inst, item) -> str:
    """The evidence rule re-derived from what the prompt actually shows (media paths + passage), not from `evidence`."""
    shown = {}
    for seg in inst.segments:
        for a in ANCHORS:
            if seg.kind == "media" and seg.path == (a.media.video if seg.modality == "video" else a.media.audio):
                shown[seg.modality] = a.anchor
            if seg.kind == "text" and seg.text.endswith(a.media.text):
                shown["text"] = a.anchor
    support = {}
    for anchor in shown.values():
        answer = item.answer_key.get(anchor)
        if answer in inst.option_texts:
            support[answer] = support.get(answer, 0) + 1
    best = [a for a, s in support.items() if s == max(support.values(), default=0)]
    text = best[0] if len(best) == 1 else "I cannot answer"
    return inst.option_labels[inst.option_texts.index(text)]


@pytest.mark.parametrize("seed", range(6))
def test_targets_follow_the_evidence_rule(seed):
    item = _item()
    for inst in dissonance.expand(item, LIB, seed=seed):
        assert inst.target == _reference_target(inst, item), inst.condition
        vector = dissonance.condition_vector(inst.condition)
        if sum(vector) <= 1:  # at k<=1 the rule always gives the item's own answer
            assert inst.option_texts[inst.option_labels.index(inst.target)] == "meow"


def test_corrupted_modalities_show_another_anchor_of_the_split():
    for seed in range(5):
        for inst in dissonance.expand(_item(), LIB, seed=seed):
            v, a, t = dissonance.condition_vector(inst.condition)
            video, audio, text = inst.segments
            assert (video.path == LIB["cat"].media.video) == (v == 0)
            assert (audio.path == LIB["cat"].media.audio) == (a == 0)
            assert text.text.endswith(LIB["cat"].media.text) == (t == 0)


def test_replacements_cover_the_other_anchors_uniformly():
    counts = {"dog": 0, "owl": 0, "fox": 0}
    for n in range(600):
        item = _item(item_id=f"i{n}")
        inst = dissonance.expand(item, LIB, seed=0)[4]  # C100: video replaced
        counts[next(a for a in counts if LIB[a].media.video == inst.segments[0].path)] += 1
    assert all(150 < c < 250 for c in counts.values()), counts


def test_two_vs_one_wins_and_one_each_abstains():
    # replacement anchors dog (answer woof, an option) vs owl (answer hoot, not an option)
    item = _item()
    ev = {"video": "A", "audio": "B", "text": None}
    assert dissonance.evidence_target(ev, "E") == "E"
    assert dissonance.evidence_target({"video": "A", "audio": "A", "text": "B"}, "E") == "A"
    assert dissonance.evidence_target({"video": None, "audio": None, "text": "B"}, "E") == "B"
    assert dissonance.evidence_target({"video": None, "audio": None, "text": None}, "E") == "E"
    assert item.anchor == "cat"


def test_target_override_wins():
    item = _item(target_override={"C111": "I cannot answer", "C000": "woof"})
    inst = {i.condition: i for i in dissonance.expand(item, LIB, seed=0)}
    assert inst["C000"].option_texts[inst["C000"].option_labels.index(inst["C000"].target)] == "woof"
    assert inst["C111"].target == inst["C111"].abstain_label


@pytest.mark.parametrize("kwargs, field", [
    ({"anchor": "emu"}, "anchor"),
    ({"answer_key": {"dog": "woof"}}, "answer_key"),
    ({"options": ["woof", "quack", "moo", "baa"]}, "options"),
    ({"target_override": {"C999": "meow"}}, "target_override.C999"),
    ({"target_override": {"C000": "purr"}}, "target_override.C000"),
])
def test_validation_errors_name_file_item_and_field(kwargs, field):
    with pytest.raises(InputError) as err:
        dissonance.expand_items([_item(**kwargs)], ANCHORS, seed=0, file="bench/items.jsonl")
    msg = str(err.value)
    assert "bench/items.jsonl" in msg and "'i1'" in msg and field in msg
