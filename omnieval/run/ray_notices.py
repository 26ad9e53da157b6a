"""Ray's false alarm about actor restarts, spent once per process before the first actor pool starts.

Without this, every run printed one error-level line from the driver's core worker (C++, written straight to file
descriptor 2, so Python's logging cannot filter it)::

    [... E ...] core_worker.cc:2465: Actor with class name: 'MapWorker(MapBatches(ModelStage))' and ID: '...' has
    constructor arguments in the object store and max_restarts > 0. If the arguments in the object store go out of
    scope or are lost, the actor restart will fail. See https://github.com/ray-project/ray/issues/53727 ...

Why no choice of ours avoids it. Ray Data (2.60, ``data/_internal/execution/operators/map_operator.py``) puts every
map operator's ``MapTransformer`` (which holds our ``fn_constructor_kwargs``) and its ``DataContext`` in the object
store with ``ray.put`` and starts each pool actor with those two ObjectRefs (``actor_pool_map_operator.py``,
``_start_actor``); its pools default to ``max_restarts=-1``. ``CoreWorker::CreateActor`` logs the line whenever an
actor with ``max_restarts != 0`` gets an argument by reference (or an inlined argument holding a reference),
whatever its size: smaller constructor arguments or a larger ``RAY_max_direct_call_object_size`` change nothing, and
``max_restarts=0`` would silence it only by giving up the restarts a run relies on when a replica's process or node
dies (``tests/test_faults.py``). The danger it names does not apply: the operator holds both refs for the whole
execution, so a restarted actor finds them. ``RAY_BACKEND_LOG_LEVEL=fatal`` would hide it and every real error of
the core worker with it.

What we do. Ray logs it once per process (``RAY_LOG_ONCE_PER_PROCESS``), synchronously inside the actor creation
call. Before the first actor pool, ``absorb_restart_notice`` creates one throwaway restartable actor with an
ObjectRef argument while file descriptor 2 is redirected to a temporary file, kills it, and writes back everything
captured except that one line. The once-per-process notice is spent on the throwaway actor, and every other line,
Ray's or ours, real errors included, reaches the user unchanged (those written in that fraction of a second come
a moment late). Its cost: one actor registration, about 0.1 s, once per process. Should a future Ray log it per
actor, the test that runs ``omnieval run`` and reads its output fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

NOTICE = b"has constructor arguments in the object store and max_restarts > 0"

_lock = threading.Lock()
_absorbed = False


def absorb_restart_notice() -> None:
    """Spend Ray's once-per-process restart notice on a throwaway actor (see the module docstring); later calls,
    and calls before Ray is initialized, do nothing."""
    global _absorbed
    import ray

    with _lock:
        if _absorbed or not ray.is_initialized():
            return
        _absorbed = True
        spender = ray.remote(num_cpus=0, max_restarts=1)(_Spender)
        with _without_notice_on_stderr():
            actor = spender.remote(ray.put(None))
        ray.kill(actor)


class _Spender:
    """Takes an ObjectRef and is restartable: the shape of actor Ray warns about. Never asked anything."""

    def __init__(self, _ref) -> None:
        pass


def without_notice(captured: bytes) -> bytes:
    """``captured`` without the lines that carry Ray's restart notice; every other line kept as it was."""
    return b"".join(line for line in captured.splitlines(keepends=True) if NOTICE not in line)


@contextmanager
def _without_notice_on_stderr() -> Iterator[None]:
    """Redirect file descriptor 2 (Ray's C++ logs and Python's ``sys.stderr`` alike) to a temporary file for the
    block, then write what it caught back to the real stderr, less the restart notice."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to protect
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            rest = without_notice(caught.read())
            while rest:
                rest = rest[os.write(2, rest):]


class _DropMessages:
    """A logging filter dropping the records whose message starts with ``prefix``."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def filter(self, record) -> bool:
        return not record.getMessage().startswith(self.prefix)


def drop_messages(logger: str, prefix: str) -> None:
    """Drop ``logger``'s records whose message starts with ``prefix`` (once per process and prefix)."""
    import logging

    target = logging.getLogger(logger)
    if not any(isinstance(f, _DropMessages) and f.prefix == prefix for f in target.filters):
        target.addFilter(_DropMessages(prefix))
