"""Option orders for the ``contrastive`` protocol: all ``n!`` permutations, or a seeded sample of distinct ones.

* ``all_permutations(n)``: every permutation of ``0..n-1`` in lexicographic order (the order of
  ``itertools.permutations(range(n))``), as an ``(n!, n)`` int64 array. Row ``r`` is the permutation of *rank* ``r``.
* ``unrank(rank, n)`` / ``rank_of(perm)``: the bijection between ranks ``0..n!-1`` and permutations (factorial number
  system / Lehmer code), so a permutation can be drawn as one integer.
* ``sample_permutations(n, k, seed, stream, exclude_identity)``: ``k`` distinct permutations drawn uniformly without
  replacement (a uniform ``k``-subset of the ranks by Floyd's algorithm), returned in rank order. Every draw comes
  from the counter-based streams of ``omnieval.kernels.rng``: the result is a pure function of ``(n, k, seed, stream)``,
  the same on any machine, thread count or call order. ``exclude_identity`` draws from ranks ``1..n!-1`` (the identity,
  rank 0, is the ``original`` condition, evaluated anyway).

Ranks are exact 64-bit integers up to ``n = 20`` (``20! < 2**63``); a bounded integer is drawn by rejection so no rank
is favoured even when ``n!`` is close to ``2**64``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from omnieval.kernels.rng import draw64, stream_key

MAX_N = 20


@njit(cache=True)
def _factorial(n):
    out = np.int64(1)
    for i in range(2, n + 1):
        out *= i
    return out


@njit(cache=True)
def _unrank(rank, n, out):
    """Permutation of lexicographic ``rank`` written into ``out`` (length n)."""
    available = np.arange(n)
    m = n
    r = np.int64(rank)
    for i in range(n):
        f = _factorial(n - 1 - i)
        j = r // f
        r -= j * f
        out[i] = available[j]
        for t in range(j, m - 1):
            available[t] = available[t + 1]
        m -= 1


@njit(cache=True)
def _all(n, out):
    for r in range(out.shape[0]):
        _unrank(r, n, out[r])


@njit(cache=True)
def _bounded(key, counter, m):
    """A uniform integer in ``[0, m)`` from the stream ``key``, starting at ``counter``; returns (value, next counter).
    Rejects the lowest ``2**64 mod m`` raw values, so the remaining range is a multiple of ``m``."""
    um = np.uint64(m)
    threshold = (np.uint64(0) - um) % um  # 2**64 mod m
    c = counter
    while True:
        x = draw64(key, c)
        c += 1
        if x >= threshold:
            return np.int64(x % um), c


@njit(cache=True)
def _floyd(total, k, offset, key, chosen):
    """Floyd's algorithm: a uniform ``k``-subset of ``offset .. offset + total - 1`` written into ``chosen``."""
    counter = np.int64(0)
    filled = 0
    for j in range(total - k, total):
        t, counter = _bounded(key, counter, j + 1)
        seen = False
        for i in range(filled):
            if chosen[i] == t + offset:
                seen = True
                break
        chosen[filled] = (j if seen else t) + offset
        filled += 1


def _check_n(n: int) -> int:
    n = int(n)
    if not 0 <= n <= MAX_N:
        raise ValueError(f"n must be in 0..{MAX_N}, got {n}")
    return n


def factorial(n: int) -> int:
    return int(_factorial(_check_n(n)))


def all_permutations(n: int) -> np.ndarray:
    """Every permutation of ``0..n-1`` in lexicographic order: an ``(n!, n)`` int64 array (``n <= 10``)."""
    n = _check_n(n)
    if n > 10:
        raise ValueError(f"{n}! permutations are too many to list; sample them instead")
    out = np.empty((factorial(n), n), dtype=np.int64)
    _all(n, out)
    return out


def unrank(rank: int, n: int) -> np.ndarray:
    """The permutation of lexicographic rank ``rank`` (0 = identity, ``n! - 1`` = reversed)."""
    n = _check_n(n)
    if not 0 <= int(rank) < factorial(n):
        raise ValueError(f"rank must be in 0..{factorial(n) - 1}, got {rank}")
    out = np.empty(n, dtype=np.int64)
    _unrank(np.int64(rank), n, out)
    return out


def rank_of(perm) -> int:
    """Lexicographic rank of a permutation of ``0..n-1`` (inverse of ``unrank``)."""
    perm = [int(p) for p in perm]
    n = _check_n(len(perm))
    if sorted(perm) != list(range(n)):
        raise ValueError(f"not a permutation of 0..{n - 1}: {perm}")
    rank, rest = 0, list(range(n))
    for i, p in enumerate(perm):
        j = rest.index(p)
        rank += j * factorial(n - 1 - i)
        rest.pop(j)
    return rank


def sample_permutations(n: int, k: int, seed: int, stream: int, exclude_identity: bool = False) -> np.ndarray:
    """``k`` distinct permutations of ``0..n-1`` drawn uniformly without replacement, in rank order: a ``(k, n)`` int64
    array. ``exclude_identity`` leaves out ``0..n-1`` itself. Raises ``ValueError`` when fewer than ``k`` exist."""
    n = _check_n(n)
    total = factorial(n) - (1 if exclude_identity else 0)
    k = int(k)
    if not 0 <= k <= total:
        raise ValueError(f"cannot draw {k} distinct permutations of {n} items ({total} available)")
    key = np.uint64(stream_key(np.uint64(int(seed) % 2**64), np.uint64(int(stream) % 2**64), np.uint64(0)))
    ranks = np.empty(k, dtype=np.int64)
    if k:
        _floyd(np.int64(total), np.int64(k), np.int64(1 if exclude_identity else 0), key, ranks)
    ranks.sort()
    out = np.empty((k, n), dtype=np.int64)
    for i, r in enumerate(ranks):
        _unrank(r, n, out[i])
    return out
