"""Entry point for ``ray job submit``: run a sweep (models x protocols x prompt styles) on the job's cluster.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/sweep.py SWEEP.yaml

Inside a Ray job (``RAY_ADDRESS`` set) it joins that cluster; on its own it starts an embedded local Ray, or joins
``--address``. Resubmitting the same file resumes: complete runs are skipped (see ``omnieval.sweep``).
Exit code 0 when every run is complete, 1 when a run failed, 2 for an invalid sweep file (nothing was run).
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="sweep YAML file")
    parser.add_argument("--address", default=None,
                        help="Ray address, e.g. auto (default: the job's cluster, else an embedded local Ray)")
    args = parser.parse_args(argv)

    from omnieval.core.schema import InputError
    from omnieval.sweep import load_sweep_config, run_sweep

    address = args.address or ("auto" if os.environ.get("RAY_ADDRESS") else None)
    try:
        result = run_sweep(load_sweep_config(args.sweep), address=address)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(result.summary(), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
