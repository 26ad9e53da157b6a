"""What each run's models were shown, per run and model: frames, their size, seconds heard, media tokens per
modality and prompt tokens, from the predictions' ``SHOWN_COLUMNS`` (``engines.shown``).

A gap between a model's number here and on its card is most often in its inputs (too few frames, a smaller size,
the soundtrack never passed), so the runs table is followed by this one. Each figure is the median over the rows
that say it, with its range (``8 (4–16)``); a video size is the most common one, with the count of others. Rows
not asked (``skipped``) are left out; a column no row says is ``—``.
"""

from __future__ import annotations

import polars as pl

from omnieval.core.schema import SHOWN_COLUMNS
from omnieval.report.blocks import Table, text_cell

TOKEN_MODALITIES = ("video", "audio", "image")
HEADER = ["run", "model", "rows", "video frames", "video size", "seconds heard",
          *(f"{m} tokens" for m in TOKEN_MODALITIES), "prompt tokens"]
TITLES = [None, None, "rows that say what the model was shown (of the rows asked)",
          "frames of the row's videos given to the model's processor", "HxW of the frames as the processor resized "
          "them (vLLM, simulated: as decoded)", "seconds of audio heard, a video's soundtrack included, after any cap",
          *(f"{m} placeholder tokens in the input ids" for m in TOKEN_MODALITIES), "input length in tokens"]


def shown_table(runs) -> Table | None:
    """One row per run and model (``build.Run``s); None where no run's predictions say what was shown."""
    rows = []
    for run in runs:
        frame = _asked(run.predictions)
        if frame is None:
            continue
        for model in frame["model"].unique(maintain_order=True).to_list():
            rows.append(_row(run.label, model, frame.filter(pl.col("model") == model)))
    if not rows:
        return None
    return Table(caption="What the models were shown", header=HEADER, rows=rows, name="shown",
                 header_titles=TITLES,
                 note="median over the rows (range); video size: the most common, + how many others")


def _asked(predictions: pl.DataFrame | None) -> pl.DataFrame | None:
    """The rows asked, with the columns that say what was shown (None where there are none or none says it)."""
    if predictions is None or not all(c in predictions.columns for c in SHOWN_COLUMNS):
        return None
    frame = predictions
    if "skipped" in frame.columns:
        frame = frame.filter(pl.col("skipped").is_null() | (pl.col("skipped") == ""))
    said = pl.any_horizontal(*(pl.col(c).is_not_null() for c in SHOWN_COLUMNS))
    return frame if frame.filter(said).height else None


def _row(label: str, model: str, frame: pl.DataFrame) -> list:
    said = frame.filter(pl.any_horizontal(*(pl.col(c).is_not_null() for c in SHOWN_COLUMNS)))
    tokens = [_spread(said["media_tokens"].struct.field(m)) if said["media_tokens"].dtype != pl.Null else "—"
              for m in TOKEN_MODALITIES]
    return [text_cell(label, header=True), text_cell(model), text_cell(f"{said.height} of {frame.height}"),
            text_cell(_spread(said["video_frames"])), text_cell(_sizes(said["video_size"])),
            text_cell(_spread(said["audio_seconds"], digits=1)), *(text_cell(t) for t in tokens),
            text_cell(_spread(said["prompt_tokens"]))]


def _spread(values: pl.Series, digits: int = 0) -> str:
    """``median (min–max)`` of the values a column holds, or the value alone where all are equal; ``—`` for none."""
    values = values.drop_nulls().cast(pl.Float64)
    if values.is_empty():
        return "—"
    low, mid, high = (_number(v, digits) for v in (values.min(), values.median(), values.max()))
    return mid if low == high else f"{mid} ({low}–{high})"


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if digits or value != int(value) else str(int(value))


def _sizes(values: pl.Series) -> str:
    """The most common size (ties: the first in sorted order) and how many other sizes there are."""
    counts = values.drop_nulls().value_counts(sort=True)
    if counts.is_empty():
        return "—"
    top = counts.sort(["count", values.name], descending=[True, False])
    first = str(top[values.name][0])
    return first if counts.height == 1 else f"{first} (+{counts.height - 1} other)"
