"""Cascades: a describer model turns chosen modalities into text, then the answering model sees the text.

Configured per answering model (``ModelConfig.describe``): the describer (any engine that generates text), and one
prompt per modality to describe (``Describe this audio.`` ...; ``config.DEFAULT_DESCRIBE_PROMPTS`` has the papers'
wording). This serves the OMD-Bench two-stage audio path (audio -> description, the rest as media) and the
Contra4 caption baseline with predicted captions (every input -> caption, a text-only answering model).

How it runs: every *distinct* media file of those modalities in the plan is described once (decode once, describe
once, through the describer's engine pool: ``stages.through_model``), and the descriptions are kept as parts under
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

import pyarrow as pa

from omnieval.config import ModelConfig
from omnieval.core.schema import DESCRIBE_ERROR, RESULT_COLUMN, Instance, Segment, media_file

DESCRIPTION_SCHEMA = pa.schema([("path", pa.string()), ("modality", pa.string()), ("describer", pa.string()),
                                ("prompt", pa.string()), ("text", pa.string()), ("error", pa.string()),
                                ("error_kind", pa.string())])
"""A description row; ``error_kind`` is ``describe`` where ``error`` is set (the kind the predictions of an instance
that shows the file get), null otherwise. Parts written before the column existed get it when read
(``store.read_folder``)."""


def describe_request(path: str, modality: str, prompt: str, max_new_tokens: int) -> dict:
    """The generate request of one media stream's description (``path``: its ``schema.media_ref``). The media part
    leaves its modality open, announced as what the file decoded to (a point cloud shown as rendered views is an
    image), except for audio, whose stream may be a video file's soundtrack."""
    part = {"kind": "media", "text": None, "modality": "audio" if modality == "audio" else None,
            "path": media_file(path)}
    parts = [part,
             {"kind": "text", "text": prompt, "modality": None, "path": None}]
    return {"call": "generate", "path": path, "modality": modality, "media_paths": [path], "parts": parts,
            "max_new_tokens": max_new_tokens, "key": path,
            "meta": {"task": "describe", "modality": modality, "path": path}}


DESCRIBE_REQUEST_COLUMNS = {"path": pa.string(), "modality": pa.string()}
"""The columns of a describe request beyond the request's own (``records.REQUEST_FIELDS``)."""


class DescriptionRows:
    """Result records -> description rows (``DESCRIPTION_SCHEMA``), in the describer's actor after its call."""

    def __init__(self, describer: str, prompts: dict):
        self.describer, self.prompts = describer, prompts

    def __call__(self, batch: dict[str, list]) -> pa.Table:
        rows = []
        for path, modality, result in zip(batch["path"], batch["modality"], batch[RESULT_COLUMN], strict=True):
            text, error = result.raw_text, result.error or None
            error = error or (None if (text or "").strip() else "the describer returned no text")
            rows.append({"path": str(path), "modality": str(modality), "describer": self.describer,
                         "prompt": self.prompts[str(modality)], "text": None if error else text.strip(),
                         "error": None if not error else f"describe failed: {error}",
                         "error_kind": None if not error else DESCRIBE_ERROR})
        return pa.Table.from_pylist(rows, schema=DESCRIPTION_SCHEMA)


def described_as(seg: Segment) -> str:
    """The modality whose describe prompt a media segment gets: ``pointcloud`` for a point cloud file, also where
    it is shown as its rendered views (an ``image`` segment), so a 3D input is described as a 3D model."""
    from omnieval.media.pointcloud import is_pointcloud_file

    return "pointcloud" if seg.path and is_pointcloud_file(seg.path) else str(seg.modality)


def _described_paths(instances: list[Instance], modalities: set[str]) -> dict[str, str]:
    return {s.ref: described_as(s) for inst in instances for s in inst.media_segments()
            if described_as(s) in modalities}


def describe_folder(describer: str) -> str:
    from omnieval.core.names import folder_name

    return f"descriptions/{folder_name(describer)}"


def read_descriptions(store, describer: str) -> dict[str, dict]:
    """media ref (``schema.media_ref``) -> the latest description row of this describer (a success wins over an
    earlier failure)."""
    out: dict[str, dict] = {}
    for row in store.read_folder(describe_folder(describer), DESCRIPTION_SCHEMA).to_pylist():
        if row["error"] is None or out.get(row["path"], {}).get("error") is not None or row["path"] not in out:
            out[row["path"]] = row
    return out


def describe_media(model: ModelConfig, instances: list[Instance], config, store, media,
                   progress: bool = True) -> dict[str, dict]:
    """Describe every distinct media file of the chosen modalities not yet described without error (through the
    describer's engine pool, ``stages.through_model``); returns media ref -> description row (``text``, ``error``,
    ``prompt``)."""
    from omnieval.run.stages import RowBuilder, drain, from_rows, through_model

    spec = model.describe
    describer = spec.model
    wanted = _described_paths(instances, set(spec.prompts))
    have = read_descriptions(store, describer.name)
    todo = [describe_request(p, m, spec.prompts[m], spec.max_new_tokens) for p, m in sorted(wanted.items())
            if p not in have or have[p]["error"] is not None or have[p]["prompt"] != spec.prompts[m]]
    if todo:
        print(f"describe: {len(todo)} media files with {describer.name} for {model.name}", file=sys.stderr)
        builder = RowBuilder(DescriptionRows, {"describer": describer.name, "prompts": dict(spec.prompts)})
        ds = through_model(from_rows(todo, DESCRIBE_REQUEST_COLUMNS), describer, media, rows=builder)
        folder = describe_folder(describer.name)
        drain(ds, len(todo), f"describe {describer.name}",
              lambda table: store.write_table(store.next_part(folder), table), progress)
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
        return Segment(kind="text", text=f"[{described_as(seg)} description: {descriptions[seg.ref]['text']}]")

    out, extras, failed = [], {}, []
    for inst in instances:
        used = [s.ref for s in inst.media_segments() if described_as(s) in chosen]
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
