"""The ``omnieval metrics`` command: predictions files -> ``metrics.csv`` / ``.parquet`` / ``.json`` and the paired
differences of the same resampling pass (``paired.csv`` / ``.parquet``), plus the headline tables on stdout."""

from __future__ import annotations

import json
import time
from pathlib import Path

from omnieval.core.store import local_folder
from omnieval.stats.bootstrap import CONFIDENCE_LEVEL
from omnieval.stats.paired import metrics_and_paired
from omnieval.stats.read import read_predictions
from omnieval.stats.registry import load_protocols


def _absolute(path: str | Path) -> str:
    """A predictions path as recorded in ``metrics.json``: absolute (the report reads it from any folder), a URI as
    given."""
    return str(path) if "://" in str(path) else str(Path(path).resolve())


def metrics_command(paths: list[str], out: str, resamples: int = 10_000, seed: int = 0,
                    permutations: int = 10_000) -> int:
    """Write ``metrics.csv``, ``metrics.parquet`` and ``metrics.json`` (with seed and resample count) to ``out``,
    and the paired differences of the same pass (``omnieval.stats.paired``) as ``paired.csv`` and ``paired.parquet``."""
    start = time.perf_counter()
    folder = local_folder(out)  # a bad --out stops here, before the computing
    load_protocols()
    predictions = read_predictions(paths)
    table, paired = metrics_and_paired(predictions, resamples=resamples, seed=seed, permutations=permutations)
    folder.mkdir(parents=True, exist_ok=True)
    paired.write_csv(folder / "paired.csv")
    paired.write_parquet(folder / "paired.parquet")
    table.write_csv(folder / "metrics.csv")
    meta = {"seed": str(seed), "resamples": str(resamples), "confidence_level": str(CONFIDENCE_LEVEL)}
    arrow = table.to_arrow()
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **meta})
    import pyarrow.parquet as pq

    pq.write_table(arrow, folder / "metrics.parquet")
    doc = {"seed": seed, "resamples": resamples, "confidence_level": CONFIDENCE_LEVEL, "bootstrap": "clustered "
           "percentile bootstrap over item_id", "inputs": [_absolute(p) for p in paths], "metrics": table.to_dicts()}
    (folder / "metrics.json").write_text(json.dumps(doc, indent=1))
    from omnieval.stats.headlines import headline_tables, render

    print(render(headline_tables(table)))
    print(f"\nomnieval metrics: {len(table)} rows and {len(paired)} paired differences from {len(predictions)} "
          f"predictions in {time.perf_counter() - start:.1f} s -> {folder} (every metric: {folder / 'metrics.csv'}; "
          "definitions: docs/reference.md)")
    return 0
