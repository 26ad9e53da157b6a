"""Video-MME's official rule: ``extract_characters_regex`` of its ``eval_your_results.py``.

Source: github.com/MME-Benchmarks/Video-MME, ``evaluation/eval_your_results.py`` at commit
4e7566d36f63121fc72f040654d6f38f83f30125 (its last version; the script was removed from the repository later, in
49a2e67, and is still what the benchmark's README points users to for scoring).

Quirks kept (each decides some verdicts):

- the answer prefixes are removed case-sensitively, one after another, before any letter is looked for;
- two missing commas in the prefix list glue four prefixes into two never-seen strings, so "The best option is B"
  and "Best answer: B" keep their prefix (and "Best" then yields ``B``);
- the letter is the first capital A, B, C or D anywhere in what is left, inside a word too: "Based on the video, D."
  reads ``B``, "Answer: C" reads ``A``, "(B)" reads ``B``;
- more than ten words and no capital A-D gives no letter (the same as no letter at all);
- an answer with no letter is left out of the denominator ("answered" counts only extracted letters): its verdict's
  ``correct`` is None;
- option texts are never read, and ``<think>`` blocks are not stripped (their first capital A-D counts);
- a missing answer (``None``) is read as empty (the script would stop on it).
"""

from __future__ import annotations

import re

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer
from omnieval.scoring.letters import letter_source

# The released list, written as Python joins it: the two missing commas concatenate neighbouring strings.
ANSWER_PREFIXES: tuple[str, ...] = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option is" "The correct option is",
    "Best answer:" "Best option:",
)
_LETTER = re.compile(r"[ABCD]")


def first_capital_letter(text: str | None, prefixes: tuple[str, ...],
                         letters: re.Pattern[str] = _LETTER) -> tuple[str, int, str]:
    """The rule Video-MME, Video-MME-v2 (``letters`` A-H) and VLMEvalKit's WorldSense share: ``(letter or "", its
    index, the stripped text)``."""
    body = (text or "").strip()
    for prefix in prefixes:
        body = body.replace(prefix, "")
    found = letters.search(body)
    # The ">10 words and no capital A-D" branch gives "" exactly when the search does; kept implicit here.
    if found is None:
        return "", -1, body
    return found.group(0), found.start(), body


@register_scorer("videomme")
class VideoMMEScorer:
    """Video-MME's ``extract_characters_regex``; answers without a capital A-D are dropped from the denominator."""

    name = "videomme"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        letter, index, body = first_capital_letter(text, ANSWER_PREFIXES)
        if not letter:
            return Verdict(None, None, "unparsed", "no capital A-D: not counted")
        return Verdict(letter, letter == item.answer, letter_source(body, index), "first capital A-D")
