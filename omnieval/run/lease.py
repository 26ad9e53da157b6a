"""One writer per output folder: an exclusive lease in ``<output>/.omnieval-lease.json``.

Two runs writing one output would both compute everything and the last would replace the other's
``predictions.parquet`` and ``run.json``. So a run (or a sweep) takes the folder's lease before any model work and
holds it until it ends; a second writer is refused at once with who holds it.

* **Local disk**: the lease file is created with ``O_CREAT | O_EXCL`` (atomic); a stale one is first renamed aside
  (atomic: of two writers taking over the same stale lease, one rename succeeds).
* **Object stores and other pyarrow filesystems** (``s3://``, ``gs://``), which have no create-if-absent through
  pyarrow: write the lease, wait ``verify_s``, read it back; the writer whose token is there holds it. Two writers
  starting within the same second could still both pass; part names carry each writer's token
  (``store.next_part``), so even then no row is lost or replaced.

The holder rewrites its heartbeat every ``heartbeat_s`` seconds. A lease is stale when its process is gone (same
host: no process has the pid, or the one that has it started at another time than the holder did; both read
without psutil) or its heartbeat is older than ``ttl_s`` (any host: a killed node's driver). A stale lease is
taken over with a message. Every write through the store first checks that this writer still holds the lease
(``check``): a writer that lost it (a paused process whose lease was taken over) stops instead of writing beside
the new holder.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

import pyarrow.fs as pafs

from omnieval.core.processes import process_alive, process_start
from omnieval.core.schema import InputError

LEASE_FILE = ".omnieval-lease.json"


class OutputBusy(InputError):
    """The output folder is held by another live writer."""


class LeaseLost(RuntimeError):
    """This writer's lease was taken over by another (its heartbeat had stopped for longer than the time-to-live)."""


class OutputLease:
    def __init__(self, store, *, ttl_s: float = 60.0, heartbeat_s: float = 10.0, verify_s: float = 1.0,
                 log=None):
        self.store = store
        self.path = store.path(LEASE_FILE)
        self.local = isinstance(store.fs, pafs.LocalFileSystem)
        self.ttl_s, self.heartbeat_s, self.verify_s = ttl_s, heartbeat_s, verify_s
        self.token = store.writer
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost = False

    # -- the lease record ---------------------------------------------------------------------------------------
    def _record(self) -> dict:
        now = time.time()
        return {"token": self.token, "host": socket.gethostname(), "pid": os.getpid(),
                "pid_started": process_start(os.getpid()), "acquired": getattr(self, "_acquired", now),
                "heartbeat": now, "command": " ".join(sys.argv)[:300]}

    def _read(self) -> dict | None:
        try:
            with self.store.fs.open_input_stream(self.path) as f:
                return json.loads(f.read() or b"null")
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {"token": None, "heartbeat": 0.0}  # unreadable (a torn write of a killed holder): stale

    def stale_reason(self, held: dict) -> str | None:
        """Why a lease record no longer holds (None: it holds)."""
        if held.get("host") == socket.gethostname() and held.get("pid"):
            pid = int(held["pid"])
            if not process_alive(pid):
                return f"its process {pid} on this host has ended"
            started = process_start(pid)
            if started is not None and held.get("pid_started") and abs(started - held["pid_started"]) > 1.0:
                return f"its process {pid} on this host has ended (the pid now runs another program)"
        age = time.time() - float(held.get("heartbeat") or 0.0)
        if age > self.ttl_s:
            return f"no heartbeat for {age:.0f} s (time-to-live {self.ttl_s:g} s)"
        return None

    def _busy(self, held: dict) -> OutputBusy:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(held.get("acquired") or 0))
        return OutputBusy(f"another omnieval process is writing here (pid {held.get('pid')} on {held.get('host')}, "
                          f"since {since}: {held.get('command', '?')}); wait for it to finish, or use another "
                          f"output. A killed writer's lease is taken over once its process is gone or after "
                          f"{self.ttl_s:g} s without a heartbeat", file=self.store.uri, field="output")

    # -- acquire / hold / release -------------------------------------------------------------------------------
    def acquire(self) -> OutputLease:
        self._acquired = time.time()
        if self.local:
            self._acquire_local()
        else:
            self._acquire_remote()
        self._thread = threading.Thread(target=self._beat, name="omnieval-lease", daemon=True)
        self._thread.start()
        self._remove_temporaries()
        return self

    def _remove_temporaries(self) -> None:
        """Half-written files a stopped writer left (a full disk, a kill): removed now that this writer alone may
        write here, so that they neither pile up nor look like output."""
        removed = self.store.remove_temporaries()
        if removed:
            self.log(f"omnieval: removed {len(removed)} half-written file(s) a stopped writer left in "
                     f"{self.store.uri} ({removed[0]}{', ...' if len(removed) > 1 else ''})")

    def _take_over_check(self, held: dict | None) -> None:
        if held is None:
            return
        reason = self.stale_reason(held)
        if reason is None:
            raise self._busy(held)
        self.log(f"omnieval: taking over the lease of {self.store.uri}: {reason}")

    def _acquire_local(self) -> None:
        import fcntl

        # The check and the take-over run under an flock, so two writers never both replace one stale lease.
        with open(f"{self.path}.lock", "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            held = self._read()
            self._take_over_check(held)
            if held is not None:
                os.remove(self.path)
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:  # a writer that does not take the flock (another version): respect it
                raise self._busy(self._read() or {}) from None
            with os.fdopen(fd, "w") as f:
                json.dump(self._record(), f)

    def _acquire_remote(self) -> None:
        self._take_over_check(self._read())
        self._write()
        time.sleep(self.verify_s)
        held = self._read() or {}
        if held.get("token") != self.token:
            raise self._busy(held)

    def _write(self) -> None:
        tmp = f"{self.path}.tmp-{self.token}"
        with self.store.fs.open_output_stream(tmp) as f:
            f.write(json.dumps(self._record()).encode())
        self.store.fs.move(tmp, self.path)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            held = self._read() or {}
            if held.get("token") != self.token:
                self.lost = True
                return
            try:
                self._write()
            except OSError:
                continue  # a storage hiccup: the next beat tries again, well inside the time-to-live

    def check(self) -> None:
        """Raise ``LeaseLost`` if another writer has taken this output over."""
        if self.lost:
            raise LeaseLost(f"{self.store.uri}: another writer took this output over; stopping without writing")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        held = self._read() or {}
        if held.get("token") == self.token and not self.lost:
            try:
                self.store.fs.delete_file(self.path)
            except OSError:
                pass

    def __enter__(self) -> OutputLease:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
