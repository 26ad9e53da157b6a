"""The resampling unit: which rows every interval, paired difference, permutation test and power figure treats as
one draw (docs/reference.md, Statistics common to all protocols, Resampling unit).

Items that share media are not independent: the questions of one OMD-Bench anchor share its video and audio, so a
model that finds the anchor hard tends to miss all of them. An interval that resamples questions treats the anchors
as fixed and is too narrow when anchors differ; resampling anchors is honest for that design. The unit is a choice:

* ``item`` (or ``group``, the same unit): the question, ``metric_types.question_of`` (an item's ``item_id``, or its
  ``group`` where copies of one question share one);
* any column of the predictions (``anchor``, ``media_unit`` the media file an item's questions share, ...): rows
  with equal values are one unit; a row where the column is null goes with its question's other rows, and a question
  with no value in any row is its own unit.

A unit must hold whole questions (every row of a question, in every condition, model and mode, in one unit), so that
the conditions of an item stay paired inside it; a column that varies within a question is refused, naming the
question. Each protocol has a default (``ProtocolMetrics.cluster``); a choice names one unit for every protocol
(``"anchor"``) or one per protocol (``{"dissonance": "anchor"}``, on the command line ``dissonance=anchor``). A
protocol's default unit whose column the predictions lack (a file written by another tool without anchors) falls
back to the question, and ``units_used`` says so; a unit the user names must exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import polars as pl

from omnieval.core.metric_types import CLUSTER, ITEM_CLUSTER, QUESTION, question_of
from omnieval.core.schema import InputError

QUESTION_UNITS = (ITEM_CLUSTER, "group")
"""Names of the finest unit, the question (``group`` is accepted because the question is the ``group`` where set)."""

ClusterChoice = str | Mapping[str, str] | None
"""None: every protocol's default; a name: that unit for every protocol; a mapping protocol -> name (others keep
their default)."""

_FALLBACK = "\x00"
"""Prefix of the unit of a row whose cluster column is null: its question, kept apart from every column value."""


def parse_cluster_option(values: Iterable[str] | None) -> ClusterChoice:
    """``--cluster`` values: ``COLUMN`` (every protocol) and/or ``PROTOCOL=COLUMN`` (repeatable).

    An empty value and a protocol no module registers (a typo such as ``disonance``) are refused here, before any
    computing: either would otherwise leave every protocol on its default unit while the user believes otherwise,
    and ``metrics.json`` would record the default as if chosen."""
    from omnieval.protocols import known_protocols

    if values is None:
        return None
    values = [v.strip() for v in values]
    if not values:
        return None
    choice: dict[str, str] = {}
    for value in values:
        protocol, sep, column = value.partition("=")
        key, name = (protocol.strip(), column.strip()) if sep else ("*", protocol)
        if not key or not name:
            raise InputError(f"--cluster {value!r}: give a column (anchor) or protocol=column (dissonance=anchor)",
                             field="--cluster")
        if key != "*" and key not in known_protocols():
            raise InputError(f"--cluster {value!r}: no protocol {key!r}; known protocols: "
                             f"{', '.join(known_protocols())} (or give a column alone for every protocol)",
                             field="--cluster")
        if key in choice and choice[key] != name:
            raise InputError(f"--cluster names two units for {'every protocol' if key == '*' else key}: "
                             f"{choice[key]!r} and {name!r}", field="--cluster")
        choice[key] = name
    return choice["*"] if set(choice) == {"*"} else choice


def default_cluster(protocol: str) -> str:
    """The protocol's own resampling unit (its metric spec's ``cluster``; ``item`` for one without a spec)."""
    from omnieval.protocols import metric_spec

    spec = metric_spec(protocol)
    return spec.cluster if spec is not None else ITEM_CLUSTER


def cluster_for(protocol: str, choice: ClusterChoice = None) -> str:
    """The unit ``choice`` gives ``protocol``: its own entry, else the entry for every protocol (``*``), else the
    protocol's default."""
    if isinstance(choice, str):
        return choice
    if choice:
        return choice.get(protocol) or choice.get("*") or default_cluster(protocol)
    return default_cluster(protocol)


def _unit_expr(frame: pl.DataFrame, column: str) -> pl.Expr:
    if column in QUESTION_UNITS:
        return pl.col(QUESTION)
    value = pl.col(column).cast(pl.Utf8)
    # A null takes the value of its question's other rows (rows written before the column existed, resumed beside
    # rows that have it); a question with no value at all is its own unit.
    question = [c for c in ("protocol", "split") if c in frame.columns] + [QUESTION]
    value = value.fill_null(value.max().over(question))
    return pl.when(value.is_null()).then(pl.lit(_FALLBACK) + pl.col(QUESTION)).otherwise(value)


def unit_candidates(part: pl.DataFrame) -> list[str]:
    """The units a user could name for these rows: the question's names, then every text column with at least two
    values that holds whole questions (one value per question), as ``_check`` requires."""
    question = part.with_columns(question_of(part)) if QUESTION not in part.columns else part
    texts = [c for c, t in part.schema.items() if t in (pl.Utf8, pl.Categorical) and c not in (QUESTION, CLUSTER)
             and part[c].drop_nulls().n_unique() > 1]
    if not texts:
        return list(QUESTION_UNITS)
    spread = question.group_by(QUESTION).agg(pl.col(c).drop_nulls().n_unique() for c in texts)
    return [*QUESTION_UNITS, *(c for c in texts if spread[c].max() <= 1)]


def _check(part: pl.DataFrame, protocol: str, column: str) -> None:
    """Refuse a unit column that is absent, empty, or varies within a question (the unit must hold whole
    questions, so that an item's conditions stay paired)."""
    if column in QUESTION_UNITS:
        return
    if column not in part.columns or part[column].null_count() == len(part):
        raise InputError(f"cannot resample {protocol} predictions by {column!r}: the column is "
                         f"{'absent' if column not in part.columns else 'empty'}; units these predictions hold: "
                         f"{', '.join(unit_candidates(part))} (give the unit per protocol, e.g. --cluster "
                         f"{protocol}=item)", field="--cluster")
    split = ["split"] if "split" in part.columns else []
    spread = part.group_by([*split, QUESTION]).agg(pl.col(CLUSTER).n_unique().alias("units"),
                                                   pl.col(CLUSTER).unique().sort().head(2).alias("seen")) \
        .filter(pl.col("units") > 1).sort([*split, QUESTION]).head(1)
    if len(spread):
        row = spread.row(0, named=True)
        values = ", ".join(repr(v.removeprefix(_FALLBACK)) for v in row["seen"])
        raise InputError(f"cannot resample {protocol} predictions by {column!r}: question {row[QUESTION]!r} has "
                         f"rows in two units ({values}); a unit must hold every row of a question, so that its "
                         "conditions stay paired", item=row[QUESTION], field="--cluster")


def _named(protocol: str, choice: ClusterChoice) -> bool:
    """Whether ``choice`` names the protocol's unit (rather than leaving it to the default)."""
    if isinstance(choice, str):
        return True
    return bool(choice) and (protocol in choice or "*" in choice)


def units_used(frame: pl.DataFrame, choice: ClusterChoice = None) -> dict[str, str]:
    """Protocol -> the unit its rows of ``frame`` are resampled by under ``choice`` (what ``metrics.json``
    records): the named one, else the protocol's default, else (its column absent or empty in these predictions)
    ``item``."""
    protocols = sorted(frame["protocol"].unique().drop_nulls().to_list()) if len(frame) else []
    units = {}
    for protocol in protocols:
        unit = cluster_for(protocol, choice)
        if unit not in QUESTION_UNITS and not _named(protocol, choice):
            column = frame.filter(pl.col("protocol") == protocol)[unit] if unit in frame.columns else None
            if column is None or column.null_count() == len(column):
                unit = ITEM_CLUSTER
        units[protocol] = unit
    return units


def with_clusters(frame: pl.DataFrame, choice: ClusterChoice = None) -> pl.DataFrame:
    """A prepared frame (``stats.read.prepare``) with ``CLUSTER`` set to each row's unit under ``choice`` (row
    order kept; ``units_used``). Raises ``InputError`` for a named unit that cannot be used (``_check``)."""
    if QUESTION not in frame.columns:
        frame = frame.with_columns(question_of(frame))
    units = units_used(frame, choice)
    if all(u in QUESTION_UNITS for u in units.values()):
        return frame.with_columns(pl.col(QUESTION).alias(CLUSTER))
    expr = pl.lit(None, dtype=pl.Utf8)
    for protocol, column in units.items():
        if column not in frame.columns:
            _check(frame.filter(pl.col("protocol") == protocol), protocol, column)
        expr = pl.when(pl.col("protocol") == protocol).then(_unit_expr(frame, column)).otherwise(expr)
    out = frame.with_columns(pl.coalesce(expr, pl.col(QUESTION)).alias(CLUSTER))
    for protocol, column in units.items():
        _check(out.filter(pl.col("protocol") == protocol), protocol, column)
    return out

