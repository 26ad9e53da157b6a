"""Benjamini-Hochberg adjustment within families of a table: the ``p_adjusted`` of the paired differences
(``omnieval.stats.paired``) and of the significance tests (``omnieval.stats.significance``), each with its own
families (docs/reference.md)."""

from __future__ import annotations

import numpy as np
import polars as pl


def bh_within(table: pl.DataFrame, family: pl.Expr) -> pl.DataFrame:
    """``table`` with ``p_adjusted`` = the Benjamini-Hochberg adjusted ``p_value`` (statsmodels ``fdr_bh``) among
    the rows of one ``family`` value. A null or non-finite ``p_value`` takes no part in its family's adjustment and
    gets a null ``p_adjusted``. Rows keep their order."""
    from statsmodels.stats.multitest import multipletests

    if table.is_empty():
        return table
    table = table.with_row_index("_row").with_columns(_family=family)
    adjusted = np.full(len(table), np.nan)
    for group in table.partition_by("_family"):
        p = group["p_value"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        ok = np.isfinite(p)
        if ok.any():
            adjusted[group["_row"].to_numpy()[ok]] = multipletests(p[ok], method="fdr_bh")[1]
    return table.with_columns(p_adjusted=pl.Series(adjusted).fill_nan(None)).drop("_row", "_family")
