"""Find and load what a report is built from: runs (``predictions.parquet`` + ``run.json``), metrics folders
(``metrics.parquet`` + ``metrics.json``), test tables (``tests.parquet``), or a folder holding several (the demo's).

A metrics folder is paired with the predictions it was computed from through the ``inputs`` that ``metrics.json``
records. Everything computed here goes through ``omnieval.stats.compute.compute``: the metrics of a run with no
metrics folder, the significance tests (unless a ``tests.parquet`` lies beside the metrics) and the minimum detectable
effects. Several runs of one protocol are shown side by side: their metric rows carry a ``run`` label, and the
paired differences, ranks, tests and power come from one ``compute`` over their pooled predictions
(``stats.compute.pool``: models named ``<run>:<model>``, so every pair of (run, model) is compared on the instances
both answered), or are read from a pooled result a sweep stored (``<sweep>/combined/<benchmark>/``) when it was made
from the same files with the same settings (``stats.compute.fingerprint``).

The report never holds a run's prediction rows: of each run it keeps a ``report.summary.RowSummary`` (counts,
skipped rows, what was shown, cascades, why an official rule was not computed, the reliability diagram's bins),
aggregated from a streaming scan of the columns its sections show, and of each protocol the summaries of its runs
(``RowSummary.pooled``); ``Run.predictions`` and ``ProtocolInput.predictions`` are those summaries. The statistics
read the files themselves (``stats.compute``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from omnieval.core.metric_types import KEY_PARTS
from omnieval.core.schema import SHOWN_COLUMNS, InputError
from omnieval.core.storage import StoredPath, readable, stored_path
from omnieval.report.summary import RowSummary, summarise, summarise_frame
from omnieval.stats.compute import RECORD, Inputs, Settings, compute, fingerprint, read_result
from omnieval.stats.compute import labels as labels

SKIP_DIRS = {"parts", "media", "benchmark", "models", "figures", "__pycache__"}
ROLE_DIRS = {"run", "metrics", "stats", "predictions"}
MAX_DEPTH = 6  # a sweep's run folders sit at <sweep>/runs/<entry>/<model>/<prompt>/metrics
METRIC_COLUMNS = ("protocol", "model", "prompt", "split", "metric", "key", "value", "ci_low", "ci_high", "n")
REPORT_COLUMNS = ("protocol", "model", "prompt", "split", "mode", "instance_id", "sample", "skipped", "cascade",
                  "stage_engines", *SHOWN_COLUMNS, "choice", "target", "confidence", "confidence_method",
                  "option_logprobs", "official_how")
"""The prediction columns the report's sections read (the runs and shown tables, cascades, the reliability
diagram, why an official rule was not computed: ``report.verdicts.not_computed``), as ``report_rows`` reads them
whole: what ``omnieval bench report --scale`` measures the summaries against."""


@dataclass
class RunSource:
    """One run's files: metrics (or none: computed), the predictions behind them, a tests table if found."""

    root: Path | StoredPath
    metrics: Path | StoredPath | None = None
    predictions: list[Path | StoredPath] = field(default_factory=list)
    tests: Path | StoredPath | None = None
    paired: Path | StoredPath | None = None


@dataclass
class Run:
    """One run as the report shows it: ``predictions`` is the summary of its prediction rows (``RowSummary``; None
    without predictions); rows given instead (a frame in memory) are summarised."""

    label: str
    source: RunSource
    metrics: pl.DataFrame
    predictions: RowSummary | None
    tests: pl.DataFrame | None
    info: dict  # run.json (if any), plus "metrics" (seed, resamples, confidence level, how obtained)
    paired: pl.DataFrame | None = None

    def __post_init__(self):
        if isinstance(self.predictions, pl.DataFrame):
            self.predictions = summarise_frame(self.predictions)


@dataclass
class ProtocolInput:
    """Everything one protocol's section needs: metric rows of every run (with ``run`` and ``_rid``), the summary
    of its runs' prediction rows (``RowSummary.pooled``, with ``run``; None if no run has any; rows given instead
    are summarised) and the tests table (with ``run`` when one run); the paired differences (``stats.paired``) and
    the minimum detectable effects (``stats.power``) where predictions or a paired table exist."""

    protocol: str
    metrics: pl.DataFrame
    predictions: RowSummary | None
    tests: pl.DataFrame | None
    runs: list[str]
    paired: pl.DataFrame | None = None
    power: pl.DataFrame | None = None
    benchmarks: dict[str, str] = field(default_factory=dict)  # run label -> its benchmark's name (``benchmark_name``)
    ranks: pl.DataFrame | None = None  # ``stats.ranks``: three or more models on the same questions

    def __post_init__(self):
        if isinstance(self.predictions, pl.DataFrame):
            self.predictions = summarise_frame(self.predictions, run=self.runs[0] if self.runs else None)

    def where(self, split: str) -> str:
        """A split named with its benchmark: ``mmau, split test-mini``; the split alone when no run of it names
        its benchmark. Several benchmarks of one split are all named."""
        names = self.benchmarks_of(split)
        return f"{', '.join(names)}, split {split}" if names else f"split {split}"

    def benchmarks_of(self, split: str) -> list[str]:
        """The benchmarks of the runs whose metrics hold ``split``, in order of first appearance."""
        runs = self.metrics.filter(pl.col("split") == split)["run"].unique(maintain_order=True).to_list()
        return list(dict.fromkeys(self.benchmarks[r] for r in runs if self.benchmarks.get(r)))


def _walk(folder: Path | StoredPath, depth: int = 0):
    if (folder / RECORD).is_file():  # a pooled result (``stored_results``), not a run
        return
    yield folder
    if depth >= MAX_DEPTH:
        return
    for child in sorted(folder.iterdir()):
        if child.is_dir() and child.name not in SKIP_DIRS and not child.name.startswith("."):
            yield from _walk(child, depth + 1)


def _root(folder: Path | StoredPath) -> Path | StoredPath:
    return folder.parent if folder.name in ROLE_DIRS else folder


def _recorded_inputs(metrics: Path | StoredPath) -> list[Path | StoredPath]:
    """The predictions files ``metrics.json`` says the metrics came from (those that still exist; a URI is read
    where it points, a relative path beside the metrics)."""
    doc = metrics.parent / "metrics.json"
    if not doc.is_file():
        return []
    try:
        inputs = json.loads(doc.read_text()).get("inputs") or []
    except (json.JSONDecodeError, OSError):
        return []
    found = []
    for p in inputs:
        if "://" in p or Path(p).is_absolute():
            candidates = [stored_path(p)]
        else:  # written by hand beside the metrics, or by an older omnieval relative to its working folder
            candidates = [metrics.parent / p, Path(p)]
        found += [c.resolve() for c in candidates if c.is_file()][:1]
    return found


def discover(inputs: list[str | Path]) -> list[RunSource]:
    """Run sources from the command line's paths (files or folders, local or URIs such as ``s3://bucket/run``), in
    the order given, without duplicates."""
    metrics_files: list[Path | StoredPath] = []
    prediction_files: list[Path | StoredPath] = []
    tests_files: list[Path | StoredPath] = []
    for raw in inputs:
        path = stored_path(raw)
        if not path.exists():
            raise InputError("no such run, metrics folder or file", file=path)
        if path.is_file():
            name = path.name
            target = metrics_files if name.startswith("metrics") else tests_files if name.startswith("tests") \
                else prediction_files
            target.append(path.resolve())
            continue
        for folder in _walk(path):
            # a sweep's combined metrics.parquet repeats its runs' own metrics (found in the run folders)
            if (folder / "metrics.parquet").is_file() and not (folder / "summary.json").is_file():
                metrics_files.append((folder / "metrics.parquet").resolve())
            if (folder / "predictions.parquet").is_file():
                prediction_files.append((folder / "predictions.parquet").resolve())
            if (folder / "tests.parquet").is_file():
                tests_files.append((folder / "tests.parquet").resolve())
    metrics_files = list(dict.fromkeys(metrics_files))
    prediction_files = list(dict.fromkeys(prediction_files))
    sources: list[RunSource] = []
    used: set[Path | StoredPath] = set()
    for m in metrics_files:
        preds = _recorded_inputs(m)
        used.update(preds)
        tests = next((t for t in tests_files if t.parent == m.parent), None)
        paired = m.parent / "paired.parquet"
        sources.append(RunSource(root=_root(m.parent), metrics=m, predictions=preds, tests=tests,
                                 paired=paired if paired.is_file() else None))
    for p in prediction_files:
        if p not in used:
            sources.append(RunSource(root=_root(p.parent), predictions=[p]))
    for t in tests_files:  # an ``omnieval stats --out`` folder beside a run: its tests go with that run
        if any(s.tests == t for s in sources):
            continue
        match = [s for s in sources if s.tests is None and s.root == _root(t.parent)]
        if len(match) == 1:
            match[0].tests = t
        else:
            print(f"omnieval report: {t} matches no single run; left out", file=sys.stderr)
    if not sources:
        raise InputError("no predictions.parquet or metrics.parquet found in "
                         + ", ".join(str(p) for p in inputs))
    return sources


def _read_metrics(path: Path | StoredPath) -> tuple[pl.DataFrame, dict]:
    try:
        if path.suffix == ".parquet":
            frame = pl.read_parquet(readable(path))
        elif path.suffix == ".csv":
            from omnieval.stats.key_parts import key_columns

            text = dict.fromkeys(("key", "split", "prompt", *key_columns()), pl.Utf8)  # a level "0" stays text
            frame = pl.read_csv(readable(path), schema_overrides=text)
        else:
            frame = pl.DataFrame(json.loads(path.read_text())["metrics"])
    except (pl.exceptions.PolarsError, OSError, ValueError, KeyError) as exc:
        raise InputError(f"cannot read metrics table: {exc}", file=path) from exc
    missing = [c for c in METRIC_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"not a metrics table: missing column(s) {', '.join(missing)}", file=path)
    info: dict = {"source": str(path)}
    doc = path.parent / "metrics.json"
    if doc.is_file():
        try:
            meta = json.loads(doc.read_text())
            info.update({k: meta[k] for k in ("seed", "resamples", "confidence_level", "cluster", "interval")
                         if k in meta})
        except (json.JSONDecodeError, OSError):
            pass
    return normalise_metrics(frame, path), info


def _read_tests(path: Path | StoredPath) -> pl.DataFrame:
    """A ``tests.parquet``; one written before tests between two models named them in ``model_a`` / ``model_b`` is
    refused, naming it (its pairs would have to be parsed out of ``a vs b``)."""
    frame = pl.read_parquet(readable(path))
    if "model_a" not in frame.columns or "model_b" not in frame.columns:
        raise InputError("written before the tests table named the two models of a pair in model_a / model_b: run "
                         "`omnieval stats` on its predictions again", file=path)
    return frame


def normalise_metrics(frame: pl.DataFrame, path: Path | StoredPath | None = None) -> pl.DataFrame:
    """The columns of docs/reference.md, Metrics, with their types (key '' where null), the key's parts ('' where
    null), ``n_items``, ``n_clusters`` and the variance split of repeated samples (null where the table has none).

    A table written before the key's parts were columns of their own, or before the resampling unit was recorded
    (no ``n_clusters``), is refused, naming ``path``: its keys would have to be parsed back into parts, which is what
    the columns are there to avoid; the table is rebuilt from its predictions by running ``omnieval metrics`` again
    (the values come out the same)."""
    from omnieval.stats.key_parts import key_columns
    from omnieval.stats.samples import SPLIT_COLUMNS

    parts = key_columns()
    if any(p not in frame.columns for p in (*KEY_PARTS, "n_items", "n_clusters")):
        raise InputError("written before the metrics table held its key's parts and cluster counts as columns "
                         f"({', '.join(KEY_PARTS)}, ..., n_clusters): run `omnieval metrics` on its predictions again",
                         file=path)
    frame = frame.with_columns(pl.lit("").alias(p) for p in parts if p not in frame.columns)

    strings = {c: pl.Utf8 for c in METRIC_COLUMNS[:6]}
    floats = {c: pl.Float64 for c in ("value", "ci_low", "ci_high")}
    # the variance split of repeated samples (``stats.samples``): null in tables without samples
    frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias(c) for c in SPLIT_COLUMNS
                               if c not in frame.columns)
    frame = frame.select(*METRIC_COLUMNS, "n_items", "n_clusters", *SPLIT_COLUMNS, *parts).cast(
        {**strings, **floats, "n": pl.Int64, "n_items": pl.Int64, "n_clusters": pl.Int64,
         **dict.fromkeys(SPLIT_COLUMNS, pl.Float64), **dict.fromkeys(parts, pl.Utf8)})
    return frame.with_columns(pl.col("key", "prompt", "split", *parts).fill_null(""))


def _run_json(predictions: list[Path | StoredPath]) -> dict:
    """The run record beside the predictions ({} when there is none). One that cannot be read (a run stopped while
    writing it, a file cut short in a copy) is refused, naming it: the report would otherwise show the run without
    its config, seed and versions and say nothing."""
    for p in predictions:
        doc = p.parent / "run.json"
        if doc.is_file():
            try:
                record = json.loads(doc.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
                record = exc
            if not isinstance(record, dict):
                why = f"not valid JSON ({record})" if isinstance(record, Exception) else "not a JSON object"
                raise InputError(f"the run record is {why}: rerun the run's config with omnieval run to write it "
                                 "again (finished rows are kept, not recomputed), or move run.json away to report "
                                 "the predictions without it", file=doc)
            return record
    return {}


def report_rows(paths: list[Path | StoredPath]) -> pl.DataFrame:
    """Every prediction row the report's sections read, whole: of a Parquet file only ``REPORT_COLUMNS``, of
    another format the rows ``read_predictions`` reads, narrowed to them. The report no longer reads this (it keeps
    a ``RowSummary``); ``omnieval bench report --scale`` measures it as the baseline."""
    import pyarrow.parquet as pq

    from omnieval.stats.read import fill_confidence, read_predictions

    frames = []
    for path in paths:
        if path.suffix.lower() != ".parquet":
            frame = read_predictions([path])
            frames.append(frame.select(c for c in REPORT_COLUMNS if c in frame.columns))
            continue
        source = readable(path)
        present = set(pq.read_schema(source).names)
        source = readable(path) if not isinstance(source, Path) else source
        frames.append(pl.read_parquet(source, columns=[c for c in REPORT_COLUMNS if c in present]))
    return fill_confidence(pl.concat(frames, how="diagonal_relaxed"))


def load_runs(inputs: list[str | Path], *, resamples: int | None = None, seed: int | None = None,
              permutations: int | None = None, cluster=None) -> list[Run]:
    """Load every run found in ``inputs``: metrics read or computed, the summary of the prediction rows the report
    shows (``report.summary.summarise``), tests read; paired differences read (``paired.parquet`` beside the
    metrics), or computed in the same pass as the metrics (``stats.compute``). What is computed resamples by
    ``cluster`` (``stats.clusters``; default: the unit a metrics folder records, else each protocol's own); a
    setting left None, its default (``DEFAULTS``)."""
    resamples = DEFAULTS["resamples"] if resamples is None else resamples
    seed = DEFAULTS["seed"] if seed is None else seed
    permutations = DEFAULTS["permutations"] if permutations is None else permutations
    sources = discover(inputs)
    names = labels([s.root for s in sources])
    records = [_run_json(s.predictions) for s in sources]  # a bad one stops the report before any computing
    runs = []
    for label, source, record in zip(names, sources, records, strict=True):
        predictions = summarise(source.predictions) if source.predictions else None
        paired = None
        if source.metrics is not None:
            metrics, minfo = _read_metrics(source.metrics)
            if source.paired is not None:
                paired = pl.read_parquet(readable(source.paired))
            elif predictions is not None:
                paired = compute(Inputs(paths=tuple(source.predictions)),
                                 Settings(resamples=resamples, seed=seed, permutations=permutations,
                                          cluster=run_cluster(minfo, cluster))).paired
        else:
            settings = Settings(resamples=resamples, seed=seed, permutations=permutations, cluster=cluster)
            made = compute(Inputs(paths=tuple(source.predictions)), settings)
            metrics, paired = normalise_metrics(made.metrics), made.paired
            minfo = {"source": "computed by omnieval report", "seed": seed, "resamples": resamples,
                     "confidence_level": 0.95, "cluster": made.units, "interval": settings.interval}
        tests = _read_tests(source.tests) if source.tests is not None else None
        info = dict(record)
        info["metrics"] = minfo
        info["predictions_files"] = [str(p) for p in source.predictions]
        info["benchmark_name"] = benchmark_name(record)
        runs.append(Run(label, source, metrics, predictions, tests, info, paired))
    return runs


def benchmark_name(record: dict) -> str | None:
    """The name of the benchmark a run used: ``name`` in the ``benchmark.json`` of the folder its config names
    (what a converter or ``datasets synth`` writes), else that folder's name; None for a run without a record.
    The report names benchmarks by it, not by split: two releases can share a split name (``all``)."""
    config = record.get("config")
    folder = config.get("benchmark") if isinstance(config, dict) else None
    if not isinstance(folder, str) or not folder:
        return None
    try:
        doc = stored_path(folder) / "benchmark.json"
        name = json.loads(doc.read_text()).get("name") if doc.is_file() else None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError, ValueError, AttributeError):
        name = None
    return str(name) if isinstance(name, str) and name else folder.rstrip("/").rsplit("/", 1)[-1] or None


def run_cluster(minfo: dict, cluster=None):
    """The unit to compute a run's paired differences, tests and power with: the one given on the command line,
    else the one its metrics record (so that they match its intervals), else each protocol's own."""
    recorded = minfo.get("cluster")
    return cluster if cluster is not None else recorded if isinstance(recorded, dict) else None


RECORDS: dict[str, dict] = {}
"""The ``combined.json`` of each stored result ``stored_results`` found, by fingerprint (what ``stored_settings``
reads a result's settings from)."""


def stored_settings(pooled: Inputs, given: Settings, asked: dict, stored: dict) -> Settings | None:
    """The settings of a stored result (``stored``, by fingerprint) made from exactly ``pooled``'s files, where the
    report was given no setting that differs (``asked``: the settings named on the command line, None for those left
    to default): a sweep's pooled result is read with the sweep's own resamples and seed unless told otherwise.
    None where no stored result fits."""
    for stamp in stored:
        doc = RECORDS.get(stamp) or {}
        if doc.get("protocol") != pooled.protocol or not isinstance(doc.get("settings"), dict):
            continue
        recorded = dict(doc["settings"])
        recorded["cluster"] = recorded.pop("cluster_choice", None)
        try:
            made_with = replace(given, **{k: v for k, v in recorded.items() if k in SETTING_FIELDS})
        except TypeError:
            continue
        if any(v is not None and getattr(made_with, k) != v for k, v in asked.items()):
            continue
        if fingerprint(pooled, made_with) == stamp:
            return made_with
    return None


SETTING_FIELDS = ("resamples", "seed", "permutations", "cluster", "interval", "random")
DEFAULTS = {"resamples": 10_000, "seed": 0, "permutations": 10_000}
"""What the report computes with where a setting is not given and no stored result fits."""


def stored_results(inputs: list[str | Path]) -> dict[str, Path | StoredPath]:
    """The pooled results a sweep stored under the folders given (``<sweep>/combined/<benchmark>/``), by the
    fingerprint of what each was computed from (``stats.compute.fingerprint``)."""
    found: dict[str, Path | StoredPath] = {}

    def walk(folder, depth: int = 0) -> None:
        record = folder / RECORD
        if record.is_file():
            try:
                doc = json.loads(record.read_text())
                found[doc["fingerprint"]] = folder
                RECORDS[doc["fingerprint"]] = doc
            except (json.JSONDecodeError, KeyError, TypeError, OSError):
                print(f"omnieval report: {record} cannot be read; its result is computed again", file=sys.stderr)
            return
        if depth < MAX_DEPTH:
            for child in sorted(folder.iterdir()):
                if child.is_dir() and child.name not in SKIP_DIRS and not child.name.startswith("."):
                    walk(child, depth + 1)

    for raw in inputs:
        path = stored_path(raw)
        if path.is_dir():
            walk(path)
    return found


def protocol_inputs(runs: list[Run], *, permutations: int | None = None, seed: int | None = None,
                    resamples: int | None = None, cluster=None,
                    stored: dict[str, Path | StoredPath] | None = None) -> list[ProtocolInput]:
    """Per protocol (in order of first appearance), the pooled metrics, prediction summaries and tests of every run.
    Tests, power and (several runs) paired differences and ranks come from ``stats.compute``, or from a result in
    ``stored`` (``stored_results``) made from the same files with the settings given; a setting left None takes a
    stored result's (``stored_settings``), else its default (``DEFAULTS``)."""
    asked = {"resamples": resamples, "seed": seed, "permutations": permutations}
    resamples, seed, permutations = (DEFAULTS[k] if v is None else v for k, v in asked.items())
    order: list[str] = []
    for run in runs:
        for p in run.metrics["protocol"].unique(maintain_order=True).to_list():
            if p not in order:
                order.append(p)
    all_metrics = pl.concat([r.metrics.with_columns(run=pl.lit(r.label)) for r in runs], how="vertical_relaxed")
    all_metrics = all_metrics.with_row_index("_rid").with_columns(pl.col("_rid").cast(pl.Int64))
    out = []
    for protocol in order:
        metrics = all_metrics.filter(pl.col("protocol") == protocol)
        members = [r for r in runs if protocol in r.metrics["protocol"].to_list()]
        with_preds = [r for r in members if r.predictions is not None and r.predictions.rows_of(protocol)]
        predictions = RowSummary.pooled([(r.label, r.predictions) for r in with_preds], protocol)
        tests = paired = power = ranks = None
        if len(members) == 1:
            run = members[0]
            unit = run_cluster(run.info.get("metrics", {}), cluster)
            if run.tests is not None:
                tests = run.tests.filter(pl.col("protocol") == protocol)
            if run.paired is not None:
                paired = run.paired.filter(pl.col("protocol") == protocol)
            ranks = _ranks_beside(run.source, protocol)
            if predictions is not None:
                made = compute(Inputs(paths=tuple(run.source.predictions), protocol=protocol),
                               Settings(seed=seed, permutations=permutations, cluster=unit, metrics=False,
                                        tests=tests is None, power=True))  # tests read beside the run stand
                tests = made.tests if tests is None else tests
                power = made.power
        elif len(with_preds) >= 1 and predictions is not None:
            unit = cluster if cluster is not None else run_cluster(members[0].info.get("metrics", {}))
            pooled = Inputs.pooled({r.label: r.source.predictions for r in with_preds}, protocol)
            settings = Settings(resamples=resamples, seed=seed, permutations=permutations, cluster=unit,
                                tests=True, power=True)
            found = (stored or {}).get(fingerprint(pooled, settings)) if stored else None
            if found is None and stored:
                fitting = stored_settings(pooled, settings, {**asked, "cluster": cluster}, stored)
                found = stored.get(fingerprint(pooled, fitting)) if fitting is not None else None
            made = read_result(found) if found is not None else compute(pooled, settings)
            tests, paired, power = made.tests, made.paired, made.power
            ranks = made.ranks
            tests, paired = without_unshown_ensemble(metrics, tests, paired)
        benchmarks = {r.label: r.info.get("benchmark_name") for r in members if r.info.get("benchmark_name")}
        out.append(ProtocolInput(protocol, metrics, predictions, tests, [r.label for r in members], paired, power,
                                 benchmarks, ranks))
    return out


def _ranks_beside(source: RunSource, protocol: str) -> pl.DataFrame | None:
    """The ``ranks.parquet`` ``omnieval metrics`` wrote beside a run's metrics (three or more models), this
    protocol's rows."""
    if source.metrics is None or not (source.metrics.parent / "ranks.parquet").is_file():
        return None
    ranks = pl.read_parquet(readable(source.metrics.parent / "ranks.parquet"))
    return ranks.filter(pl.col("protocol") == protocol)


def without_unshown_ensemble(metrics: pl.DataFrame, tests: pl.DataFrame | None,
                             paired: pl.DataFrame | None) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """The tests and paired differences without the rows of a majority-vote ``ensemble`` the metrics do not show,
    their p-values adjusted again among the rows kept. Pooling several runs' predictions (one model each, as a
    sweep writes them) makes a protocol that votes (spectrum) add an ensemble of the runs' models that no run
    computed: its differences would stand under a heading whose accuracy table has no ensemble row."""
    from omnieval.stats import paired as stats_paired
    from omnieval.stats import significance

    ensemble = "ensemble"
    if ensemble in metrics["model"].to_list():
        return tests, paired
    if tests is not None and not tests.is_empty():
        tests = significance.adjust_p(tests.filter(~pl.any_horizontal(
            pl.col(c).fill_null("") == ensemble for c in ("model", "model_a", "model_b"))))
    if paired is not None and not paired.is_empty():
        shown = ~pl.any_horizontal(pl.col(c) == ensemble for c in ("a", "b", "model"))
        paired = stats_paired.adjust_p(paired.filter(shown))
    return tests, paired
