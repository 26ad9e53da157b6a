"""Point clouds: readers against hand-written files, rendering against the geometry of known shapes."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from omnieval.media.decode import MediaError
from omnieval.media.pointcloud import (
    PointCloud,
    decode_pointcloud,
    decode_pointcloud_views,
    load_pointcloud,
    probe_pointcloud,
    render_pointcloud_image,
    render_view,
    write_ply,
)

SIZE = 256
FILL = 0.9


def foreground(image: np.ndarray) -> np.ndarray:
    return (image != 255).any(axis=-1)


def cube_surface(n: int, rng) -> np.ndarray:
    p = rng.uniform(-1, 1, (n, 3))
    p[np.arange(n), rng.integers(0, 3, n)] = rng.choice([-1.0, 1.0], n)
    return p


# ---------------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------------

POINTS = np.array([[0.0, 1.0, 2.0], [-1.5, 0.25, 3.0], [4.0, -2.0, 0.5]])
COLOURS = np.array([[255, 0, 0], [0, 128, 0], [10, 20, 30]], dtype=np.uint8)


def test_ascii_ply_written_by_hand(tmp_path):
    text = ("ply\nformat ascii 1.0\ncomment made by hand\nelement vertex 3\nproperty float x\nproperty float y\n"
            "property float z\nproperty uchar red\nproperty uchar green\nproperty uchar blue\nelement face 1\n"
            "property list uchar int vertex_indices\nend_header\n"
            "0 1 2 255 0 0\n-1.5 0.25 3 0 128 0\n4 -2 0.5 10 20 30\n3 0 1 2\n")
    (tmp_path / "a.ply").write_text(text)
    cloud = load_pointcloud(tmp_path / "a.ply")
    np.testing.assert_allclose(cloud.points, POINTS)
    np.testing.assert_array_equal(cloud.colors, COLOURS)


def test_binary_little_endian_ply_packed_by_hand(tmp_path):
    header = (b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty double x\nproperty double y\n"
              b"property double z\nproperty float intensity\nproperty uchar red\nproperty uchar green\n"
              b"property uchar blue\nend_header\n")
    body = b"".join(struct.pack("<dddfBBB", *p, 0.5, *c) for p, c in zip(POINTS, COLOURS.tolist(), strict=True))
    (tmp_path / "b.ply").write_bytes(header + body)
    cloud = load_pointcloud(tmp_path / "b.ply")
    np.testing.assert_array_equal(cloud.points, POINTS)
    np.testing.assert_array_equal(cloud.colors, COLOURS)
    # without colour: float32 xyz only
    header = b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nproperty float y\n" \
             b"property float z\nend_header\n"
    (tmp_path / "c.ply").write_bytes(header + b"".join(struct.pack("<fff", *p) for p in POINTS))
    cloud = load_pointcloud(tmp_path / "c.ply")
    np.testing.assert_allclose(cloud.points, POINTS, rtol=1e-6)
    assert cloud.colors is None


def test_npy_with_and_without_colour(tmp_path):
    np.save(tmp_path / "xyz.npy", POINTS.astype(np.float32))
    cloud = load_pointcloud(tmp_path / "xyz.npy")
    np.testing.assert_allclose(cloud.points, POINTS, rtol=1e-6)
    assert cloud.colors is None
    np.save(tmp_path / "unit.npy", np.hstack([POINTS, COLOURS / 255.0]))  # rgb in [0, 1]
    np.testing.assert_array_equal(load_pointcloud(tmp_path / "unit.npy").colors, COLOURS)
    np.save(tmp_path / "byte.npy", np.hstack([POINTS, COLOURS.astype(np.float64)]))  # rgb in 0..255
    np.testing.assert_array_equal(load_pointcloud(tmp_path / "byte.npy").colors, COLOURS)


def test_npz_as_objaverse_and_pointllm_releases_write_them(tmp_path):
    """ULIP's Objaverse ``<id>_8192.npz`` holds xyz under ``arr_0`` (``numpy.savez`` of one unnamed array); an
    archive of one array under another key is read too; several arrays without ``arr_0`` name the keys."""
    np.savez(tmp_path / "abc_8192.npz", POINTS.astype(np.float32))
    with np.load(tmp_path / "abc_8192.npz") as archive:
        assert archive.files == ["arr_0"]  # the key the release's readers index
    cloud = load_pointcloud(tmp_path / "abc_8192.npz")
    np.testing.assert_allclose(cloud.points, POINTS, rtol=1e-6)
    assert cloud.colors is None
    np.savez_compressed(tmp_path / "named.npz", points=np.hstack([POINTS, COLOURS / 255.0]))
    np.testing.assert_array_equal(load_pointcloud(tmp_path / "named.npz").colors, COLOURS)
    np.savez(tmp_path / "two.npz", arr_0=POINTS, arr_1=np.zeros((2, 3)))
    np.testing.assert_allclose(load_pointcloud(tmp_path / "two.npz").points, POINTS)
    np.savez(tmp_path / "many.npz", xyz=POINTS, normals=POINTS)
    with pytest.raises(MediaError, match="many.npz.*keys: xyz, normals"):
        load_pointcloud(tmp_path / "many.npz")
    np.savez(tmp_path / "flat.npz", np.zeros((4, 2)))
    with pytest.raises(MediaError, match="flat.npz.*\\(N, 3\\)"):
        probe_pointcloud(tmp_path / "flat.npz")
    assert decode_pointcloud_views(tmp_path / "abc_8192.npz", size=32).data.shape == (64, 64, 3)


@pytest.mark.parametrize("binary", [True, False])
def test_write_ply_round_trip(tmp_path, binary):
    path = write_ply(tmp_path / "w.ply", POINTS, COLOURS, binary=binary)
    cloud = load_pointcloud(path)
    np.testing.assert_allclose(cloud.points, POINTS, rtol=1e-6)
    np.testing.assert_array_equal(cloud.colors, COLOURS)


BAD_FILES = {
    "magic.ply": b"not a ply\n",
    "bigend.ply": b"ply\nformat binary_big_endian 1.0\nelement vertex 1\nproperty float x\nproperty float y\n"
                  b"property float z\nend_header\n" + struct.pack(">fff", 1, 2, 3),
    "short.ply": b"ply\nformat binary_little_endian 1.0\nelement vertex 4\nproperty float x\nproperty float y\n"
                 b"property float z\nend_header\n" + struct.pack("<fff", 1, 2, 3),
    "noz.ply": b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nend_header\n1 2\n",
    "words.ply": b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty float z\n"
                 b"end_header\n1 two 3\n",
    "empty.ply": b"ply\nformat ascii 1.0\nelement vertex 0\nproperty float x\nproperty float y\nproperty float z\n"
                 b"end_header\n",
    "noheaderend.ply": b"ply\nformat ascii 1.0\nelement vertex 1\n",
    "nan.ply": b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\nproperty float z\n"
               b"end_header\nnan 0 0\n",
    "garbage.npy": b"\x00\x01\x02 definitely not numpy",
    "garbage.npz": b"PK\x03\x04 a broken zip archive",
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_unreadable_point_clouds_name_the_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(BAD_FILES[name])
    with pytest.raises(MediaError, match=name):
        load_pointcloud(path)
    with pytest.raises(MediaError, match=name):
        probe_pointcloud(path)


def test_other_bad_inputs(tmp_path):
    np.save(tmp_path / "flat.npy", np.zeros((5, 2)))
    with pytest.raises(MediaError, match="flat.npy.*\\(N, 3\\)"):
        load_pointcloud(tmp_path / "flat.npy")
    with pytest.raises(MediaError, match="missing.ply.*does not exist"):
        load_pointcloud(tmp_path / "missing.ply")
    (tmp_path / "cloud.xyz").write_text("1 2 3\n")
    with pytest.raises(MediaError, match="cloud.xyz"):
        load_pointcloud(tmp_path / "cloud.xyz")


# ---------------------------------------------------------------------------------------------------------------
# Rendering: known shapes
# ---------------------------------------------------------------------------------------------------------------

def test_cube_front_view_is_a_square_of_the_expected_side():
    """A cube of side 2 (bounding sphere radius sqrt 3) seen face-on: a square of side 2 * scale pixels,
    scale = fill * (size / 2) / sqrt(3)."""
    rng = np.random.default_rng(0)
    cloud = PointCloud(cube_surface(200_000, rng))
    image = render_view(cloud, "front", SIZE, splat=0, fill=FILL)
    fg = foreground(image)
    side = 2 * FILL * (SIZE / 2) / math.sqrt(3)
    rows, cols = np.nonzero(fg)
    assert cols.max() - cols.min() + 1 == pytest.approx(side, abs=1.5)
    assert rows.max() - rows.min() + 1 == pytest.approx(side, abs=1.5)
    assert fg.sum() == pytest.approx(side ** 2, rel=0.03)
    assert (cols.min() + cols.max()) / 2 == pytest.approx(SIZE / 2, abs=1.0)  # centred


def test_cube_iso_view_is_the_regular_hexagon():
    """Seen along its body diagonal, a cube of side a projects to a regular hexagon of area sqrt(3) * a**2 whose
    corners lie on the circle of radius a * sqrt(2/3)."""
    rng = np.random.default_rng(1)
    cloud = PointCloud(cube_surface(300_000, rng))
    fg = foreground(render_view(cloud, "iso", SIZE, splat=0, fill=FILL))
    scale = FILL * (SIZE / 2) / math.sqrt(3)
    a = 2 * scale
    assert fg.sum() == pytest.approx(math.sqrt(3) * a ** 2, rel=0.03)
    rows, cols = np.nonzero(fg)
    height = rows.max() - rows.min() + 1  # a corner at the top and the bottom: 2 * a * sqrt(2/3)
    assert height == pytest.approx(2 * a * math.sqrt(2 / 3), abs=2.0)
    width = cols.max() - cols.min() + 1  # flat sides left and right: the hexagon's width a * sqrt(2)
    assert width == pytest.approx(a * math.sqrt(2), abs=2.0)


@pytest.mark.parametrize("view", ["front", "side", "top", "iso"])
def test_sphere_is_a_disc_in_every_view(view):
    rng = np.random.default_rng(2)
    p = rng.normal(size=(200_000, 3))
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    fg = foreground(render_view(PointCloud(p + [3.0, -1.0, 7.0]), view, SIZE, splat=1, fill=FILL))
    r = FILL * SIZE / 2  # radius 1 -> fill of half the image
    # a disc of radius r drawn with 3 x 3 splats covers about the disc of radius r + 1
    assert fg.sum() == pytest.approx(math.pi * (r + 1) ** 2, rel=0.03)
    rows, cols = np.nonzero(fg)
    assert cols.max() - cols.min() + 1 == pytest.approx(2 * r + 2, abs=2.0)
    assert rows.max() - rows.min() + 1 == pytest.approx(2 * r + 2, abs=2.0)


def test_z_buffer_shows_the_nearest_points_whatever_their_order():
    """Two overlapping squares: red nearer to the camera than blue, in front view (z) and side view (x)."""
    rng = np.random.default_rng(3)
    uv = rng.uniform(-1, 1, (20_000, 2))
    for view, near, far in (("front", (uv[:, 0], uv[:, 1], 0.5), (uv[:, 0], uv[:, 1], -0.5)),
                            ("side", (0.5, uv[:, 1], uv[:, 0]), (-0.5, uv[:, 1], uv[:, 0]))):
        red = np.column_stack(np.broadcast_arrays(*near))
        blue = np.column_stack(np.broadcast_arrays(*far))
        points = np.vstack([red, blue])
        colors = np.vstack([np.tile([255, 0, 0], (len(red), 1)), np.tile([0, 0, 255], (len(blue), 1))]).astype(
            np.uint8)
        for order in (np.arange(len(points)), np.arange(len(points))[::-1], rng.permutation(len(points))):
            image = render_view(PointCloud(points[order], colors[order]), view, 128, splat=1, shade=0.0)
            centre = image[54:74, 54:74].reshape(-1, 3)
            assert (centre == [255, 0, 0]).all(), view


def test_views_are_oriented_as_documented():
    """A marker cluster at +x (front: right), at -z (top: up), at +z (side: left), against a centred blob."""
    rng = np.random.default_rng(4)
    blob = rng.normal(scale=0.05, size=(2000, 3))
    for view, offset, expect in (("front", [1, 0, 0], "right"), ("top", [0, 0, -1], "up"),
                                 ("side", [0, 0, 1], "left"), ("front", [0, 1, 0], "up")):
        marker = blob + offset
        points = np.vstack([blob - offset, marker])  # symmetric, so the bounding box is centred at 0
        colors = np.vstack([np.tile([0, 0, 255], (2000, 1)), np.tile([255, 0, 0], (2000, 1))]).astype(np.uint8)
        image = render_view(PointCloud(points, colors), view, 128, shade=0.0)
        rows, cols = np.nonzero((image == [255, 0, 0]).all(axis=-1))
        assert len(rows)
        where = {"right": cols.mean() > 96, "left": cols.mean() < 32, "up": rows.mean() < 32}[expect]
        assert where, (view, offset)


def test_tiled_image_and_decoders(tmp_path):
    rng = np.random.default_rng(5)
    pts = cube_surface(5000, rng)
    path = write_ply(tmp_path / "cube.ply", pts, np.tile([0, 200, 0], (len(pts), 1)))
    tiled = render_pointcloud_image(path, size=64)
    assert tiled.shape == (128, 128, 3) and tiled.dtype == np.uint8
    cloud = load_pointcloud(path)
    np.testing.assert_array_equal(tiled[:64, :64], render_view(cloud, "front", 64))
    np.testing.assert_array_equal(tiled[64:, 64:], render_view(cloud, "iso", 64))
    decoded = decode_pointcloud_views(path, size=64)
    assert decoded.modality == "image" and decoded.data.shape == (128, 128, 3) and decoded.content_hash
    native = decode_pointcloud(path)
    assert native.modality == "pointcloud" and native.data.shape == (5000, 6)
    np.testing.assert_allclose(native.data[:, 3:], np.tile([0, 200 / 255, 0], (5000, 1)), atol=1e-6)


def test_pipeline_decoder_shows_a_point_cloud_as_its_rendered_views(tmp_path):
    """``decode_media(path, "image")`` on a point cloud file is the tiled views (the pipeline's decode path), the
    pre-flight probe reads it, and a broken file fails both with an error naming it."""
    from omnieval.media.decode import decode_media, probe_media

    rng = np.random.default_rng(0)
    points = rng.normal(size=(500, 3))
    path = write_ply(tmp_path / "c.ply", points, np.full((500, 3), 200, np.uint8))
    decoded = decode_media(path, "image")
    assert decoded.modality == "image"
    assert np.array_equal(decoded.data, render_pointcloud_image(path))  # the renderer is tested above
    probe_media(path, "image")
    native = decode_media(path, "pointcloud")
    assert native.data.shape == (500, 6) and np.allclose(native.data[:, :3], points, atol=1e-6)
    bad = tmp_path / "bad.ply"
    bad.write_bytes(b"not a ply file")
    for call in (lambda: probe_media(bad, "image"), lambda: decode_media(bad, "image")):
        with pytest.raises(MediaError, match="bad.ply"):
            call()
