"""``omnieval bench engine``'s marginal rate and table on constructed timings (no vLLM, nothing timed): a difference
of the two sizes' times that start-up noise could explain is "not measured", never a negative or absurd rate."""

from __future__ import annotations

import re

import pytest

from omnieval.dev.bench_engine import FULL, MIN_FRACTION, NOISE_FACTOR, marginal_rate, print_table


def test_a_clear_difference_gives_the_marginal_rate_of_the_best_times():
    m = marginal_rate(128, [2.10, 2.00, 2.05], 5760, [7.20, 7.00, 7.10])
    assert m.rate == pytest.approx((5760 - 128) / (7.00 - 2.00))
    assert m.seconds == pytest.approx(5.0) and m.noise == pytest.approx(0.2)


@pytest.mark.parametrize("small, large", [
    ([15.7, 15.9], [14.5, 14.8]),  # the large run faster: start-up noise (once printed as -4,393 instances/s)
    ([3.0, 3.0], [3.0, 3.0]),  # no difference at all
    ([2.0, 3.0], [4.0, 4.2]),  # 2 s apart, but the repeats of the small size spread by 1 s: within 3 x the noise
    ([10.0, 10.0], [10.5, 10.5]),  # no spread, but 0.5 s is under a tenth of the small run
    ([1.0, 1.0], [1.0 + 1e-9, 1.0 + 1e-9]),  # a hair's breadth: would be billions of instances/s
])
def test_a_difference_within_the_noise_is_not_measured(small, large):
    m = marginal_rate(512, small, 5760, large)
    assert m.rate is None
    assert m.seconds == pytest.approx(min(large) - min(small))
    assert m.noise == pytest.approx(max(max(small) - min(small), max(large) - min(large)))


def test_the_thresholds_are_those_documented():
    """Just above both thresholds is measured; just below either is not."""
    small = [4.0, 4.1]  # spread 0.1; a tenth of the small run: 0.4 s
    above = min(small) + max(NOISE_FACTOR * 0.1, MIN_FRACTION * 4.0) + 0.01
    assert marginal_rate(100, small, 1100, [above, above]).rate == pytest.approx(1000 / (above - 4.0))
    below = min(small) + max(NOISE_FACTOR * 0.1, MIN_FRACTION * 4.0) - 0.01
    assert marginal_rate(100, small, 1100, [below, below]).rate is None


def _table(capsys, small, full):
    m = marginal_rate(128, small, 5760, full)
    print_table("tiny", "cpu", FULL, 9.0, 3.0, 128, 5760, {"small": small, "full": full}, m, [4.0, 4.5], 128,
                [2.0, 2.2])
    return m, capsys.readouterr().out


def test_an_unmeasured_marginal_is_said_in_the_table_and_the_targets(capsys):
    m, out = _table(capsys, [15.7, 15.9, 16.0], [14.5, 14.8, 14.6])
    steady = next(line for line in out.splitlines() if line.startswith("pipeline, steady state"))
    assert re.split(r" {2,}", steady) == ["pipeline, steady state: (5,760 - 128) / (14.50 - 15.70) s",
                                          "not measured"]
    assert "start-up of a pipeline run not measured" in out
    assert ("steady state not measured: the large run was not clearly longer than the small one: -1.20 s apart with "
            "repeats spread by 0.30 s") in out
    assert [line for line in out.splitlines() if line.startswith("target ")] == [
        "target steady state >= 0.9 x bare vLLM: not measured",
        "target steady state >= 5 x the transformers loop: not measured"]
    for line in out.splitlines()[3:8]:  # every other figure of the table is a positive rate and time
        cells = re.split(r" {2,}", line)
        assert cells[1] == "not measured" or float(cells[1].replace(",", "")) > 0, line


def test_a_measured_marginal_is_printed_with_its_ratios_and_verdicts(capsys):
    m, out = _table(capsys, [2.0, 2.1, 2.05], [7.0, 7.2, 7.1])
    steady = next(line for line in out.splitlines() if line.startswith("pipeline, steady state"))
    cells = re.split(r" {2,}", steady)
    assert cells[0] == "pipeline, steady state: (5,760 - 128) / (7.00 - 2.00) s"
    assert float(cells[1].replace(",", "")) == pytest.approx(m.rate, abs=0.05)
    limit, peer = 5760 / 4.0, 128 / 2.0
    assert float(cells[3]) == pytest.approx(m.rate / limit, abs=5e-4)
    assert float(cells[4]) == pytest.approx(m.rate / peer, abs=5e-3)
    assert f"start-up of a pipeline run {2.0 - 128 / m.rate:.1f} s" in out
    assert "target steady state >= 0.9 x bare vLLM: MISSED (0.782)" in out  # 1,126.4 / 1,440
    assert "target steady state >= 5 x the transformers loop: met (17.600)" in out  # 1,126.4 / 64
