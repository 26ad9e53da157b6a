"""Where a converter may write: the ``--out`` folder of every ``omnieval datasets`` command.

A converter (``synth``, ``xmodbench``, ``mcq``, ``contra4`` and the omni releases: ``daily-omni``, ``worldsense``,
``videomme``, ``omnibench``, ``mmau``, ``mmar``, ``av-odyssey``, ``omnivideobench``, ``voicebench``, ``mmsu``,
``jointavbench``) builds the whole benchmark folder beside ``--out`` and moves it into place when complete, so
replacing an earlier benchmark means deleting what ``--out`` held. Nothing else may be deleted, so before anything
is written ``--out`` must be

* new, or an empty folder;
* or, with ``overwrite`` (``--overwrite``), a previous output of the **same** converter: its ``benchmark.json``
  records the converter that wrote it (``"converter": "mcq"``; the benchmark loader reads only ``name`` and
  ``protocol`` and ignores it) and the folder holds nothing but what converters write (``OUTPUT_ENTRIES``).

Any other non-empty folder (the working folder, a home folder, another converter's benchmark) is refused in one
line, with nothing touched. So is an ``--out`` equal to, inside or containing what the converter reads: the release
or source and every ``--media-root`` (``Source``), and a ``--media-root`` that names no folder.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from omnieval.core.processes import process_alive
from omnieval.core.schema import InputError

CONVERTERS: tuple[str, ...] = ("synth", "xmodbench", "mcq", "contra4", "daily-omni", "worldsense", "videomme",
                               "omnibench", "mmau", "mmar", "av-odyssey", "omnivideobench",
                               "voicebench", "mmsu", "jointavbench", "videomme-v2", "video-holmes", "mmau-pro")
"""The ``omnieval datasets`` commands that write a benchmark folder; each records its name in ``benchmark.json``."""
OUTPUT_ENTRIES = frozenset({"benchmark.json", "items.jsonl", "anchors.jsonl", "media", "unmatched.jsonl",
                            "skipped.jsonl"})
"""Every top-level name a converter writes: a folder holding anything else is not only a converter's output."""


@dataclass(frozen=True)
class Source:
    """A file or folder the converter reads (``what``: how the user named it, e.g. ``the release folder``)."""

    path: Path
    what: str


def _read_object(path: Path) -> dict | None:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def converter_of(folder: Path) -> str | None:
    """The converter whose output ``folder`` is, from its ``benchmark.json``; None if it names none."""
    meta = _read_object(folder / "benchmark.json")
    if meta is None:
        return None
    value = meta.get("converter")
    return value if isinstance(value, str) and value in CONVERTERS else None


def check_output_folder(out: str | Path, converter: str, *, overwrite: bool = False,
                        sources: Sequence[Source] = ()) -> Path:
    """The absolute ``out`` if ``converter`` may write there (module doc), else ``InputError`` naming it."""
    if converter not in CONVERTERS:
        raise ValueError(f"unknown converter {converter!r}; known: {', '.join(CONVERTERS)}")
    target = Path(out).expanduser().resolve()
    for source in sources:
        _present(source)
        _apart(target, source)
    if not target.exists():
        return target
    if not target.is_dir():
        raise InputError("--out exists and is not a folder; nothing was changed", file=target, field="--out")
    entries = sorted(p.name for p in target.iterdir())
    if not entries:
        return target
    previous = converter_of(target)
    command = f"`omnieval datasets {converter}`"
    if previous is None:
        shown = ", ".join(repr(e) for e in entries[:3]) + (", ..." if len(entries) > 3 else "")
        count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
        raise InputError(f"--out is a folder that is not empty ({count}: {shown}) and holds no "
                         "benchmark written by an omnieval converter; nothing was changed: give a new or empty "
                         "folder", file=target, field="--out")
    if previous != converter:
        raise InputError(f"--out holds a benchmark written by `omnieval datasets {previous}`, not by {command}; "
                         "nothing was changed: give a new or empty folder", file=target, field="--out")
    foreign = _foreign_entries(target)
    if foreign:
        raise InputError(f"--out holds a benchmark written by {command} and also {foreign[0]!r}, which no "
                         "converter writes; nothing was changed: give a new or empty folder", file=target,
                         field="--out")
    if not overwrite:
        raise InputError(f"--out is not empty: it holds a benchmark written by {command}; pass --overwrite to "
                         "replace it", file=target, field="--out")
    return target


def _present(source: Source) -> None:
    """A ``--media-root`` must name a folder: one that names nothing (a typo) or a file would otherwise be accepted
    without a word, and every medium outside the release reported missing one by one, or never looked for."""
    if "--media-root" not in source.what or source.path.is_dir():
        return
    state = "is a file, not a folder" if source.path.exists() else "does not exist"
    raise InputError(f"{source.what} {state}; nothing was changed: give the folder that holds the media",
                     file=source.path, field="--media-root")


def _foreign_entries(folder: Path) -> list[str]:
    """What ``folder`` (a previous output of ``converter``) holds that no converter writes there."""
    return [e.name for e in sorted(folder.iterdir()) if e.name not in OUTPUT_ENTRIES]


def _apart(out: Path, source: Source) -> None:
    """``out`` neither is, nor is inside, nor contains ``source`` (replacing ``out`` would delete it, or the
    converter would read its own output)."""
    path = source.path.expanduser().resolve()
    if out == path:
        raise InputError(f"--out is {source.what} ({path}); nothing was changed: give another folder",
                         file=out, field="--out")
    if path.is_relative_to(out):
        raise InputError(f"--out contains {source.what} ({path}): replacing it would delete it; nothing was "
                         "changed: give another folder", file=out, field="--out")
    if out.is_relative_to(path) and path.is_dir():
        raise InputError(f"--out is inside {source.what} ({path}); nothing was changed: give a folder outside "
                         "it", file=out, field="--out")


@contextmanager
def building_folder(out: str | Path, converter: str, *, overwrite: bool = False, sources: Sequence[Source] = (),
                    prefix: str = ".bench-") -> Iterator[Path]:
    """A temporary folder beside ``out`` to build a benchmark in, after ``check_output_folder`` allowed ``out``.

    When the block ends without an error, ``converter`` is recorded in the built ``benchmark.json`` and the folder
    takes ``out``'s place: one rename when ``out`` is new; when it is an existing (empty, or previous output)
    folder, its entries are swapped for the new ones and the folder itself stays (it may be the working folder).
    On an error, Ctrl-C or SIGTERM (``omnieval.cli`` turns it into an exception) the temporary folder is removed
    and ``out`` is as it was. The folder's name carries this process's pid and host, so that a later conversion
    can remove one a killed process left (``remove_dead_builds``)."""
    target = check_output_folder(out, converter, overwrite=overwrite, sources=sources)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_builds(target.parent, prefix)
        tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}@{socket.gethostname()}.", dir=target.parent))
    except OSError as exc:
        raise InputError(f"cannot write in the folder that holds --out: {exc.strerror}", file=target.parent,
                         field="--out") from None
    try:
        yield tmp
        _record_converter(tmp, converter)
        _install(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def remove_dead_builds(parent: Path, prefix: str) -> list[Path]:
    """Remove the build folders (``<prefix><pid>@<host>.<random>``) in ``parent`` whose writer, a process on this
    host, is gone: a conversion killed outright (SIGKILL, a crash of the machine) cannot remove its own, and a
    release copied with ``--copy`` can leave gigabytes. A folder of a live process, of another host (a shared
    filesystem) or named otherwise is left alone: nothing proves it dead."""
    pattern = re.compile(rf"{re.escape(prefix)}(\d+)@(.+)\.[^.]+")
    removed = []
    for entry in sorted(parent.glob(f"{glob.escape(prefix)}*")):
        match = pattern.fullmatch(entry.name)
        if not match or not entry.is_dir() or match.group(2) != socket.gethostname():
            continue
        if process_alive(int(match.group(1))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        print(f"omnieval: note: removed {entry}, left by a conversion that stopped before it finished (its process "
              f"{match.group(1)} is gone)", file=sys.stderr)
        removed.append(entry)
    return removed


def _record_converter(folder: Path, converter: str) -> None:
    unknown = sorted(p.name for p in folder.iterdir() if p.name not in OUTPUT_ENTRIES)
    if unknown:  # a converter writing a name the replacement check does not know would lock its own output
        raise ValueError(f"{converter} wrote {unknown}, which OUTPUT_ENTRIES does not list")
    meta_path = folder / "benchmark.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["converter"] = converter
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _install(tmp: Path, target: Path) -> None:
    if not target.exists():
        tmp.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=".replaced-", dir=target.parent))
    for entry in target.iterdir():  # on an error the previous output stays whole in ``old``
        entry.rename(old / entry.name)
    for entry in tmp.iterdir():
        entry.rename(target / entry.name)
    shutil.rmtree(old)
