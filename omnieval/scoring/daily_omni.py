"""Daily-Omni's official rule: the answer extraction and ``evaluate_answer`` of its local-model test script.

Source: github.com/Lliar-liar/Daily-Omni at commit fccb83806fb5c7a4b791beafb8771b22bd55c557,
``test_model/Qwen2.5-Omni/testmodel.py`` (the script the README gives for the omni models; the Qwen2.5-VL and
VideoLLaMA2 scripts and ``test_model_api/test_utils.py``'s ``evaluate_answer`` apply the same first-letter test).

Quirks kept:

- the text after the first ``assistant`` (lowercase, anywhere) is read, when the word occurs; otherwise the whole text;
- the letter is the first non-space character when it is A, B, C or D in either case: "b" reads ``B``, "dog" reads
  ``D``, "Answer: C" reads ``A``, "Based on the video, D." reads ``B``;
- anything else ("(B)", "The answer is B", the option's text, a ``<think>`` block first, Chinese) is wrong: the kept
  text is compared whole with the gold letter, which it never equals;
- empty answers are wrong; every answer stays in the denominator.
"""

from __future__ import annotations

import re

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer, verdict_for
from omnieval.scoring.letters import letter_source

_AFTER_ASSISTANT = re.compile(r"assistant\s*([\s\S]*)$")
_LEADING_LETTER = re.compile(r"\s*([A-D])", re.IGNORECASE)


def answer_span(text: str) -> str:
    """The part of the output the script reads: after the first ``assistant`` if any (stripped), else all of it."""
    found = _AFTER_ASSISTANT.search(text)
    return found.group(1).strip() if found else text


@register_scorer("daily-omni")
class DailyOmniScorer:
    """Daily-Omni's rule: the first character, when it is a letter A-D in either case; anything else is wrong."""

    name = "daily-omni"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        span = answer_span(text or "")
        found = _LEADING_LETTER.match(span)
        if found is None:
            return verdict_for(None, item, "unparsed", "does not start with A-D")
        letter = found.group(1).upper()
        return verdict_for(letter, item, letter_source(span, found.start(1)), "first character")
