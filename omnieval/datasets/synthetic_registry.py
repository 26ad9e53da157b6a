"""The built-in synthetic benchmarks by protocol: what ``omnieval datasets synth --protocol P`` writes.

A protocol with a synthetic benchmark is one entry in ``SYNTHETIC_BUILDERS``: a function that writes the benchmark
folder from ``SynthOptions`` (the CLI's size knobs, each builder reads those that apply to it) and ``overwrite``
(replace a previous ``synth`` output), and returns its path.
The builders import their generator when called, so listing the protocols stays cheap (``omnieval --help``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SynthOptions:
    """Sizes and extras of a synthetic benchmark; the defaults are the CLI's (small, for a quick first run)."""

    anchors: int = 4  # dissonance: anchors per split
    questions: int = 2  # dissonance: questions per anchor
    question_jitter: bool = False  # dissonance: vary the questions per anchor around ``questions``
    speech: bool = False  # dissonance: the creature's spoken name in its audio (needs espeak-ng)
    soundtrack: bool = False  # dissonance: each anchor one video file with its call as the soundtrack
    entities: int = 6  # crossmodal, contrastive: creatures
    items: int = 48  # spectrum: items


def _dissonance(out: str | Path, seed: int, o: SynthOptions, overwrite: bool) -> Path:
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    return make_dissonance_benchmark(out, seed=seed, n_anchors=o.anchors, n_questions=o.questions, speech=o.speech,
                                     question_jitter=o.question_jitter, soundtrack=o.soundtrack,
                                     overwrite=overwrite)


def _crossmodal(out: str | Path, seed: int, o: SynthOptions, overwrite: bool) -> Path:
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark

    return make_crossmodal_benchmark(out, seed=seed, n_entities=o.entities, overwrite=overwrite)


def _spectrum(out: str | Path, seed: int, o: SynthOptions, overwrite: bool) -> Path:
    from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark

    return make_spectrum_benchmark(out, seed=seed, n_items=o.items, overwrite=overwrite)


def _contrastive(out: str | Path, seed: int, o: SynthOptions, overwrite: bool) -> Path:
    from omnieval.datasets.synthetic_contrastive import make_contrastive_benchmark

    return make_contrastive_benchmark(out, seed=seed, n_entities=o.entities, overwrite=overwrite)


SYNTHETIC_BUILDERS: dict[str, Callable[[str | Path, int, SynthOptions, bool], Path]] = {
    "dissonance": _dissonance,
    "crossmodal": _crossmodal,
    "spectrum": _spectrum,
    "contrastive": _contrastive,
}
"""Protocol -> builder of its synthetic benchmark; the first entry is the CLI's default."""


def make_synthetic_benchmark(protocol: str, out: str | Path, *, seed: int = 0,
                             options: SynthOptions | None = None, overwrite: bool = False) -> Path:
    """Write ``protocol``'s synthetic benchmark to ``out``; returns the folder. ``out`` must be new or empty, or
    with ``overwrite`` a previous ``synth`` output (``omnieval.datasets.output_folder``)."""
    if protocol not in SYNTHETIC_BUILDERS:
        raise ValueError(f"no synthetic benchmark for protocol {protocol!r}; known: {', '.join(SYNTHETIC_BUILDERS)}")
    return SYNTHETIC_BUILDERS[protocol](out, seed, options or SynthOptions(), overwrite)
