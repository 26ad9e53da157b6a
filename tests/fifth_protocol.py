"""A protocol that lives in the tests only (``test_fifth_protocol.py`` registers it): does a model use the picture?

Each item is a multiple-choice question about a picture, with a short text beside it (a caption that may or may not
give the answer away). Two conditions: ``normal`` (the item's own picture) and ``no_image`` (the picture replaced by
another one of the benchmark, named by the item itself: ``other_image``). Metrics, as functions of the cell means:
``accuracy`` per condition, ``image_gain`` = accuracy[normal] - accuracy[no_image], and ``image_share`` =
image_gain / accuracy[normal] (the share of the accuracy the picture buys), plus the invalid rate.

The module exports one value, ``SPEC`` (``omnieval.protocols.spec.ProtocolSpec``): everything the run, the
statistics, the report and ``omnieval datasets synth`` know of the protocol is in it. It uses only what any protocol
module may: ``omnieval.core``, the spec type and polars / numpy (its synthetic benchmark writer, which needs the
dataset helpers, imports them when called).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from omnieval.core.metric_types import CellFamily, MetricRow, ProtocolMetrics
from omnieval.core.protocol_views import (
    ConditionTests,
    HeadlineTable,
    PairedHeadline,
    ReportBars,
    ReportColumn,
    ReportLayout,
    ReportTable,
)
from omnieval.core.schema import LABELS, InputError, Instance, ItemId, Segment, Strict
from omnieval.protocols.spec import ProtocolSpec

NAME = "fifth"
CONDITIONS = ("normal", "no_image")


class Item(Strict):
    item_id: ItemId
    benchmark: str = "fifth"
    split: str = "all"
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=2, max_length=5)
    answer: str  # the correct option's label
    image: str
    other_image: str  # what ``no_image`` shows instead of ``image``
    text: str = Field(min_length=1)

    @model_validator(mode="after")
    def _answer_is_a_label(self) -> Item:
        if self.answer not in LABELS[: len(self.options)]:
            raise ValueError(f"answer {self.answer!r} is not the label of one of the {len(self.options)} options")
        return self


class Options(Strict):
    """No knobs."""


class InstanceFields(Strict):
    """What an instance of this protocol carries of its own (``Instance.protocol_fields``): whether its text names
    the answer. Declared here and in ``SPEC`` alone; no shared type knows of it."""

    text_tells: bool


def media_refs(item: Item) -> list[tuple[str, str, str]]:
    return [(item.image, "image", "image"), (item.other_image, "image", "other_image")]


def validate_items(items, bench=None, file=None) -> None:
    for item in items:
        if item.other_image == item.image:
            raise InputError("other_image is the item's own picture: no_image would show it", file=file,
                             item=item.item_id, field="other_image")


def expand_all(items, bench=None, seed: int = 0, options: Options | None = None) -> list[Instance]:
    """Both conditions of every item. The simulated engine's hints: the picture supports the answer when it is the
    item's own; the text does when it names the answer (the instance's own field ``text_tells``)."""
    out = []
    for item in items:
        labels = list(LABELS[: len(item.options)])
        tells = item.options[LABELS.index(item.answer)] in item.text
        for condition in CONDITIONS:
            own = condition == "normal"
            out.append(Instance(
                instance_id=f"{item.item_id}|{condition}|s{seed}", item_id=item.item_id, protocol=NAME,
                benchmark=item.benchmark, split=item.split, condition=condition, question=item.question,
                segments=[Segment(kind="media", modality="image", path=item.image if own else item.other_image),
                          Segment(kind="text", text=f"Text: {item.text}")],
                option_labels=labels, option_texts=list(item.options), target=item.answer,
                protocol_fields=SPEC.fields(text_tells=tells),
                simulation_hints={"image": item.answer if own else None, "text": item.answer if tells else None}))
    return out


# --- metrics: functions of cell means over the bootstrap rows ---

def metric_rows(cells):
    acc = {c: cells.mean("acc", c) for c in CONDITIONS if cells.has("acc", c)}
    for c, values in acc.items():
        yield MetricRow("accuracy", values, cells.support("acc", c), c, {"leaf": c})
    if len(acc) == len(CONDITIONS):
        support = cells.support("acc", "normal") + cells.support("acc", "no_image")
        gain = acc["normal"] - acc["no_image"]
        yield MetricRow("image_gain", gain, support)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(acc["normal"] > 0, gain / np.where(acc["normal"] > 0, acc["normal"], 1), np.nan)
        yield MetricRow("image_share", share, support)
    if cells.has("invalid"):
        yield MetricRow("invalid_rate", cells.mean("invalid"), cells.support("invalid"))


def _headline_rows(table: pl.DataFrame) -> pl.DataFrame:
    return table.filter(pl.col("metric").is_in(["accuracy", "image_gain"]))


def metrics_spec() -> ProtocolMetrics:
    return ProtocolMetrics(
        name=NAME,
        families=(CellFamily("acc", "correct", "valid", ("condition",)), CellFamily("invalid", "invalid", "answered")),
        metrics=metric_rows,
        conditions=CONDITIONS,
        paired=PairedHeadline(every_key=("accuracy",), overall=("image_gain",)),
        headlines=(HeadlineTable("Accuracy with and without the picture, and the gain", _headline_rows),),
        tests=ConditionTests(baseline="normal"),
    )


# --- how the results are shown ---

REPORT = ReportLayout(
    title="Fifth: what the picture adds",
    intro="Each question asked with its own picture (normal) and with another one (no_image).",
    tables=(ReportTable("What the picture adds", (
        ReportColumn("gain", "image_gain", scale="div", title="accuracy[normal] - accuracy[no_image]"),
        ReportColumn("share", "image_share", scale="div"))),),
    figures=(ReportBars("fifth-accuracy", "Accuracy with and without the item's picture, with 95% intervals",
                        "accuracy", CONDITIONS, ylabel="accuracy", xlabel="condition"),),
)

PALETTE = ("red", "blue", "green", "yellow", "magenta", "cyan")


def make_benchmark(out: str | Path, seed: int, options, overwrite: bool = False) -> Path:
    """``options.items`` questions "What colour is the picture?" over one-colour pictures, colours in turn; every
    other item's text names the answer. ``no_image`` shows the next colour's picture."""
    from omnieval.core.keyed import keyed_rng
    from omnieval.datasets.benchmark import write_benchmark_files
    from omnieval.datasets.output_folder import building_folder
    from omnieval.media.synth import still_image

    items = []
    for k in range(options.items):
        colour, other = PALETTE[k % len(PALETTE)], PALETTE[(k + 1) % len(PALETTE)]
        rng = keyed_rng(seed, "fifth", k)
        distractors = [c for c in PALETTE if c != colour]
        shown = [colour, *(distractors[i] for i in rng.choice(len(distractors), size=3, replace=False))]
        shown = [shown[i] for i in rng.permutation(len(shown))]
        text = f"The caption says: {colour}." if k % 2 == 0 else "The caption is torn."
        items.append(Item(item_id=f"q{k:03d}", question="What colour is the picture?", options=shown,
                          answer=LABELS[shown.index(colour)], image=f"media/{colour}.png",
                          other_image=f"media/{other}.png", text=text))
    with building_folder(Path(out), "synth", overwrite=overwrite, prefix=".synth-fifth-") as tmp:
        (tmp / "media").mkdir()
        for colour in PALETTE:
            still_image(tmp / "media" / f"{colour}.png", colour=colour, size=(64, 48))
        write_benchmark_files(tmp, items, {"name": "fifth", "protocol": NAME, "seed": seed})
    return Path(out)


SPEC = ProtocolSpec(
    name=NAME, item=Item, options=Options, media_refs=media_refs, validate_items=validate_items,
    expand_all=expand_all, metrics=metrics_spec, instance_fields=InstanceFields,
    item_local=True,  # an item names its replacement picture itself: no other item is read
    paired_matrix=(("accuracy", None), ("image_gain", "")),
    report=REPORT,
    value_ranges={"image_share": "image_share, the gain over the accuracy with the picture, is at most 1 and has "
                                 "no lower bound"},
    synthetic_benchmark=f"{__name__}:make_benchmark",
)
