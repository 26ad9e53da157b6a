"""``omnieval.kernels.shapley``: exact Shapley values over all coalitions of M players (modalities), vectorised
over resamples.

The game is given as a table ``v[r, S]`` over coalition bitmasks ``S`` (bit m set = player m present; for the
dissonance protocol "present" = the modality is clean, so ``v(S)`` is the accuracy of the condition in which exactly
the modalities in S are clean). ``phi_m = sum_{S without m} |S|! (M-|S|-1)! / M! * (v(S + m) - v(S))``: with M = 3
that is 4 terms per player, cheap enough to evaluate on every bootstrap resample, which is how its CI is formed.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _popcount(x):
    c = 0
    while x:
        x &= x - 1
        c += 1
    return c


@njit(cache=True)
def shapley_values(v):
    """``phi[r, m]`` for a game table ``v[r, 2**M]``; efficiency: ``phi.sum(1) == v[:, -1] - v[:, 0]``."""
    n_rows, n_coalitions = v.shape
    m_players = 0
    while (1 << m_players) < n_coalitions:
        m_players += 1
    weight = np.zeros(m_players)
    for s in range(m_players):
        weight[s] = math.exp(math.lgamma(s + 1.0) + math.lgamma(m_players - s + 0.0) - math.lgamma(m_players + 1.0))
    out = np.zeros((n_rows, m_players))
    for r in range(n_rows):
        for m in range(m_players):
            bit = 1 << m
            acc = 0.0
            for s in range(n_coalitions):
                if s & bit == 0:
                    acc += weight[_popcount(s)] * (v[r, s | bit] - v[r, s])
            out[r, m] = acc
    return out
