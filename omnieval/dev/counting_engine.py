"""``bench-counting``: the simulated engine that also records each time it is built, for ``omnieval bench pipeline``.

Every construction appends one line (``<pid> <model>``) to the file named by the ``count_file`` option, so the
bench counts model loads from evidence written by the workers themselves, whatever process or actor pool built
them. Appends of one short line with ``O_APPEND`` do not interleave between processes.

The engine is registered when this module is imported; Ray workers import it through the job's
``worker_process_setup_hook`` (``worker_setup`` below), since the engine registry only knows the built-in
engines' modules.
"""

from __future__ import annotations

import os

from omnieval.engines.base import register_engine
from omnieval.engines.simulated import SimulatedEngine


@register_engine("bench-counting")
class CountingEngine(SimulatedEngine):
    def __init__(self, model: str, *, count_file: str, **options):
        super().__init__(model, **options)
        fd = os.open(count_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {model}\n".encode())
        finally:
            os.close(fd)

    @classmethod
    def validate_options(cls, options: dict) -> None:
        """The simulated engine's checks on the other options; building this engine here would count a load."""
        from omnieval.engines.base import OptionError

        if not isinstance(options.get("count_file"), str):
            raise OptionError("count_file", "bench-counting engine: count_file must be a file path")
        SimulatedEngine.validate_options({k: v for k, v in options.items() if k != "count_file"})


def worker_setup() -> None:
    """The Ray job's ``worker_process_setup_hook``: importing this module (to call this) registers the engine."""


def read_counts(count_file: str) -> list[tuple[int, str]]:
    """(pid, model) of every construction recorded in ``count_file`` (none if it was never written)."""
    if not os.path.exists(count_file):
        return []
    with open(count_file) as fh:
        return [(int(pid), model) for pid, model in (line.split(" ", 1) for line in fh.read().splitlines())]
