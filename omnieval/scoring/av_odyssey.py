"""AV-Odyssey's released scoring rule, registered as ``av-odyssey``: any capital option letter anywhere, else A.

Source: github.com/AV-Odyssey/AV-Odyssey, commit 830759eaa60b86f2508de690822073815a401a4a, ``evaluation.py``
(``parse_multi_choice_response``, adapted from MMMU's parser; the prediction is then compared with the gold letter).
Its quirks, each kept:

- the answer's ends are stripped of ``, . ! ? ; : '`` one kind after the other, in that order, which matters to
  the option-text pass: "i hear it clearly: the bell never rings." no longer holds the option "the bell never
  rings." and is taken as A;
- the first pass takes every label that occurs *anywhere* as a bare capital letter (MMMU looks for ``(B)``; this
  release dropped the parentheses), so "Based on the video, D." finds B and D;
- several letters are resolved by their last ``(X)``; an answer with no ``(X)`` at all gets the first label found,
  so "Based on the video, D." is read as B and "I think C, not A" as A;
- MMMU's second pass (a letter between spaces) can never run, since the first pass finds any such letter;
- only an answer with no capital A-D at all and more than five words is read by its option texts (the last one
  named wins);
- an answer with no candidate, the empty answer included, is taken as A (``forced``: the release's own comment
  says it chose A instead of a random letter);
- reasoning blocks are not removed: a letter inside ``<think>`` counts like any other.

A ``None`` text (no output) is read as the empty answer (the release always has a string: "error!" on failure).
"""

from __future__ import annotations

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer, verdict_for
from omnieval.scoring.mmmu_style import last_candidate, option_text_candidates, padded

_STRIPPED = (",", ".", "!", "?", ";", ":", "'")
DEFAULT = "A"


def strip_ends(text: str) -> str:
    """The release's end-stripping: each character kind of ``_STRIPPED`` in turn."""
    for char in _STRIPPED:
        text = text.strip(char)
    return text


def parse(text: str, item: ScoreItem) -> tuple[str | None, str]:
    """(label, how) by the release's passes; None where no pass finds a candidate (the caller applies the A)."""
    response = padded(strip_ends(text))
    letters = [label for label in item.labels if label in response]
    if letters:
        if len(letters) == 1:
            return letters[0], "capital letter"
        return last_candidate(response, letters, [f"({label})" for label in letters]), "last (X), else first letter"
    texts = option_text_candidates(response, item)
    if texts:
        lowered = response.lower()
        needles = [item.options[item.labels.index(label)].lower() for label in texts]
        return last_candidate(lowered, texts, needles), "option text"
    return None, ""


@register_scorer("av-odyssey")
class AVOdysseyScorer:
    """AV-Odyssey's ``evaluation.py`` parser (module doc)."""

    name = "av-odyssey"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        choice, how = parse(text or "", item)
        if choice is None:
            return verdict_for(DEFAULT, item, "forced", "no candidate: default A")
        return verdict_for(choice, item, "parsed", how)
