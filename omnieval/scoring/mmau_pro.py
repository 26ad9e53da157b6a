"""MMAU-Pro's scoring rule, registered as ``mmau-pro``: named, and never computed here, since it needs a 7B
embedding model.

Source: github.com/sonalkum/MMAUPro, ``evaluate_mmau_pro_comprehensive.py`` at commit
226976255135302de77c6860ed3b9a66c4998c5e (``evaluate_closedended_with_nvembed``, ``calculate_metrics``,
``main``). For a closed-form question the script embeds the model's whole answer and each choice with NV-Embed-v2
(``nvidia/NV-Embed-v2``, empty instruction, up to 4,096 tokens), takes the choice whose normalised embedding is
nearest the answer's (cosine similarity, the first on a tie) and counts the answer right when that choice's text
equals the row's ``answer`` text (scikit-learn's ``accuracy_score`` over the texts, per ``category`` and over all
closed-form rows). Every answer is mapped to some choice, so an empty or off-topic answer is still credited with
whichever choice lies nearest; an answer that names a letter only is compared by meaning with the choice texts.

That verdict depends on the weights of a 7B model run on every answer, which omnieval does not run offline: the
scorer's ``unavailable`` says so, and a run's official columns stay empty with that reason in ``official_how``
(``scoring.verdicts``), the report shows the official accuracy as not computed, and ``omnieval parse --scorer
mmau-pro`` refuses. No approximation (string overlap, a smaller embedding model) stands in for it: it would give
a number that reads as MMAU-Pro's own and is not. The robust verdict (omnieval's letter or option-text reading) is
computed as for every benchmark.

The script's ``instruction following`` rule is offline and is computed: each such open item's answer is checked
against the row's constraint (``evaluate_aif_sample``, transcribed in ``omnieval.scoring.mmau_pro_aif``), the
verdict ``score_open`` returns, so ``open_official_accuracy`` over those items is the release's success rate.
``open`` questions are rated 1-5 by Qwen2.5-7B-Instruct against the reference (``evaluate_openended_with_qwen``;
their score the mean rating over 5): no offline rule, so ``score_open`` returns None and the run's judges grade
them. The script's headline is the mean of the three kinds' scores weighted by their counts
(``calculate_weighted_performance``), not computed here as its other two parts are not.
"""

from __future__ import annotations

from omnieval.scoring.base import NOT_COMPUTED, ScoreItem, Verdict, register_scorer
from omnieval.scoring.mmau_pro_aif import TASK_BREAKDOWN, aif_verdict

REASON = ("MMAU-Pro's rule maps each answer to the choice nearest it in NV-Embed-v2's embedding space, a 7B model "
          "omnieval does not run offline")


@register_scorer("mmau-pro")
class MMAUProScorer:
    """MMAU-Pro's embedding-similarity rule, not computed (module doc)."""

    name = "mmau-pro"
    unavailable = REASON

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        """No verdict: no choice, no correctness (so no denominator counts it), and the reason."""
        return Verdict(None, None, "unparsed", NOT_COMPUTED + REASON)

    def score_open(self, text: str | None, inst) -> Verdict | None:
        """An open item's answer by the release's instruction checks where the item is an instruction-following
        one (its ``task_identifier`` breakdown: ``mmau_pro_aif.aif_verdict``); None for the ``open`` questions,
        whose released rule is a 7B judge's rating."""
        breakdowns = inst.field("breakdowns") or {}
        if TASK_BREAKDOWN not in breakdowns:
            return None
        return aif_verdict(text, breakdowns, inst.question)
