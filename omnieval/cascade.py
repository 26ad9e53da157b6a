"""Cascades: a describer model turns chosen modalities into text, then the answering model sees the text.

Configured per answering model (``ModelConfig.describe``): the describer (any engine that generates text), and one
prompt per modality to describe (``Describe this audio.`` ...; ``config.DEFAULT_DESCRIBE_PROMPTS`` has the papers'
wording). This serves the OMD-Bench two-stage audio path (audio -> description, the rest as media) and the
Contra4 caption baseline with predicted captions (every input -> caption, a text-only answering model).

How it runs: every *distinct* media file of those modalities in the plan is described once (decode once, describe
once; a Ray Data actor pool of the describer, ``DescribeStage``, or for a ``vllm`` describer with ``processor: true``
vLLM's own ``ray.data.llm`` engine pool, ``engines/vllm_generate.py``), and the descriptions are kept as parts under
``descriptions/<describer>/`` (a resumed run describes only what is missing; a description that failed is retried).
Each instance is then rewritten for this model: a described media segment becomes the text segment
``[<modality> description: <text>]`` in the same place (a described option stays that option). The prediction
rows say so: ``cascade`` = ``<describer>:<modalities>``, ``intermediate_text`` = the descriptions the instance used
(JSON, path -> text), ``stage_engines`` = ``describe=<engine>:<describer>;answer=<engine>:<model>``. An instance
whose description failed is an errored prediction (``describe failed: ...``) without a model call.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pyarrow as pa

from omnieval.config import ModelConfig
from omnieval.schema import Instance, Segment

DESCRIPTION_SCHEMA = pa.schema([("path", pa.string()), ("modality", pa.string()), ("describer", pa.string()),
                                ("prompt", pa.string()), ("text", pa.string()), ("error", pa.string())])


class DescribeStage:
    """One describer replica: media files (decoded through the run's cache) -> descriptions."""

    def __init__(self, describer: dict, prompts: dict, max_new_tokens: int, cache_name: str, namespace: str,
                 specs: dict):
        from omnieval.engines.base import create_engine
        from omnieval.media.cache import CacheClient

        self.model = ModelConfig.model_validate(describer)
        self.engine = create_engine(self.model.engine, model=self.model.name, **self.model.options)
        self.prompts, self.max_new_tokens = prompts, max_new_tokens
        self.cache = CacheClient(cache_name, namespace)
        self.specs = specs

    def __call__(self, batch: dict[str, np.ndarray]) -> pa.Table:
        from omnieval.engines.base import GenerationRequest, GenerationResult
        from omnieval.prompts import PromptPart

        paths = [str(p) for p in batch["path"]]
        modalities = [str(m) for m in batch["modality"]]
        specs = [self.specs[p] for p in paths]
        status = self.cache.statuses(specs)
        payloads = self.cache.payloads(specs)
        results: dict[int, GenerationResult] = {i: GenerationResult(None, error=f"media decode failed: {status[i]}")
                                                for i in range(len(paths)) if status[i]}
        todo = [i for i in range(len(paths)) if not status[i]]
        requests = [GenerationRequest(
            parts=[PromptPart("media", modality=payloads[i].modality, path=paths[i]),  # as decoded: views -> image
                   PromptPart("text", text=self.prompts[modalities[i]])],
            media={paths[i]: payloads[i]}, max_new_tokens=self.max_new_tokens, key=paths[i],
            meta={"task": "describe", "modality": modalities[i], "path": paths[i]}) for i in todo]
        if requests:
            try:
                out = self.engine.generate(requests)
            except Exception as exc:
                out = [GenerationResult(None, error=f"engine error: {type(exc).__name__}: {exc}")] * len(requests)
            results.update(zip(todo, out, strict=True))
        rows = []
        for i, path in enumerate(paths):
            res = results[i]
            error = res.error or (None if (res.text or "").strip() else "the describer returned no text")
            rows.append({"path": path, "modality": modalities[i], "describer": self.model.name,
                         "prompt": self.prompts[modalities[i]], "text": None if error else res.text.strip(),
                         "error": None if not error else f"describe failed: {error}"})
        return pa.Table.from_pylist(rows, schema=DESCRIPTION_SCHEMA)


def described_as(seg: Segment) -> str:
    """The modality whose describe prompt a media segment gets: ``pointcloud`` for a point cloud file, also where
    it is shown as its rendered views (an ``image`` segment), so a 3D input is described as a 3D model."""
    from omnieval.media.pointcloud import is_pointcloud_file

    return "pointcloud" if seg.path and is_pointcloud_file(seg.path) else str(seg.modality)


def _described_paths(instances: list[Instance], modalities: set[str]) -> dict[str, str]:
    return {s.path: described_as(s) for inst in instances for s in inst.media_segments()
            if described_as(s) in modalities}


def describe_folder(describer: str) -> str:
    from omnieval.names import folder_name

    return f"descriptions/{folder_name(describer)}"


def read_descriptions(store, describer: str) -> dict[str, dict]:
    """path -> the latest description row of this describer (a success wins over an earlier failure)."""
    out: dict[str, dict] = {}
    for row in store.read_folder(describe_folder(describer), DESCRIPTION_SCHEMA).to_pylist():
        if row["error"] is None or out.get(row["path"], {}).get("error") is not None or row["path"] not in out:
            out[row["path"]] = row
    return out


def describe_media(model: ModelConfig, plan, config, store, cache_name: str, namespace: str,
                   progress: bool = True) -> dict[str, dict]:
    """Describe every distinct media file of the chosen modalities not yet described without error; returns
    path -> description row (``text``, ``error``, ``prompt``)."""
    import ray.data
    from ray.data import ActorPoolStrategy

    from omnieval.preflight import uses_vllm_processor

    spec = model.describe
    describer = spec.model
    wanted = _described_paths(plan.instances, set(spec.prompts))
    have = read_descriptions(store, describer.name)
    todo = [{"path": p, "modality": m} for p, m in sorted(wanted.items())
            if p not in have or have[p]["error"] is not None or have[p]["prompt"] != spec.prompts[m]]
    if todo:
        print(f"describe: {len(todo)} media files with {describer.name} for {model.name}", file=sys.stderr)
        ds = ray.data.from_items(todo, override_num_blocks=max(1, min(len(todo) // 16, 64)))
        if uses_vllm_processor(describer):  # vLLM's own engine pool (ray.data.llm), after the media stage
            from omnieval.engines.vllm_generate import describe_processor_stage
            from omnieval.pipeline import MediaStage

            ds = ds.map(lambda row: row | {"media_paths": json.dumps([row["path"]])})
            ds = ds.map_batches(MediaStage, fn_constructor_kwargs={"cache_name": cache_name, "namespace": namespace,
                                                                    "specs": plan.media_specs},
                                compute=ActorPoolStrategy(size=1), batch_size=config.decode.batch_size,
                                num_cpus=0.25)
            ds = describe_processor_stage(ds, describer, spec.prompts, spec.max_new_tokens, cache_name=cache_name,
                                          namespace=namespace, specs=plan.media_specs)
        else:
            kwargs = {"num_cpus": describer.num_cpus} | ({"num_gpus": describer.num_gpus} if describer.num_gpus
                                                         else {})
            ds = ds.map_batches(DescribeStage, fn_constructor_kwargs={
                "describer": describer.model_dump(), "prompts": dict(spec.prompts),
                "max_new_tokens": spec.max_new_tokens, "cache_name": cache_name, "namespace": namespace,
                "specs": plan.media_specs},
                compute=ActorPoolStrategy(size=describer.replicas), batch_size=describer.batch_size, **kwargs)
        for block in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
            store.write_table(store.next_part(describe_folder(describer.name)), block)
        have = read_descriptions(store, describer.name)
    return {p: have[p] for p in wanted if p in have}


def cascade_instances(model: ModelConfig, instances: list[Instance], descriptions: dict[str, dict]
                      ) -> tuple[list[Instance], dict[str, dict], list[tuple[Instance, str]]]:
    """Instances rewritten for the answering model, the cascade columns per instance id, and the instances that
    cannot be asked (a description failed), with the error."""
    spec = model.describe
    chosen = set(spec.prompts)
    label = f"{spec.model.name}:{'+'.join(sorted(chosen))}"
    engines = f"describe={spec.model.engine}:{spec.model.name};answer={model.engine}:{model.name}"

    def rewrite(seg: Segment) -> Segment:
        if seg.kind != "media" or described_as(seg) not in chosen:
            return seg
        return Segment(kind="text", text=f"[{described_as(seg)} description: {descriptions[seg.path]['text']}]")

    out, extras, failed = [], {}, []
    for inst in instances:
        used = [s.path for s in inst.media_segments() if described_as(s) in chosen]
        errors = [descriptions.get(p, {}).get("error") or ("describe failed: no description" if p not in descriptions
                                                           else None) for p in used]
        if any(errors):
            failed.append((inst, next(e for e in errors if e)))
            continue
        new = inst.model_copy(update={
            "segments": [rewrite(s) for s in inst.segments],
            "option_segments": None if inst.option_segments is None else [rewrite(s) for s in inst.option_segments]})
        out.append(new)
        extras[inst.instance_id] = {"cascade": label, "stage_engines": engines,
                                    "intermediate_text": json.dumps({p: descriptions[p]["text"] for p in used})}
    return out, extras, failed
