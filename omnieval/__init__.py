"""omnieval: a high-throughput evaluator for omni-modal models (see README.md and docs/)."""

__version__ = "0.1.0"
