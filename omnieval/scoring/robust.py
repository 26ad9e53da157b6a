"""omnieval's own rule: ``core.prompts.parse_answer`` (docs/reference.md, Prompting and parsing)."""

from __future__ import annotations

from omnieval.core.prompts import parse_answer
from omnieval.scoring.base import ScoreItem, Verdict, register_scorer, verdict_for


@register_scorer("robust")
class RobustScorer:
    """The last explicit ``Answer: X`` / ``(X)``, else a lone or leading letter, else an exact option text; reasoning
    blocks stripped first. Never guesses: an answer naming no option is ``unparsed`` and wrong."""

    name = "robust"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        choice = parse_answer(text, item.labels, item.options)
        return verdict_for(choice, item, "parsed" if choice is not None else "unparsed", "parse_answer")
