"""MMAU-Pro's instruction-following checks (``instruction following`` rows): each row names one constraint
(``task_identifier``) with its arguments (``kwargs``), and the answer follows it or not.

Source: github.com/sonalkum/MMAUPro, ``evaluate_mmau_pro_comprehensive.py`` at commit
226976255135302de77c6860ed3b9a66c4998c5e (``evaluate_aif_sample`` and the helpers above it, ``main``). The release
scores the category per question: the share of rows whose answer follows its one constraint (``success_rate``, the
mean of the per-row booleans); that is ``open_official_accuracy`` over these items (``stats.open_metrics``: a plain
mean of ``official_correct``; the verdict's ``how`` never carries IFEval's counts, so the IFEval shares are not
computed for them). Strict only: no loose variants, no blank-answer rule.

The 27 ids (``CHECKS``) and how each relates to IFEval's checks (``omnieval.scoring.ifeval``):

- ``No Commas``: no ``,`` anywhere; the same as IFEval's ``punctuation:no_comma`` (reused).
- ``Repeat Prompt``: the answer, stripped and lower-cased, starts with the row's ``question`` stripped and
  lower-cased; the same test as IFEval's ``combination:repeat_prompt`` (reused), with the question as the prompt.
- ``Number Sentences (at least | at most | range)``: nltk's ``sent_tokenize`` (punkt) in the release; omnieval
  counts with IFEval's documented splitter (``ifeval.count_sentences``: no punkt model can be downloaded here; it
  can differ by one on abbreviations punkt learnt, numbered lists and ellipses).
- Own code, since IFEval's check of the same name behaves otherwise:

  - ``Include Keywords``: ``keywords`` split at ``", "``, each a case-blind *substring* of the answer (IFEval: a
    regular expression search);
  - ``Keyword Frequency``: the keyword, lower-cased and escaped, between ``\\b`` in the lower-cased answer, *exactly*
    ``N`` times (IFEval: a relation, unescaped);
  - ``Forbidden Words``: none of ``forbidden_words`` (split at ``", "``) a case-blind substring ("cat" forbids
    "category"; IFEval: between ``\\b``);
  - ``Number Paragraphs``: the non-blank pieces between ``***``, exactly ``N`` (IFEval: a regular expression split
    and a blank piece fails);
  - ``Number Words (at least | at most | range)``: white-space-separated tokens (``str.split``; IFEval: runs of
    ``\\w``), ``>= N``, ``<= N``, ``N1 <= n <= N2``;
  - ``Postscript``: the marker's letters, lower-cased, occur anywhere in the answer's letters lower-cased ("P.S."
    matches "ps" inside "perhaps"; IFEval: the marker at a line start);
  - ``Number Placeholder``: ``[...]`` with at least one character and no ``]`` inside, at least ``N``;
  - ``Number Bullets``: a ``*`` and white space at the start or after a newline (``\\s*`` may cross blank lines),
    exactly ``N`` (IFEval: a ``*`` not followed by ``*``; ``-`` bullets too);
  - ``Title``: ``<<`` then characters other than ``>`` then ``>>`` anywhere;
  - ``Minimum Number Highlighted Section``: ``*`` text without ``*`` ``*``, at least ``N`` (the regular expression
    moves on after each match, so a closing ``*`` can open the next: ``**a**`` is one, ``**a** and *b*`` two
    (``*a*``, then ``* and *``));
  - ``Multiple Sections``: the stripped answer split at the splitter (escaped, with the white space around it), the
    non-blank pieces exactly ``N`` (text before the first splitter counts as a section; IFEval: the splitter and a
    number, and it drops the first piece);
  - ``Two Responses``: split at ``******``, exactly two pieces that differ when stripped and lower-cased (two blank
    pieces are equal and fail);
  - ``All Uppercase``, ``All Lowercase``: ``str.isupper``, ``str.islower`` of the whole answer (no language check;
    an answer with no cased letter fails both);
  - ``All-capital Words (at least | at most | range)``: white-space tokens whose ``str.isupper`` holds
    (``"A."`` counts; IFEval splits off punctuation);
  - ``Start Checker``, ``End Checker``: the answer and the phrase reduced to ASCII letters and spaces, lower-cased,
    the answer starting (ending) with the phrase (no strip: a trailing ``.`` leaves no space, but a trailing
    space does);
  - ``Quotation``: stripped, starts and ends with ``"`` (a lone ``"`` passes; IFEval needs two characters).

Quirks kept: a missing argument takes the release's default (``N`` 0, ``N1`` 0, ``N2`` 999, phrases ``""``: an empty
phrase or marker always passes), and an argument the Hugging Face struct holds as null is read as missing (the
release would raise on it); an id none of these is counted not followed, as the release's chain of ``elif``
leaves it ``False``; ``None`` (no output) is the text ``"None"``, as the release's ``str`` makes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from omnieval.scoring.base import Verdict
from omnieval.scoring.ifeval import CHECKS as IFEVAL_CHECKS
from omnieval.scoring.ifeval import count_sentences

TASK_BREAKDOWN = "task_identifier"
"""The breakdown holding an instruction-following item's check id (also a per-check breakdown of the scores)."""
KWARGS_BREAKDOWN = "aif_kwargs"
"""The breakdown holding its arguments: JSON, the row's ``kwargs`` without its null fields."""
RULE = "instruction check"
DEFAULTS = {"N": 0, "N1": 0, "N2": 999}


def _arg(kwargs: dict, name: str):
    value = kwargs.get(name)
    return DEFAULTS.get(name, "") if value is None else value


def _letters(text: str, keep: str = "") -> str:
    return re.sub(rf"[^a-zA-Z{keep}]", "", text).lower()


def _words(text: str) -> int:
    return len(text.split())


def _capitals(text: str) -> int:
    return sum(word.isupper() for word in text.split())


def _keyword_count(text: str, keyword: str) -> int:
    return len(re.findall(r"\b" + re.escape(keyword.lower()) + r"\b", text.lower()))


def _sections(text: str, kw: dict) -> bool:
    pieces = re.split(rf"\s*{re.escape(str(_arg(kw, 'section_splitter')))}\s*", text.strip())
    return sum(1 for p in pieces if p.strip()) == _arg(kw, "N")


def _two_responses(text: str) -> bool:
    parts = text.split("******")
    return len(parts) == 2 and parts[0].lower().strip() != parts[1].lower().strip()


def _between(count: int, kw: dict) -> bool:
    return _arg(kw, "N1") <= count <= _arg(kw, "N2")


Check = Callable[[str, dict, str], bool]
CHECKS: dict[str, Check] = {
    "Include Keywords": lambda t, kw, q: all(k.lower() in t.lower() for k in str(_arg(kw, "keywords")).split(", ")),
    "Keyword Frequency": lambda t, kw, q: _keyword_count(t, str(_arg(kw, "keyword"))) == _arg(kw, "N"),
    "Forbidden Words": lambda t, kw, q: not any(w.lower() in t.lower()
                                                for w in str(_arg(kw, "forbidden_words")).split(", ")),
    "Number Paragraphs": lambda t, kw, q: sum(1 for p in t.split("***") if p.strip()) == _arg(kw, "N"),
    "Number Words (at least)": lambda t, kw, q: _words(t) >= _arg(kw, "N"),
    "Number Words (at most)": lambda t, kw, q: _words(t) <= _arg(kw, "N"),
    "Number Words (range)": lambda t, kw, q: _between(_words(t), kw),
    "Number Sentences (at least)": lambda t, kw, q: count_sentences(t) >= _arg(kw, "N"),
    "Number Sentences (at most)": lambda t, kw, q: count_sentences(t) <= _arg(kw, "N"),
    "Number Sentences (range)": lambda t, kw, q: _between(count_sentences(t), kw),
    "Postscript": lambda t, kw, q: _letters(str(_arg(kw, "postscript_marker"))) in _letters(t),
    "Number Placeholder": lambda t, kw, q: len(re.findall(r"\[[^\]]+\]", t)) >= _arg(kw, "N"),
    "Number Bullets": lambda t, kw, q: len(re.findall(r"(?:^|\n)\s*\*\s+", t)) == _arg(kw, "N"),
    "Title": lambda t, kw, q: re.search(r"<<[^>]+>>", t) is not None,
    "Minimum Number Highlighted Section": lambda t, kw, q: len(re.findall(r"\*([^*]+)\*", t)) >= _arg(kw, "N"),
    "Multiple Sections": lambda t, kw, q: _sections(t, kw),
    "Repeat Prompt": lambda t, kw, q: IFEVAL_CHECKS["combination:repeat_prompt"](t, {"prompt_to_repeat": q}),
    "Two Responses": lambda t, kw, q: _two_responses(t),
    "All Uppercase": lambda t, kw, q: t.isupper(),
    "All Lowercase": lambda t, kw, q: t.islower(),
    "All-capital Words (at least)": lambda t, kw, q: _capitals(t) >= _arg(kw, "N"),
    "All-capital Words (at most)": lambda t, kw, q: _capitals(t) <= _arg(kw, "N"),
    "All-capital Words (range)": lambda t, kw, q: _between(_capitals(t), kw),
    "Start Checker": lambda t, kw, q: _letters(t, " ").startswith(_letters(str(_arg(kw, "start_phrase")), " ")),
    "End Checker": lambda t, kw, q: _letters(t, " ").endswith(_letters(str(_arg(kw, "end_phrase")), " ")),
    "Quotation": lambda t, kw, q: t.strip().startswith('"') and t.strip().endswith('"'),
    "No Commas": lambda t, kw, q: IFEVAL_CHECKS["punctuation:no_comma"](t, kw),
}
"""Each ``task_identifier`` of the release -> whether an answer follows it (module doc), given the row's arguments
and question."""


def follows(task: str, kwargs: dict | None, text: str | None, question: str = "") -> bool:
    """Whether ``text`` follows the row's constraint as the release checks it (module doc); False for an id the
    release does not know."""
    check = CHECKS.get(task)
    return check is not None and bool(check(str(text), {k: v for k, v in (kwargs or {}).items()
                                                        if v is not None}, question))


def aif_verdict(text: str | None, breakdowns: dict[str, str], question: str) -> Verdict:
    """The release's verdict on an instruction-following item's answer, its check id and arguments read from the
    item's breakdowns; ``how`` names the check."""
    task = breakdowns.get(TASK_BREAKDOWN)
    if not task:
        raise ValueError(f"the instruction-following item carries no breakdown {TASK_BREAKDOWN}")
    kwargs = json.loads(breakdowns.get(KWARGS_BREAKDOWN) or "{}")
    known = "" if task in CHECKS else " (no such check in the release: not followed)"
    return Verdict(None, follows(task, kwargs, text, question), "parsed", f"{RULE} {task}{known}")
