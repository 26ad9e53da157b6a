"""What a run does with a media part of a modality the answering model cannot take (``unsupported_media``).

What a model takes is the engine's to say, on the driver before any model work
(``Engine.accepted_modalities(options)``: the Qwen2.5-Omni family on ``hf`` / ``vllm`` takes video, audio and
image, any other model there nothing; ``openai`` its ``modalities`` option; ``simulated`` everything unless its
``modalities`` option says otherwise). A media part of any other modality is *unsupported*, and the model's
``unsupported_media`` decides:

* ``skip`` (default): a request whose prompt shows such a part is not sent to the model and none of its media is
  decoded; its prediction row is marked ``skipped`` (the unsupported modalities, ``audio+video``) with no choice,
  no confidence and no error. Skipped rows are left out of every metric, numerator and denominator
  (``stats.read.prepare`` drops them: one place for accuracy, abstention, calibration, ``invalid_rate``,
  ``error_rate``, paired differences, tests and power), and counted per model and modality in the run's summary,
  ``run.json`` and the report. A request without such parts (crossmodal ``none->T``, contrastive ``+captions``) is
  answered as usual.
* ``note``: the engine puts a one-line text note in place of each such part (the behaviour before the policy
  existed) and the row records the modalities noted in ``media_noted``: its score is a text-only baseline.
* ``describe``: the model's describer (``describe:``, a cascade) turns exactly the unsupported modalities into text
  first (prompts from ``describe.prompts`` where given, else ``config.DEFAULT_DESCRIBE_PROMPTS``); rows carry the
  cascade columns.

A skipped row has no error, so a resumed run does not ask it again; the policy is part of the model's config and so
of the run's identity (``identity.model_identity``): switching it is refused without ``--overwrite``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from omnieval.config import DEFAULT_DESCRIBE_PROMPTS, ModelConfig
from omnieval.core.schema import MEDIA_MODALITIES, InputError, Segment, media_file


def accepted_modalities(model: ModelConfig, where: str) -> frozenset[str]:
    """The media modalities ``model``'s engine gives it as media (``Engine.accepted_modalities``); an error names
    the option it could not read (``models[0].options.path``)."""
    from omnieval.engines.base import OptionError, engine_class

    try:
        return frozenset(engine_class(model.engine).accepted_modalities(dict(model.options)))
    except OptionError as exc:
        raise InputError(f"{model.name}: {exc}", field=f"{where}.options.{exc.option}") from None


def check_media_policies(config) -> None:
    """Every answering model's policy can be applied: what it takes is known on the driver, and a ``describe``
    policy's explicit prompts are for modalities it cannot take (a prompt for one it takes would never be used)."""
    for i, model in enumerate(config.models):
        accepted = accepted_modalities(model, f"models[{i}]")
        if model.unsupported_media == "describe" and "prompts" in model.describe.model_fields_set:
            taken = sorted(set(model.describe.prompts) & accepted)
            if taken:
                raise InputError(f"{model.name}: unsupported_media: describe describes only the modalities the model "
                                 f"cannot take, but it takes {', '.join(taken)}: drop those prompts (or use "
                                 "unsupported_media: skip or note with a describe: cascade of your choice)",
                                 field=f"models[{i}].describe.prompts")


def answering_model(model: ModelConfig, media: dict[str, str], where: str = "model") -> ModelConfig:
    """The model as the run answers with it: under ``unsupported_media: describe`` its describer's prompts are
    exactly those of the plan's media (``media``: media ref -> modality, ``Expansion.media``) that the model cannot
    take, each under the modality it is described as (``cascade.described_as``: a point cloud shown as rendered
    views is described as a point cloud); none: no cascade at all. Otherwise the model as configured."""
    if model.unsupported_media != "describe" or model.describe is None:
        return model
    from omnieval.run.cascade import described_as

    accepted = accepted_modalities(model, where)
    spec = model.describe
    given = spec.prompts if "prompts" in spec.model_fields_set else {}
    wanted = {described_as(Segment(kind="media", modality=modality, path=media_file(ref)))
              for ref, modality in media.items() if modality not in accepted}
    prompts = {m: given.get(m, DEFAULT_DESCRIBE_PROMPTS[m]) for m in MEDIA_MODALITIES if m in wanted}
    if not prompts:
        return model.model_copy(update={"describe": None})
    return model.model_copy(update={"describe": spec.model_copy(update={"prompts": prompts})})


@dataclass(frozen=True)
class MediaPolicy:
    """One answering model's policy over one run's media: ``unsupported`` maps each media path the model cannot
    take to its modality. Picklable: it travels to the Ray tasks that make request rows."""

    policy: str = "skip"
    unsupported: dict[str, str] = field(default_factory=dict)

    def mark(self, paths: list[str]) -> tuple[str | None, str | None]:
        """``(skipped, media_noted)`` of a request showing ``paths``: the unsupported modalities joined by ``+``
        in the one that applies (both None where the model takes every part, or a describer took them)."""
        found = sorted({self.unsupported[p] for p in paths if p in self.unsupported})
        if not found:
            return None, None
        joined = "+".join(found)
        return (joined, None) if self.policy == "skip" else (None, joined)


def media_policy(model: ModelConfig, media: dict[str, str], where: str = "model") -> MediaPolicy:
    """``model``'s policy over a plan's media (path -> modality, ``Expansion.media``)."""
    accepted = accepted_modalities(model, where)
    return MediaPolicy(model.unsupported_media,
                       {path: modality for path, modality in media.items() if modality not in accepted})


# -- what a run says about it --------------------------------------------------------------------------------------

def skipped_summary(predictions: pa.Table) -> dict:
    """Skipped rows of a run's predictions: ``count``, and per model ``rows`` skipped of ``of``, with
    ``by_modality`` (a row skipped for ``audio+video`` counts under both)."""
    if predictions.num_rows == 0 or "skipped" not in predictions.column_names:
        return {"count": 0, "by_model": {}}
    by_model: dict[str, dict] = {}
    for model, skipped in zip(predictions["model"].to_pylist(), predictions["skipped"].to_pylist(), strict=True):
        entry = by_model.setdefault(model, {"rows": 0, "of": 0, "by_modality": {}})
        entry["of"] += 1
        if skipped:
            entry["rows"] += 1
            for modality in skipped.split("+"):
                entry["by_modality"][modality] = entry["by_modality"].get(modality, 0) + 1
    return {"count": sum(e["rows"] for e in by_model.values()),
            "by_model": {m: e | {"by_modality": dict(sorted(e["by_modality"].items()))}
                         for m, e in sorted(by_model.items()) if e["rows"]}}


def skipped_lines(summary: dict, n_predictions: int) -> list[str]:
    """The run summary's lines about skipped rows (none when nothing was skipped)."""
    if not summary.get("count"):
        return []
    lines = [f"skipped: {summary['count']} of {n_predictions} rows show media their model cannot take "
             "(unsupported_media: skip); they were not asked and are left out of every metric:"]
    for model, entry in summary["by_model"].items():
        kinds = ", ".join(f"{m} {n}" for m, n in entry["by_modality"].items())
        lines.append(f"  {model}: {entry['rows']} of {entry['of']} rows ({kinds})")
        if entry["rows"] == entry["of"]:
            lines.append(f"  WARNING: every row of {model} was skipped: the run measured nothing of it (use "
                         "unsupported_media: note for a text-only baseline, or describe: with a describer)")
    if summary["count"] == n_predictions:
        lines.append("FAILED: every row of the run was skipped: no model was asked anything")
    return lines
