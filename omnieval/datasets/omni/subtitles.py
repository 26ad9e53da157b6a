"""The text of a SubRip (``.srt``) subtitle file, as a stand-in for a video's audio (docs/benchmarks.md, "Omni
benchmarks").

Video-MME's and WorldSense's subtitle files are SubRip: blocks of a cue number, a ``start --> end`` time line and
one or more text lines, separated by blank lines; Video-MME wraps each text line in ``<font color="white"
size=".72c">...</font>``. The text is every cue's text in file order, markup removed (HTML-like tags, ASS line
breaks ``\\N``), one cue per line, a cue repeating the line before it dropped (rolling captions repeat).
``subtitle_stand_in`` reads the file unpacked in the release's folders, else from the release's subtitle archive.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.omni.archives import ReleaseArchives
from omnieval.datasets.omni.common import Where, find_file
from omnieval.datasets.textfile import read_utf8

_TIME_LINE = re.compile(r"^\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}")
_TAG = re.compile(r"<[^>]{0,200}>")


def srt_text(path: Path) -> str:
    """The subtitles' text (module doc); "" for a file without cues. Not UTF-8: an ``InputError`` naming the
    file."""
    return cue_text(read_utf8(path))


def subtitle_stand_in(rel: str, roots: Sequence[Path], archives: ReleaseArchives | None, where: Where,
                      field_name: str) -> str:
    """The text (``srt_text``) of the subtitle file ``rel`` under ``roots``, else of the archive member standing
    for it; "" where there is neither (not every video has subtitles). Errors name the entry ``where``."""
    path = find_file((rel,), roots, where, field_name, required=False)
    if path is not None:
        try:
            return srt_text(path)
        except InputError as exc:
            raise where.error(str(exc), field_name) from None
    member = archives.find((rel,), where, field_name) if archives else None
    if member is None:
        return ""
    data = archives.read_bytes(member, where, field_name)
    try:
        return cue_text(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise where.error(f"{member.describe()}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte "
                          f"offset {exc.start}: {exc.reason})", field_name) from None


def cue_text(text: str) -> str:
    """The cues' text of a subtitle file's contents (module doc)."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        rows = [row for row in block.split("\n") if row.strip()]
        timed = next((i for i, row in enumerate(rows) if _TIME_LINE.match(row)), None)
        if timed is None:
            continue
        cue = " ".join(_TAG.sub("", row).replace("\\N", " ").replace("\\n", " ").strip() for row in rows[timed + 1:])
        cue = " ".join(cue.split())
        if cue and (not lines or lines[-1] != cue):
            lines.append(cue)
    return "\n".join(lines)
