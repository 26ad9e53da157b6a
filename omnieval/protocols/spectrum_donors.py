"""Donors of the ``spectrum`` protocol: which item lends each modality to each item (the protocol's module doc says
what the shuffle must keep). Kept apart from ``omnieval.protocols.spectrum`` for length; items and options are
that module's ``Item`` and ``Options`` (read by attribute here, so that this module needs nothing from it).

* ``donor_groups``: the group each item draws its donors from (benchmark, split, and as configured option count and
  category), with the groups that cannot be deranged pooled or refused;
* ``donors``: one seeded derangement per modality within those groups (``kernels.derangement``); copies of one
  question (``Item.group``) never lend to each other.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from omnieval.keyed import keyed_seed
from omnieval.schema import InputError

NAME = "spectrum"
"""The protocol's name, in the keys of its donor streams (``keyed_seed(0, NAME, ...)``)."""



def _feasible(idx: Sequence[int], questions: Sequence[str]) -> bool:
    """Whether the items ``idx`` can lend to each other with no item taking a copy of its own question: two or
    more items and no question holding more than half of them (``kernels.derangement.derange_apart``)."""
    if len(idx) < 2:
        return False
    return 2 * max(collections.Counter(questions[i] for i in idx).values()) <= len(idx)


def donor_groups(items: Sequence, options, *, file: str | Path | None = None) -> list[tuple]:
    """The donor group of each item: ``(benchmark, split, n_options if it must match, soft keys)``, after pooling
    the items of groups that cannot be deranged when configured. Raises ``InputError`` naming an item of such a
    group otherwise.

    A group cannot be deranged when it has one item, or when one question's copies (``Item.group``) are more than
    half of it: some copy would have to take its modality from a sibling, which shows the item's own image."""
    hard_options = options.text_unit == "question+options"
    questions = [it.question_id for it in items]

    def hard(it) -> tuple:
        return (it.benchmark, it.split, len(it.options) if hard_options else None)

    def soft(it) -> tuple:
        return (it.category if "category" in options.donor_within else None,
                len(it.options) if "n_options" in options.donor_within else None)

    groups = [(*hard(it), soft(it)) for it in items]
    members: dict[tuple, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    lone = [i for idx in members.values() if not _feasible(idx, questions) for i in idx]
    if lone and options.singletons == "error":
        first = min(lone, key=lambda i: items[i].item_id)
        it, idx = items[first], members[groups[first]]
        shared = [*(["option count"] if hard_options or "n_options" in options.donor_within else []),
                  *(["category"] if "category" in options.donor_within else [])]
        alike = f" with its {' and '.join(shared)}" if shared else ""
        fix = "drop donor_within" if options.donor_within else "use text_unit: question"
        where = f"benchmark {it.benchmark!r} split {it.split!r}{alike}"
        if len(idx) == 1:
            why = f"it is the only item of {where}"
        else:
            copies = sum(questions[i] == it.question_id for i in idx)
            why = (f"{copies} of the {len(idx)} items of {where} are copies of question {it.question_id!r} (its "
                   "group), and copies never lend to each other")
        raise InputError(f"no donor for this item: {why}; set protocol_options singletons: pool, or {fix}",
                         file=file, item=it.item_id,
                         field=f"protocol_options.{'donor_within' if options.donor_within else 'text_unit'}")
    by_hard: dict[tuple, list[int]] = {}
    for i in lone:
        by_hard.setdefault(groups[i][:3], []).append(i)
    for key, idx in by_hard.items():
        pooled = (*key, ("<pooled>",))
        if not _feasible(idx, questions):
            others = sorted(((len(v), repr(g), g) for g, v in members.items()
                             if g[:3] == key and _feasible(v, questions)), key=lambda t: t[:2])
            joined = [g for _, _, g in others if _feasible(idx + members[g], questions)]
            if not joined:
                it = items[min(idx, key=lambda i: items[i].item_id)]
                alone = ("the only item of its benchmark and split" if len(idx) == 1 else
                         f"among {len(idx)} items of its benchmark and split with no donor group, mostly copies of "
                         f"question {it.question_id!r}")
                raise InputError(f"no donor for this item: it is {alone}"
                                 + (" with its option count" if hard_options else ""),
                                 file=file, item=it.item_id, field="options" if hard_options else "split")
            pooled = joined[0]
        for i in idx:
            groups[i] = pooled
    return groups


def donors(items: Sequence, seed: int, options, *,
           file: str | Path | None = None) -> dict[str, np.ndarray]:
    """``modality -> donor index per item`` (positions in ``items``), one independent derangement per modality.
    Copies of one question (``Item.group``) never lend to each other (``derange_apart``); a benchmark without
    copies keeps ``derange``'s uniform donors."""
    from kernels.derangement import derange, derange_apart

    groups = donor_groups(items, options, file=file)
    codes = {g: c for c, g in enumerate(sorted(set(groups), key=repr))}
    group_ids = np.array([codes[g] for g in groups], dtype=np.int64)
    keys = np.array([keyed_seed(0, NAME, it.item_id) for it in items], dtype=np.uint64)
    questions = [it.question_id for it in items]
    copies = len(set(questions)) < len(items)
    if copies:
        question_codes = {q: c for c, q in enumerate(sorted(set(questions)))}
        blocks = np.array([question_codes[q] for q in questions], dtype=np.int64)
        block_keys = np.array([keyed_seed(0, NAME, "question", q) for q in questions], dtype=np.uint64)
    modalities = items[0].modalities if items else ()
    out = {}
    for m in modalities:
        stream = keyed_seed(0, NAME, "donor", m)
        donor = derange_apart(group_ids, blocks, seed, stream, keys, block_keys) if copies else \
            derange(group_ids, seed, stream, keys)
        if (donor < 0).any():  # donor_groups already pooled or refused groups that cannot be deranged
            raise AssertionError("derangement left an item without a donor")
        out[m] = donor
    return out
