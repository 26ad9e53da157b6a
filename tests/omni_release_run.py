"""Shared by the omni-release converter tests (``test_omni_*.py``): small real media files, and a converted benchmark
taken through ``omnieval run`` (two simulated models), ``omnieval metrics`` and ``omnieval report``, with the
headline accuracies recomputed from ``predictions.parquet`` by plain polars and compared to ``metrics.csv`` and to
the report's cells."""

from __future__ import annotations

import json
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
import yaml

from omnieval.cli import main

COLOURS = ("red", "blue", "green", "yellow", "white", "magenta")


def make_clips(folder: Path, n: int) -> list[dict[str, Path]]:
    """``n`` clips, each a silent H.264 picture (``picture``), a PCM WAV (``sound``) and an MP4 carrying both
    (``soundtrack``: the picture with the sound as its AAC stream), all different from each other."""
    from omnieval.media.synth import beep_audio, moving_box_video, mux_clip

    clips = []
    for i in range(n):
        picture = moving_box_video(folder / f"clip{i}-picture.mp4", colour=COLOURS[i % len(COLOURS)], box=8, y=8,
                                   size=(32, 24), duration=1.0, fps=4, speed=8.0 + i)
        sound = beep_audio(folder / f"clip{i}-sound.wav", frequency=300 + 100 * i, beeps=1 + i % 3, duration=1.0,
                           sample_rate=8000)
        soundtrack = mux_clip(folder / f"clip{i}-soundtrack.mp4", video=picture, audio=sound)
        clips.append({"picture": picture, "sound": sound, "soundtrack": soundtrack})
    return clips


def make_pictures(folder: Path, n: int, suffix: str = ".png") -> list[Path]:
    from omnieval.media.synth import still_image

    return [still_image(folder / f"picture{i}{suffix}", colour=COLOURS[i % len(COLOURS)], size=(24, 16))
            for i in range(n)]


def place(source: Path, target: Path) -> Path:
    """``source``'s bytes at ``target`` (a copy, so a test can edit one release without touching another)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    return target


def items_of(bench: Path) -> dict[str, dict]:
    return {json.loads(line)["item_id"]: json.loads(line)
            for line in (bench / "items.jsonl").read_text(encoding="utf-8").splitlines()}


MODELS = [{"name": "sim-sight", "engine": "simulated", "options": {"seed": 3, "reliance": {"video": 0.9,
                                                                                             "image": 0.9}}},
          {"name": "sim-sound", "engine": "simulated", "options": {"seed": 4, "reliance": {"audio": 0.9,
                                                                                             "text": 0.3}}}]
NAMES = [m["name"] for m in MODELS]


class _Cells(HTMLParser):
    """The ``data-*`` attributes of every table cell of a report page."""

    def __init__(self):
        super().__init__()
        self.cells: list[dict] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td" and "data-metric" in attrs:
            self.cells.append(attrs)


def run_and_check(bench: Path, base: Path, conditions: list[str]) -> pl.DataFrame:
    """``omnieval run`` of ``MODELS`` on ``bench`` (spectrum), then ``metrics`` and ``report``; every model's
    ``accuracy`` per condition (and ``as_text_gap`` per ``<m>_as_text`` condition) recomputed from the predictions
    and found in ``metrics.csv`` and in the report. Returns the predictions."""
    config = base / "run.yaml"
    config.write_text(yaml.safe_dump({"benchmark": str(bench), "output": str(base / "run"), "protocol": "spectrum",
                                      "decode": {"num_frames": 2, "max_side": 32}, "models": MODELS}))
    assert main(["run", str(config)]) == 0
    predictions = base / "run" / "predictions.parquet"
    rows = pl.read_parquet(predictions)
    n_items = len(items_of(bench))
    assert rows["error"].null_count() == rows.height, rows.filter(pl.col("error").is_not_null())["error"][0]
    assert sorted(rows["condition"].unique().to_list()) == sorted(conditions)
    # an <m>_as_text condition runs on the items with a stand-in for m only
    stand_ins = {c: sum(c.removesuffix("_as_text") in (it.get("text_alternatives") or {})
                        for it in items_of(bench).values()) for c in conditions if c.endswith("_as_text")}
    assert rows.height == sum(stand_ins.get(c, n_items) for c in conditions) * len(MODELS)

    # every row names the file its item's questions share, the video, else the image, else the audio (as released)
    items = items_of(bench)
    shared = {i: next(it["media"][m] for m in ("video", "image", "audio") if m in it["media"])
              for i, it in items.items()}
    assert dict(rows.select("item_id", "media_unit").unique().iter_rows()) == shared
    assert main(["metrics", str(predictions), "--out", str(base / "metrics"), "--resamples", "200",
                 "--permutations", "200"]) == 0
    # ... and the intervals resample those files: one cluster per distinct file
    doc = json.loads((base / "metrics" / "metrics.json").read_text())
    assert doc["cluster"] == {"spectrum": "media_unit"}
    normal = [r for r in doc["metrics"] if r["metric"] == "accuracy" and r["key"] == "normal"]
    assert normal and {r["n_clusters"] for r in normal} == {len(set(shared.values()))}
    table = pl.read_csv(base / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    got = {(r["model"], r["metric"], r["key"] or ""): r["value"] for r in table.iter_rows(named=True)
           if r["protocol"] == "spectrum"}
    assert main(["report", str(base / "run"), "--out", str(base / "report"), "--resamples", "200",
                 "--permutations", "200"]) == 0
    page = _Cells()
    page.feed((base / "report" / "report.html").read_text(encoding="utf-8"))
    shown = {(c["data-model"], c["data-key"]): float(c["data-value"]) for c in page.cells
             if c["data-metric"] == "accuracy" and c.get("data-protocol") == "spectrum" and c.get("data-value")}

    answered = rows.filter(pl.col("choice").is_not_null())
    for model in (m["name"] for m in MODELS):
        for condition in conditions:
            cell = answered.filter((pl.col("model") == model) & (pl.col("condition") == condition))
            expected = float((cell["choice"] == cell["target"]).mean())
            assert got[(model, "accuracy", condition)] == pytest.approx(expected, abs=1e-12)
            assert shown[(model, condition)] == pytest.approx(expected, abs=1e-12)
        for condition in (c for c in conditions if c.endswith("_as_text")):
            gap = accuracy(rows, model, condition) - accuracy(rows, model, "normal", with_rows_in=condition)
            assert got[(model, "as_text_gap", condition.removesuffix("_as_text"))] == pytest.approx(gap, abs=1e-12)
    # the two models compared on each text stand-in: the difference of their gaps, with its interval
    paired = pl.read_csv(base / "metrics" / "paired.csv", schema_overrides={"key": pl.Utf8})
    for condition in (c for c in conditions if c.endswith("_as_text")):
        medium = condition.removesuffix("_as_text")
        row = paired.filter((pl.col("metric") == "as_text_gap") & (pl.col("key") == medium)
                            & (pl.col("comparison") == "models") & pl.col("a").is_in(NAMES)
                            & pl.col("b").is_in(NAMES)).row(0, named=True)
        gaps = {m: accuracy(rows, m, condition) - accuracy(rows, m, "normal", with_rows_in=condition) for m in NAMES}
        assert row["estimate"] == pytest.approx(gaps[row["a"]] - gaps[row["b"]], abs=1e-12)
        assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    return rows


OPEN_CONDITIONS = ["normal", "audio_only", "text_only", "random", "audio_as_text"]
"""The spectrum conditions of a spoken-question benchmark's open items."""


def run_open(bench: Path, out: Path, judge: dict) -> pl.DataFrame:
    """``omnieval run`` of ``bench``'s open items (``modes: [open]``, ``zs``) with ``MODELS`` and one judge, into
    ``out``; its predictions."""
    config = out.parent / f"{out.name}.yaml"
    config.write_text(yaml.safe_dump({"benchmark": str(bench), "output": str(out), "protocol": "spectrum",
                                      "modes": ["open"], "prompts": ["zs"], "judges": [judge],
                                      "decode": {"num_frames": 2, "max_side": 32}, "models": MODELS}))
    assert main(["run", str(config)]) == 0
    return pl.read_parquet(out / "predictions.parquet")


def accuracy(rows: pl.DataFrame, model: str, condition: str, with_rows_in: str | None = None) -> float:
    """Accuracy of ``model``'s valid rows under ``condition``; with ``with_rows_in``, over the items that have rows
    under that condition only (normal on the items with a text stand-in: what ``as_text_gap`` compares)."""
    cell = rows.filter((pl.col("model") == model) & (pl.col("condition") == condition)
                       & pl.col("choice").is_not_null())
    if with_rows_in is not None:
        cell = cell.filter(pl.col("item_id").is_in(rows.filter(pl.col("condition") == with_rows_in)["item_id"]
                                                   .unique().to_list()))
    return float((cell["choice"] == cell["target"]).mean())


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time, to show a conversion left it untouched."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


def damage_member(archive: Path, member: str) -> None:
    """Flip one byte inside ``member``'s data in a stored (uncompressed) archive, leaving the headers intact."""
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(member)
    data = bytearray(archive.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
