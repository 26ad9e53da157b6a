"""Reading benchmark and release text files as UTF-8, with an error that says where a file is not.

JSON and JSONL are UTF-8 by definition (RFC 8259); a file saved in Latin-1 or cp1252 would otherwise stop a
conversion with a bare ``UnicodeDecodeError`` traceback. Both readers raise ``InputError`` naming the file, the line
and the byte offset of the first byte that is not UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from omnieval.core.schema import InputError


def _not_utf8(path: Path, line: int, offset: int, byte: int, reason: str) -> InputError:
    return InputError(f"line {line}: not UTF-8 text (byte 0x{byte:02x} at byte offset {offset}: {reason}); "
                      "save the file as UTF-8", file=path, item=f"line {line}")


def _unreadable(path: Path, exc: OSError) -> InputError:
    if path.is_dir():
        return InputError(f"{path.name} is a folder, not a file", file=path)
    return InputError(f"cannot read file: {exc.strerror}", file=path)


def read_utf8(path: str | Path) -> str:
    """The whole file as text (for JSON documents read at once)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, data.count(b"\n", 0, exc.start) + 1, exc.start, data[exc.start], exc.reason) \
            from None


def utf8_lines(path: str | Path) -> Iterator[str]:
    """The file's lines, each with its line ending, decoded one at a time (for JSONL and TSV files too large to
    hold twice). ``csv.reader`` accepts this iterator as it would the open text file."""
    path = Path(path)
    offset = 0
    try:
        f = open(path, "rb")  # closed by the with below: only the opening is an input error
    except OSError as exc:
        raise _unreadable(path, exc) from None
    with f:
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(path, number, offset + exc.start, raw[exc.start], exc.reason) from None
            offset += len(raw)
