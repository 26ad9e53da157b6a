"""A run or a sweep stopped by Ctrl-C (SIGINT) or SIGTERM ends with one line, not a stack: what was finished is kept
(parts are whole files, written as batches finish), and the same command resumes.

``stoppable`` makes both signals raise in the main thread wherever the driver is (planning, waiting on Ray, writing
a part): SIGINT as ``KeyboardInterrupt``, SIGTERM as ``Terminated``. Both derive from ``BaseException``, so the
``except Exception`` of a sweep's retries and of a run's per-run failures let them through, while every ``with`` and
``finally`` on the way out still runs (the output's lease is given back). A second signal during that clean-up ends
the process at once (the default action) instead of interrupting the clean-up with a stack.
"""

from __future__ import annotations

import shlex
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


class Terminated(BaseException):
    """The process got SIGTERM."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(f"signal {signum}")
        self.signum = signum


def _raise(signum, frame) -> None:
    for sig in NAMES:  # a second signal during the clean-up: the default action
        signal.signal(sig, signal.SIG_DFL)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


@contextmanager
def stoppable() -> Iterator[None]:
    """SIGINT and SIGTERM raise in the main thread while the block runs (``omnieval.run.ray_start.ensure_ray`` puts this
    SIGTERM handler back after ``ray.init`` replaced it); the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in NAMES}
    for sig in NAMES:
        signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def stopped_line(signum: int, command: str, argv: list[str]) -> str:
    """The one line a stopped ``command`` (run, sweep) prints: what stopped it, what is kept, how to resume."""
    from omnieval.core.commands import command_prefix

    kept = "finished runs and rows are kept" if command == "sweep" else "finished rows are kept"
    return (f"omnieval: {command} stopped by {NAMES.get(signum, f'signal {signum}')}; {kept}; resume with: "
            f"{command_prefix()} {shlex.join(argv)}")


def undone_line(signum: int, argv: list[str]) -> str:
    """The one line a stopped converter (``omnieval datasets ...``) prints: nothing of it was kept."""
    command = " ".join(argv[:2])
    return (f"omnieval: {command} stopped by {NAMES.get(signum, f'signal {signum}')}; its unfinished folder was "
            "removed and --out is as it was; run the same command again to convert")


def exit_status(signum: int) -> int:
    """128 + the signal's number, as a shell reports a process ended by it (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signum)
