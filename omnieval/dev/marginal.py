"""The marginal rate of a bench, (n_large - n_small) / (t_large - t_small), printed only where the difference is
measured: the benches time each size several times, warm, and keep the best, and a difference within the noise of
those repeats, or a small fraction of the small run's time, is start-up noise, for which the table says "not
measured" instead of a rate (a cold small run that outlasted a warm large one once printed -4,393 instances/s)."""

from __future__ import annotations

from typing import NamedTuple

NOISE_FACTOR = 3.0  # the difference of the two sizes' times must exceed this many times the repeats' spread ...
MIN_FRACTION = 0.1  # ... and this fraction of the small run's time (a lucky small spread of few repeats)
class Marginal(NamedTuple):
    """The marginal rate between two sizes; ``rate`` is None where the difference is not measured."""

    rate: float | None
    seconds: float  # best large - best small
    noise: float  # the larger spread (max - min) of the two sizes' repeats

    def why_not(self) -> str:
        return (f"the large run was not clearly longer than the small one: {self.seconds:.2f} s apart with "
                f"repeats spread by {self.noise:.2f} s; a rate needs a difference > {NOISE_FACTOR:g} x the spread "
                f"and > {MIN_FRACTION:g} x the small run's time (use larger sizes)")


def marginal_rate(n_small: int, small_times: list[float], n_large: int, large_times: list[float]) -> Marginal:
    """``(n_large - n_small) / (best large - best small)`` where that difference is clearly measured: above
    ``NOISE_FACTOR`` times the spread of either size's repeats and above ``MIN_FRACTION`` of the small run's best
    time; else ``rate`` None (never a negative or absurd rate from start-up noise)."""
    best_small, best_large = min(small_times), min(large_times)
    noise = max(max(small_times) - best_small, max(large_times) - best_large)
    seconds = best_large - best_small
    measured = n_large > n_small and seconds > NOISE_FACTOR * noise and seconds > MIN_FRACTION * best_small
    return Marginal((n_large - n_small) / seconds if measured else None, seconds, noise)
