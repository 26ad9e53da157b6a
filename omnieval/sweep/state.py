"""One run's state on storage: its ``sweep-run.json`` marker, whether the run is complete (the rule: **Complete.**
in ``omnieval.sweep``'s docstring), its metrics files."""

from __future__ import annotations

import json
from pathlib import Path

MARKER = "sweep-run.json"


def read_json(store, rel: str) -> dict | None:
    try:
        with store.fs.open_input_stream(store.path(rel)) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def num_rows(store, rel: str) -> int | None:
    import pyarrow.parquet as pq

    try:
        with store.fs.open_input_file(store.path(rel)) as f:
            return pq.read_metadata(f).num_rows
    except (OSError, ValueError):
        return None


def completeness(store, fp: str, expected_rows: int, *, metrics: dict | None,
                 retry_errors: bool) -> tuple[bool, str]:
    """(complete?, why not) of the run stored at ``store`` (see the module docstring). ``metrics`` are the metrics
    settings (``None``: metrics off); other settings than the stored ones recompute the metrics, not the
    predictions."""
    marker = read_json(store, MARKER)
    if marker is None:
        return False, "not run yet"
    if marker.get("fingerprint") != fp:
        return False, "config or benchmark changed"
    if marker.get("state") != "complete":
        return False, "interrupted"
    if not store.exists("run.json"):
        return False, "run.json missing"
    rows = num_rows(store, "predictions.parquet")
    if rows is None:
        return False, "predictions missing"
    if rows != expected_rows:
        return False, f"predictions hold {rows} rows, expected {expected_rows}"
    if metrics is not None and not store.exists("metrics/metrics.parquet"):
        return False, "metrics missing"
    if metrics is not None and marker.get("metrics") != metrics:
        return False, "metrics settings changed"
    if retry_errors and marker.get("n_errors"):
        return False, f"{marker['n_errors']} errored predictions to retry"
    return True, "complete"


def has_files(store) -> bool:
    import pyarrow.fs as pafs

    infos = store.fs.get_file_info(pafs.FileSelector(store.root, allow_not_found=True, recursive=True))
    return any(i.type == pafs.FileType.File for i in infos)


def write_metrics(store, resamples: int, seed: int) -> int:
    """``metrics/metrics.{parquet,csv,json}`` of the run's predictions (read through the store's filesystem)."""
    import tempfile

    from omnieval.stats.bootstrap import CONFIDENCE_LEVEL
    from omnieval.stats.metrics import metrics_table
    from omnieval.stats.read import read_predictions

    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "predictions.parquet"
        with store.fs.open_input_stream(store.path("predictions.parquet")) as src:
            local.write_bytes(src.read())
        table = metrics_table(read_predictions([local]), resamples=resamples, seed=seed)
    meta = {"seed": str(seed), "resamples": str(resamples), "confidence_level": str(CONFIDENCE_LEVEL)}
    arrow = table.to_arrow()
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **meta})
    store.write_table("metrics/metrics.parquet", arrow)
    store.write_bytes("metrics/metrics.csv", table.write_csv().encode())
    store.write_json("metrics/metrics.json", {
        "seed": seed, "resamples": resamples, "confidence_level": CONFIDENCE_LEVEL,
        "bootstrap": "clustered percentile bootstrap over item_id", "inputs": [store.path("predictions.parquet")],
        "metrics": table.to_dicts()})
    return len(table)
