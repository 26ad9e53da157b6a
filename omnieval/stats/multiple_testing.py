"""Benjamini-Hochberg adjustment within families of a table: the ``p_adjusted`` of the paired differences
(``omnieval.stats.paired``) and of the significance tests (``omnieval.stats.significance``), each with its own
families (docs/reference.md).

The adjustment is written here rather than imported: statsmodels' import takes seconds (pandas with it), more than
the rest of ``omnieval metrics`` on a paper-sized study. It is the same arithmetic as statsmodels' ``fdr_bh``, step
for step (``tests/test_multiple_testing.py`` compares the two bit for bit)."""

from __future__ import annotations

import numpy as np
import polars as pl


def bh_within(table: pl.DataFrame, family: pl.Expr) -> pl.DataFrame:
    """``table`` with ``p_adjusted`` = the Benjamini-Hochberg adjusted ``p_value`` (``benjamini_hochberg``) among
    the rows of one ``family`` value. A null or non-finite ``p_value`` takes no part in its family's adjustment and
    gets a null ``p_adjusted``. Rows keep their order."""
    if table.is_empty():
        return table
    table = table.with_row_index("_row").with_columns(_family=family)
    adjusted = np.full(len(table), np.nan)
    for group in table.partition_by("_family"):
        p = group["p_value"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        ok = np.isfinite(p)
        if ok.any():
            adjusted[group["_row"].to_numpy()[ok]] = benjamini_hochberg(p[ok])
    return table.with_columns(p_adjusted=pl.Series(adjusted).fill_nan(None)).drop("_row", "_family")


def adjust_tests(table: pl.DataFrame) -> pl.DataFrame:
    """``omnieval stats``'s ``p_adjusted``: within test x protocol x prompt x split (``permutation``, which
    compares prompts, within test x protocol). Here rather than beside the tests so that ``stats.distributed``
    adjusts the gathered groups' p-values without importing them."""
    family = [pl.col("test"), pl.col("protocol"),
              pl.when(pl.col("test") == "permutation").then(pl.lit("")).otherwise(pl.col("prompt")),
              pl.when(pl.col("test") == "permutation").then(pl.lit("")).otherwise(pl.col("split"))]
    return bh_within(table, pl.concat_str(family, separator="|"))


def benjamini_hochberg(p: np.ndarray) -> np.ndarray:
    """The Benjamini-Hochberg adjusted p-values of the finite p-values ``p``, in their order: sorted, each divided
    by its rank over the count, the running minimum taken from the largest down, capped at 1. The operations are
    statsmodels' ``fdr_bh`` ones in the same order (divided by ``rank / count``, not multiplied by ``count / rank``),
    so the floats are the same; tied p-values get the same adjusted value whatever order the sort leaves them in."""
    order = np.argsort(p)
    ranked = p[order] / (np.arange(1, len(p) + 1) / float(len(p)))
    adjusted = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out
