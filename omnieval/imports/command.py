"""``omnieval import FORMAT PATH... --out DIR``: one format's reader, then the shared writer (docs/import.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.imports.base import ImportOptions, format_names, get_format
from omnieval.imports.writer import write_import


def import_command(fmt: str, paths: Sequence[str | Path], out: str | Path, *, model: str | None = None,
                   cluster_field: str | None = None, filter: str | None = None) -> int:
    """Read ``paths`` as ``fmt`` writes them and write ``out/predictions.parquet``; prints the summary line."""
    try:
        reader = get_format(fmt)
    except KeyError:
        raise InputError(f"unknown import format {fmt!r}; known formats: {', '.join(format_names())}",
                         field="FORMAT") from None
    options = ImportOptions(model=model, cluster_field=cluster_field)
    files = [Path(p) for p in paths]
    summary = write_import(reader(files, options), out, fmt=fmt, inputs=files, filter=filter)
    print(summary.line())
    return 0
