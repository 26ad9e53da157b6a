"""Starting or joining Ray for a run or a sweep, with the failures a user meets first each one line.

* **No address: a local Ray of the run's own**, always (``ray.init(address="local")``). Plain ``ray.init()`` would
  join a cluster that ``ray start`` left running on the machine (or one named by ``RAY_ADDRESS``) and then refuse
  the run's ``num_cpus`` with a ``ValueError``; joining quietly would also put the run on a cluster the user did not
  name. A live cluster found that way is named in one note, with ``--address auto`` to join it.
* **Ray's start timing out.** A starting raylet has a fixed 30 s to register with its GCS; on a loaded machine it
  can miss that (``Exception: The current node timed out during startup``). The start is tried once more (the
  processes the failed start left are ended first); a second time-out is one line (``RayStartFailed``).
* **An address where nothing answers.** Ray retries the GCS of a given address for many minutes. The address is
  first probed over TCP for at most ``OMNIEVAL_RAY_CONNECT_TIMEOUT_S`` seconds (default 30); no answer is one line
  naming the address (an ``InputError`` on ``--address``).
* **Signals.** ``ray.init`` replaces the process's SIGTERM handler (its core worker dumps a stack and aborts); a
  Python handler the caller had installed (the command's: ``omnieval.run.stopping``) is put back.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time

from omnieval.core.schema import InputError

CONNECT_TIMEOUT_ENV = "OMNIEVAL_RAY_CONNECT_TIMEOUT_S"
CONNECT_TIMEOUT_S = 30.0
DATA_STORE_SHARE = 0.25
"""The share of the object store Ray Data's blocks may fill before the stream waits (Ray's default is half): the
decoded media of the run's cache live there too, outside Ray Data's accounting (``run.decode_cache.MEDIA_STORE_SHARE``),
so together they leave room for the readers' copies in use instead of spilling."""
START_TIMEOUT_TEXT = "timed out during startup"
"""What Ray's ``Node`` raises (a plain ``Exception``) when the raylet misses its registration window."""


class RayStartFailed(RuntimeError):
    """The local Ray could not be started (its start timed out twice)."""


def ensure_ray(config, address: str | None = None) -> None:
    """Join ``address`` (a cluster), or start a local Ray of this run's own. Logical CPUs default to
    max(8, cores): engine replicas, the request task and decode tasks each hold a CPU slot, and on a 2-core machine
    the slots, not the cores, would otherwise deadlock the pipeline."""
    import ray
    import ray.data

    from omnieval.run.ray_notices import drop_messages

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # after import: ray.data configures its loggers
    # Two warnings that read like failures on every run and say nothing the user must act on: progress bars are
    # ours (tqdm), and token authentication being on is the safe default.
    drop_messages("ray.data._internal.progress", "Progress bars disabled")
    drop_messages("ray._private.authentication.authentication_token_setup", "Token authentication is enabled")
    ray.data.DataContext.get_current().override_object_store_memory_limit_fraction = DATA_STORE_SHARE
    if ray.is_initialized():
        return
    handler = signal.getsignal(signal.SIGTERM)
    if address:
        join_cluster(address)
    else:
        start_local(config.ray.num_cpus or max(8, os.cpu_count() or 1))
    if callable(handler) and _main_thread():
        signal.signal(signal.SIGTERM, handler)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.verbose_stats_logs = False


def start_local(num_cpus: int, *, attempts: int = 2) -> None:
    """A local Ray of this process's own, whatever cluster runs beside it (see the module docstring); a start that
    times out is tried again, up to ``attempts`` in all."""
    import ray

    found = running_cluster()
    if found:
        print(f"omnieval: note: a running Ray cluster was found at {found[0]} ({found[1]}) and is not joined: this "
              "run starts its own local Ray; --address auto joins that cluster instead", file=sys.stderr, flush=True)
    for attempt in range(1, attempts + 1):
        before = _children()
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
            return
        except Exception as exc:
            if START_TIMEOUT_TEXT not in str(exc):
                raise
            _end_children(before)
            ray.shutdown()
            if attempt == attempts:
                raise RayStartFailed(f"the local Ray did not start: its raylet missed Ray's 30 s registration "
                                     f"window {attempts} times (the machine is busy); run again when it is less "
                                     "loaded, or join a running cluster with --address") from None
            print("omnieval: note: the local Ray's start timed out (a busy machine); trying once more",
                  file=sys.stderr, flush=True)


def join_cluster(address: str) -> None:
    """Join the cluster at ``address`` (``host:port``, ``auto``, ``ray://host:port``) after checking that something
    answers there within the connect time-out."""
    import ray

    target = _bootstrap_address(address)
    timeout = connect_timeout()
    if target is not None and not reachable(target, timeout):
        raise InputError(f"no Ray cluster answers at {target} (nothing accepted a connection within {timeout:g} s; "
                         f"set {CONNECT_TIMEOUT_ENV} to wait longer); check the address, or leave --address out to "
                         "start a local Ray", field="--address")
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except ConnectionError as exc:
        raise InputError(f"cannot join the Ray cluster at {address}: {exc}", field="--address") from None


def _bootstrap_address(address: str) -> str | None:
    """The ``host:port`` that ``address`` names (``auto``: the cluster Ray finds, from ``RAY_ADDRESS`` or the last
    ``ray start``), or None where it is not of that form (a client URL Ray resolves itself)."""
    from ray._private import services

    if address == "auto":
        try:
            return services.canonicalize_bootstrap_address(address)
        except ConnectionError as exc:  # no cluster found on this machine
            raise InputError(f"--address auto: {exc}", field="--address") from None
    target = address.split("://", 1)[1] if "://" in address else address
    return target if _host_port(target) else None


def running_cluster() -> tuple[str, str] | None:
    """(address, where it was found) of a live Ray cluster that a plain ``ray.init()`` would join: ``RAY_ADDRESS``,
    or the address ``ray start`` recorded on this machine; None when there is none, or when it does not answer (a
    record left by a cluster that died)."""
    from ray._private.utils import read_ray_address

    env = os.environ.get("RAY_ADDRESS")
    found = (env, "RAY_ADDRESS") if env else None
    if found is None:
        recorded = read_ray_address()
        found = (recorded, "started with ray start") if recorded else None
    if found is None:
        return None
    target = found[0].split("://", 1)[1] if "://" in found[0] else found[0]
    return found if _host_port(target) and reachable(target, 1.0) else None


def connect_timeout() -> float:
    from omnieval.core.storage import env_seconds

    return env_seconds(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S)


def reachable(target: str, timeout: float) -> bool:
    """Whether ``host:port`` accepts a TCP connection within ``timeout`` seconds (refusals are tried again every
    half second until then: a head that is starting opens its port late)."""
    host, port = _host_port(target)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(left, 5.0))):
                return True
        except OSError:
            if deadline - time.monotonic() <= 0.5:
                return False
            time.sleep(0.5)


def _host_port(target: str) -> tuple[str, int] | None:
    host, sep, port = target.rstrip("/").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _children() -> set[int]:
    """This process's child processes (after ``import ray``, which puts the psutil it ships on the path)."""
    import psutil

    return {child.pid for child in psutil.Process().children(recursive=True)}


def _end_children(before: set[int]) -> None:
    """End this process's child processes that were not there ``before`` (what a failed ``ray.init`` left: its
    GCS, raylet and reaper), so that a second start does not run beside them."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        if child.pid not in before:
            try:
                child.kill()
            except psutil.Error:
                pass


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
