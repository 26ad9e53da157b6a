"""One entry point for every statistic omnieval computes from predictions: ``compute(inputs, settings) -> Result``.

``omnieval metrics`` (``stats.command``), the sweep (each run's ``metrics/`` and each benchmark's pooled result under
``<sweep>/combined/``) and the report all call it, so a table has one way of being made. ``inputs`` names the
predictions: plain files (one run, or files read as one table), or labelled runs pooled into one table with each
run's models kept apart (``pool``, the naming the report's tables show). ``settings`` holds every choice that
changes a number (resamples, seed, permutations, resampling unit, interval, random factor) and where to compute
(``address``: a Ray cluster).

Large inputs, or any with ``address``, are computed one protocol (or split, or prompt of a split) per Ray task
by ``stats.distributed``, the tests and the power table too, pooled runs too (each file's models renamed by the
task that reads it, ``distributed.renamed``); the rest in this process: the same numbers either way.
``result_files`` turns a ``Result`` into the files of a metrics folder (``metrics.*``, ``paired.*``,
``ranks.*``, and ``tests.parquet`` / ``power.parquet`` where computed), ``read_result`` reads such a folder back.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl

from omnieval.core.storage import StoredPath, readable, stored_path
from omnieval.stats.bootstrap import CONFIDENCE_LEVEL
from omnieval.stats.clusters import ClusterChoice, cluster_for
from omnieval.stats.intervals import DEFAULT_METHOD

PathLike = str | Path | StoredPath
RECORD = "combined.json"
"""The file that marks a folder as a pooled result (what it was computed from, with which settings)."""


@dataclass(frozen=True)
class Settings:
    """Every choice that changes a computed number, and where to compute. ``metrics``: compute the metrics, paired
    differences and ranks; ``tests``: the significance tests (``stats.significance``); ``power``: the minimum
    detectable effects (``stats.power``). ``cluster``: the resampling unit (``stats.clusters``; None: each
    protocol's own)."""

    resamples: int = 10_000
    seed: int = 0
    permutations: int = 10_000
    cluster: ClusterChoice = None
    interval: str = DEFAULT_METHOD
    random: str | None = None
    address: str | None = None
    metrics: bool = True
    tests: bool = False
    power: bool = False

    def record(self, protocol: str | None = None) -> dict:
        """The settings as JSON, the unit resolved for ``protocol`` (two spellings of one unit match); where to
        compute is left out: it changes no number."""
        doc = {k: v for k, v in asdict(self).items() if k != "address"}
        if protocol is not None:
            doc["cluster"] = cluster_for(protocol, self.cluster)
        return doc


@dataclass(frozen=True)
class Inputs:
    """The predictions to compute from: ``paths`` read as one table, or ``runs`` (label -> that run's files, in
    order) pooled with each run's models kept apart; ``protocol``: only that protocol's rows."""

    paths: tuple[PathLike, ...] = ()
    runs: tuple[tuple[str, tuple[PathLike, ...]], ...] = ()
    protocol: str | None = None

    @classmethod
    def pooled(cls, runs: dict[str, list[PathLike]], protocol: str | None = None) -> Inputs:
        return cls(runs=tuple((label, tuple(files)) for label, files in runs.items()), protocol=protocol)

    def files(self) -> list[PathLike]:
        return list(self.paths) + [p for _, files in self.runs for p in files]


@dataclass
class Result:
    """The tables of one computation (each as ``omnieval metrics`` writes it; docs/reference.md), the settings they
    were made with, each protocol's resampling unit and the number of predictions read."""

    metrics: pl.DataFrame
    paired: pl.DataFrame
    ranks: pl.DataFrame
    settings: Settings
    units: dict[str, str] = field(default_factory=dict)
    n_predictions: int = 0
    tests: pl.DataFrame | None = None
    power: pl.DataFrame | None = None


def absolute(path: PathLike) -> str:
    """A predictions path as a result records it: absolute (read from any folder), a URI as given (with its query,
    so that it opens again)."""
    if isinstance(path, StoredPath):
        return path.uri
    return str(path) if "://" in str(path) else str(Path(path).resolve())


def labels(roots: list) -> list[str]:
    """Short distinct names for run folders: the folder name, with parent folders added until they differ (never
    the filesystem root's slash); roots that are the same folder are numbered."""
    depth = 1
    while True:
        names = ["/".join(p for p in r.parts[-depth:] if p != "/") if r.parts else str(r) for r in roots]
        if len(set(names)) == len(names) or depth > max((len(r.parts) for r in roots), default=0):
            break
        depth += 1
    if len(set(names)) != len(names):
        seen: dict[str, int] = {}
        numbered = []
        for n in names:
            seen[n] = seen.get(n, 0) + 1
            numbered.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
        names = numbered
    return names


def pool(predictions: pl.DataFrame) -> pl.DataFrame:
    """Several runs' predictions (a ``run`` column) as one table, each run's models named as ``stats.pooling``
    names them (``<run>:<model>``, ``<run>``, or a prompt's sibling runs as one model)."""
    from omnieval.stats.pooling import pooled_names

    prompt = pl.col("prompt") if "prompt" in predictions.columns else pl.lit(None, pl.Utf8)
    predictions = predictions.with_columns(pl.col("model").cast(pl.Utf8))
    held = predictions.select("run", "model", prompt.alias("prompt")).unique()
    cells: dict[str, list] = {}
    for run, model, p in held.iter_rows():
        cells.setdefault(run, []).append((model, p))
    names = pooled_names(cells)
    key = pl.col("run") + pl.lit("\x00") + pl.col("model")
    mapping = {f"{run}\x00{model}": name for run, models in names.items() for model, name in models.items()
               if model is not None}
    return predictions.with_columns(model=key.replace_strict(mapping, default=None, return_dtype=pl.Utf8)) \
        .drop("run")


def _read(inputs: Inputs) -> pl.DataFrame:
    """The predictions ``inputs`` name, as one table (pooled runs renamed by ``pool``)."""
    from omnieval.stats.read import read_predictions

    def mine(frame: pl.DataFrame) -> pl.DataFrame:
        return frame if inputs.protocol is None else frame.filter(pl.col("protocol") == inputs.protocol)

    if not inputs.runs:
        return mine(read_predictions(inputs.paths))
    frames = [mine(read_predictions(files)).with_columns(run=pl.lit(label)) for label, files in inputs.runs]
    return pool(pl.concat([f for f in frames if f.height] or frames[:1], how="diagonal_relaxed"))


def _on_ray(inputs: Inputs, settings: Settings) -> bool:
    """Whether what ``settings`` asks for goes to Ray tasks (``distributed.ray_tables``, ``.ray_tests``,
    ``.ray_power``): the predictions are large, or a cluster is named."""
    from omnieval.stats import distributed

    return (settings.metrics or settings.tests or settings.power) and \
        distributed.use_ray(inputs.files(), settings.address)


def compute(inputs: Inputs, settings: Settings = Settings()) -> Result:
    """The metrics, paired differences and ranks of one resampling pass, and (``settings.tests``, ``.power``) the
    significance tests and minimum detectable effects, of the predictions ``inputs`` name. Where the tests or the
    power table go to Ray, one Ray serves them and the metrics' tasks (a library caller without one gets a local
    one, or the cluster at ``settings.address``, for this call)."""
    from omnieval.stats import distributed

    if not _on_ray(inputs, settings):
        return _compute(inputs, settings)
    started = distributed.connect(settings.address)
    try:
        return _compute(inputs, settings)
    finally:
        if started:
            import ray

            ray.shutdown()


def _compute(inputs: Inputs, settings: Settings) -> Result:
    """``compute`` on the Ray this process is connected to, where it uses one."""
    from omnieval.stats import distributed
    from omnieval.stats.clusters import units_used
    from omnieval.stats.paired import Collector, metrics_and_paired
    from omnieval.stats.ranks import ranks_table

    s = settings
    empty = pl.DataFrame()
    predictions = None
    on_ray = _on_ray(inputs, s)
    paths = None
    if on_ray:  # pooled runs: each file with its models' pooled names, renamed by the task that reads it
        paths = distributed.renamed(inputs.runs, inputs.protocol) if inputs.runs else list(inputs.paths)
    if not s.metrics:
        table = paired = ranks = empty
        units: dict[str, str] = {}
        n_predictions = 0
    elif on_ray:
        table, paired, groups = distributed.ray_tables(paths, s.resamples, s.seed, s.permutations, s.cluster,
                                                       s.interval, random=s.random, protocol=inputs.protocol)
        ranks = distributed.gather_ranks(groups)
        # by protocol name, as ``units_used`` gives them: the groups come back in the order their tasks finished
        units = dict(sorted((protocol, unit) for group in groups for protocol, unit in group.units.items()))
        n_predictions = sum(group.n_predictions for group in groups)
    else:
        predictions = _read(inputs)
        collector = Collector()
        table, paired = metrics_and_paired(predictions, resamples=s.resamples, seed=s.seed,
                                           permutations=s.permutations, cluster=s.cluster, interval=s.interval,
                                           collector=collector, random=s.random)
        ranks = ranks_table(collector.units, paired, s.resamples, table)
        units, n_predictions = units_used(predictions, s.cluster), len(predictions)
    result = Result(table, paired, ranks, settings, units, n_predictions)
    if on_ray and (s.tests or s.power):
        from omnieval.stats.power import power_table
        from omnieval.stats.significance import stats_table

        # one task per split or protocol (``stats.distributed``); the driver never reads the predictions
        found = distributed.plan(paths, inputs.protocol)
        if found.n_rows and s.tests:
            result.tests = distributed.ray_tests(paths, stats_table, permutations=s.permutations, seed=s.seed,
                                                 cluster=s.cluster, protocol=inputs.protocol, found=found)
        if found.n_rows and s.power:
            result.power = distributed.ray_power(paths, power_table, cluster=s.cluster, found=found,
                                                 protocol=inputs.protocol)
        result.n_predictions = result.n_predictions or found.n_rows
    elif s.tests or s.power:
        from omnieval.stats.power import power_table
        from omnieval.stats.significance import stats_table

        predictions = _read(inputs) if predictions is None else predictions
        if predictions.height and s.tests:
            result.tests = stats_table(predictions, permutations=s.permutations, seed=s.seed, cluster=s.cluster)
        if predictions.height and s.power:
            result.power = power_table(predictions, cluster=s.cluster)
        result.n_predictions = result.n_predictions or len(predictions)
    return result


def _parquet(write) -> bytes:
    sink = io.BytesIO()
    write(sink)
    return sink.getvalue()


def result_files(result: Result, inputs: Inputs) -> dict[str, bytes]:
    """The files of a metrics folder (name -> bytes): ``metrics.csv`` / ``.parquet`` / ``.json`` (with seed,
    resample count, confidence level, each protocol's resampling unit and the inputs), ``paired.csv`` /
    ``.parquet``, with three or more models ``ranks.csv`` / ``.parquet``, and where computed ``tests.parquet`` and
    ``power.parquet``. For files given alone these are the bytes ``omnieval metrics`` has always written."""
    import pyarrow.parquet as pq

    s = result.settings
    table, paired, ranks = result.metrics, result.paired, result.ranks
    meta = {"seed": str(s.seed), "resamples": str(s.resamples), "confidence_level": str(CONFIDENCE_LEVEL),
            "cluster": json.dumps(result.units, sort_keys=True), "interval": s.interval,
            **({"random": s.random} if s.random else {})}
    arrow = table.to_arrow()
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **meta})
    doc = {"seed": s.seed, "resamples": s.resamples, "confidence_level": CONFIDENCE_LEVEL, "cluster": result.units,
           "interval": s.interval, **({"random": s.random} if s.random else {}),
           "bootstrap": f"clustered bootstrap over each protocol's unit (cluster), {s.interval} "
           "interval",
           "inputs": [absolute(p) for p in inputs.files()], "metrics": table.to_dicts()}
    if inputs.runs:
        doc["runs"] = {label: [absolute(p) for p in files] for label, files in inputs.runs}
    files = {"paired.csv": paired.write_csv().encode(), "paired.parquet": _parquet(paired.write_parquet),
             "metrics.csv": table.write_csv().encode(),
             "metrics.parquet": _parquet(lambda sink: pq.write_table(arrow, sink)),
             "metrics.json": json.dumps(doc, indent=1).encode()}
    if not ranks.is_empty():  # three or more models on the same questions (stats.ranks)
        files |= {"ranks.csv": ranks.write_csv().encode(), "ranks.parquet": _parquet(ranks.write_parquet)}
    for name, frame in (("tests", result.tests), ("power", result.power)):
        if frame is not None:
            files[f"{name}.parquet"] = _parquet(frame.write_parquet)
    return files


def read_result(folder: PathLike) -> Result:
    """A folder ``result_files`` wrote, read back (settings from its ``metrics.json`` and, for a pooled result, its
    ``combined.json``)."""
    folder = stored_path(folder)

    def table(name: str) -> pl.DataFrame | None:
        path = folder / f"{name}.parquet"
        return pl.read_parquet(readable(path)) if path.is_file() else None

    doc = json.loads((folder / "metrics.json").read_text())
    record = json.loads((folder / RECORD).read_text()) if (folder / RECORD).is_file() else {}
    recorded = record.get("settings", {})
    settings = Settings(resamples=int(doc["resamples"]), seed=int(doc["seed"]),
                        permutations=int(recorded.get("permutations", 10_000)),
                        cluster=recorded.get("cluster_choice"), interval=doc.get("interval", DEFAULT_METHOD),
                        random=doc.get("random"), metrics=True, tests=table("tests") is not None,
                        power=table("power") is not None)
    return Result(table("metrics"), table("paired"), table("ranks") if table("ranks") is not None else pl.DataFrame(),
                  settings, dict(doc.get("cluster") or {}), int(record.get("n_predictions", 0)), table("tests"),
                  table("power"))


def fingerprint(inputs: Inputs, settings: Settings) -> str:
    """What a stored pooled result was computed from: each run's label and files (path, size, modification time)
    and the settings (the unit resolved for the protocol). A changed predictions file or setting changes it."""
    from omnieval.core.storage import filesystem

    files = []
    for label, paths in inputs.runs or (("", inputs.paths),):
        for p in paths:
            uri = absolute(p)
            fs, where = filesystem(uri, field="predictions")
            info = fs.get_file_info(where)
            files.append([label, uri, info.size, info.mtime_ns])
    doc = {"protocol": inputs.protocol, "files": files, "settings": settings.record(inputs.protocol)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
