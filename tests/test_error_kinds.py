"""The ``error_kind`` column: written where each error happens (the model stage for media decodes, engine exceptions
and an engine's own error results; the cascade for describer failures), kept through the store into
``predictions.parquet``, and read as a column by the metrics. Expected kinds come from what each test broke (which
file, which engine call), never from the code's own classification.

Also here: an open-ended request carries no copy of its instance beside its ``instance`` record; the engine gets the
instance through the request, parsed once in the model stage for all the rows of that instance in a batch."""

from __future__ import annotations

import shutil

import polars as pl
import pyarrow.parquet as pq
import pytest

from omnieval.core.schema import Instance, Segment
from omnieval.engines.base import GenerationResult
from omnieval.engines.simulated import SimulatedEngine

DECODE_MESSAGE = "media decode failed: media/x.mp4: truncated"


def _instance(n: int) -> Instance:
    return Instance(instance_id=f"q{n}|C000", item_id=f"q{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=[Segment(kind="text", text=f"Text: fox number {n}")],
                    question="Which animal is it?", option_labels=list("ABCDE"),
                    option_texts=["a fox", "a cat", "a car", "a drum", "I cannot answer"], target="A",
                    abstain_label="E", protocol_fields={"k": 0},
                    simulation_hints={"text": "A"})


class FailingEngine(SimulatedEngine):
    """``score`` raises for its whole batch; ``generate`` answers every request with an error result of its own."""

    def score(self, requests):
        raise RuntimeError("CUDA out of memory")

    def generate(self, requests):
        return [GenerationResult(None, error="failing engine: no reply") for _ in requests]


def test_the_model_stage_writes_each_error_with_its_kind_into_predictions(tmp_path):
    """Through the model stage's code (``stages.call_rows``, the actor's calls without Ray), the row builder, a
    part and the consolidation into ``predictions.parquet``: rows whose media failed to decode are ``media`` (no
    engine call), multiple-choice rows of the raising ``score`` are ``engine``, and so are open rows answered with an
    error result (the engine failed for that request); the messages stay as they were."""
    from omnieval.core.run_outputs import RunOutputs, consolidate
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.pipeline import summarise
    from omnieval.run.stages import call_rows
    from omnieval.stats.metrics import compute_metrics

    instances = [_instance(n) for n in range(6)]
    broken = {"q0|C000", "q1|C000"}
    rows = list(answer_requests(instances, ["mcq", "open"], ["zs"], set(), {}))
    for row in rows:
        row["decode_error"] = DECODE_MESSAGE if row["instance_id"] in broken else ""
    batch = call_rows(FailingEngine("failing"), rows)
    store = RunOutputs(str(tmp_path / "run"), writer="w")
    store.append_part("failing", PredictionRows("failing", "simulated")(batch))
    store.write_table("predictions.parquet", consolidate([store.read_parts("failing")]))
    table = pq.read_table(tmp_path / "run" / "predictions.parquet")
    assert table.schema.field("error_kind").type == "string"
    got = {(r["mode"], r["instance_id"]): (r["error_kind"], r["error"]) for r in table.to_pylist()}
    for inst in instances:
        iid = inst.instance_id
        if iid in broken:
            assert got[("mcq", iid)] == got[("open", iid)] == ("media", DECODE_MESSAGE)
        else:
            assert got[("mcq", iid)] == ("engine", "engine error: RuntimeError: CUDA out of memory")
            assert got[("open", iid)] == ("engine", "failing engine: no reply")
    assert summarise(table)["errors_by_kind"] == {"media": 4, "engine": 8}

    # the multiple-choice rows' rates (open rows have metrics only where judges graded some)
    metrics = compute_metrics([tmp_path / "run" / "predictions.parquet"], resamples=0)
    rates = {r["key"]: r["value"] for r in metrics.to_dicts() if r["metric"] == "error_rate"}
    assert rates == {"": 1.0, "media": pytest.approx(2 / 6), "engine": pytest.approx(4 / 6)}


def test_an_open_request_carries_no_copy_of_its_instance():
    """The open-ended request row's ``meta`` says what it is for and nothing of the instance; the simulated
    engine still answers from the instance (reached through the request): a model relying fully on text says the
    option its text supports, ``a fox`` (the ``evidence`` written above)."""
    from omnieval.core.schema import RESULT_COLUMN
    from omnieval.run.answers import answer_requests
    from omnieval.run.stages import call_rows

    instances = [_instance(n) for n in range(3)]
    rows = list(answer_requests(instances, ["open"], ["zs", "cot"], set(), {}))
    assert [r["meta"] for r in rows] == [{"task": "answer", "style": s} for _ in instances for s in ("zs", "cot")]
    batch = call_rows(SimulatedEngine("reader", reliance={"text": 1.0}, invalid_rate=0.0), rows)
    assert [r.error for r in batch[RESULT_COLUMN]] == [None] * 6
    assert [r.raw_text.rsplit("Answer: ", 1)[-1] for r in batch[RESULT_COLUMN]] == ["a fox"] * 6


def test_the_rows_of_one_instance_share_one_parse_in_a_batch():
    from omnieval.run.answers import answer_requests
    from omnieval.run.stages import INSTANCE_COLUMN, call_rows

    instances = [_instance(n) for n in range(2)]
    rows = list(answer_requests(instances, ["mcq", "open"], ["zs", "cot"], set(), {}))
    batch = call_rows(SimulatedEngine("s"), rows)
    parsed = list(batch[INSTANCE_COLUMN])
    assert [p.instance_id for p in parsed] == [r["instance_id"] for r in rows] == ["q0|C000"] * 4 + ["q1|C000"] * 4
    assert len({id(p) for p in parsed}) == 2 and parsed[0] == instances[0] and parsed[4] == instances[1]


# ---------------------------------------------------------------------------------------------------------------
# Whole runs (local Ray): a broken video, a broken audio file, a describer
# ---------------------------------------------------------------------------------------------------------------

SIM = {"name": "sim", "engine": "simulated", "options": {"seed": 1}}
CASCADE = {"name": "sim+audio-desc", "engine": "simulated", "options": {"seed": 1},
           "describe": {"model": {"name": "describer", "engine": "simulated"}}}


@pytest.fixture(scope="module")
def broken_bench(bench, tmp_path_factory):
    """The shared benchmark with one anchor's video truncated and another anchor's audio replaced by bytes that are
    no audio; ``(folder, video path, audio path)``."""
    folder = tmp_path_factory.mktemp("broken") / "bench"
    shutil.copytree(bench, folder)
    videos = sorted((folder / "media").rglob("video.mp4"))
    audios = sorted((folder / "media").rglob("audio.wav"))
    video, audio = videos[0], next(a for a in audios if a.parent != videos[0].parent)
    video.write_bytes(video.read_bytes()[:300])  # header survives, the stream does not
    audio.write_bytes(b"this is not a wav file\n" * 40)
    return folder, str(video.relative_to(folder)), str(audio.relative_to(folder))


def _config(bench, out, models):
    from omnieval.config import parse_run_config

    return parse_run_config({"benchmark": str(bench), "output": str(out), "models": models, "prompts": ["zs"],
                             "decode": {"num_frames": 4, "max_side": 96, "media_check": "exists"},
                             "max_error_rate": 1.0})


def _expected_kinds(config, video: str, audio: str) -> dict[tuple[str, str], str | None]:
    """(model, instance_id) -> the kind each row must have, from the files each instance shows: the direct model
    fails to decode either file (``media``); the cascade's describer fails on the audio first (``describe``: no
    model call), and its answering model on the video (``media``)."""
    from omnieval.run.plan import make_plan

    want = {}
    for inst in make_plan(config).load_instances():
        shown = {s.path for s in inst.media_segments()}
        want[("sim", inst.instance_id)] = "media" if shown & {video, audio} else None
        want[("sim+audio-desc", inst.instance_id)] = ("describe" if audio in shown else
                                                      "media" if video in shown else None)
    models = {m.name for m in config.models}
    return {key: kind for key, kind in want.items() if key[0] in models}


@pytest.mark.slow
def test_decode_and_describe_failures_have_their_kinds_in_predictions(ray_session, broken_bench, tmp_path):
    from omnieval.stats.metrics import compute_metrics

    bench, video, audio = broken_bench
    config = _config(bench, tmp_path / "run", [SIM, CASCADE])
    result = run_and_check(config, video, audio)
    want = _expected_kinds(config, video, audio)
    assert {"media", "describe", None} == set(want.values())
    assert result.errors_by_kind == {"media": sum(k == "media" for k in want.values()),
                                     "describe": sum(k == "describe" for k in want.values())}
    df = pl.read_parquet(result.predictions_path)
    assert (df.filter(pl.col("error_kind") == "describe")["error"].str.starts_with("describe failed: ")).all()
    assert (df.filter(pl.col("error_kind") == "media")["error"].str.starts_with("media decode failed: ")).all()

    # the metrics read the column; the same rows without it (an older omnieval's file) give the same rates
    legacy = tmp_path / "legacy.parquet"
    df.drop("error_kind").write_parquet(legacy)
    rates, legacy_rates = ({(r["model"], r["split"], r["key"]): r["value"] for r in table.to_dicts()
                            if r["metric"] == "error_rate"}
                           for table in (compute_metrics([result.predictions_path], resamples=0),
                                         compute_metrics([legacy], resamples=0)))
    assert rates == legacy_rates
    split_of = dict(zip(df["instance_id"], df["split"], strict=False))
    for (model, split) in {(m, split_of[i]) for m, i in want}:
        kinds = [k for (m, i), k in want.items() if m == model and split_of[i] == split]
        for kind in ("media", "describe"):  # each kind of the file has a rate in every unit, 0 where it is absent
            assert rates[(model, split, kind)] == pytest.approx(kinds.count(kind) / len(kinds))
        assert rates[(model, split, "")] == pytest.approx(sum(k is not None for k in kinds) / len(kinds))
    assert {key for _, _, key in rates} == {"", "media", "describe"}


def run_and_check(config, video: str, audio: str):
    """Run ``config``; every row of ``predictions.parquet`` has the kind ``_expected_kinds`` gives it."""
    from omnieval.run.pipeline import run_evaluation

    result = run_evaluation(config, progress=False)
    df = pl.read_parquet(result.predictions_path)
    assert df.schema["error_kind"] == pl.Utf8
    want = _expected_kinds(config, video, audio)
    got = {(r["model"], r["instance_id"]): r["error_kind"] for r in df.to_dicts()}
    assert got == want
    assert df.filter(pl.col("error_kind").is_null())["error"].null_count() == df.filter(
        pl.col("error_kind").is_null()).height
    return result


@pytest.mark.slow
def test_a_run_resumed_from_parts_written_without_error_kind(ray_session, broken_bench, tmp_path):
    """An older omnieval's parts (no ``error_kind`` column; half the run, errored rows included) are resumed: the
    clean rows are kept, the rest answered, and ``predictions.parquet`` has the column, every row with its kind."""
    bench, video, audio = broken_bench
    config = _config(bench, tmp_path / "run", [SIM])
    run_and_check(config, video, audio)
    parts = tmp_path / "run" / "parts" / "sim"
    files = sorted(parts.glob("part-*.parquet"))
    every = pl.concat([pl.read_parquet(f) for f in files])
    ids = sorted(every["instance_id"].unique())
    old = every.filter(pl.col("instance_id").is_in(ids[: len(ids) // 2])).drop("error_kind")
    assert old["error"].null_count() < old.height  # errored rows among them
    for f in files:
        f.unlink()
    old.write_parquet(parts / "part-000000-older.parquet")
    (tmp_path / "run" / "predictions.parquet").unlink()
    result = run_and_check(config, video, audio)
    kept = old["error"].null_count()
    assert result.n_skipped == kept and result.n_rows == len(ids) - kept
