"""WorldSense's official rule: VLMEvalKit's ``WorldSense.evaluate`` with its default ``exact_matching`` judge.

WorldSense's repository (github.com/JaaackHongggg/WorldSense) ships no scoring code; its README names VLMEvalKit as
the reproduction of its evaluation. Source: github.com/open-compass/VLMEvalKit at commit
e8e78f05f3080fe28154f2130321f17951c3be94, ``vlmeval/dataset/worldsense.py`` (``WorldSense.evaluate``) and
``vlmeval/dataset/utils/worldsense.py`` (``extract_characters_regex``, ``extract_option``).

Quirks kept:

- Video-MME's prefix list (the same two missing commas, so "The best option is" and "Best answer:" stay in the text)
  plus ``Answer:`` and ``Option:``, removed case-sensitively; then the first capital A, B, C or D anywhere, inside a
  word too ("Based on the video, D." reads ``B``; "answer: C" keeps its lowercase prefix, so ``C``);
- with no such letter the fallback ``extract_option`` reads the options from the lines after the first of the
  ``question`` field, but WorldSense's table keeps its options in a separate ``candidates`` column, so it finds no
  option and the answer scores 0 (``Z``): every unextracted answer stays in the denominator as wrong;
- option texts are therefore never matched, and ``<think>`` blocks are not stripped;
- a missing prediction is read as the text ``nan`` (``str`` of the table's NaN), which names no option.
"""

from __future__ import annotations

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer, verdict_for
from omnieval.scoring.letters import letter_source
from omnieval.scoring.videomme import ANSWER_PREFIXES, first_capital_letter

PREFIXES: tuple[str, ...] = (*ANSWER_PREFIXES, "Answer:", "Option:")


@register_scorer("worldsense")
class WorldSenseScorer:
    """VLMEvalKit's WorldSense rule: first capital A-D after the prefixes; nothing found counts as wrong."""

    name = "worldsense"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        letter, index, body = first_capital_letter(text, PREFIXES)
        if not letter:
            return verdict_for(None, item, "unparsed", "no capital A-D: scored 0")
        return verdict_for(letter, item, letter_source(body, index), "first capital A-D")
