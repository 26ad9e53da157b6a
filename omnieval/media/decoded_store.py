"""Decoded media kept between runs: one file per decode key, on local disk or any pyarrow filesystem (``s3://``,
``gs://``), so that a sweep (or a rerun) decodes each media file once and later runs read the arrays back.

An entry is named by the spec key (``MediaSpec.key``: SHA-256 of the file bytes and the decode parameters), under
a two-character fan-out folder (``<root>/ab/abcd....omdm``), and holds, in order::

    MAGIC (8 bytes)  header length (8 bytes, little endian)  header (JSON)  array bytes  SHA-256 of all before (32)

The header has the key, the ``DecodedMedia`` fields but the array (modality, content hash, fps, sample rate,
meta), the array's dtype and shape, and ``codec``: the array bytes are compressed with zstd at level 1 (lossless:
the array comes back bit for bit). A read checks the trailing checksum and that the array decompresses to exactly
the length its dtype and shape imply, so a truncated or corrupted entry is never served: it is reported
(``Read.status == "rejected"``), removed, and the caller decodes again and writes a new one (so does an entry of
another format, such as one written before arrays were compressed).

Why zstd level 1, and no size cap (docs/runs.md, "Decoded-media store at real sizes", has the figures): decoded
frames of a 720p clip with motion and texture compress 2.95x at ~270 MB/s and decompress at ~550 MB/s on one core;
lz4 is faster but leaves 2.0x, and higher zstd levels gain little (3.1x at level 3, 3.7x at 9) for 2-10x slower
writes. At 550 MB/s a 768-frame entry at 448 px (~460 MB of pixels) reads back in under a second, where decoding it
takes tens of seconds, so every entry is worth storing, however large.

Writes are whole or absent: locally to a temporary name in the same folder, then renamed; on an object store one
put, which a killed writer never completes. Two writers of the same key write the same bytes (decoding is
deterministic), so whichever lands last is as good as the other. Only media whose fields survive the header's JSON
exactly are stored (``encode`` returns None for others): a read gives back what the decode gave, bit for bit and
type for type, so predictions are the same with and without a store (docs/reference.md, "Decoded-media store").

The path of the media file is not kept: the same bytes may sit at another path in another benchmark, and a read
takes the path of the spec that asked for it, as a decode would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import uuid
from dataclasses import dataclass
from pathlib import PurePosixPath

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from omnieval.core.storage import filesystem
from omnieval.media.decoded import DecodedMedia

MAGIC = b"OMDM\x00\x00\x00\x02"
CODEC, LEVEL = "zstd", 1
SUFFIX = ".omdm"
_LENGTH = struct.Struct("<Q")
_DIGEST = 32


class EntryError(ValueError):
    """An entry's bytes are not a whole, intact entry of the key asked for."""


def encode(key: str, media: DecodedMedia) -> bytes | None:
    """The bytes of an entry for ``media``; None where a field would not come back the same from the header."""
    data = np.ascontiguousarray(media.data)
    header = {"key": key, "modality": media.modality, "content_hash": media.content_hash, "fps": media.fps,
              "sample_rate": media.sample_rate, "meta": media.meta, "dtype": data.dtype.str,
              "shape": list(data.shape), "codec": CODEC}
    try:
        text = json.dumps(header, allow_nan=False).encode()  # key order kept, as the decode made it
    except (TypeError, ValueError):
        return None
    if not _same_fields(json.loads(text), header) or data.dtype.hasobject:
        return None
    array = pa.Codec(CODEC, compression_level=LEVEL).compress(memoryview(data.reshape(-1).view(np.uint8)),
                                                             asbytes=True)
    body = MAGIC + _LENGTH.pack(len(text)) + text + array
    return body + hashlib.sha256(body).digest()


def _same_fields(back: dict, header: dict) -> bool:
    """JSON turns tuples into lists and NumPy scalars into floats: media with such fields are not stored."""
    return all(_exact(back[k], header[k]) for k in ("fps", "sample_rate", "meta"))


def _exact(got: object, want: object) -> bool:
    """Equal and of the same type, all the way down (``1 == 1.0`` and ``[1] == (1,)``-like pairs are not)."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return list(got) == list(want) and all(_exact(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(_exact(g, w) for g, w in zip(got, want, strict=True))
    return got == want


def decode_entry(key: str, blob: bytes, path: str) -> DecodedMedia:
    """The media an entry holds, with ``path`` as its file path; ``EntryError`` where the entry is cut short, its
    checksum does not match, or it is the entry of another key."""
    if len(blob) < len(MAGIC) + _LENGTH.size + _DIGEST or not blob.startswith(MAGIC):
        raise EntryError("too short or not an entry")
    view = memoryview(blob)
    body, digest = view[:-_DIGEST], view[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise EntryError("checksum mismatch")
    (n,) = _LENGTH.unpack_from(body, len(MAGIC))
    start = len(MAGIC) + _LENGTH.size
    try:
        header = json.loads(bytes(body[start:start + n]))
        dtype, shape = np.dtype(header["dtype"]), tuple(header["shape"])
    except (ValueError, KeyError, TypeError) as exc:
        raise EntryError(f"unreadable header: {exc}") from None
    if header.get("key") != key:
        raise EntryError("the entry of another key")
    size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    payload = _array_bytes(body[start + n:], header.get("codec"), size)
    data = np.frombuffer(payload, dtype=dtype).reshape(shape)
    return DecodedMedia(header["modality"], data, header["content_hash"], path, header["fps"],
                        header["sample_rate"], header["meta"])


def _array_bytes(stored: memoryview, codec: str | None, size: int):
    """The array's ``size`` bytes from what the entry stores (compressed with ``codec``)."""
    if codec != CODEC:
        raise EntryError(f"array codec {codec!r}, not {CODEC!r}")
    try:
        return pa.Codec(codec).decompress(stored, decompressed_size=size)
    except (OSError, ValueError, pa.ArrowException) as exc:  # a length other than the shape's, or not zstd at all
        raise EntryError(f"array does not decompress to its shape: {exc}") from None


@dataclass(frozen=True)
class Read:
    """What a read found: ``"hit"`` (``media`` set), ``"miss"`` (no entry) or ``"rejected"`` (an entry that was not
    whole or intact, now removed)."""

    status: str
    media: DecodedMedia | None = None
    reason: str = ""


class DecodedStore:
    """The entries under one root (a local folder or a ``scheme://`` URI)."""

    def __init__(self, uri: str):
        self.uri = uri
        self.fs, root = filesystem(uri)
        self.root = root.rstrip("/")
        self.local = isinstance(self.fs, pafs.LocalFileSystem)

    def check_writable(self, field: str = "decode.store") -> None:
        """A local store must be a folder this process can write: a store that cannot be written (a regular file, a
        read-only filesystem) would store nothing, entry by entry, without a word, and every later run decode
        again. A probe file is written and removed; the folder is made if absent. Object stores are checked by the
        first write (their permissions cannot be asked without one)."""
        from omnieval.core.schema import InputError

        if not self.local:
            return
        probe = os.path.join(self.root, f".write-probe-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(self.root, exist_ok=True)
            with open(probe, "wb"):
                pass
            os.remove(probe)
        except OSError as exc:
            reason = "is a file, not a folder" if os.path.isfile(self.root) else f"cannot be written ({exc.strerror})"
            raise InputError(f"the decoded-media store {reason}: give a folder this process can write, or leave "
                             "decode.store out", file=self.uri, field=field) from None

    def entry_path(self, key: str) -> str:
        return str(PurePosixPath(self.root, key[:2], key + SUFFIX))

    def read(self, key: str, path: str) -> Read:
        """The entry of ``key`` (as media of the file ``path``), checked; a bad one is removed."""
        where = self.entry_path(key)
        try:
            with self.fs.open_input_stream(where) as f:
                blob = f.read()
        except FileNotFoundError:
            return Read("miss")
        except OSError as exc:  # storage out of reach: decode as without a store
            return Read("miss", reason=f"unreadable: {exc}")
        try:
            return Read("hit", decode_entry(key, blob, path))
        except EntryError as exc:
            with contextlib.suppress(OSError):  # gone already (another reader removed it): as good
                self.fs.delete_file(where)
            return Read("rejected", reason=str(exc))

    def write(self, key: str, media: DecodedMedia) -> bool:
        """Store ``media`` under ``key``; False where it cannot be stored faithfully (``encode``)."""
        blob = encode(key, media)
        if blob is None:
            return False
        final = self.entry_path(key)
        if not self.local:  # one put (no folders to make): an upload that does not finish leaves no object
            with self.fs.open_output_stream(final) as f:
                f.write(blob)
            return True
        self.fs.create_dir(str(PurePosixPath(final).parent), recursive=True)
        tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
        return True

    def keys(self) -> list[str]:
        """The keys of every entry (temporary files of writers in flight left out)."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True, allow_not_found=True))
        return sorted(PurePosixPath(i.path).name[:-len(SUFFIX)] for i in infos
                      if i.type == pafs.FileType.File and i.path.endswith(SUFFIX))
