"""``omnieval report``: runs and metrics tables -> ``report.html`` (self-contained) and ``report.md``.

Inputs are run folders (``predictions.parquet``), metrics folders (``metrics.parquet``), single files, or any folder
holding several (the demo's output); see ``build.py``. Each protocol's section appears when its metrics are present,
in the order of the protocol registry: the builder its spec names (``ProtocolSpec.report_section``: ``dissonance.py``,
``crossmodal.py``, ``spectrum.py``, ``contrastive.py``), else ``generic.py`` drawing the layout its spec states
(``ProtocolSpec.report``), with an open-ended subsection (``open_ended.py``) when judges graded free answers, and the
significance section when tests are found or can be computed from predictions; with three or more models on the same
questions, a leaderboard (``leaderboard.py``: ranks with simultaneous intervals and significance groups) before
the paired differences. A run whose model has published
numbers for its benchmark (``cards.py``) gets the "Published numbers" section after the runs table.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from omnieval.core.storage import local_folder
from omnieval.report.blocks import MARKS, Report, Section, Table, text_cell
from omnieval.report.inputs import ProtocolInput, Run, load_runs, protocol_inputs, stored_results
from omnieval.report.shown import shown_table
from omnieval.report.summary import RowSummary, summarise_frame

__all__ = ["build_report", "write_report", "report_command"]


def section_builder(protocol: str) -> Callable[[ProtocolInput], Section | None]:
    """The section builder the protocol's spec names (``ProtocolSpec.report_section``), else the generic section,
    which draws the spec's ``report`` layout (or the default one for a protocol with neither)."""
    from omnieval.protocols import protocol_attribute, resolve
    from omnieval.report import generic

    reference = protocol_attribute(protocol, "report_section")
    return resolve(reference) if reference else generic.section


def _join(values) -> str:
    return ", ".join(str(v) for v in values)


def runs_section(runs: list[Run]) -> Section:
    """Where every number comes from: per run its protocols, models, splits, counts, seeds and versions; then what
    each run's models were shown (``shown.py``), where its predictions say."""
    header = ["run", "protocol", "models", "prompts", "splits", "predictions", "skipped", "metrics", "seed",
              "resamples", "resampling unit", "omnieval", "git commit", "started (UTC)"]
    rows = []
    for run in runs:
        m = run.metrics
        info = run.info
        minfo = info.get("metrics", {})
        started = info.get("started")
        started = datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M") if isinstance(started, int | float) \
            else "—"
        commit = str(info.get("git_commit") or "—")[:10]
        rows.append([
            text_cell(run.label, header=True),
            *(text_cell(_join(_values(run, column))) for column in ("protocol", "model", "prompt", "split")),
            text_cell(str(run.predictions.rows) if run.predictions is not None else "—",
                      title=_join(info.get("predictions_files", [])) or None),
            text_cell(skipped_text(run.predictions),
                      title="rows not asked: they show media their model cannot take (unsupported_media: skip); "
                            "left out of every metric"),
            text_cell(Path(minfo.get("source", "")).name or "—", title=minfo.get("source")),
            text_cell(str(minfo.get("seed", info.get("seed", "—")))),
            text_cell(str(minfo.get("resamples", "—"))),
            text_cell(units_text(m, minfo.get("cluster")),
                      title="what the bootstrap draws as one: every interval, paired difference, test and power "
                            "figure treats a unit's items together; (C): the clusters of the largest unit; "
                            f"interval: {minfo.get('interval', 'percentile')}"),
            text_cell(str((info.get("versions") or {}).get("omnieval", "—"))),
            text_cell(commit),
            text_cell(started),
        ])
    table = Table(caption="Runs in this report", header=header, rows=rows, name="runs")
    shown = shown_table(runs)  # what each model was shown: frames, size, seconds heard, tokens
    return Section("runs", "Runs", blocks=[table] if shown is None else [table, shown])


def _values(run: Run, column: str) -> list:
    """A column's values in a run's metrics, else in its predictions, in order of first appearance (a run whose
    every row was skipped has no metric, but still its protocol, models, prompts and splits)."""
    if run.metrics.height and column in run.metrics.columns:
        return run.metrics[column].unique(maintain_order=True).to_list()
    summary = run.predictions
    if summary is not None and summary.rows and summary.has(column):
        return summary.cells[column].unique(maintain_order=True).to_list()  # cells: in order of first appearance
    return []


def units_text(metrics: pl.DataFrame, recorded) -> str:
    """Each protocol's resampling unit with its cluster count (the most any row rests on): ``anchor (27)``, one
    protocol; ``dissonance: anchor (27); crossmodal: item (400)`` for several."""
    units = recorded if isinstance(recorded, dict) else {}
    counts = metrics.group_by("protocol", maintain_order=True).agg(pl.col("n_clusters").max())
    parts = [(protocol, f"{units.get(protocol, 'item')} ({n if n is not None else '—'})")
             for protocol, n in counts.iter_rows()]
    if len(parts) == 1:
        return parts[0][1]
    return "; ".join(f"{protocol}: {text}" for protocol, text in parts)


def skipped_text(predictions: RowSummary | pl.DataFrame | None) -> str:
    """Skipped rows per model with their modalities (``sim 40: video 40``), or ``0``; ``—`` without predictions.
    ``predictions``: a run's summary (``RowSummary.skipped``), or its rows (summarised first)."""
    if predictions is None:
        return "—"
    if isinstance(predictions, pl.DataFrame):
        predictions = summarise_frame(predictions)
    if not predictions.has("skipped") or predictions.skipped.is_empty():
        return "0"
    groups = predictions.skipped.group_by("model", "skipped").agg(pl.col("n").sum(), pl.col("first").min())
    out = []
    for model in groups.sort("first")["model"].unique(maintain_order=True).to_list():
        kinds: dict[str, int] = {}
        rows = 0
        for value, n in groups.filter(pl.col("model") == model).select("skipped", "n").iter_rows():
            rows += n
            for modality in value.split("+"):
                kinds[modality] = kinds.get(modality, 0) + n
        out.append(f"{model} {rows}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    return "; ".join(out)


def _range_text(bounds: tuple[float, float]) -> str:
    low, high = bounds
    if math.isfinite(low) and math.isfinite(high):
        return f"in [{low:g}, {high:g}]"
    if math.isfinite(high):
        return f"at most {high:g}"
    return f"at least {low:g}" if math.isfinite(low) else "unbounded"


def _grouped(ranges: dict[str, tuple[float, float]]) -> str:
    """``accuracy, chance in [0, 1]; intra, inter in [-1, 1]``: metrics grouped by their range, in order."""
    groups: dict[tuple[float, float], list[str]] = {}
    for metric, bounds in ranges.items():
        groups.setdefault(bounds, []).append(metric)
    return "; ".join(f"{', '.join(metrics)} {_range_text(bounds)}" for bounds, metrics in groups.items())


def metric_ranges(runs: list[Run], inputs: list[ProtocolInput] = ()) -> tuple[dict, dict]:
    """The range of every metric with a value in the runs (its protocol's ``ProtocolMetrics.bounds_of``), and of
    every paired difference in ``inputs`` (``stats.intervals.difference_bounds`` of its metric's range): what the
    header states, and what every value shown must lie in."""
    from omnieval.protocols import metric_spec
    from omnieval.stats.intervals import difference_bounds

    def bounds(protocol: str, metric: str) -> tuple[float, float]:
        spec = metric_spec(protocol)
        return spec.bounds_of(metric) if spec is not None else (-math.inf, math.inf)

    values: dict[str, tuple[float, float]] = {}
    for run in runs:
        shown = run.metrics.filter(pl.col("value").is_not_null()).select("protocol", "metric").unique(
            maintain_order=True)
        for protocol, metric in shown.iter_rows():
            values.setdefault(metric, bounds(protocol, metric))
    differences: dict[str, tuple[float, float]] = {}
    for data in inputs:
        if data.paired is not None and not data.paired.is_empty():
            for protocol, metric in data.paired.select("protocol", "metric").unique(maintain_order=True).iter_rows():
                differences.setdefault(metric, difference_bounds(bounds(protocol, metric)))
    return values, differences


def value_ranges(runs: list[Run], inputs: list[ProtocolInput] = ()) -> str:
    """The sentence on what values can be, built from each protocol's declared bounds (``metric_ranges``): every
    metric shown with its range, every paired difference with its own (a difference of two gains in [-1, 1] can
    reach 2), then the protocols' notes on the metrics whose range needs a word (``ProtocolSpec.value_ranges``; their
    definitions in docs/reference.md)."""
    from omnieval.protocols import protocol_attribute

    values, differences = metric_ranges(runs, inputs)
    notes: dict[str, str] = {}
    for run in runs:
        for protocol, metrics in run.metrics.group_by("protocol", maintain_order=True).agg(pl.col("metric").unique()) \
                .iter_rows():
            for metric, note in protocol_attribute(protocol, "value_ranges").items():
                if metric in metrics:
                    notes.setdefault(metric, note)
    text = f"Each metric's values lie in the range its protocol declares: {_grouped(values)}."
    if differences:
        text += (" Paired differences (Comparisons, Significance), whose range is twice their metric's width: "
                 f"{_grouped(differences)}.")
    if notes:
        text += " In particular, " + "; ".join(notes[metric] for metric in sorted(notes)) + "."
    return text


def build_report(inputs: list[str], *, resamples: int | None = None, permutations: int | None = None,
                 seed: int | None = None, title: str | None = None, cluster=None) -> Report:
    """Load the inputs and build every section (nothing is written). ``cluster``: the resampling unit of what is
    computed here (``stats.clusters``; default: what the metrics record, else each protocol's own); ``resamples``,
    ``permutations``, ``seed``: None reads a sweep's stored pooled result with the sweep's own settings
    (``report.inputs.stored_settings``) and computes anything else with the defaults (``report.inputs.DEFAULTS``)."""
    from omnieval.protocols import known_protocols
    from omnieval.report import cards, leaderboard, noise, open_ended, paired, significance, verdicts
    from omnieval.report.tables import FEW_CLUSTERS, FEW_MARK

    runs = load_runs(inputs, resamples=resamples, seed=seed, permutations=permutations, cluster=cluster)
    per_protocol = protocol_inputs(runs, permutations=permutations, seed=seed, resamples=resamples,
                                   cluster=cluster, stored=stored_results(inputs))
    sections = [runs_section(runs)]
    cascades: dict[str, str] = {}  # every run's cascade models: their cells in the runs and shown tables are marked
    for run in runs:
        cascades |= open_ended.cascades_of(run.predictions)
    open_ended.mark_cascades(sections[0], cascades)
    published = cards.section(runs)
    if published is not None:
        sections.append(published)
    canonical = list(known_protocols())
    per_protocol.sort(key=lambda d: canonical.index(d.protocol) if d.protocol in canonical else len(canonical))
    for data in per_protocol:
        own, opened = open_ended.split_metrics(data)
        own, read = verdicts.split_metrics(own)
        section = section_builder(data.protocol)(own) if len(own.metrics) else None
        if section is not None and (verdict_section := verdicts.section(read)) is not None:
            section.subsections.append(verdict_section)
        open_section = open_ended.section(opened)
        if open_section is not None:
            section = section or Section(data.protocol, f"Protocol {data.protocol}")
            section.subsections.append(open_section)
        if section is not None:
            open_ended.mark_cascades(section, open_ended.cascades_of(data.predictions))
            sections.append(section)
    board = leaderboard.section(per_protocol)
    if board is not None:
        for data, sub in ((d, s) for d in per_protocol for s in board.subsections
                          if s.id == f"leaderboard-{d.protocol}"):
            open_ended.mark_cascades(sub, open_ended.cascades_of(data.predictions))
        sections.append(board)
    noise_section = noise.section([(run.label, run.metrics) for run in runs])  # repeated samples' split
    if noise_section is not None:
        sections.append(noise_section)
    comparisons = paired.section(per_protocol)
    if comparisons is not None:
        for data, sub in ((d, s) for d in per_protocol for s in comparisons.subsections
                          if s.id == f"paired-{d.protocol}"):
            open_ended.mark_cascades(sub, open_ended.cascades_of(data.predictions))
        sections.append(comparisons)
    tests = significance.section(per_protocol)
    if tests is not None:
        for data, sub in ((d, s) for d in per_protocol for s in tests.subsections
                          if s.id == f"significance-{d.protocol}"):
            open_ended.mark_cascades(sub, open_ended.cascades_of(data.predictions))
        sections.append(tests)
    levels = sorted({f'{float(r.info.get("metrics", {}).get("confidence_level", 0.95)) * 100:g}%' for r in runs})
    intro = [
        f"{value_ranges(runs, per_protocol)} Beneath each value: its {_join(levels)} clustered bootstrap interval "
        "over the resampling unit of the runs table; hover a value for its exact value, interval, n and clusters. "
        "Click a column header to sort.",
        "Colour: cividis for accuracies and rates, purple-orange around 0 for signed differences.",
        MARKS,
    ]
    if any(((r.metrics["n_clusters"] > 0) & (r.metrics["n_clusters"] < FEW_CLUSTERS)).any() for r in runs):
        intro.append(f"{FEW_MARK} after an interval: it rests on fewer than {FEW_CLUSTERS} clusters (the resampling "
                     "units, not the items inside them); with so few clusters the interval is unreliable.")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return Report(title=title or "omnieval report", intro=intro, sections=sections, generated=generated)


def write_report(report: Report, out: str | Path) -> dict[str, Path]:
    """Write ``report.html``, ``report.md`` and ``figures/*.png`` into ``out``."""
    from omnieval.report import html, markdown

    folder = local_folder(out)
    (folder / markdown.FIGURES).mkdir(parents=True, exist_ok=True)
    paths = {"html": folder / "report.html", "markdown": folder / "report.md"}
    for figure in markdown.figures(report):
        (folder / markdown.FIGURES / f"{figure.name}.png").write_bytes(figure.png)
    paths["html"].write_text(html.render(report), encoding="utf-8")
    paths["markdown"].write_text(markdown.render(report), encoding="utf-8")
    return paths


def report_command(inputs: list[str], out: str, *, resamples: int | None = None, permutations: int | None = None,
                   seed: int | None = None, title: str | None = None, cluster=None) -> int:
    """``omnieval report INPUT... --out DIR``: build and write the report; print where it is."""
    start = time.perf_counter()
    local_folder(out)  # a bad --out stops here, before the computing
    report = build_report(inputs, resamples=resamples, permutations=permutations, seed=seed, title=title,
                          cluster=cluster)
    paths = write_report(report, out)
    names = ", ".join(s.title for s in report.sections)
    print(f"omnieval report: {names} in {time.perf_counter() - start:.1f} s -> {paths['html']} and "
          f"{paths['markdown']}")
    return 0
