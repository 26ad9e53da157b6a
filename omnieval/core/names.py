"""Names that become folders: model, judge and describer names, sweep protocol entries.

A name is shown to people as configured (``org/model``); on storage it is one folder, chosen by ``folder_name`` so
that two names never share a folder and no name becomes a path (``..``, ``a/b``). Configs and sweeps refuse names
that cannot be made a folder at all (``check_name_part``), before any work.
"""

from __future__ import annotations

import hashlib
import re

_PLAIN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_HASHED = re.compile(r"-[0-9a-f]{8}$")


def check_name_part(name: str, what: str) -> str:
    """Refuse a name that cannot be made a folder safely: empty, only dots (``.``, ``..``), control characters, or
    longer than 200 characters. Other characters are fine: ``folder_name`` maps them."""
    if not name or not name.strip(".") or len(name) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"{what} {name!r} cannot name a folder: use 1-200 printable characters, not only dots")
    return name


def folder_name(name: str) -> str:
    """A model (judge, describer, protocol entry) name as one folder name, injectively: a name made of
    ``[A-Za-z0-9._-]`` that does not start with a dot or end like a hash suffix stays as it is; any other name is
    sanitised (``org/model`` -> ``org__model``) and gets the first 8 hex digits of its SHA-256 appended
    (``org__model-3f1c...``), so ``org/model`` and ``org__model`` never share a folder and nothing becomes a path."""
    check_name_part(name, "name")
    if _PLAIN.fullmatch(name) and not _HASHED.search(name):
        return name
    readable = re.sub(r"[^A-Za-z0-9._-]+", "__", name).lstrip(".") or "_"
    return f"{readable[:150]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
