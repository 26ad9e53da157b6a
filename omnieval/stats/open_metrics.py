"""Metrics of open-ended runs (``mode == 'open'``) graded by one or more judges, in the long table of
docs/reference.md, Metrics.

Per unit (model x prompt x split), with clustered bootstrap CIs from the same single resampling pass as every other
metric (``unit_bootstrap.protocol_rows``: all of these are functions of cell means):

| metric | key | formula |
| --- | --- | --- |
| ``open_accuracy`` | ``<condition>``, ``all``, ``k=<k>`` | mean over judges of each judge's accuracy |
| ``open_accuracy`` | the same keys + ``@<judge>`` | one judge: share of its valid verdicts that are right |
| ``open_abstention`` | as ``open_accuracy`` | share of valid verdicts ``abstained`` (protocols with abstention) |
| ``judge_agreement`` | ``all``, ``<condition>``, ``k=<k>`` | share of fully graded predictions with one verdict |
| ``judge_kappa`` | ``cohen`` (2 judges) or ``fleiss`` (3+) | chance-corrected agreement over all predictions |
| ``mcq_open_gap`` | ``<condition>``, ``all``, ``k=<k>`` | multiple-choice accuracy minus judge-averaged open accuracy |
| ``open_invalid_verdicts`` | ``<judge>`` | share of that judge's verdicts that stayed unparseable after the retry |
| ``open_error_rate`` | ``""``, kind | share of open rows with an ``error`` (kinds: ``schema.ERROR_KINDS``) |
| ``open_rating`` | as ``open_accuracy`` (with ``@<judge>``) | mean of the valid 1-5 ratings (rated open items) |
| ``open_official_accuracy`` | as ``open_accuracy`` | share of the open answers the benchmark's released rule counts |
|  |  | that it counts correct (``official_correct``: open items scored offline, ``scoring.verdicts.open_verdicts``); |
|  |  | where all of them carry IFEval's counts: the mean of the four ``ifeval_*`` shares (the release's score) |
| ``ifeval_prompt_strict`` | as ``open_accuracy`` | VoiceBench ``ifeval`` (``scoring.ifeval``): share of answers |
|  |  | following every instruction of their prompt, strict (from the ``official_how`` counts) |
| ``ifeval_prompt_loose`` | as ``open_accuracy`` | the same, loose |
| ``ifeval_instruction_strict`` | as ``open_accuracy`` | instructions followed strictly, summed over the answers, over |
|  |  | the instructions summed |
| ``ifeval_instruction_loose`` | as ``open_accuracy`` | the same, loose |

An open row with an ``error`` (media, engine or describer failure, no answer text) was never answered: judges do not
grade it and it stays out of every open metric but ``open_error_rate``. An open row with no ground truth in words
(``reference`` null: an open item whose release gives none) and no verdict is not graded by the judges either: only
its benchmark's own rule scores it (``open_official_accuracy``). Such a row with a verdict that is no verdict word is
a rated one (``core.judges``, Ratings: the verdict is the rating's text, ``"4"``): it counts in ``open_rating``, a
rating off the scale or unreadable in ``open_invalid_verdicts``, and in no accuracy, agreement or kappa.

A verdict is right when it is ``correct``, or ``abstained`` where the ground truth is the abstention option. Keys
``k=<k>`` (dissonance) pool the instances of a corruption level. ``mcq_open_gap`` needs multiple-choice predictions
of the same unit (``mode`` null or ``mcq``) next to the open ones.

Cohen's kappa from cell means: ``(p_o - p_e) / (1 - p_e)``, ``p_o`` the agreement share and ``p_e = sum_c p1_c p2_c``
(``p_j_c`` the share of judge j's verdicts that are c). Fleiss' kappa with m judges: ``(P - P_e) / (1 - P_e)``,
``P`` the mean over predictions of ``(sum_c n_c^2 - m) / (m (m - 1))`` and ``P_e = sum_c p_c^2``, ``p_c`` the mean
of ``n_c / m`` (``n_c``: judges that said c). Both over the predictions every judge graded validly.

Verdicts come from the predictions' ``verdicts`` column (a list of ``{judge, verdict, ...}``) or, for files written
by other tools, from columns named ``verdict@<judge>``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from omnieval.core.metric_types import (
    OPEN_KEY_PARTS,
    CellFamily,
    MetricRow,
    ProtocolMetrics,
    support_of,
    with_error_rates,
)
from omnieval.core.schema import ERROR_KINDS, VERDICTS
from omnieval.scoring.ifeval import HOW
from omnieval.stats.bootstrap import protocol_rows
from omnieval.stats.intervals import DEFAULT_METHOD
from omnieval.stats.read import error_kinds_present

JUDGE_COLUMN = "verdict@"
OPEN_METRICS = frozenset({"open_accuracy", "open_abstention", "judge_agreement", "judge_kappa", "mcq_open_gap",
                          "open_invalid_verdicts", "open_error_rate"})
"""The metrics of this module (the table above): the rows ``open_rows`` adds after a protocol's others."""


def judges_of(frame: pl.DataFrame) -> list[str]:
    """The judges named in the open rows, sorted."""
    names: set[str] = {c[len(JUDGE_COLUMN):] for c in frame.columns if c.startswith(JUDGE_COLUMN)}
    if "verdicts" in frame.columns and isinstance(frame.schema["verdicts"], pl.List):
        exploded = frame.select(pl.col("verdicts").explode().struct.field("judge")).to_series().drop_nulls()
        names |= set(exploded.to_list())
    return sorted(names)


def with_verdict_columns(frame: pl.DataFrame, judges: list[str]) -> pl.DataFrame:
    """One ``verdict@<judge>`` column per judge (from the ``verdicts`` list where the column is not given)."""
    for judge in judges:
        column = f"{JUDGE_COLUMN}{judge}"
        if column in frame.columns:
            frame = frame.with_columns(pl.col(column).cast(pl.Utf8).str.to_lowercase())
            continue
        frame = frame.with_columns(
            pl.col("verdicts").list.eval(
                pl.element().filter(pl.element().struct.field("judge") == judge).struct.field("verdict"))
            .list.first().cast(pl.Utf8).alias(column))
    return frame


def open_frame(frame: pl.DataFrame, judges: list[str]) -> pl.DataFrame:
    """Flags the open-ended cells read (see the module table); ``frame`` is ``predictions.prepare``'d."""
    frame = with_verdict_columns(frame, judges)
    is_open = pl.col("mode") == "open"
    m = len(judges)
    cols = [f"{JUDGE_COLUMN}{j}" for j in judges]
    graded = is_open & pl.col("answered")
    rated = pl.lit(False)
    if "reference" in frame.columns:  # no ground truth: rated, or not graded at all (module doc)
        no_reference = pl.col("reference").is_null()
        judged = (pl.col("verdicts").list.len() > 0).fill_null(False) if "verdicts" in frame.columns \
            else pl.any_horizontal([pl.lit(False), *(pl.col(c).is_not_null() for c in cols)])
        words = pl.any_horizontal([pl.lit(False), *(pl.col(c).is_in(list(VERDICTS)).fill_null(False) for c in cols)])
        rated = graded & no_reference & judged & ~words
        graded = graded & ~(no_reference & ~words)
    flags = {"is_open": is_open, "graded": graded, "rated": rated, "graded_or_rated": graded | rated,
             "mcq_valid": (pl.col("mode") != "open") & pl.col("valid"),
             "open_official": is_open & (pl.col("_official_counted") if "_official_counted" in frame.columns
                                         else pl.lit(False))}
    flags |= _ifeval_flags(frame, flags["open_official"])
    for i, c in enumerate(cols):
        ok = graded & pl.col(c).is_in(list(VERDICTS)).fill_null(False)
        flags[f"ok{i}"] = ok
        flags[f"right{i}"] = ok & ((pl.col(c) == "correct")
                                   | ((pl.col(c) == "abstained") & pl.col("human_abstain"))).fill_null(False)
        flags[f"abst{i}"] = ok & (pl.col(c) == "abstained").fill_null(False)
        rating = pl.col(c).cast(pl.Float64, strict=False)
        flags[f"rok{i}"] = (rated & rating.is_not_null()).fill_null(False)
        flags[f"rating{i}"] = pl.when(flags[f"rok{i}"]).then(rating).otherwise(0.0)
        flags[f"bad{i}"] = (graded & ~ok) | (rated & ~flags[f"rok{i}"])
    frame = frame.with_columns(**flags)
    if not m:  # no judge: only the released rule's verdicts
        return frame
    all_ok = pl.all_horizontal([pl.col(f"ok{i}") for i in range(m)])
    frame = frame.with_columns(all_ok=all_ok,
                               agree=all_ok & pl.all_horizontal([pl.col(c) == pl.col(cols[0]) for c in cols]))
    extra = {}
    for v in VERDICTS:
        counts = pl.sum_horizontal([(pl.col(c) == v).fill_null(False).cast(pl.Float64) for c in cols])
        extra[f"share_{v}"] = counts / m
        extra[f"sq_{v}"] = counts * counts
        for i, c in enumerate(cols):
            extra[f"is{i}_{v}"] = (pl.col(c) == v).fill_null(False).cast(pl.Float64)
    frame = frame.with_columns(**extra)
    if m > 1:
        sum_sq = pl.sum_horizontal([pl.col(f"sq_{v}") for v in VERDICTS])
        frame = frame.with_columns(fleiss_p=(sum_sq - m) / (m * (m - 1)))
    return frame


def open_spec(protocol: str, judges: list[str], has_k: bool, has_abstention: bool):
    """The cells and metric function of the open-ended metrics for these judges (a ``ProtocolMetrics``)."""
    m = len(judges)
    groups: list[tuple[str, tuple[str, ...]]] = [("c", ("condition",)), ("a", ())]
    if has_k:
        groups.append(("k", ("k",)))
    fams = []
    for tag, by in groups:
        for i in range(m):
            fams.append(CellFamily(f"acc{i}{tag}", f"right{i}", f"ok{i}", by))
            fams.append(CellFamily(f"abs{i}{tag}", f"abst{i}", f"ok{i}", by))
            fams.append(CellFamily(f"rate{i}{tag}", f"rating{i}", f"rok{i}", by))
        if m:
            fams.append(CellFamily(f"agree{tag}", "agree", "all_ok", by))
        fams.append(CellFamily(f"mcq{tag}", "correct", "mcq_valid", by))
        fams.append(CellFamily(f"off{tag}", "_official_correct", "open_official", by))
        fams += [CellFamily(f"{name}{tag}", f"_{name}", "_ife", by) for name in IFEVAL_CELLS]
    for i in range(m):
        fams.append(CellFamily(f"bad{i}", f"bad{i}", "graded_or_rated"))
    if m == 2:
        fams += [CellFamily(f"is{i}_{v}", f"is{i}_{v}", "all_ok") for i in range(2) for v in VERDICTS]
    elif m > 2:
        fams.append(CellFamily("fleiss_p", "fleiss_p", "all_ok"))
        fams += [CellFamily(f"share_{v}", f"share_{v}", "all_ok") for v in VERDICTS]

    def metrics(cells) -> Iterable[MetricRow]:
        for tag, by in groups:
            keys = sorted({k for f in [*(f"{kind}{i}{tag}" for kind in ("acc", "rate") for i in range(m)), f"off{tag}"]
                           for k in cells.keys(f)}) if by else [()]
            for key in keys:
                name, parts = {"c": lambda k: (k[0], {"leaf": k[0]}), "a": lambda k: ("all", {}),
                               "k": lambda k: (f"k={k[0]}", {"k": k[0]})}[tag](key)
                if cells.has(f"off{tag}", *key):
                    official = cells.mean(f"off{tag}", *key)
                    if cells.has(f"ife_n{tag}", *key):
                        figures = _ifeval_figures(cells, tag, key)
                        support = cells.support(f"ife_n{tag}", *key)
                        yield from (MetricRow(metric, value, support, name, parts) for metric, value in figures.items())
                        if support.n == cells.n(f"off{tag}", *key):  # every official answer is an ifeval one
                            official = sum(figures.values()) / len(figures)
                    yield MetricRow("open_official_accuracy", official, cells.support(f"off{tag}", *key), name, parts)
                yield from _per_judge(cells, "open_accuracy", f"acc{{i}}{tag}", key, name, parts, judges)
                yield from _per_judge(cells, "open_rating", f"rate{{i}}{tag}", key, name, parts, judges)
                if has_abstention:
                    yield from _per_judge(cells, "open_abstention", f"abs{{i}}{tag}", key, name, parts, judges)
                if m > 1 and cells.has(f"agree{tag}", *key):
                    yield MetricRow("judge_agreement", cells.mean(f"agree{tag}", *key),
                                    cells.support(f"agree{tag}", *key), name, parts)
                judged = [i for i in range(m) if cells.has(f"acc{i}{tag}", *key)]
                if judged and cells.has(f"mcq{tag}", *key):
                    with np.errstate(invalid="ignore"):
                        gap = cells.mean(f"mcq{tag}", *key) - _nanmean_rows([cells.mean(f"acc{i}{tag}", *key)
                                                                             for i in judged])
                    mcq = cells.support(f"mcq{tag}", *key)
                    yield MetricRow("mcq_open_gap", gap, support_of(
                        mcq, *(cells.support(f"acc{i}{tag}", *key) for i in judged), n=mcq.n), name, parts)
        for i, judge in enumerate(judges):
            if cells.has(f"bad{i}"):
                yield MetricRow("open_invalid_verdicts", cells.mean(f"bad{i}"), cells.support(f"bad{i}"), judge,
                                {"judge": judge})
        if m == 2 and cells.has("agreea"):  # the verdict shares it reads are over the same rows (``all_ok``)
            yield MetricRow("judge_kappa", _cohen(cells), cells.support("agreea"), "cohen", {"leaf": "cohen"})
        elif m > 2 and cells.has("fleiss_p"):
            yield MetricRow("judge_kappa", _fleiss(cells), cells.support("fleiss_p"), "fleiss", {"leaf": "fleiss"})

    return ProtocolMetrics(name=protocol, families=tuple(fams), metrics=metrics, key_parts=OPEN_KEY_PARTS)


IFEVAL_CELLS = ("ife_n", "ife_strict", "ife_loose", "ife_prompt_strict", "ife_prompt_loose")
"""The cells of an IFEval answer (``_ifeval_flags``): its instructions, those followed strict and loose, and
whether all were (prompt level)."""


def _ifeval_flags(frame: pl.DataFrame, official: pl.Expr) -> dict[str, pl.Expr]:
    """``_ife``: an open row the released rule scored whose ``official_how`` ends with IFEval's counts
    (``scoring.ifeval.HOW``); with its counts in ``_ife_n``, ``_ife_strict``, ``_ife_loose`` and the prompt-level
    verdicts ``_ife_prompt_strict``, ``_ife_prompt_loose`` (0 on other rows)."""
    how = pl.col("official_how").cast(pl.Utf8) if "official_how" in frame.columns else pl.lit(None, pl.Utf8)
    strict, n, loose = (how.str.extract(HOW.pattern, g).cast(pl.Float64) for g in (1, 2, 3))
    row = (official & n.is_not_null()).fill_null(False)

    def on_row(value: pl.Expr) -> pl.Expr:
        return pl.when(row).then(value.cast(pl.Float64)).otherwise(0.0)

    return {"_ife": row, "_ife_n": on_row(n), "_ife_strict": on_row(strict), "_ife_loose": on_row(loose),
            "_ife_prompt_strict": on_row(strict == n), "_ife_prompt_loose": on_row(loose == n)}


def _ifeval_figures(cells, tag: str, key: tuple) -> dict[str, np.ndarray]:
    """IFEval's four shares over a cell's answers (module table): the prompt-level ones means over answers, the
    instruction-level ones sums over instructions."""
    def ratio(family: str) -> np.ndarray:
        total = cells.sum(f"ife_n{tag}", *key)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, cells.sum(f"{family}{tag}", *key) / np.where(total > 0, total, 1), np.nan)

    return {"ifeval_prompt_strict": cells.mean(f"ife_prompt_strict{tag}", *key),
            "ifeval_instruction_strict": ratio("ife_strict"),
            "ifeval_prompt_loose": cells.mean(f"ife_prompt_loose{tag}", *key),
            "ifeval_instruction_loose": ratio("ife_loose")}


def _nanmean_rows(arrays: list[np.ndarray]) -> np.ndarray:
    stack = np.vstack(arrays)
    valid = ~np.isnan(stack)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(valid.any(axis=0), np.nansum(stack, axis=0) / np.maximum(valid.sum(axis=0), 1), np.nan)


def _per_judge(cells, metric: str, family: str, key: tuple, name: str, parts: dict[str, str], judges: list[str]):
    """One row per judge (``<name>@<judge>``, its ``judge`` part set) and the judge average (``<name>``: ``n`` the
    most verdicts of one judge, on the items any judge graded)."""
    values, supports = [], []
    for i, judge in enumerate(judges):
        fam = family.format(i=i)
        if not cells.has(fam, *key):
            continue
        values.append(cells.mean(fam, *key))
        supports.append(cells.support(fam, *key))
        if len(judges) > 1:
            yield MetricRow(metric, values[-1], supports[-1], f"{name}@{judge}", parts | {"judge": judge})
    if values:
        yield MetricRow(metric, _nanmean_rows(values), support_of(*supports, n=max(s.n for s in supports)), name,
                        parts)


def _cohen(cells) -> np.ndarray:
    p_o = cells.mean("agreea")
    p_e = sum(cells.mean(f"is0_{v}") * cells.mean(f"is1_{v}") for v in VERDICTS)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p_e < 1, (p_o - p_e) / (1 - p_e), np.nan)


def _fleiss(cells) -> np.ndarray:
    p_bar = cells.mean("fleiss_p")
    p_e = sum(cells.mean(f"share_{v}") ** 2 for v in VERDICTS)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p_e < 1, (p_bar - p_e) / (1 - p_e), np.nan)


@dataclass(frozen=True)
class OpenFacts:
    """What ``open_rows`` reads from all of a protocol's open rows at once, not unit by unit: the judges, whether
    instances have a level ``k``, whether options include abstention, the error kinds present, and whether a
    benchmark's released rule scored any open answer (``official``). A task holding part of a protocol
    (``stats.distributed``) is handed the whole protocol's, gathered by ``stats.first_pass``."""

    judges: tuple[str, ...]
    has_k: bool
    has_abstention: bool
    error_kinds: tuple[str, ...]
    official: bool = False

    def merged(self, other: OpenFacts | None) -> OpenFacts:
        """The facts of both parts' rows together (their union)."""
        if other is None:
            return self
        kinds = set(self.error_kinds) | set(other.error_kinds)
        return OpenFacts(tuple(sorted(set(self.judges) | set(other.judges))), self.has_k or other.has_k,
                         self.has_abstention or other.has_abstention,
                         tuple(kind for kind in ERROR_KINDS if kind in kinds), self.official or other.official)


def open_facts(frame: pl.DataFrame) -> OpenFacts | None:
    """The ``OpenFacts`` of one protocol's prepared frame (both modes); None without open rows."""
    if "mode" not in frame.columns:
        return None
    opened = frame.filter(pl.col("mode") == "open")
    if opened.is_empty():
        return None
    part = frame.join(opened.select("model", "prompt", "split").unique(), on=["model", "prompt", "split"],
                      how="semi")
    has_k = "k" in part.columns and part["k"].null_count() < len(part)
    official = "_official_counted" in opened.columns and bool(opened["_official_counted"].any())
    return OpenFacts(tuple(judges_of(opened)), has_k, opened["abstain_label"].null_count() < len(opened),
                     tuple(error_kinds_present(opened)), official)


def open_rows(frame: pl.DataFrame, protocol: str, resamples: int, seed: int, on_unit=None,
              interval: str = DEFAULT_METHOD, facts: OpenFacts | None = None) -> list[dict]:
    """The open-ended metric rows of one protocol's prepared frame (both modes; nothing if no open rows).
    ``facts``: the whole protocol's (``OpenFacts``) where ``frame`` holds part of it; default: ``frame``'s."""
    if "mode" not in frame.columns or frame.filter(pl.col("mode") == "open").is_empty():
        return []
    facts = facts or open_facts(frame)
    if facts is None or (not facts.judges and not facts.official):
        return []
    # Units that have open rows only (an mcq-only unit gets no open metrics).
    units = frame.filter(pl.col("mode") == "open").select("model", "prompt", "split").unique()
    part = frame.join(units, on=["model", "prompt", "split"], how="semi")
    judges = list(facts.judges)
    prepared = open_frame(part, judges)
    spec = open_spec(protocol, judges, facts.has_k, has_abstention=facts.has_abstention)
    spec = with_error_rates(spec, facts.error_kinds, metric="open_error_rate", where="is_open")
    return protocol_rows(prepared, spec, resamples, seed, on_unit, interval)
