"""OmniVideoBench's official rule: ``extract_model_answer_thinking`` and ``clean_text`` of its ``utils/utils.py``.

Source: github.com/NJU-LINK/OmniVideoBench at commit 1915466a319302dcae1a4bad05de9698b1d3f85d, ``utils/utils.py``,
as its ``eval/qwen3_omni_eval_thinking.py`` applies it (``is_correct = clean_text(answer) == clean_text(gold)``, the
gold being the item's ``correct_option`` letter, as ``dataloader.py`` reads it). The non-thinking scripts call
``extract_model_answer``, which differs only on text holding a closed ``<think>...</think>`` block (it keeps it).

Quirks kept:

- ``<think>...</think>`` blocks are removed (all of the text is kept when nothing else is left);
- the text after the last ``assistant`` (lowercase, anywhere) is read when the word occurs;
- the inside of ``/box{...}`` and then of ``\\boxed{...}`` replaces the answer;
- the answer is lowercased, cut to its first character when its second is a full stop ("B. Dog" is ``b``), stripped
  of every ASCII punctuation mark and its spaces collapsed, then compared whole with the gold letter: "(B)", "b",
  "**B**" are right, "The answer is B", "B) Dog" and the option's text are wrong; no letter is searched for;
- an extracted answer beginning ``Error:`` or ``Video file not found`` is taken for a failed inference and left out
  of the denominator (``correct`` None); every other answer is counted.
"""

from __future__ import annotations

import re
import string

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_SLASH_BOX = re.compile(r"/box\{([^}]+)\}")
_BOXED = re.compile(r"\\boxed\{([^}]+)\}")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
FAILURE_PREFIXES = ("Video file not found", "Error:")


def extracted_answer(text: str) -> str:
    """The answer the scripts store as ``model_answer``: reasoning removed, after ``assistant``, unboxed."""
    answer = _THINK.sub("", text).strip() or text
    answer = answer.split("assistant")[-1].strip() if "assistant" in answer else answer.strip()
    for box in (_SLASH_BOX, _BOXED):
        found = box.search(answer)
        if found:
            answer = found.group(1).strip()
    return answer


def cleaned(text: str) -> str:
    """``clean_text``: lowercase, ``/box`` content, a leading ``X.`` cut to ``x``, punctuation and extra spaces out."""
    text = text.lower()
    found = _SLASH_BOX.search(text)
    if found:
        text = found.group(1)
    if len(text) > 1 and text[1] == ".":
        text = text[0]
    return " ".join(text.translate(_PUNCTUATION).split())


@register_scorer("omnivideobench")
class OmniVideoBenchScorer:
    """OmniVideoBench's rule: the cleaned answer must equal the cleaned gold letter exactly."""

    name = "omnivideobench"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        answer = extracted_answer(text or "")
        if answer.startswith(FAILURE_PREFIXES):
            return Verdict(None, None, "unparsed", "read as a failed inference: not counted")
        reading = cleaned(answer)
        choice = reading.upper() if reading.upper() in item.labels else None
        if choice is None:
            return Verdict(None, False, "unparsed", "not a bare option letter")
        return Verdict(choice, reading == cleaned(item.answer), "parsed", "whole answer equals a letter")
