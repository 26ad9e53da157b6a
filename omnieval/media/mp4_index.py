"""What an MP4's own index says about its samples, read from the ``moov`` box without decoding: where they end, and
each sample's byte offset and composition offset.

An MP4 (ISO base media file: .mp4, .m4a, .mov) whose index comes first (``+faststart``, as most releases are
written) still opens when the file is cut: the index declares every sample and FFmpeg's demuxer simply stops at the
end of the bytes. Decoding then shows what is left, and a cut that drops a frame from the middle of the
presentation order (a B-frame stored after the frames around it) leaves no gap at the end to notice: the picked
frame is silently the one before. The index itself says where each sample's bytes lie (chunk offsets ``stco`` /
``co64``, samples per chunk ``stsc``, sample sizes ``stsz``), so a file that ends before its last sample's bytes is
cut, whatever the frames look like. A fragmented MP4 (samples described in ``moof`` boxes after the data) has empty
tables here and is left to the decoder's own checks.

The same tables place every sample (its byte offset) and give its composition offset (``ctts``: presentation time
minus decoding time). FFmpeg's demuxer builds its index of a track from them when it opens the file, in decoding
order and with decoding times; adding each sample's composition offset gives the presentation times that demuxing
every packet would, without reading the packets (``media.frames.header_index``).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

_TABLES = {b"stsz", b"stco", b"co64", b"stsc", b"ctts"}


def _boxes(data: bytes, start: int = 0, end: int | None = None):
    """(type, body) of each box in ``data[start:end]``; stops at a box that runs past the end."""
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        head = 8
        if size == 1:
            if pos + 16 > end:
                return
            size, head = struct.unpack(">Q", data[pos + 8:pos + 16])[0], 16
        elif size == 0:
            size = end - pos
        if size < head or pos + size > end:
            return
        yield kind, data[pos + head:pos + size]
        pos += size


def _read_moov(path: str | Path) -> bytes | None:
    """The ``moov`` box's body, or None for a file that is not ISO BMFF or has no complete ``moov``."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8 or head[4:8] != b"ftyp":
            return None
        f.seek(0)
        while True:
            header = f.read(8)
            if len(header) < 8:
                return None
            size, kind = struct.unpack(">I4s", header)
            head = 8
            if size == 1:
                size, head = struct.unpack(">Q", f.read(8))[0], 16
            elif size == 0:
                return None  # the last box runs to the end of the file: no moov after it
            if size < head:
                return None
            if kind == b"moov":
                body = f.read(size - head)
                return body if len(body) == size - head else None
            f.seek(size - head, 1)


def _tables(stbl: bytes) -> dict[bytes, bytes]:
    return {kind: body for kind, body in _boxes(stbl) if kind in _TABLES}


def _chunks(tables: dict[bytes, bytes]):
    """``(chunk offsets, samples per chunk, sample sizes)`` of one track, or None when a table is empty or missing."""
    stsz, stsc = tables.get(b"stsz"), tables.get(b"stsc")
    offsets_box = tables.get(b"co64") or tables.get(b"stco")
    if not stsz or not stsc or not offsets_box:
        return None
    wide = b"co64" in tables
    n_chunks = struct.unpack(">I", offsets_box[4:8])[0]
    offsets = np.frombuffer(offsets_box, ">u8" if wide else ">u4", n_chunks, 8).astype(np.int64)
    uniform, n_samples = struct.unpack(">II", stsz[4:12])
    sizes = (np.full(n_samples, uniform, np.int64) if uniform
             else np.frombuffer(stsz, ">u4", n_samples, 12).astype(np.int64))
    n_runs = struct.unpack(">I", stsc[4:8])[0]
    runs = np.frombuffer(stsc, ">u4", 3 * n_runs, 8).reshape(-1, 3).astype(np.int64)
    if n_chunks == 0 or n_samples == 0 or n_runs == 0:
        return None
    firsts = np.append(runs[:, 0], n_chunks + 1)  # stsc: (first chunk, samples per chunk, description), 1-based
    per_chunk = np.repeat(runs[:, 1], np.clip(np.diff(firsts), 0, None))[:n_chunks]
    return offsets[:len(per_chunk)], per_chunk, sizes


def _track_end(tables: dict[bytes, bytes]) -> int | None:
    """The byte just past the last sample of one track (None when its tables are empty or missing)."""
    found = _chunks(tables)
    if found is None:
        return None
    offsets, per_chunk, sizes = found
    n_samples = len(sizes)
    starts = np.concatenate([[0], np.cumsum(per_chunk)])
    cum = np.concatenate([[0], np.cumsum(sizes)])
    first, last = np.minimum(starts[:-1], n_samples), np.minimum(starts[1:], n_samples)
    return int((offsets + cum[last] - cum[first]).max())


def _sample_offsets(tables: dict[bytes, bytes]) -> np.ndarray | None:
    """The byte offset of each sample of one track, in decoding order (None when the tables do not place every
    sample: more samples than the chunks hold, or fewer)."""
    found = _chunks(tables)
    if found is None:
        return None
    offsets, per_chunk, sizes = found
    if int(per_chunk.sum()) != len(sizes):
        return None
    chunk = np.repeat(np.arange(len(per_chunk)), per_chunk)
    cum = np.concatenate([[0], np.cumsum(sizes)])
    chunk_first = np.concatenate([[0], np.cumsum(per_chunk)])[:-1]
    return offsets[chunk] + cum[:-1] - cum[chunk_first[chunk]]


def _composition_offsets(tables: dict[bytes, bytes], n_samples: int) -> np.ndarray | None:
    """Each sample's composition offset (``ctts``, read signed as FFmpeg does; zeros without the box), or None
    where the box does not cover exactly ``n_samples``."""
    ctts = tables.get(b"ctts")
    if ctts is None:
        return np.zeros(n_samples, np.int64)
    n_runs = struct.unpack(">I", ctts[4:8])[0]
    runs = np.frombuffer(ctts, ">i4", 2 * n_runs, 8).reshape(-1, 2).astype(np.int64)
    if n_runs == 0 or (runs[:, 0] < 0).any() or int(runs[:, 0].sum()) != n_samples:
        return None
    return np.repeat(runs[:, 1], runs[:, 0])


def composition_by_offset(path: str | Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each track whose tables place every sample: its samples' byte offsets, sorted, and their composition
    offsets in the same order. Empty where the file is not an MP4 with a readable index."""
    try:
        moov = _read_moov(path)
    except (OSError, struct.error):
        return []
    tracks = []
    try:
        for kind, trak in _boxes(moov or b""):
            if kind != b"trak":
                continue
            for stbl in _descend(trak, (b"mdia", b"minf", b"stbl")):
                tables = _tables(stbl)
                offsets = _sample_offsets(tables)
                shifts = _composition_offsets(tables, len(offsets)) if offsets is not None else None
                if shifts is not None:
                    order = np.argsort(offsets, kind="stable")
                    tracks.append((offsets[order], shifts[order]))
    except (struct.error, ValueError):
        return []
    return tracks


def declared_end(path: str | Path) -> int | None:
    """The byte offset just past the last sample any track's index declares, or None where the file is not an MP4
    with a readable, non-empty index (then nothing is known)."""
    try:
        moov = _read_moov(path)
    except (OSError, struct.error):
        return None
    if moov is None:
        return None
    ends = []
    try:
        for kind, trak in _boxes(moov):
            if kind != b"trak":
                continue
            for stbl in _descend(trak, (b"mdia", b"minf", b"stbl")):
                end = _track_end(_tables(stbl))
                if end is not None:
                    ends.append(end)
    except (struct.error, ValueError):
        return None  # a malformed index: the decoder reports the file
    return max(ends) if ends else None


def _descend(body: bytes, path: tuple[bytes, ...]):
    if not path:
        yield body
        return
    for kind, child in _boxes(body):
        if kind == path[0]:
            yield from _descend(child, path[1:])
