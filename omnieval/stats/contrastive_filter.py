"""Mixture-of-models round-trip-consistency filter (MoM-RTC; docs/reference.md, Protocol
`contrastive`; Contra4 step 4 and its Algorithm 1).

Input: the predictions of an ensemble of models on every order of every candidate item (the ``contrastive`` protocol
with ``Options(permutations="all", captions=True, media=False)``: captions as text). For each item and each order
evaluated for it (``original`` and ``perm:...``), a model *agrees* when its choice is that instance's target, i.e. it
picks the item's answer wherever that order put it. An invalid answer, or no prediction at all from an ensemble
model, is not agreement. With M models:

* ``MF``: more than half of the M models agree on ``original`` (a strict majority: M = 4 with 2 agreeing is a tie and
  fails; for the paper's 3 models this is its plurality vote with ties failing);
* ``UF``: all M agree on ``original``;
* ``PMF``: a strict majority agrees on every order evaluated for the item (``original`` included);
* ``PUF``: all M agree on every order.

An item with no ``original`` prediction fails every criterion. Rows come from the caption baseline (``captions:``
conditions) when the table has any, else from all rows; one prompt style at a time.

Outputs: per-item decisions (``rtc_filter``) and the retention table: for every criterion x ``n_inputs`` (2, 3, 4,
``all``) x ``selection_type`` (``random``, ``similar``, ``all``), the candidate count, the kept count and their
ratio (paper Table 5). ``filter_command`` writes them with the kept items of each criterion.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from omnieval.core.schema import InputError, pydantic_message

CRITERIA: tuple[str, ...] = ("MF", "UF", "PMF", "PUF")
CAPTIONS_PREFIX = "captions:"
ORIGINAL = "original"


@dataclass
class RTCResult:
    """``decisions``: one row per item (``item_id``, ``n_inputs``, ``selection_type``, ``n_models``, ``n_orders``,
    ``agree_original``, ``MF``, ``UF``, ``PMF``, ``PUF``); ``retention``: criterion x n x selection type."""

    decisions: pl.DataFrame
    retention: pl.DataFrame
    models: list[str]
    prompt: str | None


def _rows(predictions: pl.DataFrame, prompt: str | None) -> tuple[pl.DataFrame, str | None]:
    frame = predictions
    if "protocol" in frame.columns:
        frame = frame.filter(pl.col("protocol").is_null() | (pl.col("protocol") == "contrastive"))
    if frame["condition"].str.starts_with(CAPTIONS_PREFIX).any():
        frame = frame.filter(pl.col("condition").str.starts_with(CAPTIONS_PREFIX)).with_columns(
            condition=pl.col("condition").str.slice(len(CAPTIONS_PREFIX)))
    if "prompt" in frame.columns:
        styles = sorted(frame["prompt"].drop_nulls().unique().to_list())
        if prompt is None and len(styles) > 1:
            raise InputError(f"predictions hold several prompt styles ({', '.join(styles)}): choose one",
                             field="prompt")
        prompt = prompt if prompt is not None else (styles[0] if styles else None)
        if prompt is not None:
            frame = frame.filter(pl.col("prompt") == prompt)
    return frame, prompt


def rtc_filter(predictions: pl.DataFrame, items: Sequence | None = None, models: Sequence[str] | None = None,
               prompt: str | None = None) -> RTCResult:
    """Per-item MF / UF / PMF / PUF decisions and the retention table (see the module doc).

    ``items``: the candidate items (``contrastive.Item`` or dicts with ``item_id``, ``inputs``, ``selection_type``);
    they give ``n_inputs`` and ``selection_type``, and items without any prediction count as candidates that fail.
    Without ``items``, those columns come from the predictions. ``models``: the ensemble (default: every model in
    the table, in order of first appearance)."""
    frame, prompt = _rows(predictions, prompt)
    if models is None:
        models = list(dict.fromkeys(frame["model"].to_list()))
    models = list(models)
    if not models:
        raise InputError("no models in the predictions", field="model")
    frame = frame.filter(pl.col("model").is_in(models))
    dup = frame.group_by(["item_id", "condition", "model"]).len().filter(pl.col("len") > 1)
    if len(dup):
        row = dup.row(0, named=True)
        raise InputError(f"model {row['model']!r} has {row['len']} predictions for condition "
                         f"{row['condition']!r}", item=row["item_id"], field="condition")
    agree = (pl.col("choice").is_not_null() & (pl.col("choice") == pl.col("target"))).fill_null(False)
    per_order = (frame.with_columns(_agree=agree).group_by(["item_id", "condition"])
                 .agg(pl.col("_agree").sum().alias("agree")))
    m = len(models)
    per_order = per_order.with_columns(majority=pl.col("agree") * 2 > m, unanimous=pl.col("agree") == m,
                                       is_original=pl.col("condition") == ORIGINAL)
    decisions = per_order.group_by("item_id").agg(
        n_orders=pl.len().cast(pl.Int64),
        has_original=pl.col("is_original").any(),
        agree_original=pl.col("agree").filter(pl.col("is_original")).first().cast(pl.Int64),
        MF=(pl.col("majority") & pl.col("is_original")).any(),
        UF=(pl.col("unanimous") & pl.col("is_original")).any(),
        PMF=pl.col("majority").all(),
        PUF=pl.col("unanimous").all(),
    ).with_columns(PMF=pl.col("PMF") & pl.col("has_original"), PUF=pl.col("PUF") & pl.col("has_original"))
    decisions = decisions.with_columns(n_models=pl.lit(m, dtype=pl.Int64)).drop("has_original")
    meta = _item_meta(items, frame)
    decisions = meta.join(decisions, on="item_id", how="left" if items is not None else "inner").with_columns(
        [pl.col(c).fill_null(False) for c in CRITERIA]
        + [pl.col("n_orders").fill_null(0), pl.col("n_models").fill_null(m)])
    columns = ["item_id", "n_inputs", "selection_type", "n_models", "n_orders", "agree_original", *CRITERIA]
    decisions = decisions.select(columns).sort("item_id")
    return RTCResult(decisions, retention_table(decisions), models, prompt)


def _item_meta(items, frame: pl.DataFrame) -> pl.DataFrame:
    if items is not None:
        rows = []
        for item in items:
            get = item.get if isinstance(item, dict) else lambda k, it=item: getattr(it, k)
            rows.append({"item_id": str(get("item_id")), "n_inputs": len(get("inputs")),
                         "selection_type": get("selection_type")})
        return pl.DataFrame(rows, schema={"item_id": pl.Utf8, "n_inputs": pl.Int64, "selection_type": pl.Utf8})
    cols = [pl.col("item_id")]
    n_col = next((c for c in ("n_inputs", "n_options") if c in frame.columns), None)
    cols.append(pl.col(n_col).cast(pl.Int64, strict=False).alias("n_inputs") if n_col
                else pl.lit(None, dtype=pl.Int64).alias("n_inputs"))
    cols.append(pl.col("selection_type").cast(pl.Utf8) if "selection_type" in frame.columns
                else pl.lit(None, dtype=pl.Utf8).alias("selection_type"))
    return frame.select(cols).group_by("item_id").agg(pl.all().drop_nulls().first())


def retention_table(decisions: pl.DataFrame) -> pl.DataFrame:
    """Candidates, kept and retention per criterion x n_inputs (and ``all``) x selection type (and ``all``)."""
    rows = []
    ns = sorted(decisions["n_inputs"].drop_nulls().unique().to_list())
    selections = sorted(decisions["selection_type"].drop_nulls().unique().to_list())
    for criterion in CRITERIA:
        for n in [*ns, None]:
            for selection in [*selections, None]:
                part = decisions
                if n is not None:
                    part = part.filter(pl.col("n_inputs") == n)
                if selection is not None:
                    part = part.filter(pl.col("selection_type") == selection)
                candidates = len(part)
                kept = int(part[criterion].sum()) if candidates else 0
                rows.append({"criterion": criterion, "n_inputs": "all" if n is None else str(n),
                             "selection_type": "all" if selection is None else selection,
                             "candidates": candidates, "kept": kept,
                             "retention": kept / candidates if candidates else None})
    return pl.DataFrame(rows, schema={"criterion": pl.Utf8, "n_inputs": pl.Utf8, "selection_type": pl.Utf8,
                                      "candidates": pl.Int64, "kept": pl.Int64, "retention": pl.Float64})


def _read_item_records(path: Path) -> tuple[Path, list[dict]]:
    """(items file, raw records) from a benchmark folder or an ``items.jsonl`` file; each record validated as a
    ``contrastive.Item`` (errors name file, line and field)."""
    from pydantic import ValidationError

    from omnieval.datasets.benchmark import read_records
    from omnieval.protocols.contrastive import Item

    file = path / "items.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise InputError("no items file", file=file)
    records = []
    for where, record in read_records(file):
        try:
            Item.model_validate(record)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(f"{pydantic_message(err)} ({where})", file=file,
                             item=str(record.get("item_id")), field=".".join(str(p) for p in err["loc"])) from None
        records.append(record)
    if not records:
        raise InputError("no items: the file holds no records", file=file)
    return file, records


def filter_command(predictions: str | Path | Sequence[str | Path] | pl.DataFrame, items: str | Path,
                   out: str | Path, models: Sequence[str] | None = None, prompt: str | None = None) -> int:
    """Run the filter and write to ``out``: ``decisions.csv``, ``retention.csv``, ``items_<criterion>.jsonl`` (the
    kept item records as given, media paths still relative to the source benchmark folder) and ``filter.json``."""
    from omnieval.stats.read import read_predictions

    if isinstance(predictions, pl.DataFrame):
        frame = predictions
    else:
        paths = [predictions] if isinstance(predictions, (str, Path)) else list(predictions)
        frame = read_predictions(paths)
    items_file, records = _read_item_records(Path(items))
    result = rtc_filter(frame, records, models=models, prompt=prompt)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    result.decisions.write_csv(folder / "decisions.csv")
    result.retention.write_csv(folder / "retention.csv")
    kept_ids = {c: set(result.decisions.filter(pl.col(c))["item_id"].to_list()) for c in CRITERIA}
    for criterion in CRITERIA:
        lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records if str(r["item_id"]) in kept_ids[criterion]]
        (folder / f"items_{criterion}.jsonl").write_text("".join(lines), encoding="utf-8")
    summary = {"items": str(items_file), "models": result.models, "prompt": result.prompt,
               "candidates": len(records), "kept": {c: len(kept_ids[c]) for c in CRITERIA},
               "criteria": {"MF": "strict majority agrees on original", "UF": "all agree on original",
                            "PMF": "strict majority agrees on every order", "PUF": "all agree on every order"}}
    (folder / "filter.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"omnieval filter rtc: {len(records)} candidates, {len(result.models)} models; kept "
          + ", ".join(f"{c} {len(kept_ids[c])}" for c in CRITERIA) + f" -> {folder}")
    return 0
