"""The built-in synthetic benchmark: deterministic bytes, valid items, distinct anchors, the paper's target shape."""

from __future__ import annotations

import collections
import hashlib

import numpy as np
import pytest

from omnieval.cli import main
from omnieval.datasets.benchmark import check_media, load_benchmark
from omnieval.datasets.synthetic import make_dissonance_benchmark
from omnieval.media.decode import decode_audio, decode_video
from omnieval.protocols import dissonance


def _digest(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = make_dissonance_benchmark(tmp_path / "a", seed=5, n_anchors=3, n_questions=1)
    assert main(["datasets", "synth", "--out", str(tmp_path / "b"), "--seed", "5", "--anchors", "3",
                 "--questions", "1"]) == 0
    c = make_dissonance_benchmark(tmp_path / "c", seed=6, n_anchors=3, n_questions=1)
    assert _digest(a) == _digest(tmp_path / "b")
    assert _digest(a)["items.jsonl"] != _digest(c)["items.jsonl"]


def test_items_validate_expand_and_media_check(tmp_path):
    bench = load_benchmark(make_dissonance_benchmark(tmp_path / "b"))
    assert len(bench.items) == 16 and {i.split for i in bench.items} == {"real", "synthetic"}
    assert check_media(bench, "probe") == 16  # 4 anchors x 2 splits x (video, audio)
    instances = dissonance.expand_all(bench.items, bench.anchors, seed=0)
    assert len(instances) == 128
    for item in bench.items:
        assert item.answer_key[item.anchor] in item.options and len(item.options) == 4


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
    for inst in dissonance.expand_all(bench.items, bench.anchors, seed=0):
        share[inst.k].append(inst.target == inst.abstain_label)
    rates = {k: float(np.mean(v)) for k, v in share.items()}
    assert rates[0] == rates[1] == 0.0
    assert rates[2] < 0.10 and rates[3] > 0.85, rates
