"""Seeded derangements within groups: the donor of every item for the ``spectrum`` protocol's modality shuffles.

``derange(groups, seed, stream, keys)`` returns ``donor[i]``: another item of the same group as ``i`` (never ``i``
itself), such that within each group the donors are a permutation of the group's items. So every item lends its
modality to exactly one other item: each modality keeps its marginal distribution (every image is still shown
exactly once), while the pairing between modalities is broken (docs/reference.md, Protocol `spectrum`). A group of one
item cannot be deranged; its entry is ``-1`` and the caller decides (the protocol raises an error naming the item, or
pools it).

How (why it is fast and free of the row order):

1. Every item gets a 64-bit random rank ``draw64(stream_key(seed, stream, 0), key)`` from its *key* (a stable
   identity, e.g. a hash of the item id), not from its position: the counter-based streams of ``omnieval.kernels.rng``.
2. Items are sorted by ``(group, rank)``: group id, the rank's top bits and the row index are packed into one uint64
   and sorted as plain values (numpy's vectorised sort; an ``argsort`` is twice as slow). Packed values whose group
   and rank bits tie, which is rare, are then put in exact ``(full rank, key, row)`` order. When the group-id span
   and the row count together need more than 48 bits, a ``lexsort`` on the full ranks replaces the packing.
3. Within each group, item ``j`` of that random order takes its donor from item ``j + 1`` (the last from the first):
   a uniformly random single cycle through the group (the permutations Sattolo's algorithm draws).

Consequences, each checked in ``tests/test_kernels_derangement.py``:

* each item's donor is uniform over the *other* members of its group (a random cycle is not a uniform random
  derangement, but every donor is equally likely, which is what a shuffle baseline needs, and no item ever keeps
  its own modality);
* the result depends only on ``(seed, stream, groups, keys)``: permuting the input rows permutes the output the
  same way (donors are identities, not positions), so 1 or 100 workers expanding a benchmark agree;
* adding one item to a group changes one other item's donor (its predecessor in the random order), not the rest;
* ``stream`` separates independent uses (one per modality in the protocol): different streams give independent
  derangements of the same groups.

Without ``keys`` the row index is the key (then the result is a function of the row order).

``derange_apart(groups, blocks, ...)`` adds a constraint: no row takes its donor from its own *block* (the rotated
copies of one question, which share its image and stem). It lays each group out block by block and shifts by the
largest block (its docstring says why that is always a permutation that keeps blocks apart, when one exists).

Speed, measured with ``time.perf_counter`` (``omnieval.dev.bench_stats.derange_seconds``, row (e) of ``omnieval
bench stats``: warm, best of 3) on this project's 2-core CPU development machine (numba 0.68, numpy 2.4, idle):
1,000,000 items in 1,000 groups in 0.09 s; 5,000,000 items in 1,000 groups in 0.53 s, in 1,000,000 groups in
0.56 s, in one group in 0.52 s (~9.5 M items/s; about two thirds is the one sort, the rest the rank hashing and the
scattered writes of ``donor``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from omnieval.kernels.rng import draw64, stream_key

_PACK_BITS = 48
"""Group and row bits packed beside the rank's top bits (at least 16 rank bits stay; ties are resolved exactly)."""


@njit(cache=True)
def _pack(groups, lo, keys, key_stream, group_bits, row_bits, out):
    """``out[i] = group | rank's top bits | row`` (most to least significant)."""
    rank_bits = 64 - group_bits - row_bits
    for i in range(groups.shape[0]):
        rank = draw64(key_stream, keys[i])
        value = (rank >> np.uint64(64 - rank_bits)) << np.uint64(row_bits)
        if group_bits > 0:
            value |= np.uint64(groups[i] - lo) << np.uint64(64 - group_bits)
        out[i] = value | np.uint64(i)


@njit(cache=True)
def _before(a, b, keys, key_stream):
    """Whether row ``a`` precedes row ``b`` in the exact order: full rank, then key, then row."""
    ra = draw64(key_stream, keys[a])
    rb = draw64(key_stream, keys[b])
    if ra != rb:
        return ra < rb
    if keys[a] != keys[b]:
        return keys[a] < keys[b]
    return a < b


@njit(cache=True)
def _unpack_and_assign(packed_sorted, row_bits, groups, keys, key_stream, donor):
    """Rows from the sorted packed values; exact order inside runs of tied (group, rank bits); then the cycles."""
    n = packed_sorted.shape[0]
    mask = (np.uint64(1) << np.uint64(row_bits)) - np.uint64(1)
    order = np.empty(n, dtype=np.int64)
    for j in range(n):
        order[j] = np.int64(packed_sorted[j] & mask)
    s = 0
    while s < n:
        e = s + 1
        high = packed_sorted[s] >> np.uint64(row_bits)
        while e < n and (packed_sorted[e] >> np.uint64(row_bits)) == high:
            e += 1
        for j in range(s + 1, e):  # insertion sort of a tie run (two rows, when there is one at all)
            x = order[j]
            k = j - 1
            while k >= s and _before(x, order[k], keys, key_stream):
                order[k + 1] = order[k]
                k -= 1
            order[k + 1] = x
        s = e
    _cycles(order, groups, donor)


@njit(cache=True)
def _cycles(order, groups, donor):
    """Rows in (group, random) order -> each row's donor is the next row of its group, the last row's the first."""
    n = order.shape[0]
    s = 0
    while s < n:
        e = s + 1
        g = groups[order[s]]
        while e < n and groups[order[e]] == g:
            e += 1
        if e - s == 1:
            donor[order[s]] = -1
        else:
            for j in range(s, e - 1):
                donor[order[j]] = order[j + 1]
            donor[order[e - 1]] = order[s]
        s = e


@njit(cache=True)
def _ranks(keys, key_stream):
    out = np.empty(keys.shape[0], dtype=np.uint64)
    for i in range(keys.shape[0]):
        out[i] = draw64(key_stream, keys[i])
    return out


def _as_keys(keys, n: int) -> np.ndarray:
    if keys is None:
        return np.arange(n, dtype=np.uint64)
    keys = np.ascontiguousarray(keys).reshape(-1)
    if keys.shape[0] != n:
        raise ValueError(f"keys has {keys.shape[0]} entries for {n} items")
    if keys.dtype == np.uint64:
        return keys
    if keys.dtype.kind not in "iu":
        raise TypeError(f"keys must be integers, not {keys.dtype}")
    return keys.astype(np.int64).view(np.uint64)


def derange(groups, seed: int, stream: int, keys=None) -> np.ndarray:
    """``donor[i]`` (int64): a row of ``i``'s group other than ``i``, each group's donors a permutation of the
    group; ``-1`` for a row alone in its group. ``keys`` (64-bit integer item identities, distinct within a group)
    make the result independent of the row order; by default a row's index is its key."""
    groups = np.ascontiguousarray(groups, dtype=np.int64).reshape(-1)
    n = groups.shape[0]
    keys = _as_keys(keys, n)
    donor = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return donor
    key_stream = np.uint64(stream_key(np.uint64(seed % 2**64), np.uint64(stream % 2**64), np.uint64(0)))
    lo, hi = int(groups.min()), int(groups.max())
    group_bits = (hi - lo).bit_length()
    row_bits = max(1, (n - 1).bit_length())
    if group_bits + row_bits <= _PACK_BITS:
        packed = np.empty(n, dtype=np.uint64)
        _pack(groups, np.int64(lo), keys, key_stream, group_bits, row_bits, packed)
        packed.sort()
        _unpack_and_assign(packed, row_bits, groups, keys, key_stream, donor)
    else:  # sparse or huge group ids: exact lexicographic sort (group, rank, key, row)
        order = np.lexsort((keys, _ranks(keys, key_stream), groups)).astype(np.int64)
        _cycles(order, groups, donor)
    return donor


def derange_apart(groups, blocks, seed: int, stream: int, keys=None, block_keys=None) -> np.ndarray:
    """``donor[i]`` (int64): a row of ``i``'s group in another *block* than ``i``'s, each group's donors a
    permutation of the group; ``-1`` for every row of a group where no such permutation exists.

    Blocks are rows that must never lend to each other: the rotated copies of one question (VLMEvalKit's circular
    copies share its image and its stem, so a sibling's image or question is the item's own). A permutation that
    keeps every row away from its block exists exactly when no block holds more than half of its group's rows (a
    block of ``b`` rows needs ``b`` donors from the other ``n - b``).

    How: the rows of a group are laid out block by block, blocks in a random order (rank keyed on ``block_keys``,
    stream counter 1), rows within a block in a random order (rank keyed on ``keys``, counter 0, as ``derange``);
    row ``j`` of that layout takes its donor from row ``j + M`` (cyclically), ``M`` the group's largest block.
    A block is contiguous and at most ``M`` long, so ``j + M`` lies past its end, and with ``2 M <= n`` the wrap
    cannot come back into it. Donors are therefore a permutation (a shift is one), never in the row's own block,
    and a function of the identities only: permuting the input rows permutes the output the same way. Unlike
    ``derange`` a donor is not uniform over all other rows: the copies of one question take their donors from the
    next one or two questions of the layout. With every block a single row this is one random cycle through the
    group, as in ``derange`` (not the same cycle: the ranks come from the block stream).

    ``blocks``: integer block id per row (a block's rows compared within each group); ``block_keys``: 64-bit block
    identities (default: the block ids), equal for the rows of one block.
    """
    groups = np.ascontiguousarray(groups, dtype=np.int64).reshape(-1)
    blocks = np.ascontiguousarray(blocks, dtype=np.int64).reshape(-1)
    n = groups.shape[0]
    if blocks.shape[0] != n:
        raise ValueError(f"blocks has {blocks.shape[0]} entries for {n} items")
    keys = _as_keys(keys, n)
    block_keys = _as_keys(blocks if block_keys is None else block_keys, n)
    donor = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return donor
    seed_u, stream_u = np.uint64(seed % 2**64), np.uint64(stream % 2**64)
    row_rank = _ranks(keys, np.uint64(stream_key(seed_u, stream_u, np.uint64(0))))
    block_rank = _ranks(block_keys, np.uint64(stream_key(seed_u, stream_u, np.uint64(1))))
    order = np.lexsort((np.arange(n), keys, row_rank, blocks, block_rank, groups))
    g = groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, n])
    # the largest block of each group: run lengths of (group, block) in the layout (a block is contiguous there)
    gb = blocks[order]
    runs = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (gb[1:] != gb[:-1])])
    run_sizes = np.diff(np.r_[runs, n])
    shift = np.maximum.reduceat(run_sizes, np.searchsorted(runs, starts)).astype(np.int64)
    ok = 2 * shift <= sizes
    member = np.repeat(np.arange(len(starts)), sizes)  # layout position -> its group's number
    local = np.arange(n) - starts[member]
    target = starts[member] + (local + shift[member]) % sizes[member]
    fine = ok[member]
    donor[order[fine]] = order[target[fine]]
    return donor
