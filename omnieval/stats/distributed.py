"""``omnieval metrics``, ``omnieval stats`` and ``omnieval power`` at sweep scale: the metrics table, the paired
differences, the significance tests and the power table computed one group at a time as Ray tasks, each reading
only its own rows and the columns the statistics read, so that the memory of a process is bounded by its group, not
by the whole input (docs/runs.md, Statistics at scale).

The groups: ``stats.metrics.metrics_table`` computes every protocol on its own (its rows, its cells, its resampling
streams keyed by protocol and split, its pairs), and inside a protocol every split on its own (model and prompt
pairs, ranks and the resamples units share never cross a split). A ``SPLIT_LOCAL`` protocol on named splits is
therefore one task per split and prompt (a sweep's three prompt styles over two splits: six groups, each a sixth
of the protocol), or one per split where its prompts cannot be parted (a random factor pools them, repeated
samples' variance split reads across them, a null prompt); any other protocol one task. Some choices read all of
a protocol's rows at once (the error kinds and confidence methods present, the judges of the open-ended rows:
which rows the table has; which units share their clusters with another unit of the split, of any prompt, and are
therefore drawn paired, never through the pattern shortcut, ``bootstrap.shared_item_sets``): a first pass of tasks
over the same groups computes them (``cell_facts``, ``stats.first_pass``), the driver merges them per protocol
and hands them to the tasks. A prompt's task writes its units' metrics rows, its model pairs and ranks (a prompt's
context) and its ``modes`` rows, and sends back its units' resampled headline values (``paired.UnitValues``: each
headline metric over [data, resamples] and per-cluster accuracies, not rows); a second stage, one small task per
split, makes the prompt pairs (cot - zs per model) from them with the single process's own code
(``prompt_pairs``, ``paired.paired_rows``): the units drew the same keyed streams (keyed by protocol and split, not
by prompt) as in one process, and each row's permutation stream is keyed by the row. Two units on different
questions are compared on their common ones, in a pass that reads that model's rows of the two prompts alone.
Nothing else is shared between tasks but the models' order of first appearance in the input (the orientation of
model pairs), which the driver reads first from the ``model`` column alone. ``omnieval stats`` is one task per
split of a ``SPLIT_LOCAL`` protocol too (``ray_tests``): its tests never cross a split, and the one family of its
Benjamini-Hochberg adjustment that does (``permutation``: test x protocol) is adjusted on the driver over the
gathered p-values. ``omnieval power`` is one task per split of any protocol (``ray_power``): its cells never cross
a split and it reads no derived column; the models' order of its multiple-choice rows (``power_model_order``) is
read first, and a protocol whose splits would take different resampling units is computed again as one task.

Identical numbers: a task reads its rows in the input's order (files in the order given, rows in file order,
pyarrow's filtered read keeps it), runs the same code as the single process on them, and the driver puts the rows
back in the single process's order (``gather``: protocols sorted; a split protocol's rows by unit, the pairs by
context, the model and prompt pairs of every protocol before the modes rows); the Benjamini-Hochberg adjustment runs
on the gathered table, as its families never cross a split. Every random choice is keyed (``omnieval.kernels.rng``,
``core.keyed``), so the worker count and the placement of tasks change nothing: ``tests/test_stats_distributed.py``
compares one worker, four workers and the single process.

Reading: a local Parquet file is read with polars' reader (less memory, ``_local_protocol_rows``), one on any
other filesystem a run writes to (``s3://``, ``gs://``) with pyarrow's dataset scanner, the group as a filter
(predicate pushdown: row groups whose statistics exclude it are skipped) and the columns the statistics read
(column pushdown: ``UNREAD_COLUMNS`` stay on disk); a sweep's per-run files are read in place.
JSONL and CSV files have no such index: they are read whole inside the task and filtered. Rows are checked as
``stats.read.read_predictions`` checks them; a refused row is reported with the row number of its file (the file
is read again whole to name it). A duplicate (model, prompt, mode, instance, sample) inside a group is refused by
its task as the reader refuses it; one in two groups (two protocols, two splits) from the 64-bit digests of every
task's keys (``check_duplicates``: one task sorts them together), with the reader's message naming both rows.
A prompt task's bulk (its units for the second stage, its key digests) stays in Ray's object store: the driver
passes the references on and never fetches them (``_each``'s ``parted``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from omnieval.core.processes import peak_rss_mb
from omnieval.core.schema import InputError
from omnieval.core.storage import StoredPath, stored_path
from omnieval.stats.clusters import ClusterChoice
from omnieval.stats.first_pass import ProtocolFacts, merge, protocol_facts
from omnieval.stats.intervals import DEFAULT_METHOD
from omnieval.stats.read import without_skipped

SCALE_THRESHOLD_ROWS = 2_000_000
"""Inputs of at least this many rows go to Ray tasks (``--address`` always does). Below it a local Ray's start
(~10-20 s on a busy 2-core machine) costs more than the single process saves; measured by ``omnieval bench stats
--scale`` (docs/runs.md, Statistics at scale)."""

UNREAD_COLUMNS = frozenset({"reasoning", "intermediate_text", "answer_text", "reference", "cascade",
                            "stage_engines", "media_noted", "donors", "reasoning_tokens", "prompt_tokens",
                            "media_tokens", "video_frames", "video_size", "audio_seconds"})
"""Prediction columns (``schema.PREDICTION_SCHEMA``) no metric, paired difference or check reads: free text and
media accounting, most of a row's bytes. A ``--cluster`` column is always read."""


Where = dict[str, tuple[str, ...]]
"""Columns and the values a group's rows hold there (``read_group``): a prompt task's ``{"prompt": ("cot",)}``."""

SPLIT_LOCAL = frozenset({"dissonance", "crossmodal", "contrastive"})
"""Protocols whose rows are computed one split per task: their ``derive`` reads one item's rows of one unit at a
time, so a split's rows give the same derived rows alone as with the others. ``spectrum``'s derive reads across
splits (the ensemble is made where the protocol has two models or more, in their order of first appearance; the
modality-set and breakdown keys exist where the protocol has two sets or a breakdown): it stays one task, as a
protocol registered from outside does."""


@dataclass(frozen=True)
class Plan:
    """What the driver learns before any task runs: the rows of each group (protocol and split), the models in
    order of first appearance (the orientation of model pairs), and the number of rows."""

    groups: dict[tuple[str | None, str | None], int]
    model_order: tuple[str, ...]
    n_rows: int
    asked_model_order: tuple[str, ...] = ()  # the same among the rows not marked ``skipped`` (what tests read)
    cells: dict[tuple[str | None, str | None, str | None], int] = field(default_factory=dict)  # + prompt

    def prompts(self, protocol: str | None, split: str | None = None) -> list[str | None]:
        """The prompts of a protocol (of one of its splits where given), sorted (a null prompt last)."""
        found = {c for p, s, c in self.cells if p == protocol and (split is None or s == split)}
        return sorted(found, key=lambda c: (c is None, c or ""))

    @property
    def protocols(self) -> dict[str | None, int]:
        """Rows per protocol."""
        counts: dict[str | None, int] = {}
        for (protocol, _), n in self.groups.items():
            counts[protocol] = counts.get(protocol, 0) + n
        return counts

    def splits(self, protocol: str | None) -> list[str | None]:
        """The splits of a protocol, sorted (a null split last)."""
        return sorted((s for p, s in self.groups if p == protocol), key=lambda s: (s is None, s or ""))


@dataclass
class GroupResult:
    """What one task sends back: its rows of both tables, its resampling units and how much memory it took."""

    protocol: str | None
    metrics: pl.DataFrame
    paired: list[dict]
    units: dict[str, str]
    n_predictions: int
    peak_rss_mb: float
    ranks: pl.DataFrame | None = None  # stats.ranks of this group: its ranked rows never span two splits
    extra: tuple[str, ...] = ()  # the paired table's extra columns (stats.samples' variance split)
    split: str | None = None  # the group's split (None: every split of the protocol)
    unit_keys: tuple[tuple[str, str, str], ...] = ()  # (model, prompt, split) of the units paired, in order
    prompt: str | None = None  # the group's prompt (None: every prompt of its split)
    kept: list | None = None  # a prompt task's ``paired.UnitValues``: what the prompt pairs' stage reads
    key_digests: np.ndarray | None = None  # sorted 64-bit digests of its rows' duplicate keys (``_key_digests``)


@dataclass(frozen=True)
class Renamed:
    """A predictions file of one of several pooled runs, its models read under their pooled names
    (``stats.pooling``): how the report's and a sweep's pooled computes reach the tasks, which read and rename
    each file's rows themselves. ``path``: the file (or run folder), as ``_file_of`` takes it; ``models``: (model
    in the file, pooled name) pairs."""

    path: str
    models: tuple[tuple[str, str], ...]

    def rename(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(model=pl.col("model").cast(pl.Utf8).replace_strict(
            dict(self.models), default=None, return_dtype=pl.Utf8))

    def in_file(self, where: Where | None) -> Where | None:
        """``where`` with pooled model names turned back into this file's own (none of them: nothing matches)."""
        if not where or "model" not in where:
            return where
        own = tuple(model for model, name in self.models if name in where["model"])
        return {**where, "model": own}


def renamed(runs: Sequence[tuple[str, Sequence[str | Path | StoredPath]]],
            protocol: str | None = None) -> list[Renamed]:
    """Every file of ``runs`` (label -> files, in order) as a ``Renamed``, its models named as the single process
    pools them (``stats.pooling``: from which models and prompts each run holds, of ``protocol`` where given),
    read from the ``model`` and ``prompt`` columns alone."""
    from omnieval.stats.pooling import pooled_names

    cells: dict[str, set] = {}
    for label, files in runs:
        mine = cells.setdefault(label, set())
        for given in files:
            for frame in _protocols_and_models(given):
                if protocol is not None:
                    frame = frame.filter(pl.col("protocol") == protocol)
                prompt = pl.col("prompt") if "prompt" in frame.columns else pl.lit(None, pl.Utf8)
                mine.update(frame.select("model", prompt.alias("prompt")).unique().iter_rows())
    names = pooled_names(cells)
    return [Renamed(_uri(given), tuple(sorted((m, n) for m, n in names[label].items() if m is not None)))
            for label, files in runs for given in files]


def _uri(path: str | Path | StoredPath | Renamed) -> str | Renamed:
    """A path as a task receives it (a string: what every process can open)."""
    if isinstance(path, Renamed):
        return path
    return path.uri if isinstance(path, StoredPath) else str(path)


def _file_of(path: str | Path | StoredPath | Renamed) -> Path | StoredPath:
    """The predictions file behind a path (a folder holding ``predictions.parquet`` stands for it)."""
    if isinstance(path, Renamed):
        path = path.path
    path = stored_path(path)
    if path.is_dir() and (path / "predictions.parquet").is_file():
        path = path / "predictions.parquet"
    return path


def _dataset(path: Path | StoredPath):
    import pyarrow.dataset as ds

    if isinstance(path, StoredPath):
        return ds.dataset(path.path, format="parquet", filesystem=path.fs)
    return ds.dataset(str(path), format="parquet")


def _is_parquet(path: Path | StoredPath) -> bool:
    return path.suffix.lower() == ".parquet"


def plan(paths: Sequence[str | Path | StoredPath], only: str | None = None) -> Plan:
    """Groups, model order and row count of the input (of its rows of protocol ``only`` where given), from the
    ``protocol``, ``split`` and ``model`` columns alone (Parquet, batch by batch); a file of another format is read
    whole once here (such inputs are small)."""
    if not paths:
        raise InputError("no predictions files given")
    counts: dict[tuple[str | None, str | None], int] = {}
    cells: dict[tuple[str | None, str | None, str | None], int] = {}
    models: dict[str, None] = {}
    asked: dict[str, None] = {}
    n_rows = 0
    for given in paths:
        for frame in _protocols_and_models(given):
            if only is not None:
                frame = frame.filter(pl.col("protocol") == only)
            n_rows += frame.height
            if "prompt" not in frame.columns:
                frame = frame.with_columns(prompt=pl.lit(None, pl.Utf8))
            for protocol, split, prompt, n in frame.group_by("protocol", "split", "prompt",
                                                             maintain_order=True).len().iter_rows():
                counts[(protocol, split)] = counts.get((protocol, split), 0) + n
                cells[(protocol, split, prompt)] = cells.get((protocol, split, prompt), 0) + n
            models.update(dict.fromkeys(frame["model"].drop_nulls().unique(maintain_order=True).to_list()))
            kept = without_skipped(frame)["model"].drop_nulls()
            asked.update(dict.fromkeys(kept.unique(maintain_order=True).to_list()))
    return Plan(counts, tuple(models), n_rows, tuple(asked), cells)


def _protocols_and_models(given: str | Path | StoredPath):
    """The ``protocol``, ``split``, ``model`` (and ``prompt``, ``skipped``) columns of one file as text (``skipped``
    as it is), batch by batch (``_some_columns``: the driver never holds a whole column of a large file)."""
    for frame in _some_columns(given, ("protocol", "split", "model", "prompt", "skipped"),
                               required=("protocol", "split", "model")):
        yield frame.with_columns(pl.col(c).cast(pl.Utf8) for c in frame.columns if c != "skipped")


def _columns(path: Path | StoredPath, cluster: ClusterChoice, random: str | None = None) -> list[str]:
    """The file's columns the statistics read (``UNREAD_COLUMNS`` left out unless chosen as the unit or as the
    random factor)."""
    chosen = set(cluster.values()) if isinstance(cluster, dict) else {cluster} if cluster else set()
    chosen |= {random} if random else set()
    names = _dataset(path).schema.names
    return [c for c in names if c not in UNREAD_COLUMNS or c in chosen]


def _protocol_rows(path: Path | StoredPath, protocol: str | None, cluster: ClusterChoice,
                   random: str | None = None, split: str | None = None,
                   where: Where | None = None) -> pl.DataFrame:
    """One file's rows of ``protocol`` (and of ``split``; None: every split; and holding one of the values
    ``where`` names in each of its columns) in file order, with ``_row`` (the row number in the file, from 1)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    if not _is_parquet(path):
        from omnieval.stats.read import _read_one

        frame = _read_one(path).with_columns(_row=pl.int_range(1, pl.len() + 1))
        return frame.filter(_in_group(protocol, split, where))
    if not isinstance(path, StoredPath):
        return _local_protocol_rows(path, protocol, cluster, random, split, where)
    data = _dataset(path)
    chosen = dict(where or {})
    if split is not None:
        chosen["split"] = (split,)
    kept = ds.field("protocol").is_null() if protocol is None else ds.field("protocol") == protocol
    table = data.to_table(columns=["protocol", *chosen])
    match = pc.is_null(table["protocol"]) if protocol is None else pc.fill_null(pc.equal(table["protocol"],
                                                                                      protocol), False)
    for column, values in chosen.items():
        kept = kept & ds.field(column).isin(list(values))
        match = pc.and_(match, pc.fill_null(pc.is_in(pc.cast(table[column], "string"),
                                                     value_set=pa.array(list(values), pa.string())), False))
    rows = np.flatnonzero(match.to_numpy(zero_copy_only=False))
    frame = pl.from_arrow(data.to_table(columns=_columns(path, cluster, random), filter=kept))
    return frame.with_columns(_row=pl.Series(rows + 1, dtype=pl.Int64))


def _in_group(protocol: str | None, split: str | None, where: Where | None = None) -> pl.Expr:
    """Rows of ``protocol`` (and of ``split``; None: every split; and of ``where``'s values)."""
    match = pl.col("protocol").is_null() if protocol is None else pl.col("protocol").cast(pl.Utf8) == protocol
    if split is not None:
        match = match & (pl.col("split").cast(pl.Utf8) == split).fill_null(False)
    for column, values in (where or {}).items():
        match = match & pl.col(column).cast(pl.Utf8).is_in(list(values)).fill_null(False)
    return match


def _local_protocol_rows(path: Path, protocol: str | None, cluster: ClusterChoice, random: str | None = None,
                         split: str | None = None, where: Where | None = None) -> pl.DataFrame:
    """``_protocol_rows`` of a local Parquet file in one pass of polars' reader (numbered, then filtered, row
    groups the filter excludes skipped): measured at 400,000 rows, 0.28 KB a row of the process's peak against 0.45
    KB through pyarrow's scanner, which also reads the ``protocol`` column a second time for the row numbers."""
    try:
        return pl.scan_parquet(path).select(_columns(path, cluster, random)).with_row_index("_row", offset=1) \
            .filter(_in_group(protocol, split, where)).with_columns(pl.col("_row").cast(pl.Int64)).collect()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"cannot read predictions: {str(exc).splitlines()[0]}", file=path) from None


def read_group(paths: Sequence[str | Path | StoredPath], protocol: str | None,
               cluster: ClusterChoice = None, random: str | None = None, split: str | None = None,
               prompt: str | None = None, where: Where | None = None, numbered: bool = False) -> pl.DataFrame:
    """The rows of one protocol (and of one ``split`` of it; None: every split; of one ``prompt``; of the values
    ``where`` names in its columns) from every file, checked and completed as ``read.read_predictions`` does for
    the whole input (same rows, same order, same columns but ``UNREAD_COLUMNS``; ``numbered``: with ``_file`` and
    ``_row``, where each row is in the files)."""
    if prompt is not None:
        where = {**(where or {}), "prompt": (prompt,)}
    from omnieval.stats import read

    frames = []
    for at, given in enumerate(paths):
        path = _file_of(given)
        own = given.in_file(where) if isinstance(given, Renamed) else where
        part = _protocol_rows(path, protocol, cluster, random, split, own)
        if part.is_empty():
            continue
        rows = part["_row"]
        try:
            part = read._normalise(part.drop("_row"), path)
        except InputError:
            read._normalise(read._read_one(path), path)  # names the row as counted in the file
            raise
        if isinstance(given, Renamed):
            part = given.rename(part)
        frames.append(part.with_columns(_file=pl.lit(str(path)), _row=rows, _at=pl.lit(at, pl.Int64)))
    if not frames:
        raise InputError(f"no predictions of protocol {protocol!r}" + ("" if split is None else f", split {split!r}")
                         + "".join(f", {column} {list(values)}" for column, values in (where or {}).items()))
    frame = pl.concat(frames, how="diagonal_relaxed")
    read._check_duplicates(frame.drop("_at"))
    return read.fill_confidence(frame if numbered else frame.drop("_file", "_row", "_at"))


@dataclass(frozen=True)
class FirstPass:
    """What the first pass learns of one group (``cell_facts``)."""

    facts: ProtocolFacts
    units: dict[str, str]  # protocol -> resampling unit (``clusters.units_used``)
    cluster_sets: dict[tuple[str, str, str], str]  # unit -> digest of its clusters (``first_pass``)
    samples: bool  # repeated samples (``stats.samples``): its variance split reads across prompts


def cell_facts(paths: Sequence[str], protocol: str | None, split: str | None, cluster: ClusterChoice,
               random: str | None = None, prompt: str | None = None) -> FirstPass:
    """The first pass over one group (a split, or one prompt of it): its whole-protocol choices
    (``stats.first_pass``) from the frame the metrics read (read, prepared, clustered and derived as
    ``metrics.metrics_table`` does), its resampling unit and its units' clusters."""
    from omnieval.protocols import metric_spec
    from omnieval.stats.clusters import units_used, with_clusters
    from omnieval.stats.first_pass import unit_cluster_sets
    from omnieval.stats.read import prepare
    from omnieval.stats.samples import has_samples

    frame = with_clusters(prepare(read_group(paths, protocol, cluster, random, split, prompt)), cluster)
    spec = metric_spec(protocol)
    part = frame if spec.derive is None else spec.derive(frame)
    return FirstPass(protocol_facts(part), units_used(frame, cluster), unit_cluster_sets(part), has_samples(frame))


def group_facts(paths: Sequence[str], protocol: str | None, split: str | None, cluster: ClusterChoice,
                random: str | None = None) -> tuple[ProtocolFacts, dict[str, str]]:
    """``cell_facts``'s choices and resampling unit of one split."""
    first = cell_facts(paths, protocol, split, cluster, random)
    return first.facts, first.units


def group_tables(paths: Sequence[str], protocol: str | None, model_order: Sequence[str], resamples: int,
                 seed: int, permutations: int, cluster: ClusterChoice, interval: str,
                 random: str | None = None, split: str | None = None,
                 facts: ProtocolFacts | None = None, prompt: str | None = None) -> GroupResult:
    """The metrics rows and paired rows (not yet adjusted) of one group (a protocol, or one split of it, or one
    prompt of a split, with the whole protocol's ``facts``): the body of one Ray task, the single process's own
    (``stats.paired.metrics_and_paired_rows``) on the group's rows. A prompt's task keeps its units' resampled
    values for the prompt pairs (``prompt_pairs``)."""
    from omnieval.stats.clusters import units_used
    from omnieval.stats.paired import Collector, metrics_and_paired_rows, table_of
    from omnieval.stats.ranks import ranks_table

    frame = read_group(paths, protocol, cluster, random, split, prompt)
    collector = Collector()
    metrics, paired, extra = metrics_and_paired_rows(frame, resamples, seed, permutations, cluster, interval,
                                                     collector, random, model_order=list(model_order),
                                                     random_checked=True,  # the whole input was: check_random
                                                     facts=None if facts is None else {protocol: facts})
    ranks = ranks_table(collector.units, table_of(paired, extra), resamples, metrics)
    digests = _key_digests(frame)
    peak = peak_rss_mb()
    return GroupResult(protocol, metrics, paired, units_used(frame, cluster), frame.height, peak, ranks, extra,
                       split, tuple(u.key for u in collector.units), prompt,
                       collector.units if prompt is not None else None, digests)


def prompt_pairs(paths: Sequence[str], protocol: str, split: str, units: list, resamples: int, seed: int,
                 permutations: int, cluster: ClusterChoice, interval: str) -> GroupResult:
    """The second stage of a split whose prompts were tasks apart: its prompt pairs (cot - zs per model) from the
    prompt tasks' units (``paired.UnitValues``: each headline metric over [data, resamples], per-cluster
    accuracies), drawn as the single process draws them (the same keyed streams per split, the same permutation
    streams per row). Two units on different questions are compared on their common ones in a pass of their own,
    which reads that model's rows of the two prompts alone."""
    from omnieval.stats.paired import Collector, paired_rows

    collector = Collector()
    units = [u for part in units for u in _fetched(part)]  # each prompt task's units, or Ray's reference to them
    collector.units = sorted(units, key=lambda u: u.key)  # the single process's order of units (sorted by unit)

    def rows_of(a, b) -> pl.DataFrame:
        return read_group(paths, protocol, cluster, None, split,
                          where={"model": (a.key[0],), "prompt": tuple(sorted({a.key[1], b.key[1]}))})
    rows = paired_rows(collector, None, resamples, seed, permutations, cluster, interval, model_order=[],
                       comparisons=("prompts",), rows_of=rows_of)
    peak = peak_rss_mb()
    return GroupResult(protocol, None, rows, {}, 0, peak, None, (), split)


def _key_digests(frame: pl.DataFrame) -> np.ndarray:
    """Sorted distinct 64-bit digests of the rows' duplicate keys (model, prompt, mode, instance, sample: what
    ``read._check_duplicates`` keys on), for the driver's check across groups (``check_duplicates``)."""
    return np.unique(_key_digests_of_rows(frame))


def check_duplicates(paths: Sequence[str | Path | StoredPath], results: list[GroupResult]) -> None:
    """Refuse, as the single-process reader does, a prediction given twice in two groups (two protocols, two
    splits): a task finds the duplicates inside its own group when it reads it; across groups the driver
    intersects the groups' key digests, and where two share one it reads those groups' rows again, in the
    input's order, for the reader's own check and message (a digest shared by chance raises nothing)."""
    digests = [r.key_digests for r in results if r.key_digests is not None]
    if len(digests) < 2:
        return
    if any(_is_ref(d) for d in digests):  # the digests stayed in Ray's object store: a task intersects them
        import ray

        shared_keys = ray.get(ray.remote(num_cpus=1, max_retries=0)(shared_digests).remote(*digests))
    else:
        shared_keys = shared_digests(*digests)
    if not len(shared_keys):
        return
    from omnieval.stats import read

    frames = []
    for result in results:
        mine = _fetched(result.key_digests)
        if mine is None or not np.isin(mine, shared_keys, assume_unique=True).any():
            continue
        frame = read_group(paths, result.protocol, None, None, result.split, result.prompt, numbered=True)
        frames.append(frame.filter(pl.Series(np.isin(_key_digests_of_rows(frame), shared_keys))))
    frame = pl.concat(frames, how="diagonal_relaxed").sort("_at", "_row").drop("_at")
    read._check_duplicates(frame)


def shared_digests(*digests: np.ndarray) -> np.ndarray:
    """The digests found in two of ``digests`` (each distinct within itself): one sort of them all (a running
    union per group sorted the growing set again for every group: 20 s of the driver's at 5 million rows)."""
    every = np.concatenate(digests)
    every.sort()
    return np.unique(every[1:][every[1:] == every[:-1]])


def _is_ref(value) -> bool:
    """Whether ``value`` is a Ray object reference (without importing Ray where it is not)."""
    return type(value).__name__ == "ObjectRef"


def _fetched(value):
    """``value``, or what it refers to where it is a Ray object reference."""
    if _is_ref(value):
        import ray

        return ray.get(value)
    return value


def _key_digests_of_rows(frame: pl.DataFrame) -> np.ndarray:
    """``_key_digests`` row by row (not distinct, not sorted)."""
    from omnieval.stats import read
    from omnieval.stats.samples import sample_index

    return frame.select(pl.struct(model=pl.col("model").cast(pl.Utf8), prompt=pl.col("prompt").cast(pl.Utf8),
                                  mode=read._mode(frame), instance=pl.col("instance_id").cast(pl.Utf8),
                                  sample=sample_index(frame)).hash(seed=49))[:, 0].to_numpy()


def _protocol_key(protocol: str | None) -> tuple[bool, str]:
    return protocol is None, protocol or ""


def _group_key(r: GroupResult) -> tuple:
    """Groups by protocol, split and prompt (a prompt pairs' stage after its split's prompts)."""
    return (_protocol_key(r.protocol), r.split is None, r.split or "", r.metrics is None, r.prompt is None,
            r.prompt or "")


def gather(results: list[GroupResult]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both tables from the groups' rows, in the single process's order (module docstring). A protocol without
    repeated samples has no variance-split columns where another has them: null there, as in the single process."""
    from omnieval.stats.paired import table_of

    results = sorted(results, key=_group_key)
    widest = max((r.metrics.columns for r in results if r.metrics is not None), key=len)
    by_protocol: dict[str | None, list[GroupResult]] = {}
    for r in results:
        by_protocol.setdefault(r.protocol, []).append(r)
    metrics = pl.concat([_metrics_in_order([g for g in group if g.metrics is not None])
                         for group in by_protocol.values()],
                        how="diagonal_relaxed").select(widest)
    extra = max((r.extra for r in results), key=len)
    pairs = [row for group in by_protocol.values() for row in _pairs_in_order(group)]
    modes = [row for group in by_protocol.values() for row in _modes_in_order(group)]
    return metrics, table_of(pairs + modes, extra)


def _metrics_in_order(groups: list[GroupResult]) -> pl.DataFrame:
    """One protocol's metrics rows as ``metrics_table`` writes them: the units' rows sorted by unit (model,
    prompt, split), then the open-ended rows sorted the same way (``open_metrics.OPEN_METRICS``); a protocol of
    one group is already in that order."""
    from omnieval.stats.open_metrics import OPEN_METRICS

    if len(groups) == 1:
        return groups[0].metrics
    frame = pl.concat([g.metrics.with_row_index("_at") for g in groups], how="diagonal_relaxed")
    return frame.sort(pl.col("metric").is_in(list(OPEN_METRICS)), "model", "prompt", "split", "_at",
                      maintain_order=True).drop("_at")


def _pairs_in_order(groups: list[GroupResult]) -> list[dict]:
    """One protocol's model and prompt pairs as ``paired.paired_rows`` writes them: by context (a prompt's model
    pairs, a model's prompt pairs) in the order the units, sorted, first name it, each context's rows as its
    group wrote them (a context never spans two splits)."""
    pairs = [[row for row in g.paired if row["comparison"] != "modes"] for g in groups]
    if len(groups) == 1:
        return pairs[0]
    order: dict[tuple[str, str, str], int] = {}
    for model, prompt, split in sorted(key for g in groups for key in g.unit_keys):
        order.setdefault(("models", prompt, split), len(order))
        order.setdefault(("prompts", model, split), len(order))

    def context(row: dict) -> int:
        named = row["prompt"] if row["comparison"] == "models" else row["model"]
        return order[(row["comparison"], named, row["split"])]
    return sorted((row for rows in pairs for row in rows), key=context)  # stable: a context's rows keep order


def _modes_in_order(groups: list[GroupResult]) -> list[dict]:
    """One protocol's ``modes`` rows (multiple-choice against open-ended) by unit, sorted, as written."""
    modes = [row for g in groups for row in g.paired if row["comparison"] == "modes"]
    if len(groups) == 1:
        return modes
    return sorted(modes, key=lambda row: (row["model"], row["prompt"], row["split"]))


def gather_ranks(results: list[GroupResult]) -> pl.DataFrame:
    """The ``stats.ranks`` table from the groups' own, in the single process's order (protocol, prompt, split)."""
    from omnieval.stats.ranks import RANK_COLUMNS

    results = sorted(results, key=_group_key)
    frames = [r.ranks for r in results if r.ranks is not None]
    if not frames:
        return pl.DataFrame(schema=dict.fromkeys(RANK_COLUMNS, pl.Utf8))
    frame = pl.concat(frames, how="vertical").with_row_index("_at")
    protocol = pl.col("protocol")
    return frame.sort(protocol.is_null(), protocol, "prompt", "split", "_at", maintain_order=True).drop("_at")


def parquet_rows(paths: Sequence[str | Path | StoredPath]) -> int:
    """Rows of the Parquet files among ``paths``, from their footers alone (nothing else is read); other formats
    count 0: they are read by the single process unless a cluster is named."""
    import pyarrow.parquet as pq

    total = 0
    for given in paths:
        try:
            path = _file_of(given)
            if _is_parquet(path) and path.is_file():
                total += _dataset(path).count_rows() if isinstance(path, StoredPath) else \
                    pq.ParquetFile(path).metadata.num_rows
        except Exception:  # noqa: BLE001 an unreadable file is reported, with its name, by the reader proper
            continue
    return total


def use_ray(paths: Sequence[str | Path | StoredPath], address: str | None) -> bool:
    """Whether the groups go to Ray: a cluster is named, or the Parquet input reaches ``SCALE_THRESHOLD_ROWS``."""
    return bool(address) or parquet_rows(paths) >= SCALE_THRESHOLD_ROWS


def check_random(paths: Sequence[str | Path | StoredPath], random: str) -> None:
    """A random factor checked on the whole input, as the single process checks it (``stats.factors``), from its
    one column: a task holds one protocol, which may have a single level where the input has several."""
    from omnieval.stats import read
    from omnieval.stats.factors import check_factor

    columns = []
    for given in paths:
        path = _file_of(given)
        if _is_parquet(path):
            data = _dataset(path)
            if random in data.schema.names:
                columns.append(pl.from_arrow(data.to_table(columns=[random])).select(pl.col(random).cast(pl.Utf8)))
        else:
            frame = read._read_one(path)
            if random in frame.columns:
                columns.append(frame.select(pl.col(random).cast(pl.Utf8)))
    check_factor(pl.concat(columns) if columns else pl.DataFrame(), random)


def ray_tables(paths: Sequence[str | Path | StoredPath], resamples: int = 10_000, seed: int = 0,
               permutations: int = 10_000, cluster: ClusterChoice = None, interval: str = DEFAULT_METHOD,
               workers: int | None = None, random: str | None = None, by_prompt: bool = True,
               protocol: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame, list[GroupResult]]:
    """Both tables with one Ray task per group (``tasks``) on the Ray this process is connected to
    (``connect``), the largest groups first, at most ``workers`` tasks at a time (default: as many as the
    cluster's CPUs take), then one small task per split whose prompts were tasks apart, for its prompt pairs
    (``prompt_pairs``). The driver holds only the plan, the groups' facts, the tasks' rows and the prompt tasks'
    resampled headline values. ``by_prompt=False``: a split's prompts stay one task. ``protocol``: that protocol's
    rows alone. ``paths`` may be ``Renamed`` files (pooled runs: ``renamed``)."""
    return _tables(paths, resamples, seed, permutations, cluster, interval, workers, random, by_prompt, _each,
                   protocol)


def _tables(paths, resamples, seed, permutations, cluster, interval, workers, random, by_prompt,
            each, protocol=None) -> tuple[pl.DataFrame, pl.DataFrame, list[GroupResult]]:
    """``ray_tables`` with ``each`` running the tasks (``_each``: Ray; ``in_process``: this process)."""
    found = plan(paths, protocol)
    if random is not None:
        check_random(paths, random)
    planned = tasks(paths, found, cluster, random, workers, each=each, by_prompt=by_prompt)
    jobs = [(n, (protocol, found.model_order, resamples, seed, permutations, cluster, interval, random, split,
                 facts, prompt)) for protocol, split, prompt, facts, n in planned]
    results = each(group_tables, paths, jobs, workers, parted=True)
    check_duplicates(paths, results)
    for r in results:
        r.key_digests = None  # checked: the driver holds the tables' rows and the prompt tasks' units alone
    stages: dict[tuple[str | None, str | None], list] = {}
    for r in results:
        if r.prompt is not None:
            stages.setdefault((r.protocol, r.split), []).append(r)
    second = [(sum(r.n_predictions for r in mine), (protocol, split, [r.kept for r in mine], resamples,
                                                     seed, permutations, cluster, interval))
              for (protocol, split), mine in stages.items() if len(mine) > 1]
    for r in results:
        r.kept = None  # the units went to the second stage; the caller keeps the tables' rows alone
    results += each(prompt_pairs, paths, second, workers)
    metrics, paired = gather(results)
    return metrics, paired, results


def tasks(paths: Sequence[str | Path | StoredPath], found: Plan, cluster: ClusterChoice = None,
          random: str | None = None, workers: int | None = None, each=None,
          by_prompt: bool = True) -> list[tuple[str | None, str | None, str | None, ProtocolFacts | None, int]]:
    """``(protocol, split, prompt, facts, rows)`` of every task. A ``SPLIT_LOCAL`` protocol on named splits is
    one task per split and prompt (``by_prompt``, two prompts or more, no null prompt, no random factor: prompt
    pairs and the pooling of a random factor read across prompts), else one per split where it has two or more;
    each such task gets the whole protocol's facts from a first pass over the same groups (``cell_facts``, as Ray
    tasks; ``each=in_process``: in this process), with the units drawn paired across prompts
    (``first_pass.paired_units``). Any other protocol is one task (split and prompt None, facts its own). A
    protocol whose groups fall back to different resampling units stays one task; one with repeated samples
    (their variance split reads across prompts) one task per split."""
    from omnieval.stats.first_pass import paired_units, with_paired_units

    out: list[tuple[str | None, str | None, str | None, ProtocolFacts | None, int]] = []
    keys: list[tuple[str | None, str | None, str | None]] = []
    for protocol, n in found.protocols.items():
        splits = found.splits(protocol)
        prompts = found.prompts(protocol)
        if protocol not in SPLIT_LOCAL or None in splits:
            out.append((protocol, None, None, None, n))
        elif by_prompt and random is None and None not in prompts and len(prompts) > 1:
            keys += [(protocol, split, prompt) for split in splits for prompt in found.prompts(protocol, split)]
        elif len(splits) > 1:
            keys += [(protocol, split, None) for split in splits]
        else:
            out.append((protocol, None, None, None, n))
    sizes = {key: found.cells[key] if key[2] is not None else found.groups[key[:2]] for key in keys}
    firsts = (each or _each)(cell_facts, paths,
                             [(sizes[key], (key[0], key[1], cluster, random, key[2])) for key in keys], workers)
    for protocol in dict.fromkeys(key[0] for key in keys):
        mine = [(key, first) for key, first in zip(keys, firsts, strict=True) if key[0] == protocol]
        if len({tuple(sorted(first.units.items())) for _, first in mine}) > 1:
            out.append((protocol, None, None, None, found.protocols[protocol]))
            continue
        merged = merge([first.facts for _, first in mine])
        by_prompts = mine[0][0][2] is not None
        if by_prompts and any(first.samples for _, first in mine):
            out += [(protocol, split, None, merged, found.groups[(protocol, split)])
                    for split in found.splits(protocol)]
            continue
        if by_prompts:
            sets = {unit: digest for _, first in mine for unit, digest in first.cluster_sets.items()}
            merged = with_paired_units(merged, paired_units(sets))
        out += [(protocol, split, prompt, merged, sizes[(protocol, split, prompt)]) for (_, split, prompt), _ in mine]
    return out


def groups(paths: Sequence[str | Path | StoredPath], found: Plan, cluster: ClusterChoice = None,
           random: str | None = None, workers: int | None = None,
           each=None) -> list[tuple[str | None, str | None, ProtocolFacts | None, int]]:
    """``(protocol, split, facts, rows)`` of every task with a split's prompts together (``tasks`` with
    ``by_prompt=False``): one per split of a ``SPLIT_LOCAL`` protocol with two splits or more, one per other
    protocol."""
    return [(protocol, split, facts, n) for protocol, split, _, facts, n
            in tasks(paths, found, cluster, random, workers, each, by_prompt=False)]


def ray_tests(paths: Sequence[str | Path | StoredPath], stats_table, permutations: int = 10_000, seed: int = 0,
              cluster: ClusterChoice = None, workers: int | None = None, each=None,
              protocol: str | None = None, found: Plan | None = None) -> pl.DataFrame:
    """``omnieval stats``'s table with one Ray task per split of a ``SPLIT_LOCAL`` protocol on two named splits
    or more, one per other protocol, ``stats_table`` (``significance.stats_table``, given by its caller, which
    imports this module) on each; the rows in the single process's order (``tests_in_order``) and the
    Benjamini-Hochberg adjustment made again on the gathered p-values (``multiple_testing.adjust_tests``: the
    ``permutation`` family crosses splits). A protocol whose splits fall back to different resampling units is
    computed again as one task. ``protocol``: that protocol's rows alone; ``found``: the input's ``plan`` where the
    caller has it. ``each=in_process``: without Ray."""
    from omnieval.stats.multiple_testing import adjust_tests

    each = each or _each
    found = found or plan(paths, protocol)
    keys = []
    for name in found.protocols:
        if protocol is not None and name != protocol:
            continue
        splits = found.splits(name)
        parted = name in SPLIT_LOCAL and len(splits) > 1 and None not in splits
        keys += [(name, split) for split in splits] if parted else [(name, None)]
    sizes = {key: found.groups[key] if key[1] is not None else found.protocols[key[0]] for key in keys}
    jobs = [(sizes[key], (*key, stats_table, found.asked_model_order, permutations, seed, cluster)) for key in keys]
    done = each(split_tests, paths, jobs, workers)
    judges = sorted({judge for *_, named in done for judge in named})
    units: dict[str | None, set] = {}
    for protocol, _, _, used, _ in done:
        units.setdefault(protocol, set()).add(tuple(sorted(used.items())))
    whole = [p for p, found_units in units.items() if len(found_units) > 1]
    # a group whose open rows lack a judge of the input: its tests again with every judge (the judge-mean row)
    again = [(sizes[(p, s)], (p, s, stats_table, found.asked_model_order, permutations, seed, cluster, judges))
             for p, s, _, _, named in done if p not in whole and named and named != judges]
    again += [(found.protocols[p], (p, None, stats_table, found.asked_model_order, permutations, seed, cluster,
                                    judges)) for p in whole]
    redone = {(p, s) for _, (p, s, *_) in again}
    done = [d for d in done if d[0] not in whole and (d[0], d[1]) not in redone] + \
        each(split_tests, paths, again, workers)
    table = tests_in_order([table for _, _, table, _, _ in done])
    return adjust_tests(table)


TEST_ORDER = ("wilcoxon", "friedman", "permutation", "permutation_models", "mcnemar", "mcq_vs_open",
              "mcnemar_judges")
"""The order ``significance.stats_table`` writes the kinds of tests in (Wilcoxon and Friedman of one protocol
together, in that order); within a kind, protocols come sorted."""

TEST_KEYS = {"wilcoxon": ("model", "prompt", "split"), "friedman": ("prompt", "split"),
             "permutation": ("model", "split"), "permutation_models": ("prompt", "split"),
             "mcnemar": ("prompt", "split"), "mcq_vs_open": ("model", "prompt", "split"),
             "mcnemar_judges": ("model", "prompt", "split")}
"""What ``significance.stats_table`` sorts each kind's rows of a protocol by (its contexts, sorted), before the
order a context's rows are written in."""


def tests_in_order(tables: list[pl.DataFrame]) -> pl.DataFrame:
    """The groups' tests in the single process's order: each kind (``TEST_ORDER``) for every protocol before the
    next kind, within a kind by protocol and the kind's contexts (``TEST_KEYS``: a split's contexts interleave
    with another split's), within a context as its task wrote them."""
    table = pl.concat(tables, how="vertical").with_row_index("_at")
    parts = []
    for kind in (*TEST_ORDER, None):
        part = table.filter(~pl.col("test").is_in(list(TEST_ORDER))) if kind is None else \
            table.filter(pl.col("test") == kind)
        keys = [pl.col("protocol").is_null(), "protocol", *TEST_KEYS.get(kind, ()), "_at"]
        parts.append(part.sort(keys, maintain_order=True, nulls_last=True))
    return pl.concat(parts, how="vertical").drop("_at")


def group_tests(paths: Sequence[str], protocol: str | None, stats_table, model_order: Sequence[str],
                permutations: int, seed: int, cluster: ClusterChoice) -> tuple[str | None, pl.DataFrame]:
    """The tests of one protocol (adjusted within the protocol): a task of one protocol."""
    protocol, _, table, _, _ = split_tests(paths, protocol, None, stats_table, model_order, permutations, seed,
                                           cluster)
    return protocol, table


def split_tests(paths: Sequence[str], protocol: str | None, split: str | None, stats_table,
                model_order: Sequence[str], permutations: int, seed: int, cluster: ClusterChoice,
                judges: list[str] | None = None) -> tuple[str | None, str | None, pl.DataFrame, dict[str, str],
                                                          list[str]]:
    """The tests of one protocol or one split of it (``p_adjusted`` within the group, made again on the driver),
    its resampling unit and the judges of its open rows: the body of one Ray task. ``judges``: the whole input's
    (the open tests' judge-mean row exists where the input has two judges or more)."""
    from omnieval.stats.clusters import units_used
    from omnieval.stats.open_metrics import judges_of

    frame = read_group(paths, protocol, cluster, split=split)
    table = stats_table(frame, permutations=permutations, seed=seed, cluster=cluster, model_order=list(model_order),
                        **({} if judges is None else {"judges": judges}))
    opened = frame.filter(pl.col("mode") == "open") if "mode" in frame.columns else frame.clear()
    return protocol, split, table, units_used(frame, cluster), judges_of(opened) if len(opened) else []


@dataclass
class PowerGroup:
    """What one ``omnieval power`` task sends back: its rows of the table (None: a choice of its protocol's unit
    that its split's rows alone refuse, so that the protocol is computed again as one task), the resampling unit
    its rows took, its row count and memory, and the digests of its rows' duplicate keys (``check_duplicates``)."""

    protocol: str | None
    split: str | None
    table: pl.DataFrame | None
    units: dict[str, str]
    n_predictions: int
    peak_rss_mb: float
    key_digests: np.ndarray | None = None
    prompt: str | None = None  # a power task holds every prompt of its split (what ``check_duplicates`` reads)


def ray_power(paths: Sequence[str | Path | StoredPath], power_table, cluster: ClusterChoice = None,
              workers: int | None = None, each=None, protocol: str | None = None, found: Plan | None = None,
              **options) -> pl.DataFrame:
    """``power_table`` (``power.power_table``, given by its caller, which imports this module; ``options``: its
    ``effect``, ``alpha``, ``power``, ``correlation``) with one Ray task per split of every protocol on two named
    splits or more, one per other protocol (``protocol``: that protocol's alone; ``found``: the input's ``plan``
    where the caller has it). Its rows are per protocol, prompt, split and condition, and a cell reads its own
    rows alone; two choices read more: the models' order (the whole input's multiple-choice rows,
    ``power_model_order``, handed to every task) and the protocol's resampling unit (``clusters.with_clusters``:
    the default unit's column empty in a whole split falls back to the question there, and a named unit's column
    empty in a split is refused by that split alone), so a protocol whose split tasks took different units, or
    refused their unit, is computed again as one task. A split's prompts stay together: a unit must hold a
    question's rows of every prompt of the split, which the check reads across them.
    The rows come back in ``power_table``'s order; a prediction given in two groups is refused by the driver
    (``check_duplicates``). ``each=in_process``: without Ray; an input without rows gives an empty frame."""
    each = each or _each
    found = found or plan(paths, protocol)
    order = power_model_order(paths, protocol)
    keys = []
    for name in found.protocols:
        if protocol is not None and name != protocol:
            continue
        splits = found.splits(name)
        keys += [(name, split) for split in splits] if len(splits) > 1 and None not in splits else [(name, None)]
    sizes = {key: found.groups[key] if key[1] is not None else found.protocols[key[0]] for key in keys}
    jobs = [(sizes[key], (*key, power_table, order, cluster, options)) for key in keys]
    done = each(split_power, paths, jobs, workers)
    units: dict[str | None, set] = {}
    for g in done:
        units.setdefault(g.protocol, set()).add(None if g.table is None else tuple(sorted(g.units.items())))
    whole = [name for name, taken in units.items() if len(taken) > 1 or None in taken]
    again = [(found.protocols[name], (name, None, power_table, order, cluster, options)) for name in whole]
    done = [g for g in done if g.protocol not in whole] + each(split_power, paths, again, workers)
    check_duplicates(paths, done)
    tables = [g.table for g in done if g.table is not None]
    return power_in_order(tables) if tables else pl.DataFrame()


def power_in_order(tables: list[pl.DataFrame]) -> pl.DataFrame:
    """The groups' power rows in ``power_table``'s order: by (protocol, prompt, split), within one the ``all``
    cell before the conditions, sorted (Python's order of the same keys, so that a null sorts as it would there)."""
    table = pl.concat(tables, how="vertical")
    keys = table.select("protocol", "prompt", "split", "key").rows()
    at = sorted(range(len(keys)), key=lambda i: (keys[i][:3], keys[i][3] != "all", keys[i][3]))
    return table[pl.Series(at, dtype=pl.UInt32)]


def split_power(paths: Sequence[str], protocol: str | None, split: str | None, power_table,
                model_order: Sequence[str], cluster: ClusterChoice, options: dict) -> PowerGroup:
    """The power rows of one protocol or one split of it: the body of one Ray task. A split whose rows refuse the
    protocol's unit (``with_clusters``) sends back no table: the driver computes the protocol again whole, where
    the refusal stands or not as in one process."""
    from omnieval.stats.clusters import units_used

    frame = read_group(paths, protocol, cluster, split=split)
    try:
        table = power_table(frame, cluster=cluster, model_order=list(model_order), **options)
    except InputError:
        if split is None:
            raise
        table = None
    peak = peak_rss_mb()
    return PowerGroup(protocol, split, table, units_used(without_skipped(frame), cluster), frame.height, peak,
                      _key_digests(frame))


def power_model_order(paths: Sequence[str | Path | StoredPath], protocol: str | None = None) -> tuple[str, ...]:
    """The models in order of first appearance among the rows ``power.power_table`` reads of the whole input (of
    ``protocol`` where given): asked (not ``skipped``), not open-ended (a null ``mode`` is multiple-choice), from
    those columns and ``model`` alone, batch by batch as ``plan`` reads. A cell's models are taken in this order:
    the sums behind its figures run in it."""
    from omnieval.core.schema import DEFAULT_MODE, OPEN_MODE

    models: dict[str | None, None] = {}
    for given in paths:
        for frame in _some_columns(given, ("protocol", "model", "skipped", "mode")):
            rows = without_skipped(frame)
            if protocol is not None:
                rows = rows.filter(pl.col("protocol").cast(pl.Utf8) == protocol)
            if "mode" in rows.columns:
                rows = rows.filter(pl.col("mode").cast(pl.Utf8).fill_null(DEFAULT_MODE) != OPEN_MODE)
            models.update(dict.fromkeys(rows["model"].cast(pl.Utf8).unique(maintain_order=True).to_list()))
    return tuple(models)


def _some_columns(given: str | Path | StoredPath, wanted: Sequence[str],
                  required: Sequence[str] = ("protocol", "model")):
    """The columns of ``wanted`` one file has (``required`` at least), batch by batch, a ``Renamed`` file's models
    renamed; a file that is not Parquet, or lacks a required column, goes whole through the reader, which names
    what is wrong."""
    from omnieval.stats.read import read_predictions

    path = _file_of(given)
    rename = given.rename if isinstance(given, Renamed) else (lambda frame: frame)
    names = set(_dataset(path).schema.names) if _is_parquet(path) and path.is_file() else set()
    if not set(required) <= names:
        frame = read_predictions([given.path if isinstance(given, Renamed) else given])
        yield rename(frame.select(c for c in wanted if c in frame.columns))
        return
    try:
        for batch in _dataset(path).to_batches(columns=[c for c in wanted if c in names], batch_size=1_000_000):
            yield rename(pl.from_arrow(batch))
    except Exception as exc:  # noqa: BLE001 (pyarrow's errors have no common base): named, one line
        raise InputError(f"cannot read predictions: {str(exc).splitlines()[0]}", file=path) from None


def _each(body, paths, jobs: list[tuple[int, tuple]], workers: int | None, parted: bool = False) -> list:
    """``body(paths, *args)`` for every ``(rows, args)`` of ``jobs`` as Ray tasks, the largest first, at most
    ``workers`` at a time (default: as many as the cluster's CPUs take); the results in the jobs' order.
    ``parted``: ``body`` gives a ``GroupResult`` whose bulk (a prompt task's units, the key digests: tens of bytes a
    row in all) comes back as Ray references this process never fetches: the second stage and the duplicate check
    read them in tasks of their own."""
    import ray

    uris = [_uri(p) for p in paths]
    task = ray.remote(num_cpus=1, max_retries=0, runtime_env=ONE_THREAD, num_returns=3 if parted else 1)(
        _in_its_cpus(_parted(body) if parted else body))
    waiting = sorted(range(len(jobs)), key=lambda i: -jobs[i][0])  # stable: ties keep the jobs' order
    running: dict = {}
    results: dict[int, object] = {}
    while waiting or running:
        while waiting and (workers is None or len(running) < workers):
            i = waiting.pop(0)
            refs = task.remote(uris, *jobs[i][1])
            running[refs[0] if parted else refs] = (i, refs)
        done, _ = ray.wait(list(running), num_returns=1)
        i, refs = running.pop(done[0])
        results[i] = _result(done[0])
        if parted:
            results[i].kept, results[i].key_digests = refs[1], refs[2]
    return [results[i] for i in range(len(jobs))]


def _parted(body):
    """``body``'s ``GroupResult`` as three returns: itself without its bulk, its units, its key digests."""
    def task(*args):
        result = body(*args)
        kept, digests = result.kept, result.key_digests
        result.kept = result.key_digests = None
        return result, kept, digests
    task.__name__ = task.__qualname__ = body.__name__
    return task


ONE_THREAD = {"env_vars": {"POLARS_MAX_THREADS": "1", "NUMBA_NUM_THREADS": "1"}}
"""A task's runtime environment: Ray places one task per CPU it was given, so a task that ran numba's parallel
kernels and polars' reader on every core of its node would share each core with the node's other tasks (on 1 and 2
simulated one-CPU nodes of a 2-core machine, 5 million rows: 53 s on one node and 51 s on two with every core a
task, 49 s and 29 s with one thread a task).
Ray merges these variables with the job's own runtime environment."""


def _in_its_cpus(body):
    """``body`` run with numba's threads set to the task's CPUs (``ONE_THREAD`` sets them when the worker starts;
    this holds for a worker Ray started before, for another runtime environment)."""
    def task(*args):
        import numba

        numba.set_num_threads(1)
        return body(*args)
    task.__name__ = task.__qualname__ = body.__name__
    return task


def in_process(body, paths, jobs: list[tuple[int, tuple]], workers: int | None = None,
               parted: bool = False) -> list:
    """``_each`` without Ray: the jobs one after the other in this process (what the tests compare)."""
    return [body(list(paths), *args) for _, args in jobs]


def _result(ref) -> GroupResult:
    """A task's result; a row the reader refuses comes back as its one-line ``InputError``, not a Ray traceback."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, InputError):
            raise exc.cause from None
        raise


def connect(address: str | None, num_cpus: int | None = None) -> bool:
    """A Ray for the tasks when this process has none: the cluster at ``address``, else a local one with
    ``num_cpus`` (default: the machine's cores). True when this call connected (the caller shuts it down). The
    command line connects before, through ``run.ray_start`` (its notices and retries on a busy machine); this is
    for a library caller."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    return True
