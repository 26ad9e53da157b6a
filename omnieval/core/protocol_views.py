"""How a protocol's results are compared and shown, stated by the protocol beside its metric function: the metrics
its paired differences compare (``PairedHeadline``), its headline tables (``HeadlineTable``), the conditions its
own significance tests compare (``ConditionTests``) and the layout of its report section (``ReportLayout``).

They are plain data and functions over polars frames, so a protocol module states them without importing the
statistics or the report that read them (protocols sit below both; the attributes are listed in
``omnieval/protocols/__init__.py``). The first three ride on the protocol's ``ProtocolMetrics``; the layout is a
module attribute (``REPORT``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import polars as pl


@dataclass(frozen=True)
class PairedHeadline:
    """The metrics the paired differences (``paired.csv``) compare between two models or prompt styles.

    ``every_key``: compared for every key of the unit's own rows (rows of a task or category, ``scoped``, are left
    out); ``overall``: compared only on the row without key parts (``keyless``). The default compares accuracy per
    condition."""

    every_key: tuple[str, ...] = ("accuracy",)
    overall: tuple[str, ...] = ()

    def covers(self, metric: str, *, scoped: bool, keyless: bool) -> bool:
        return (metric in self.every_key and not scoped) or (metric in self.overall and keyless)


@dataclass(frozen=True)
class HeadlineTable:
    """One of the terminal tables ``omnieval metrics`` prints first (``omnieval.stats.headlines`` renders it).

    ``rows``: the protocol's rows of the metrics table (the columns of ``metrics.csv``) -> the rows to show.
    ``columns``: ``"model"``, one column per model and a row per label (metric and key joined) x split x prompt;
    ``"key"``, one column per key and a row per model x prompt x split. ``title``: text, or a function of the
    protocol's metric rows (to name what the table holds). Each cell is ``value [ci_low, ci_high]``."""

    title: str | Callable[[pl.DataFrame], str]
    rows: Callable[[pl.DataFrame], pl.DataFrame]
    columns: Literal["model", "key"] = "model"

    def title_of(self, table: pl.DataFrame) -> str:
        return self.title(table) if callable(self.title) else self.title


@dataclass(frozen=True)
class ConditionTests:
    """The significance tests on a protocol's own conditions (``omnieval stats``), beyond the permutation tests
    every protocol gets.

    * McNemar between every pair of models in ``baseline`` (the unaltered condition), per prompt and split.
    * With ``block`` (a column of the derived predictions whose values are the blocks, e.g. an anchor) and
      ``drops`` (``(name, condition)``: one thing altered), the accuracy drop ``baseline - condition`` per block,
      and a Wilcoxon signed-rank test between the drops of each pair in ``drop_pairs``.
    * With ``block`` and ``level`` (a column grouping the conditions, e.g. the number of altered modalities), a
      Friedman test per level: models as treatments, blocks as blocks (three or more models).
    """

    baseline: str
    drops: tuple[tuple[str, str], ...] = ()
    drop_pairs: tuple[tuple[str, str], ...] = ()
    block: str | None = None
    level: str | None = None


@dataclass(frozen=True)
class ReportColumn:
    """One column of a report table: the metric row ``metric`` / ``key`` of each model, prompt and split.
    ``scale``: ``"seq"`` shades a rate in [0, 1], ``"div"`` a signed difference (bold where its interval excludes
    0), None leaves it unshaded; ``group`` heads adjacent columns together; ``title`` is the header's hover text."""

    label: str
    metric: str
    key: str = ""
    group: str | None = None
    scale: Literal["seq", "div"] | None = "seq"
    title: str | None = None


@dataclass(frozen=True)
class ReportTable:
    caption: str
    columns: tuple[ReportColumn, ...]
    note: str | None = None


@dataclass(frozen=True)
class ReportBars:
    """A figure of bars with their intervals: ``metric`` at each of ``keys``, one bar per model and prompt style,
    one panel per split."""

    name: str
    caption: str
    metric: str
    keys: tuple[str, ...]
    ylabel: str = ""
    xlabel: str = ""


@dataclass(frozen=True)
class ReportLayout:
    """A protocol's report section without code of its own (``omnieval.report.generic``): its title and intro, then
    the accuracy per condition with the invalid and error rates, then ``tables`` and ``figures``, then every metric
    row no table showed."""

    title: str
    intro: str | None = None
    tables: tuple[ReportTable, ...] = ()
    figures: tuple[ReportBars, ...] = ()
