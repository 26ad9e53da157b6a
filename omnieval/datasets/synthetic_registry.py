"""The synthetic benchmarks by protocol: what ``omnieval datasets synth --protocol P`` writes.

A protocol has a synthetic benchmark when its spec names a writer (``ProtocolSpec.synthetic_benchmark``,
``"package.module:function"``): a function that writes the benchmark folder from ``SynthOptions`` (the CLI's size
knobs, each writer reads those that apply to it) and ``overwrite`` (replace a previous ``synth`` output), and returns
its path. The writer is imported when called, and the protocol
modules only when the list is first needed, so ``omnieval --help`` stays cheap (``SYNTHETIC_PROTOCOLS``).
"""

from __future__ import annotations

from collections.abc import Iterator
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


def synthetic_writers() -> dict[str, str]:
    """Protocol -> the ``"package.module:function"`` writing its synthetic benchmark, in registry order."""
    from omnieval.protocols import known_protocols, protocol_attribute

    writers = {name: protocol_attribute(name, "synthetic_benchmark") for name in known_protocols()}
    return {name: writer for name, writer in writers.items() if writer}


class _Protocols:
    """The protocols with a synthetic benchmark, looked up when first asked (``in``, iteration): the CLI's choices
    for ``--protocol``, built with every parser but read only when that option is used or its help shown."""

    def __contains__(self, protocol: object) -> bool:
        return protocol in synthetic_writers()

    def __iter__(self) -> Iterator[str]:
        return iter(synthetic_writers())


SYNTHETIC_PROTOCOLS = _Protocols()


def make_synthetic_benchmark(protocol: str, out: str | Path, *, seed: int = 0,
                             options: SynthOptions | None = None, overwrite: bool = False) -> Path:
    """Write ``protocol``'s synthetic benchmark to ``out``; returns the folder. ``out`` must be new or empty, or
    with ``overwrite`` a previous ``synth`` output (``omnieval.datasets.output_folder``)."""
    from omnieval.protocols import resolve

    writers = synthetic_writers()
    if protocol not in writers:
        raise ValueError(f"no synthetic benchmark for protocol {protocol!r}; known: {', '.join(writers)}")
    return resolve(writers[protocol])(out, seed, options or SynthOptions(), overwrite)
