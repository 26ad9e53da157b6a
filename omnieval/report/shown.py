"""What each run's models were shown, per run and model: frames, their size, seconds heard, media tokens per
modality and prompt tokens, from the predictions' ``SHOWN_COLUMNS`` (``engines.shown``) as the run's summary counts
them (``report.summary.RowSummary``: asked rows per model, the count of each value).

A gap between a model's number here and on its card is most often in its inputs (too few frames, a smaller size,
the soundtrack never passed), so the runs table is followed by this one. Each figure is the median over the rows
that say it, with its range (``8 (4–16)``); a video size is the most common one, with the count of others. Rows
not asked (``skipped``) are left out; a column no row says is ``—``.
"""

from __future__ import annotations

import polars as pl

from omnieval.core.schema import SHOWN_COLUMNS
from omnieval.report.blocks import Table, text_cell
from omnieval.report.summary import TOKEN_MODALITIES, RowSummary, median

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
        summary = _asked(run.predictions)
        if summary is None:
            continue
        asked = summary.asked.group_by("model").agg(pl.col("n", "said").sum(), pl.col("first").min()).sort("first")
        for model, n, said in asked.select("model", "n", "said").iter_rows():
            rows.append(_row(run.label, model, n, said, summary))
    if not rows:
        return None
    return Table(caption="What the models were shown", header=HEADER, rows=rows, name="shown",
                 header_titles=TITLES,
                 note="median over the rows (range); video size: the most common, + how many others")


def _asked(summary: RowSummary | None) -> RowSummary | None:
    """The summary, where its rows have the columns that say what was shown and an asked row says it (None
    otherwise)."""
    if summary is None or not summary.has(*SHOWN_COLUMNS):
        return None
    return summary if summary.asked["said"].sum() else None


def _row(label: str, model: str, asked: int, said: int, summary: RowSummary) -> list:
    shown = summary.shown.filter(pl.col("model") == model)

    def spread(figure: str, digits: int = 0) -> str:
        return _spread(median(shown.filter(pl.col("figure") == figure)), digits)

    tokens = [spread(f"{m}_tokens") if summary.has("media_tokens") else "—" for m in TOKEN_MODALITIES]
    return [text_cell(label, header=True), text_cell(model), text_cell(f"{said} of {asked}"),
            text_cell(spread("video_frames")), text_cell(_sizes(summary.sizes.filter(pl.col("model") == model))),
            text_cell(spread("audio_seconds", digits=1)), *(text_cell(t) for t in tokens),
            text_cell(spread("prompt_tokens"))]


def _spread(spread: tuple[float, float, float] | None, digits: int = 0) -> str:
    """``median (min–max)`` of (least, median, greatest) (``summary.median``), or the value alone where all are
    equal; ``—`` for no value."""
    if spread is None:
        return "—"
    low, mid, high = (_number(v, digits) for v in spread)
    return mid if low == high else f"{mid} ({low}–{high})"


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}" if digits or value != int(value) else str(int(value))


def _sizes(sizes: pl.DataFrame) -> str:
    """The most common size (ties: the first in sorted order) and how many other sizes there are, from the count
    of each size (``RowSummary.sizes``)."""
    counts = sizes.group_by("video_size").agg(pl.col("n").sum())
    if counts.is_empty():
        return "—"
    top = counts.sort(["n", "video_size"], descending=[True, False])
    first = str(top["video_size"][0])
    return first if counts.height == 1 else f"{first} (+{counts.height - 1} other)"
