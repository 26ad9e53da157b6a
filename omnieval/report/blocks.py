"""What a report is made of, independent of how it is written: sections holding tables, figures and short notes.

The protocol modules build these blocks from the metrics table; ``html.py`` and ``markdown.py`` write them. A
numeric ``Cell`` keeps the identity of the metrics-table row it shows (``data``: protocol, run, model, prompt, split,
metric, key), so the written report can be checked number by number against ``metrics.parquet``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

DIGITS = 3


@dataclass
class Cell:
    """One table cell. ``text`` is shown; ``ci`` (``[lo, hi]``) is shown beneath it in small type; ``title`` appears
    on hover; ``sort`` orders the column (numbers before text); ``shade`` is a CSS background colour."""

    text: str
    ci: str | None = None
    title: str | None = None
    sort: float | str | None = None
    shade: str | None = None
    strong: bool = False
    header: bool = False
    data: dict[str, str] = field(default_factory=dict)

    @property
    def plain(self) -> str:
        """Text with its interval, as written where there is no hover (Markdown)."""
        return f"{self.text} {self.ci}" if self.ci else self.text


@dataclass
class Table:
    """Rows of cells under one header row; ``groups`` is an optional upper header row of ``(label, span)``."""

    caption: str
    header: list[str]
    rows: list[list[Cell]]
    groups: list[tuple[str, int]] | None = None
    note: str | None = None
    collapsed: bool = False
    name: str = ""
    header_titles: list[str | None] | None = None

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"table {self.caption!r}: row of {len(row)} cells under {len(self.header)} columns")


@dataclass
class Figure:
    """A rendered plot (PNG bytes) with its caption; ``name`` is its file stem in the Markdown report."""

    name: str
    caption: str
    png: bytes
    alt: str = ""


@dataclass
class Note:
    text: str


Block = Table | Figure | Note


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    subsections: list[Section] = field(default_factory=list)
    intro: str | None = None

    def walk(self):
        """Every block of this section and its subsections, in reading order."""
        yield from self.blocks
        for sub in self.subsections:
            yield from sub.walk()


@dataclass
class Report:
    title: str
    intro: list[str]
    sections: list[Section]
    generated: str = ""


def fmt(x: float | None, digits: int = DIGITS) -> str:
    """A fraction as printed in reports: fixed decimals, a true minus sign never (ASCII '-'), '—' for missing."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    text = f"{x:.{digits}f}"
    return "0." + "0" * digits if text == "-0." + "0" * digits else text


def fmt_p(p: float | None) -> str:
    """A p-value: three significant digits, scientific below 0.001."""
    if p is None or not math.isfinite(p):
        return "—"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3g}"


ALPHA = 0.05
P_MARK = "*"
MARKS = (f"One rule marks differences throughout: bold when the 95% interval excludes 0. A p-value is a separate "
         f"test (permutation or bootstrap, Benjamini-Hochberg adjusted) and carries {P_MARK} when below {ALPHA}; "
         "with few clusters the two can disagree (a permutation test over c clusters cannot go below 2 / 2^c).")
"""The report's one rule for what stands out, stated in its header and followed by every table."""


def excludes_zero(low: float | None, high: float | None) -> bool:
    """The marking rule: an interval that lies wholly above or below 0."""
    return low is not None and high is not None and math.isfinite(low) and math.isfinite(high) \
        and (low > 0 or high < 0)


def p_text(p: float | None) -> str:
    """A p-value as ``fmt_p`` writes it, ``P_MARK`` after it when below ``ALPHA``."""
    return fmt_p(p) + (P_MARK if p is not None and math.isfinite(p) and p < ALPHA else "")


def text_cell(text: str, *, header: bool = False, title: str | None = None, sort: str | float | None = None) -> Cell:
    return Cell(text=text, header=header, title=title, sort=text if sort is None else sort)
