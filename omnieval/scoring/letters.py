"""Helpers the released scorers' letter rules share: whether the letter a rule took is one the text names.

Several released rules take the first capital ``A``-``D`` in the text, or the text's first character, without
looking at what surrounds it, so "Based on the video, D." reads as ``B`` and "Answer: C" as ``A``. The verdict keeps
the rule's choice (that is the official number) but calls it ``forced`` when the letter sits inside a word: the text
does not name that option.
"""

from __future__ import annotations

from omnieval.scoring.base import AnswerSource


def inside_word(text: str, index: int) -> bool:
    """True when the character at ``index`` touches another letter on either side (part of a word, not a label)."""
    before = text[index - 1] if index > 0 else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    return before.isalpha() or after.isalpha()


def letter_source(text: str, index: int) -> AnswerSource:
    """``parsed`` for a letter standing as a label, ``forced`` for one taken out of a word."""
    return "forced" if inside_word(text, index) else "parsed"
