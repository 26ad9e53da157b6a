"""``omnieval bench stats --scale``: ``omnieval metrics`` over millions of predictions, one group (a protocol, a
split of it, or one prompt of a split) per Ray task (``omnieval.stats.distributed``) on a local Ray of simulated nodes
(``ray.cluster_utils.Cluster``, one CPU each), against the single-process path measured in the same run.

For each size (rows in all; default 1, 5 and 20 million), the bench writes per-run Parquet files (one per model and
protocol, half dissonance, half crossmodal, as a sweep leaves them) to a scratch folder, then runs, each in a fresh
process so that its peak memory is its own:

* ``single``: today's path, ``read_predictions`` then ``metrics_and_paired`` in one process, up to
  ``SINGLE_MAX_ROWS`` (above it the process would need more memory than the development machine has: ~1.1 KB a
  row, ~22 GB at 20 million rows; the tables are then compared between the Ray runs alone);
* ``ray x1`` and ``ray x2``: the Ray path on 1 and 2 simulated nodes: seconds (the cluster's start left out), the
  driver's peak memory and the largest worker's (``VmHWM``: ``core.processes.peak_rss_mb``).

and checks that the three give the same tables bit for bit. Targets (docs/runs.md, Statistics at scale): no process
over 4 GB; throughput from 1 to 2 nodes >= 0.7 x linear (seconds on 1 node / seconds on 2 >= 1.4); identical tables.
Bootstrap: 1,000 resamples and 1,000 permutations, as in the issue's measurements.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from omnieval.core.processes import peak_rss_mb

RESAMPLES = 1_000
MEMORY_LIMIT_MB = 4096
SINGLE_MAX_ROWS = 5_000_000
PROMPTS, SPLITS = ("zs", "cot", "plan"), ("real", "synthetic")  # a sweep's prompt styles; both protocols' splits
DISSONANCE_MODELS, DISSONANCE_ROWS_PER_ITEM = 10, len(PROMPTS) * len(SPLITS) * 8  # x conditions, per model and item
CROSSMODAL_MODELS, CROSSMODAL_ROWS_PER_ITEM = 14, len(PROMPTS) * len(SPLITS) * 6  # x directions


def write_runs(rows: int, folder: Path) -> list[str]:
    """Per-run Parquet files of about ``rows`` predictions in all, half per protocol, written one run at a time
    (the bench's own memory stays that of one run). Both protocols hold three prompt styles over two splits, as a
    sweep's do: six groups each (``stats.distributed``), a sixth of a protocol's rows per task."""
    from omnieval.dev.bench_stats import synthetic_crossmodal, synthetic_dissonance

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    dis_items = max(1, rows // 2 // (DISSONANCE_MODELS * DISSONANCE_ROWS_PER_ITEM))
    xm_items = max(1, rows // 2 // (CROSSMODAL_MODELS * CROSSMODAL_ROWS_PER_ITEM))
    for m in range(DISSONANCE_MODELS):
        run = synthetic_dissonance(n_models=1, prompts=PROMPTS, splits=SPLITS, n_items=dis_items, seed=m).with_columns(
            model=pl.lit(f"model{m:02d}"), instance_id=pl.col("split") + ":" + pl.col("instance_id"))
        paths.append(_write(run, folder / f"dissonance-model{m:02d}.parquet"))
    for m in range(CROSSMODAL_MODELS):
        run = pl.concat([synthetic_crossmodal(n_models=1, n_items=xm_items, seed=1000 * m + i).with_columns(
            model=pl.lit(f"model{m:02d}"), prompt=pl.lit(prompt), split=pl.lit(split),
            instance_id=pl.lit(f"{split}:") + pl.col("instance_id"))
            for i, (prompt, split) in enumerate((p, s) for p in PROMPTS for s in SPLITS)])
        paths.append(_write(run, folder / f"crossmodal-model{m:02d}.parquet"))
    return paths


def _write(frame: pl.DataFrame, path: Path) -> str:
    frame.write_parquet(path, row_group_size=100_000)
    return str(path)


def _peak_mb() -> float:
    return peak_rss_mb()


def child(mode: str, out: str, paths: list[str]) -> dict:
    """One measurement in this (fresh) process; writes both tables to ``out`` and returns the figures."""
    from omnieval.protocols import metric_specs

    metric_specs()  # every protocol's metric definitions made before the clock starts
    figures: dict = {"mode": mode}
    if mode == "single":
        from omnieval.stats.paired import metrics_and_paired
        from omnieval.stats.read import read_predictions

        start = time.perf_counter()
        metrics, paired = metrics_and_paired(read_predictions(paths), resamples=RESAMPLES, permutations=RESAMPLES)
        figures["seconds"] = time.perf_counter() - start
        figures["worker_mb"] = None
    else:
        metrics, paired, figures = _on_cluster(int(mode.removeprefix("ray")), paths, figures)
    figures["driver_mb"] = _peak_mb()
    metrics.write_parquet(Path(out) / "metrics.parquet")
    paired.write_parquet(Path(out) / "paired.parquet")
    return figures


def _on_cluster(nodes: int, paths: list[str], figures: dict):
    import ray

    from omnieval.stats.distributed import ray_tables

    cluster = _started(nodes)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        start = time.perf_counter()
        metrics, paired, groups = ray_tables(paths, resamples=RESAMPLES, permutations=RESAMPLES)
        figures["seconds"] = time.perf_counter() - start
        figures["worker_mb"] = max(g.peak_rss_mb for g in groups)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return metrics, paired, figures


def _started(nodes: int, attempts: int = 5):
    """A simulated cluster of ``nodes`` one-CPU nodes; a start that times out (Ray gives a node 30 s to register
    with the GCS, which a heavily loaded machine misses) is tried again, up to ``attempts`` in all."""
    from ray.cluster_utils import Cluster

    for attempt in range(1, attempts + 1):
        cluster = None
        try:
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
            for _ in range(nodes - 1):
                cluster.add_node(num_cpus=1)
        except Exception:
            if cluster is not None:
                cluster.shutdown()
            if attempt == attempts:
                raise
            print(f"bench stats --scale: the simulated cluster's start timed out; trying again ({attempt})",
                  file=sys.stderr, flush=True)
            continue
        return cluster
    return None


def _measure(mode: str, paths: list[str], out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "omnieval.dev.bench_scale", mode, str(out), *paths],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"bench stats --scale: the {mode} measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _same(folders: list[Path]) -> bool:
    from polars.testing import assert_frame_equal

    try:
        for name in ("metrics.parquet", "paired.parquet"):
            want = pl.read_parquet(folders[0] / name)
            for folder in folders[1:]:
                assert_frame_equal(pl.read_parquet(folder / name), want, check_exact=True)
    except AssertionError:
        return False
    return True


def bench_scale(sizes: list[int], workdir: str | None = None) -> int:
    """Measure every size and print the table (module docstring)."""
    scratch = Path(workdir or tempfile.mkdtemp(prefix="omnieval-scale-"))
    lines = []
    try:
        for rows in sizes:
            paths = write_runs(rows, scratch / f"{rows}" / "runs")
            n = pl.scan_parquet(paths).select(pl.len()).collect().item()
            modes = ("single", "ray1", "ray2") if n <= SINGLE_MAX_ROWS else ("ray1", "ray2")
            outs = {mode: scratch / f"{rows}" / mode for mode in modes}
            figures = {mode: _measure(mode, paths, out) for mode, out in outs.items()}
            same = _same(list(outs.values()))
            lines.extend(_rows(n, figures, same))
    finally:
        if workdir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    _print(lines)
    return 0


def _rows(n: int, figures: dict, same: bool) -> list[tuple[str, ...]]:
    single, one, two = figures.get("single"), figures["ray1"], figures["ray2"]
    scaling = one["seconds"] / two["seconds"] / 2
    peak = max(one["driver_mb"], one["worker_mb"], two["driver_mb"], two["worker_mb"])
    label = f"{n:,} rows"
    return [
        (label, "single process", f"{single['seconds']:.1f} s", f"{single['driver_mb']:,.0f} MB", "", "")
        if single else (label, "single process", "not run", f"(> {SINGLE_MAX_ROWS:,} rows)", "", ""),
        (label, "Ray, 1 node x 1 CPU", f"{one['seconds']:.1f} s", f"{one['driver_mb']:,.0f} MB",
         f"{one['worker_mb']:,.0f} MB", ""),
        (label, "Ray, 2 nodes x 1 CPU", f"{two['seconds']:.1f} s", f"{two['driver_mb']:,.0f} MB",
         f"{two['worker_mb']:,.0f} MB",
         f"scaling {scaling:.2f} x linear {_verdict(scaling >= 0.7)}; peak {peak:,.0f} MB "
         f"{_verdict(peak <= MEMORY_LIMIT_MB)}; tables {'identical' if same else 'DIFFER'}"),
    ]


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def _print(lines: list[tuple[str, ...]]) -> None:
    head = ("input", "path", "seconds", "driver peak", "largest worker", "targets (>= 0.7 x linear, <= 4 GB)")
    widths = [max(len(str(row[i])) for row in [head, *lines]) for i in range(len(head) - 1)]
    print(f"omnieval bench stats --scale ({RESAMPLES:,} resamples and permutations; one CPU per simulated node)")
    for row in [head, *lines]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], sys.argv[2], sys.argv[3:])))
