"""Runs you can trust: no result reused under another config, lost to a name clash or a second writer, passed off
as an answer, or left hanging; bad options refused before model work; nothing touched outside the output.

Each test states what must be true (row counts by instance id, exit codes, file contents, choices computed by the
engine class itself outside the pipeline), not what the code happened to produce.
"""

from __future__ import annotations

import hashlib
import importlib.util
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from omnieval.config import parse_run_config
from omnieval.core.schema import InputError
from omnieval.run.pipeline import run_evaluation
from omnieval.run.plan import make_plan

SIM = {"name": "sim", "engine": "simulated", "options": {"seed": 1, "reliance": {"video": 0.8, "audio": 0.6,
                                                                                 "text": 0.9}}}


def _data(bench, out, models, **kw) -> dict:
    return {"benchmark": str(bench), "output": str(out), "models": models, "prompts": kw.pop("prompts", ["zs"]),
            "decode": {"num_frames": 4, "max_side": 96, **kw.pop("decode", {})}, **kw}


def _config(bench, out, models, **kw):
    return parse_run_config(_data(bench, out, models, **kw))


def _expected_choices(config, model: dict) -> dict[str, str | None]:
    """instance_id -> the choice the simulated engine makes for it, asked directly (no pipeline, no store): the
    simulated engine reads no media and keys every draw on (seed, model name, instance id)."""
    from omnieval.engines.base import EngineRequest
    from omnieval.engines.simulated import SimulatedEngine

    plan = make_plan(config)
    engine = SimulatedEngine(model["name"], **model["options"])
    results = engine.score([EngineRequest(inst, {}, "zs") for inst in plan.load_instances()])
    return {inst.instance_id: res.choice for inst, res in zip(plan.load_instances(), results, strict=True)}


def _n_instances(bench) -> int:
    return sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8


# ---------------------------------------------------------------------------------------------------------------
# 1. A changed config never reuses old predictions
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def finished_run(ray_session, small_bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("trust") / "run"
    result = run_evaluation(_config(small_bench, out, [SIM]), progress=False)
    return out, result


def test_rerun_with_the_same_config_resumes_and_scores_nothing(finished_run, small_bench):
    out, first = finished_run
    assert first.ok and first.n_rows == _n_instances(small_bench)
    again = run_evaluation(_config(small_bench, out, [SIM]), progress=False)
    assert again.n_rows == 0 and again.n_skipped == _n_instances(small_bench)


@pytest.mark.parametrize("change, what", [
    (lambda d: d["models"][0]["options"]["reliance"].update(video=0.6), "reliance.video: 0.8 -> 0.6"),
    (lambda d: d.update(seed=7), "seed: 0 -> 7"),
    (lambda d: d["decode"].update(num_frames=2), "decode.num_frames: 4 -> 2"),
])
def test_rerun_with_a_changed_config_is_refused_and_keeps_the_old_outputs(finished_run, small_bench, change, what):
    out, _ = finished_run
    before = {p: p.read_bytes() for p in (out / "predictions.parquet", out / "run.json")}
    data = _data(small_bench, out, [yaml.safe_load(yaml.safe_dump(SIM))])
    change(data)
    with pytest.raises(InputError, match="another config") as info:
        run_evaluation(parse_run_config(data), progress=False)
    assert what in str(info.value) and "--overwrite" in str(info.value) and "parts/sim" in str(info.value)
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("change", [
    lambda d: d.update(protocol="dissonance"),  # the benchmark's own protocol, named
    lambda d: d["decode"].update(media_check="exists"),  # a pre-flight setting, not a row's
])
def test_rerun_that_only_spells_out_the_same_config_resumes(finished_run, small_bench, change):
    out, _ = finished_run
    data = _data(small_bench, out, [yaml.safe_load(yaml.safe_dump(SIM))])
    change(data)
    again = run_evaluation(parse_run_config(data), progress=False)
    assert again.n_rows == 0 and again.n_skipped == _n_instances(small_bench)


def test_a_spectrum_option_written_at_its_default_resumes_and_a_changed_one_is_refused(ray_session, tmp_path):
    from omnieval.cli import main

    assert main(["datasets", "synth", "--protocol", "spectrum", "--items", "8", "--out", str(tmp_path / "b")]) == 0
    sim = {"name": "sim", "engine": "simulated", "options": {"seed": 1}}
    out = tmp_path / "run"
    first = run_evaluation(_config(tmp_path / "b", out, [sim]), progress=False)
    again = run_evaluation(_config(tmp_path / "b", out, [sim], protocol_options={"text_unit": "question"}),
                           progress=False)  # the default, written out
    assert first.n_rows > 0 and again.n_rows == 0 and again.n_skipped == first.n_rows
    with pytest.raises(InputError, match="text_unit: added"):
        run_evaluation(_config(tmp_path / "b", out, [sim], protocol_options={"text_unit": "question+options"}),
                       progress=False)


def test_changed_benchmark_content_is_refused(finished_run, small_bench, tmp_path):
    out, _ = finished_run
    bench = tmp_path / "bench"
    shutil.copytree(small_bench, bench)
    audio = sorted((bench / "media").rglob("*.wav"))[0]
    data = bytearray(audio.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 200] = bytes(200)  # a few samples silenced: still a valid clip, other content
    audio.write_bytes(bytes(data))
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    with pytest.raises(InputError, match="benchmark: its items, expansion or media content changed"):
        run_evaluation(_config(bench, copy, [SIM]), progress=False)


def test_overwrite_recomputes_the_stale_model_and_keeps_the_others(ray_session, small_bench, tmp_path):
    other = {"name": "other", "engine": "simulated", "options": {"seed": 3}}
    out = tmp_path / "run"
    run_evaluation(_config(small_bench, out, [SIM, other]), progress=False)
    other_parts = sorted((out / "parts" / "other").glob("part-*"))
    changed = yaml.safe_load(yaml.safe_dump(SIM))
    changed["options"]["reliance"]["video"] = 0.1
    result = run_evaluation(_config(small_bench, out, [changed, other]), progress=False, overwrite=True)
    assert result.n_rows == _n_instances(small_bench)  # only sim was recomputed
    assert sorted((out / "parts" / "other").glob("part-*")) == other_parts
    table = pl.read_parquet(out / "predictions.parquet").filter(pl.col("model") == "sim")
    want = _expected_choices(_config(small_bench, out, [changed]), changed)
    assert dict(zip(table["instance_id"], table["choice"], strict=True)) == want


# ---------------------------------------------------------------------------------------------------------------
# 2. Model names map to folders injectively; names that cannot be folders are refused
# ---------------------------------------------------------------------------------------------------------------

def test_folder_names_are_injective_single_path_parts():
    from omnieval.core.names import folder_name

    names = ["org/model", "org__model", "org model", "org:model", "a/../../x", "model-deadbeef", "model",
             ".hidden", "_hidden", "org__model-" + hashlib.sha256(b"org/model").hexdigest()[:8], "Ünï/cödé"]
    folders = [folder_name(n) for n in names]
    assert len(set(folders)) == len(names)
    for folder in folders:
        assert "/" not in folder and folder not in (".", "..") and not folder.startswith(".")
    assert folder_name("model") == "model" and folder_name("org__model") == "org__model"


@pytest.mark.parametrize("name", ["..", ".", "", "a\x00b", "x" * 201])
def test_names_that_cannot_be_folders_are_refused_naming_the_field(small_bench, tmp_path, name):
    with pytest.raises(InputError) as info:
        _config(small_bench, tmp_path / "o", [{"name": name, "engine": "simulated"}])
    assert info.value.field == "models[0].name"


def test_models_whose_names_sanitise_alike_keep_their_own_rows(ray_session, small_bench, tmp_path):
    a = {"name": "org/model", "engine": "simulated", "options": {"seed": 1, "reliance": {"text": 0.9}}}
    b = {"name": "org__model", "engine": "simulated", "options": {"seed": 1, "reliance": {"video": 0.9}}}
    config = _config(small_bench, tmp_path / "run", [a, b])
    result = run_evaluation(config, progress=False)
    table = pl.read_parquet(result.predictions_path)
    n = _n_instances(small_bench)
    for model in (a, b):
        rows = table.filter(pl.col("model") == model["name"])
        assert rows.height == n and rows["instance_id"].n_unique() == n
        assert dict(zip(rows["instance_id"], rows["choice"], strict=True)) == _expected_choices(config, model)
    assert len(list((tmp_path / "run" / "parts").iterdir())) == 2


# ---------------------------------------------------------------------------------------------------------------
# 3. One writer per output
# ---------------------------------------------------------------------------------------------------------------

def _append_many(root: str, start: int, count: int) -> None:
    from omnieval.core.run_outputs import RunOutputs

    store = RunOutputs(root)
    for i in range(start, start + count):
        store.append_part("m", [{"model": "m", "prompt": "zs", "protocol": "dissonance", "split": "s",
                                 "item_id": f"i{i}", "instance_id": f"i{i}|C000", "condition": "C000",
                                 "target": "A", "choice": "A"}])


def test_two_writers_racing_on_one_parts_folder_lose_no_row(tmp_path):
    from omnieval.core.run_outputs import RunOutputs

    root = str(tmp_path / "run")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(root, k * 200, 200)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    ids = RunOutputs(root).read_parts("m")["instance_id"].to_pylist()
    assert sorted(ids) == sorted(f"i{i}|C000" for i in range(400))


def _cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "omnieval.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_second_run_on_a_held_output_is_refused_and_a_killed_holder_is_taken_over(small_bench, tmp_path):
    from omnieval.run.lease import LEASE_FILE

    slow = yaml.safe_load(yaml.safe_dump(SIM))
    slow["options"]["delay_ms"] = 10_000.0  # 10 minutes at least: the kill comes long before the end
    slow["batch_size"] = 1
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(_data(small_bench, tmp_path / "out", [slow], ray={"num_cpus": 4})))
    fast = tmp_path / "fast.yaml"  # the same identity: delay_ms and batch sizes do not change a prediction
    fast.write_text(yaml.safe_dump(_data(small_bench, tmp_path / "out", [SIM], ray={"num_cpus": 4})))
    first = _cli("run", str(cfg))
    try:
        _wait_for(lambda: (tmp_path / "out" / LEASE_FILE).exists(), 120, "the first run's lease")
        second = _cli("run", str(cfg))
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2, err
        assert "another omnieval process is writing here" in err and f"pid {first.pid}" in err
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    assert (tmp_path / "out" / LEASE_FILE).exists()  # the killed run's lease is still there ...
    assert not (tmp_path / "out" / "predictions.parquet").exists()
    third = _cli("run", str(fast))  # ... and is taken over at once: its process is gone
    out, err = third.communicate(timeout=600)
    assert third.returncode == 0, err
    assert "taking over the lease" in err
    table = pl.read_parquet(tmp_path / "out" / "predictions.parquet")
    assert table.height == table["instance_id"].n_unique() == _n_instances(small_bench)
    assert not (tmp_path / "out" / LEASE_FILE).exists()


def test_lease_on_an_object_store_refuses_a_live_holder_takes_over_a_silent_one_and_stops_a_lost_one(tmp_path):
    import json

    import pyarrow.fs as pafs

    from omnieval.core.run_outputs import RunOutputs
    from omnieval.run.lease import LEASE_FILE, LeaseLost, OutputBusy, OutputLease

    fs = pafs._MockFileSystem()  # an in-memory pyarrow filesystem: the non-local (object store) code path
    fs.create_dir("bucket/run", recursive=True)

    def store(writer: str) -> RunOutputs:
        s = RunOutputs(str(tmp_path / "unused"), writer=writer)
        s.fs, s.root, s.uri = fs, "bucket/run", "mock://bucket/run"
        return s

    def write_record(record: dict) -> None:
        with fs.open_output_stream(f"bucket/run/{LEASE_FILE}") as f:
            f.write(json.dumps(record).encode())

    holder_store = store("aaaa")
    holder = OutputLease(holder_store, verify_s=0.01, heartbeat_s=0.05).acquire()
    holder_store.lease = holder
    with pytest.raises(OutputBusy, match="another omnieval process"):  # same host, live pid
        OutputLease(store("bbbb"), verify_s=0.01).acquire()
    # another writer takes the lease over (as after a heartbeat gap): the holder notices and writes nothing more
    write_record({"token": "cccc", "host": "elsewhere", "pid": 1, "heartbeat": time.time(), "acquired": 0})
    _wait_for(lambda: holder.lost, 5, "the holder to notice")
    with pytest.raises(LeaseLost):
        holder_store.write_json("run.json", {})
    holder.release()
    # a lease from another host whose heartbeat stopped 2 minutes ago is taken over, with a message
    write_record({"token": "dddd", "host": "elsewhere", "pid": 1, "heartbeat": time.time() - 120, "acquired": 0})
    said = []
    taker = OutputLease(store("eeee"), verify_s=0.01, ttl_s=60, log=said.append).acquire()
    assert "no heartbeat for 120 s" in said[0]
    with fs.open_input_stream(f"bucket/run/{LEASE_FILE}") as f:
        assert json.loads(f.read())["token"] == "eeee"
    taker.release()


# ---------------------------------------------------------------------------------------------------------------
# 4. Errors are not answers: a run whose rows errored exits non-zero
# ---------------------------------------------------------------------------------------------------------------

def test_a_run_whose_rows_all_errored_exits_non_zero_and_says_why(ray_session, small_bench, tmp_path, capsys):
    from omnieval.cli import main

    bench = tmp_path / "bench"
    shutil.copytree(small_bench, bench)
    for media in (bench / "media").rglob("*.mp4"):
        media.write_bytes(b"not a video: " + str(media).encode())  # no two alike: each anchor's media its own
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(_data(bench, tmp_path / "out", [SIM], decode={"media_check": "off"})))
    assert main(["run", str(cfg)]) == 1
    printed = capsys.readouterr().out
    n = _n_instances(small_bench)
    assert f"{n} of {n} rows ended in an error" in printed and "media decode failed" in printed
    table = pl.read_parquet(tmp_path / "out" / "predictions.parquet")
    assert table["error"].null_count() == 0 and table["choice"].null_count() == n
    allowed = tmp_path / "allowed.yaml"
    allowed.write_text(yaml.safe_dump(_data(bench, tmp_path / "out", [SIM], decode={"media_check": "off"},
                                            max_error_rate=1.0)))
    # allowed, every row may error; but then nothing was measured: said so, no follow-up commands, exit 1
    assert main(["run", str(allowed)]) == 1
    printed = capsys.readouterr().out
    assert f"FAILED: nothing was measured: none of the {n} rows is an answer ({n} ended in an error)" in printed
    assert "next:" not in printed and "metrics --out" not in printed and "error share" not in printed


# ---------------------------------------------------------------------------------------------------------------
# 5. Actors that cannot fit the cluster are refused instead of waiting forever
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model, field, message", [
    ({"replicas": 7}, "models[0].replicas", "need 8.25 CPU slots but the Ray cluster has 8"),
    ({"replicas": 2, "num_cpus": 4}, "models[0].replicas", "need 9.25 CPU slots"),
    ({"num_gpus": 1}, "models[0].num_gpus", "need 1 GPUs but the Ray cluster has 0"),
])
def test_actors_that_cannot_fit_the_cluster_are_refused_before_model_work(ray_session, small_bench, tmp_path,
                                                                        model, field, message):
    config = _config(small_bench, tmp_path / "out", [SIM | model])
    start = time.monotonic()
    with pytest.raises(InputError, match=message) as info:
        run_evaluation(config, progress=False)
    assert info.value.field == field and time.monotonic() - start < 60
    assert not list((tmp_path / "out").rglob("part-*"))


# ---------------------------------------------------------------------------------------------------------------
# 7. Bad options, model folders and outputs fail before any model work, naming the field
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, field", [
    ({"name": "b", "engine": "simulated", "options": {"relaince": {"video": 1.0}}}, "models[1].options.relaince"),
    ({"name": "b", "engine": "simulated", "options": {"reliance": {"video": 1.5}}}, "models[1].options.reliance.video"),
    ({"name": "b", "engine": "hf", "options": {}}, "models[1].options.path"),
    ({"name": "b", "engine": "hf", "options": {"path": "/no/such/model"}}, "models[1].options.path"),
    ({"name": "b", "engine": "hf", "options": {"path": "{tiny}", "dtype": "float8"}}, "models[1].options.dtype"),
    ({"name": "b", "engine": "vllm", "options": {"path": "Qwen/Qwen2.5-Omni-7B"}}, "models[1].options.path"),
])
def test_bad_engine_options_fail_before_any_model_work(small_bench, tmp_path, bad, field):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    if bad["options"].get("path") == "{tiny}":
        bad = bad | {"options": bad["options"] | {"path": str(folder)}}
    config = _config(small_bench, tmp_path / "out", [SIM, bad])
    with pytest.raises(InputError) as info:
        run_evaluation(config, progress=False)
    assert info.value.field == field
    assert not (tmp_path / "out").exists()  # refused before the output was even created


def test_hub_id_is_refused_with_a_hint(small_bench, tmp_path):
    config = _config(small_bench, tmp_path / "out", [{"name": "q", "engine": "vllm",
                                                      "options": {"path": "Qwen/Qwen2.5-Omni-7B"}}])
    with pytest.raises(InputError, match="looks like a hub id"):
        make_plan(config)


def test_unwritable_output_fails_before_model_work(small_bench, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot create the output folder") as info:
        run_evaluation(_config(small_bench, blocker / "out", [SIM]), progress=False)
    assert info.value.field == "output"


def test_a_corrupt_part_is_named_and_nothing_else_is_lost(finished_run, small_bench, tmp_path):
    from omnieval.cli import main

    out, _ = finished_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    part = sorted((copy / "parts" / "sim").glob("part-*.parquet"))[0]
    part.write_bytes(b"PAR1 this is not parquet")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(_data(small_bench, copy, [SIM])))
    with pytest.raises(InputError, match="not a readable Parquet file") as info:
        run_evaluation(_config(small_bench, copy, [SIM]), progress=False)
    assert info.value.file == str(part)
    assert main(["run", str(cfg)]) == 2
    assert pq.read_table(copy / "predictions.parquet").num_rows == _n_instances(small_bench)


def test_an_empty_benchmark_is_an_error(small_bench, tmp_path):
    bench = tmp_path / "bench"
    shutil.copytree(small_bench, bench)
    (bench / "items.jsonl").write_text("")
    with pytest.raises(InputError):
        make_plan(_config(bench, tmp_path / "out", [SIM]))


# ---------------------------------------------------------------------------------------------------------------
# 8. Nothing is touched outside the output
# ---------------------------------------------------------------------------------------------------------------

def test_sweep_names_that_are_paths_are_refused_or_stay_inside_the_output(small_bench, tmp_path):
    from omnieval.sweep import expand_runs, parse_sweep_config

    base = {"output": str(tmp_path / "sweep"), "protocols": [{"protocol": "dissonance",
                                                              "benchmark": str(small_bench)}],
            "models": [{"name": "m", "engine": "simulated"}]}
    for bad, field in ((dict(base, models=[{"name": "..", "engine": "simulated"}]), "models[0].name"),
                       (dict(base, protocols=[dict(base["protocols"][0], name="..")]), "protocols[0].name")):
        with pytest.raises(InputError) as info:
            parse_sweep_config(bad)
        assert info.value.field == field
    sweep = parse_sweep_config(dict(base, models=[{"name": "../../victim", "engine": "simulated"}]))
    for spec in expand_runs(sweep):
        inside = Path(spec.uri).resolve()
        assert (tmp_path / "sweep" / "runs").resolve() in inside.parents
        assert len(inside.relative_to((tmp_path / "sweep" / "runs").resolve()).parts) == 3


def test_the_store_never_deletes_outside_its_root(tmp_path):
    from omnieval.core.run_outputs import RunOutputs

    outside = tmp_path / "keep"
    outside.mkdir()
    store = RunOutputs(str(tmp_path / "run"))
    for rel in ("..", "../keep", "/etc", "a/../../keep", "."):
        with pytest.raises(ValueError):
            store.delete_folder(rel)
    assert outside.exists()


# ---------------------------------------------------------------------------------------------------------------
# 10. Remote code only when the config says so
# ---------------------------------------------------------------------------------------------------------------

def test_trust_remote_code_needs_allow_remote_code_and_is_logged(small_bench, tmp_path, capsys):
    from omnieval.run.pipeline import engine_models
    from omnieval.run.preflight import check_engines

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    model = {"name": "v", "engine": "vllm", "options": {"path": str(folder),
                                                        "engine_kwargs": {"trust_remote_code": True}}}
    refused = _config(small_bench, tmp_path / "out", [model])
    with pytest.raises(InputError, match="allow_remote_code: true") as info:
        check_engines(refused, engine_models(refused))
    assert info.value.field == "models[0].options.engine_kwargs.trust_remote_code"
    allowed = _config(small_bench, tmp_path / "out", [model], allow_remote_code=True)
    if importlib.util.find_spec("vllm") is None:  # allowed, then refused for want of vLLM (checked last)
        with pytest.raises(InputError, match="pip install 'omnieval\\[vllm\\]'") as info:
            check_engines(allowed, engine_models(allowed))
        assert info.value.field == "models[0].engine"
    else:
        check_engines(allowed, engine_models(allowed))
    assert "allow_remote_code: models[0] (v) may run code from" in capsys.readouterr().err
    assert allowed.model_dump()["allow_remote_code"] is True  # what run.json records as the config


def test_cli_lease_file_is_not_left_behind_after_a_run(finished_run):
    from omnieval.run.lease import LEASE_FILE

    out, _ = finished_run
    assert not (out / LEASE_FILE).exists()
    assert os.listdir(out)
