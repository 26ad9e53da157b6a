"""Whether a process on this host still runs: for the output lease (``omnieval.run.lease``) and for the build folders
a stopped conversion left (``omnieval.datasets.output_folder``), read from the kernel without psutil.

A pid alone can be reused by a later process; where it matters, a record keeps the process's start time too
(``process_start``) and compares it."""

from __future__ import annotations

import os


def _boot_time() -> float | None:
    """The host's boot time (seconds since the epoch), from ``/proc/stat`` (Linux); None elsewhere."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None where it cannot be read.

    Read from ``/proc/<pid>/stat`` (field 22: clock ticks after boot), not through psutil: psutil is importable
    here only after Ray has put its own copy on the path, and a lease must judge its holder before any Ray import.
    The value is the one psutil reports on Linux (boot time + ticks / ticks per second), so lease records written
    by either agree within the 1 s tolerance ``stale_reason`` allows."""
    boot = _boot_time()
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (command) ": the command may hold spaces
    try:
        ticks = int(fields[19])  # field 22 counted from 1 with pid and command: index 19 after them
    except (IndexError, ValueError):
        return None
    return None if boot is None else boot + ticks / os.sysconf("SC_CLK_TCK")


def process_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this host (signal 0 checks existence and sends nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    except OSError:
        return False
    return True


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB since it started its program: ``VmHWM`` of ``/proc/self/status``
    (Linux), else ``ru_maxrss``. Not ``ru_maxrss`` first: Linux carries into it the peak of the image an ``exec``
    replaced, so a child that Python's ``subprocess`` forked from a large parent reports the parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
