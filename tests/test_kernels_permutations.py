"""omnieval.kernels.permutations against itertools: enumeration order, ranks, and seeded sampling without
replacement."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from omnieval.kernels.permutations import all_permutations, factorial, rank_of, sample_permutations, unrank


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_all_permutations_equal_itertools_in_order(n):
    expected = [list(p) for p in itertools.permutations(range(n))]
    got = all_permutations(n)
    assert got.shape == (math.factorial(n), n)
    assert got.tolist() == expected


def test_rank_and_unrank_follow_itertools_positions():
    for n in (3, 4, 7):
        for rank, perm in enumerate(itertools.permutations(range(n))):
            if rank % 97 and n == 7:
                continue  # a spread of ranks for n = 7
            assert unrank(rank, n).tolist() == list(perm)
            assert rank_of(perm) == rank
    # the last rank is the reversed order, at the largest size kept exact in 64 bits
    assert unrank(math.factorial(20) - 1, 20).tolist() == list(range(19, -1, -1))
    assert factorial(20) == math.factorial(20)
    with pytest.raises(ValueError):
        unrank(24, 4)
    with pytest.raises(ValueError):
        rank_of([0, 0, 1])


def test_samples_are_distinct_valid_permutations_in_rank_order():
    all4 = [tuple(p) for p in itertools.permutations(range(4))]
    for k in (0, 1, 5, 23, 24):
        got = [tuple(p) for p in sample_permutations(4, k, seed=7, stream=11)]
        assert len(got) == k and len(set(got)) == k
        assert set(got) <= set(all4)
        assert [all4.index(p) for p in got] == sorted(all4.index(p) for p in got)
    assert [tuple(p) for p in sample_permutations(4, 24, 7, 11)] == all4  # all of them: every permutation once
    excl = [tuple(p) for p in sample_permutations(4, 23, 7, 11, exclude_identity=True)]
    assert excl == all4[1:]
    with pytest.raises(ValueError):
        sample_permutations(3, 6, 0, 0, exclude_identity=True)  # only 5 non-identity orders exist


def test_sampling_is_keyed_and_reproducible():
    a = sample_permutations(6, 10, seed=3, stream=5)
    assert (a == sample_permutations(6, 10, seed=3, stream=5)).all()
    assert not (a == sample_permutations(6, 10, seed=3, stream=6)).all()
    assert not (a == sample_permutations(6, 10, seed=4, stream=5)).all()
    big = sample_permutations(20, 3, seed=1, stream=2)
    for row in big:
        assert sorted(row.tolist()) == list(range(20))


def test_sample_is_a_uniform_subset():
    """k = 2 of the 6 permutations of 3 items over 6,000 streams: every permutation is in the sample with
    probability 2/6, and every unordered pair (15 of them) with probability 1/15 (chi-square, 1% level)."""
    singles, pairs = Counter(), Counter()
    reps = 6000
    for stream in range(reps):
        s = [tuple(p) for p in sample_permutations(3, 2, seed=0, stream=stream)]
        singles.update(s)
        pairs[tuple(sorted(s))] += 1
    assert len(singles) == 6 and len(pairs) == 15
    assert stats.chisquare(list(singles.values()), [reps * 2 / 6] * 6).pvalue > 0.01
    assert stats.chisquare(list(pairs.values()), [reps / 15] * 15).pvalue > 0.01
    # excluding the identity: the 5 others, each with probability 2/5
    ex = Counter(tuple(p) for stream in range(3000)
                 for p in sample_permutations(3, 2, seed=1, stream=stream, exclude_identity=True))
    assert (0, 1, 2) not in ex and len(ex) == 5
    assert stats.chisquare(list(ex.values()), [3000 * 2 / 5] * 5).pvalue > 0.01
    assert np.isclose(sum(ex.values()), 6000)
