"""``omnieval import``: other harnesses' per-sample outputs as omnieval predictions, so every statistic follows.

One module per format (``lmms_eval``, ``lm_eval``, ``inspect``, ``vlmevalkit``) turns the files a tool wrote into
:class:`~omnieval.imports.base.ImportedRow` records; the shared writer dedupes them, joins models on the same items
and writes ``predictions.parquet`` in the documented columns (docs/reference.md) that ``metrics``, ``stats``,
``power`` and ``report`` read as they read a run.
"""

from omnieval.imports.base import ImportedRow, ImportOptions, format_names, get_format, register_format

__all__ = ["ImportOptions", "ImportedRow", "format_names", "get_format", "register_format"]
