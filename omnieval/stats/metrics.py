"""``omnieval metrics``: predictions -> the long metrics table with clustered bootstrap CIs (docs/reference.md, Metrics
and Statistics common to all protocols).

How it flows (docs/architecture.md, decision 5):

1. ``stats.read.read_predictions`` reads the files and refuses bad rows; ``stats.read.prepare`` derives the row
   flags every protocol shares (errored rows stay out of every denominator and are counted in ``error_rate``).
2. Per protocol, a ``ProtocolMetrics`` spec (``omnieval.core.metric_types``), from the protocol registry
   (``omnieval.protocols.metric_spec``), names its **cell families** (a cell = the mean of one column over the rows
   of one unit x key, e.g. correctness per condition) and one function from those cells to metric rows. A unit is
   model x prompt x split; its resampling clusters are the protocol's unit (``stats.clusters``: the question by
   default, or an anchor, a media file, any column holding whole questions).
3. Per unit, one bootstrap pass (``omnieval.stats.bootstrap``) gives every cell's resampled sums and the metric rows
   with their 95% percentile intervals; open-ended rows get theirs from ``omnieval.stats.open_metrics`` the same way.

A protocol plugs in through its spec (``omnieval.protocols.spec.ProtocolSpec.metrics``); its formulas live in its
own module. Writing the command's files (and the paired differences of the same pass) is
``omnieval.stats.command``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import polars as pl

from omnieval.core.metric_types import with_answer_verdicts, with_error_rates, with_forced_rate
from omnieval.core.schema import InputError
from omnieval.protocols import known_protocols, metric_spec
from omnieval.stats.bootstrap import UnitHook, protocol_rows
from omnieval.stats.clusters import ClusterChoice, with_clusters
from omnieval.stats.factors import FactorSplit, pool_levels
from omnieval.stats.first_pass import ProtocolFacts, protocol_facts
from omnieval.stats.intervals import DEFAULT_METHOD, check_method
from omnieval.stats.key_parts import key_columns
from omnieval.stats.open_metrics import open_rows
from omnieval.stats.read import prepare, read_predictions
from omnieval.stats.samples import SPLIT_COLUMNS, VarianceSplit, has_samples

TABLE_COLUMNS = ("protocol", "model", "prompt", "split", "metric", "key", "value", "ci_low", "ci_high", "n",
                 "n_items", "n_clusters")
"""The table's columns before its key parts (``registry.key_columns``). ``key`` is the key as one label for people;
readers select rows by the parts."""


def metrics_table(predictions: pl.DataFrame, resamples: int = 10_000, seed: int = 0,
                  on_unit: UnitHook | None = None, cluster: ClusterChoice = None,
                  interval: str = DEFAULT_METHOD, variance: VarianceSplit | None = None,
                  random: str | None = None, random_checked: bool = False,
                  facts: Mapping[str, ProtocolFacts] | None = None) -> pl.DataFrame:
    """The long metrics table (docs/reference.md, Metrics) of a predictions frame (as returned by ``read_predictions``).

    ``n_items`` is the number of distinct items (questions) behind the row: those with a prediction in the cells the
    metric reads (``metric_types.Support``), fewer than the unit's for a row of one anchor, task or category;
    ``n_clusters`` the resampling units holding them (``cluster``: ``stats.clusters``; the same number as
    ``n_items`` where the unit is the question). ``interval``: how the 95% interval is formed from the resamples
    (``stats.intervals``).
    ``on_unit`` sees every unit's resampled metric values (``UnitHook``). Predictions with repeated samples (a
    ``sample`` column above 0 somewhere) add ``se_total``, ``se_data`` and ``se_prediction`` (``stats.samples``;
    null on the rows of units with one sample per instance); without them the table is as before. ``variance``:
    the split's hook to use (what the paired differences read it from afterwards). ``random``: a column whose levels
    are a random factor (``stats.factors``): pooled, their spread in ``se_<column>``, ``se_total`` and the interval.
    ``facts``: protocol -> the choices made from all of its rows (``stats.first_pass``), where ``predictions``
    holds part of a protocol (a Ray task of ``stats.distributed``); default: read from ``predictions``."""
    check_method(interval)
    frame = with_clusters(prepare(predictions), cluster)
    rows: list[dict] = []
    split = (variance or VarianceSplit({}, resamples, seed)) if has_samples(frame) else None
    factor = None
    if random is not None:  # a random factor's levels pooled, their spread counted (stats.factors)
        frame, factor = pool_levels(frame, random, random_checked), FactorSplit(random, {}, resamples, seed)
    for protocol in sorted(frame["protocol"].unique().drop_nulls().to_list()):
        spec = metric_spec(protocol)
        if spec is None:  # read_predictions refuses these with file and row; a frame built in code ends here
            raise InputError(f"unknown protocol {protocol!r}; metrics are defined for "
                             f"{', '.join(sorted(known_protocols()))}",
                             field="protocol")
        part = frame.filter(pl.col("protocol") == protocol)
        if spec.derive is not None:
            part = spec.derive(part)
        mcq = part.filter(pl.col("mode") != "open")
        fact = (facts or {}).get(protocol) or protocol_facts(part)
        spec = with_forced_rate(with_error_rates(spec, fact.error_kinds))
        if fact.answers_from_text:  # answers read from text: verdicts beside accuracy
            spec = with_answer_verdicts(spec)
        hook = on_unit
        if split is not None:  # repeated samples: the variance split beside the interval (stats.samples)
            split.spec_frames[spec.name] = mcq
            hook = _both(split, hook)
        if factor is not None:
            factor.spec_frames[spec.name] = mcq
            hook = _both(factor, hook)
        rows.extend(protocol_rows(mcq, spec, resamples, seed, hook, interval, methods=fact.confidence_methods,
                                   paired=fact.paired_units))
        rows.extend(open_rows(part, protocol, resamples, seed, on_unit, interval, fact.open))
    schema = {c: pl.Utf8 for c in TABLE_COLUMNS[:6]} | {"value": pl.Float64, "ci_low": pl.Float64,
                                                         "ci_high": pl.Float64, "n": pl.Int64, "n_items": pl.Int64,
                                                         "n_clusters": pl.Int64}
    parts = key_columns()
    schema |= dict.fromkeys(parts, pl.Utf8)
    if split is not None:
        rows, schema = split.fill(rows), schema | dict.fromkeys(SPLIT_COLUMNS, pl.Float64)
    if factor is not None:
        rows = factor.fill(rows)
        schema |= dict.fromkeys(("se_total", "se_data", *([] if split is None else ["se_prediction"]),
                                 f"se_{random}"), pl.Float64)
    table = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    return table.with_columns(pl.col(*parts).fill_null(""))


def _both(first: UnitHook, second: UnitHook | None) -> UnitHook:
    """One unit hook calling two (the second may be None)."""
    if second is None:
        return first

    def hook(*args) -> None:
        first(*args)
        second(*args)
    return hook


def compute_metrics(paths: Iterable[str | Path], resamples: int = 10_000, seed: int = 0,
                    cluster: ClusterChoice = None) -> pl.DataFrame:
    """Library entry point: predictions files -> metrics table."""
    return metrics_table(read_predictions(paths), resamples=resamples, seed=seed, cluster=cluster)
