"""One run's state on storage: its ``sweep-run.json`` marker, whether the run is complete (the rule: **Complete.**
in ``omnieval.sweep``'s docstring), its metrics files."""

from __future__ import annotations

import json

MARKER = "sweep-run.json"
METRICS_FILES = ("metrics.parquet", "paired.parquet")
"""Files of a run's ``metrics/`` whose absence makes the run incomplete (the others are written with them)."""


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
    if metrics is not None and not all(store.exists(f"metrics/{name}") for name in METRICS_FILES):
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


def resolved_units(choice) -> dict[str, str]:
    """Every known protocol's resampling unit under a sweep's ``metrics.cluster`` (``stats.clusters``): what a run
    marker records, so that a changed choice, or a changed default, recomputes the metrics."""
    from omnieval.protocols import known_protocols
    from omnieval.stats.clusters import cluster_for

    return {protocol: cluster_for(protocol, choice) for protocol in known_protocols()}


def write_metrics(store, settings: dict) -> int:
    """The run's ``metrics/`` folder: the files ``omnieval metrics`` writes (``stats.command.metrics_files``), of the
    predictions read where the run wrote them, with the sweep's metrics ``settings``; returns the metric rows."""
    from omnieval.stats.clusters import default_cluster
    from omnieval.stats.command import metrics_files

    # only the units that differ from a protocol's default are the user's choice (a default unit whose column the
    # predictions lack falls back to the question; a chosen one must exist)
    chosen = {p: u for p, u in (settings.get("cluster") or {}).items() if u != default_cluster(p)}
    made = metrics_files([store.location("predictions.parquet")], resamples=settings["resamples"],
                         seed=settings["seed"], permutations=settings["permutations"], cluster=chosen or None)
    for name, data in made.files.items():
        store.write_bytes(f"metrics/{name}", data)
    return len(made.metrics)


def run_verdicts(store) -> list[dict]:
    """The overall accuracy cells (no task or category scope) of a run's ``metrics/`` with both answer verdicts
    (``stats.verdicts.verdict_table``): what the sweep summary prints; none where no answer was read from text. A
    cell the official rule did not read, of a run whose scorer's rule cannot be computed here, carries why as
    ``not_computed``."""
    import polars as pl

    from omnieval.stats.key_parts import unscoped
    from omnieval.stats.verdicts import verdict_table

    if not store.exists("metrics/metrics.parquet"):
        return []
    cells = verdict_table(pl.from_arrow(store.read_table("metrics/metrics.parquet")))
    if cells.is_empty():
        return []
    reason = not_computed_reason((read_json(store, "run.json") or {}).get("scorer"))
    return [cell | {"not_computed": reason} if reason and cell["disagree"] is None and cell["official_accuracy"]
            is None else cell for cell in cells.filter(unscoped(cells)).to_dicts()]


def not_computed_reason(scorer: str | None) -> str | None:
    """Why the run's official scorer (``run.json``'s ``scorer``) has a rule omnieval cannot compute
    (``scoring.base.unavailable_reason``); None for no scorer, one it computes, or a name it does not know."""
    from omnieval.scoring.base import get_scorer, scorer_names, unavailable_reason

    if not scorer or scorer not in scorer_names():
        return None
    return unavailable_reason(get_scorer(scorer))


def combined_settings(settings: dict, protocol: str):
    """The ``stats.compute.Settings`` of a benchmark's pooled result under the sweep's metrics ``settings``: the
    runs' own (only a unit that differs from the protocol's default is the user's choice, as ``write_metrics``
    passes it), with the significance tests and power."""
    from omnieval.stats.clusters import default_cluster
    from omnieval.stats.compute import Settings

    unit = (settings.get("cluster") or {}).get(protocol)
    chosen = {protocol: unit} if unit and unit != default_cluster(protocol) else None
    return Settings(resamples=settings["resamples"], seed=settings["seed"], permutations=settings["permutations"],
                    cluster=chosen, tests=True, power=True)


def write_combined(root, runs: list, settings: dict, log=None) -> list[str]:
    """Each benchmark's pooled result (``stats.compute``): the paired differences, ranks, tests and power across
    the sweep's models and prompt styles, its runs pooled and labelled as the report labels the sweep's run folders
    (``stats.compute.pool``), written to ``combined/<benchmark>/`` beside ``combined.json`` (what it was made from,
    its fingerprint). A benchmark whose fingerprint is unchanged (same predictions files, same settings) is not
    computed again. ``runs``: the sweep's ``RunOutcome``s; returns the benchmarks computed."""
    from pathlib import Path

    from omnieval.core.names import folder_name
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.core.schema import InputError
    from omnieval.core.storage import stored_path
    from omnieval.stats.compute import RECORD, Inputs, compute, fingerprint, labels, result_files

    def root_of(output: str):
        where = stored_path(output)
        return where.resolve() if isinstance(where, Path) else where

    present = [r for r in runs if RunOutputs(r.output).exists("predictions.parquet")]
    present.sort(key=lambda r: root_of(r.output).parts)  # the order the report finds the run folders in
    names = dict(zip([r.output for r in present], labels([root_of(r.output) for r in present]), strict=True))
    computed = []
    for benchmark in dict.fromkeys(r.benchmark for r in present):
        mine = [r for r in present if r.benchmark == benchmark and r.status in ("done", "skipped")]
        if len(mine) < 2:
            continue
        protocol = mine[0].protocol
        inputs = Inputs.pooled({names[r.output]: [RunOutputs(r.output).location("predictions.parquet")]
                                for r in mine}, protocol)
        made_with = combined_settings(settings, protocol)
        stamp = fingerprint(inputs, made_with)
        rel = f"combined/{folder_name(benchmark)}"
        if (read_json(root, f"{rel}/{RECORD}") or {}).get("fingerprint") == stamp:
            continue
        if log is not None:
            log(f"{benchmark}: computing the pooled result of {len(mine)} runs -> {rel}")
        try:
            result = compute(inputs, made_with)
        except InputError as exc:  # the runs stand; the report computes what it needs from them, or says why
            if log is not None:
                log(f"{benchmark}: no pooled result: {exc}")
            continue
        for name, data in result_files(result, inputs).items():
            root.write_bytes(f"{rel}/{name}", data)
        root.write_json(f"{rel}/{RECORD}", {
            "fingerprint": stamp, "benchmark": benchmark, "protocol": protocol,
            "settings": {**made_with.record(protocol), "cluster_choice": made_with.cluster},
            "runs": {label: [str(p) for p in files] for label, files in inputs.runs},
            "n_predictions": result.n_predictions})
        computed.append(benchmark)
    return computed
