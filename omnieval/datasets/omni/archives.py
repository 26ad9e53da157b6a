"""Media inside a release's zip archives, as people download the release (docs/benchmarks.md, "Omni benchmarks").

Video-MME (``lmms-lab/Video-MME``) ships its videos as ``videos_chunked_01.zip`` ... (members ``data/<videoID>.mp4``,
the folder lmms-eval reads after unpacking them where they lie) and its subtitles as ``subtitle.zip`` (members
``subtitle/<videoID>.srt``); WorldSense (``honglyhly/WorldSense``) ships ``worldsense_videos_*.zip`` with the mp4s at
the top of each archive and ``worldsense_subtitles.zip``. A converter names each archive set by the folder of the
unpacked layout its members stand for (``ArchiveFolder``): a path ``data/<id>.mp4`` not found as a file is looked up
as a member named ``<id>.mp4``, whatever folder the member carries inside its archive, as VLMEvalKit's loaders match
them when they unpack these archives.

Nothing is ever written into the release: a member an item needs is extracted (streamed, never read whole into
memory) into the benchmark folder being built, at the path the unpacked file would have had there
(``media/data/<id>.mp4``), once: within a conversion, and across conversions, since a conversion that replaces
its earlier output (``--overwrite``) links the earlier output's copy of a member when its size and CRC-32 match the
member's, instead of extracting it again. Errors are one line naming the archive and the member, as well as the
entry and field that need them. An archive whose central directory cannot be read loses every member it holds, so
that refuses the release (a plain ``InputError``); a member whose data does not match its checksum, or a member
found in two archives with different contents, concerns one video: an ``EntryError`` (``common.Where.error``), so
the entries needing it are skipped and listed (``common``, "Skipped entries").
"""

from __future__ import annotations

import os
import shutil
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from omnieval.core.schema import InputError
from omnieval.datasets.release_media import is_inside

SUBTITLE_LIMIT = 64 * 1024 * 1024
"""The largest subtitle member read into memory (a subtitle file is kilobytes; a larger member is not one)."""


@dataclass(frozen=True)
class ArchiveFolder:
    """Zip archives named by ``pattern`` (a glob in the release folder and the media root) whose members stand for
    the files of ``folder`` in the unpacked layout (``ArchiveFolder("data", "videos_chunked_*.zip")``)."""

    folder: str
    pattern: str


@dataclass(frozen=True)
class Member:
    """One file inside an archive: the archive, its entry, and the unpacked-layout path it stands for."""

    archive: Path
    info: zipfile.ZipInfo
    path: str

    def describe(self) -> str:
        return f"member {self.info.filename!r} of {self.archive}"


class ReleaseArchives:
    """The archives of a release (``ArchiveFolder``s found under ``roots``), their members indexed by file name on
    first use, so a release without archives costs nothing and a damaged archive is named with the item that
    needed it."""

    def __init__(self, roots: Sequence[Path], folders: Sequence[ArchiveFolder], previous: Path | None = None):
        self.roots = [Path(r) for r in roots]
        self.previous = previous
        self.archives = {spec.folder: self._archives(spec) for spec in folders}
        self._index: dict[Path, dict[str, list[zipfile.ZipInfo]]] = {}

    def _archives(self, spec: ArchiveFolder) -> list[Path]:
        found = []
        for root in self.roots:
            found += [p for p in sorted(root.glob(spec.pattern)) if p.is_file() and is_inside(p, self.roots)]
        return found

    def __bool__(self) -> bool:
        return any(self.archives.values())

    def looked_in(self, paths: Sequence[str]) -> list[Path]:
        """The archives a lookup of ``paths`` reads, for the error naming where a medium was not found."""
        folders = {PurePosixPath(p).parent.as_posix() for p in paths}
        return [a for folder in self.archives if folder in folders for a in self.archives[folder]]

    def find(self, paths: Sequence[str], where, field_name: str) -> Member | None:
        """The member standing for the first of ``paths`` any archive holds; None when none does. ``where`` is the
        entry (``common.Where``) named by errors."""
        for rel in paths:
            posix = PurePosixPath(rel)
            hits = [(archive, info) for archive in self.archives.get(posix.parent.as_posix(), ())
                    for info in self._members(archive, rel, where, field_name).get(posix.name, ())]
            if hits:
                archive, info = hits[0]
                for other, copy in hits[1:]:
                    if (copy.CRC, copy.file_size) != (info.CRC, info.file_size):
                        raise where.error(f"{rel!r} is both member {info.filename!r} of {archive} and member "
                                          f"{copy.filename!r} of {other}, with different contents", field_name)
                return Member(archive, info, rel)
        return None

    def _members(self, archive: Path, rel: str, where, field_name: str) -> dict[str, list[zipfile.ZipInfo]]:
        if archive not in self._index:
            try:
                with zipfile.ZipFile(archive) as zf:
                    infos = zf.infolist()
            except _ARCHIVE_ERRORS as exc:  # every member is unreadable: the release's error, not the entry's
                raise InputError(f"cannot read the zip archive {archive} (looking for {rel!r} in it): "
                                 f"{_reason(exc)}", file=where.file, item=where.item, field=field_name) from None
            index: dict[str, list[zipfile.ZipInfo]] = {}
            for info in infos:
                if not info.is_dir():
                    index.setdefault(PurePosixPath(info.filename).name, []).append(info)
            self._index[archive] = index
        return self._index[archive]

    def extract(self, member: Member, target: Path, where, field_name: str) -> None:
        """Stream ``member`` to ``target`` a chunk at a time (through a temporary name, so a failure leaves no
        partial file), its checksum checked as it is read; or link the earlier output's copy (module doc). A failure
        to write (a full disk) is the output folder's and is raised as it is."""
        target.parent.mkdir(parents=True, exist_ok=True)
        if self._reuse(member, target):
            return
        partial = target.with_name(f".{target.name}.part")
        try:
            with _zip(member, where, field_name) as zf, _opened(zf, member, where, field_name) as source, \
                    open(partial, "wb") as out:
                while chunk := _chunk(source, member, where, field_name):
                    out.write(chunk)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)

    def _reuse(self, member: Member, target: Path) -> bool:
        """Whether the earlier output (``previous``) holds the member, same size and CRC-32, now linked (or copied)
        to ``target``."""
        if self.previous is None:
            return False
        earlier = self.previous / "media" / member.path
        try:
            if earlier.is_symlink() or not earlier.is_file() or earlier.stat().st_size != member.info.file_size:
                return False
            if _crc32(earlier) != member.info.CRC:
                return False
            try:
                os.link(earlier, target)
            except OSError:  # links not allowed there
                shutil.copyfile(earlier, target)
        except OSError:
            return False
        return True

    def read_bytes(self, member: Member, where, field_name: str) -> bytes:
        """A small member's bytes (a subtitle file), its checksum checked."""
        if member.info.file_size > SUBTITLE_LIMIT:
            raise where.error(f"{member.describe()} holds {member.info.file_size} bytes, too large for a subtitle "
                              "file", field_name)
        with _zip(member, where, field_name) as zf, _opened(zf, member, where, field_name) as source:
            return b"".join(iter(lambda: _chunk(source, member, where, field_name), b""))


_ARCHIVE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError, OSError,
                   zlib.error)
"""What reading a damaged archive raises: a bad header or checksum, truncated or undecompressable data, an
unsupported compression or an encrypted member."""
CHUNK = 1024 * 1024


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def _zip(member: Member, where, field_name: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(member.archive)
    except _ARCHIVE_ERRORS as exc:
        raise where.error(f"cannot read {member.describe()}: {_reason(exc)}", field_name) from None


def _opened(zf: zipfile.ZipFile, member: Member, where, field_name: str):
    try:
        return zf.open(member.info)
    except _ARCHIVE_ERRORS as exc:
        raise where.error(f"cannot read {member.describe()}: {_reason(exc)}", field_name) from None


def _chunk(source, member: Member, where, field_name: str) -> bytes:
    try:
        return source.read(CHUNK)
    except _ARCHIVE_ERRORS as exc:
        raise where.error(f"cannot read {member.describe()}: {_reason(exc)}", field_name) from None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())
