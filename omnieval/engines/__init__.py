"""Engines: one contract (``base.Engine.score``), several back ends, one open registry."""

from omnieval.engines.base import Engine, EngineRequest, EngineResult, create_engine, register_engine

__all__ = ["Engine", "EngineRequest", "EngineResult", "create_engine", "register_engine"]
