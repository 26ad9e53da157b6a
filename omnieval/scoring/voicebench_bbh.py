"""VoiceBench's ``bbh`` rule: the yes / no or (A) / (B) answer read out of an open answer by task-specific phrases,
and the row counted right when it is the row's ``reference``; the official verdict of ``bbh``'s open items
(``bbh_verdict``, read by the ``voicebench`` scorer's ``score_open``).

Source: github.com/MatthewCYM/VoiceBench, ``src/evaluator/bbh.py`` at commit
533815410e3f4d602bd15a1de7105aea4acd828c (``BBHEvaluator``); its phrases are data in
``omnieval.scoring.voicebench_bbh_phrases``. The rule, as the release runs it:

1. the answer is normalised (``normalize``): lower-cased; a trailing ``<|user|>`` and a leading ``<1>``, ``<2>`` or
   ``<3>`` cut off; ``<|turn_end|>`` removed; ``:``, ``**``, ``"``, ``-``, ``,``, ``.`` and ``：`` turned into
   spaces; runs of whitespace into one space;
2. the task (``bbh_task``, read by the converter from a substring of the row's ``id``) picks the list:
   ``sports_understanding``, ``navigate`` and ``web_of_lies`` read the yes / no list (``YES_NO``) first, then their
   own; ``hyperbaton`` reads its own alone;
3. the first rule of the list that matches decides (``0``: no / (A), ``1``: yes / (B)), so the order of the list,
   not the place in the answer, decides between two phrases;
4. where none matches the release draws ``random.choice([0, 1])``, unseeded: the score of the same answers changes
   from run to run. Here the draw is keyed (``core.keyed``: the seed ``GUESS_SEED``, the item and the answer's
   text), so a rerun gives the same verdict; the verdict's source is ``forced``, and ``how`` says so;
5. the score is the share of rows whose read answer is the reference's (``yes`` 1, ``no`` 0, ``(a)`` 0, ``(b)`` 1,
   the reference lower-cased), every row in the denominator, drawn answers included.

Quirks of the released lists, each kept:

- ``hyperbaton``'s second rule reads the bare answer ``b`` as (A) (``response == 'b'`` returns 0);
- ``web_of_lies`` reads an answer ending in ``must be lying`` as yes, and ``sports_understanding``'s pattern
  ``the sentence (.+?) is not plausible`` reads yes (the plain phrase ``the sentence is not plausible``, earlier,
  reads no);
- phrases are plain substrings: ``answer is no`` matches "the answer is not ...", ``answer is a`` (hyperbaton)
  matches "the answer is actually (b)", and the starts / ends tests match inside words ("nothing", "yesterday",
  "casino", "applies" end or start with ``no``, ``yes``, ``lies``);
- normalisation keeps apostrophes, so the phrases written without them (``you haven t returned``, ``it s not a
  plausible``, ``i ll be back``) match only an answer that has a space, a hyphen or a dot there instead;
- ``i would say that it is not a plausible sentence.`` ends in a dot, which normalisation removes: it never matches;
  ``yes the sentence is plausible`` is listed twice, ``the answer is without any modification no`` in both
  ``YES_NO`` and the sports list, and ``considering these points the sentence is not plausible`` comes after ``the
  sentence is not plausible``: the later copies never decide;
- reasoning blocks (``<think>``) are not removed: a phrase inside one counts like any other.

A ``None`` answer (no output) is read as the empty answer, which matches no phrase.
"""

from __future__ import annotations

import re
from functools import cache

from omnieval.core.keyed import keyed_rng
from omnieval.scoring.base import Verdict
from omnieval.scoring.voicebench_bbh_phrases import (
    HYPERBATON,
    NAVIGATE,
    SPORTS_UNDERSTANDING,
    WEB_OF_LIES,
    YES_NO,
    Rule,
)

TASK_RULES: dict[str, tuple[Rule, ...]] = {
    "sports_understanding": YES_NO + SPORTS_UNDERSTANDING,
    "hyperbaton": HYPERBATON,
    "navigate": YES_NO + NAVIGATE,
    "web_of_lies": YES_NO + WEB_OF_LIES,
}
"""The rules each task reads, in order (module doc, step 2)."""
REFERENCE_INDEX: dict[str, int] = {"yes": 1, "no": 0, "(a)": 0, "(b)": 1}
"""The release's ``ground_truth_mapping``: a lower-cased reference -> the index the rules return."""
GUESS_SEED = 0
"""The seed of the keyed draw that stands for the release's unseeded guess (module doc, step 4)."""
_SPACED = (":", "**", '"', "-", ",", ".", "：")


def normalize(text: str) -> str:
    """The answer as the release's ``BBHEvaluator.normalize`` leaves it (module doc, step 1)."""
    response = text.lower()
    if response.endswith("<|user|>"):
        response = response[:-len("<|user|>")].strip()
    if response.startswith(("<1>", "<2>", "<3>")):
        response = response[3:].strip()
    response = response.replace("<|turn_end|>", "")
    for mark in _SPACED:
        response = response.replace(mark, " ")
    return " ".join(response.split())


@cache
def _pattern(text: str) -> re.Pattern:
    return re.compile(text)


def _matches(test: str, text: str, response: str) -> bool:
    if test == "contains":
        return text in response
    if test == "equals":
        return response == text
    if test == "starts":
        return response.startswith(text)
    if test == "ends":
        return response.endswith(text)
    if test == "regex":
        return _pattern(text).search(response) is not None
    raise ValueError(f"unknown test {test!r} in the bbh phrase lists")


def read_answer(text: str | None, task: str) -> tuple[int | None, str]:
    """(the index the release reads, the rule that decided); None where no rule matches (the release then guesses).
    An unknown ``task`` is an error naming the tasks the release reads."""
    if task not in TASK_RULES:
        raise ValueError(f"bbh task {task!r} is none of the tasks the release reads ({', '.join(TASK_RULES)})")
    response = normalize(text or "")
    for test, phrase, answer in TASK_RULES[task]:
        if _matches(test, phrase, response):
            return answer, f"{test} {phrase!r}"
    return None, "no phrase"


def guess(item_id: str, text: str | None) -> int:
    """The keyed draw standing for the release's ``random.choice([0, 1])`` (module doc, step 4): a function of the
    item and the answer's text alone, the same in every run, worker and condition."""
    return int(keyed_rng(GUESS_SEED, "voicebench-bbh-guess", item_id, text or "").integers(2))


def bbh_verdict(text: str | None, task: str, reference: str, item_id: str) -> Verdict:
    """The release's verdict on one ``bbh`` answer (module doc): correct when the index read (or, where no phrase
    matches, the keyed guess) is the reference's. A reference outside ``yes``, ``no``, ``(A)``, ``(B)`` is an
    error (the release raises on it too)."""
    truth = REFERENCE_INDEX.get((reference or "").lower())
    if truth is None:
        raise ValueError(f"bbh reference {reference!r} is none of yes, no, (A), (B)")
    answer, how = read_answer(text, task)
    if answer is None:
        answer = guess(item_id, text)
        return Verdict(None, answer == truth, "forced",
                       f"bbh {task}: no phrase matched, keyed guess {answer} (the release draws one unseeded)")
    return Verdict(None, answer == truth, "parsed", f"bbh {task}: {how} -> {answer}")
