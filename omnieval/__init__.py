"""omnieval: a high-throughput evaluator for omni-modal models (see README.md, SPEC.md, DESIGN.md)."""

__version__ = "0.1.0"
