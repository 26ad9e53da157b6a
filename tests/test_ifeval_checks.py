"""IFEval's instruction checks (``omnieval.scoring.ifeval``), each id with a response that follows it and one that
does not, worked by hand from the instruction's definition in google-research's ``instructions.py`` (as VoiceBench
copies it); the loose reading's variants, the release's response cleaning and its four figures worked by hand from
VoiceBench's ``src/evaluator/ifeval.py``."""

from __future__ import annotations

import importlib.util

import pytest

from omnieval.scoring.ifeval import (
    CHECKS,
    HOW,
    LANGUAGE_CHECKS,
    Followed,
    InstructionError,
    capital_words,
    check,
    count_sentences,
    follows,
    loose_variants,
    release_figures,
    release_response,
)

HAS_LANGDETECT = importlib.util.find_spec("langdetect") is not None
needs_langdetect = pytest.mark.skipif(not HAS_LANGDETECT, reason="the language checks need the package langdetect "
                                      "(a dependency in pyproject.toml): pip install langdetect")

ENGLISH = "The weather today is sunny and warm, and many people are walking in the park with their dogs."
GERMAN = "Das Wetter ist heute sonnig und warm, und viele Leute gehen mit ihren Hunden im Park spazieren."
RUSSIAN = "Погода сегодня солнечная и тёплая, и многие люди гуляют в парке со своими собаками."

# (id, arguments, a response that follows it, one that does not), each worked from the instruction's definition
CASES = [
    ("keywords:existence", {"keywords": ["river", "stone"]},
     "A Stone sat by the RIVER.", "A stone sat by the lake."),  # every keyword, any case
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "at least"},
     "The cat saw a catalogue.", "One cat only."),  # a substring match: "catalogue" counts
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "less than"},
     "One cat only.", "Cat and cat."),
    ("keywords:forbidden_words", {"forbidden_words": ["red"]},
     "A reddish sky.", "The Red sky."),  # whole words only
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 3, "let_relation": "at least"},
     "Zed zips zany.", "Zed zips."),  # 3 z's (case folded) vs 2
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 3, "let_relation": "less than"},
     "Zed zips.", "Zed zips zany."),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "less than"},
     "One. Two!", "One. Two? Three."),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"},
     "One. Two? Three", "One. Two!"),  # text after the last end is a sentence
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2},
     "First part.\n***\nSecond part.", "First part.\n***\n***\nSecond part."),  # an empty middle paragraph fails
    ("length_constraints:number_words", {"num_words": 5, "relation": "at least"},
     "one two three four five", "one two-three four"),  # \w+ runs: "two-three" is two words, four in all
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"},
     "one two three four", "one two three four five"),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
     "First things.\n\n\"Then, more.", "First things.\n\nNext, more."),  # quote and comma stripped, case folded
    ("detectable_content:number_placeholders", {"num_placeholders": 2},
     "Dear [name], at [address].", "Dear [name]."),
    ("detectable_content:postscript", {"postscript_marker": "P.S."},
     "Bye.\nP.S. see you", "Bye.\nPS see you"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"},
     "Bye.\np. p. s also this", "Bye.\nP.S. also this"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2},
     "* one\n- two", "* one\n* two\n- three"),  # exactly the number asked
    ("detectable_format:constrained_response", {},
     "Well. My answer is maybe.", "My answer is probably."),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "*one* and **two**", "*one* and ** **"),  # a blank highlight does not count
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1 intro Section 2 body", "Section 1 intro only"),
    ("detectable_format:json_format", {},
     "```json\n{\"a\": 1}\n```", "{a: 1}"),
    ("detectable_format:title", {},
     "<<My Poem>>\nroses", "<<  >>\nroses"),  # a blank title does not count
    ("combination:two_responses", {},
     "First answer.\n******\nSecond answer.", "Same.\n******\nSame."),  # the two must differ
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem about tea."},
     "write a poem about tea. Leaves steep...", "Here: Write a poem about tea."),
    ("startend:end_checker", {"end_phrase": "Any other questions?"},
     "Done. any other questions?\"", "Any other questions? Done."),  # a final quote is stripped
    ("startend:quotation", {},
     '  "Wrapped."  ', '"Not wrapped.'),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "at least"},
     "This is VERY IMPORTANT.", "This is Very important."),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "less than"},
     "This is VERY important.", "I DON'T know."),  # I, DON, 'T: three upper-case tokens
    ("punctuation:no_comma", {},
     "No commas here.", "One, two."),
]


@pytest.mark.parametrize(("instruction", "kwargs", "passing", "failing"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_instruction_passes_and_fails_as_defined(instruction, kwargs, passing, failing):
    assert check(instruction, kwargs, passing) is True
    assert check(instruction, kwargs, failing) is False


@needs_langdetect
@pytest.mark.parametrize(("instruction", "kwargs", "passing", "failing"), [
    ("language:response_language", {"language": "de"}, GERMAN, ENGLISH),
    ("change_case:english_capital", {}, ENGLISH.upper(), RUSSIAN.upper()),
    ("change_case:english_lowercase", {}, ENGLISH.lower(), GERMAN.lower()),
])
def test_language_checks(instruction, kwargs, passing, failing):
    assert check(instruction, kwargs, passing) is True
    assert check(instruction, kwargs, failing) is False


@needs_langdetect
def test_language_checks_quirks():
    """A text langdetect cannot read (no letters) passes; a mixed-case text fails the case checks before any
    language is read."""
    assert check("language:response_language", {"language": "de"}, "12345 !!!") is True
    assert check("change_case:english_capital", {}, "12345 !!!") is False  # "12345 !!!".isupper() is False
    assert check("change_case:english_lowercase", {}, ENGLISH) is False
    # langdetect reads upper-case German as English: the release's capital check passes it
    assert check("change_case:english_capital", {}, GERMAN.upper()) is True


def test_every_registry_id_is_checked_and_tested():
    """The release's registry has 25 ids; each has a hand-worked case above (the three language ones apart)."""
    assert len(CHECKS) == 25
    tested = {c[0] for c in CASES} | LANGUAGE_CHECKS
    assert tested == set(CHECKS)


def test_blank_responses_and_unreadable_instructions():
    # strict: a blank response follows nothing, even an instruction it trivially meets
    assert check("punctuation:no_comma", {}, "  \n") is False
    # empty arguments are dropped as the release drops them: a relation of None is a missing one
    with pytest.raises(InstructionError, match="relation"):
        check("length_constraints:number_words", {"num_words": 3, "relation": None}, "a b c")
    with pytest.raises(InstructionError, match="none of"):
        check("length_constraints:number_words", {"num_words": 3, "relation": "exactly"}, "a b c")
    with pytest.raises(InstructionError, match="let_relation 'at most'"):
        check("keywords:letter_frequency", {"letter": "a", "let_frequency": 1, "let_relation": "at most"}, "a")
    with pytest.raises(InstructionError, match="unknown instruction"):
        check("keywords:key_sentences", {}, "a")
    # the unused argument names of the Hugging Face rows (None) are ignored
    assert check("punctuation:no_comma", {"num_words": None, "keywords": None}, "fine") is True


@pytest.mark.parametrize(("text", "count"), [
    ("One sentence", 1),
    ("Dr. Smith met Mr. Jones. They talked.", 2),  # abbreviations do not end a sentence
    ("J. R. R. Tolkien wrote it. Really!", 2),  # nor do initials
    ("Wait... what?! Yes.", 3),  # a run of marks ends once
    ('He said "stop." Then left.', 2),  # a closing quote stays with its sentence
    ("Pi is 3.14 exactly.", 1),  # a dot inside a number ends nothing
    ("", 0),
])
def test_sentences_counted_without_punkt(text, count):
    assert count_sentences(text) == count


def test_capital_words_split_contractions():
    assert capital_words("I DON'T KNOW, OK?") == 5  # I, DON, 'T, KNOW, OK
    assert capital_words("U.S. policy") == 1


def test_loose_variants_in_the_release_order():
    response = "Sure!\n*a, b*\nBye"
    assert loose_variants(response) == [
        response, "Sure!\na, b\nBye", "*a, b*\nBye", "Sure!\n*a, b*", "*a, b*", "a, b\nBye", "Sure!\na, b", "a, b"]


def test_loose_passes_where_strict_fails():
    # a chatty first line breaks the quotation and the repeated prompt strictly, not loosely
    quoted = follows([("startend:quotation", {})], 'Here you go:\n"All wrapped."')
    assert quoted == Followed(strict=(False,), loose=(True,))
    # asterisks: stripping them makes the last word the end phrase
    ended = follows([("startend:end_checker", {"end_phrase": "the end"})], "A story, **the end**")
    assert ended == Followed(strict=(False,), loose=(True,))
    # a comma on the last line only: loose drops the last line
    comma = follows([("punctuation:no_comma", {})], "No commas here\nBye, friend")
    assert comma == Followed(strict=(False,), loose=(True,))
    # loose cannot help a response with commas on every line
    assert follows([("punctuation:no_comma", {})], "a, b\nc, d\ne, f") == Followed((False,), (False,))
    # loose can also fail where strict passes for none: both readings of two instructions
    both = follows([("punctuation:no_comma", {}), ("startend:quotation", {})], 'Intro:\n"No commas"')
    assert both == Followed(strict=(True, False), loose=(True, True))
    assert both.how == "strict 1/2, loose 2/2"
    assert HOW.search(f"instruction checks: {both.how}").groups() == ("1", "2", "2", "2")


def test_release_response_cleaning():
    assert release_response("<2> Hello<|user|>") == "Hello"
    assert release_response(None) == ""
    assert release_response(" <1>x") == " <1>x"  # only a leading marker


def test_release_figures_are_the_mean_of_four_shares():
    """Three prompts, worked by hand: strict-prompt 1/3, strict-instruction 3/6, loose-prompt 2/3,
    loose-instruction 5/6; final their mean."""
    results = [Followed((True, True), (True, True)), Followed((False, True, False), (True, True, True)),
               Followed((False,), (False,))]
    figures = release_figures(results)
    assert figures == pytest.approx({"strict-prompt": 1 / 3, "strict-instruction": 3 / 6, "loose-prompt": 2 / 3,
                                     "loose-instruction": 5 / 6, "final": (1 / 3 + 3 / 6 + 2 / 3 + 5 / 6) / 4})
