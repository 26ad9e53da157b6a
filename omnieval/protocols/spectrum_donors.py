"""Donors of the ``spectrum`` protocol: which item lends each modality to each item (the protocol's module doc says
what the shuffle must keep). Kept apart from ``omnieval.protocols.spectrum`` for length; items and options are
that module's ``Item`` and ``Options`` (read by attribute here, so that this module needs nothing from it).

* ``donor_groups``: the group each item draws its donors from (benchmark, split, and as configured option count and
  category), with the groups that cannot be deranged pooled or refused;
* ``donors``: one seeded derangement per modality within those groups (``omnieval.kernels.derangement``); copies of one
  question (``Item.group``) never lend to each other, nor do items whose file of the modality has the same content
  (``media_blocks``, ``omnieval.protocols.shared_media``).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from omnieval.core.keyed import keyed_seed
from omnieval.core.schema import InputError

NAME = "spectrum"
"""The protocol's name, in the keys of its donor streams (``keyed_seed(0, NAME, ...)``)."""



ORDER = ("image", "video", "audio", "text")
"""The modalities in the protocol's canonical order (``spectrum.MODALITY_ORDER``)."""


def item_files(item, modality: str) -> list[str]:
    """The files an item shows for a media modality (``spectrum.media_files``: a path or a list of paths)."""
    paths = item.media.get(modality) if modality != "text" else None
    if paths is None:
        return []
    return list(paths) if isinstance(paths, list) else [paths]


def _shown(idx: Sequence[int], block: Sequence[int | None]) -> list[int]:
    """The items of ``idx`` that show the modality of ``block`` (None: the item does not show it)."""
    return [i for i in idx if block[i] is not None]


def _feasible(idx: Sequence[int], blocks: dict[str, Sequence[int | None]]) -> bool:
    """Whether the items ``idx`` can lend to each other with no item taking a modality from its own block (a copy
    of its question, or an item showing the same file of that modality): two or more items and, for every
    modality, no block holding more than half of the items that show it (``omnieval.kernels.derangement.derange_apart``;
    a lone item showing a modality has no donor for it)."""
    if len(idx) < 2:
        return False
    for b in blocks.values():
        shown = [b[i] for i in _shown(idx, b)]
        if shown and 2 * max(collections.Counter(shown).values()) > len(shown):
            return False
    return True


def _why_not(items: Sequence, idx: Sequence[int], blocks: dict[str, Sequence[int | None]], where: str) -> str:
    """Why the items ``idx`` (two or more) cannot lend to each other: the largest block of a modality, in words."""
    where = f" of {where}" if where else ""
    for m, b in blocks.items():
        shown = _shown(idx, b)
        if not shown:
            continue
        if len(shown) == 1:
            return (f"item {items[shown[0]].item_id!r} is the only one of the {len(idx)} items{where} that shows "
                    f"{'an' if m[0] in 'aeiou' else 'a'} {m}, so no other item can lend it one")
        block, size = collections.Counter(b[i] for i in shown).most_common(1)[0]
        article = "an" if m[0] in "aeiou" else "a"
        showing = f" that show {article} {m}" if len(shown) < len(idx) else ""
        if 2 * size > len(shown):
            members = [items[i] for i in shown if b[i] == block]
            questions = sorted({it.question_id for it in members})
            files = sorted({" + ".join(item_files(it, m)) for it in members}) if m != "text" else []
            if len(questions) == 1 and len(files) <= 1:
                return (f"{size} of the {len(shown)} items{where}{showing} are copies of question "
                        f"{questions[0]!r} (its group), and copies never lend to each other")
            return (f"{size} of the {len(shown)} items{where}{showing} show the same {m} content "
                    f"({', '.join(files[:3])}{' ...' if len(files) > 3 else ''}) or are copies of one question, and "
                    f"an item never takes {article} {m} equal to its own: such items may be at most half of "
                    "those that lend to each other (add other items to the split, or leave some of them out)")
    return f"the {len(idx)} items{where} cannot lend to each other"


def _showing(items: Sequence, idx: Sequence[int], blocks: dict[str, Sequence[int | None]], first: int) -> int:
    """The item to name for a group that cannot lend among itself: ``first``, unless the modality that stops it is
    one ``first`` does not show (items differ in their modalities), then the first item of the group showing it."""
    for b in blocks.values():
        shown = _shown(idx, b)
        if shown and not _feasible(shown, {"m": b}):
            return first if b[first] is not None else min(shown, key=lambda i: items[i].item_id)
    return first


def media_blocks(items: Sequence, root: str | Path | None) -> dict[str, list[int | None]]:
    """``modality -> block per item`` (None for an item that does not show the modality): items of one block never
    lend that modality to each other. Copies of one question (``Item.group``) are one block for every modality; for
    a media modality, so are the items that show a file of the same content (``shared_media``), e.g. several
    questions about one clip, or two sets of pictures that have one picture in common."""
    from omnieval.protocols.shared_media import content_keys, lending_blocks

    modalities = [m for m in ORDER if any(m in it.modalities for it in items)]
    refs = [f for it in items for m in modalities for f in item_files(it, m)]
    keys = content_keys(refs, root)
    out = {}
    for m in modalities:
        relations = [lambda i: items[i].question_id]
        if m != "text":
            relations.append(lambda i, m=m: [keys[f] for f in item_files(items[i], m)] or None)
        blocks = lending_blocks(len(items), relations)
        out[m] = [b if m in items[i].modalities else None for i, b in enumerate(blocks)]
    return out


def donor_groups(items: Sequence, options, *, file: str | Path | None = None,
                 blocks: dict[str, Sequence[int]] | None = None) -> list[tuple]:
    """The donor group of each item: ``(benchmark, split, n_options if it must match, soft keys)``, after pooling
    the items of groups that cannot be deranged when configured. Raises ``InputError`` naming an item of such a
    group otherwise.

    A group cannot be deranged when it has one item, or when one block of a modality (``media_blocks``: the copies
    of one question, the items showing one file) is more than half of it: some item would have to take that
    modality from its own block, which shows the item's own image, clip or sound."""
    hard_options = options.text_unit == "question+options"
    if blocks is None:
        blocks = media_blocks(items, None)

    def hard(it) -> tuple:
        return (it.benchmark, it.split, len(it.options) if hard_options else None)

    def soft(it) -> tuple:
        return (it.category if "category" in options.donor_within else None,
                len(it.options) if "n_options" in options.donor_within else None)

    groups = [(*hard(it), soft(it)) for it in items]
    _refuse_lone_modality(items, [g[:2] for g in groups], blocks, file)
    members: dict[tuple, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    lone = [i for idx in members.values() if not _feasible(idx, blocks) for i in idx]
    if lone and options.singletons == "error":
        first = min(lone, key=lambda i: items[i].item_id)
        first = _showing(items, members[groups[first]], blocks, first)
        it, idx = items[first], members[groups[first]]
        shared = [*(["option count"] if hard_options or "n_options" in options.donor_within else []),
                  *(["category"] if "category" in options.donor_within else [])]
        alike = f" with its {' and '.join(shared)}" if shared else ""
        fix = "drop donor_within" if options.donor_within else "use text_unit: question"
        where = f"benchmark {it.benchmark!r} split {it.split!r}{alike}"
        why = f"it is the only item of {where}" if len(idx) == 1 else _why_not(items, idx, blocks, where)
        raise InputError(f"no donor for this item: {why}; set protocol_options singletons: pool, or {fix}",
                         file=file, item=it.item_id,
                         field=f"protocol_options.{'donor_within' if options.donor_within else 'text_unit'}")
    by_hard: dict[tuple, list[int]] = {}
    for i in lone:
        by_hard.setdefault(groups[i][:3], []).append(i)
    for key, idx in by_hard.items():
        pooled = (*key, ("<pooled>",))
        if not _feasible(idx, blocks):
            others = sorted(((len(v), repr(g), g) for g, v in members.items()
                             if g[:3] == key and _feasible(v, blocks)), key=lambda t: t[:2])
            joined = [g for _, _, g in others if _feasible(idx + members[g], blocks)]
            if not joined:
                it = items[min(idx, key=lambda i: items[i].item_id)]
                where = "its benchmark and split" + (" with its option count" if hard_options else "")
                alone = (f"it is the only item of {where}" if len(idx) == 1 else
                         f"{len(idx)} items of {where} have no donor group: "
                         + _why_not(items, idx, blocks, ""))
                raise InputError(f"no donor for this item: {alone}",
                                 file=file, item=it.item_id, field="options" if hard_options else "split")
            pooled = joined[0]
        for i in idx:
            groups[i] = pooled
    return groups


def _refuse_lone_modality(items: Sequence, splits: Sequence[tuple], blocks: dict[str, Sequence[int | None]],
                          file: str | Path | None) -> None:
    """On a benchmark whose items show different modalities, an item that is the only one of its benchmark and
    split to show a modality has no donor for it, whatever the pooling: refused naming the item."""
    for m, block in blocks.items():
        showing: dict[tuple, list[int]] = {}
        for i in _shown(range(len(items)), block):
            showing.setdefault(splits[i], []).append(i)
        for (benchmark, split), idx in showing.items():
            if len(idx) == 1 and len(items) > 1:
                raise InputError(f"the only item of benchmark {benchmark!r} split {split!r} that shows "
                                 f"{'an' if m[0] in 'aeiou' else 'a'} {m}: a spectrum shuffle needs another item to "
                                 f"take its {m} from", file=file, item=items[idx[0]].item_id, field="media")


def donors(items: Sequence, seed: int, options, *, file: str | Path | None = None,
           root: str | Path | None = None) -> dict[str, np.ndarray]:
    """``modality -> donor index per item`` (positions in ``items``; -1 for an item that does not show the
    modality), one independent derangement per modality over the items that show it. Items of one block of a
    modality (``media_blocks``: copies of one question, items showing one file, the files under ``root``) never
    lend it to each other (``derange_apart``); a modality without such blocks keeps ``derange``'s uniform donors.
    Where items show several files of a modality, donors show as many files as the item (``size_groups``)."""
    blocks = media_blocks(items, root)
    groups = donor_groups(items, options, file=file, blocks=blocks)
    codes = {g: c for c, g in enumerate(sorted(set(groups), key=repr))}
    group_ids = np.array([codes[g] for g in groups], dtype=np.int64)
    keys = np.array([keyed_seed(0, NAME, it.item_id) for it in items], dtype=np.uint64)
    out = {}
    for m, block in blocks.items():
        shown = np.array(_shown(range(len(items)), block), dtype=np.int64)
        sized = size_groups([items[i] for i in shown], m, group_ids[shown], [block[i] for i in shown])
        donor = np.full(len(items), -1, dtype=np.int64)
        donor[shown] = shown[_derangement(items, shown, [block[i] for i in shown], sized, keys[shown], seed, m)]
        out[m] = donor
    return out


def size_groups(items: Sequence, modality: str, group_ids: np.ndarray, block: Sequence[int]) -> np.ndarray:
    """The donor group of each item for one modality: its donor group, split by how many files of the modality the
    item shows, so that a set of four pictures is replaced by another set of four. A donor group whose sizes cannot
    each lend among themselves (a size shown by one item, or by one block's items alone) is left whole: its items
    then take a donor's set whatever its size (docs/benchmarks.md, the spectrum item fields)."""
    sizes = np.array([len(item_files(it, modality)) for it in items], dtype=np.int64)
    out = group_ids.copy()
    for g in np.unique(group_ids):
        members = np.flatnonzero(group_ids == g)
        by_size = [members[sizes[members] == n] for n in np.unique(sizes[members])]
        if len(by_size) > 1 and all(_feasible(idx, {modality: block}) for idx in by_size):
            for idx in by_size:
                out[idx] = g * (sizes.max() + 1) + sizes[idx[0]]
            continue
        out[members] = g * (sizes.max() + 1)
    return out


def _derangement(items: Sequence, shown: np.ndarray, block: Sequence[int], group_ids: np.ndarray, keys: np.ndarray,
                 seed: int, modality: str) -> np.ndarray:
    """One modality's donors among the items that show it (positions in ``shown``)."""
    from omnieval.kernels.derangement import derange, derange_apart

    stream = keyed_seed(0, NAME, "donor", modality)
    if len(set(block)) == len(block):
        donor = derange(group_ids, seed, stream, keys)
    else:
        # A block's identity is its smallest question id: for copies of one question, that question (as
        # before blocks also joined items showing one file), and never the rows' order.
        question: dict[int, str] = {}
        for i, b in zip(shown, block, strict=True):
            q = items[i].question_id
            question[b] = min(question.get(b, q), q)
        block_keys = np.array([keyed_seed(0, NAME, "question", question[b]) for b in block], dtype=np.uint64)
        donor = derange_apart(group_ids, np.array(block, dtype=np.int64), seed, stream, keys, block_keys)
    if (donor < 0).any():  # donor_groups already pooled or refused groups that cannot be deranged
        raise AssertionError("derangement left an item without a donor")
    return donor
