"""The answer-verdicts subsection of a protocol's section: beside each accuracy cell of answers read from generated
text, the accuracy by the benchmark's released rule, how many answers the two rules read differently, and the
shares of unparsed and forced answers, with the flags of docs/report.md (``omnieval.stats.verdicts``)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from omnieval.core.metric_types import UNPARSED_FLAG, VERDICT_METRICS
from omnieval.report.blocks import Section, Table, text_cell
from omnieval.report.inputs import ProtocolInput
from omnieval.report.summary import RowSummary
from omnieval.report.tables import IDENTITY, MetricView
from omnieval.scoring.base import NOT_COMPUTED
from omnieval.stats.verdicts import NO_SCORER, NOT_COMPUTED_TEXT, cell_flags, official_text

SHARES = (("unparsed", "unparsed_share", "answers omnieval's rule found no option in"),
          ("forced", "forced_share", "answers whose option the label logits made after a reasoning that named none"),
          ("official forced", "official_forced_share",
           "answers the official rule gave an option the text does not name (a default for an empty or unparseable "
           "answer)"))
NOTE = (f"Answers read from generated text, per accuracy cell. accuracy: omnieval's own reading (the row's choice); "
        f"official: the benchmark's released rule, over the answers it counts (the number comparable with published "
        f"ones; '{NO_SCORER}' where the run names none, '{NOT_COMPUTED_TEXT}' where its rule needs what omnieval "
        f"does not run offline, the flag saying what); disagree: answers the two rules read as different options. "
        f"Flagged: more than {UNPARSED_FLAG:.0%} unparsed, or an official rule that credits answers naming no "
        f"option.")


def split_metrics(data: ProtocolInput) -> tuple[ProtocolInput, ProtocolInput]:
    """(the protocol's metrics, the verdict metrics): each goes to its own builder."""
    is_verdict = pl.col("metric").is_in(list(VERDICT_METRICS))
    return replace(data, metrics=data.metrics.filter(~is_verdict)), replace(
        data, metrics=data.metrics.filter(is_verdict | (pl.col("metric") == "accuracy")))


def section(data: ProtocolInput) -> Section | None:
    """The subsection, or None where no answer was read from generated text."""
    view = MetricView(data.metrics)
    cells: dict[tuple, dict] = {}  # every cell with a verdict metric, with or without an accuracy (none parsed)
    for rec in view.records:
        if rec["metric"] in VERDICT_METRICS:
            cells.setdefault((*(rec[c] for c in IDENTITY), rec["leaf"]), rec)
    cells = list(cells.values())
    if not cells:
        return None
    shown = [c for c in ("run", "prompt", "split") if len({rec[c] for rec in cells}) > 1]
    header = [*shown, "model", "cell", "accuracy", "official", "disagree", *(s[0] for s in SHARES), "flag"]
    titles = [None] * (len(shown) + 2) + [
        "omnieval's own rule (the row's choice), over the answers it read an option in",
        "the benchmark's released rule, over the answers it counts", "answers the two rules read differently",
        *(s[2] for s in SHARES), "what needs a look before the number is quoted"]
    unavailable = not_computed(data.predictions)
    rows = [_row(view, rec, shown, unavailable.get(tuple(rec[c] for c in CELL))) for rec in cells]
    table = Table(caption="Answer verdicts: official and robust accuracy, disagreements, unparsed and forced answers",
                  header=header, rows=rows, note=NOTE, collapsed=len(rows) > 40, name="verdicts",
                  header_titles=titles)
    return Section(f"verdicts-{data.protocol}", "Answer verdicts", blocks=[table])


CELL = ("run", "prompt", "split")
"""What an official rule is fixed by: a run names one scorer for every model, the majority-vote ensemble included."""


def not_computed(predictions: RowSummary | None) -> dict[tuple, str]:
    """(run, prompt, split) -> why the run's official rule was not computed on those answers, where the rows say so
    (``official_how`` beginning ``scoring.base.NOT_COMPUTED``; ``RowSummary.not_computed``, with ``run``)."""
    if predictions is None or not predictions.has("official_how", *CELL):
        return {}
    rows = predictions.not_computed.sort("first").unique(subset=list(CELL), keep="first", maintain_order=True)
    return {tuple(r[:3]): r[3].removeprefix(NOT_COMPUTED) for r in rows.select(*CELL, "reason").iter_rows()}


def _row(view: MetricView, rec: dict, shown: list[str], unavailable: str | None = None) -> list:
    """One accuracy cell's row (``rec``: any of its verdict metrics): identity, both accuracies with intervals
    (``—`` for an accuracy with no answer to average), the count and shares, the flags; ``unavailable``: why the
    run's official rule was not computed."""
    ident = {c: rec[c] for c in IDENTITY}
    accuracy = view.get(ident, "accuracy", rec["leaf"])
    official = view.get(ident, "official_accuracy", rec["leaf"])
    disagree = view.get(ident, "disagree", rec["leaf"])
    if disagree is not None:
        view.used.add(disagree["_rid"])
    shares = {metric: view.get(ident, metric, rec["leaf"]) for _, metric, _ in SHARES}
    values = {metric: (r["value"] if r is not None else None) for metric, r in shares.items()}
    read = official is not None or disagree is not None  # the official rule read the cell's answers
    flags = cell_flags(values["unparsed_share"], values["official_forced_share"], read, unavailable)
    return [*(text_cell(str(rec[c]), header=True) for c in shown), text_cell(str(rec["model"]), header=True),
            text_cell(rec["leaf"] or "all"), view.cell(accuracy),
            view.cell(official) if official is not None else text_cell(official_text(None, read, str, unavailable)),
            text_cell(str(round(disagree["value"])) if disagree is not None else "—",
                      sort=disagree["value"] if disagree is not None else None),
            *(view.cell(shares[metric], scale=None) for _, metric, _ in SHARES),
            text_cell("; ".join(flags))]
