"""JointAVBench's released scoring rule, registered as ``jointavbench``: every way of naming a letter is collected,
and an answer that names more than one letter, or none, leaves the denominator.

Source: github.com/jointavbench/JointAVBench: ``evaluation/evaluation.py`` at commit
5060a3853e1d1efd97536b30893dc62d6d4b52c5 (``extract_model_answer``, called with the shown options' texts) and
``evaluation/eval_result.py`` at commit 388dc4bd0d4097a20722145f1f3f57f1ccc47e14 (accuracy over the rows whose
``model_answer`` is not None, compared with ``correct_prefix``). The letters looked for are always ``A``-``D`` (the
release's questions have four options). Its quirks, each kept:

- the answer's runs of whitespace become single spaces, then every pass adds what it finds to one set; the set
  decides only at the end: one letter is the answer, two or more (or none) is no answer;
- pass 1, case-insensitive phrases: "answer" (optionally "is", ":", "=", "-") then a letter, "X is correct/right/
  the answer", "option X", "select(ed) X", "'X' is the answer"; the first phrase's letter is taken with the quote,
  bracket or spaces around it, so "answer is (C)", "answer: 'B'" and "the answer is B because ..." yield no letter
  by that phrase, while "the answer is b." yields ``B`` (the case is ignored);
- pass 2, case-sensitive: a capital letter standing alone and followed by a dot and a space ("B. " anywhere);
- pass 3: every option whose text occurs in the answer as written or lower-cased (the answer itself is not
  lower-cased), so an answer that quotes a second option's text next to its letter names two letters;
- pass 4, for a one-word answer: every letter ``A``-``D`` the upper-cased word contains, so "Bad" names ``A``,
  ``B`` and ``D`` (no answer) and "Answer" names ``A``;
- no answer (``model_answer`` None) leaves the denominator (``correct=None``), whatever the reason;
- reasoning blocks are not removed: a letter inside ``<think>`` counts like any other.

A ``None`` text (no output) also leaves the denominator.
"""

from __future__ import annotations

import re

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer

LETTERS = ("A", "B", "C", "D")
_PHRASES = (
    re.compile(r"answer(?: is)?\s*[:=-]?\s*([\"'(]?\s*[A-D]\s*[\"')]?)", re.IGNORECASE),
    re.compile(r"([A-D])(?:\s*is the|\)?\s*is)\s*(?:correct|right|answer)", re.IGNORECASE),
    re.compile(r"option\s*([A-D])\b", re.IGNORECASE),
    re.compile(r"select(?:ed)?\s*([A-D])\b", re.IGNORECASE),
    re.compile(r"[\"'(]\s*([A-D])\s*[\"')]\s*(?:is|as)\s*(?:the )?(?:answer|correct)", re.IGNORECASE),
)
"""The release's answer phrases (pass 1, module doc), in its order; group 1 is the letter as it captures it."""


def named_letters(text: str, item: ScoreItem) -> tuple[set[str], list[str]]:
    """Every letter the release's passes find in ``text`` (module doc), and the passes that found one."""
    cleaned = " ".join(text.split())
    found: set[str] = set()
    passes: list[str] = []

    def add(letters, name: str) -> None:
        letters = {letter for letter in letters if letter in LETTERS}
        if letters:
            found.update(letters)
            passes.append(name)

    add((m.group(1).upper() for p in _PHRASES for m in p.finditer(cleaned)), "answer phrase")
    add((x for x in LETTERS if re.search(rf"\b{x}\b(?=\.\s)", cleaned)), "letter, dot, space")
    add((label for label, option in zip(item.labels, item.options, strict=True)
         if option in cleaned or option.lower() in cleaned), "option text")
    if len(cleaned.split()) == 1:
        add((x for x in LETTERS if x in cleaned.strip().upper()), "one-word answer")
    return found, passes


@register_scorer("jointavbench")
class JointAVBenchScorer:
    """JointAVBench's ``extract_model_answer`` and ``eval_result.py`` (module doc)."""

    name = "jointavbench"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        if text is None:
            return Verdict(None, None, "unparsed", "no output: row left out")
        found, passes = named_letters(text, item)
        if len(found) == 1:
            choice = next(iter(found))
            return Verdict(choice, choice == item.answer, "parsed", ", ".join(passes))
        how = f"several letters ({''.join(sorted(found))}): left out" if found else "no letter: left out"
        return Verdict(None, None, "unparsed", how)
