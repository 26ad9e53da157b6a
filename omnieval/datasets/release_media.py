"""Where a release converter may read media from: only under the release folder or an explicit media root.

A release file names its media by path. Followed blindly, a path such as ``/etc/passwd`` or ``../../../x`` (or a
symbolic link inside the release that points out of it) would be copied or hard-linked into the new benchmark.
``resolve_release_media`` accepts a path only when it resolves (links followed) inside one of the allowed roots and
refuses anything else with an ``InputError`` naming the release file, the entry and the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omnieval.core.schema import InputError


def is_inside(path: Path, roots: Sequence[Path]) -> bool:
    """``path`` (resolved) lies inside one of ``roots`` (resolved)."""
    full = path.resolve()
    return any(full == r or r in full.parents for r in (root.resolve() for root in roots))


def _where(roots: Sequence[Path]) -> str:
    return " or ".join(str(r) for r in roots)


def resolve_release_media(raw: str, roots: Sequence[Path], *, base: Path | None = None, file: str | Path,
                          item: str, field: str) -> Path:
    """The media file a release entry names, resolved inside ``roots`` (the release folder, then any media root).

    A relative path is looked up beside the release file (``base``) and under each root. An absolute path is taken
    as it is when it lies inside a root; otherwise its trailing components are looked up under each root (releases
    keep the absolute paths of the machine that built them: ``/home/x/data/solos/a.wav`` is found as
    ``<root>/solos/a.wav``). A candidate that resolves outside every root is never opened."""
    path = Path(raw)
    if path.is_absolute():
        candidates = [path]
        parts = path.parts[1:]
        candidates += [root / Path(*parts[i:]) for root in roots for i in range(len(parts))]
    else:
        candidates = ([base / path] if base is not None else []) + [root / path for root in roots]
    outside = None
    for candidate in candidates:
        if not is_inside(candidate, roots):
            outside = outside or candidate
            continue
        if candidate.is_file():
            return candidate.resolve()
    if outside is not None and outside.exists():
        raise InputError(f"media path {raw!r} resolves to {outside.resolve()}, outside {_where(roots)}: a release "
                         "may only name media under its folder (pass a media root to allow another folder)",
                         file=file, item=item, field=field)
    raise InputError(f"media file {raw!r} not found under {_where(roots)} (looked beside the release file and "
                     "under each folder)", file=file, item=item, field=field)
