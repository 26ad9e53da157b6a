"""What a run checks before any model work, so that nothing fails inside Ray after other models already ran.

* ``check_engines``: every model's, judge's and describer's engine options on the driver; remote code only with
  ``allow_remote_code: true``; an ``hf`` model folder whose ``model_type`` transformers does not know.
* ``claim_folders``: each folder of rows in the output holds rows of this config (``omnieval.run.identity``), or is
  refused with what changed.
* ``check_resources``: the actors of every stage fit the Ray cluster (a pool that cannot be placed waits forever).
"""

from __future__ import annotations

import sys

from omnieval.core.schema import InputError
from omnieval.run.identity import (
    IDENTITY_FILE,
    benchmark_digest,
    descriptions_identity,
    differences,
    fingerprint,
    judgements_identity,
    predictions_identity,
)
from omnieval.run.stages import REQUEST_CPUS

DECODE_TASK_CPUS = 1.0
"""One decode task (``run.decode_cache.decode_task``): at least one must be able to run beside the engine actors."""


def check_engines(config, models: list[tuple[str, object]]) -> None:
    """Every model's, judge's and describer's engine, checked on the driver before Ray starts: its options (unknown
    or missing options, bad values, a model folder that is not a local folder with ``config.json``: errors name
    ``models[i].options.x``), code shipped with a model run only where the config says ``allow_remote_code: true``,
    then its packages installed (vLLM for ``vllm``: ``models[i].engine``), after the config's own mistakes, which
    installing would not fix."""
    from omnieval.core.schema import InputError
    from omnieval.engines.base import OptionError, check_model_folder, engine_class, missing_package

    for where, model in models:
        try:
            cls = engine_class(model.engine)
            cls.check_options(dict(model.options))
            folder_option = cls.model_folder_option
            check_tensor_parallel(model, where)
            if folder_option and config.check_model_paths:
                check_model_folder(model.engine, model.options.get(folder_option))
        except OptionError as exc:
            raise InputError(f"{model.name}: {exc}", field=f"{where}.options.{exc.option}") from None
        for flag in remote_code_flags(model.options):
            if not config.allow_remote_code:
                raise InputError(f"{model.name}: trust_remote_code runs Python code shipped with the model folder; "
                                 "set allow_remote_code: true at the top of the config to allow it (it is logged "
                                 "and recorded in run.json)", field=f"{where}.{flag}")
            print(f"omnieval: allow_remote_code: {where} ({model.name}) may run code from "
                  f"{model.options.get('path')}", file=sys.stderr)
        missing = missing_package(cls)
        if missing is not None:
            install = f"pip install 'omnieval[{cls.extra}]'" if cls.extra else f"pip install {missing}"
            raise InputError(f"{model.name}: engine {model.engine!r} needs the {missing!r} package, which is not "
                             f"installed in this Python ({sys.executable}): {install}", field=f"{where}.engine")
        if model.engine == "hf" and config.check_model_paths and not remote_code_flags(model.options):
            check_model_type(model, where)


def check_model_type(model, where: str) -> None:
    """An ``hf`` model folder's ``config.json`` must name a ``model_type`` the installed transformers knows:
    transformers' ``AutoConfig`` refuses any other inside the engine actor, after Ray started and other models
    may have run. A folder with its own code (``auto_map``, run under ``trust_remote_code``) is not checked here."""
    import json
    from pathlib import Path

    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    path = Path(model.options["path"]) / "config.json"
    try:
        held = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{model.name}: the model's config.json cannot be read ({exc})", file=path,
                         field=f"{where}.options.path") from None
    if not isinstance(held, dict):
        raise InputError(f"{model.name}: the model's config.json is not a JSON object", file=path,
                         field=f"{where}.options.path")
    if "auto_map" in held:
        return
    model_type = held.get("model_type")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise InputError(f"{model.name}: config.json field 'model_type' is {model_type!r}, which the installed "
                         f"transformers {transformers.__version__} does not know (a newer transformers may; or "
                         "the folder is not a transformers model)", file=path, field=f"{where}.options.path")


def check_tensor_parallel(model, where: str) -> None:
    """A tensor-parallel model runs its workers on its actor's GPUs: ``num_gpus`` must equal
    ``tensor_parallel_size`` (fewer cannot start; more would sit idle). A CPU run (``num_gpus: 0``) is not split."""
    tp = model.options.get("tensor_parallel_size", 1)
    if isinstance(tp, int) and tp > 1 and model.num_gpus and model.num_gpus != tp:
        raise InputError(f"{model.name}: tensor_parallel_size {tp} needs num_gpus: {tp} on each replica (it has "
                         f"{model.num_gpus:g}): vLLM runs its {tp} workers on the replica's GPUs",
                         field=f"{where}.num_gpus")


def remote_code_flags(options: dict) -> list[str]:
    """Where an engine's options ask to run code from the model folder (``trust_remote_code``, directly or in
    vLLM's ``engine_kwargs``)."""
    found = ["options.trust_remote_code"] if options.get("trust_remote_code") else []
    kwargs = options.get("engine_kwargs")
    if isinstance(kwargs, dict) and kwargs.get("trust_remote_code"):
        found.append("options.engine_kwargs.trust_remote_code")
    return found


# ---------------------------------------------------------------------------------------------------------------
# The output's folders hold rows of this config
# ---------------------------------------------------------------------------------------------------------------

class StaleOutput(InputError):
    """The output holds rows made under another config."""


def _resolved(plan, model: str):
    """A model's resolved decode settings in the plan (``run.recipe``), or None (the config's)."""
    resolved = plan.decodes.get(model)
    return resolved.decode if resolved is not None else None


def folder_identities(config, plan) -> dict[str, dict]:
    """Folder (relative to the output) -> the identity of the rows it must hold."""
    from omnieval.config import modes_of
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.run.cascade import describe_folder
    from omnieval.run.open_ended import judge_folder

    digest = benchmark_digest(plan)
    config = config.model_copy(update={"protocol": plan.source.protocol,
                                       "protocol_options": canonical_options(plan.source.protocol,
                                                                             config.protocol_options)})
    out = {RunOutputs.parts_folder(m.name): predictions_identity(config, m, digest, _resolved(plan, m.name))
           for m in config.models}
    if any("open" in modes_of(config, m) for m in config.models):
        out |= {judge_folder(j.name): judgements_identity(config, j, digest) for j in config.judges}
    for m in config.models:
        if m.describe is not None:
            folder = describe_folder(m.describe.model.name)
            ident = descriptions_identity(config, m.describe.model, m.describe.max_new_tokens, digest)
            if folder in out and fingerprint(out[folder]) != fingerprint(ident):
                raise InputError(f"describer {m.describe.model.name!r} is configured twice with different settings",
                                 field="models[].describe.model")
            out[folder] = ident
    return out


def canonical_options(protocol: str, options: dict) -> dict:
    """Protocol options as they decide rows: validated by the protocol's ``Options`` and without the values equal to
    the defaults, so that writing a default out (``permutations: all``) or leaving it implicit is the same config.
    Options the protocol no longer accepts are kept as written (the comparison then reports them)."""
    from pydantic import ValidationError

    from omnieval.protocols import get_protocol

    try:
        return get_protocol(protocol).options.model_validate(options).model_dump(mode="json", exclude_defaults=True)
    except (ValidationError, KeyError, ValueError):
        return dict(options)


def canonical_identity(held: dict, ident: dict) -> dict:
    """A recorded identity in today's form: a ``protocol`` left null meant the benchmark's own (the benchmark's
    digest pins it), and protocol options compare by ``canonical_options``; so a config that names its benchmark's
    protocol, or writes a default option out, resumes the rows of one that did not."""
    held = dict(held)
    protocol = held.get("protocol") or ident.get("protocol")
    if held.get("protocol") is None and held.get("benchmark") == ident.get("benchmark"):
        held["protocol"] = protocol
    if protocol and isinstance(held.get("protocol_options"), dict):
        held["protocol_options"] = canonical_options(protocol, held["protocol_options"])
    return held


def claim_folders(store, identities: dict[str, dict], *, overwrite: bool = False) -> dict[str, str]:
    """Make sure every folder holds rows of its identity: a new folder gets ``_identity.json``; a folder with the same
    identity resumes; one with another identity (or parts of unknown origin) is refused with what changed, or, with
    ``overwrite``, cleared. Returns folder -> fingerprint (recorded in run.json)."""
    stale: list[str] = []
    for folder, ident in identities.items():
        rel = f"{folder}/{IDENTITY_FILE}"
        parts = store.folder_parts(folder)
        held = _read_identity(store, rel, overwrite) if store.exists(rel) else None
        recorded = held.get("identity") if held is not None and isinstance(held.get("identity"), dict) else {}
        if held is not None and fingerprint(canonical_identity(recorded, ident)) == fingerprint(ident):
            continue
        if held is None and not parts:
            continue
        what = (differences(canonical_identity(recorded, ident), ident) if held is not None
                else ["its parts have no _identity.json (written by another omnieval version, or by hand)"])
        stale.append(f"{folder}: " + "; ".join(what[:6]) + (f"; and {len(what) - 6} more" if len(what) > 6 else ""))
    if stale and not overwrite:
        raise StaleOutput("this output holds predictions of another config, which would be reused as if they were "
                          "this one's:\n  " + "\n  ".join(stale) + "\nwrite to a new output, or rerun with "
                          "--overwrite to delete the stale folders and compute them again", file=store.uri,
                          field="output")
    for line in stale:
        folder = line.split(":", 1)[0]
        print(f"omnieval: --overwrite: clearing {store.path(folder)}", file=sys.stderr)
        store.delete_folder(folder)
    prints = {}
    for folder, ident in identities.items():
        prints[folder] = fingerprint(ident)
        rel = f"{folder}/{IDENTITY_FILE}"
        if not store.exists(rel):
            store.write_json(rel, {"fingerprint": prints[folder], "identity": ident})
    return prints


def _read_identity(store, rel: str, overwrite: bool) -> dict | None:
    """A folder's ``_identity.json``. One that is not a JSON object (cut short by a full disk, edited by hand) is
    refused with what to do; with ``overwrite`` its folder counts as stale (cleared and computed again)."""
    import json

    try:
        held = json.loads(store.read_bytes(rel))
    except (ValueError, UnicodeDecodeError) as exc:
        held = exc
    if isinstance(held, dict):
        return held
    if overwrite:
        return {}
    folder = rel.rsplit("/", 1)[0]
    raise InputError(f"not a readable identity ({held if isinstance(held, Exception) else 'not a JSON object'}), so "
                     f"the rows of {folder}/ cannot be told to be this config's; rerun with --overwrite to compute "
                     f"that folder again, or delete {store.path(folder)}", file=store.path(rel))


# ---------------------------------------------------------------------------------------------------------------
# The actors fit the cluster
# ---------------------------------------------------------------------------------------------------------------

def stage_needs(model) -> tuple[float, float]:
    """(CPUs, GPUs) a model's stage holds at once: its engine replicas plus the task that makes the requests and
    starts their decodes (``stages.request_tasks``) and one decode task."""
    return model.replicas * model.num_cpus + REQUEST_CPUS + DECODE_TASK_CPUS, model.replicas * model.num_gpus


def check_resources(config, models: list[tuple[str, object]], cluster: dict[str, float]) -> None:
    """Refuse, before any model work, a stage whose actors cannot all be placed on the cluster (``cluster``:
    ``ray.cluster_resources()``). Stages run one after another, so each must fit alone. Without this, Ray Data
    waits forever for a slot: engine replicas that take every CPU leave none for decoding, and a GPU stage on a
    machine without GPUs never starts."""
    if not config.ray.check_resources:
        return
    cpus, gpus = float(cluster.get("CPU", 0.0)), float(cluster.get("GPU", 0.0))
    for where, model in models:
        need_cpu, need_gpu = stage_needs(model)
        if need_gpu > gpus + 1e-9:
            raise InputError(f"{model.name}: {model.replicas} replica(s) need {need_gpu:g} GPUs but the Ray cluster "
                             f"has {gpus:g}: lower replicas or num_gpus (num_gpus: 0 and device: cpu on a machine "
                             "without a GPU)", field=f"{where}.num_gpus")
        if need_cpu > cpus + 1e-9:
            raise InputError(f"{model.name}: {model.replicas} replica(s) x {model.num_cpus:g} CPUs plus "
                             f"{REQUEST_CPUS + DECODE_TASK_CPUS:g} for media decoding need {need_cpu:g} CPU slots "
                             f"but the Ray cluster has {cpus:g}, so decoding would wait forever: lower replicas or "
                             "num_cpus, or give Ray more logical CPUs (ray: {num_cpus: N})", field=f"{where}.replicas")
