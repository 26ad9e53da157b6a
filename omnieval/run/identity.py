"""A run's identity: what decides its rows, so that rows made under another config are never reused.

Every folder of rows in a run's output (``parts/<model>``, ``judgements/<judge>``, ``descriptions/<describer>``)
holds an ``_identity.json``: the plain data that decided those rows (the model's config without its scaling fields,
the seed, the protocol and its options, the decode settings (for a model's rows, its own resolved ones:
``run.recipe``), the official scorer where the config names one, and the benchmark's digest: its expanded instances
and the content hash of every media file) and its SHA-256. A rerun whose identity is the same resumes from the parts;
one whose identity differs is refused before any model work, with the fields that changed, unless the caller asks
to clear the stale folder (``omnieval run --overwrite``). A sweep's per-run fingerprint is the hash of the same
data (``run_fingerprint``): one definition.

Left out on purpose, because they do not change a prediction (docs/architecture.md, decision 1): where rows go
(``output``), the run's ``name``, Ray settings, scaling (replicas, batch sizes, GPUs, CPUs, memory shares, vLLM's KV
cache size), the media pre-flight mode, the decoded-media store (``decode.store``: a store read gives the
same arrays as a decode), the simulated engine's ``delay_ms``, the endpoint engine's transport
(``concurrency``, ``timeout_s``, retries and backoff; its API key is never in the config, only the name of the variable
holding it), and the run's prompt styles and modes (a row is keyed by its prompt and mode, so adding ``cot`` to a run
keeps its ``zs`` rows).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

IDENTITY_FILE = "_identity.json"  # "_": skipped by Arrow dataset readers of the folder
SCALING_FIELDS = frozenset({"replicas", "batch_size", "num_gpus", "num_cpus"})
SCALING_OPTIONS = frozenset({"batch_size", "gpu_memory_utilization", "kv_cache_memory_bytes", "delay_ms",
                             "concurrency", "timeout_s", "max_retries", "backoff_s", "max_backoff_s"})
DECODE_SCALING = frozenset({"batch_size", "media_check", "store"})


def benchmark_digest(plan) -> str:
    """SHA-256 of a plan's expanded instances (``expansion.Expansion.digest``: their JSON, chunk by chunk) and the
    content hashes of their media: the benchmark as the models see it (editing an item, a media file or the
    expansion changes it; moving the folder does not)."""
    digest = hashlib.sha256()
    digest.update(plan.expanded.digest.encode())
    for path in sorted(plan.media_specs):
        digest.update(f"{path}\t{plan.media_specs[path].key}\n".encode())
    return digest.hexdigest()


def model_identity(model) -> dict[str, Any]:
    """A model's (judge's, describer's) config as it decides rows: scaling fields and options left out, and the
    ``card`` label (which published numbers the report shows beside it)."""
    data = model.model_dump(mode="json", exclude=set(SCALING_FIELDS) | {"modes", "card"})
    if data.get("recipe") is None:  # unset: the identities of configs written before recipes existed stay
        data.pop("recipe", None)
    for name, unset in (("samples", 1), ("temperature", None), ("top_p", None)):  # the same for repeated samples
        if data.get(name) == unset:
            data.pop(name, None)
    data["options"] = {k: v for k, v in data["options"].items() if k not in SCALING_OPTIONS}
    if data.get("describe"):
        data["describe"]["model"] = model_identity(model.describe.model)
    return data


def _shared(config, digest: str, decode=None) -> dict[str, Any]:
    """``decode``: the folder's model's resolved decode settings (``run.recipe``); the config's where None."""
    decode = decode if decode is not None else config.decode
    return {"seed": config.seed, "protocol": config.protocol, "protocol_options": config.protocol_options,
            "decode": decode.model_dump(mode="json", exclude=set(DECODE_SCALING)),
            "limit_items": config.limit_items, "benchmark": digest,
            "allow_remote_code": config.allow_remote_code}


def predictions_identity(config, model, digest: str, decode=None) -> dict[str, Any]:
    """What decides the rows of ``parts/<model>``: ``decode`` is the model's resolved decode settings (its recipe
    with the benchmark's and the config's settings over it, ``run.recipe.model_decode``), so a recipe's value
    changes the identity of its family's models only; the engine options its recipe adds (a system prompt); a
    ``scorer`` set in the config too (the rows' official
    verdicts; absent when unset, so the identities written before it existed still hold)."""
    from omnieval.run.recipe import recipe_options

    scorer = {"scorer": config.scorer} if config.scorer else {}
    # the options a recipe adds to the engine (its system prompt): absent where none, as before recipes
    added = {"recipe_options": extra} if (extra := recipe_options(config, model)) else {}
    return {"kind": "predictions", "model": model_identity(model), **_shared(config, digest, decode), **scorer,
            **added}


def judgements_identity(config, judge, digest: str) -> dict[str, Any]:
    """What decides the rows of ``judgements/<judge>``: the judge, its template, and the answers it grades (the
    answering models' identities are in their own folders; a judgement row names the answer it graded)."""
    return {"kind": "judgements", "judge": model_identity(judge), "template": config.judge_template,
            **_shared(config, digest)}


def descriptions_identity(config, describer, max_new_tokens: int, digest: str) -> dict[str, Any]:
    """What decides the rows of ``descriptions/<describer>`` (each row records its own prompt, and a row whose
    prompt differs from the config's is described again, so the prompts are not part of it)."""
    return {"kind": "descriptions", "describer": model_identity(describer), "max_new_tokens": max_new_tokens,
            **_shared(config, digest)}


def fingerprint(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def run_fingerprint(config, digest: str, pinned: dict | None = None) -> str:
    """One hash over every folder identity of a run config (a sweep's per-run fingerprint), plus its prompt styles
    and modes, which decide which rows a complete run holds; ``pinned``: the benchmark's pinned decode options."""
    from omnieval.run.recipe import model_decode

    folders = {f"parts/{m.name}": predictions_identity(config, m, digest, model_decode(config, m, pinned).decode)
               for m in config.models}
    folders |= {f"judgements/{j.name}": judgements_identity(config, j, digest) for j in config.judges}
    return fingerprint({"folders": folders, "prompts": config.prompts, "modes": config.modes})


def differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Readable paths where two identities differ (``model.options.reliance.video: 0.8 -> 0.6``)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                out.append(f"{where}: added ({_short(new[key])})")
            elif key not in new:
                out.append(f"{where}: removed (was {_short(old[key])})")
            else:
                out.extend(differences(old[key], new[key], where))
        return out
    if old != new:
        if prefix == "benchmark":
            return ["benchmark: its items, expansion or media content changed"]
        return [f"{prefix or 'value'}: {_short(old)} -> {_short(new)}"]
    return []


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
