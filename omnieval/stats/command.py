"""The ``omnieval metrics`` command: predictions files -> ``metrics.csv`` / ``.parquet`` / ``.json`` and the paired
differences of the same resampling pass (``paired.csv`` / ``.parquet``), with three or more models the ranks and
significance groups of the same pass (``ranks.csv`` / ``.parquet``, ``omnieval.stats.ranks``), plus the headline
tables on stdout.

``metrics_files`` makes the folder's files; the command writes them to a local folder, a sweep writes the same
files to each run's ``metrics/`` on its storage (``omnieval.sweep.state.write_metrics``), so both hold the same
bytes for the same predictions and settings."""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from omnieval.core.storage import StoredPath, local_folder
from omnieval.stats.bootstrap import CONFIDENCE_LEVEL
from omnieval.stats.clusters import ClusterChoice, units_used
from omnieval.stats.intervals import DEFAULT_METHOD
from omnieval.stats.paired import Collector, metrics_and_paired
from omnieval.stats.ranks import ranks_table
from omnieval.stats.read import read_predictions


@dataclass
class MetricsFiles:
    """The files of a metrics folder (name -> bytes) and the tables they hold."""

    files: dict[str, bytes]
    metrics: pl.DataFrame
    paired: pl.DataFrame
    n_predictions: int
    ranks: pl.DataFrame | None = None


def _absolute(path: str | Path | StoredPath) -> str:
    """A predictions path as recorded in ``metrics.json``: absolute (the report reads it from any folder), a URI as
    given (with its query, so that it opens again)."""
    if isinstance(path, StoredPath):
        return path.uri
    return str(path) if "://" in str(path) else str(Path(path).resolve())


def _parquet(write) -> bytes:
    sink = io.BytesIO()
    write(sink)
    return sink.getvalue()


def metrics_files(paths: list[str | Path | StoredPath], resamples: int = 10_000, seed: int = 0,
                  permutations: int = 10_000, cluster: ClusterChoice = None,
                  interval: str = DEFAULT_METHOD, address: str | None = None,
                  random: str | None = None) -> MetricsFiles:
    """The metrics table and the paired differences of one pass (``omnieval.stats.paired``) of the predictions at
    ``paths`` (local paths or URIs), as ``metrics.csv``, ``metrics.parquet`` and ``metrics.json`` (with seed,
    resample count, confidence level and each protocol's resampling unit) and ``paired.csv`` and
    ``paired.parquet``. ``cluster``: the resampling unit (``stats.clusters``; default: each protocol's own);
    ``interval``: how intervals are formed from the resamples (``stats.intervals``); ``random``: a random factor
    (``stats.factors``), recorded in ``metrics.json``. Large inputs, or any with ``address`` (a Ray cluster), are
    computed one protocol per Ray task (``stats.distributed``): the same bytes."""
    import pyarrow.parquet as pq

    from omnieval.stats import distributed

    if distributed.use_ray(paths, address):
        started = distributed.connect(address)
        try:
            table, paired, groups = distributed.ray_tables(paths, resamples, seed, permutations, cluster, interval,
                                                           random=random)
            ranks = distributed.gather_ranks(groups)
        finally:
            if started:
                import ray

                ray.shutdown()
        # by protocol name, as ``units_used`` gives them: the groups come back in the order their tasks finished
        units = dict(sorted((protocol, unit) for group in groups for protocol, unit in group.units.items()))
        n_predictions = sum(group.n_predictions for group in groups)
    else:
        predictions = read_predictions(paths)
        collector = Collector()
        table, paired = metrics_and_paired(predictions, resamples=resamples, seed=seed, permutations=permutations,
                                           cluster=cluster, interval=interval, collector=collector, random=random)
        ranks = ranks_table(collector.units, paired, resamples, table)
        units, n_predictions = units_used(predictions, cluster), len(predictions)
    meta = {"seed": str(seed), "resamples": str(resamples), "confidence_level": str(CONFIDENCE_LEVEL),
            "cluster": json.dumps(units, sort_keys=True), "interval": interval,
            **({"random": random} if random else {})}
    arrow = table.to_arrow()
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **meta})
    doc = {"seed": seed, "resamples": resamples, "confidence_level": CONFIDENCE_LEVEL, "cluster": units,
           "interval": interval, **({"random": random} if random else {}),
           "bootstrap": f"clustered bootstrap over each protocol's unit (cluster), {interval} "
           "interval",
           "inputs": [_absolute(p) for p in paths], "metrics": table.to_dicts()}
    files = {"paired.csv": paired.write_csv().encode(), "paired.parquet": _parquet(paired.write_parquet),
             "metrics.csv": table.write_csv().encode(),
             "metrics.parquet": _parquet(lambda sink: pq.write_table(arrow, sink)),
             "metrics.json": json.dumps(doc, indent=1).encode()}
    if not ranks.is_empty():  # three or more models on the same questions (stats.ranks)
        files |= {"ranks.csv": ranks.write_csv().encode(), "ranks.parquet": _parquet(ranks.write_parquet)}
    return MetricsFiles(files, table, paired, n_predictions, ranks)


def _verdict_notes(paths: list[str]):
    """Each input's prompt, split and ``official_how`` columns, read again for the official rule's reasons alone."""
    from omnieval.stats.read import some_columns

    for path in paths:
        yield some_columns(path, ("prompt", "split", "official_how"))


def metrics_command(paths: list[str], out: str, resamples: int = 10_000, seed: int = 0,
                    permutations: int = 10_000, cluster: ClusterChoice = None,
                    interval: str = DEFAULT_METHOD, address: str | None = None, random: str | None = None) -> int:
    """Write ``metrics_files`` to the local folder ``out`` and print the headline tables (``address``: compute on
    that Ray cluster, ``stats.distributed``; ``random``: a random factor, ``stats.factors``)."""
    start = time.perf_counter()
    folder = local_folder(out)  # a bad --out stops here, before the computing
    made = metrics_files(paths, resamples=resamples, seed=seed, permutations=permutations, cluster=cluster,
                         interval=interval, address=address, random=random)
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in made.files.items():
        (folder / name).write_bytes(data)
    from omnieval.stats.headlines import headline_tables, render
    from omnieval.stats.verdicts import not_computed_reasons, render_verdicts, verdict_table

    print(render(headline_tables(made.metrics)))
    reasons = not_computed_reasons(_verdict_notes(paths)) if not verdict_table(made.metrics).is_empty() else {}
    if verdicts := render_verdicts(made.metrics, reasons):
        print(f"\n{verdicts}")
    print(f"\nomnieval metrics: {len(made.metrics)} rows and {len(made.paired)} paired differences from "
          f"{made.n_predictions} predictions in {time.perf_counter() - start:.1f} s -> {folder} (every metric: "
          f"{folder / 'metrics.csv'}; definitions: docs/reference.md)")
    return 0
