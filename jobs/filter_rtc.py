"""Entry point for ``ray job submit``: the mixture-of-models round-trip-consistency filter over a candidate set.

    ray job submit --working-dir . -- python jobs/filter_rtc.py PRED.parquet [PRED2.parquet ...] \\
        --items CANDIDATES/items.jsonl --out FILTERED/

The same arguments as ``omnieval filter rtc``. The predictions are those of every ensemble model on every order of
every candidate item, captions as text (a run of the ``contrastive`` protocol with ``protocol_options:
{permutations: all, captions: true, media: false}``).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from omnieval.cli import main as cli_main

    return cli_main(["filter", "rtc", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
