"""Which items of a benchmark show the same media content: a shuffle must never hand an item a file equal to its own.

Several questions about one clip are common (one mp4 asked about its colour and its sound; VLMEvalKit's circular
copies of one image; a file copied under two names). A donor that shows the same content is no shuffle at all: the
item sees (or hears) its own media in a condition that claims to have replaced it, and every shuffled accuracy drifts
toward ``normal``. ``content_keys`` gives each referenced file a key equal for equal bytes; ``lending_blocks`` joins
the items that must not lend a modality to each other.

Files are compared by content (SHA-256 of the bytes, ``omnieval.media.decoded.content_hash``) only where two files
could be equal: files of a size no other file has are their own key without being read, so a benchmark of distinct
media costs one ``stat`` per file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from omnieval.core.schema import media_file


def content_keys(refs: Sequence[str], root: str | Path | None) -> dict[str, str]:
    """``ref -> key``: equal keys for files with equal bytes (a ``media_ref``'s file, relative to ``root``). Without
    a root, or for a file that cannot be read, the file's path is its key (the run's media check reports it)."""
    from omnieval.media.decoded import content_hash

    files = sorted({media_file(r) for r in refs})
    keys = {f: f"path:{f}" for f in files}
    if root is not None:
        by_size: dict[int, list[str]] = {}
        for f in files:
            try:
                by_size.setdefault(os.stat(Path(root) / f).st_size, []).append(f)
            except OSError:
                continue
        for same in by_size.values():
            if len(same) > 1:
                for f in same:
                    try:
                        keys[f] = f"sha256:{content_hash(Path(root) / f)}"
                    except Exception:  # noqa: BLE001 - an unreadable file keeps its path; the media check names it
                        pass
    return {r: keys[media_file(r)] for r in refs}


def lending_blocks(n: int, relations: Sequence[Callable[[int], str | Sequence[str] | None]]) -> list[int]:
    """Items ``0..n-1`` joined into blocks: ``i`` and ``j`` share a block when some relation gives both the same
    (non-None) value, and transitively (union-find). A relation may give an item several values (the content keys
    of its several pictures): it then joins every item that has any of them. Block ids are the smallest member's
    index, so they do not depend on anything but the items and the relations."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for relation in relations:
        first: dict[str, int] = {}
        for i in range(n):
            value = relation(i)
            for one in [value] if isinstance(value, str) else value or ():
                j = first.setdefault(one, i)
                if j != i:
                    a, b = find(i), find(j)
                    if a != b:
                        parent[max(a, b)] = min(a, b)
    return [find(i) for i in range(n)]
