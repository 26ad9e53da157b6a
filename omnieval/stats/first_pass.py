"""The choices ``omnieval metrics`` makes from all of a protocol's rows at once, gathered before the work is split
finer than a protocol (``stats.distributed``: one Ray task per protocol and split).

Every number of the metrics table is a function of one unit's rows (model x prompt x split) and its resampling
stream (keyed by protocol and split), but a few choices read the whole protocol: which error kinds get an
``error_rate`` key, whether answers were read from text (the verdict metrics beside accuracy), which confidence
methods are present (an ``@rs`` / ``@tp`` suffix only when both are), and for open-ended rows the judges, the levels
``k`` and the abstention option (``open_metrics.OpenFacts``). A task holding one split alone would decide them from
its split and could write other rows than the single process. So the first pass computes each group's
``ProtocolFacts`` from the same prepared frame the metrics read, the driver merges them per protocol (a union: a
kind, method or judge present in any group is present in the protocol), and the second pass hands the merged facts
to every task of the protocol (``metrics.metrics_table``'s ``facts``). The single process computes the same facts
from its whole frame with the same functions, so both paths write the same rows, bit for bit.

Split finer still, one task per prompt of a split, a unit's resampling also depends on the other prompts: units of
one split on the same clusters are drawn paired (``bootstrap.shared_item_sets``: index resampling, never the
pattern shortcut), and the unit they share them with may be another prompt's. The first pass reports every unit's
set of clusters as a digest (``unit_cluster_sets``), the driver finds the units sharing one
(``paired_units``) and hands them to the tasks in ``ProtocolFacts.paired_units``.

What is not merged but checked: the resampling unit a protocol's default falls back from (``clusters.units_used``:
its column empty in a group but not in the protocol); where groups disagree on it, the protocol is computed as one
task (``stats.distributed``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import polars as pl

from omnieval.core.schema import ERROR_KINDS
from omnieval.stats.open_metrics import OpenFacts, open_facts
from omnieval.stats.read import error_kinds_present


@dataclass(frozen=True)
class ProtocolFacts:
    """The whole-protocol choices of ``metrics.metrics_table`` (module docstring)."""

    error_kinds: tuple[str, ...]
    answers_from_text: bool
    confidence_methods: tuple[str, ...]
    open: OpenFacts | None = None
    paired_units: frozenset[tuple[str, ...]] | None = None  # set by the driver where prompts are tasks apart

    def merged(self, other: ProtocolFacts) -> ProtocolFacts:
        """The facts of both parts' rows together (``paired_units`` left unset: the driver's to fill)."""
        kinds = set(self.error_kinds) | set(other.error_kinds)
        opened = other.open if self.open is None else self.open.merged(other.open)
        return ProtocolFacts(tuple(kind for kind in ERROR_KINDS if kind in kinds),
                             self.answers_from_text or other.answers_from_text,
                             tuple(sorted(set(self.confidence_methods) | set(other.confidence_methods))), opened)


def confidence_methods(mcq: pl.DataFrame) -> tuple[str, ...]:
    """The confidence methods of a prepared frame's rows with a confidence, sorted."""
    return tuple(sorted(mcq.filter("has_conf")["conf_method"].unique().to_list()))


def protocol_facts(part: pl.DataFrame) -> ProtocolFacts:
    """The ``ProtocolFacts`` of one protocol's prepared and derived frame (both modes), or of one group of it."""
    mcq = part.filter(pl.col("mode") != "open")
    from_text = bool((mcq["_scored"] | mcq["_official_counted"]).any())
    return ProtocolFacts(tuple(error_kinds_present(mcq)), from_text, confidence_methods(mcq), open_facts(part))


def merge(facts: list[ProtocolFacts]) -> ProtocolFacts:
    """The facts of several groups of one protocol."""
    out = facts[0]
    for more in facts[1:]:
        out = out.merged(more)
    return out


def with_paired_units(facts: ProtocolFacts, paired: frozenset[tuple[str, ...]]) -> ProtocolFacts:
    """``facts`` with the units drawn paired decided for the whole protocol."""
    return replace(facts, paired_units=paired)


def unit_cluster_sets(part: pl.DataFrame) -> dict[tuple[str, str, str], str]:
    """(model, prompt, split) -> a digest of the unit's sorted resampling clusters among the multiple-choice rows
    of a prepared, clustered and derived frame: the ``cluster_ids`` ``bootstrap.unit_data`` gives the unit."""
    from omnieval.core.metric_types import CLUSTER

    mcq = part.filter(pl.col("mode") != "open")
    sets = mcq.group_by("model", "prompt", "split").agg(pl.col(CLUSTER).unique().sort())
    return {(m, p, s): hashlib.sha1("\x1f".join(ids).encode()).hexdigest()
            for m, p, s, ids in sets.iter_rows()}


def paired_units(sets: dict[tuple[str, str, str], str]) -> frozenset[tuple[str, str, str]]:
    """The units sharing their split and clusters with another unit (``bootstrap.shared_item_sets`` from the
    digests of every unit of a protocol)."""
    seen: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for key, digest in sets.items():
        seen.setdefault((key[2], digest), []).append(key)
    return frozenset(key for keys in seen.values() if len(keys) > 1 for key in keys)
