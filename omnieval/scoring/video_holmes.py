"""Video-Holmes' official rule: the answer reading of its released ``evaluate.py``.

Source: github.com/TencentARC/Video-Holmes, ``evaluate.py`` at commit 7745c875dc514d44c5426fa57cbe7933f3306d40 (the
script its README gives for evaluation).

The text read is what the last ``<answer>...</answer>`` pair holds (stripped), else the whole answer. The letter is
then the first of ``A`` ... ``F``, in that order (not the order they appear in the text), that the text holds
followed by a space or a colon or preceded by ``[``; failing that, the first of ``A`` ... ``F``, in that order, the
text holds anywhere, inside a word too; failing that, no letter, which the script counts as a wrong answer (in the
denominator). Quirks kept, each decides some verdicts:

- letters are tried in alphabetical order, not in the order the text gives them: "B or C" reads ``B`` but "C or B"
  reads ``C`` (``C`` stands before a space there, ``B`` nowhere does);
- the second pass finds a capital inside a word: "Answer: C" reads ``A``, "Based on the clues, C" reads ``B``,
  "<ANSWER>C</ANSWER>" (the tags are matched case-sensitively) reads ``A``;
- only ``A`` to ``F`` exist for the rule (the release has six options a question), and ``<think>`` blocks are not
  stripped where no ``<answer>`` pair is given ("<think>A quick look</think> C" reads ``A``).

VLMEvalKit's ``vlmeval/dataset/utils/videoholmes.py`` (``extract_option``) applies the same cascade to the last
``<answer>`` pair only and reads an answer without one as wrong; the release's script reads the whole text then.
"""

from __future__ import annotations

import re

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer
from omnieval.scoring.letters import letter_source

LETTERS = "ABCDEF"
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


def answer_text(text: str | None) -> str:
    """What the last ``<answer>`` pair holds, stripped; the whole text where there is none (None reads as "")."""
    found = _ANSWER.findall(text or "")
    return found[-1].strip() if found else (text or "")


def read_letter(text: str) -> tuple[str | None, int]:
    """``(letter, where it was found)`` by the released cascade (module doc); ``(None, -1)`` for none."""
    for letter in LETTERS:
        hits = [i for i in (text.find(f"{letter} "), text.find(f"{letter}:")) if i >= 0]
        bracket = text.find(f"[{letter}")
        hits += [bracket + 1] if bracket >= 0 else []
        if hits:
            return letter, min(hits)
    for letter in LETTERS:
        if letter in text:
            return letter, text.index(letter)
    return None, -1


@register_scorer("video-holmes")
class VideoHolmesScorer:
    """Video-Holmes' ``evaluate.py`` reading; an answer it reads no letter in is wrong (counted)."""

    name = "video-holmes"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        body = answer_text(text)
        letter, index = read_letter(body)
        if letter is None:
            return Verdict(None, False, "unparsed", "no A-F: counted wrong")
        return Verdict(letter, letter == item.answer, letter_source(body, index), "first of A-F by the cascade")
