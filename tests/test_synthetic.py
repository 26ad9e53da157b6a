"""The built-in synthetic benchmark: deterministic bytes, valid items, distinct anchors, the paper's target shape."""

from __future__ import annotations

import collections
import hashlib
import json

import numpy as np
import pytest

from omnieval.cli import main
from omnieval.datasets.benchmark import check_media, load_benchmark
from omnieval.datasets.synthetic import make_dissonance_benchmark
from omnieval.media.decode import decode_audio, decode_video
from omnieval.media.synth import has_speech
from omnieval.protocols import dissonance


def _digest(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = make_dissonance_benchmark(tmp_path / "a", seed=5, n_anchors=3, n_questions=1, workers=1)
    assert main(["datasets", "synth", "--out", str(tmp_path / "b"), "--seed", "5", "--anchors", "3",
                 "--questions", "1"]) == 0
    c = make_dissonance_benchmark(tmp_path / "c", seed=6, n_anchors=3, n_questions=1)
    assert _digest(a) == _digest(tmp_path / "b")
    assert _digest(a)["items.jsonl"] != _digest(c)["items.jsonl"]


def test_items_validate_expand_and_media_check(tmp_path):
    bench = load_benchmark(make_dissonance_benchmark(tmp_path / "b"))
    assert len(bench.items) == 16 and {i.split for i in bench.items} == {"real", "synthetic"}
    assert check_media(bench, "probe") == 16  # 4 anchors x 2 splits x (video, audio)
    instances = dissonance.expand_items(bench.items, bench.anchors, seed=0)
    assert len(instances) == 128
    for item in bench.items:
        assert item.answer_key[item.anchor] in item.options and len(item.options) == 4


def test_options_mostly_from_outside_entities(tmp_path):
    """Each anchor's answer is its own; at most one distractor is another benchmark anchor's answer, the rest
    belong to outside entities, and the answer key names every entity behind an option."""
    bench = load_benchmark(make_dissonance_benchmark(tmp_path / "b", n_anchors=6, n_questions=3,
                                                     splits=("real",)))
    names = {a.anchor for a in bench.anchors}
    n_bench_distractors = []
    for item in bench.items:
        owner = {answer: entity for entity, answer in item.answer_key.items()}
        assert len(owner) == len(item.answer_key)  # answers distinct across entities
        assert names <= item.answer_key.keys() and all(o in owner for o in item.options)
        assert owner[item.options[0]] == item.anchor
        n_bench_distractors.append(sum(owner[o] in names for o in item.options[1:]))
    assert max(n_bench_distractors) == 1 and 0 < sum(n_bench_distractors) < len(bench.items) / 2


@pytest.mark.skipif(not has_speech(), reason="espeak-ng is not installed")
def test_spoken_names_are_deterministic(tmp_path):
    kw = {"n_anchors": 2, "n_questions": 1, "splits": ("real",), "speech": True}
    a = make_dissonance_benchmark(tmp_path / "a", **kw)
    assert _digest(a) == _digest(make_dissonance_benchmark(tmp_path / "b", **kw))
    assert json.loads((a / "benchmark.json").read_text())["speech"] is True
    wave = decode_audio(next((a / "media").rglob("audio.wav"))).data
    assert len(wave) == 48000 and np.abs(wave[24000:]).max() > 0.05  # the name is spoken after the 1 s of tones


def test_anchors_look_and_sound_different(tmp_path):
    bench = load_benchmark(make_dissonance_benchmark(tmp_path / "b", n_anchors=4, n_questions=1,
                                                     splits=("real",)))
    colours, pitches = [], []
    for anchor in bench.anchors:
        frames = decode_video(f"{bench.root}/{anchor.media.video}", num_frames=2).data
        colours.append(tuple(np.round(frames.reshape(-1, 3)[frames.reshape(-1, 3).sum(1) > 60].mean(0))))
        wave = decode_audio(f"{bench.root}/{anchor.media.audio}").data
        pitches.append(int(np.argmax(np.abs(np.fft.rfft(wave))) * 16000 / len(wave)))
        assert anchor.anchor in anchor.media.text
    assert len(set(colours)) == 4 and len(set(pitches)) == 4


@pytest.mark.slow
def test_abstention_targets_have_the_papers_shape(tmp_path):
    """k<=1 never abstains; at k=2 rarely, at k=3 nearly always (paper: <=4% and ~98%)."""
    bench = load_benchmark(make_dissonance_benchmark(tmp_path / "b", n_anchors=12, n_questions=6,
                                                     splits=("real",)))
    share = collections.defaultdict(list)
    for inst in dissonance.expand_items(bench.items, bench.anchors, seed=0):
        share[inst.field("k")].append(inst.target == inst.abstain_label)
    rates = {k: float(np.mean(v)) for k, v in share.items()}
    assert rates[0] == rates[1] == 0.0
    assert rates[2] < 0.10 and rates[3] > 0.85, rates


def test_datasets_synth_writes_each_registered_protocols_benchmark(tmp_path, capsys):
    """``datasets synth --protocol P`` for every registered protocol (the CLI's choices are the registry's): the
    folder says protocol P, loads under it, and holds the item count the CLI's help promises for that size."""
    from omnieval.datasets.synthetic_registry import synthetic_writers
    from omnieval.protocols import known_protocols

    assert list(synthetic_writers()) == ["dissonance", "crossmodal", "spectrum", "contrastive"]
    assert set(synthetic_writers()) <= set(known_protocols())
    expected = {"crossmodal": 2 * 4, "spectrum": 8, "contrastive": 6 * 4}  # dissonance: the first test
    for protocol in expected:
        out = tmp_path / protocol
        assert main(["datasets", "synth", "--protocol", protocol, "--out", str(out), "--entities", "4",
                     "--items", "8"]) == 0
        assert capsys.readouterr().out.strip() == f"wrote synthetic {protocol} benchmark to {out}"
        assert json.loads((out / "benchmark.json").read_text())["protocol"] == protocol
        bench = load_benchmark(out)
        assert bench.protocol == protocol and len(bench.items) == expected[protocol]
    with pytest.raises(SystemExit) as info:
        main(["datasets", "synth", "--protocol", "nope", "--out", str(tmp_path / "x")])
    assert info.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
