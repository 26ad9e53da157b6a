"""Video-MME-v2's official rules: the answer rule ``extract_characters_regex_v2`` and the grouped non-linear score
of its released ``evaluation/test_video_mme_v2.py``.

Source: github.com/MME-Benchmarks/Video-MME-v2, ``evaluation/test_video_mme_v2.py`` at commit
013b6c92f1c4b37b9a020c71fd709614d3a7d279 (the standalone script its README gives for scoring; VLMEvalKit's and
lmms-eval's tasks carry the same tables).

**Answer rule.** The answer is stripped, then each of eleven prefixes (``Final Answer:``, ``The best answer is``,
``The correct answer is``, ``The answer is``, ``The answer``, ``The best option is``, ``The correct option is``,
``Best answer:``, ``Best option:``, ``Answer:``, ``Option:``) is removed wherever it occurs, case-sensitively, one
after another; the letter is then the first capital A-H anywhere in what is left, inside a word too ("Based on the
video, D." reads ``B``). No capital A-H gives no letter (the "more than ten words" branch gives no letter exactly
when the search finds none). An answer without a letter scores -1: plain accuracy leaves it out of its denominator
(``simple accuracy (valid only)``), so its verdict's ``correct`` is None; the group score counts the -1 (below).
Option texts are never read and ``<think>`` blocks are not stripped.

**Group score.** The questions come in groups of four about one clip. A ``relevance`` group scores the square of its
share right: 0, 1/16, 4/16, 9/16, 1 for 0-4 right (its table, keyed by the sum of the four scores). A ``logic``
group is a chain: its score is read from the length of the run of right answers from the first question, by the
table of its ``group_structure``: ``[1, 2, 3, 4]`` the relevance table; ``[1, [2, 3], 4]`` (steps 2 and 3 in
parallel) 0, 1/12, 4/12, 7/12, 1, the run extended by one where it stops after question 1 and question 3 is right;
``[[1, 2], 3, 4]`` (steps 1 and 2 in parallel) 0, 1/10, 2/10, 5/10, 1, a run of none counted as one where question
2 is right. The total is the mean over groups. Scores here are shares (the script's points / 100).

Quirks kept, each decides some scores:

- an unparseable answer's -1 is summed in a relevance group (three right and one unparseable: two right, 4/16; a
  negative sum scores 0) and counts as **right** in a logic chain (``if val`` holds for -1);
- the script forms groups by row position (rows 0-3, 4-7, ...) and takes the group's type, structure and level from
  its **last** row; the release gives the level (and ``second_head`` / ``third_head``) on the last question of each
  group only, so ``videomme_v2`` carries the group's values on its four items.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer
from omnieval.scoring.letters import letter_source
from omnieval.scoring.videomme import first_capital_letter

ANSWER_PREFIXES: tuple[str, ...] = (
    "Final Answer:", "The best answer is", "The correct answer is", "The answer is", "The answer",
    "The best option is", "The correct option is", "Best answer:", "Best option:", "Answer:", "Option:",
)
_LETTER = re.compile(r"[A-H]")

UNPARSED = -1
"""The score the script gives an answer without a letter (a group's right answers are 1, wrong ones 0)."""
GROUP_TYPES = ("relevance", "logic")
SQUARES = (0.0, 1 / 16, 4 / 16, 9 / 16, 1.0)
"""Relevance groups and the plain chain ``[1, 2, 3, 4]``: the square of the share right."""
CHAIN_TABLES: dict[str, tuple[float, ...]] = {
    "[1, 2, 3, 4]": SQUARES,
    "[1, [2, 3], 4]": (0.0, 1 / 12, 4 / 12, 7 / 12, 1.0),
    "[[1, 2], 3, 4]": (0.0, 1 / 10, 2 / 10, 5 / 10, 1.0),
}
"""The logic groups' tables, by structure (written as Python writes the parsed list), indexed by the run's length."""


def extract_letter(text: str | None) -> tuple[str, int, str]:
    """``(letter or "", its index, the stripped text)`` under the released rule (module doc); None reads as ""."""
    return first_capital_letter(text, ANSWER_PREFIXES, _LETTER)


@register_scorer("videomme-v2")
class VideoMMEv2Scorer:
    """Video-MME-v2's ``extract_characters_regex_v2``; answers without a capital A-H are dropped from plain
    accuracy's denominator."""

    name = "videomme-v2"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        letter, index, body = extract_letter(text)
        if not letter:
            return Verdict(None, None, "unparsed", "no capital A-H: not counted")
        return Verdict(letter, letter == item.answer, letter_source(body, index), "first capital A-H")


def chain_structure(text: str) -> str:
    """A ``group_structure`` as the release writes it (``"[1,[2,3],4]"``), normalised to the key of
    ``CHAIN_TABLES``; a ``ValueError`` for a text that is not one of the three structures."""
    try:
        key = str(ast.literal_eval(text.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError(f"group_structure {text!r} is not a list") from None
    if key not in CHAIN_TABLES:
        raise ValueError(f"group_structure {text!r} is none of {', '.join(CHAIN_TABLES)}")
    return key


def relevance_score(scores: Sequence[int]) -> float:
    """The square of the share right, by the sum of the scores (an unparseable answer's -1 included)."""
    total = sum(scores)
    return SQUARES[total] if 0 <= total < len(SQUARES) else 0.0


def logic_score(scores: Sequence[int], structure: str) -> float:
    """The chain's score: the run of non-zero scores from the first question (-1 counts as right), extended as
    the parallel steps of ``structure`` allow, read from its table."""
    key = chain_structure(structure)
    run = 0
    for value in scores:
        if not value:
            break
        run += 1
    if key == "[1, [2, 3], 4]" and run == 1 and len(scores) > 2 and scores[2]:
        run = 2
    elif key == "[[1, 2], 3, 4]" and run == 0 and len(scores) > 1 and scores[1]:
        run = 1
    table = CHAIN_TABLES[key]
    return table[run] if run < len(table) else 0.0


def group_score(scores: Sequence[int], group_type: str, structure: str | None) -> float:
    """One group's score (module doc): ``scores`` its questions' 1 (right), 0 (wrong) or -1 (unparseable) in the
    group's order."""
    if group_type == "relevance":
        return relevance_score(scores)
    if group_type == "logic":
        return logic_score(scores, structure or "")
    raise ValueError(f"group_type {group_type!r} is none of {', '.join(GROUP_TYPES)}")
