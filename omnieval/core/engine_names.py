"""The names engines are registered under, apart from the engines themselves.

``engines.base.register_engine`` fills ``REGISTRY``; ``LAZY`` names the engines whose modules import heavy stacks
and register on first use. The run config checks an engine name against ``known_engines()`` while it validates, so
this registry sits below both: ``omnieval.config`` never imports engine code, and engines may read the config.
"""

from __future__ import annotations

REGISTRY: dict[str, type] = {}
"""Engine name -> engine class (a subclass of ``engines.base.Engine``)."""

LAZY: dict[str, str] = {
    "simulated": "omnieval.engines.simulated",
    "hf": "omnieval.engines.hf",
    "vllm": "omnieval.engines.vllm",
    "openai": "omnieval.engines.endpoint",
}
"""Engine name -> the module that registers it on import."""


def known_engines() -> list[str]:
    return sorted(set(REGISTRY) | set(LAZY))
