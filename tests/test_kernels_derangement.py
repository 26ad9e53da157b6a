"""``omnieval.kernels.derangement``: never a fixed point, donors inside the group, each group's donors a permutation of
it (marginals kept), keyed and order-free, independent streams, uniform donors; against plain numpy/Python checks."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from omnieval.kernels.derangement import derange, derange_apart
from omnieval.kernels.rng import draw64, stream_key


def check_derangement(groups: np.ndarray, donor: np.ndarray) -> None:
    """The three defining properties, checked with plain Python over the groups."""
    members = collections.defaultdict(list)
    for i, g in enumerate(groups.tolist()):
        members[g].append(i)
    for idx in members.values():
        if len(idx) == 1:
            assert donor[idx[0]] == -1
            continue
        got = [int(donor[i]) for i in idx]
        assert all(d != i for d, i in zip(got, idx, strict=True)), "an item keeps its own modality"
        assert sorted(got) == sorted(idx), "donors are not a permutation of the group"


@pytest.mark.parametrize("n, n_groups", [(2, 1), (3, 1), (10, 3), (1_000, 7), (5_000, 2_000), (20_000, 1)])
def test_every_donor_is_another_member_and_each_group_a_permutation(n, n_groups):
    rng = np.random.default_rng(n)
    groups = rng.integers(0, n_groups, n)
    for seed, stream in [(0, 0), (1, 2), (2**63 + 5, 2**64 - 1)]:
        check_derangement(groups, derange(groups, seed, stream))


def test_lone_items_get_minus_one_and_the_rest_are_unaffected():
    groups = np.array([5, 5, 9, 7, 7, 7, -3])
    donor = derange(groups, 0, 0)
    assert donor[2] == -1 and donor[6] == -1
    check_derangement(groups, donor)
    assert derange(np.array([4]), 0, 0).tolist() == [-1]
    assert derange(np.array([], dtype=np.int64), 0, 0).tolist() == []


def test_sparse_and_negative_group_ids_take_the_exact_path_with_the_same_result():
    """Group ids far apart (2**40 spacing) are too wide to pack: the lexsort path must give the same donors as
    the packed path on the same groups, since both order by (group, rank) exactly."""
    rng = np.random.default_rng(1)
    compact = rng.integers(0, 50, 3_000)
    keys = rng.integers(0, 2**63, 3_000).astype(np.uint64)
    wide = compact * 2**40 - 2**45
    a = derange(compact, 3, 4, keys)
    b = derange(wide, 3, 4, keys)
    check_derangement(wide, b)
    assert np.array_equal(a, b)


def test_reference_cycle_from_plain_python():
    """Independent reference: sort each group's items by their keyed 64-bit rank (plain Python ``sorted`` on the
    ranks computed one by one), then each item's donor is the next one of that order, the last's the first."""
    rng = np.random.default_rng(2)
    groups = rng.integers(0, 4, 300)
    keys = rng.integers(0, 2**63, 300).astype(np.uint64)
    seed, stream = 11, 12
    key_stream = np.uint64(stream_key(np.uint64(seed), np.uint64(stream), np.uint64(0)))
    rank = [int(draw64(key_stream, k)) for k in keys]
    expected = np.full(300, -1)
    for g in set(groups.tolist()):
        idx = sorted((i for i in range(300) if groups[i] == g), key=lambda i: rank[i])
        for a, b in zip(idx, idx[1:] + idx[:1], strict=True):
            expected[a] = b
    assert np.array_equal(derange(groups, seed, stream, keys), expected)


def test_ties_of_the_packed_rank_are_ordered_exactly():
    """With one huge group, the packed value keeps only the rank's top bits; equal keys force exact ties, which
    must fall back to (key, row) order: two items with the same key keep their row order."""
    keys = np.array([7, 7, 3, 7], dtype=np.uint64)
    donor = derange(np.zeros(4, dtype=np.int64), 0, 0, keys)
    check_derangement(np.zeros(4), donor)
    # rows 0, 1, 3 share a key (and so a rank): in the cycle they follow each other in row order
    key_stream = np.uint64(stream_key(np.uint64(0), np.uint64(0), np.uint64(0)))
    r7, r3 = int(draw64(key_stream, np.uint64(7))), int(draw64(key_stream, np.uint64(3)))
    order = [0, 1, 3, 2] if r7 < r3 else [2, 0, 1, 3]
    expected = {a: b for a, b in zip(order, order[1:] + order[:1], strict=True)}
    assert donor.tolist() == [expected[i] for i in range(4)]


def test_deterministic_and_free_of_the_row_order_with_keys():
    rng = np.random.default_rng(3)
    n = 2_000
    groups = rng.integers(0, 5, n)
    keys = rng.choice(2**62, size=n, replace=False).astype(np.uint64)
    donor = derange(groups, 9, 1, keys)
    assert np.array_equal(donor, derange(groups.copy(), 9, 1, keys.copy()))
    perm = rng.permutation(n)
    shuffled = derange(groups[perm], 9, 1, keys[perm])
    # identities: the key of the donor of each key is the same, whatever the row order
    assert {int(keys[i]): int(keys[donor[i]]) for i in range(n)} == \
        {int(keys[perm][j]): int(keys[perm][shuffled[j]]) for j in range(n)}


def test_adding_an_item_changes_few_donors():
    rng = np.random.default_rng(4)
    keys = rng.choice(2**62, size=501, replace=False).astype(np.uint64)
    groups = np.zeros(501, dtype=np.int64)
    before = derange(groups[:500], 0, 0, keys[:500])
    after = derange(groups, 0, 0, keys)
    changed = int((before != after[:500]).sum())
    assert changed == 1  # the new item slots into the cycle: only its predecessor's donor changes


def test_seeds_and_streams_are_independent():
    groups = np.zeros(400, dtype=np.int64)
    a = derange(groups, 0, 1)
    b = derange(groups, 0, 2)
    c = derange(groups, 1, 1)
    # two independent uniform donors over 399 others coincide on ~1 item in 399
    assert (a == b).sum() < 10 and (a == c).sum() < 10


def test_donors_are_uniform_over_the_other_members():
    """Over many streams, item 0's donor in a group of 5 is each of the other four about equally often, and all
    4! = 24 cyclic orders appear about equally often (a chi-square bound far beyond noise)."""
    groups = np.zeros(5, dtype=np.int64)
    draws = [tuple(derange(groups, 0, s)) for s in range(4_000)]
    first = collections.Counter(d[0] for d in draws)
    assert set(first) == {1, 2, 3, 4}
    chi2 = sum((c - 1_000) ** 2 / 1_000 for c in first.values())
    assert chi2 < 20  # df 3: p ~ 2e-4
    cycles = collections.Counter(draws)
    assert len(cycles) == 24
    chi2 = sum((c - 4_000 / 24) ** 2 / (4_000 / 24) for c in cycles.values())
    assert chi2 < 60  # df 23: p ~ 4e-5


def test_a_random_cycle_is_a_single_cycle():
    """Documented property (donor uniform among the others): following donors visits the whole group."""
    donor = derange(np.zeros(50, dtype=np.int64), 5, 6)
    seen, i = [], 0
    for _ in range(50):
        seen.append(i)
        i = int(donor[i])
    assert i == 0 and sorted(seen) == list(range(50))


def test_signed_and_unsigned_keys_agree_and_bad_keys_are_refused():
    groups = np.zeros(6, dtype=np.int64)
    signed = np.array([-1, 2, 3, -4, 5, 6], dtype=np.int64)
    assert np.array_equal(derange(groups, 0, 0, signed), derange(groups, 0, 0, signed.view(np.uint64)))
    with pytest.raises(ValueError, match="keys has 2 entries"):
        derange(groups, 0, 0, np.array([1, 2]))
    with pytest.raises(TypeError):
        derange(groups, 0, 0, np.linspace(0, 1, 6))


def test_small_groups_exhaustively():
    """Every group layout of up to 6 items (ids 0..2): always a derangement per group."""
    for n in range(1, 7):
        for layout in itertools.product(range(3), repeat=n):
            check_derangement(np.array(layout), derange(np.array(layout), n, 0))


# ---------------------------------------------------------------------------------------------------------------
# derange_apart: donors never from the row's own block (the copies of one question)
# ---------------------------------------------------------------------------------------------------------------

def check_apart(groups: np.ndarray, blocks: np.ndarray, donor: np.ndarray) -> None:
    """Plain Python: per group, either no permutation can keep blocks apart (a block over half the group) and
    every entry is -1, or the donors are a permutation of the group with no row in its own block."""
    members = collections.defaultdict(list)
    for i, g in enumerate(groups.tolist()):
        members[g].append(i)
    for idx in members.values():
        largest = max(collections.Counter(int(blocks[i]) for i in idx).values())
        if 2 * largest > len(idx):
            assert all(donor[i] == -1 for i in idx)
            continue
        got = [int(donor[i]) for i in idx]
        assert sorted(got) == sorted(idx), "donors are not a permutation of the group"
        assert all(blocks[d] != blocks[i] for d, i in zip(got, idx, strict=True)), "a row borrows from its block"


@pytest.mark.parametrize("n, n_groups, n_blocks", [(2, 1, 2), (10, 2, 4), (36, 4, 12), (3_000, 7, 900),
                                                   (500, 1, 3), (400, 20, 399)])
def test_apart_donors_are_a_permutation_outside_the_block(n, n_groups, n_blocks):
    rng = np.random.default_rng(n + n_blocks)
    groups = rng.integers(0, n_groups, n)
    blocks = rng.integers(0, n_blocks, n)
    for seed, stream in [(0, 0), (5, 9), (2**63 + 1, 2**64 - 3)]:
        check_apart(groups, blocks, derange_apart(groups, blocks, seed, stream))


def test_apart_small_layouts_exhaustively():
    """Every layout of up to 6 rows in up to 2 groups and 3 blocks: a valid donor whenever one can exist."""
    for n in range(1, 7):
        for groups in itertools.product(range(2), repeat=n):
            for blocks in itertools.product(range(3), repeat=n):
                g, b = np.array(groups), np.array(blocks)
                check_apart(g, b, derange_apart(g, b, n, 1))


def test_apart_is_free_of_the_row_order_and_keyed_on_identities():
    rng = np.random.default_rng(7)
    n = 600
    groups = rng.integers(0, 3, n)
    question = rng.integers(0, 150, n)
    keys = rng.choice(2**62, size=n, replace=False).astype(np.uint64)
    block_keys = (question * 7919 + 3).astype(np.uint64)
    donor = derange_apart(groups, question, 4, 2, keys, block_keys)
    perm = rng.permutation(n)
    # rows permuted and the block ids renumbered (only the block keys give the order): the same donor identities
    shuffled = derange_apart(groups[perm], 1000 - question[perm], 4, 2, keys[perm], block_keys[perm])
    assert {int(keys[i]): int(keys[donor[i]]) for i in range(n)} == \
        {int(keys[perm][j]): int(keys[perm][shuffled[j]]) for j in range(n)}
    assert not np.array_equal(donor, derange_apart(groups, question, 5, 2, keys, block_keys))


def test_apart_with_single_row_blocks_is_one_random_cycle():
    donor = derange_apart(np.zeros(40, dtype=np.int64), np.arange(40), 3, 4)
    seen, i = [], 0
    for _ in range(40):
        seen.append(i)
        i = int(donor[i])
    assert i == 0 and sorted(seen) == list(range(40))


def test_apart_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="blocks has 2 entries for 3 items"):
        derange_apart(np.zeros(3), np.zeros(2), 0, 0)
