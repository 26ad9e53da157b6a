"""Keyed randomness: every random choice is a function of ``(seed, *keys)`` (docs/architecture.md, decision 1).

Ray may process rows in any order on any node; results never depend on it, because no generator is ever shared
between two decisions. ``keyed_rng(seed, item_id, condition, "options")`` always yields the same stream.
"""

from __future__ import annotations

import hashlib

import numpy as np


def keyed_seed(seed: int, *keys: object) -> int:
    """A 64-bit integer derived from the seed and the keys (BLAKE2b of their repr: stable across processes,
    machines and Python versions, unlike ``hash()``)."""
    payload = repr((int(seed), *(str(k) for k in keys))).encode()
    return int.from_bytes(hashlib.blake2b(payload, digest_size=8).digest(), "little")


def keyed_rng(seed: int, *keys: object) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(keyed_seed(seed, *keys)))
