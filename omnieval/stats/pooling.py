"""How several runs' models are named when their predictions are pooled into one table (the report's tables and a
sweep's ``combined/`` result compare every (run, model) with every other): one rule, used by the single process
(``stats.compute.pool``, on the rows) and by the Ray path (``stats.distributed.Renamed``, on each file's models, the
rows never gathered).

A run's models are named ``<run>:<model>``, or ``<run>`` alone where its label already ends with the model's name
(a sweep's ``<entry>/<model>``). A sweep writes each model's prompt styles to sibling runs (``.../zs``,
``.../cot``): one model whose ``cot - zs`` pairs are wanted, so a run holding one prompt whose label ends with it is
named by the rest of its label. Where that would give two runs one model with the same prompt, every run keeps its
full label: two runs' answers to one question are never read as one model's. The rule reads which models and
prompts each run holds, never its rows, so that the naming does not change with which questions a run has answered
so far (a resumed run keeps its names) and a run's repeated samples are not mistaken for a second run's answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Cells = Mapping[str, Iterable[tuple[str, str | None]]]
"""Run label -> the (model, prompt) pairs its rows hold."""


def pooled_names(cells: Cells) -> dict[str, dict[str, str]]:
    """Run label -> {model: its name in the pooled table} (module docstring)."""
    held = {run: sorted(set(pairs), key=lambda mp: (mp[0], mp[1] is None, mp[1] or "")) for run, pairs in cells.items()}
    base = {}
    for run, pairs in held.items():
        prompts = {prompt for _, prompt in pairs}
        p = next(iter(prompts)) if len(prompts) == 1 else None
        base[run] = run[: -len(p)].rstrip("/") if p and (run == p or run.endswith("/" + p)) else run
    names = _named(held, base)
    owners: dict[tuple[str, str | None], str] = {}
    for run, pairs in held.items():
        for model, prompt in pairs:
            if owners.setdefault((names[run][model], prompt), run) != run:
                return _named(held, {run: run for run in held})
    return names


def _named(held: dict[str, list[tuple[str, str | None]]], prefixes: dict[str, str]) -> dict[str, dict[str, str]]:
    return {run: {model: pooled_model(prefixes[run], model) for model, _ in pairs} for run, pairs in held.items()}


def pooled_model(prefix: str, model: str | None) -> str | None:
    """A run's model named by the run's ``prefix``: the model alone (no prefix), the prefix alone (it ends with the
    model's name), else ``<prefix>:<model>``."""
    if prefix == "" or model is None:
        return model
    if prefix == model or prefix.endswith("/" + model):
        return prefix
    return f"{prefix}:{model}"
