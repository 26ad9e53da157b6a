"""MMAU's released scoring rule, registered as ``mmau``: the answer's words, never a letter.

Source: github.com/Sakshi113/MMAU, commit 110127f54c0dfba3faa5ec9feee4a7e4148679c5, ``evaluation.py``
(``string_match`` and its ``__main__`` loop). The rule compares word sets, lower-cased, where a word is a run of
Unicode word characters (``\\b\\w+\\b``). Its quirks, each kept:

- an answer is correct when it holds every word of the gold option's text and no word of another option that the
  gold text lacks; it never reads an option letter, so "B" or "(B)" is correct only where the gold text's words are
  "b" (and an answer naming the gold letter and text, "(B) dog barking", is read by its words alone);
- words shared with the gold text never count against it, so an answer may add any words that no other option has
  ("I think it is a dog barking" is correct where "i", "think", ... are in no option);
- options with the same words (in another order or case) cannot be told apart: an answer is correct for both;
- an answer with no word at all (empty, only punctuation) is wrong;
- a row without an output is skipped: it leaves the denominator (``correct=None`` here, for a ``None`` text);
- reasoning blocks are not removed: the words of a ``<think>`` block count like any others.

The rule decides correct or not; the option an answer is taken to mean (``choice``) is the one option whose words
the same test accepts (two options pass only where their word sets are equal), else none (``unparsed``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer

_WORD = re.compile(r"\b\w+\b")


def words(text: str) -> set[str]:
    """The release's word set: lower-cased runs of word characters."""
    return set(_WORD.findall(text.lower()))


def words_match(answer_words: set[str], target: str, options: Sequence[str]) -> bool:
    """True when ``answer_words`` hold all of ``target``'s words and none of the words another option has and
    ``target`` lacks."""
    if not answer_words:
        return False
    target_words = words(target)
    foreign = set().union(*(words(option) - target_words for option in options))
    return target_words <= answer_words and answer_words.isdisjoint(foreign)


def score_by_words(text: str | None, item: ScoreItem) -> Verdict:
    """The verdict of the word rule shared by MMAU and MMAR (module doc)."""
    if text is None:
        return Verdict(None, None, "unparsed", "no output: row skipped")
    answer_words = words(text)
    correct = words_match(answer_words, item.answer_text, item.options)
    if correct:
        return Verdict(item.answer, True, "parsed", "all gold words, no other option's")
    chosen = [label for label, option in zip(item.labels, item.options) if words_match(answer_words, option,
                                                                                       item.options)]
    if chosen:
        return Verdict(chosen[0], False, "parsed", "another option's words")
    return Verdict(None, False, "unparsed", "no word" if not answer_words else "no option's words alone")


@register_scorer("mmau")
class MMAUScorer:
    """MMAU's ``evaluation.py`` word match (module doc)."""

    name = "mmau"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        return score_by_words(text, item)
