"""``omnieval bench pipeline --quick``: the printed table is coherent with itself and with the benchmark it built.

No timing is asserted (the machine may be loaded); every derived figure (rates, the marginal rate, the fixed
start-up, the memory ratio, the verdicts) is recomputed from the printed inputs within their display rounding, and
the instance counts are recounted from the benchmark's own ``items.jsonl``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from omnieval.dev.bench_pipeline import QUICK, TARGETS

NUM = r"([\d,]+(?:\.\d+)?)"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _rate_bounds(n: float, seconds: float, error: float = 0.0005) -> tuple[float, float]:
    """The range of n / seconds when ``seconds`` was printed within ``error`` (3 decimals: 0.0005)."""
    return n / (seconds + error), n / max(seconds - error, 1e-12)


def _within(value: float, bounds: tuple[float, float], slack: float) -> bool:
    return bounds[0] - slack <= value <= bounds[1] + slack


@pytest.fixture(scope="module")
def printed(ray_session, tmp_path_factory):
    import contextlib
    import io

    from omnieval.cli import main

    work = tmp_path_factory.mktemp("bench-pipeline")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["bench", "pipeline", "--quick", "--workdir", str(work)]) == 0
    return out.getvalue(), work


def _row(text: str, pattern: str) -> re.Match:
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"no row matching {pattern!r} in:\n{text}"
    return match


@pytest.mark.slow
def test_quick_bench_prints_coherent_rates_memory_and_loads(printed):
    text, work = printed
    n_items = sum(1 for _ in open(next(Path(work).glob("dissonance-*")) / "items.jsonl"))
    assert n_items == QUICK["splits"] * QUICK["anchors"] * QUICK["questions"]

    rows = {}
    for label in ("small", "large"):
        m = _row(text, rf"^\(2\) end to end, {label}, best of {QUICK['repeats']}: {NUM} instances in {NUM} s "
                       rf"\((\d+) media decoded; engine alone {NUM} in {NUM} s\)\s+{NUM}/s\s+{NUM}/s\s+{NUM}x\s*$")
        n, t, _, en, et, rate, base, ratio = (_num(g) for g in m.groups())
        assert n == en == 8 * (QUICK["small_items"] if label == "small" else n_items)
        assert _within(rate, _rate_bounds(n, t), 0.5) and _within(base, _rate_bounds(en, et), 0.5)
        assert ratio == pytest.approx(rate / base, rel=0.02, abs=1e-4)
        rows[label] = (n, t)
    (ns, ts), (nl, tl) = rows["small"], rows["large"]

    m = _row(text, rf"^\(2\) marginal rate: \({NUM} - {NUM}\) / \({NUM} - {NUM}\) s\s+(not measured|{NUM}/s)\s+"
                   rf"(?:undefined|{NUM}/s)\s+.*?((?:met|MISSED) \(>= ([\d,]+)/s\)|not measured)$")
    assert (_num(m[1]), _num(m[2]), _num(m[3]), _num(m[4])) == (nl, ns, tl, ts)
    marginal = None if m[5] == "not measured" else _num(m[6])
    if marginal is None:  # never a rate from a difference within the noise: said so, with why
        assert m[8] == "not measured" and "(2) marginal rate not measured: " in text
        assert tl - ts < 0.1 * ts + 0.001 or "repeats spread by" in text
    else:
        assert m[8].split()[0] in ("met", "MISSED") and _num(m[9]) == TARGETS["marginal"]
        assert _within(marginal, _rate_bounds(nl - ns, tl - ts, 0.001), 0.5)  # two roundings
        assert (m[8].split()[0] == "met") == (marginal >= TARGETS["marginal"])

    m = _row(text, r"^\(1\) fixed start-up per run.*?\s(not measured|-?[\d.]+ s)\s+((met|MISSED) \(< ([\d.]+) s\)|not "
                   r"measured)$")
    if marginal is None:
        assert m[1] == "not measured" and m[2] == "not measured"
    else:
        assert float(m[4]) == TARGETS["fixed_s"]
        fixed = float(m[1].split()[0])
        rounding = 0.0015 + ns * 0.5 / (marginal * max(marginal - 0.5, 1e-9))  # t_small, fixed, marginal
        assert fixed == pytest.approx(ts - ns / marginal, abs=rounding)
        assert (m[3] == "met") == (fixed < TARGETS["fixed_s"])

    small = _row(text, rf"^\(3\) driver peak RSS growth, small \(.*\)\s+{NUM} MiB\s*$")
    m = _row(text, rf"^\(3\) driver peak RSS growth, large vs small \(.*\)\s+{NUM} MiB\s+{NUM} MiB\s+"
                   rf"(undefined|{NUM})\s+(met|MISSED) \(<= ([\d.]+)\)$")
    assert _num(m[2]) == _num(small[1]) and float(m[6]) == TARGETS["memory_ratio"]
    if m[3] != "undefined":
        ratio = _num(m[4])
        large, small_growth = _num(m[1]), _num(m[2])  # printed in MiB to 1 decimal: each within 0.05
        bounds = ((large - 0.05) / (small_growth + 0.05), (large + 0.05) / max(small_growth - 0.05, 1e-9))
        assert _within(ratio, bounds, 0.005)  # the ratio printed to 2 decimals
        assert (m[5] == "met") == (ratio <= TARGETS["memory_ratio"])

    m = _row(text, r"^\(4\) engine constructions, (\d+)-model x (\d+)-protocol x (\d+)-prompt sweep: (\d+) runs, "
                   r"(\d+) processes \((.*)\)\s+(\d+)\s+(\d+) models\s+([\d.]+)x\s+(met|MISSED) \(== (\d+)\)$")
    models, protocols, prompts, runs, processes = (int(g) for g in m.groups()[:5])
    loads, n_models = int(m[7]), int(m[8])
    assert (models, protocols, prompts, runs, n_models) == (2, 2, len(QUICK["sweep_prompts"]), 4, 2)
    per_model = {name: int(count) for name, count in (p.rsplit(" ", 1) for p in m[6].split(", "))}
    assert len(per_model) == models and sum(per_model.values()) == loads
    assert loads >= models and min(per_model.values()) >= 1 and 1 <= processes <= loads
    assert float(m[9]) == pytest.approx(loads / models, abs=0.05)
    assert (m[10] == "met") == (loads == TARGETS["loads"]) and int(m[11]) == TARGETS["loads"]


@pytest.mark.slow
def test_verdict_lines_repeat_the_table(printed):
    text, _ = printed
    in_table = re.findall(r"\s(met|MISSED) \(([^)]*)\)$", text.split("verdicts:")[0], re.MULTILINE)
    lines = re.findall(r"^  (met|MISSED|not measured): (.+) (\S+) \(target ([^)]*)\)$", text, re.MULTILINE)
    assert len(lines) == 4
    assert [(v, t) for v, t in in_table] == [(v, t) for v, _, _, t in lines if v != "not measured"]
    missed = sum(v == "MISSED" for v, *_ in lines)
    unmeasured = sum(v == "not measured" for v, *_ in lines)
    assert re.search(rf"^targets: {4 - missed - unmeasured} met, {missed} missed", text, re.MULTILINE)


def test_counting_engine_counts_constructions_not_option_checks(tmp_path):
    from omnieval.dev.counting_engine import CountingEngine, read_counts
    from omnieval.engines import create_engine
    from omnieval.engines.base import OptionError

    count_file = str(tmp_path / "loads.txt")
    CountingEngine.check_options({"count_file": count_file, "seed": 3})
    with pytest.raises(OptionError, match="invalid_rate"):
        CountingEngine.check_options({"count_file": count_file, "invalid_rate": 2.0})
    assert read_counts(count_file) == []
    create_engine("bench-counting", model="a", count_file=count_file)
    create_engine("bench-counting", model="b", count_file=count_file, seed=1)
    assert read_counts(count_file) == [(os.getpid(), "a"), (os.getpid(), "b")]
