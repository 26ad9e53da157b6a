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

The script's other two rules are not this scorer's either: ``open`` questions are rated 1-5 by Qwen2.5-7B-Instruct
against the reference (``evaluate_openended_with_qwen``; their score the mean rating over 5), and ``instruction
following`` ones checked against the row's constraint (``evaluate_aif_sample``); its headline is the mean of the
three kinds' scores weighted by their counts (``calculate_weighted_performance``).
"""

from __future__ import annotations

from omnieval.scoring.base import NOT_COMPUTED, ScoreItem, Verdict, register_scorer

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
