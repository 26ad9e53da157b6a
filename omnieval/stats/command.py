"""The ``omnieval metrics`` command: predictions files -> ``metrics.csv`` / ``.parquet`` / ``.json`` and the paired
differences of the same resampling pass (``paired.csv`` / ``.parquet``), with three or more models the ranks and
significance groups of the same pass (``ranks.csv`` / ``.parquet``, ``omnieval.stats.ranks``), plus the headline
tables on stdout.

``metrics_files`` makes the folder's files; the command writes them to a local folder, a sweep writes the same
files to each run's ``metrics/`` on its storage (``omnieval.sweep.state.write_metrics``), so both hold the same
bytes for the same predictions and settings."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from omnieval.core.storage import StoredPath, local_folder
from omnieval.stats.clusters import ClusterChoice
from omnieval.stats.compute import Inputs, Settings, compute, result_files
from omnieval.stats.intervals import DEFAULT_METHOD


@dataclass
class MetricsFiles:
    """The files of a metrics folder (name -> bytes) and the tables they hold."""

    files: dict[str, bytes]
    metrics: pl.DataFrame
    paired: pl.DataFrame
    n_predictions: int
    ranks: pl.DataFrame | None = None


def metrics_files(paths: list[str | Path | StoredPath], resamples: int = 10_000, seed: int = 0,
                  permutations: int = 10_000, cluster: ClusterChoice = None,
                  interval: str = DEFAULT_METHOD, address: str | None = None,
                  random: str | None = None) -> MetricsFiles:
    """The metrics table and the paired differences of one pass (``omnieval.stats.paired``) of the predictions at
    ``paths`` (local paths or URIs), computed by ``stats.compute.compute`` (in this process, or one protocol per Ray
    task for large inputs or any with ``address``: the same bytes) and laid out by ``stats.compute.result_files``:
    ``metrics.csv``, ``metrics.parquet`` and ``metrics.json`` (with seed, resample count, confidence level and each
    protocol's resampling unit), ``paired.csv`` and ``paired.parquet``, with three or more models ``ranks.*``.
    ``cluster``: the resampling unit (``stats.clusters``; default: each protocol's own); ``interval``: how
    intervals are formed from the resamples (``stats.intervals``); ``random``: a random factor
    (``stats.factors``), recorded in ``metrics.json``."""
    inputs = Inputs(paths=tuple(paths))
    settings = Settings(resamples=resamples, seed=seed, permutations=permutations, cluster=cluster,
                        interval=interval, random=random, address=address)
    result = compute(inputs, settings)
    return MetricsFiles(result_files(result, inputs), result.metrics, result.paired, result.n_predictions,
                        result.ranks)


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
