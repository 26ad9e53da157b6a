"""``omnieval metrics``: predictions files -> the long metrics table with clustered bootstrap CIs (SPEC 1.4, 2).

How it flows (DESIGN decision 5):

1. ``read_predictions`` reads Parquet / JSONL / CSV with the SPEC 1.3 columns (unknown columns kept; a missing
   required column is an ``InputError`` naming file and column) and derives the row flags every protocol shares:
   ``valid`` (choice not null), ``correct``, ``abstained``, ``human_abstain``, ``invalid``, ``has_conf``, and
   ``errored`` / ``answered`` / ``error_kind``: a row whose ``error`` is set (media that failed to decode, an
   engine or describer failure) never reached the model, or its answer never came back, so it is not the model's
   answer: it stays out of every accuracy, abstention, calibration and invalid-rate denominator and is counted in
   ``error_rate`` instead (``with_error_rates``).
2. Per protocol, a ``ProtocolMetrics`` spec from ``REGISTRY`` names its **cell families** (a cell = the mean of one
   column over the rows of one unit x key, e.g. correctness per condition) and one function from those cells to
   metric rows. A unit is model x prompt x split; items (``item_id``) are the resampling clusters.
3. Per unit, one bootstrap pass (``kernels.bootstrap``) resamples items and yields every cell's resampled sum and
   count at once; row 0 is the data itself. The protocol's metric function runs once on all rows (vectorised over
   the resample axis), so adding a metric never adds a pass. ECE and RC-AUC, which depend on the ranking of
   instances rather than on cell means, are evaluated on the same resamples' item multiplicities
   (``kernels.calibration``). The 95% percentile interval comes from resamples 1..R.

A protocol plugs in with ``register(ProtocolMetrics(...))``; its formulas live in its own module under
``omnieval/protocols``. Randomness: resample r of a unit uses the counter stream ``(seed, hash(protocol, split), r)``,
so models and prompts on the same items of a split get the same resamples (paired), for any thread count: such
units are always index-resampled (``shared_item_sets``), which is what ``omnieval.paired`` reads differences from.
"""

from __future__ import annotations

import io
import itertools
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from kernels.bootstrap import cluster_sums, pattern_sums, percentile_interval, resample_sums
from kernels.calibration import calibration_weighted, restricted_softmax
from omnieval.keyed import keyed_seed
from omnieval.open_metrics import open_rows
from omnieval.schema import ERROR_KIND_NAMES, ERROR_KINDS, LABELS, REQUIRED_COLUMNS, InputError
from omnieval.store import StoredPath, local_folder, readable, stored_path

UNIT = ("model", "prompt", "split")
TABLE_COLUMNS = ("protocol", "model", "prompt", "split", "metric", "key", "value", "ci_low", "ci_high", "n",
                 "n_items")
CONFIDENCE_LEVEL = 0.95
N_BINS = 10
_CHUNK_CELLS = 4_000_000  # resamples x items held at once as int32 multiplicities (16 MB)
_SEP = "\x1f"

MetricRow = tuple[str, str, np.ndarray, int]
"""(metric, key, values over rows [data, resample 1, ..., resample R], n)."""

UnitHook = Callable[["ProtocolMetrics", "UnitData", list[MetricRow], np.ndarray], None]
"""Called once per unit with its spec, cells, metric rows and their values (metric x row): how paired differences
(``omnieval.paired``) read every unit's resamples from the same pass as the table."""


@dataclass(frozen=True)
class CellFamily:
    """Cells ``name|key``: the mean of column ``value`` over the rows where ``where`` holds, one cell per distinct
    value of the ``by`` columns. A family whose ``by`` column is absent from the input is skipped."""

    name: str
    value: str
    where: str | None = None
    by: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProtocolMetrics:
    """What ``omnieval metrics`` needs from a protocol: its cells, its metric function, its calibration.

    ``derive`` adds protocol columns to the prepared frame (e.g. the corruption level from the condition);
    ``conditions``, if given, is the set of valid condition names (checked per input file);
    ``calibration``: ECE and RC-AUC per confidence method over the rows where the column ``has_conf`` holds.
    """

    name: str
    families: tuple[CellFamily, ...]
    metrics: Callable[[Cells], Iterable[MetricRow]]
    derive: Callable[[pl.DataFrame], pl.DataFrame] | None = None
    conditions: tuple[str, ...] | None = None
    calibration: bool = False


REGISTRY: dict[str, ProtocolMetrics] = {}


def register(spec: ProtocolMetrics) -> None:
    """Add (or replace) a protocol's metric definitions."""
    REGISTRY[spec.name] = spec


@dataclass
class Cells:
    """Resampled cell sums and counts of one unit. Row 0 is the data, rows 1..R the bootstrap resamples.

    ``methods``: the confidence methods present in the protocol's input (confidence metrics carry a ``@method``
    key suffix when there are several: they are never pooled).
    """

    sums: np.ndarray
    counts: np.ndarray
    index: dict[tuple[str, ...], int]
    stats: dict[tuple[str, ...], tuple[np.ndarray, int]] = field(default_factory=dict)
    methods: tuple[str, ...] = ()

    def has(self, family: str, *key: str) -> bool:
        return (family, *key) in self.index

    def keys(self, family: str) -> list[tuple[str, ...]]:
        """Keys of a family present in this unit, sorted."""
        return sorted(k[1:] for k in self.index if k[0] == family)

    def sum(self, family: str, *key: str) -> np.ndarray:
        return self.sums[:, self.index[(family, *key)]]

    def count(self, family: str, *key: str) -> np.ndarray:
        return self.counts[:, self.index[(family, *key)]]

    def mean(self, family: str, *key: str) -> np.ndarray:
        """Cell mean on every row (NaN where a resample drew no row of the cell)."""
        c = self.count(family, *key)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(c > 0, self.sum(family, *key) / np.where(c > 0, c, 1), np.nan)

    def n(self, family: str, *key: str) -> int:
        """Rows behind the cell in the data (row 0)."""
        return int(self.count(family, *key)[0])

    def stat(self, name: str, *key: str) -> tuple[np.ndarray, int]:
        """An instance-level statistic (``ece`` / ``rc_auc`` per method): values over rows, and its n."""
        return self.stats[(name, *key)]

    def method_suffix(self, method: str) -> str:
        return f"@{method}" if len(self.methods) > 1 else ""


# ---------------------------------------------------------------------------------------------------------------
# Reading predictions
# ---------------------------------------------------------------------------------------------------------------

def _read_one(path: Path | StoredPath) -> pl.DataFrame:
    """One predictions file, local or wherever a run can write (``s3://``, ``gs://``: ``omnieval.store``)."""
    try:
        if not path.is_file():
            raise InputError("no such predictions file", file=path)
        source = readable(path)
    except OSError as exc:  # the filesystem cannot be reached (credentials, endpoint)
        raise InputError(f"cannot reach predictions file: {exc}", file=path) from exc
    data = source.read_bytes() if isinstance(source, Path) else source.getvalue()
    if not data:
        raise InputError("empty file: no predictions", file=path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            return pl.read_parquet(io.BytesIO(data))
        if suffix in (".jsonl", ".ndjson", ".json"):
            return pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        if suffix == ".csv":
            # polars calls a header alone an "empty CSV"
            if len(list(itertools.islice((line for line in data.splitlines() if line.strip()), 2))) < 2:
                raise InputError("no predictions in the file (zero rows)", file=path)
            return pl.read_csv(io.BytesIO(data), infer_schema=False)  # all strings; typed below (ids stay strings)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"cannot read predictions: {exc}", file=path) from exc
    raise InputError(f"unsupported predictions format {suffix!r} (use .parquet, .jsonl or .csv)", file=path)


def _normalise(frame: pl.DataFrame, path: Path | StoredPath) -> pl.DataFrame:
    """Required columns present and typed; confidence in [0, 1]; protocol conditions known; rows checked by
    ``_check_rows``."""
    if frame.height == 0:
        raise InputError("no predictions in the file (zero rows)", file=path)
    for column in REQUIRED_COLUMNS:
        if column not in frame.columns:
            raise InputError(f"missing required column {column!r}", file=path, field=column)
    casts = {c: pl.Utf8 for c in REQUIRED_COLUMNS if c != "confidence"}
    casts.update({"confidence": pl.Float64, **{c: pl.Int64 for c in ("k", "n_options") if c in frame.columns}})
    for column in ("anchor", "task", "subtask", "category", "error"):
        if column in frame.columns:
            casts[column] = pl.Utf8
    for column, dtype in casts.items():
        try:
            frame = frame.with_columns(pl.col(column).cast(dtype))
        except pl.exceptions.PolarsError as exc:
            raise InputError(f"column {column!r} cannot be read as {dtype}: {exc}", file=path, field=column) \
                from exc
    conf = frame["confidence"].drop_nulls()
    if len(conf) and (conf.min() < 0.0 or conf.max() > 1.0 or conf.is_nan().any()):
        raise InputError("confidence must lie in [0, 1]", file=path, field="confidence")
    for name, spec in REGISTRY.items():
        if spec.conditions is None:
            continue
        bad = frame.filter((pl.col("protocol") == name) & ~pl.col("condition").is_in(list(spec.conditions)))
        if len(bad):
            raise InputError(f"unknown {name} condition {bad['condition'][0]!r} (expected one of "
                             f"{', '.join(spec.conditions)})", file=path, field="condition")
    _check_rows(frame, path)
    return frame


def _first_bad(frame: pl.DataFrame, bad: pl.Expr) -> dict | None:
    """The first row where ``bad`` holds (null counts as bad), with ``where`` = ``"row N"`` (rows counted from 1
    in the file's order; in a CSV file, row N is on line N + 1), or None."""
    hit = frame.with_row_index("_row", offset=1).filter(bad.fill_null(True)).head(1)
    return None if hit.is_empty() else hit.row(0, named=True) | {"where": f"row {hit['_row'][0]}"}


def _check_rows(frame: pl.DataFrame, path: Path) -> None:
    """Refuse rows that would otherwise give a silently wrong number (each error names file, row and column).

    * ``protocol`` not one with metric definitions: its rows would get none of the protocol's metrics;
    * ``target`` null: every answer to it would count as wrong;
    * ``target`` or ``choice`` not an option label of its instance: the first ``n_options`` letters of A, B, C, ...
      where the file gives ``n_options``, else any single capital letter. A choice outside them can only be a
      parsing or bookkeeping mistake of the tool that wrote the file; scoring it as wrong (or as invalid) would
      hide that mistake in an accuracy, so it is refused: fix the file, or set the choice to null to count it as
      an invalid answer. Open-ended rows (``mode == 'open'``) have no choice and are not checked for one.
    """
    known = sorted(REGISTRY)
    if row := _first_bad(frame, ~pl.col("protocol").is_in(known)):
        raise InputError(f"{row['where']}: unknown protocol {row['protocol']!r}; metrics are defined for "
                         f"{', '.join(known)}", file=path, item=row["where"], field="protocol")
    if row := _first_bad(frame, pl.col("target").is_null()):
        raise InputError(f"{row['where']}: target is null (every answer to it would count as wrong)", file=path,
                         item=row["where"], field="target")
    if "n_options" in frame.columns:
        n = pl.col("n_options")
        if row := _first_bad(frame, n.is_not_null() & ((n < 1) | (n > len(LABELS)))):
            raise InputError(f"{row['where']}: n_options {row['n_options']} is not between 1 and {len(LABELS)}",
                             file=path, item=row["where"], field="n_options")
        labels = pl.lit(LABELS).str.slice(0, n.fill_null(len(LABELS)))
    else:
        labels = pl.lit(LABELS)
    is_open = (pl.col("mode") == "open").fill_null(False) if "mode" in frame.columns else pl.lit(False)
    for column, skip in (("target", pl.lit(False)), ("choice", pl.col("choice").is_null() | is_open)):
        value = pl.col(column)
        if row := _first_bad(frame, ~skip & ((value.str.len_chars() != 1)
                                             | ~labels.str.contains(value, literal=True))):
            count = row.get("n_options")
            allowed = ", ".join(LABELS[:count]) if count else f"one capital letter {LABELS[0]}-{LABELS[-1]}"
            raise InputError(f"{row['where']}: {column} {row[column]!r} is not an option label of its instance "
                             f"(labels: {allowed})", file=path, item=row["where"], field=column)


def _check_duplicates(frame: pl.DataFrame) -> None:
    """One prediction per (model, prompt, mode, instance_id): a file given twice, or a row written twice, would
    double every count."""
    keys = ["model", "prompt", "_mode", "instance_id"]
    keyed = frame.with_columns(_mode=pl.col("mode").fill_null("mcq") if "mode" in frame.columns else pl.lit("mcq"))
    dup = keyed.filter(pl.len().over(keys) > 1)
    if dup.is_empty():
        return
    first = dup.filter(pl.struct(keys) == dup.select(pl.struct(keys)).row(0)[0]).head(2).to_dicts()
    a, b = first
    raise InputError(f"duplicate prediction for model {a['model']!r}, prompt {a['prompt']!r}, mode {a['_mode']!r},"
                     f" instance {a['instance_id']!r}: {a['_file']} row {a['_row']} and {b['_file']} row "
                     f"{b['_row']} (the same file given twice?)", file=b["_file"], item=f"row {b['_row']}",
                     field="instance_id")


def _fill_confidence_from_logprobs(frame: pl.DataFrame) -> pl.DataFrame:
    """Where ``confidence`` is null but ``option_logprobs`` are given, use the restricted softmax value of the
    chosen label (method ``rs``), as the engines do when they score from logits (SPEC section 7)."""
    if "option_logprobs" not in frame.columns or not isinstance(frame.schema["option_logprobs"], pl.List):
        return frame
    need = (pl.col("confidence").is_null() & pl.col("choice").is_not_null()
            & pl.col("option_logprobs").list.len().fill_null(0).gt(0))
    rows = frame.with_row_index("_row").filter(need)
    if not len(rows):
        return frame
    lists = rows["option_logprobs"].to_list()
    width = max(len(x) for x in lists)
    logprobs = np.full((len(lists), width), np.nan)
    for i, values in enumerate(lists):
        logprobs[i, : len(values)] = [np.nan if v is None else v for v in values]
    probs = restricted_softmax(logprobs)
    label = np.array([LABELS.find(c) if isinstance(c, str) and len(c) == 1 else -1 for c in rows["choice"]])
    ok = (label >= 0) & (label < width)
    conf = np.full(len(lists), np.nan)
    conf[ok] = probs[np.nonzero(ok)[0], label[ok]]
    fill = pl.DataFrame({"_row": rows["_row"], "_conf": conf}).filter(pl.col("_conf").is_not_nan())
    out = frame.with_row_index("_row").join(fill, on="_row", how="left")
    return out.with_columns(
        confidence=pl.coalesce("confidence", "_conf"),
        confidence_method=pl.when(pl.col("_conf").is_not_null() & pl.col("confidence_method").is_null())
        .then(pl.lit("rs")).otherwise(pl.col("confidence_method")),
    ).drop("_row", "_conf")


def read_predictions(paths: Iterable[str | Path | StoredPath]) -> pl.DataFrame:
    """Concatenate predictions files, local paths or URIs (columns missing from some files become null; extra
    columns are kept)."""
    _load_protocols()
    frames = [_normalise(_read_one(path), path).with_columns(
        _file=pl.lit(str(path)), _row=pl.int_range(1, pl.len() + 1)) for path in map(stored_path, paths)]
    if not frames:
        raise InputError("no predictions files given")
    frame = pl.concat(frames, how="diagonal_relaxed")
    _check_duplicates(frame)
    return _fill_confidence_from_logprobs(frame.drop("_file", "_row"))


def _error_flags(frame: pl.DataFrame) -> dict[str, pl.Expr]:
    """``errored``, ``error_kind`` and one 0/1 column ``_error_<kind>`` per kind (the cells of ``error_rate``)."""
    if "error" not in frame.columns:
        kind = pl.lit(None, dtype=pl.Utf8)
    else:
        message = pl.col("error").cast(pl.Utf8)
        kind = pl.when(message.is_null() | (message.str.strip_chars() == "")).then(pl.lit(None, dtype=pl.Utf8))
        for prefix, name in ERROR_KINDS:
            kind = kind.when(message.str.starts_with(prefix)).then(pl.lit(name))
        kind = kind.otherwise(pl.lit("other"))
    flags = {"error_kind": kind, "errored": kind.is_not_null()}
    flags.update({f"_error_{name}": (kind == name).fill_null(False) for name in ERROR_KIND_NAMES})
    return flags


def prepare(frame: pl.DataFrame) -> pl.DataFrame:
    """Row flags shared by every protocol. ``answered``: the row has no ``error``; ``valid``: answered with a
    choice; ``invalid``: answered without one (unparseable). Invalid rows are excluded from accuracy, abstention
    and calibration and counted in ``invalid_rate``; errored rows are excluded from all of those, ``invalid_rate``
    included, and counted in ``error_rate``."""
    frame = frame.with_columns(**_error_flags(frame))
    answered = ~pl.col("errored")
    valid = answered & pl.col("choice").is_not_null()
    return frame.with_columns(
        answered=answered,
        valid=valid,
        invalid=answered & pl.col("choice").is_null(),
        correct=valid & (pl.col("choice") == pl.col("target")).fill_null(False),
        abstained=valid & (pl.col("choice") == pl.col("abstain_label")).fill_null(False),
        human_abstain=(pl.col("target") == pl.col("abstain_label")).fill_null(False),
        has_conf=valid & pl.col("confidence").is_not_null(),
        conf_method=pl.col("confidence_method").fill_null("unknown"),
        mode=pl.col("mode").fill_null("mcq") if "mode" in frame.columns else pl.lit("mcq"),
    )


# ---------------------------------------------------------------------------------------------------------------
# One unit: per-item cell matrix -> one bootstrap pass
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class UnitData:
    """Per-item sums and counts of every cell of one unit, and the instances behind its calibration."""

    key: tuple[str, ...]
    n_items: int
    cells: list[tuple[str, ...]]
    sums: np.ndarray  # (items, cells)
    counts: np.ndarray  # (items, cells)
    calibration: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # method -> (item, conf, correct)
    item_ids: tuple[str, ...] = ()  # sorted: row i of ``sums`` is item ``item_ids[i]``


def _cell_rows(frame: pl.DataFrame, families: Iterable[CellFamily]) -> pl.DataFrame:
    """Long table ``(unit..., item, cell, s, c)`` over all families, by polars group-bys on the whole frame."""
    parts = []
    for fam in families:
        if any(b not in frame.columns for b in fam.by) or fam.value not in frame.columns:
            continue
        sel = frame if fam.where is None else frame.filter(pl.col(fam.where))
        keys = [pl.lit(fam.name), *(pl.col(b).cast(pl.Utf8) for b in fam.by)]
        parts.append(
            sel.group_by([*UNIT, "_item", *fam.by])
            .agg(s=pl.col(fam.value).cast(pl.Float64).sum(), c=pl.len().cast(pl.Float64))
            .select(*UNIT, "_item", pl.concat_str(keys, separator=_SEP).alias("cell"), "s", "c")
            .drop_nulls("cell")
        )
    if not parts:
        return pl.DataFrame(schema={**{u: pl.Utf8 for u in UNIT}, "_item": pl.UInt32, "cell": pl.Utf8,
                                    "s": pl.Float64, "c": pl.Float64})
    return pl.concat(parts)


def unit_data(frame: pl.DataFrame, spec: ProtocolMetrics) -> list[UnitData]:
    """Split a prepared protocol frame into units with their per-item cell matrices (items sorted by item_id)."""
    frame = frame.with_columns(_item=(pl.col("item_id").rank("dense").over(list(UNIT)) - 1).cast(pl.UInt32))
    sizes = frame.group_by(list(UNIT)).agg(n=pl.col("_item").max() + 1,
                                           ids=pl.col("item_id").unique().sort())
    cells = {k: g for k, g in _cell_rows(frame, spec.families).partition_by(list(UNIT), as_dict=True).items()}
    calib: dict[tuple, pl.DataFrame] = {}
    if spec.calibration:
        calib = frame.filter("has_conf").partition_by(list(UNIT), as_dict=True)
    out = []
    for row in sizes.sort(list(UNIT)).iter_rows(named=True):
        key = tuple(row[u] for u in UNIT)
        n = int(row["n"])
        long = cells.get(key)
        names: list[tuple[str, ...]] = []
        sums = np.zeros((n, 0))
        counts = np.zeros((n, 0))
        if long is not None:
            names_raw = sorted(long["cell"].unique().to_list())
            j = long["cell"].cast(pl.Enum(names_raw)).to_physical().to_numpy().astype(np.int64)
            i = long["_item"].to_numpy().astype(np.int64)
            sums = np.zeros((n, len(names_raw)))
            counts = np.zeros((n, len(names_raw)))
            np.add.at(sums, (i, j), long["s"].to_numpy())
            np.add.at(counts, (i, j), long["c"].to_numpy())
            names = [tuple(name.split(_SEP)) for name in names_raw]
        calibration = {}
        if key in calib:
            for (method,), g in calib[key].partition_by("conf_method", as_dict=True).items():
                calibration[method] = (g["_item"].to_numpy().astype(np.int64),
                                       g["confidence"].to_numpy().astype(np.float64),
                                       g["correct"].to_numpy().astype(np.float64))
        out.append(UnitData(key, n, names, sums, counts, calibration, tuple(row["ids"])))
    return out


def _compress(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct non-constant columns of ``values`` (items x channels): constant channels (e.g. one instance per
    item and condition) resample to ``n * constant`` and duplicated channels to the same sums, so neither needs to
    be resampled. Returns ``(distinct, inverse, constant_mask, constant_values)``."""
    const = np.all(values == values[:1], axis=0) if len(values) else np.ones(values.shape[1], bool)
    varying = values[:, ~const]
    if varying.shape[1]:
        distinct, inverse = np.unique(varying, axis=1, return_inverse=True)
    else:
        distinct, inverse = varying, np.zeros(0, dtype=np.int64)
    return (np.ascontiguousarray(distinct), inverse.reshape(-1),
            const, values[0, const] if len(values) else np.zeros(int(const.sum())))


def _csr(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(indptr, indices, data, n_cols)`` of a dense items x channels matrix (for ``resample_sums``)."""
    items, cols = np.nonzero(values)
    indptr = np.searchsorted(items, np.arange(values.shape[0] + 1)).astype(np.int64)
    return indptr, cols.astype(np.int64), np.ascontiguousarray(values[items, cols]), values.shape[1]


_SPARSE = 0.03
"""Non-integer channels with non-zeros on fewer than this share of items go to the sparse (CSR) part of index
resampling, which costs per non-zero (~10 ns: a branch and a scattered addition). Integer channels, sparse or not,
are packed several to a 64-bit word (``kernels.bootstrap``), which costs ~0.1 ns per word and item: cheaper even
for one cell per anchor among hundreds of items."""


def _pattern_shortcut(distinct: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(patterns, counts)`` when the pattern shortcut is cheaper than index resampling for these per-item rows.

    Both are exact; the choice is speed only. Rough per-resample costs (ns, measured on 2 cores): the shortcut
    ~(3 + 0.3 channels) per pattern plus ~4.5 sqrt(n) for the Poissonised multinomial's corrections; index
    resampling ~(1 + 0.4 packed words) per item. Only integer rows qualify (counts and 0/1 outcomes), so every
    resampled sum stays an exact integer.
    """
    if n == 0 or distinct.shape[1] == 0 or not np.all(distinct == np.round(distinct)):
        return None
    spans = distinct.max(axis=0) - distinct.min(axis=0)
    bits = sum(int(n * s).bit_length() for s in spans)
    index_cost = n * (1.0 + 0.4 * np.ceil(bits / 56))
    patterns, counts = np.unique(distinct, axis=0, return_counts=True)
    k = len(patterns)
    pattern_cost = k * (3.0 + 0.3 * distinct.shape[1]) + (4.5 * np.sqrt(n) if k > 2 else 0.0)
    if pattern_cost >= index_cost:
        return None
    return np.ascontiguousarray(patterns), counts.astype(np.int64)


def bootstrap_unit(unit: UnitData, resamples: int, seed: int, stream: int,
                   shortcut: bool = True) -> tuple[np.ndarray, dict]:
    """Rows [data, resample 1..R] of every channel (sums then counts) and of each calibration statistic.

    The channel matrix comes back Fortran-ordered (each channel's rows contiguous), the layout the metric
    functions read. Sums-only resampling (no item multiplicity matrix) whenever no calibration statistic needs one.
    ``shortcut=False`` forbids the pattern shortcut: index resampling draws the same items for every unit on the
    same items and stream, which is what makes two units' resamples paired; the shortcut's multinomial over one
    unit's own patterns does not.
    """
    values = np.hstack([unit.sums, unit.counts])
    n = unit.n_items
    distinct, inverse, const, const_values = _compress(values)
    seed_u, stream_u = np.uint64(seed % 2**64), np.uint64(stream % 2**64)
    rows_t = np.empty((distinct.shape[1], resamples + 1))  # channel x row
    rows_t[:, 0] = distinct.sum(axis=0)
    calib = {m: [np.empty(resamples + 1), np.empty(resamples + 1)] for m in unit.calibration}
    ones = np.ones((1, n), dtype=np.int32)
    for method, (item, conf, correct) in unit.calibration.items():
        e, a = calibration_weighted(ones, item, conf, correct, N_BINS)
        calib[method][0][0], calib[method][1][0] = e[0], a[0]
    if resamples and (distinct.shape[1] or unit.calibration):
        patterns = None if unit.calibration or not shortcut else _pattern_shortcut(distinct, n)
        if patterns is not None:
            rows_t[:, 1:] = pattern_sums(patterns[0], patterns[1], 0, resamples, seed_u, stream_u).T
        else:
            sparse = ((distinct != 0).mean(axis=0) < _SPARSE) & np.any(distinct != np.round(distinct), axis=0) \
                if n else np.zeros(distinct.shape[1], bool)
            order = np.concatenate([np.nonzero(~sparse)[0], np.nonzero(sparse)[0]])  # channels as resampled
            dense = np.ascontiguousarray(distinct[:, ~sparse])
            csr = _csr(distinct[:, sparse])
            if not unit.calibration:
                rows_t[order, 1:] = cluster_sums(dense, 0, resamples, seed_u, stream_u, csr).T
            step = max(1, _CHUNK_CELLS // max(n, 1))
            for r0 in range(0, resamples if unit.calibration else 0, step):
                r1 = min(resamples, r0 + step)
                w, sums = resample_sums(dense, r0, r1, seed_u, stream_u, csr)
                rows_t[order, 1 + r0:1 + r1] = sums.T
                for method, (item, conf, correct) in unit.calibration.items():
                    e, a = calibration_weighted(w, item, conf, correct, N_BINS)
                    calib[method][0][1 + r0:1 + r1], calib[method][1][1 + r0:1 + r1] = e, a
    full_t = np.empty((values.shape[1], resamples + 1))
    full_t[np.nonzero(~const)[0]] = rows_t[inverse]
    full_t[np.nonzero(const)[0]] = (n * const_values)[:, None]
    return full_t.T, calib


# ---------------------------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------------------------

def shared_item_sets(units: list[UnitData]) -> set[tuple[str, ...]]:
    """Keys of the units that share their split and their exact set of items with another unit: their resamples
    must be paired (same items drawn), so they are never resampled through the pattern shortcut."""
    seen: dict[tuple, list[tuple[str, ...]]] = {}
    for unit in units:
        seen.setdefault((unit.key[2], unit.item_ids), []).append(unit.key)
    return {key for keys in seen.values() if len(keys) > 1 for key in keys}


def _protocol_rows(frame: pl.DataFrame, spec: ProtocolMetrics, resamples: int, seed: int,
                   on_unit: UnitHook | None = None) -> list[dict]:
    methods = tuple(sorted(frame.filter("has_conf")["conf_method"].unique().to_list()))
    out: list[dict] = []
    units = unit_data(frame, spec)
    paired = shared_item_sets(units)
    for unit in units:
        stream = keyed_seed(0, "bootstrap", spec.name, unit.key[2])
        full, calib = bootstrap_unit(unit, resamples, seed, stream, shortcut=unit.key not in paired)
        n_cells = len(unit.cells)
        cells = Cells(sums=full[:, :n_cells], counts=full[:, n_cells:],
                      index={name: i for i, name in enumerate(unit.cells)}, methods=methods)
        for method, (ece, auc) in calib.items():
            n = len(unit.calibration[method][0])
            cells.stats[("ece", method)] = (ece, n)
            cells.stats[("rc_auc", method)] = (auc, n)
        rows = list(spec.metrics(cells))
        if not rows:
            continue
        values = np.empty((len(rows), resamples + 1))  # metric x row: each metric's resamples contiguous
        for j, r in enumerate(rows):
            values[j] = r[2]
        if resamples:
            alpha = (1 - CONFIDENCE_LEVEL) / 2
            low, high = percentile_interval(values[:, 1:].T, alpha, 1 - alpha)
        else:
            low = high = np.full(len(rows), np.nan)
        if on_unit is not None:
            on_unit(spec, unit, rows, values)
        model, prompt, split = unit.key
        for j, (metric, key, _, n) in enumerate(rows):
            out.append({"protocol": spec.name, "model": model, "prompt": prompt, "split": split, "metric": metric,
                        "key": key, "value": _num(values[j, 0]), "ci_low": _num(low[j]),
                        "ci_high": _num(high[j]), "n": int(n), "n_items": unit.n_items})
    return out


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)


def with_error_rates(spec: ProtocolMetrics, kinds: Iterable[str], metric: str = "error_rate",
                     where: str | None = None) -> ProtocolMetrics:
    """``spec`` plus the error rates of its units: ``<metric>`` with key ``""`` (every kind together) and one key
    per kind in ``kinds``, each the share of the unit's rows (those where ``where`` holds) whose ``error`` is of
    that kind. They are cell means like any rate, so they get their CI from the same bootstrap pass."""
    kinds = tuple(kinds)
    families = (CellFamily("_error", "errored", where),
                *(CellFamily(f"_error_{kind}", f"_error_{kind}", where) for kind in kinds))

    def metrics(cells: Cells) -> Iterable[MetricRow]:
        yield from spec.metrics(cells)
        if cells.has("_error"):
            yield metric, "", cells.mean("_error"), cells.n("_error")
        for kind in kinds:
            if cells.has(f"_error_{kind}"):
                yield metric, kind, cells.mean(f"_error_{kind}"), cells.n(f"_error_{kind}")

    return replace(spec, families=spec.families + families, metrics=metrics)


def error_kinds_present(frame: pl.DataFrame) -> list[str]:
    """The error kinds of a prepared frame, in ``ERROR_KIND_NAMES`` order."""
    present = set(frame["error_kind"].drop_nulls().unique().to_list())
    return [kind for kind in ERROR_KIND_NAMES if kind in present]


def metrics_table(predictions: pl.DataFrame, resamples: int = 10_000, seed: int = 0,
                  on_unit: UnitHook | None = None) -> pl.DataFrame:
    """The long metrics table (SPEC 1.4) of a predictions frame (as returned by ``read_predictions``).

    ``n_items`` is the number of items (the resampling clusters) of the unit whose bootstrap gave the interval.
    ``on_unit`` sees every unit's resampled metric values (``UnitHook``)."""
    _load_protocols()
    frame = prepare(predictions)
    rows: list[dict] = []
    for protocol in sorted(frame["protocol"].unique().drop_nulls().to_list()):
        spec = REGISTRY.get(protocol)
        if spec is None:  # read_predictions refuses these with file and row; a frame built in code ends here
            raise InputError(f"unknown protocol {protocol!r}; metrics are defined for {', '.join(sorted(REGISTRY))}",
                             field="protocol")
        part = frame.filter(pl.col("protocol") == protocol)
        if spec.derive is not None:
            part = spec.derive(part)
        mcq = part.filter(pl.col("mode") != "open")
        spec = with_error_rates(spec, error_kinds_present(mcq))
        rows.extend(_protocol_rows(mcq, spec, resamples, seed, on_unit))
        rows.extend(open_rows(part, protocol, resamples, seed, on_unit))
    schema = {c: pl.Utf8 for c in TABLE_COLUMNS[:6]} | {"value": pl.Float64, "ci_low": pl.Float64,
                                                         "ci_high": pl.Float64, "n": pl.Int64, "n_items": pl.Int64}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def compute_metrics(paths: Iterable[str | Path], resamples: int = 10_000, seed: int = 0) -> pl.DataFrame:
    """Library entry point: predictions files -> metrics table."""
    _load_protocols()
    return metrics_table(read_predictions(paths), resamples=resamples, seed=seed)


def _load_protocols() -> None:
    """Import the protocol modules that register metric definitions (idempotent)."""
    from omnieval.protocols import PROTOCOLS, get_protocol

    for name in PROTOCOLS:
        if name not in REGISTRY:
            register(get_protocol(name).metrics_spec())


def _absolute(path: str | Path) -> str:
    """A predictions path as recorded in ``metrics.json``: absolute (the report reads it from any folder), a URI as
    given."""
    return str(path) if "://" in str(path) else str(Path(path).resolve())


def metrics_command(paths: list[str], out: str, resamples: int = 10_000, seed: int = 0,
                    permutations: int = 10_000) -> int:
    """Write ``metrics.csv``, ``metrics.parquet`` and ``metrics.json`` (with seed and resample count) to ``out``,
    and the paired differences of the same pass (``omnieval.paired``) as ``paired.csv`` and ``paired.parquet``."""
    from omnieval.paired import metrics_and_paired

    start = time.perf_counter()
    _load_protocols()
    predictions = read_predictions(paths)
    table, paired = metrics_and_paired(predictions, resamples=resamples, seed=seed, permutations=permutations)
    folder = local_folder(out)
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
    from omnieval.headlines import headline_tables, render

    print(render(headline_tables(table)))
    print(f"\nomnieval metrics: {len(table)} rows and {len(paired)} paired differences from {len(predictions)} "
          f"predictions in {time.perf_counter() - start:.1f} s -> {folder} (every metric: {folder / 'metrics.csv'}; "
          "definitions: docs/reference.md)")
    return 0
