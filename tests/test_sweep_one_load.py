"""A sweep loads each model once: all of a model's runs (protocol entries x prompt styles) go through one engine
pool (``pipeline.evaluate_runs``), and every run still writes what ``run_evaluation`` writes for it alone, resumes
on its own and is skipped when complete. Model loads are counted from Ray's actor table (one ``ModelStage`` actor
per replica per engine pool), on a local Ray with simulated models.

The second protocol entry's benchmark is a copy of the first with one video replaced by bytes that do not decode:
both benchmarks name that file by the same relative path, so a media lookup that mixed the two runs of a pass would
show up as decode errors in the wrong run's predictions."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import assert_same_predictions

from omnieval.run.pipeline import run_evaluation
from omnieval.sweep import SweepRunner, parse_sweep_config

pytestmark = pytest.mark.slow

MODELS = ("sim-a", "sim-b")
ENTRIES = ("dissonance", "dis-2")
PROMPTS = ("zs", "cot")


def _engine_actors() -> set[str]:
    """Ids of every engine actor (``MapWorker(MapBatches(ModelStage))``) the session's Ray has started so far."""
    import ray._private.state as state

    return {aid for aid, actor in state.actors().items() if "ModelStage" in actor["ActorClassName"]}


@pytest.fixture(scope="module")
def benches(small_bench, tmp_path_factory):
    broken = tmp_path_factory.mktemp("broken") / "b"
    shutil.copytree(small_bench, broken)
    first = json.loads((broken / "items.jsonl").read_text().splitlines()[0])
    (broken / first["media"]["video"]).write_bytes(b"not a video")
    return small_bench, broken


def _sweep_data(benches, output) -> dict:
    a, b = benches
    return {"name": "one-load", "output": str(output), "prompts": list(PROMPTS),
            "protocols": [{"protocol": "dissonance", "benchmark": str(a)},
                          {"protocol": "dissonance", "benchmark": str(b), "name": "dis-2"}],
            "models": [{"name": "sim-a", "engine": "simulated", "options": {"seed": 1}},
                       {"name": "sim-b", "engine": "simulated", "options": {"seed": 2, "reliance": {"text": 0.9}}}],
            "decode": {"num_frames": 4, "max_side": 96, "media_check": "exists"}, "metrics": {"resamples": 20},
            "retry_errors": False, "max_error_rate": 1.0, "progress_interval_s": 0.5}


@dataclass
class Swept:
    result: object
    passes: list[list[tuple]]  # per evaluate_runs call: (run name, rows scored, rows resumed) or (run name, error)
    actors: set[str]  # engine actors started during the sweep
    seconds: float


def _sweep(data: dict, *, per_run: bool = False) -> Swept:
    """Run a sweep, recording each pass and the engine actors it started. ``per_run``: every run by its own
    ``run_evaluation`` (what each run writes alone, one engine pool per run)."""
    runner = SweepRunner(parse_sweep_config(data), log=lambda m: None)
    passes: list[list[tuple]] = []
    inner = runner.evaluate_runs

    def evaluate_runs(configs, address=None, progress=True):
        results = ([run_evaluation(c, address, progress=progress) for c in configs] if per_run
                   else inner(configs, address, progress=progress))
        passes.append([(c.name, type(r).__name__) if isinstance(r, Exception) else (c.name, r.n_rows, r.n_skipped)
                       for c, r in zip(configs, results, strict=True)])
        return results

    runner.evaluate_runs = evaluate_runs
    before = _engine_actors()
    start = time.perf_counter()
    result = runner.run()
    seconds = time.perf_counter() - start
    return Swept(result, passes, _engine_actors() - before, seconds)


@pytest.fixture(scope="module")
def swept(ray_session, benches, tmp_path_factory):
    """The same 2 models x 2 protocol entries x 2 prompts sweep, shared (one pass per model) and run by run."""
    root = tmp_path_factory.mktemp("one-load")
    shared = _sweep(_sweep_data(benches, root / "shared"))
    alone = _sweep(_sweep_data(benches, root / "alone"), per_run=True)
    print(f"\n2 models x 2 protocols x 2 prompts, {sum(r.expected for r in shared.result.runs)} predictions: "
          f"one pass per model {shared.seconds:.1f} s ({len(shared.actors)} engine actors), "
          f"one run at a time {alone.seconds:.1f} s ({len(alone.actors)} engine actors)")
    return root, shared, alone


def _run_dir(root: Path, entry: str, model: str, prompt: str) -> Path:
    return root / "runs" / entry / model / prompt


def _n(bench) -> int:
    return sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8


def test_each_model_is_loaded_once_for_all_its_runs(swept, benches):
    _, shared, alone = swept
    n = _n(benches[0])
    assert [r.status for r in shared.result.runs] == ["done"] * 8
    assert len(alone.actors) == 8  # run by run: one engine pool per run
    assert len(shared.actors) == 2  # one per model
    assert [sorted(name for name, *_ in p) for p in shared.passes] == [
        sorted(f"one-load/{e}/{m}/{p}" for e in ENTRIES for p in PROMPTS) for m in MODELS]
    assert all(scored == n and resumed == 0 for p in shared.passes for _, scored, resumed in p)


def test_every_run_writes_what_it_writes_alone(swept, benches):
    root, shared, alone = swept
    n = _n(benches[0])
    for entry in ENTRIES:
        for model in MODELS:
            for prompt in PROMPTS:
                got_dir, want_dir = (_run_dir(root / w, entry, model, prompt) for w in ("shared", "alone"))
                got = pl.read_parquet(got_dir / "predictions.parquet").sort("instance_id")
                want = pl.read_parquet(want_dir / "predictions.parquet").sort("instance_id")
                assert got.height == n and got["instance_id"].n_unique() == n
                assert_same_predictions(got, want)
                errors = got["error"].drop_nulls()
                # the broken video fails only the second entry's instances that show it, as a decode error
                assert (errors.len() > 0) == (entry == "dis-2") and errors.str.contains("media decode failed").all()
                counts = [json.loads((d / "run.json").read_text())["counts"] for d in (got_dir, want_dir)]
                # each run's media are decoded or read from its sweep's decoded-media store, which of the two
                # depends on the order the runs went in; their sum does not
                looked_up = [c.pop("decodes") + c.pop("decoded_store_hits") for c in counts]
                assert looked_up[0] == looked_up[1] > 0
                assert counts[0] == counts[1]  # instances, predictions, errors, distinct media, rejected entries
                metrics = [pl.read_parquet(d / "metrics" / "metrics.parquet") for d in (got_dir, want_dir)]
                assert metrics[0].equals(metrics[1])


def test_a_shared_pass_resumes_each_run_from_its_own_parts(swept, benches):
    root, shared, alone = swept
    out = root / "shared"
    n = _n(benches[0])
    half = _run_dir(out, "dissonance", "sim-a", "cot")  # half its rows written, not consolidated
    gone = _run_dir(out, "dis-2", "sim-a", "zs")  # nothing written
    for name in ("predictions.parquet", "run.json"):
        (half / name).unlink()
    parts = sorted((half / "parts" / "sim-a").glob("part-*.parquet"))
    written = pa.concat_tables([pq.read_table(p) for p in parts]).sort_by("instance_id")
    for p in parts:
        p.unlink()
    pq.write_table(written.slice(0, n // 2), half / "parts" / "sim-a" / "part-000000-kept.parquet")
    shutil.rmtree(gone)
    # each benchmark's pooled result (combined/) is made again from the redone runs' new predictions files
    untouched = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.parent != out
                 and half not in p.parents and gone not in p.parents and (out / "combined") not in p.parents}

    again = _sweep(_sweep_data(benches, out))
    statuses = {(r.benchmark, r.model, r.prompt): r.status for r in again.result.runs}
    assert statuses == {(e, m, p): "done" if (e, m, p) in {("dissonance", "sim-a", "cot"), ("dis-2", "sim-a", "zs")}
                        else "skipped" for e in ENTRIES for m in MODELS for p in PROMPTS}
    assert again.passes == [[("one-load/dissonance/sim-a/cot", n - n // 2, n // 2),
                             ("one-load/dis-2/sim-a/zs", n, 0)]]
    assert len(again.actors) == 1  # one pool for both runs; complete runs and the other model start none
    assert {p: p.stat().st_mtime_ns for p in untouched} == untouched
    for run in (half, gone):
        parts = pl.concat([pl.read_parquet(p) for p in (run / "parts" / "sim-a").glob("part-*.parquet")])
        assert parts.height == n and parts["instance_id"].n_unique() == n  # no row scored twice
        entry, _, prompt = run.relative_to(out / "runs").parts
        assert_same_predictions(pl.read_parquet(run / "predictions.parquet").sort("instance_id"),
                                pl.read_parquet(_run_dir(root / "alone", entry, "sim-a", prompt)
                                                / "predictions.parquet").sort("instance_id"))


def test_a_run_that_fails_fails_alone_and_is_retried_alone(ray_session, benches, tmp_path):
    """A run whose ``predictions.parquet`` cannot be written (a folder stands in its place) fails when it is
    finished; the model's other run of the same pass is done, and the failed one is tried again alone, resuming
    every row it wrote, until ``max_attempts``."""
    data = _sweep_data(benches, tmp_path / "out") | {"max_attempts": 2}
    data["protocols"], data["models"] = data["protocols"][:1], data["models"][:1]
    blocked = _run_dir(tmp_path / "out", "dissonance", "sim-a", "zs")
    (blocked / "predictions.parquet").mkdir(parents=True)
    n = _n(benches[0])

    swept = _sweep(data)
    by_prompt = {r.prompt: r for r in swept.result.runs}
    assert by_prompt["cot"].status == "done" and by_prompt["cot"].attempts == 1
    assert by_prompt["zs"].status == "failed" and by_prompt["zs"].attempts == 2
    kind = by_prompt["zs"].failure.split(":")[0]
    assert kind in ("OSError", "IsADirectoryError") and not swept.result.ok
    assert swept.passes == [[("one-load/dissonance/sim-a/zs", kind), ("one-load/dissonance/sim-a/cot", n, 0)],
                            [("one-load/dissonance/sim-a/zs", kind)]]
    assert len(swept.actors) == 1  # the retry had no row left to score: no engine pool
    parts = pl.concat([pl.read_parquet(p) for p in (blocked / "parts" / "sim-a").glob("part-*.parquet")])
    assert parts.height == n and parts["instance_id"].n_unique() == n
    marker = json.loads((blocked / "sweep-run.json").read_text())
    assert marker["state"] == "failed" and marker["attempts"] == 2
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["totals"]["done"] == 1 and summary["totals"]["failed"] == 1
