"""Report section "Noise": for runs whose models answered every question several times (repeated samples,
``stats.samples``), each metric's standard error split into data noise (which questions were asked) and prediction
noise (which of the model's sampled answers came out): where the prediction share is large, averaging more samples
per question narrows the interval; where it is small, only more questions do."""

from __future__ import annotations

import polars as pl

from omnieval.report.blocks import Cell, Note, Section, Table, fmt, text_cell

NOTE = ("se total: the standard error of the value (its interval's spread over the resampling unit, both sources "
        "together); se data: the part from the sample of questions; se prediction: the part from the model's "
        "sampled answers (the within-question variance of its k samples over k); total^2 = data^2 + prediction^2. "
        "prediction share: prediction^2 / total^2. Rows of models with one sample per question have no split.")


def _row(record: dict) -> list[Cell]:
    total, pred = record["se_total"], record["se_prediction"]
    share = pred ** 2 / total ** 2 if total and pred is not None else None
    return [text_cell(record["run"]), text_cell(record["model"]), text_cell(record["prompt"]),
            text_cell(record["split"]), text_cell(f"{record['metric']} {record['key']}".strip()),
            Cell(text=fmt(record["value"]), sort=record["value"]),
            *(Cell(text=fmt(record[c], 4), sort=record[c]) for c in ("se_total", "se_data", "se_prediction")),
            Cell(text="—" if share is None else f"{share:.0%}", sort=share)]


def section(metrics: list[tuple[str, pl.DataFrame]]) -> Section | None:
    """The section from each run's metrics table (``(label, table)``), or None where no row has a split."""
    frames = [m.filter(pl.col("se_total").is_not_null()).with_columns(run=pl.lit(label)) for label, m in metrics
              if "se_total" in m.columns]
    split = pl.concat(frames, how="vertical_relaxed") if frames else None
    if split is None or split.is_empty():
        return None
    split = split.sort("run", "protocol", "model", "prompt", "split", "metric", "key")
    table = Table("Standard error split: data noise and prediction noise", ["run", "model", "prompt", "split",
                  "metric", "value", "se total", "se data", "se prediction", "prediction share"],
                  [_row(r) for r in split.iter_rows(named=True)], note=NOTE, collapsed=len(split) > 30)
    return Section("noise", "Noise: data vs prediction", blocks=[Note(
        "The models below answered each question several times (repeated samples); the interval of each value "
        "covers both sources of noise."), table])
