"""MMAU-Pro's instruction-following checks against cases worked by hand from the release's ``evaluate_aif_sample``
(sonalkum/MMAUPro ``evaluate_mmau_pro_comprehensive.py`` at 2269762): for each check id an answer that follows the
constraint and one that does not, chosen where the release's rule and IFEval's would part."""

from __future__ import annotations

import json

import pytest

from omnieval.scoring.mmau_pro_aif import CHECKS, KWARGS_BREAKDOWN, TASK_BREAKDOWN, aif_verdict, follows

Q = "Describe the sound you hear."
CASES = [
    # (check id, kwargs, answer, followed), each worked from the release's code by hand
    ("Include Keywords", {"keywords": "dog, bark"}, "The Dogs were barking.", True),  # substrings, case-blind
    ("Include Keywords", {"keywords": "dog, bark"}, "A dog growls.", False),
    ("Keyword Frequency", {"keyword": "rain", "N": 2}, "Rain, rain, and a rainbow.", True),  # \b: rainbow is not
    ("Keyword Frequency", {"keyword": "rain", "N": 2}, "Rain, rain, rain.", False),  # exactly N
    ("Forbidden Words", {"forbidden_words": "cat, loud"}, "A dog barks.", True),
    ("Forbidden Words", {"forbidden_words": "cat, loud"}, "It is a category of sound.", False),  # a substring
    ("Number Paragraphs", {"N": 2}, "One.\n***\nTwo.\n***\n", True),  # the blank piece after the last *** drops
    ("Number Paragraphs", {"N": 2}, "One.\n\nTwo.", False),  # blank lines split nothing
    ("Number Words (at least)", {"N": 3}, "a dog, barking", True),  # "dog," is one token
    ("Number Words (at least)", {"N": 3}, "dog-barking sound", False),
    ("Number Words (at most)", {"N": 2}, "loud bang", True),
    ("Number Words (at most)", {"N": 2}, "a loud bang", False),
    ("Number Words (range)", {"N1": 2, "N2": 3}, "a loud bang", True),
    ("Number Words (range)", {"N1": 2, "N2": 3}, "bang", False),
    ("Number Sentences (at least)", {"N": 2}, "A dog barks. A car passes.", True),
    ("Number Sentences (at least)", {"N": 2}, "A dog barks loudly.", False),
    ("Number Sentences (at most)", {"N": 1}, "A dog barks.", True),
    ("Number Sentences (at most)", {"N": 1}, "A dog barks. It stops!", False),
    ("Number Sentences (range)", {"N1": 2, "N2": 3}, "One. Two. Three.", True),
    ("Number Sentences (range)", {"N1": 2, "N2": 3}, "One. Two. Three. Four.", False),
    ("Postscript", {"postscript_marker": "P.S."}, "Perhaps a dog.", True),  # the letters "ps" inside "perhaps"
    ("Postscript", {"postscript_marker": "P.P.S"}, "A dog. P.S. it barks", False),
    ("Number Placeholder", {"N": 2}, "At [place] on [date] and [time].", True),  # at least N
    ("Number Placeholder", {"N": 2}, "At [place] on [].", False),  # [] holds nothing
    ("Number Bullets", {"N": 2}, "* dog\n* car", True),
    ("Number Bullets", {"N": 2}, "* dog\n* car\n  * rain", False),  # exactly N; an indented bullet counts
    ("Title", {}, "<<A Barking Dog>> It barks.", True),
    ("Title", {}, "<<>> It barks.", False),
    ("Minimum Number Highlighted Section", {"N": 2}, "*dog* and *car*", True),
    ("Minimum Number Highlighted Section", {"N": 2}, "**dog** and *car*", True),  # "*dog*", then "* and *"
    ("Minimum Number Highlighted Section", {"N": 2}, "**dog**", False),  # "*dog*" only
    ("Multiple Sections", {"N": 2, "section_splitter": "SECTION"}, "SECTION 1 dog SECTION 2 car", True),
    ("Multiple Sections", {"N": 2, "section_splitter": "SECTION"}, "Intro SECTION 1 dog SECTION 2 car", False),
    ("Repeat Prompt", {}, "  describe the sound you hear. A dog barks.", True),
    ("Repeat Prompt", {}, "A dog barks.", False),
    ("Two Responses", {}, "A dog.\n******\nA car.", True),
    ("Two Responses", {}, "A dog.\n******\na dog. ", False),  # the same once stripped and lower-cased
    ("All Uppercase", {}, "A DOG BARKS, 2 TIMES.", True),
    ("All Uppercase", {}, "A DOG BARKs.", False),
    ("All Lowercase", {}, "a dog barks, 2 times.", True),
    ("All Lowercase", {}, "123", False),  # no cased letter
    ("All-capital Words (at least)", {"N": 2}, "A DOG barks.", True),  # "A" is upper-case
    ("All-capital Words (at least)", {"N": 2}, "A Dog barks.", False),
    ("All-capital Words (at most)", {"N": 1}, "The DOG barks.", True),
    ("All-capital Words (at most)", {"N": 1}, "THE DOG barks.", False),
    ("All-capital Words (range)", {"N1": 1, "N2": 2}, "THE dog BARKS.", True),
    ("All-capital Words (range)", {"N1": 1, "N2": 2}, "the dog barks.", False),
    ("Start Checker", {"start_phrase": "Well,"}, "well... a dog", True),  # letters and spaces only
    ("Start Checker", {"start_phrase": "Well"}, " Well a dog", False),  # no strip: the leading space stays
    ("End Checker", {"end_phrase": "Any other questions?"}, "A dog. Any other questions?!", True),
    ("End Checker", {"end_phrase": "the end"}, "A dog, the end. ", False),  # the trailing space stays
    ("Quotation", {}, ' "A dog barks." ', True),
    ("Quotation", {}, '"A dog barks.', False),
    ("No Commas", {}, "A dog barks and a car passes.", True),
    ("No Commas", {}, "A dog barks, a car passes.", False),
]


@pytest.mark.parametrize(("task", "kwargs", "answer", "followed"), CASES)
def test_each_check_as_the_release_works_it(task, kwargs, answer, followed):
    assert follows(task, kwargs, answer, Q) is followed


def test_every_check_id_has_a_case_each_way():
    assert {(t, f) for t, _, _, f in CASES} == {(t, f) for t in CHECKS for f in (True, False)}
    assert len(CHECKS) == 27


def test_the_releases_defaults_and_quirks():
    assert follows("Quotation", {}, '"', Q)  # one quote mark starts and ends the stripped answer
    assert follows("Postscript", {}, "anything", Q)  # the empty marker is in every answer
    assert follows("Number Words (range)", {"N1": None, "N2": None}, " ".join(["w"] * 999), Q)  # 0..999
    assert not follows("Number Words (range)", {}, " ".join(["w"] * 1000), Q)
    assert follows("All Uppercase", {}, None, Q) is False  # no output is the text "None"
    assert follows("All Lowercase", {}, None, Q) is False
    assert follows("Unknown Check", {}, "anything", Q) is False  # no branch of the release: not followed


def test_the_verdict_names_the_check_and_reads_the_breakdowns():
    breakdowns = {TASK_BREAKDOWN: "Keyword Frequency", KWARGS_BREAKDOWN: json.dumps({"keyword": "dog", "N": 1})}
    verdict = aif_verdict("A dog.", breakdowns, Q)
    assert (verdict.correct, verdict.how) == (True, "instruction check Keyword Frequency")
    assert aif_verdict("Dog dog.", breakdowns, Q).correct is False
    unknown = aif_verdict("x", {TASK_BREAKDOWN: "Haiku"}, Q)
    assert unknown.correct is False and "no such check" in unknown.how
    with pytest.raises(ValueError, match="task_identifier"):
        aif_verdict("x", {}, Q)
