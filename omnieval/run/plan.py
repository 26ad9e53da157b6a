"""The plan of a run: what to evaluate, made on the driver before any model work, failing loud on bad input.

load + validate the benchmark -> every engine's options checked (``make_plan``) -> the items expanded into
instances by Ray tasks, kept in the object store as blocks (``expand_plan``, ``expansion.py``) -> the media spec
(decode parameters and content key) of every distinct media file the instances show, by the run's ``decode:``
options (``media_specs``: describers, the benchmark's digest) and by each answering model's resolved settings
(``specs_for``: its family's recipe under the benchmark's pinned settings and the config's, ``run.recipe``).
How the plan runs is ``pipeline.py``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from omnieval.config import ModelConfig, RunConfig, modes_of
from omnieval.run.expansion import Expansion, ExpansionSource, block_instances
from omnieval.run.media_policy import check_media_policies
from omnieval.run.preflight import check_engines
from omnieval.run.recipe import model_decode, pinned_decode


@dataclass
class Plan:
    root: Path
    source: ExpansionSource
    decode: object  # the config's DecodeConfig
    expansion: Expansion | None = None
    media_specs: dict[str, object] = field(default_factory=dict)  # media_ref -> MediaSpec, by the config's decode
    scorer: str | None = None  # the official scorer of generated answers (``scoring.verdicts.benchmark_scorer``)
    decodes: dict[str, object] = field(default_factory=dict)  # answering model -> its ResolvedDecode (run.recipe)
    model_specs: dict[str, dict[str, object]] = field(default_factory=dict)  # model -> media_ref -> MediaSpec

    def specs_for(self, model: str) -> dict[str, object]:
        """The media specs an answering model's requests read: by its resolved decode settings (its recipe, the
        benchmark's pinned settings, the config's ``decode:``); describers read ``media_specs``."""
        return self.model_specs.get(model, self.media_specs)

    @property
    def n_instances(self) -> int:
        return self.expanded.n_instances

    @property
    def expanded(self) -> Expansion:
        if self.expansion is None:
            raise RuntimeError("the plan is not expanded yet (plan.expand_plan)")
        return self.expansion

    def load_instances(self) -> list:
        """Every instance, on the driver (O(instances) memory: describers and judges only)."""
        return self.expanded.load_instances()


def make_plan(config: RunConfig, *, expand: bool = True, keep_blocks: bool = True) -> Plan:
    """Everything that can fail on input fails here, before Ray or any engine starts; with ``expand``, the items
    are expanded too (``expand_plan``: with Ray tasks when Ray is up)."""
    from omnieval.datasets.benchmark import check_media, load_benchmark
    from omnieval.scoring.verdicts import benchmark_scorer

    bench = load_benchmark(config.benchmark)
    protocol = protocol_of(config, bench)
    options = protocol_options(config, protocol)
    items = bench.items
    if config.limit_items and config.limit_items < len(items):
        items, note = sample_items(items, config.limit_items, config.seed)
        print(f"omnieval: limit_items: {note}", file=sys.stderr)
    check_media(bench, mode=config.decode.media_check)
    check_engines(config, engine_models(config))
    check_media_policies(config)
    check_generation(config)
    source = ExpansionSource(protocol=bench.protocol, bench=replace(bench, items=list(items)), seed=config.seed,
                             options=options, max_block=block_instances([m.batch_size for m in config.models]))
    pinned = pinned_decode(bench)
    decodes = {m.name: model_decode(config, m, pinned) for m in config.models}
    plan = Plan(root=Path(bench.root), source=source, decode=config.decode, decodes=decodes,
                scorer=benchmark_scorer(bench, config.scorer))
    return expand_plan(plan, keep_blocks=keep_blocks) if expand else plan


def expand_plan(plan: Plan, *, keep_blocks: bool = True) -> Plan:
    """The plan's instances (``expansion.expand``) and the media spec of every file they show."""
    from omnieval.core.schema import InputError, media_file
    from omnieval.media.decode import content_hash
    from omnieval.media.spec import MediaSpec
    from omnieval.run.expansion import expand

    expansion = expand(plan.source, keep_blocks=keep_blocks)
    if not expansion.n_instances:
        raise InputError("the benchmark expands to no instances: nothing to evaluate", file=plan.source.bench.root)
    made: dict[tuple, MediaSpec] = {}  # (ref, params) -> spec: models with the same settings share the specs

    def specs_by(decode) -> dict[str, MediaSpec]:
        specs = {}
        for ref, modality in expansion.media.items():  # a video's soundtrack: its own spec, key and decode
            params = _decode_params(decode, modality)
            if (ref, params) not in made:
                full = str(plan.root / media_file(ref))
                made[ref, params] = MediaSpec(key=content_hash(full, modality=modality, **dict(params)), path=full,
                                              modality=modality, params=params)
            specs[ref] = made[ref, params]
        return specs

    plan.expansion, plan.media_specs = expansion, specs_by(plan.decode)
    plan.model_specs = {name: specs_by(resolved.decode) for name, resolved in plan.decodes.items()}
    return plan


def skipped_conditions(plan: Plan) -> dict[str, dict[str, int]]:
    """The conditions the plan runs on some of its items only (the protocol's ``condition_coverage``: spectrum's
    ``<m>_as_text`` on the items with a text stand-in): condition -> ``items`` it runs on, ``of`` the plan's items,
    ``skipped`` the others. Conditions on every item are left out."""
    from omnieval.protocols import protocol_attribute

    coverage = protocol_attribute(plan.source.protocol, "condition_coverage")
    if coverage is None:
        return {}
    return {condition: {"items": runs, "of": total, "skipped": total - runs}
            for condition, (runs, total) in coverage(plan.source.bench.items, plan.source.options).items()
            if runs < total}


def condition_lines(conditions: dict[str, dict[str, int]]) -> list[str]:
    """The run summary's line per condition run on some items only (``skipped_conditions``)."""
    return [f"{condition}: {c['items']} of {c['of']} items have a stand-in; {c['skipped']} skipped (no instance "
            "of the condition; its metrics are over the others)" for condition, c in conditions.items()]


def sample_items(items: list, limit: int, seed: int) -> tuple[list, str]:
    """``limit`` items drawn across splits in proportion to their sizes (largest remainder; every split keeps at
    least one item where ``limit`` allows), each split's items in a seeded order keyed on the item id, returned in
    the benchmark's order; and a line that says what was kept of each split. The first N items would drop whole
    splits of a benchmark sorted by split, silently."""
    from omnieval.core.keyed import keyed_seed

    splits: dict[str, list] = {}
    for item in items:
        splits.setdefault(item.split, []).append(item)
    floor = 1 if limit >= len(splits) else 0
    quota = {s: max(floor, limit * len(group) // len(items)) for s, group in splits.items()}
    by_remainder = sorted(splits, key=lambda s: (-(limit * len(splits[s]) % len(items)), s))
    for name in by_remainder:
        if sum(quota.values()) >= limit:
            break
        quota[name] = min(len(splits[name]), quota[name] + 1)
    while sum(quota.values()) > limit:  # the floor of one per split can overshoot: trim the largest
        largest = max(quota, key=lambda s: (quota[s], s))
        quota[largest] -= 1
    chosen = {id(it) for name, group in splits.items()
              for it in sorted(group, key=lambda it: keyed_seed(seed, it.item_id, "limit_items"))[:quota[name]]}
    kept = [it for it in items if id(it) in chosen]
    note = f"{len(kept)} of {len(items)} items (" + ", ".join(
        f"{name} {quota[name]}/{len(group)}" for name, group in sorted(splits.items())) + ")"
    return kept, note


def engine_models(config: RunConfig) -> list[tuple[str, ModelConfig]]:
    """Every model a run starts an engine for, with where the config names it: answering models, judges and
    describers."""
    return [*((f"models[{i}]", m) for i, m in enumerate(config.models)),
            *((f"judges[{i}]", j) for i, j in enumerate(config.judges)),
            *((f"models[{i}].describe.model", m.describe.model) for i, m in enumerate(config.models) if m.describe)]


def check_generation(config: RunConfig) -> None:
    """Open-ended answers, judges and describers need engines that generate free text, and every prompt style an
    engine that runs it (``Engine.prompt_styles``): say so before any model work."""
    from omnieval.core.schema import InputError
    from omnieval.engines.base import engine_class

    needs: list[tuple[str, ModelConfig]] = []
    if "open" in config.modes:
        needs += [(f"models[{i}]", m) for i, m in enumerate(config.models) if "open" in modes_of(config, m)]
        needs += [(f"judges[{i}]", j) for i, j in enumerate(config.judges)]
    needs += [(f"models[{i}].describe.model", m.describe.model) for i, m in enumerate(config.models) if m.describe]
    for where, model in needs:
        if not engine_class(model.engine).can_generate():
            raise InputError(f"engine {model.engine!r} of {model.name!r} does not generate free text (needed for "
                             "open-ended answers, judges and describers)", field=f"{where}.engine")
    for i, model in enumerate(config.models):
        missing = [p for p in config.prompts if p not in engine_class(model.engine).prompt_styles]
        if missing and "mcq" in modes_of(config, model):
            raise InputError(f"engine {model.engine!r} of {model.name!r} does not run prompt style {missing[0]!r}",
                             field=f"models[{i}].engine")


def protocol_of(config: RunConfig, bench):
    """The benchmark's protocol module; a config that names another protocol is an error."""
    from omnieval.core.schema import InputError
    from omnieval.protocols import get_protocol

    if config.protocol is not None and config.protocol != bench.protocol:
        raise InputError(f"the config asks for protocol {config.protocol!r} but benchmark {bench.root} is a "
                         f"{bench.protocol!r} benchmark", field="protocol")
    return get_protocol(bench.protocol)


def protocol_options(config: RunConfig, protocol):
    """``protocol_options`` validated by the protocol's ``Options`` model (errors name the option)."""
    from pydantic import ValidationError

    from omnieval.core.schema import InputError, pydantic_message

    try:
        return protocol.options.model_validate(config.protocol_options)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            known = list(protocol.options.model_fields)
            takes = f"its options: {', '.join(known)}" if known else "it takes none"
            raise InputError(f"unknown option {where!r} of protocol {protocol.name} ({takes})",
                             field=f"protocol_options.{where}") from None
        raise InputError(f"{pydantic_message(err)} (protocol {protocol.name})",
                         field=f"protocol_options.{where}" if where else "protocol_options") from None


def _decode_params(decode, modality: str) -> tuple[tuple[str, object], ...]:
    from omnieval.media.spec import audio_params, video_params

    if modality == "video":
        return video_params(decode)
    if modality == "audio":
        return audio_params(decode)
    return ()


