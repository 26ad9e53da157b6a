"""The peak memory the benches report for a process they start (``core.processes.peak_rss_mb``): its own, not the
peak of the process it was forked from (Linux carries that into ``ru_maxrss`` across ``exec``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = ("import resource; from omnieval.core.processes import peak_rss_mb; "
         "print(peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status is Linux's")
def test_a_child_started_from_a_large_parent_reports_its_own_peak():
    held = bytearray(400 * 1024 * 1024)
    held[::4096] = b"\x01" * len(held[::4096])  # every page touched: resident
    own, carried = map(float, subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                                             check=True).stdout.split())
    del held
    if carried < 400:
        pytest.skip("this kernel does not carry the parent's peak into the child's ru_maxrss")
    assert own < 200  # an interpreter with omnieval.core imported: tens of MB, not the parent's 400
