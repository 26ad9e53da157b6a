"""Sweeps: models x protocols (each with its benchmark) x prompt styles, one run each, one model load per model,
resumable.

    python jobs/sweep.py sweep.yaml                                    # embedded local Ray
    ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/sweep.py sweep.yaml

A sweep file (``yaml.safe_load``; every field validated, errors name the file and field)::

    name: nightly
    output: s3://bucket/omnieval/nightly   # or gs://..., or a local path (relative: to the sweep file)
    seed: 0
    prompts: [zs, cot]
    protocols:                             # a protocol with its benchmark; the same protocol may appear twice
      - protocol: dissonance               # with two benchmarks if each entry has its own ``name``
        benchmark: /data/omd-bench
      - protocol: crossmodal
        benchmark: /data/xmodbench
        options: {extra: [AV->T]}          # the runs' ``protocol_options``
    models:
      - name: qwen-omni-7b
        engine: vllm                       # hf and vllm need ``path`` (or ``options.path``)
        path: /models/Qwen2.5-Omni-7B
        tensor_parallel_size: 1            # > 1: vllm only; one replica then asks for that many GPUs
        replicas: 8
        num_gpus: 1
        batch_size: 16
    max_concurrent_models: 4               # models side by side when their replicas fit (default 1: one at a time)
    metrics: {resamples: 2000}             # also seed, permutations, cluster (as omnieval metrics), enabled

Before Ray starts, the whole sweep is checked: the config (pydantic), each model path (``check_model_paths``), and
each benchmark is loaded, expanded and media-checked once (``run.plan.make_plan``), so a typo fails in seconds
with no GPU work. The sweep is then expanded into runs, one per (model, protocol entry, prompt style), each an
ordinary ``RunConfig`` (``protocol``, ``benchmark``, ``protocol_options`` passed through) written into its own
folder, as ``pipeline.run_evaluation`` would write it alone::

    <output>/summary.json                               every run's status, counts, timings; sweep totals (with
                                                        the media its passes decoded and read from the store)
    <output>/metrics.parquet                            every run's metrics table, with a ``benchmark`` column
    <output>/combined/<benchmark>/                      the benchmark's runs pooled (``stats.compute``): paired
                                                        differences, ranks, tests and power across its models and
                                                        prompt styles, and ``combined.json`` (inputs, settings,
                                                        fingerprint: recomputed only when that changes)
    <output>/runs/<protocol entry>/<model>/<prompt>/    run.json, predictions.parquet, parts/, sweep-run.json
                                                        (this run's state and fingerprint), metrics/ (the files
                                                        ``omnieval metrics`` writes: ``stats.command``)
    <output>/media/                                     the decoded-media store every run of the sweep reads and
                                                        fills (``media.decoded_store``; ``decode.store`` names another),
                                                        so each media file is decoded once for the whole sweep

**Complete.** A run is complete when its ``sweep-run.json`` says ``complete`` with the current fingerprint,
``run.json`` and ``predictions.parquet`` exist, the predictions hold exactly one row per instance, the metrics are
there (when enabled, made with the current metrics settings: other settings recompute only the metrics), and (with
``retry_errors``) no prediction ended in an error. The fingerprint is a SHA-256 over what decides the
predictions: the run config without output, the decoded-media store, Ray settings and scaling fields (replicas,
batch sizes, GPUs and CPUs do not change predictions: docs/architecture.md, decision 1), plus the expanded instances and
the content hashes of their media, so editing a benchmark, a model option or the seed redoes exactly the affected
runs. Complete runs are skipped (a resubmitted finished sweep starts no Ray work at all); an interrupted run with
the same fingerprint resumes through the pipeline's part files; a run folder whose fingerprint differs (or that
has no ``sweep-run.json``) holds predictions of another config and is cleared first.

**Scheduling.** All of one model's incomplete runs (its protocols and prompt styles) go through one pass
(``pipeline.evaluate_runs``): one request task and one engine pool (a Ray Data actor pool) for all of them, so the
model is loaded once per replica, not once per run, while each run is still prepared, resumed, consolidated, marked
and measured on its own (a sweep's runs are multiple-choice runs without judges or describers: a sweep model with
``describe:`` or ``modes:`` is refused; run such a model with a run config). A pool holds its GPUs for as long as
its pass's dataset executes and is torn down when the pass ends. Its replicas (``replicas`` x ``num_gpus``) are
spread over the nodes by Ray Data's default ``SPREAD`` strategy (best effort: two replicas may share a node with two
free GPUs); a tensor-parallel vLLM model (``tensor_parallel_size: k``) asks for ``k`` GPUs per replica, which Ray
places on one node.

``max_concurrent_models`` (default 1) says how many models' passes run side by side:

* **1**: one model at a time, in the sweep's order; after a model's last run the sweep waits until the cluster's
  free GPUs are back to where they were before that model started (bounded by ``release_timeout_s``).
* **k > 1**: models are tried largest first (GPUs, then CPUs), and a model starts when its demand (``replicas`` x
  ``num_gpus`` GPUs, ``replicas`` x ``num_cpus`` CPUs plus its request and decode tasks: ``sweep.schedule``) fits what
  the cluster had free when the sweep started (at most what it has now) less what the running models hold, and
  fewer than ``k`` run; as soon as one's pass ends (its metrics are computed while the next runs) the next that
  fits starts. The books are the sweep's own, not
  Ray's free resources, which show a model's replicas only once its pool is up. Each model is still loaded once
  for all its runs, and every run's predictions are those of the one-at-a-time schedule (each pass is the same
  ``evaluate_runs`` call on the same runs; tests/test_sweep_side_by_side.py compares both). The books count GPUs
  cluster-wide: a model whose replicas need ``k`` GPUs on one node may wait in Ray's queue for a node to free up.

A pass decodes each distinct media file once for all its runs (the media cache is keyed by content) and keeps the
decoded media of all its benchmarks in the object store until it ends; passes side by side each keep their own.

**Fault tolerance.** Ray restarts a lost engine actor (Ray Data actor pools retry their tasks), and rows are only
written when a batch is complete, so a node lost mid-run loses no prediction and duplicates none. If a run still
fails (its driver-side state was lost with a node), the sweep tries it again (``max_attempts``) and the pipeline's
resume scores only what was not written yet; a failed run is reported and the sweep goes on with the others. A
failure of a model's shared pass fails each of its runs' attempt; the runs still incomplete are tried again together
in one new pass.

**Observability.** Every run logs its start, its progress (rows written over expected, every
``progress_interval_s``), its end with counts, and the sweep's overall progress, to stdout (the job log under
``ray job submit``). ``summary.json`` is rewritten after every run.

Modules: ``config`` (the sweep file's schema, reading YAML), ``expand`` (runs, benchmark plans, fingerprints),
``state`` (one run's marker and completeness on storage), ``status`` (outcomes, result table, progress log),
``schedule`` (which models start side by side), ``runner`` (the runner).
"""

from omnieval.sweep.config import (
    MODEL_PATH_ENGINES,
    MetricsSettings,
    ProtocolEntry,
    SweepConfig,
    SweepModel,
    load_sweep_config,
    parse_sweep_config,
)
from omnieval.sweep.expand import RunSpec, expand_runs
from omnieval.sweep.runner import SweepRunner, run_sweep
from omnieval.sweep.status import RunOutcome, SweepResult

__all__ = ["MODEL_PATH_ENGINES", "MetricsSettings", "ProtocolEntry", "RunOutcome", "RunSpec", "SweepConfig",
           "SweepModel", "SweepResult", "SweepRunner", "expand_runs", "load_sweep_config", "parse_sweep_config",
           "run_sweep"]
