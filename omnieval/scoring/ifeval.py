"""IFEval's instruction checks, as VoiceBench's ``ifeval`` subset scores a spoken instruction's answer: each of the
prompt's instructions (an id such as ``punctuation:no_comma`` and its arguments) is checked on the response, strict
and loose, and the subset's score is the mean of four shares (``release_figures``).

Sources: google-research's ``instruction_following_eval`` (``instructions.py``, ``instructions_util.py``,
``instructions_registry.py``, ``evaluation_main.py``) as VoiceBench copies it under ``src/evaluator/
instruction_following_eval/``, and VoiceBench's ``src/evaluator/ifeval.py`` (``IFEvaluator``), both read at
github.com/MatthewCYM/VoiceBench commit 533815410e3f4d602bd15a1de7105aea4acd828c. ``CHECKS`` holds every id of the
release's registry (25), so whichever of them a row names is checked.

How the release scores one response (``follows``):

- the response is cleaned first (``release_response``): a leading ``<1>``, ``<2>`` or ``<3>`` is cut off, and a
  trailing ``<|user|>``;
- each instruction's arguments are the row's ``kwargs`` entry with every empty value dropped (``None``, ``0``,
  ``""``: the Hugging Face rows hold every argument name of the whole set, ``None`` where unused);
- **strict**: an instruction is followed when the response is not blank and its check passes;
- **loose**: when any of eight variants passes: the response, it without its first line, without its last line,
  without both (each stripped), and the four again with every ``*`` removed;
- the prompt follows all its instructions or not (prompt level); the instruction level counts instructions.

``release_figures`` gives the four shares the release prints (``strict-prompt``, ``strict-instruction``,
``loose-prompt``, ``loose-instruction``) and ``final``, their plain mean: the figure VoiceBench's leaderboard reports
as IFEval (``IFEvaluator.evaluate``'s ``results['final']``). The instruction-level shares are ratios over all
instructions, not means over prompts.

Quirks, each kept:

- keywords, forbidden words, section splitters and postscript markers are used as regular expressions, unescaped
  (``keywords:existence`` with ``"c++"`` is the pattern ``c++``); forbidden words are matched between ``\\b``;
- a relation (``less than`` or ``at least``) is read as given; the release raises on any other, and omnieval
  counts it a failed rule (``InstructionError``);
- ``length_constraints:nth_paragraph_first_word`` counts paragraphs (split at ``\\n\\n``) without the blank ones
  but takes the n-th paragraph from the split with them;
- ``language:response_language``, ``change_case:english_capital`` and ``english_lowercase`` ask ``langdetect``; a
  text it cannot read (no letters) passes. ``langdetect`` draws at random: the release does not fix its seed, so a
  short text may be read differently from one run to the next; omnieval fixes the seed at 0 (``DetectorFactory.seed``)
  so a run is repeatable;
- ``change_case:english_capital``: ``str.isupper`` first, so a lower-case answer fails without a language check;
  ``langdetect`` reads upper-case German as English, so an upper-case answer in German passes.

Where omnieval differs (no download is possible here, and the release's ``nltk`` data is one):

- ``length_constraints:number_sentences`` counts sentences with nltk's punkt model (``english.pickle``), which must
  be downloaded. ``count_sentences`` needs none: a sentence ends at a run of ``.``, ``!`` or ``?`` (with closing
  quotes or brackets) followed by white space or the end, except after a single letter (an initial) or one of the
  abbreviations in ``ABBREVIATIONS``; text after the last end is one more sentence. Punkt learnt more abbreviations
  and reads a few patterns (numbered lists, ellipses inside a sentence) otherwise: counts can differ by one there;
- ``change_case:capital_word_frequency`` tokenizes with nltk's ``word_tokenize`` (punkt, then the Treebank rules).
  ``capital_words`` splits at white space, strips the punctuation around each token and splits a contraction at its
  apostrophe (``DON'T`` is ``DON`` and ``'T``, both upper-case, as the Treebank's ``DO`` and ``N'T``), then counts
  the tokens whose ``str.isupper`` holds. Treebank splits a few other punctuation marks inside words;
- the release keys responses by their prompt's text, so two rows with the same prompt are both scored on the later
  one's response; omnieval scores each item on its own answer.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

LESS_THAN, AT_LEAST = "less than", "at least"
RELATIONS = (LESS_THAN, AT_LEAST)
CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
"""The answers ``detectable_format:constrained_response`` accepts (any of them inside the response)."""
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "inc",
                           "ltd", "co", "no", "fig", "u.s", "u.k", "a.m", "p.m", "approx", "dept", "est", "mt"})
"""Words ending in ``.`` that do not end a sentence (``count_sentences``), lower-case, without their final dot."""
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
_PUNCTUATION = "\"'`.,;:!?()[]{}<>“”‘’«»-–—*_#"


class InstructionError(ValueError):
    """An instruction the checks cannot read: an unknown id, or an argument missing or out of range."""


def _relation(kwargs: dict, name: str = "relation") -> str:
    relation = _arg(kwargs, name)
    if relation not in RELATIONS:
        raise InstructionError(f"{name} {relation!r} is none of {', '.join(RELATIONS)}")
    return relation


def _compare(count: int, threshold: int, relation: str) -> bool:
    return count < threshold if relation == LESS_THAN else count >= threshold


def _arg(kwargs: dict, name: str):
    if name not in kwargs:
        raise InstructionError(f"argument {name!r} missing (the release would draw one at random)")
    return kwargs[name]


def count_words(text: str) -> int:
    """Runs of word characters (the release's ``RegexpTokenizer(r"\\w+")``)."""
    return len(re.findall(r"\w+", text))


def count_sentences(text: str) -> int:
    """Sentences without nltk's punkt model (module doc, where omnieval differs)."""
    count, start = 0, 0
    for match in _SENTENCE_END.finditer(text):
        if match.group().startswith(".") and len(match.group().rstrip("\"'”’)]")) == 1:
            words = text[start:match.start()].split()
            last = words[-1].lower().lstrip("(\"'“‘") if words else ""
            if (len(last) == 1 and last.isalpha()) or last in ABBREVIATIONS:
                continue
        if text[start:match.end()].strip(" \t\n\"'”’)]"):
            count += 1
        start = match.end()
    if text[start:].strip():
        count += 1
    return count


def capital_words(text: str) -> int:
    """Upper-case tokens (module doc, where omnieval differs)."""
    count = 0
    for token in text.split():
        core = token.strip(_PUNCTUATION)
        if not core:
            continue
        parts = re.split(r"(?=['’])", core) if re.search(r"\w['’]\w", core) else [core]
        count += sum(1 for part in parts if part.isupper())
    return count


def detect_language(text: str) -> str | None:
    """``langdetect``'s language code of ``text`` with the seed fixed (module doc); None where it finds no
    feature to read (the release then counts the instruction followed)."""
    try:
        from langdetect import DetectorFactory, LangDetectException, detect
    except ImportError as exc:
        raise InstructionError("the language checks need the package langdetect (pip install langdetect)") from exc
    DetectorFactory.seed = 0
    try:
        return detect(text)
    except LangDetectException:
        return None


def _paragraphs(value: str, kw: dict) -> bool:
    parts = re.split(r"\s?\*\*\*\s?", value)
    count = len(parts)
    for index, part in enumerate(parts):
        if not part.strip():
            if index in (0, len(parts) - 1):
                count -= 1
            else:
                return False
    return count == _arg(kw, "num_paragraphs")


def _nth_paragraph_first_word(value: str, kw: dict) -> bool:
    wanted, nth, first = _arg(kw, "num_paragraphs"), _arg(kw, "nth_paragraph"), str(_arg(kw, "first_word")).lower()
    if not 0 < nth <= wanted:
        raise InstructionError(f"nth_paragraph {nth} is not within 1..num_paragraphs ({wanted})")
    parts = value.split("\n\n")
    count = sum(1 for part in parts if part.strip())
    if nth > count:
        return False
    paragraph = parts[nth - 1].strip()
    if not paragraph:
        return False
    word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
    letters = []
    for char in word:
        if char in ".,?!'\"":
            break
        letters.append(char.lower())
    return count == wanted and "".join(letters) == first


def _postscript(value: str, kw: dict) -> bool:
    marker = str(_arg(kw, "postscript_marker")).strip()
    pattern = {"P.P.S": r"\s*p\.\s?p\.\s?s.*$", "P.S.": r"\s*p\.\s?s\..*$"}.get(marker,
                                                                              r"\s*" + marker.lower() + r".*$")
    return bool(re.findall(pattern, value.lower(), flags=re.MULTILINE))


def _highlights(value: str, kw: dict) -> bool:
    single = [h for h in re.findall(r"\*[^\n*]*\*", value) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n*]*\*\*", value) if h[2:-2].strip()]
    return len(single) + len(double) >= _arg(kw, "num_highlights")


def _json(value: str, kw: dict) -> bool:
    text = value.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):  # each in turn, as the release chains them
        text = text.removeprefix(fence)
    text = text.removesuffix("```").strip()
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _two_responses(value: str, kw: dict) -> bool:
    parts = value.split("******")
    kept = []
    for index, part in enumerate(parts):
        if part.strip():
            kept.append(part.strip())
        elif index not in (0, len(parts) - 1):
            return False
    return len(kept) == 2 and kept[0] != kept[1]


def _english_case(value: str, cased: Callable[[str], bool]) -> bool:
    if not cased(value):
        return False
    language = detect_language(value)
    return language is None or language == "en"


def _language(value: str, kw: dict) -> bool:
    language = detect_language(value)
    return language is None or language == _arg(kw, "language")


CHECKS: dict[str, Callable[[str, dict], bool]] = {
    "keywords:existence": lambda v, kw: all(re.search(k, v, flags=re.IGNORECASE)
                                            for k in sorted(_arg(kw, "keywords"))),
    "keywords:frequency": lambda v, kw: _compare(
        len(re.findall(str(_arg(kw, "keyword")).strip(), v, flags=re.IGNORECASE)), _arg(kw, "frequency"),
        _relation(kw)),
    "keywords:forbidden_words": lambda v, kw: not any(re.search(r"\b" + w + r"\b", v, flags=re.IGNORECASE)
                                                      for w in sorted(set(_arg(kw, "forbidden_words")))),
    "keywords:letter_frequency": lambda v, kw: _compare(
        collections.Counter(v.lower())[str(_arg(kw, "letter")).strip().lower()], _arg(kw, "let_frequency"),
        _relation(kw, "let_relation")),
    "language:response_language": _language,
    "length_constraints:number_sentences": lambda v, kw: _compare(count_sentences(v), _arg(kw, "num_sentences"),
                                                                  _relation(kw)),
    "length_constraints:number_paragraphs": _paragraphs,
    "length_constraints:number_words": lambda v, kw: _compare(count_words(v), _arg(kw, "num_words"), _relation(kw)),
    "length_constraints:nth_paragraph_first_word": _nth_paragraph_first_word,
    "detectable_content:number_placeholders": lambda v, kw: len(re.findall(r"\[.*?\]", v))
    >= _arg(kw, "num_placeholders"),
    "detectable_content:postscript": _postscript,
    "detectable_format:number_bullet_lists": lambda v, kw: len(re.findall(r"^\s*\*[^*].*$", v, flags=re.MULTILINE))
    + len(re.findall(r"^\s*-.*$", v, flags=re.MULTILINE)) == _arg(kw, "num_bullets"),
    "detectable_format:constrained_response": lambda v, kw: any(c in v.strip() for c in CONSTRAINED_RESPONSES),
    "detectable_format:number_highlighted_sections": _highlights,
    "detectable_format:multiple_sections": lambda v, kw: len(re.split(
        r"\s?" + str(_arg(kw, "section_spliter")).strip() + r"\s?\d+\s?", v)) - 1 >= _arg(kw, "num_sections"),
    "detectable_format:json_format": _json,
    "detectable_format:title": lambda v, kw: any(t.lstrip("<").rstrip(">").strip()
                                                 for t in re.findall(r"<<[^\n]+>>", v)),
    "combination:two_responses": _two_responses,
    "combination:repeat_prompt": lambda v, kw: v.strip().lower().startswith(
        str(_arg(kw, "prompt_to_repeat")).strip().lower()),
    "startend:end_checker": lambda v, kw: v.strip().strip('"').lower().endswith(
        str(_arg(kw, "end_phrase")).strip().lower()),
    "startend:quotation": lambda v, kw: len(v.strip()) > 1 and v.strip()[0] == '"' and v.strip()[-1] == '"',
    "change_case:capital_word_frequency": lambda v, kw: _compare(
        capital_words(v), _arg(kw, "capital_frequency"), _relation(kw, "capital_relation")),
    "change_case:english_capital": lambda v, kw: _english_case(v, str.isupper),
    "change_case:english_lowercase": lambda v, kw: _english_case(v, str.islower),
    "punctuation:no_comma": lambda v, kw: "," not in v,
}
"""Each instruction id of the release's registry -> its check of a response under the instruction's arguments."""
LANGUAGE_CHECKS = frozenset({"language:response_language", "change_case:english_capital",
                             "change_case:english_lowercase"})
"""The checks that ask ``langdetect``."""


def release_kwargs(kwargs: dict | None) -> dict:
    """An instruction's arguments as the release passes them: every empty value dropped (module doc)."""
    return {name: value for name, value in (kwargs or {}).items() if value}


def check(instruction_id: str, kwargs: dict | None, response: str) -> bool:
    """Whether ``response`` follows one instruction, strictly: not blank, and the check passes."""
    if instruction_id not in CHECKS:
        raise InstructionError(f"unknown instruction id {instruction_id!r}")
    return bool(response.strip()) and bool(CHECKS[instruction_id](response, release_kwargs(kwargs)))


def loose_variants(response: str) -> list[str]:
    """The eight texts the loose reading tries, in the release's order (module doc)."""
    lines = response.split("\n")
    cut = ["\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return [response, response.replace("*", ""), *cut, *(text.replace("*", "") for text in cut)]


def release_response(text: str | None) -> str:
    """The response as the release reads it before checking (module doc); None (no output) is the empty one."""
    response = text or ""
    if response.startswith(("<1>", "<2>", "<3>")):
        response = response[3:].strip()
    if response.endswith("<|user|>"):
        response = response[:-len("<|user|>")].strip()
    return response


@dataclass(frozen=True)
class Followed:
    """One prompt's instructions, each followed or not, strict and loose."""

    strict: tuple[bool, ...]
    loose: tuple[bool, ...]

    @property
    def how(self) -> str:
        """The counts a verdict records (``strict 2/3, loose 3/3``): the four figures are recomputable from them."""
        n = len(self.strict)
        return f"strict {sum(self.strict)}/{n}, loose {sum(self.loose)}/{n}"


def follows(instructions: Sequence[tuple[str, dict | None]], text: str | None) -> Followed:
    """Each instruction (id, arguments) checked on the answer ``text``, strict and loose (module doc)."""
    response = release_response(text)
    variants = loose_variants(response)
    strict = tuple(check(i, kw, response) for i, kw in instructions)
    loose = tuple(any(check(i, kw, v) for v in variants) for i, kw in instructions)
    return Followed(strict, loose)


HOW = re.compile(r"strict (\d+)/(\d+), loose (\d+)/(\d+)$")
"""``Followed.how`` read back from the end of a verdict's ``how`` (``re.search``): strict followed, instructions,
loose followed, instructions."""


def release_figures(results: Sequence[Followed]) -> dict[str, float]:
    """The release's five figures over the prompts' results (module doc): the four shares and ``final``."""
    if not results:
        return {}
    instructions = sum(len(r.strict) for r in results)
    figures = {"strict-prompt": sum(all(r.strict) for r in results) / len(results),
               "strict-instruction": sum(sum(r.strict) for r in results) / instructions,
               "loose-prompt": sum(all(r.loose) for r in results) / len(results),
               "loose-instruction": sum(sum(r.loose) for r in results) / instructions}
    return figures | {"final": sum(figures.values()) / 4}
