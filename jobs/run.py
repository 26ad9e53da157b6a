"""Entry point for ``ray job submit``: run one evaluation config on the cluster the job runs in.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/run.py CONFIG.yaml

Inside a Ray job, ``ray.init(address="auto")`` joins the cluster; outputs go wherever the config's ``output`` points
(a local path on a shared filesystem, or ``s3://`` / ``gs://`` through pyarrow filesystems).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--address", default="auto", help="Ray address (default: the cluster of this job)")
    parser.add_argument("--overwrite", action="store_true", help="clear predictions of another config (see "
                                                                 "omnieval run --help)")
    args = parser.parse_args(argv)

    from omnieval.config import load_run_config
    from omnieval.core.schema import InputError
    from omnieval.run.pipeline import run_evaluation

    try:
        result = run_evaluation(load_run_config(args.config), address=args.address, overwrite=args.overwrite)
    except InputError as exc:
        print(f"omnieval: error: {exc}", file=sys.stderr)
        return 2
    print(result.summary())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
