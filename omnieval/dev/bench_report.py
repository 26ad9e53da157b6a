"""``omnieval bench report --scale``: what ``omnieval report`` holds of a sweep's prediction rows, the summaries it
keeps now (``report.summary``) against the rows it used to read whole (``report.inputs.report_rows``).

For each size (rows in all; default 1 and 5 million), the bench writes a sweep-like folder: one run folder per model
and protocol (``runs/<protocol>/<model>/predictions.parquet`` with its ``run.json``; the synthetic predictions of
``bench stats --scale``, with what a sweep's rows also carry: skipped rows, what was shown, option logprobs, answer
text) and beside
each its metrics folder (``metrics/``, written as ``omnieval metrics`` writes it, with few resamples: the values do not
matter here), so that the report computes no metrics. Then, each in a fresh process so that its peak memory
(``resource.getrusage`` maxrss) is its own (the folder is written in another: a child's peak counts the pages of
the process it was forked from), it reads the folder as the report does (``report.inputs.discover``, each
run's metrics table) and:

* ``rows`` (the former path): every run's rows whole (``report_rows``: the report's 21 columns), then each protocol's
  rows of every run concatenated, as the report used to hand them to its sections;
* ``summary`` (the report now): every run's summary (``report.summary.summarise``: streaming scans), then each
  protocol's pooled summary (``RowSummary.pooled``).

It prints seconds and peak memory of each (and the peak before reading: the imports) and their ratios, and checks
that both count the same rows per protocol and the same answers per reliability bin. What is not measured: the
pooled paired differences, tests and power of several runs (``stats.compute``, or read where a sweep stored them),
which ``omnieval bench stats --scale`` measures.
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

RESAMPLES = 20
"""Resamples and permutations of the metrics folders the bench writes (their values are not what is measured)."""


def write_sweep(rows: int, folder: Path) -> list[Path]:
    """A sweep-like folder of about ``rows`` predictions (``bench_scale.write_runs``' runs), each run in its own
    folder with ``run.json`` and a metrics folder; returns the run folders."""
    from omnieval.dev.bench_scale import write_runs
    from omnieval.stats.command import metrics_files

    scratch = folder / "flat"
    runs = []
    for path in map(Path, write_runs(rows, scratch)):
        protocol, model = path.stem.split("-", 1)
        run = folder / "runs" / protocol / model
        run.mkdir(parents=True, exist_ok=True)
        _sweep_like(pl.read_parquet(path)).write_parquet(run / "predictions.parquet", row_group_size=100_000)
        (run / "run.json").write_text(json.dumps({"started": time.time(), "seed": 0, "versions": {},
                                                  "config": {"models": [{"name": model}]}}))
        made = metrics_files([run / "predictions.parquet"], resamples=RESAMPLES, permutations=RESAMPLES)
        (run / "metrics").mkdir(exist_ok=True)
        for name, data in made.files.items():
            (run / "metrics" / name).write_bytes(data)
        runs.append(run)
    shutil.rmtree(scratch, ignore_errors=True)
    return runs


def _sweep_like(frame: pl.DataFrame) -> pl.DataFrame:
    """The synthetic rows with the columns a sweep's rows also carry: every 50th row skipped (video not asked), what
    the other rows were shown, their option logprobs (an engine scoring from logits) and the answer's text (left on
    disk by both paths)."""
    i = pl.int_range(pl.len())
    asked = i % 50 != 0
    return frame.with_columns(
        skipped=pl.when(asked).then(None).otherwise(pl.lit("video")),
        video_frames=pl.when(asked).then(8 + 8 * (i % 3)).cast(pl.Int32),
        video_size=pl.when(asked).then(pl.lit("280x392")),
        audio_seconds=pl.when(asked).then((i % 300) / 10),
        media_tokens=pl.lit(None, pl.Struct({"video": pl.Int32, "audio": pl.Int32, "image": pl.Int32})),
        prompt_tokens=pl.when(asked).then(200 + i % 900).cast(pl.Int32),
        option_logprobs=pl.when(asked).then(pl.concat_list(pl.lit(-0.1), pl.lit(-2.5), pl.lit(-3.0), pl.lit(-4.2))),
        raw_text=pl.lit("The answer is ") + pl.col("choice").fill_null("none") + pl.lit(", as the clip shows."))


def _peak_mb() -> float:
    return peak_rss_mb()


def child(mode: str, root: str) -> dict:
    """One measurement in this (fresh) process: the figures and what both paths must agree on."""
    from omnieval.report import inputs
    from omnieval.report.summary import RowSummary, summarise

    imports_mb = _peak_mb()
    start = time.perf_counter()
    sources = inputs.discover([root])
    labels = inputs.labels([s.root for s in sources])
    metrics = [inputs._read_metrics(s.metrics)[0] for s in sources]
    protocols = sorted({p for m in metrics for p in m["protocol"].unique().to_list()})
    check: dict = {}
    if mode == "rows":
        rows = [inputs.report_rows(s.predictions) for s in sources]
        for protocol in protocols:
            pooled = pl.concat([r.filter(pl.col("protocol") == protocol).with_columns(run=pl.lit(label))
                                for label, r in zip(labels, rows, strict=True)], how="diagonal_relaxed")
            valid = pooled.filter(pl.col("choice").is_not_null() & pl.col("confidence").is_not_null())
            bins = valid.group_by((pl.col("confidence") * 10).floor().clip(0, 9).cast(pl.Int64).alias("bin")) \
                .agg(pl.len().alias("n"))
            check[protocol] = [pooled.height, sorted(bins.iter_rows())]
    else:
        summaries = [summarise(s.predictions) for s in sources]
        for protocol in protocols:
            pooled = RowSummary.pooled(list(zip(labels, summaries, strict=True)), protocol)
            bins = pooled.reliability.group_by("bin").agg(pl.col("n").sum())
            check[protocol] = [pooled.rows, sorted(bins.iter_rows())]
    return {"mode": mode, "seconds": time.perf_counter() - start, "peak_mb": _peak_mb(), "imports_mb": imports_mb,
            "check": check}


def _measure(mode: str, root: Path, rows: int = 0) -> dict:
    done = subprocess.run([sys.executable, "-m", "omnieval.dev.bench_report", mode, str(root), str(rows)],
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"bench report --scale: the {mode} measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_report(sizes: list[int], workdir: str | None = None) -> int:
    """Measure every size and print the table (module docstring)."""
    import pyarrow.parquet as pq

    scratch = Path(workdir or tempfile.mkdtemp(prefix="omnieval-report-scale-"))
    lines = []
    try:
        for rows in sizes:
            root = scratch / f"{rows}"
            if not (root / "runs").is_dir():  # in a process of its own: a child's peak counts its parent's pages
                _measure("write", root, rows)
            n = sum(pq.ParquetFile(p).metadata.num_rows for p in root.glob("runs/*/*/predictions.parquet"))
            old, new = _measure("rows", root), _measure("summary", root)
            same = old["check"] == new["check"]
            lines.append((f"{n:,}", f"{old['seconds']:.1f} s", f"{new['seconds']:.1f} s",
                          f"{old['seconds'] / new['seconds']:.1f}x", f"{old['peak_mb']:,.0f} MB",
                          f"{new['peak_mb']:,.0f} MB", f"{old['peak_mb'] / new['peak_mb']:.1f}x",
                          f"{max(old['imports_mb'], new['imports_mb']):,.0f} MB", "same" if same else "DIFFER"))
    finally:
        if workdir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    head = ("rows", "rows whole", "summaries", "time ratio", "peak, rows whole", "peak, summaries", "memory ratio",
            "imports", "counts")
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head))]
    print("omnieval bench report --scale: reading a sweep's predictions for the report (fresh process each; "
          "metrics read from each run's metrics folder)")
    for row in [head, *lines]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    return 0 if all(line[-1] == "same" for line in lines) else 1


if __name__ == "__main__":
    if sys.argv[1] == "write":
        print(json.dumps({"runs": len(write_sweep(int(sys.argv[3]), Path(sys.argv[2])))}))
    else:
        print(json.dumps(child(sys.argv[1], sys.argv[2])))
