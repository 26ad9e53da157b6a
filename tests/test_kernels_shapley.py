"""Shapley kernel against the permutation definition (average marginal contribution over all player orders)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from omnieval.kernels.shapley import shapley_values


def shapley_by_orders(v_row: np.ndarray, players: int) -> np.ndarray:
    phi = np.zeros(players)
    orders = list(itertools.permutations(range(players)))
    for order in orders:
        mask = 0
        for m in order:
            phi[m] += v_row[mask | 1 << m] - v_row[mask]
            mask |= 1 << m
    return phi / len(orders)


def test_matches_permutation_definition_for_two_to_five_players():
    rng = np.random.default_rng(0)
    for players in (2, 3, 4, 5):
        v = rng.random((6, 2 ** players))
        phi = shapley_values(v)
        for r in range(6):
            assert np.allclose(phi[r], shapley_by_orders(v[r], players))


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, (3, 8), elements=st.floats(-1, 1, allow_nan=False)))
def test_efficiency_values_sum_to_all_clean_minus_none_clean(v):
    phi = shapley_values(v)
    assert np.allclose(phi.sum(axis=1), v[:, 7] - v[:, 0], atol=1e-12)


def test_symmetric_players_and_null_player():
    # v depends only on player 0 and on the count of players 1, 2: player 0 gets its effect, 1 and 2 are equal
    v = np.array([[(s & 1) * 0.5 + 0.1 * bin(s >> 1).count("1") for s in range(8)]])
    phi = shapley_values(v)[0]
    assert np.isclose(phi[0], 0.5) and np.isclose(phi[1], phi[2]) and np.isclose(phi[1], 0.1)
