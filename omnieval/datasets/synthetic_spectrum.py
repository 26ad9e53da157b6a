"""The built-in synthetic ``spectrum`` benchmark: multiple-choice questions about real still images (made by ffmpeg,
``omnieval.media.synth.still_image``), built so that each category depends on the modalities in a known way.

Every picture is one plain colour in one layout (landscape, portrait or square). Four categories, in turn:

* ``colour`` - "What colour is the picture?", four colour options: the image alone answers it; the question is the
  same for every item of the category, so the text alone cannot (an **image** intra-modality dependency);
* ``layout`` - "Is the picture landscape, portrait or square?": the image alone answers it (**image**);
* ``arithmetic`` - "What is 7 + 5?", four numbers, over a picture of a random colour: the text alone answers it
  (a **text** intra-modality dependency);
* ``check`` - "Is the picture <colour>?", yes / no, half of them yes: neither the picture nor the question alone
  tells the answer, only both together (an **inter**-modality dependency, like POPE or MME in the paper).

A model that reads images and text should show ``image-intra`` on ``colour`` and ``layout``, ``text-intra`` on
``arithmetic`` and ``inter-only`` on ``check`` (per-category ``dependency`` keys). Within a category the colours
cycle through the palette in a keyed order, so no two of the first twelve items of a category share a colour.

Deterministic from the seed (keyed randomness, bit-exact ffmpeg output); each distinct picture is written once; the
folder is built beside ``out_dir`` and moved into place.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from omnieval.core.keyed import keyed_rng
from omnieval.core.schema import LABELS
from omnieval.datasets.benchmark import write_benchmark_files
from omnieval.datasets.output_folder import building_folder
from omnieval.protocols.spectrum import Item

if TYPE_CHECKING:
    from omnieval.datasets.synthetic_registry import SynthOptions

NAME = "omnieval-synthetic-spectrum"
PALETTE: tuple[str, ...] = ("red", "blue", "green", "yellow", "magenta", "cyan", "orange", "purple", "white",
                            "brown", "pink", "gray")
LAYOUTS: dict[str, tuple[int, int]] = {"landscape": (160, 96), "portrait": (96, 160), "square": (128, 128)}
CATEGORIES: tuple[str, ...] = ("colour", "layout", "arithmetic", "check")
RGB: dict[str, tuple[int, int, int]] = {
    "red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 128, 0), "yellow": (255, 255, 0),
    "magenta": (255, 0, 255), "cyan": (0, 255, 255), "orange": (255, 165, 0), "purple": (128, 0, 128),
    "white": (255, 255, 255), "brown": (165, 42, 42), "pink": (255, 192, 203), "gray": (128, 128, 128)}
"""The palette's colours as ffmpeg draws them (X11/CSS names), for checks that read the pictures back."""


def _picture(colour: str, layout: str) -> str:
    return f"media/{colour}-{layout}.png"


def _shuffled(rng, correct: str, distractors: list[str]) -> tuple[list[str], str]:
    """Options in a keyed order and the correct option's label."""
    options = [correct, *distractors]
    order = rng.permutation(len(options))
    shown = [options[i] for i in order]
    return shown, LABELS[shown.index(correct)]


def _item(seed: int, split: str, category: str, k: int, colour_order: list[int]) -> Item:
    rng = keyed_rng(seed, split, category, k, "item")
    colour = PALETTE[colour_order[k % len(PALETTE)]]
    layout = list(LAYOUTS)[int(rng.integers(len(LAYOUTS)))]
    fields = {"item_id": f"{category}-{k:03d}", "benchmark": NAME, "split": split, "category": category}
    if category == "colour":
        others = [c for c in PALETTE if c != colour]
        distractors = [others[i] for i in rng.choice(len(others), size=3, replace=False)]
        options, answer = _shuffled(rng, colour, distractors)
        question = "What colour is the picture?"
    elif category == "layout":
        options = list(LAYOUTS)
        answer = LABELS[options.index(layout)]
        question = "Is the picture landscape, portrait or square?"
    elif category == "arithmetic":
        a, b = (int(x) for x in rng.integers(2, 20, size=2))
        total = a + b
        near = [total + d for d in (-2, -1, 1, 2, 3) if total + d > 0]
        distractors = [str(near[i]) for i in rng.choice(len(near), size=3, replace=False)]
        options, answer = _shuffled(rng, str(total), distractors)
        question = f"What is {a} + {b}?"
    else:  # check: yes for even k, no for odd k (balanced), asking about another colour when no
        yes = k % 2 == 0
        asked = colour if yes else [c for c in PALETTE if c != colour][int(rng.integers(len(PALETTE) - 1))]
        options, answer = ["yes", "no"], "A" if yes else "B"
        question = f"Is the picture {asked}?"
    return Item(**fields, question=question, options=options, answer=answer,
                media={"image": _picture(colour, layout)})


def spectrum_items(seed: int = 0, n_items: int = 48, split: str = "all") -> list[Item]:
    """The benchmark's items (no media written): ``n_items`` spread over the four categories in turn."""
    per_category: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
    orders = {c: [int(i) for i in keyed_rng(seed, split, c, "colours").permutation(len(PALETTE))]
              for c in CATEGORIES}
    items = []
    for i in range(n_items):
        category = CATEGORIES[i % len(CATEGORIES)]
        items.append(_item(seed, split, category, per_category[category], orders[category]))
        per_category[category] += 1
    return items


def make_spectrum_benchmark(out_dir: str | Path, *, seed: int = 0, n_items: int = 48, split: str = "all",
                            workers: int | None = None, overwrite: bool = False) -> Path:
    """Write ``benchmark.json``, ``items.jsonl`` and ``media/`` (one PNG per distinct colour and layout); return
    the folder. ``n_items`` >= 8 (two per category, so every category has a donor for every item)."""
    from omnieval.media.synth import still_image

    if n_items < 2 * len(CATEGORIES):
        raise ValueError(f"n_items must be at least {2 * len(CATEGORIES)} (two per category)")
    items = spectrum_items(seed, n_items, split)
    out = Path(out_dir)
    with building_folder(out, "synth", overwrite=overwrite, prefix=".synth-sp-") as tmp:
        pictures = sorted({it.media["image"] for it in items})
        jobs = []
        for rel in pictures:
            colour, layout = Path(rel).stem.rsplit("-", 1)
            jobs.append((tmp / rel, colour, LAYOUTS[layout]))
        (tmp / "media").mkdir()
        with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:  # ffmpeg runs outside the GIL
            list(pool.map(lambda job: still_image(job[0], colour=job[1], size=job[2]), jobs))
        meta = {"name": NAME, "protocol": "spectrum", "seed": seed, "split": split, "n_items": n_items,
                "categories": list(CATEGORIES), "generator": "omnieval.datasets.synthetic_spectrum"}
        write_benchmark_files(tmp, items, meta)
    return out


def synthetic_benchmark(out: str | Path, seed: int, options: SynthOptions, overwrite: bool = False) -> Path:
    """``omnieval datasets synth --protocol spectrum`` (the protocol's ``synthetic_benchmark``): the benchmark of the
    CLI's size knobs that apply to it (items)."""
    return make_spectrum_benchmark(out, seed=seed, n_items=options.items, overwrite=overwrite)
