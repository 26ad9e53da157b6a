"""OmniBench's released scoring rule, registered as ``omnibench``: "(X)", else "X ", else "X.", else option text,
and the gold letter re-parsed from the gold answer's text by the same rule.

Source: github.com/multimodal-art-projection/OmniBench, ``inference/answer_parsing.py`` at commit
21a7f7523baad7b0ada093ec7d036c0e017bd571 (``parse_multi_choice_response``, adapted from MMMU's parser) called by
``inference/calculate_metrics.py`` at commit 335f0ba58ebb4893bbe85187f16dafe76a78b65f with ``default_answer='N/A'``.
Its quirks, each kept:

- no stripping (``do_strip`` is off by default), the answer padded with a space either side;
- pass 1: every label written ``(X)`` anywhere; several: the last ``(X)`` wins;
- pass 2: every label followed by a space anywhere, case-sensitive, the end of the answer counting as a space
  ("A dog" finds A, "Answer: B" finds B, "Based" finds nothing); several: the last one between spaces, and where
  none stands between spaces, the first label found (so "A man sings, then D" is read as D but "A man. D" as A);
- pass 3: every label followed by a dot ("B." at the end of a sentence);
- pass 4, only for an answer of more than five words: every option text in it, case-insensitive (the last wins);
- no candidate: the answer is 'N/A', counted wrong and kept in the denominator (``unparsed``);
- the gold letter is not the release's label but what the same parser reads in the gold option's text: a gold text
  such as "A man is singing." is read as A whatever its label; a gold text that parses to nothing stops the
  release's evaluation (its ``assert``), and raises ``ValueError`` here;
- reasoning blocks are not removed: a letter inside ``<think>`` counts like any other.

A ``None`` text (no output) is read as the empty answer (the release's inference always writes a string).
"""

from __future__ import annotations

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer
from omnieval.scoring.mmmu_style import last_candidate, option_text_candidates, padded


def parse(text: str, item: ScoreItem) -> tuple[str | None, str]:
    """(label, how) by the release's passes; None for its 'N/A'."""
    response = padded(text)
    bracketed = [label for label in item.labels if f"({label})" in response]
    if bracketed:
        return last_candidate(response, bracketed, [f"({label})" for label in bracketed]), "(X)"
    for suffix, how in ((" ", "letter and space"), (".", "letter and dot")):
        letters = [label for label in item.labels if f"{label}{suffix}" in response]
        if letters:
            return last_candidate(response, letters, [f" {label} " for label in letters]), how
    texts = option_text_candidates(response, item)
    if texts:
        needles = [item.options[item.labels.index(label)].lower() for label in texts]
        return last_candidate(response.lower(), texts, needles), "option text"
    return None, "N/A"


def gold_label(item: ScoreItem) -> str:
    """The gold letter as the release takes it: the gold option's text parsed by the same rule."""
    label, _ = parse(item.answer_text, item)
    if label is None:
        raise ValueError(f"the gold answer's text {item.answer_text!r} parses to no letter by OmniBench's rule (its "
                         "calculate_metrics.py stops on this item)")
    return label


@register_scorer("omnibench")
class OmniBenchScorer:
    """OmniBench's ``calculate_metrics.py`` / ``answer_parsing.py`` (module doc)."""

    name = "omnibench"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        gold = gold_label(item)
        choice, how = parse(text or "", item)
        if gold != item.answer:
            how += f"; gold re-parsed as {gold}"
        if choice is None:
            return Verdict(None, False, "unparsed", how)
        return Verdict(choice, choice == gold, "parsed", how)
