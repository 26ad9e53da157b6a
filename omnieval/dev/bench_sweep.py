"""``omnieval bench sweep``: a sweep of many models side by side against the one-model-at-a-time schedule, measured
in the same bench on the same cluster.

Set-up: a local multi-node Ray cluster (``ray.cluster_utils.Cluster``: a head with no GPU for the driver-side stages
and decodes, and worker nodes with logical GPUs, as tests/test_multinode.py starts one), joined by this process as
its driver; a synthetic dissonance benchmark; ``models`` simulated models, each of ``replicas`` replicas of one GPU,
each replica paying ``load_s`` seconds when it is built (a model load) and ``batch_s`` seconds per batch (a GPU's
forward pass). The same sweep then runs twice, each into a fresh output: ``max_concurrent_models: 1`` (the
sequential schedule, today's order) and ``max_concurrent_models: models`` (side by side).

Measured, for each schedule:

* wall time: ``SweepRunner.run`` from its call to its return (checking the sweep, every pass, every run's
  metrics).
* GPU occupancy: GPU-seconds held by engine replicas / (cluster GPUs x wall time). A replica holds its GPU from the
  start of its actor to its end, load included: the GPUs a real model holds while it loads are taken too. Read
  from Ray's actor table (``StartTime`` and ``EndTime`` of each ``ModelStage`` actor the sweep started); Ray's
  ``StartTime`` is when the actor's constructor has returned (measured here: a replica with ``load_s`` 1 and 0.8 s
  of batches showed about 1 s between the two), so each replica's ``load_s``, slept in its constructor, is added.
* decodes against distinct media: the sum over the sweep's runs of ``run.json``'s ``counts.decodes``, against the
  media files in the benchmark's ``media/`` folder (every run of this sweep shows each of them). A sweep's runs
  share its decoded-media store (``<output>/media``), so each schedule should decode each file once, whatever the
  number of models; and the side-by-side sweep run again with one model's option changed (its run is new, the
  others complete) should decode none (every file read from the store).
* a store read against a decode of one of the benchmark's clips (median of a few, at the sweep's decode settings).

With ``models`` models of ``replicas`` GPUs on a cluster of ``nodes`` x ``gpus_per_node`` GPUs, the sequential
schedule can occupy at most replicas / GPUs of the cluster (2 of 8: 0.25), whatever the pipeline does."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

FULL = {"models": 8, "replicas": 2, "nodes": 2, "gpus_per_node": 4, "anchors": 8, "questions": 2,
        "load_s": 10.0, "batch_s": 5.0, "batch_size": 8}
QUICK = {"models": 3, "replicas": 1, "nodes": 2, "gpus_per_node": 2, "anchors": 2, "questions": 1,
         "load_s": 1.0, "batch_s": 0.2, "batch_size": 8}
TARGETS = {"occupancy": 0.85, "speedup": 3.0}
ENGINE_ACTOR = "ModelStage"


def bench_sweep(quick: bool = False, workdir: str | None = None) -> int:
    """Start the cluster, run both schedules, print the table; ``quick`` shrinks it (a smoke test of the bench)."""
    size = QUICK if quick else FULL
    tmp = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="omnieval-bench-sweep-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        with _cluster(size) as address:
            figures = _measure(size, tmp, address)
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    _print_table(size, figures, quick)
    return 0


class _cluster:
    """A head (4 CPUs, no GPU) and ``nodes`` workers (``gpus_per_node`` logical GPUs, 2 CPUs per GPU), its own Ray
    temp dir (short: Ray's socket paths live under it); this process is its driver until the block ends."""

    def __init__(self, size: dict):
        self.size = size

    def __enter__(self) -> str:
        import ray
        from ray.cluster_utils import Cluster

        if ray.is_initialized():
            ray.shutdown()
        self.temp = tempfile.mkdtemp(prefix="omb", dir="/tmp")
        self.saved = os.environ.get("RAY_TMPDIR")
        os.environ["RAY_TMPDIR"] = self.temp
        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 0,
                                                                     "include_dashboard": False})
        for _ in range(self.size["nodes"]):
            gpus = self.size["gpus_per_node"]
            self.cluster.add_node(num_cpus=2 * gpus, num_gpus=gpus)
        self.cluster.wait_for_nodes()
        ray.init(address=self.cluster.address, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        return self.cluster.address

    def __exit__(self, *exc) -> None:
        import ray

        ray.shutdown()
        for node in list(self.cluster.worker_nodes):
            self.cluster.remove_node(node, allow_graceful=False)
        if self.cluster.head_node is not None:
            self.cluster.remove_node(self.cluster.head_node, allow_graceful=False)
        shutil.rmtree(self.temp, ignore_errors=True)
        if self.saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = self.saved


def _sweep_data(size: dict, bench: Path, output: Path, max_concurrent: int) -> dict:
    models = [{"name": f"model-{i}", "engine": "simulated", "replicas": size["replicas"], "num_gpus": 1,
               "num_cpus": 1, "batch_size": size["batch_size"],
               "options": {"seed": i, "load_s": size["load_s"], "batch_s": size["batch_s"]}}
              for i in range(size["models"])]
    return {"name": "bench-sweep", "output": str(output), "prompts": ["zs"],
            "protocols": [{"protocol": "dissonance", "benchmark": str(bench)}], "models": models,
            "decode": {"num_frames": 4, "max_side": 96}, "metrics": {"resamples": 50},
            "max_concurrent_models": max_concurrent, "progress_interval_s": 600, "release_timeout_s": 120}


def _measure(size: dict, tmp: Path, address: str) -> dict:
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    bench = tmp / "bench"
    if not (bench / "items.jsonl").exists():
        make_dissonance_benchmark(bench, seed=0, n_anchors=size["anchors"], n_questions=size["questions"],
                                  overwrite=True)
    figures = {}
    for schedule, limit in (("sequential", 1), ("side_by_side", size["models"])):
        output = tmp / schedule
        shutil.rmtree(output, ignore_errors=True)
        figures[schedule] = _one_sweep(_sweep_data(size, bench, output, limit), address)
    changed = _sweep_data(size, bench, tmp / "side_by_side", size["models"])
    changed["models"][0]["options"]["seed"] = 1000  # one model's option changed: a new run, the others complete
    figures["rerun"] = _one_sweep(changed, address)
    figures["distinct_media"] = _distinct_media(bench)
    figures["decode_ms"], figures["read_ms"] = _read_against_decode(bench, changed["decode"])
    figures["instances"] = sum(1 for _ in open(bench / "items.jsonl")) * 8
    return figures


def _one_sweep(data: dict, address: str) -> dict:
    import ray

    from omnieval.sweep import SweepRunner, parse_sweep_config

    runner = SweepRunner(parse_sweep_config(data), address, log=lambda m: None)
    before = set(_engine_actors())
    start_wall = time.time()
    t0 = time.monotonic()
    result = runner.run()
    wall = time.monotonic() - t0
    failed = [r.key for r in result.runs if r.status not in ("done", "skipped")]
    if failed:
        raise RuntimeError(f"bench sweep: runs failed: {failed}")
    deadline = time.monotonic() + 60  # the last pool's actors end a moment after its pass returns
    while time.monotonic() < deadline:
        actors = {k: a for k, a in _engine_actors().items() if k not in before}
        if all(a["EndTime"] for a in actors.values()):
            break
        time.sleep(0.5)
    load_s = data["models"][0]["options"]["load_s"]
    held = sum((min(a["EndTime"] / 1000, start_wall + wall) - a["StartTime"] / 1000 + load_s) * _gpus(a)
               for a in actors.values())
    gpus = float(ray.cluster_resources().get("GPU", 0.0))
    ran = [json.loads((Path(r.output) / "run.json").read_text())["counts"] for r in result.runs if r.status == "done"]
    return {"wall_s": wall, "gpu_s": held, "gpus": gpus, "occupancy": held / (gpus * wall),
            "decodes": sum(c["decodes"] for c in ran), "hits": sum(c["decoded_store_hits"] for c in ran),
            "replicas": len(actors), "runs": len(ran)}


def _engine_actors() -> dict[str, dict]:
    import ray._private.state as state

    return {aid: a for aid, a in state.actors().items() if ENGINE_ACTOR in a["ActorClassName"]}


def _gpus(actor: dict) -> float:
    return float((actor.get("RequiredResources") or {}).get("GPU", 1.0))


def _distinct_media(bench: Path) -> int:
    """The benchmark's media files (its ``media/`` folder): every run of the sweep shows each of them."""
    return sum(1 for p in (bench / "media").rglob("*") if p.is_file())


def _read_against_decode(bench: Path, decode: dict, repeats: int = 5) -> tuple[float, float]:
    """Milliseconds (medians) to decode one clip of the benchmark and to read it back from a decoded-media store."""
    import statistics

    from omnieval.media.decode import decode_media
    from omnieval.media.decoded import content_hash
    from omnieval.media.decoded_store import DecodedStore

    clip = sorted((bench / "media").rglob("*.mp4"))[0]
    params = {"num_frames": decode["num_frames"], "max_side": decode["max_side"]}
    key = content_hash(clip, modality="video", **params)
    with tempfile.TemporaryDirectory() as folder:
        store = DecodedStore(folder)
        decode_s, read_s = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            media = decode_media(clip, "video", **params)
            decode_s.append(time.perf_counter() - t0)
        store.write(key, media)
        for _ in range(repeats):
            t0 = time.perf_counter()
            found = store.read(key, str(clip))
            read_s.append(time.perf_counter() - t0)
        assert found.status == "hit"
    return 1000 * statistics.median(decode_s), 1000 * statistics.median(read_s)


def _print_table(size: dict, f: dict, quick: bool) -> None:
    seq, side, rerun = f["sequential"], f["side_by_side"], f["rerun"]
    gpus = int(side["gpus"])
    print(f"omnieval bench sweep{' --quick' if quick else ''}: {size['models']} simulated models x "
          f"{size['replicas']} replicas of 1 GPU on {size['nodes']} nodes x {size['gpus_per_node']} logical GPUs "
          f"({gpus} GPUs), load_s {size['load_s']:g}, batch_s {size['batch_s']:g}, batch_size {size['batch_size']}, "
          f"{f['instances']} instances per run, {os.cpu_count()} cores")
    rows = [("wall time (s)", f"{side['wall_s']:.1f}", f"{seq['wall_s']:.1f}",
             f"{seq['wall_s'] / side['wall_s']:.2f}x", f">= {TARGETS['speedup']:g}x shorter"),
            ("GPU occupancy", f"{side['occupancy']:.3f}", f"{seq['occupancy']:.3f}",
             f"{side['occupancy'] / seq['occupancy']:.2f}x", f">= {TARGETS['occupancy']:g}"),
            ("GPU-seconds held by replicas", f"{side['gpu_s']:.1f}", f"{seq['gpu_s']:.1f}",
             f"{side['gpu_s'] / seq['gpu_s']:.2f}x", ""),
            ("engine replicas started", str(side["replicas"]), str(seq["replicas"]), "", ""),
            ("decodes (distinct media: " + str(f["distinct_media"]) + ")", str(side["decodes"]),
             str(seq["decodes"]), "", "= distinct media"),
            ("decoded-media store hits", str(side["hits"]), str(seq["hits"]), "", ""),
            (f"decodes, rerun with one model changed ({rerun['runs']} run)", str(rerun["decodes"]), "", "", "0")]
    width = max(len(r[0]) for r in rows)
    print(f"{'measurement':<{width}}  {'side by side':>12}  {'sequential':>12}  {'ratio':>8}  target")
    for what, ours, base, ratio, target in rows:
        print(f"{what:<{width}}  {ours:>12}  {base:>12}  {ratio:>8}  {target}")
    print(f"one clip of the benchmark at the sweep's decode settings: decode {f['decode_ms']:.2f} ms, decoded-media "
          f"store read {f['read_ms']:.2f} ms ({f['decode_ms'] / f['read_ms']:.0f}x shorter)")
    verdicts = [("occupancy side by side", side["occupancy"] >= TARGETS["occupancy"]),
                ("wall time shorter", seq["wall_s"] / side["wall_s"] >= TARGETS["speedup"]),
                ("decodes = distinct media, side by side", side["decodes"] == f["distinct_media"]),
                ("decodes = distinct media, one at a time", seq["decodes"] == f["distinct_media"]),
                ("no decode on a rerun with one model changed", rerun["decodes"] == 0 and rerun["runs"] == 1)]
    print("verdicts" + (" (quick: sizes too small for the targets)" if quick else "") + ":")
    for what, met in verdicts:
        print(f"  {'met' if met else 'MISSED'}: {what}")
