"""The built-in synthetic contrastive benchmark: the synthetic creatures, each as an image, a sound, a video and a
point cloud, and questions that exactly one scene of each item answers.

Every creature (the names, colours and calls of the other synthetic benchmarks) has four scenes: a still of its colour
(image), its call (audio: ``beeps`` tone bursts at ``frequency`` Hz), its moving-box clip (video) and a point cloud of
its shape (sphere, cube, cylinder, cone or torus) in its colour (binary PLY for even creatures, ``.npy`` xyz+rgb for
odd ones, so both readers are exercised). Each scene has a caption describing only what that scene shows.

An item has ``n`` scenes (2..4) of distinct modalities and distinct creatures. Its *answer* scene is the anchor; its
question asks for what only the anchor shows: its colour (image, video, point cloud: the creatures' colours differ)
or its call (audio). The other scenes are negatives of the other modalities (``omnieval.datasets.negatives``):
``random``, or ``similar``: among the ``similar_k`` creatures most similar to the anchor. Similarity is the cosine
of the creatures' attribute vectors (colour, shape, pitch, beeps) by default, or of caption embeddings when
``embed`` is given (e.g. ``negatives.embed_captions``, the real sentence-embedding model). The anchor's position
among the scenes, the modalities and the negatives are keyed on the seed and the item.

Items: every creature x ``n`` in 2..``len(modalities)`` x selection type (random, similar); the answer modality
rotates with the creature, ``n`` and the selection type. Deterministic from the seed; written into a temporary folder
and moved into place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from omnieval.core.keyed import keyed_rng, keyed_seed
from omnieval.datasets.benchmark import write_benchmark_files
from omnieval.datasets.negatives import Candidate, build_tuple
from omnieval.datasets.output_folder import building_folder
from omnieval.datasets.synthetic import COLOURS, _entities
from omnieval.protocols.contrastive import MODALITIES, Input, Item

if TYPE_CHECKING:
    from omnieval.datasets.synthetic_registry import SynthOptions

RGB = {
    "red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 128, 0), "yellow": (255, 255, 0),
    "magenta": (255, 0, 255), "cyan": (0, 255, 255), "orange": (255, 165, 0), "purple": (128, 0, 128),
    "white": (255, 255, 255), "brown": (165, 42, 42), "pink": (255, 192, 203), "gray": (128, 128, 128),
    "lime": (0, 255, 0), "navy": (0, 0, 128), "olive": (128, 128, 0), "teal": (0, 128, 128), "maroon": (128, 0, 0),
    "gold": (255, 215, 0), "salmon": (250, 128, 114), "violet": (238, 130, 238), "turquoise": (64, 224, 208),
    "khaki": (240, 230, 140), "coral": (255, 127, 80), "indigo": (75, 0, 130), "orchid": (218, 112, 214),
    "tan": (210, 180, 140), "plum": (221, 160, 221), "crimson": (220, 20, 60), "silver": (192, 192, 192),
    "chocolate": (210, 105, 30),
}
SHAPES: tuple[str, ...] = ("sphere", "cube", "cylinder", "cone", "torus")
COLOUR_QUESTION = "Which scene shows something {colour}?"
SOUND_QUESTION = "Which scene has {beeps} beep{plural} at {frequency} Hz?"
POINTS = 4000


def shape_points(shape: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points on the surface of a unit-sized shape centred at the origin (y up)."""
    if shape == "sphere":
        p = rng.normal(size=(n, 3))
        return p / np.linalg.norm(p, axis=1, keepdims=True)
    if shape == "cube":
        p = rng.uniform(-1, 1, (n, 3))
        p[np.arange(n), rng.integers(0, 3, n)] = rng.choice([-1.0, 1.0], n)
        return p
    if shape in ("cylinder", "cone"):
        t = rng.uniform(0, 2 * np.pi, n)
        y = rng.uniform(-1, 1, n)
        r = np.ones(n) if shape == "cylinder" else (1 - y) / 2
        cap = rng.random(n) < (0.25 if shape == "cylinder" else 0.2)
        rad = np.sqrt(rng.random(n))
        r = np.where(cap, rad, r)
        y = np.where(cap, -1.0 if shape == "cone" else rng.choice([-1.0, 1.0], n), y)
        return np.column_stack([r * np.cos(t), y, r * np.sin(t)])
    if shape == "torus":
        u, v = rng.uniform(0, 2 * np.pi, (2, n))
        big, small = 1.0, 0.35
        return np.column_stack([(big + small * np.cos(v)) * np.cos(u), small * np.sin(v),
                                (big + small * np.cos(v)) * np.sin(u)])
    raise ValueError(f"unknown shape {shape!r}")


def write_creature_cloud(path: Path, shape: str, colour: str, seed: int) -> Path:
    """The creature's point cloud: PLY (binary) or ``.npy`` (xyz + rgb in 0..1) by the path's suffix."""
    from omnieval.media.pointcloud import write_ply

    points = shape_points(shape, POINTS, keyed_rng(seed, "cloud", shape, colour))
    rgb = np.tile(np.array(RGB[colour], dtype=np.uint8), (len(points), 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npy":
        np.save(path, np.hstack([points, rgb / 255.0]).astype(np.float32))
        return path
    return write_ply(path, points, rgb)


def _creatures(seed: int, split: str, n: int) -> list[dict]:
    out = []
    for i, name in enumerate(_entities(seed, split, n, set())):
        out.append({"name": name, "colour": COLOURS[i % len(COLOURS)], "shape": SHAPES[i % len(SHAPES)],
                    "box": 40 + 10 * (i % 4), "speed": 30 + 25 * (i % 5), "stripes": i % 3,
                    "frequency": 300 + 90 * i, "beeps": 1 + i % 4, "cloud": "cloud.ply" if i % 2 == 0 else "cloud.npy"})
    return out


def _caption(c: dict, modality: str) -> str:
    if modality == "image":
        return f"a flat {c['colour']} picture"
    if modality == "video":
        return (f"a {c['colour']} box {c['box']} pixels wide with {c['stripes']} white stripes drifting right at "
                f"{c['speed']} pixels per second")
    if modality == "audio":
        return f"{c['beeps']} beep{'s' if c['beeps'] > 1 else ''} at {c['frequency']} Hz"
    return f"a {c['colour']} {c['shape']} made of points"


def _path(c: dict, modality: str) -> str:
    name = {"image": "image.png", "audio": "audio.wav", "video": "video.mp4", "pointcloud": c["cloud"]}[modality]
    return f"media/{c['name']}/{name}"


def _attributes(c: dict) -> np.ndarray:
    shape = np.zeros(len(SHAPES))
    shape[SHAPES.index(c["shape"])] = 1.0
    return np.concatenate([np.array(RGB[c["colour"]]) / 255.0, shape,
                           [(c["frequency"] - 300) / 900.0, c["beeps"] / 4.0]])


def make_contrastive_benchmark(out_dir: str | Path, *, seed: int = 0, n_entities: int = 6, split: str = "all",
                               modalities: Sequence[str] = MODALITIES, similar_k: int = 2,
                               embed: Callable[[Sequence[str]], np.ndarray] | None = None,
                               workers: int | None = None, overwrite: bool = False) -> Path:
    """Write ``benchmark.json``, ``items.jsonl`` and ``media/`` (one folder per creature); return the folder.

    ``n_entities * (len(modalities) - 1) * 2`` items."""
    from omnieval.media.synth import beep_audio, moving_box_video, still_image

    modalities = tuple(m for m in MODALITIES if m in modalities)
    if len(modalities) < 2:
        raise ValueError(f"need at least two modalities of {', '.join(MODALITIES)}")
    if not len(modalities) <= n_entities <= len(COLOURS):
        raise ValueError(f"n_entities must be in {len(modalities)}..{len(COLOURS)}")
    out = Path(out_dir)
    with building_folder(out, "synth", overwrite=overwrite, prefix=".synth-ct-") as tmp:
        creatures = _creatures(seed, split, n_entities)
        jobs = []
        for c in creatures:
            writers = {
                "image": partial(still_image, tmp / _path(c, "image"), colour=c["colour"]),
                "audio": partial(beep_audio, tmp / _path(c, "audio"), frequency=c["frequency"], beeps=c["beeps"]),
                "video": partial(moving_box_video, tmp / _path(c, "video"), colour=c["colour"], box=c["box"],
                                 speed=c["speed"], stripes=c["stripes"]),
                "pointcloud": partial(write_creature_cloud, tmp / _path(c, "pointcloud"), c["shape"], c["colour"],
                                      seed),
            }
            jobs += [writers[m] for m in modalities]
        with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:  # ffmpeg runs outside the GIL
            list(pool.map(lambda write: write(), jobs))
        pool_scenes = [Candidate(f"{c['name']}/{m}", m, _caption(c, m)) for c in creatures for m in modalities]
        owner = [i for i in range(len(creatures)) for _ in modalities]
        if embed is not None:
            vectors = np.asarray(embed([s.caption for s in pool_scenes]), dtype=np.float64)
        else:
            vectors = np.stack([_attributes(creatures[i]) for i in owner])
        items = []
        for ci in range(len(creatures)):
            for n in range(2, len(modalities) + 1):
                for si, selection in enumerate(("random", "similar")):
                    answer_modality = modalities[(ci + n + si) % len(modalities)]
                    items.append(_item(seed, split, creatures, ci, answer_modality, n, selection, modalities,
                                       pool_scenes, owner, vectors, similar_k))
        meta = {"name": "omnieval-synthetic-contrastive", "protocol": "contrastive", "seed": seed, "split": split,
                "n_entities": n_entities, "modalities": list(modalities), "similar_k": similar_k,
                "similarity": "caption embeddings" if embed is not None else "creature attributes",
                "generator": "omnieval.datasets.synthetic_contrastive"}
        write_benchmark_files(tmp, items, meta)
    return out


def _item(seed, split, creatures, ci, answer_modality, n, selection, modalities, pool_scenes, owner, vectors,
          similar_k) -> Item:
    c = creatures[ci]
    rng = keyed_rng(seed, split, c["name"], answer_modality, n, selection, "item")
    others = [m for m in modalities if m != answer_modality]
    chosen = [others[int(i)] for i in rng.permutation(len(others))[: n - 1]]
    order = [answer_modality, *chosen]
    order = [order[int(i)] for i in rng.permutation(n)]  # the anchor's position is random too
    anchor = next(i for i, s in enumerate(pool_scenes) if s.key == f"{c['name']}/{answer_modality}")
    # one creature per scene: a negative never shares a creature with the anchor or another negative
    scenes = build_tuple(pool_scenes, anchor, order, selection, keyed_seed(seed, split, c["name"], n),
                         embeddings=vectors, k=similar_k, groups=owner)
    inputs = [Input(modality=pool_scenes[j].modality, path=_path(creatures[owner[j]], pool_scenes[j].modality),
                    caption=pool_scenes[j].caption, source="synthetic", id=pool_scenes[j].key) for j in scenes]
    if answer_modality == "audio":
        question = SOUND_QUESTION.format(beeps=c["beeps"], plural="s" if c["beeps"] > 1 else "",
                                         frequency=c["frequency"])
    else:
        question = COLOUR_QUESTION.format(colour=c["colour"])
    return Item(item_id=f"{c['name'].lower()}-{answer_modality}-n{n}-{selection}",
                benchmark="omnieval-synthetic-contrastive", split=split, question=question, inputs=inputs,
                answer=order.index(answer_modality), selection_type=selection,
                category="sound" if answer_modality == "audio" else "colour")


def synthetic_benchmark(out: str | Path, seed: int, options: SynthOptions, overwrite: bool = False) -> Path:
    """``omnieval datasets synth --protocol contrastive`` (the protocol's ``synthetic_benchmark``): the benchmark of the
    CLI's size knobs that apply to it (entities)."""
    return make_contrastive_benchmark(out, seed=seed, n_entities=options.entities, overwrite=overwrite)
