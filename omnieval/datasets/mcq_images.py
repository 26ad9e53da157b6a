"""The image cell of a multiple-choice source row (``omnieval.datasets.mcq``): decoded from what the sources hold
(a Hugging Face ``Image`` struct, raw bytes, base64 text, a path, a VLMEvalKit reference to another row's image),
checked to decode in full, and written once per distinct content into the benchmark's ``media/``.

Errors are ``CellError`` (message and column); the converter names the file and the row.
"""

from __future__ import annotations

import ast
import base64
import binascii
import hashlib
import math
from pathlib import Path

from omnieval.datasets.mcq_sources import SourceRow
from omnieval.datasets.release_media import is_inside

IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", ".png"), (b"\xff\xd8\xff", ".jpg"), (b"GIF87a", ".gif"), (b"GIF89a", ".gif"),
               (b"BM", ".bmp"), (b"II*\x00", ".tif"), (b"MM\x00*", ".tif"))


def missing_cell(value) -> bool:
    """None, NaN (pandas' empty cell) or a blank string."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and (not value.strip() or value.strip().lower() == "nan")


class CellError(Exception):
    """A problem with one cell of a source row: the converter adds the file and the row, ``column`` names the
    cell."""

    def __init__(self, message: str, column: str | None):
        super().__init__(message)
        self.column = column


class MediaWriter:
    """Writes each distinct image once, named by its content hash. Image files are read only inside ``roots`` (the
    source's folder and the media root, if given): ``release_media``."""

    def __init__(self, out: Path, roots: list[Path]):
        self.out, self.roots = out, roots
        self.written: set[str] = set()

    def bytes(self, data: bytes, column: str) -> str:
        suffix = next((ext for magic, ext in IMAGE_MAGIC if data.startswith(magic)), None)
        if suffix is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            suffix = ".webp"
        if suffix is None:
            raise CellError("image data is not PNG, JPEG, GIF, WebP, BMP or TIFF", column)
        rel = f"media/{hashlib.sha256(data).hexdigest()[:20]}{suffix}"
        if rel not in self.written:
            check_decodes(data, suffix, column)
            (self.out / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.out / rel).write_bytes(data)
            self.written.add(rel)
        return rel

    def path(self, path: Path, column: str) -> str:
        if not is_inside(path, self.roots):
            raise CellError(f"image path {str(path)!r} resolves to {path.resolve()}, outside "
                            f"{' or '.join(map(str, self.roots))}: images are read only under the source's folder "
                            "(pass media_root to allow another folder)", column)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CellError(f"cannot read image file {str(path)!r}: {exc.strerror}", column) from None
        return self.bytes(data, column)


def check_decodes(data: bytes, suffix: str, column: str) -> None:
    """The whole picture decodes: a cell cut short (a truncated base64 string) still starts with the format's magic
    bytes, and would otherwise be written and refused only by a run's media check. ``verify`` reads every PNG chunk
    and its checksum up to the end marker; ``load`` decodes every pixel (a JPEG cut short fails only there)."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError... for a bad file
        raise CellError(f"image data ({suffix[1:].upper()}, {len(data)} bytes) does not decode: {exc} (a cell cut "
                        "short, e.g. a truncated base64 string?)", column) from None


def cell_image(value, row: SourceRow, column: str, media: MediaWriter) -> str | None:
    """The written image's relative path, None when the row has none, or ``"ref:<index>"`` for a VLMEvalKit
    reference to another row's image."""
    if isinstance(value, list | tuple):
        if len(value) > 1:
            raise CellError(f"{len(value)} images in one row: multi-image items are not supported", column)
        value = value[0] if value else None
    if missing_cell(value):
        return None
    if isinstance(value, dict):
        if value.get("bytes"):
            return media.bytes(bytes(value["bytes"]), column)
        if value.get("path"):
            return media.path(source_path(value["path"], row), column)
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return media.bytes(bytes(value), column)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):  # VLMEvalKit's list of base64 images
            try:
                return cell_image(ast.literal_eval(text), row, column, media)
            except (ValueError, SyntaxError):
                pass
        if len(text) < 4096 and _is_file(source_path(text, row)):
            return media.path(source_path(text, row), column)
        if len(text) <= 64:
            return f"ref:{text}"
        if text.startswith("data:") and "," in text:
            text = text.split(",", 1)[1]
        try:
            return media.bytes(base64.b64decode(text, validate=True), column)
        except (binascii.Error, ValueError):
            raise CellError("image is neither base64 data nor an existing file", column) from None
    raise CellError(f"unsupported image value of type {type(value).__name__}", column)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # base64 text is no file name: too long, or a NUL byte
        return False


def source_path(text: str, row: SourceRow) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else row.file.parent / path
