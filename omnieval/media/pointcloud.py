"""Point clouds: read ``.npy`` / ``.npz`` / ``.ply`` files and render fixed views to images, for models without 3D
input.

Reading (``load_pointcloud``):

* ``.npy``: an ``(N, 3)`` array of xyz, or ``(N, 6)`` xyz + rgb (rgb in ``[0, 1]`` floats or ``0..255``), as
  PointLLM's ``<id>_8192.npy`` files hold them;
* ``.npz``: the same array under the key ``arr_0`` (what ``numpy.savez`` names an unnamed array, and the key ULIP's
  Objaverse ``<id>_8192.npz`` files use), or the archive's only array whatever its key;
* ``.ply``: ``ascii 1.0`` or ``binary_little_endian 1.0``; the ``vertex`` element with ``x``, ``y``, ``z`` and
  optionally ``red``/``green``/``blue`` (or ``r``/``g``/``b``, ``diffuse_red``...); other vertex properties are read
  and ignored. Elements before ``vertex`` (rare) must have fixed-size properties; elements after it (faces) are not
  read. ``binary_big_endian`` is refused with a clear error.

Every problem (missing file, bad header, truncated data, no points, non-finite coordinates) raises ``MediaError``
naming the file.

Rendering (``render_views``): a numpy orthographic projection with a z-buffer. The cloud is centred on the centre of
its bounding box and scaled so that its bounding sphere (radius = the largest distance of a point from that centre)
fills ``fill`` of half the image side; each point is drawn as a square splat of ``2 * splat + 1`` pixels (``splat``
chosen from the point density unless given); where
several points land on one pixel, the nearest to the camera wins. Points without colour are grey; every colour is
shaded by depth (nearest x1.0, farthest x``1 - shade``), so shape reads in a flat-coloured cloud. The background is
white. Fixed views (camera looking at the origin, y up):

==========  =========================================================================
``front``   from +z (image right = +x, image up = +y)
``side``    from +x (image right = -z)
``top``     from +y (image up = -z)
``iso``     from the direction (1, 1, 1) (along a cube's body diagonal)
==========  =========================================================================

``render_pointcloud_image`` tiles the four views into one 2 x 2 image (front, side / top, iso): one image per point
cloud, so every engine that takes images takes a point cloud with no change. ``decode_pointcloud_views`` wraps it as
the decoded ``image`` the pipeline hands to engines; ``decode_pointcloud`` gives the points themselves (modality
``pointcloud``) for a model with 3D input.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnieval.media.decoded import DecodedMedia, MediaError, content_hash

SUFFIXES: tuple[str, ...] = (".npy", ".npz", ".ply")
VIEWS: tuple[str, ...] = ("front", "side", "top", "iso")
BACKGROUND = 255
GREY = np.array([150, 150, 150], dtype=np.uint8)

_PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "i2", "int16": "i2", "ushort": "u2",
    "uint16": "u2", "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4", "float": "f4", "float32": "f4",
    "double": "f8", "float64": "f8",
}
_COLOUR_NAMES = (("red", "green", "blue"), ("r", "g", "b"), ("diffuse_red", "diffuse_green", "diffuse_blue"))


@dataclass(frozen=True)
class PointCloud:
    """``points``: float64 ``(N, 3)``; ``colors``: uint8 ``(N, 3)`` or None."""

    points: np.ndarray
    colors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.points)


def is_pointcloud_file(path: str | Path) -> bool:
    """Whether a path names a point cloud file by its suffix (``.npy``, ``.npz``, ``.ply``)."""
    return Path(path).suffix.lower() in SUFFIXES


# ---------------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------------

def load_pointcloud(path: str | Path) -> PointCloud:
    """Read a ``.npy``, ``.npz`` or ``.ply`` point cloud (see the module doc); ``MediaError`` naming the file
    otherwise."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: point cloud file does not exist")
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        cloud = _load_npy(path)
    elif suffix == ".ply":
        cloud = _load_ply(path)
    else:
        raise MediaError(f"{path}: not a point cloud file (expected {' or '.join(SUFFIXES)})")
    if len(cloud.points) == 0:
        raise MediaError(f"{path}: the point cloud has no points")
    if not np.isfinite(cloud.points).all():
        raise MediaError(f"{path}: the point cloud has non-finite coordinates")
    return cloud


def _colors(values: np.ndarray, path: Path) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).all():
        raise MediaError(f"{path}: non-finite colour values")
    if values.size and values.max() <= 1.0:
        values = values * 255.0
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


NPZ_KEY = "arr_0"
"""The array an ``.npz`` point cloud is read from when the archive holds several."""


def _load_npy(path: Path) -> PointCloud:
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                keys = list(data.files)
                if NPZ_KEY not in keys and len(keys) != 1:
                    raise MediaError(f"{path}: .npz archive has no {NPZ_KEY!r} array and not exactly one array "
                                     f"(keys: {', '.join(keys) or 'none'})")
                data = data[NPZ_KEY if NPZ_KEY in keys else keys[0]]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise MediaError(f"{path}: not a readable {path.suffix} array: {exc}") from None
    if data.ndim != 2 or data.shape[1] not in (3, 6) or data.dtype.kind not in "fiu":
        raise MediaError(f"{path}: expected a numeric (N, 3) or (N, 6) array, got {data.dtype} {data.shape}")
    points = data[:, :3].astype(np.float64)
    return PointCloud(points, _colors(data[:, 3:6], path) if data.shape[1] == 6 else None)


@dataclass
class _Element:
    name: str
    count: int
    properties: list[tuple[str, str, str | None]]  # (name, value type, list count type or None)


def _ply_header(f, path: Path) -> tuple[str, list[_Element]]:
    if f.readline().strip() != b"ply":
        raise MediaError(f"{path}: not a PLY file (no 'ply' magic line)")
    fmt, elements = None, []
    while True:
        raw = f.readline()
        if not raw:
            raise MediaError(f"{path}: PLY header has no 'end_header'")
        words = raw.decode("ascii", errors="replace").split()
        if not words or words[0] in ("comment", "obj_info"):
            continue
        if words[0] == "end_header":
            break
        if words[0] == "format" and len(words) >= 2:
            fmt = words[1]
        elif words[0] == "element" and len(words) == 3 and words[2].isdigit():
            elements.append(_Element(words[1], int(words[2]), []))
        elif words[0] == "property" and elements and len(words) >= 3:
            if words[1] == "list" and len(words) == 5:
                elements[-1].properties.append((words[4], words[3], words[2]))
            elif words[1] in _PLY_TYPES:
                elements[-1].properties.append((words[2], words[1], None))
            else:
                raise MediaError(f"{path}: unknown PLY property type {words[1]!r}")
        else:
            raise MediaError(f"{path}: malformed PLY header line {raw.strip()!r}")
    if fmt not in ("ascii", "binary_little_endian", "binary_big_endian"):
        raise MediaError(f"{path}: missing or unknown PLY format {fmt!r}")
    if fmt == "binary_big_endian":
        raise MediaError(f"{path}: binary_big_endian PLY is not supported (convert it to little endian or ASCII)")
    return fmt, elements


def _vertex_columns(vertex: _Element, path: Path) -> tuple[list[str], list[str] | None]:
    names = [p[0] for p in vertex.properties]
    if any(p[2] is not None for p in vertex.properties):
        raise MediaError(f"{path}: PLY vertex element has list properties")
    missing = [c for c in ("x", "y", "z") if c not in names]
    if missing:
        raise MediaError(f"{path}: PLY vertex element has no {', '.join(missing)} property")
    colour = next((list(c) for c in _COLOUR_NAMES if all(n in names for n in c)), None)
    return names, colour


def _load_ply(path: Path) -> PointCloud:
    with open(path, "rb") as f:
        fmt, elements = _ply_header(f, path)
        vertex = next((e for e in elements if e.name == "vertex"), None)
        if vertex is None:
            raise MediaError(f"{path}: PLY file has no vertex element")
        names, colour = _vertex_columns(vertex, path)
        before = elements[: elements.index(vertex)]
        if fmt == "ascii":
            for element in before:
                for _ in range(element.count):
                    f.readline()
            rows = []
            for i in range(vertex.count):
                line = f.readline().split()
                if len(line) < len(names):
                    raise MediaError(f"{path}: truncated PLY: vertex {i} of {vertex.count} has {len(line)} values")
                rows.append(line[: len(names)])
            try:
                table = np.array(rows, dtype=np.float64).reshape(vertex.count, len(names))
            except ValueError as exc:
                raise MediaError(f"{path}: PLY vertex values are not numbers: {exc}") from None
            columns = {n: table[:, j] for j, n in enumerate(names)}
        else:
            for element in before:
                if any(p[2] is not None for p in element.properties):
                    raise MediaError(f"{path}: PLY element {element.name!r} with list properties precedes vertex")
                f.seek(element.count * sum(np.dtype(_PLY_TYPES[p[1]]).itemsize for p in element.properties), 1)
            dtype = np.dtype([(n, "<" + _PLY_TYPES[t]) for n, t, _ in vertex.properties])
            buffer = f.read(dtype.itemsize * vertex.count)
            if len(buffer) < dtype.itemsize * vertex.count:
                raise MediaError(f"{path}: truncated PLY: {len(buffer) // max(dtype.itemsize, 1)} of "
                                 f"{vertex.count} vertices present")
            records = np.frombuffer(buffer, dtype=dtype)
            columns = {n: records[n] for n in names}
    points = np.column_stack([columns[c].astype(np.float64) for c in ("x", "y", "z")]) if vertex.count else \
        np.zeros((0, 3))
    colors = None
    if colour and vertex.count:
        values = np.column_stack([columns[c] for c in colour]).astype(np.float64)
        is_float = fmt == "ascii" and not np.all(values == np.round(values)) or any(
            _PLY_TYPES[t].startswith("f") for n, t, _ in vertex.properties if n in colour)
        # float colours may be in [0, 1]; integer colours are 0..255 even when all happen to be <= 1
        colors = _colors(values, path) if is_float else np.clip(values, 0, 255).astype(np.uint8)
    return PointCloud(points, colors)


def write_ply(path: str | Path, points, colors=None, *, binary: bool = True) -> Path:
    """Write a PLY point cloud (float32 xyz, optional uchar rgb), little-endian binary or ASCII."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    points = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    header = ["ply", f"format {'binary_little_endian' if binary else 'ascii'} 1.0", f"element vertex {len(points)}",
              "property float x", "property float y", "property float z"]
    fields = [("x", "<f4"), ("y", "<f4"), ("z", "<f4")]
    if colors is not None:
        colors = np.asarray(colors, dtype=np.uint8).reshape(-1, 3)
        header += ["property uchar red", "property uchar green", "property uchar blue"]
        fields += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
    header.append("end_header")
    records = np.empty(len(points), dtype=np.dtype(fields))
    for j, axis in enumerate("xyz"):
        records[axis] = points[:, j]
    if colors is not None:
        for j, name in enumerate(("red", "green", "blue")):
            records[name] = colors[:, j]
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\n").encode("ascii"))
        if binary:
            f.write(records.tobytes())
        else:
            for row in records:
                f.write((" ".join(repr(float(v)) if i < 3 else str(int(v)) for i, v in enumerate(row)) + "\n")
                        .encode("ascii"))
    return path


# ---------------------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------------------

def _rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def view_rotation(view: str) -> np.ndarray:
    """Rotation taking world coordinates to camera coordinates (camera on +z, looking at -z, y up)."""
    if view == "front":
        return np.eye(3)
    if view == "side":  # camera on +x: rotate the world by -90 degrees about y
        return _rot_y(-math.pi / 2)
    if view == "top":  # camera on +y: rotate the world by +90 degrees about x
        return _rot_x(math.pi / 2)
    if view == "iso":  # camera along (1, 1, 1)
        return _rot_x(math.atan(1 / math.sqrt(2))) @ _rot_y(-math.pi / 4)
    raise ValueError(f"unknown view {view!r}; known: {', '.join(VIEWS)}")


def normalise(points: np.ndarray) -> tuple[np.ndarray, float]:
    """Points centred on their bounding-box centre, and the bounding-sphere radius about it (> 0)."""
    centre = (points.min(axis=0) + points.max(axis=0)) / 2
    centred = points - centre
    radius = float(np.sqrt((centred ** 2).sum(axis=1).max())) if len(points) else 0.0
    return centred, radius if radius > 0 else 1.0


def project(cloud: PointCloud, view: str, size: int, fill: float = 0.9) -> tuple[np.ndarray, np.ndarray, float]:
    """``(pixels (N, 2) float [column, row], depth (N,), pixels per unit)`` of the cloud in one view."""
    centred, radius = normalise(cloud.points)
    cam = centred @ view_rotation(view).T
    scale = fill * (size / 2) / radius
    col = size / 2 + cam[:, 0] * scale
    row = size / 2 - cam[:, 1] * scale
    return np.column_stack([col, row]), cam[:, 2], scale


def auto_splat(n_points: int, size: int, fill: float = 0.9) -> int:
    """A splat radius that closes most holes: about the side of the pixel area each front-facing point covers when
    half of the points fill the disc of the bounding sphere."""
    area = math.pi * (fill * size / 2) ** 2
    return max(1, round(0.75 * math.sqrt(area / max(n_points / 2, 1))))


def render_view(cloud: PointCloud, view: str = "front", size: int = 224, *, splat: int | None = None,
                fill: float = 0.9, shade: float = 0.5) -> np.ndarray:
    """One ``(size, size, 3)`` uint8 image of the cloud (orthographic, z-buffered; see the module doc).
    ``splat``: half-width of each point's square in pixels (default ``auto_splat``)."""
    pixels, depth, _ = project(cloud, view, size, fill)
    splat = auto_splat(len(depth), size, fill) if splat is None else int(splat)
    colors = cloud.colors if cloud.colors is not None else np.broadcast_to(GREY, (len(depth), 3))
    span = float(depth.max() - depth.min())
    near = (depth - depth.min()) / span if span > 0 else np.ones_like(depth)  # 1 = nearest
    shaded = colors.astype(np.float64) * ((1.0 - shade) + shade * near)[:, None]
    base = np.floor(pixels).astype(np.int64)
    offsets = np.arange(-splat, splat + 1)
    dc, dr = (g.reshape(-1) for g in np.meshgrid(offsets, offsets))
    cols = (base[:, 0][:, None] + dc[None, :]).reshape(-1)
    rows = (base[:, 1][:, None] + dr[None, :]).reshape(-1)
    owner = np.repeat(np.arange(len(depth)), len(dc))
    inside = (cols >= 0) & (cols < size) & (rows >= 0) & (rows < size)
    cols, rows, owner = cols[inside], rows[inside], owner[inside]
    pixel = rows * size + cols
    order = np.lexsort((-depth[owner], pixel))  # per pixel, the nearest point (largest camera z) first
    pixel, owner = pixel[order], owner[order]
    first = np.ones(len(pixel), dtype=bool)
    first[1:] = pixel[1:] != pixel[:-1]
    image = np.full((size * size, 3), BACKGROUND, dtype=np.uint8)
    image[pixel[first]] = np.clip(np.rint(shaded[owner[first]]), 0, 255).astype(np.uint8)
    return image.reshape(size, size, 3)


def render_views(cloud: PointCloud, views: tuple[str, ...] = VIEWS, size: int = 224, **kw) -> np.ndarray:
    """``(len(views), size, size, 3)`` uint8: one rendering per view."""
    return np.stack([render_view(cloud, v, size, **kw) for v in views])


def tile(images: np.ndarray, columns: int = 2) -> np.ndarray:
    """Views side by side, ``columns`` per row (missing cells white)."""
    n, h, w, _ = images.shape
    rows = -(-n // columns)
    out = np.full((rows * h, columns * w, 3), BACKGROUND, dtype=np.uint8)
    for i, image in enumerate(images):
        r, c = divmod(i, columns)
        out[r * h:(r + 1) * h, c * w:(c + 1) * w] = image
    return out


def render_pointcloud_image(path: str | Path, size: int = 224, views: tuple[str, ...] = VIEWS) -> np.ndarray:
    """The 2 x 2 tile of the fixed views of a point cloud file: uint8 ``(2 * size, 2 * size, 3)``."""
    return tile(render_views(load_pointcloud(path), views, size))


def decode_pointcloud_views(path: str | Path, size: int = 224) -> DecodedMedia:
    """A point cloud file as the ``image`` models without 3D input are shown (the tiled views)."""
    data = render_pointcloud_image(path, size)
    return DecodedMedia("image", data, content_hash(path, modality="image", size=size), str(path),
                        meta={"source": "pointcloud", "views": list(VIEWS)})


def decode_pointcloud(path: str | Path) -> DecodedMedia:
    """The points themselves, float32 ``(N, 6)``: xyz, then rgb in [0, 1] (grey where the file has no colour)."""
    cloud = load_pointcloud(path)
    colors = cloud.colors if cloud.colors is not None else np.broadcast_to(GREY, (len(cloud), 3))
    data = np.hstack([cloud.points, colors / 255.0]).astype(np.float32)
    return DecodedMedia("pointcloud", data, content_hash(path, modality="pointcloud"), str(path),
                        meta={"points": len(cloud), "has_color": cloud.colors is not None})


def probe_pointcloud(path: str | Path) -> None:
    """Pre-flight check: the file reads as a point cloud (``MediaError`` naming the file otherwise)."""
    load_pointcloud(path)
