"""Spectrum's release breakdowns (every metric also per value of each of ``Item.breakdowns``) and text stand-ins on
some items only (``<m>_as_text`` runs on the items with one; ``as_text_gap`` compares normal on those same items),
checked against plain polars / numpy recounts of the predictions as written to Parquet and read back."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from omnieval.core.schema import LABELS, PREDICTION_SCHEMA, InputError, conform
from omnieval.engines import EngineRequest, create_engine
from omnieval.protocols import spectrum
from omnieval.protocols.spectrum import Item
from omnieval.run.predictions import Prediction
from omnieval.stats.metrics import metrics_table
from omnieval.stats.paired import paired_table
from omnieval.stats.read import read_predictions
from tests.omni_release_run import NAMES, _Cells, make_clips, place, run_and_check

DURATIONS = ("short", "medium", "long")


def video_items(n: int, subtitled=lambda i: i % 3 != 2) -> list[Item]:
    """Video + audio items (Video-MME's shape): a duration on every item, a domain on every other one, subtitles
    (the audio's stand-in) where ``subtitled`` says."""
    return [Item(item_id=f"v{i:03d}", question=f"question {i}", options=[f"o{i}-{j}" for j in range(4)],
                 answer=LABELS[i % 4], media={"video": f"videos/{i}.mp4", "audio": f"videos/{i}.mp4"},
                 breakdowns={"duration": DURATIONS[i % 3], **({"domain": "Sports"} if i % 2 else {})},
                 text_alternatives={"audio": f"subtitles of video {i}"} if subtitled(i) else None)
            for i in range(n)]


def predictions_file(tmp_path, models: dict[str, dict], items: list[Item], edit=None) -> tuple:
    """The simulated models' rows built as a run builds them (``Prediction.row``), written with the run's schema;
    ``edit(model, instance, choice) -> choice`` may change a choice first. Returns the path and the rows as
    written (a plain frame for the recounts)."""
    instances = spectrum.expand_all(items, None, seed=0)
    rows = []
    for model, reliance in models.items():
        engine = create_engine("simulated", model=model, reliance=reliance, margin=12.0, noise=0.5)
        results = engine.score([EngineRequest(inst, {}, "zs") for inst in instances])
        for inst, res in zip(instances, results, strict=True):
            choice = edit(model, inst, res.choice) if edit else res.choice
            rows.append(Prediction.scored(inst, model, "simulated", "zs", choice=choice).row())
    path = tmp_path / "predictions.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PREDICTION_SCHEMA), path)
    plain = pl.DataFrame([{k: r[k] for k in ("model", "item_id", "condition", "choice", "target")} for r in rows],
                         schema_overrides={"choice": pl.Utf8})
    return path, plain


def accuracy(frame: pl.DataFrame, model: str, condition: str, ids=None) -> tuple[float, int]:
    part = frame.filter((pl.col("model") == model) & (pl.col("condition") == condition)
                        & pl.col("choice").is_not_null())
    if ids is not None:
        part = part.filter(pl.col("item_id").is_in(list(ids)))
    return float(np.mean(part["choice"].to_numpy() == part["target"].to_numpy())), part.height


def test_every_metric_is_given_per_value_of_each_breakdown(tmp_path):
    n = 120
    items = video_items(n, subtitled=lambda i: True)
    path, plain = predictions_file(tmp_path, {"watcher": {"video": 0.9}}, items)
    read = read_predictions([path])
    assert read.schema["breakdowns"] == pl.List(pl.Struct({"name": pl.Utf8, "value": pl.Utf8}))
    table = metrics_table(read, resamples=200, seed=0)
    got = {(r["metric"], r["key"]): r for r in table.iter_rows(named=True)}
    values = {f"duration={d}": [f"v{i:03d}" for i in range(n) if DURATIONS[i % 3] == d] for d in DURATIONS}
    values["domain=Sports"] = [f"v{i:03d}" for i in range(n) if i % 2]
    for scope, ids in values.items():
        for condition in ("normal", "video_only", "audio_only", "random", "audio_as_text"):
            value, rows = accuracy(plain, "watcher", condition, ids)
            row = got[("accuracy", f"{scope}/{condition}")]
            assert row["value"] == pytest.approx(value, abs=1e-12) and row["n"] == rows == len(ids)
            assert row["n_items"] == len(ids) and row["ci_low"] <= row["value"] <= row["ci_high"]
        intra = accuracy(plain, "watcher", "video_only", ids)[0] - accuracy(plain, "watcher", "random", ids)[0]
        assert got[("intra", f"{scope}/video")]["value"] == pytest.approx(intra, abs=1e-12)
        gap = accuracy(plain, "watcher", "audio_as_text", ids)[0] - accuracy(plain, "watcher", "normal", ids)[0]
        assert got[("as_text_gap", f"{scope}/audio")]["value"] == pytest.approx(gap, abs=1e-12)
        assert got[("chance", scope)]["value"] == pytest.approx(0.25)
    # the items without a domain are in no domain row, and no other value was made up
    assert {k.split("/")[0] for (_, k) in got if "=" in k} == set(values)


def test_as_text_gap_compares_normal_on_the_items_with_a_stand_in_only(tmp_path):
    n = 150
    items = video_items(n)  # a third of the videos have no subtitles
    subtitled = [it.item_id for it in items if it.text_alternatives]

    def hard_without_subtitles(model, inst, choice):  # the unsubtitled third: always wrong under normal
        if inst.condition == "normal" and inst.item_id not in subtitled:
            return inst.option_labels[(inst.option_labels.index(inst.target) + 1) % len(inst.option_labels)]
        return choice

    models = {"listener": {"audio": 0.95, "text": 0.3}, "reader": {"text": 0.95}}
    path, plain = predictions_file(tmp_path, models, items, edit=hard_without_subtitles)
    assert plain.filter(pl.col("condition") == "audio_as_text")["item_id"].n_unique() == len(subtitled) == 100
    frame = read_predictions([path])
    table = metrics_table(frame, resamples=300, seed=0)
    got = {(r["model"], r["metric"], r["key"]): r for r in table.iter_rows(named=True)}
    gaps = {}
    for model in models:
        same = accuracy(plain, model, "audio_as_text")[0] - accuracy(plain, model, "normal", subtitled)[0]
        every = accuracy(plain, model, "audio_as_text")[0] - accuracy(plain, model, "normal")[0]
        row = got[(model, "as_text_gap", "audio")]
        assert row["value"] == pytest.approx(same, abs=1e-12)
        assert abs(same - every) > 0.1  # the unrestricted number would be a different one
        assert row["n"] == 2 * len(subtitled) and row["n_items"] == len(subtitled)
        assert row["ci_low"] <= row["value"] <= row["ci_high"]
        value, rows = accuracy(plain, model, "audio_as_text")
        assert got[(model, "accuracy", "audio_as_text")]["value"] == pytest.approx(value, abs=1e-12)
        assert rows == got[(model, "accuracy", "audio_as_text")]["n"] == len(subtitled)
        gaps[model] = same
        # per breakdown value too: the same items on both sides
        for d in DURATIONS:
            ids = [i for i in subtitled if DURATIONS[int(i[1:]) % 3] == d]
            if not ids:
                assert (model, "as_text_gap", f"duration={d}/audio") not in got
                continue
            want = accuracy(plain, model, "audio_as_text", ids)[0] - accuracy(plain, model, "normal", ids)[0]
            assert got[(model, "as_text_gap", f"duration={d}/audio")]["value"] == pytest.approx(want, abs=1e-12)
    # the model comparison of the gap is the difference of the two restricted gaps
    paired = paired_table(frame, resamples=300, seed=0, permutations=100)
    row = paired.filter((pl.col("metric") == "as_text_gap") & (pl.col("key") == "audio")
                        & pl.col("a").is_in(list(models)) & pl.col("b").is_in(list(models))).row(0, named=True)
    assert row["estimate"] == pytest.approx(gaps[row["a"]] - gaps[row["b"]], abs=1e-12)


def test_breakdowns_from_other_tools_files_and_older_files_without_them(tmp_path):
    base = {"model": "m", "prompt": "zs", "protocol": "spectrum", "split": "all", "target": "A",
            "abstain_label": None, "confidence": None, "confidence_method": None, "n_options": 2}
    rows = [base | {"item_id": f"i{k}", "instance_id": f"i{k}|normal|s0", "condition": "normal",
                    "choice": "A" if k < 3 else "B"} for k in range(6)]
    durations = ["short", "short", "long", "long", "long", None]
    jsonl = tmp_path / "other.jsonl"
    jsonl.write_text("".join(json.dumps(r | ({"breakdowns": {"duration": d}} if d else {})) + "\n"
                             for r, d in zip(rows, durations, strict=True)))
    csv = tmp_path / "other.csv"
    pl.DataFrame([r | {"breakdowns": json.dumps({"duration": d}) if d else ""} for r, d in
                  zip(rows, durations, strict=True)]).write_csv(csv)
    for path in (jsonl, csv):
        table = metrics_table(read_predictions([path]), resamples=0)
        got = {r["key"]: (r["value"], r["n"]) for r in table.filter(pl.col("metric") == "accuracy").iter_rows(
            named=True)}
        assert got["duration=short/normal"] == (1.0, 2) and got["duration=long/normal"] == (pytest.approx(1 / 3), 3)
        assert got["normal"] == (0.5, 6)
    # an older omnieval's file: no breakdowns column, read as it was, conformed to nulls
    old = tmp_path / "old.parquet"
    pl.DataFrame(rows).write_parquet(old)
    table = metrics_table(read_predictions([old]), resamples=0)
    assert not any("=" in k for k in table["key"].to_list())
    assert conform(pa.Table.from_pylist(rows))["breakdowns"].null_count == 6
    # refused with one line naming file, row and field
    bad = tmp_path / "bad.csv"
    pl.DataFrame([r | {"breakdowns": "{duration: short"} for r in rows]).write_csv(bad)
    with pytest.raises(InputError) as caught:
        read_predictions([bad])
    assert caught.value.field == "breakdowns" and caught.value.item == "row 1" and "\n" not in str(caught.value)
    slash = tmp_path / "slash.jsonl"
    slash.write_text("".join(json.dumps(r | {"breakdowns": {"a/b": "x"}}) + "\n" for r in rows))
    with pytest.raises(InputError, match="breakdown name 'a/b'"):
        read_predictions([slash])


def test_a_breakdown_name_that_would_break_the_keys_is_refused():
    with pytest.raises(ValidationError, match="holds '=' or '/'"):
        Item(item_id="a", question="q", options=["x", "y"], answer="A", media={"image": "i.png"},
             breakdowns={"dur=ation": "long"})


@dataclass
class _Bench:
    items: list
    items_file: None = None
    root: None = None


def test_instances_without_breakdowns_keep_their_stored_form():
    """An instance without breakdowns is stored, and hashed into the plan's identity, as before the field existed
    (no ``breakdowns`` key), so a run written then still resumes; one with breakdowns stores them."""
    from omnieval.run.expansion import ExpansionSource, expand_chunk

    def expanded(items):  # in this process, whether or not Ray is up: the stored blocks, then the digest
        *blocks, summary = expand_chunk(ExpansionSource("spectrum", _Bench(items), 0, spectrum.Options()), 0,
                                        len(items))
        return [record for block in blocks for record in block["instance"].to_pylist()], summary.digest

    labelled_items = video_items(6, subtitled=lambda i: False)
    bare, bare_digest = expanded([it.model_copy(update={"breakdowns": None}) for it in labelled_items])
    assert bare and all("breakdowns" not in [f["name"] for f in stored["protocol_fields"]] for stored in bare)
    labelled, labelled_digest = expanded(labelled_items)
    assert {"name": "breakdowns", "text": None, "number": None, "flag": None,
            "pairs": [{"name": "duration", "value": "short"}]} in labelled[0]["protocol_fields"]
    assert labelled_digest != bare_digest


DOMAINS = ("Sports", "Knowledge")


def clip_benchmark(folder, clips) -> list[dict]:
    """A video + audio spectrum benchmark of real mp4s (two questions a clip, both on its file), laid out as a
    converter writes one: Video-MME's duration on every item, a domain on the even clips, subtitles on clips 0-3 of
    6 (the others have none, as in the release)."""
    items = []
    for c, clip in enumerate(clips):
        name = f"media/clip{c}.mp4"
        place(clip["soundtrack"], folder / name)
        for q in range(2):
            items.append({"item_id": f"c{c}q{q}", "split": "test", "question": f"Question {q} on clip {c}?",
                          "options": [f"{c + q + k} things" for k in range(4)], "answer": "ABCD"[(c + q) % 4],
                          "media": {"video": name, "audio": name},
                          "breakdowns": {"duration": DURATIONS[c % 3]} | ({"domain": DOMAINS[c % 4 // 2]}
                                                                         if c % 2 == 0 else {})}
                         | ({"text_alternatives": {"audio": f"subtitles of clip {c}"}} if c < 4 else {}))
    (folder / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    (folder / "benchmark.json").write_text(json.dumps({"name": "clips", "protocol": "spectrum"}))
    return items


@pytest.mark.slow
def test_a_run_with_breakdowns_and_subtitles_on_some_videos(ray_session, tmp_path, capsys):
    """Through ``omnieval run`` (local Ray, two simulated models), ``metrics`` and ``report``: the summary and
    run.json count the items without subtitles as skipped for ``audio_as_text``, and the per-duration and per-domain
    accuracy in metrics.csv and in the report equal a polars recount of predictions.parquet."""
    bench = tmp_path / "bench"
    items = clip_benchmark(bench, make_clips(tmp_path / "clips", 6))
    conditions = ["normal", "video_only", "audio_only", "text_only", "random", "no_video", "no_audio", "no_text",
                  "audio_as_text"]
    rows = run_and_check(bench, tmp_path, conditions)  # accuracy and the restricted as_text_gap, recounted
    out = capsys.readouterr().out
    assert "audio_as_text: 8 of 12 items have a stand-in; 4 skipped" in out
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["skipped"]["conditions"] == {"audio_as_text": {"items": 8, "of": 12, "skipped": 4}}
    assert record["skipped"]["count"] == 0  # no row was skipped: the four items have no such instance at all
    assert sorted(rows.filter(pl.col("condition") == "audio_as_text")["item_id"].unique().to_list()) == sorted(
        it["item_id"] for it in items if "text_alternatives" in it)

    # the breakdowns column as written, against the items; then every value's accuracy recounted from it
    written = {r["item_id"]: {p["name"]: p["value"] for p in r["breakdowns"]}
               for r in rows.select("item_id", "breakdowns").unique("item_id").iter_rows(named=True)}
    assert written == {it["item_id"]: it["breakdowns"] for it in items}
    pairs = rows.filter(pl.col("choice").is_not_null()).explode("breakdowns").unnest("breakdowns")
    want = {(r["model"], f"{r['name']}={r['value']}/{r['condition']}"): (r["acc"], r["n"]) for r in
            pairs.group_by("model", "name", "value", "condition").agg(
                acc=(pl.col("choice") == pl.col("target")).mean(), n=pl.len()).iter_rows(named=True)}
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    got = {(r["model"], r["key"]): (r["value"], r["n"]) for r in table.filter(
        (pl.col("metric") == "accuracy") & pl.col("key").str.contains("=") & pl.col("model").is_in(NAMES)).iter_rows(
        named=True)}
    assert set(got) == set(want) and len(want) == 2 * (3 + 2) * len(conditions)
    for key, (value, n) in want.items():
        assert got[key][0] == pytest.approx(value, abs=1e-12) and got[key][1] == n
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    cells = _Cells()
    cells.feed(page)
    shown = {(c["data-model"], c["data-key"]): float(c["data-value"]) for c in cells.cells
             if c["data-metric"] == "accuracy" and "=" in c["data-key"] and c.get("data-value")
             and c["data-model"] in NAMES}
    assert shown.keys() == want.keys()
    for key, (value, _) in want.items():
        assert shown[key] == pytest.approx(value, abs=1e-12)
    assert "By duration" in page and "By domain" in page


def test_the_summary_and_a_sweep_line_say_which_items_a_condition_skipped():
    from omnieval.run.pipeline import RunResult
    from omnieval.sweep.runner import _skipped_note
    from omnieval.sweep.status import RunOutcome

    conditions = {"audio_as_text": {"items": 4, "of": 6, "skipped": 2}}
    result = RunResult(output="out", predictions_path="out/predictions.parquet", n_instances=46, n_rows=46,
                       n_skipped=0, n_errors=0, n_predictions=46, n_answers=46,
                       skipped={"count": 0, "by_model": {}, "conditions": conditions})
    lines = result.summary().splitlines()
    assert [line for line in lines if "audio_as_text" in line] == [
        "audio_as_text: 4 of 6 items have a stand-in; 2 skipped (no instance of the condition; its metrics are over "
        "the others)"]
    assert result.ok
    outcome = RunOutcome(key="k", model="m", protocol="spectrum", benchmark="b", prompt="zs", output="o",
                         fingerprint="f", predictions=46, skipped_conditions=conditions)
    assert _skipped_note(outcome) == "; audio_as_text on 4 of 6 items (2 without a stand-in)"
