"""MMSU's scoring rule, registered as ``mmsu``: MMMU's letter parser, as lmms-eval's ``mmsu`` task runs it.

The MMSU release (github.com/dingdongwang/MMSU, Hugging Face ``ddwang2000/MMSU``) publishes no scoring code: its
README's "Evaluation Pipeline" section is empty. The one public scorer written for it is lmms-eval's
(github.com/EvolvingLMMs-Lab/lmms-eval, commit fb86776627586ebb45b90bd19a793bc6e52dca19,
``lmms_eval/tasks/mmsu/utils.py``: ``parse_multi_choice_response``, adapted from MMMU, called by
``mmsu_process_results``), and that is the rule here. Its quirks, each kept:

- the answer's ends are stripped of ``, . ! ? ; : '`` one kind after the other, then padded with a space either
  side;
- the passes of OmniBench's parser (``omnieval.scoring.omnibench``, whose docstring lists them): every ``(X)``,
  else every capital letter followed by a space, else by a dot, else, for an answer of more than five words, every
  option text; several candidates resolved by the last occurrence;
- no candidate: lmms-eval draws a random letter; omnieval cannot reproduce that draw and counts the answer wrong
  (``unparsed``), so lmms-eval's expected accuracy is this one plus a quarter of the unparsed share;
- the gold: lmms-eval compares the letter with the row's ``answer`` field (``A`` where the row has none), while the
  release gives the correct option's text as ``answer_gt``; omnieval's converter maps that text to its option
  (``omnieval.datasets.omni.mmsu``) and the letter is compared with that option's label;
- reasoning blocks are not removed: a letter inside ``<think>`` counts like any other.

A ``None`` text (no output) is read as the empty answer.
"""

from __future__ import annotations

from omnieval.scoring.av_odyssey import strip_ends
from omnieval.scoring.base import ScoreItem, Verdict, register_scorer, verdict_for
from omnieval.scoring.omnibench import parse


@register_scorer("mmsu")
class MMSUScorer:
    """lmms-eval's ``mmsu`` task parser (module doc)."""

    name = "mmsu"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        choice, how = parse(strip_ends(text or ""), item)
        if choice is None:
            return Verdict(None, False, "unparsed", "no candidate: lmms-eval draws a random letter")
        return verdict_for(choice, item, "parsed", how)
