"""``omnieval bench sweep --quick`` runs end to end on its own multi-node cluster and prints its table; its figures
agree with hand arithmetic on what it printed, and its sweeps decode each media file once (slow)."""

from __future__ import annotations

import re

import pytest

from omnieval.dev.bench_sweep import QUICK, bench_sweep

pytestmark = pytest.mark.slow


def test_quick_bench_runs_and_prints_both_schedules(capsys):
    import ray

    session = ray.is_initialized()
    try:
        assert bench_sweep(quick=True) == 0
    finally:
        if session and not ray.is_initialized():
            from conftest import start_local_ray

            start_local_ray()
    out = capsys.readouterr().out
    gpus = QUICK["nodes"] * QUICK["gpus_per_node"]
    assert f"({gpus} GPUs)" in out
    rows = {line.split("  ")[0]: re.split(r" {2,}", line.strip())[1:] for line in out.splitlines()}
    side, seq, ratio = (float(x.rstrip("x")) for x in rows["wall time (s)"][:3])
    assert abs(seq / side - ratio) < 0.01 + 0.01 * ratio
    occ_side, occ_seq = (float(x) for x in rows["GPU occupancy"][:2])
    held_side, held_seq = (float(x) for x in rows["GPU-seconds held by replicas"][:2])
    # occupancy = GPU-seconds / (GPUs x wall), to the table's rounding
    assert abs(occ_side - held_side / (gpus * side)) < 0.02 and abs(occ_seq - held_seq / (gpus * seq)) < 0.02
    # each replica holds its GPU at least for its load and its share of the batches
    per_model = QUICK["load_s"] + QUICK["batch_s"]
    assert held_seq >= QUICK["models"] * QUICK["replicas"] * per_model - 1
    assert rows["engine replicas started"][:2] == [str(QUICK["models"] * QUICK["replicas"])] * 2
    decodes = next(k for k in rows if k.startswith("decodes"))
    distinct = int(re.search(r"distinct media: (\d+)", decodes).group(1))
    # the sweep's runs share its decoded-media store: each file decoded once, the other models' passes read it
    side, seq = (int(v) for v in rows[decodes][:2])
    side_hits, seq_hits = (int(v) for v in rows["decoded-media store hits"][:2])
    assert seq == distinct and seq_hits == (QUICK["models"] - 1) * distinct
    assert side + side_hits == QUICK["models"] * distinct
    assert side == distinct and "met: decodes = distinct media, side by side" in out
    # run again with one model's option changed: one new run, every file read from the store
    assert rows["decodes, rerun with one model changed (1 run)"] == ["0", "0"]
    for verdict in ("decodes = distinct media, one at a time", "no decode on a rerun with one model changed"):
        assert f"met: {verdict}" in out
    decode_ms, read_ms = (float(x) for x in re.search(r"decode ([\d.]+) ms, decoded-media store read ([\d.]+) ms",
                                                      out).groups())
    assert 0 < read_ms and 0 < decode_ms
