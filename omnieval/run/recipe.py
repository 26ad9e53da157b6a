"""Each model's decode settings, resolved from four levels, with where each value came from.

Highest first (docs/runs.md, "Recipes"):

1. ``config``: the run's ``decode:`` options the config sets;
2. ``benchmark``: the benchmark's pinned protocol settings (``benchmark.json``'s ``"pinned": {"decode": {...}}``, a
   paper's 32 frames);
3. ``recipe``: the model family's recipe (``engines.recipes``), unless the model or run opts out;
4. ``default``: omnieval's own (``config.DecodeConfig``'s defaults).

Options are resolved by group, not one by one: the options that together make one rule (how many frames: a count,
or a rate with its bounds and factor; how frames are sized: a longest side, or a pixel budget with its factor and
clip total) come from the highest level that sets any of them, so a config's ``num_frames: 32`` replaces a recipe's
rate sampling whole rather than mixing with its bounds. Two models of one run whose resolved settings agree share
their decodes (the decode keys hold the parameters, ``media.spec``); two that differ decode each file once each.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omnieval.config import DecodeConfig, ModelConfig, RunConfig
from omnieval.core.schema import InputError
from omnieval.engines.recipes import OMNIEVAL_DEFAULT, Sourced

LEVELS = ("config", "benchmark", "recipe", "default")
NO_RECIPE = "omnieval-default"
#: The decode options that make one rule each, resolved together.
GROUPS: tuple[tuple[str, ...], ...] = (
    ("num_frames", "fps", "min_frames", "max_frames", "frame_factor"),
    ("index_rule",),
    ("max_side", "max_pixels", "min_pixels", "size_factor", "total_pixels"),
    ("sample_rate",),
    ("max_audio_seconds",),
)
RESOLVED_OPTIONS = tuple(name for group in GROUPS for name in group)
DEFAULT_SOURCE = {"from": "default", "source": "omnieval's decode: default (config.DecodeConfig)"}


@dataclass(frozen=True)
class ResolvedDecode:
    """A model's decode settings (``decode``: a ``DecodeConfig`` the decoder and the run identity read), the recipe
    it used (a family name, or None), and per option set, the level it came from and its source."""

    decode: DecodeConfig
    recipe: str | None
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # ``applied_options``

    def record(self) -> dict[str, Any]:
        """What ``run.json`` records for the model (``recipes.<model>``)."""
        from omnieval.engines.families import recipe_for

        values = self.decode.model_dump(mode="json", include=set(RESOLVED_OPTIONS))
        out: dict[str, Any] = {"recipe": self.recipe or NO_RECIPE,
                               "decode": {k: {"value": v, **self.sources.get(k, DEFAULT_SOURCE)}
                                          for k, v in values.items()}}
        if self.options:
            out["options"] = self.options
        if self.recipe:
            out["reference"] = recipe_for(self.recipe).record()
        return out


def resolve_decode(config: DecodeConfig, pinned: dict[str, Any], recipe: dict[str, Any],
                   recipe_name: str | None = None) -> ResolvedDecode:
    """The decode settings of one model: per option group (``GROUPS``), the values of the highest level that sets
    any of them (``config``: the fields the config set; ``pinned``: the benchmark's; ``recipe``: ``Sourced`` values
    by option name). The run-wide fields that are no sampling rule (``media_check``, ``store``) stay the config's."""
    given = {name: getattr(config, name) for name in config.model_fields_set if name in RESOLVED_OPTIONS}
    levels = (("config", given, "the run's decode:"), ("benchmark", pinned, "benchmark.json pinned.decode"),
              ("recipe", {k: v.value for k, v in recipe.items()}, None))
    values: dict[str, Any] = {}
    sources: dict[str, dict[str, str]] = {}
    for group in GROUPS:
        for level, options, where in levels:
            chosen = {name: options[name] for name in group if name in options}
            if chosen:
                values |= chosen
                sources |= {name: {"from": level, "source": where or recipe[name].source} for name in chosen}
                break
    rest = config.model_dump(include={"media_check", "store"})
    return ResolvedDecode(DecodeConfig.model_validate(values | rest), recipe_name, sources)


def model_decode(config: RunConfig, model: ModelConfig, pinned: dict[str, Any] | None = None) -> ResolvedDecode:
    """``model``'s resolved decode settings in ``config`` (``pinned``: the benchmark's pinned decode options)."""
    from omnieval.engines.families import recipe_for

    name = recipe_name(config, model)
    recipe = recipe_for(name).decode if name else {}
    resolved = resolve_decode(config.decode, pinned or {}, recipe, name)
    return replace(resolved, options=applied_options(config, model))


def recipe_name(config: RunConfig, model: ModelConfig) -> str | None:
    """The family whose recipe ``model`` uses, or None (omnieval's defaults): the one it names; else, unless it or
    the run opts out, its folder's family (``engines.families.family_for``), where it has one."""
    from omnieval.engines.families import family_names

    choice = model.recipe
    if choice is False or choice == NO_RECIPE:
        return None
    if isinstance(choice, str):
        if choice not in family_names():
            raise InputError(f"recipe {choice!r} of model {model.name!r} is no registered family; known: "
                             f"{', '.join(family_names())}, or {NO_RECIPE}", field="models[].recipe")
        return choice
    if not config.recipes:
        return None
    return _folder_family(model)


def _folder_family(model: ModelConfig) -> str | None:
    """The family of a model folder's ``config.json`` (engines that read one: ``options.path``), or None."""
    from omnieval.engines.families import FAMILIES

    path = model.options.get("path")
    if not isinstance(path, str) or "://" in path:
        return None
    config_json = Path(path) / "config.json"
    try:
        model_type = json.loads(config_json.read_text()).get("model_type")
    except FileNotFoundError:  # not visible on the driver (check_model_paths: false): said, never silent
        print(f"omnieval: {config_json} is not readable here: model {model.name!r} is decoded by omnieval's "
              "defaults; give it recipe: <family> to use its family's recipe", file=sys.stderr)
        return None
    except (OSError, ValueError, AttributeError) as exc:
        raise InputError(f"cannot read the model's family: {exc}", file=config_json,
                         field="models[].options.path") from None
    adapter = FAMILIES.get(model_type or "")
    return adapter.name if adapter else None


def pinned_decode(bench) -> dict[str, Any]:
    """A benchmark's pinned decode options, checked as ``decode:`` options are (an unknown option, a contradiction
    or a bad value is an error naming ``benchmark.json`` and the option)."""
    from pydantic import ValidationError

    from omnieval.core.schema import pydantic_message

    pinned = getattr(bench, "pinned_decode", None) or {}
    where = Path(bench.root) / "benchmark.json"
    unknown = sorted(set(pinned) - set(RESOLVED_OPTIONS))
    if unknown:
        raise InputError(f"pinned.decode may set {', '.join(RESOLVED_OPTIONS)}; not {', '.join(unknown)}",
                         file=where, field=f"pinned.decode.{unknown[0]}")
    try:
        DecodeConfig.model_validate(pinned)
    except ValidationError as exc:
        err = exc.errors()[0]
        option = ".".join(str(p) for p in err["loc"])
        raise InputError(pydantic_message(err), file=where,
                         field=f"pinned.decode.{option}" if option else "pinned.decode") from None
    return dict(pinned)


#: Engines that render the chat template and call the processor themselves, and so can apply what a recipe says
#: beyond the decode settings (``recipe_options``).
RECIPE_ENGINES = ("hf", "vllm")
#: The engine options a recipe gives (``engines.feeding`` and the system prompt), as ``run.json`` records them.
RECIPE_OPTIONS = ("system_prompt", "image_pixels", "soundtrack", "media_first")


def recipe_option_values(recipe) -> dict[str, Sourced]:
    """The engine options a family's recipe sets, each with its source: the system message its card requires
    (where it has one), its image pixel budget (``image_pixels``), and whether a video's own soundtrack is heard
    (``soundtrack``) and the media order (``media_first``) where its authors say (a value of omnieval's defaults
    leaves the engine's own behaviour)."""
    from omnieval.engines.feeding import PIXEL_KEYS

    out: dict[str, Sourced] = {}
    if recipe.system_prompt.value:
        out["system_prompt"] = recipe.system_prompt
    budget = {k: v for k, v in recipe.image.items() if k in PIXEL_KEYS}  # the budget a resize takes
    if "max_pixels" in budget:
        sources = dict.fromkeys(v.source for v in budget.values())
        out["image_pixels"] = Sourced({k: v.value for k, v in budget.items()}, "; ".join(sources))
    if recipe.use_audio_in_video.source != OMNIEVAL_DEFAULT:
        out["soundtrack"] = Sourced(bool(recipe.use_audio_in_video.value), recipe.use_audio_in_video.source)
    if recipe.media_first.source != OMNIEVAL_DEFAULT:
        out["media_first"] = Sourced(bool(recipe.media_first.value), recipe.media_first.source)
    return out


def _recipe_engine_values(config: RunConfig, model: ModelConfig) -> dict[str, Sourced]:
    """``recipe_option_values`` of ``model``'s recipe; empty for a model with no recipe or an engine that does not
    render its own prompts (``RECIPE_ENGINES``)."""
    from omnieval.engines.families import recipe_for

    name = recipe_name(config, model)
    if name is None or model.engine not in RECIPE_ENGINES:
        return {}
    return recipe_option_values(recipe_for(name))


def recipe_options(config: RunConfig, model: ModelConfig) -> dict[str, Any]:
    """The engine options a model's recipe adds where the model's own ``options`` leave them unset
    (``recipe_option_values``: e.g. Qwen2.5-Omni's system prompt, image pixel budget and soundtrack heard)."""
    return {k: v.value for k, v in _recipe_engine_values(config, model).items() if k not in model.options}


def applied_options(config: RunConfig, model: ModelConfig) -> dict[str, dict[str, Any]]:
    """What ``run.json`` records of the engine options a recipe gives (``RECIPE_OPTIONS``) for ``model``: each one
    set, its value, the level it came from (``config``: the model's own options; ``recipe``) and its source."""
    from_recipe = _recipe_engine_values(config, model)
    out: dict[str, dict[str, Any]] = {}
    for name in RECIPE_OPTIONS:
        if name in model.options:
            out[name] = {"value": model.options[name], "from": "config", "source": "the model's options"}
        elif name in from_recipe:
            out[name] = {"value": from_recipe[name].value, "from": "recipe", "source": from_recipe[name].source}
    return out


def with_recipe_options(config: RunConfig, model: ModelConfig) -> ModelConfig:
    """``model`` as its engine is built: its recipe's options (``recipe_options``) under its own."""
    extra = recipe_options(config, model)
    return model.model_copy(update={"options": {**extra, **model.options}}) if extra else model
