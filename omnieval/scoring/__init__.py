"""Answer scorers: which option a model's free-text answer is taken to mean, and whether it counts as correct.

Every generated answer (cot, open, thinking) gets two verdicts (docs/scoring.md):

- ``official``: the benchmark's released evaluation code's rule, bug for bug, so the accuracy is comparable with the
  numbers published for that benchmark (one module per benchmark, registered under the benchmark's name);
- ``robust``: omnieval's own rule (``core.prompts.parse_answer``), the number a careful reader wants.

Import a scorer by name with :func:`get_scorer`; :func:`scorer_names` lists them.
"""

from omnieval.scoring.base import ScoreItem, Scorer, Verdict, get_scorer, register_scorer, scorer_names

__all__ = ["ScoreItem", "Scorer", "Verdict", "get_scorer", "register_scorer", "scorer_names"]
