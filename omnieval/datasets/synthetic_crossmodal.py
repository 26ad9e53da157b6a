"""The built-in synthetic crossmodal benchmark: the synthetic creatures, each in audio, vision and text.

Every creature of the dissonance generator (same names, colours, calls, videos) becomes an entity: its call is the
audio, its moving-box clip (task ``perception``) or a still of its colour (task ``appearance``) the vision, and a
one-line description of how it looks and sounds the text. Each item asks to match one creature (the context) among
itself and three other creatures of the split (the distractors), so the six directions of one item share their
content, which is what ``consistency`` and ``agreement`` compare.

Deterministic from the seed; written into a temporary folder and moved into place.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from omnieval.core.keyed import keyed_rng
from omnieval.datasets.benchmark import write_benchmark_files
from omnieval.datasets.output_folder import building_folder
from omnieval.datasets.synthetic import COLOURS, _entities
from omnieval.protocols.crossmodal import Entity, Item

if TYPE_CHECKING:
    from omnieval.datasets.synthetic_registry import SynthOptions

TASKS = {
    "perception": ("creature", "video", "Which {candidates} shows the same creature as the {context}?"),
    "appearance": ("colour", "image", "Which {candidates} belongs to the creature of the {context}?"),
}


def make_crossmodal_benchmark(out_dir: str | Path, *, seed: int = 0, n_entities: int = 6, n_distractors: int = 3,
                              split: str = "all", workers: int | None = None, overwrite: bool = False) -> Path:
    """Write ``benchmark.json``, ``items.jsonl`` and ``media/`` (one folder per creature); return the folder.

    ``2 * n_entities`` items (each creature is the context once per task), ``6`` instances each."""
    from omnieval.media.synth import beep_audio, moving_box_video, still_image

    if not n_distractors + 1 <= n_entities <= len(COLOURS):
        raise ValueError(f"n_entities must be in {n_distractors + 1}..{len(COLOURS)}")
    out = Path(out_dir)
    with building_folder(out, "synth", overwrite=overwrite, prefix=".synth-xm-") as tmp:
        names = _entities(seed, split, n_entities, set())
        entities: dict[str, dict[str, Entity]] = {"video": {}, "image": {}}
        jobs = []
        for i, name in enumerate(names):
            rel = Path("media") / name
            colour = COLOURS[i % len(COLOURS)]
            box, speed, stripes = 40 + 10 * (i % 4), 30 + 25 * (i % 5), i % 3
            frequency, beeps = 300 + 90 * i, 1 + i % 4
            jobs += [partial(moving_box_video, tmp / rel / "video.mp4", colour=colour, box=box, speed=speed,
                             stripes=stripes),
                     partial(still_image, tmp / rel / "image.png", colour=colour),
                     partial(beep_audio, tmp / rel / "audio.wav", frequency=frequency, beeps=beeps)]
            text = (f"{name}: a {colour} creature, {box} pixels wide with {stripes} white stripes, drifting at {speed} "
                    f"pixels per second, that calls with {beeps} beeps at {frequency} Hz")
            entities["video"][name] = Entity(id=name, text=text, audio=str(rel / "audio.wav"),
                                             video=str(rel / "video.mp4"))
            entities["image"][name] = Entity(id=name, text=text, audio=str(rel / "audio.wav"),
                                             image=str(rel / "image.png"))
        with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:  # ffmpeg runs outside the GIL
            list(pool.map(lambda write: write(), jobs))
        items = []
        for task, (subtask, vision, question) in TASKS.items():
            for name in names:
                others = [n for n in names if n != name]
                pick = keyed_rng(seed, split, task, name, "distractors").permutation(len(others))[:n_distractors]
                items.append(Item(
                    item_id=f"{task}-{name.lower()}", benchmark="omnieval-synthetic-crossmodal", split=split,
                    task=task, subtask=subtask, category="synthetic", question=question,
                    context=entities[vision][name], distractors=[entities[vision][others[j]] for j in sorted(pick)]))
        meta = {"name": "omnieval-synthetic-crossmodal", "protocol": "crossmodal", "seed": seed, "split": split,
                "n_entities": n_entities, "n_distractors": n_distractors,
                "generator": "omnieval.datasets.synthetic_crossmodal"}
        write_benchmark_files(tmp, items, meta)
    return out


def synthetic_benchmark(out: str | Path, seed: int, options: SynthOptions, overwrite: bool = False) -> Path:
    """``omnieval datasets synth --protocol crossmodal`` (the protocol's ``synthetic_benchmark``): the benchmark of the
    CLI's size knobs that apply to it (entities)."""
    return make_crossmodal_benchmark(out, seed=seed, n_entities=options.entities, overwrite=overwrite)
