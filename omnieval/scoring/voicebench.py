"""VoiceBench's released multiple-choice rule (its ``openbookqa`` and ``mmsu`` subsets), registered as
``voicebench``: fixed phrases around a letter, tried in the release's order, else a bare or leading letter.

Source: github.com/MatthewCYM/VoiceBench, ``src/evaluator/mcq.py`` (``MCQEvaluator.extract_answer`` and
``evaluate``), read at commit 9f8db6cdf66ed30fb5e1f2afc00be254c1d44a5d (its author's last change to that file; a
later fork adds ten phrases, which are not read here). lmms-eval's ``voicebench_process_results_mcq``
(``lmms_eval/tasks/voicebench/utils.py`` at commit 35b25f0a4e59a80eeecd0afe9ae0eb3ecb6e13d0) runs the same 163
phrases. Its quirks, each kept:

- the answer is lower-cased, and a leading ``<1>``, ``<2>`` or ``<3>`` is cut off;
- each phrase of ``PHRASES`` in turn, with ``[CHOICE]`` replaced by ``a``, ``b``, ``c``, then ``d``, is looked for
  anywhere in the answer: the first phrase that occurs with any letter decides, so the order of the phrases, not
  the place in the answer, decides between two letters ("option b, not option a." reads ``A``: ``option a.``
  comes before ``option b,`` in the list);
- a phrase also matches the article "a": "It is a, b or c" reads ``A`` (``" [CHOICE],"``);
- then the whole answer equal to a letter, or starting with a letter followed by ``.``, ``,``, ``:`` or ``)``;
- then three phrases the release special-cases (``would be a.`` and two more, all ``A``);
- only the letters ``A``-``D`` are ever read: a fifth option can never be chosen;
- no letter found: the release draws a random letter (right one time in four on average) and counts the answer in
  its ``fail`` rate; omnieval cannot reproduce that draw and counts the answer wrong (``unparsed``), so the
  release's expected accuracy is this one plus a quarter of the unparsed share;
- reasoning blocks are not removed: a phrase inside ``<think>`` counts like any other.

A ``None`` text (no output) is read as the empty answer.
"""

from __future__ import annotations

from omnieval.scoring.base import ScoreItem, Verdict, register_scorer, verdict_for
from omnieval.scoring.voicebench_bbh import bbh_verdict
from omnieval.scoring.voicebench_open import open_verdict

LETTERS = ("a", "b", "c", "d")
PHRASES: tuple[str, ...] = (
    '答案是[CHOICE]', '答案是 [CHOICE]', '答案是选项[CHOICE]', '答案应该是[CHOICE]', '答案应该是 [CHOICE]',
    '答案就是选项[CHOICE]', '答案是‘[CHOICE]', '是[CHOICE]：', '答案选[CHOICE]', '[CHOICE]是正确',
    '选项[CHOICE]是最合适的', 'answer is: **[CHOICE]', 'answer is **[CHOICE]',
    'the answer to the question is: **[CHOICE]', 'the answer to the multiple-choice question is **[CHOICE]',
    "the answer is '[CHOICE]'", '[CHOICE] is the best answer', 'the answer is [CHOICE]',
    'the correct answer is [CHOICE]', 'would select [CHOICE]', 'would choose [CHOICE]',
    'would select option [CHOICE]', 'would choose option [CHOICE]', 'is "[CHOICE]"', 'is "[CHOICE].',
    'is: **[CHOICE])', 'is **[CHOICE],', 'is **[CHOICE]:', 'is **[CHOICE])', 'is: **[CHOICE].',
    'is: **[CHOICE]:', 'is **[CHOICE].', 'be **[CHOICE],', 'is: **[CHOICE]**', 'is therefore option **[CHOICE]:',
    'is: \n\n**[CHOICE])', 'as **[CHOICE]:', 'be **[CHOICE])', 'be **[CHOICE]:', 'is: \n\n**[CHOICE]**',
    'suggests **[CHOICE])', 'be option **[CHOICE]:', 'with **[CHOICE])', 'is typically "[CHOICE])',
    'be to **[CHOICE])', 'is: \n\n[CHOICE])', 'is likely to be: **[CHOICE].', 'is **[CHOICE] (',
    'is option **[CHOICE]**', 'is likely **[CHOICE]**', 'is:\n**[CHOICE].', 'is:\n\n**[CHOICE].',
    'would be [CHOICE]', 'would be option [CHOICE]', 'would be ([CHOICE])', 'would be option ([CHOICE])',
    'is [CHOICE],', 'is typically [CHOICE],', 'is typically [CHOICE].', "i'd say [CHOICE].", 'option [CHOICE].',
    'option [CHOICE]:', 'option [CHOICE],', 'the answer is:\n**[CHOICE]', 'is [CHOICE]:', 'is [CHOICE].',
    'is [CHOICE],', 'is: [CHOICE].', 'is ([CHOICE])', 'is:\n**[CHOICE])', 'is likely **[CHOICE]:',
    'is the **[CHOICE])', ':\n[CHOICE].', ':\n[CHOICE])', ':\n[CHOICE],', ': \n[CHOICE].', ':  \n[CHOICE].',
    ':\n\n[CHOICE].', ':\n\n[CHOICE])', 'is most likely **[CHOICE]:', ':\n\n[CHOICE],', ': \n\n[CHOICE].',
    'is option [CHOICE],', '([CHOICE]) would be', 'is ([CHOICE]).', 'is [CHOICE])', 'is: [CHOICE])',
    'is:\n\n[CHOICE]:', 'is: **[CHOICE],', '(option [CHOICE])', 'answer is ([CHOICE])',
    'select option "[CHOICE]"', 'is: [CHOICE]', 'is typically **[CHOICE],', 'is **[CHOICE]**',
    "is likely '[CHOICE]'", "is option '[CHOICE]'", 'is:\n**[CHOICE]:', 'is \\( \\boxed{[CHOICE] ',
    "would be '[CHOICE]'", 'is the **[CHOICE]** ', 'question is [CHOICE] (', 'is:\n\n**[CHOICE])',
    'closest to option **[CHOICE]**', 'is most likely **[CHOICE])', "the answer to the question is '[CHOICE]'",
    'question is **[CHOICE]**', "known as '[CHOICE]'", "is '[CHOICE])", 'is typically **[CHOICE]:',
    'is \\( \\boxed{\\text{[CHOICE]}} \\)', 'is \\( \\text{[CHOICE]) }', 'is \\( \\text{[CHOICE]} \\)',
    'is \\( \\text{[CHOICE]:', 'is \\( \\text{[CHOICE])', 'is \\(\\text{[CHOICE].', 'is:\n\n**[CHOICE]',
    'is \\( \\text{[CHOICE].}', 'is \\( \\text{[CHOICE].', 'is \\( \\boxed{[CHOICE]}',
    'is:\n\\[ \\boxed{\\text{[CHOICE]}}', 'is:\n\\[ \\text{[CHOICE])', 'is:\n\n\\[ \\text{[CHOICE])',
    'is \\( \\textbf{[CHOICE])', 'is \\( \\text{[CHOICE]}', 'is: \\( \\text{[CHOICE].',
    'corresponds to:\n- **[CHOICE]:', 'would be: **[CHOICE]**.', 'is \\( [CHOICE] \\)', 'is:\n**[CHOICE] ',
    'corresponds to option **[CHOICE]**', 'be **[CHOICE]**', 'be: \n\n[CHOICE])', 'is:\n\\[ \\boxed{[CHOICE]}',
    'is:  \n**[CHOICE]:', 'is: \\( \\text{[CHOICE])', 'is likely: **[CHOICE],', 'is } \\mathbf{[CHOICE].',
    'is \\( \\boxed{[CHOICE])', 'is \\( \\textbf{[CHOICE]}', 'is \\([CHOICE]\\)', 'is:\n  \n**[CHOICE]:',
    'is option **[CHOICE] ', 'is:\n\\( \\textbf{[CHOICE].', 'is \\( \\mathbf{[CHOICE]}',
    'was option **[CHOICE]**', 'is likely "[CHOICE])', 'option **[CHOICE]:', 'is "[CHOICE])',
    'is most likely **[CHOICE],', 'is often **[CHOICE]:', 'is:  \n[CHOICE])', ' [CHOICE].', ' [CHOICE],',
    ' [CHOICE]:', ' [CHOICE])', '**[CHOICE].', '**[CHOICE])', '"[CHOICE].', '"[CHOICE],', '"[CHOICE]:',
    '([CHOICE])', '"[CHOICE]"',
)
"""The release's phrases, in its order (``[CHOICE]`` stands for a lower-case letter)."""
LEADING_PUNCTUATION = (".", ",", ":", ")")
SPECIAL_CASES = ("would be a.", 'would be "a.', "the best option from the given choices would be a scorpion (a)")
"""Phrases the release reads as ``A`` after everything else."""


def extract(text: str) -> tuple[str | None, str]:
    """(the capital letter the release extracts, the branch that decided); None where it finds none."""
    response = text.lower()
    if response.startswith(("<1>", "<2>", "<3>")):
        response = response[3:].strip()
    for phrase in PHRASES:
        for letter in LETTERS:
            if phrase.replace("[CHOICE]", letter) in response:
                return letter.upper(), f"phrase {phrase!r}"
    for letter in LETTERS:
        if response == letter or response.startswith(tuple(letter + p for p in LEADING_PUNCTUATION)):
            return letter.upper(), "bare or leading letter"
    if any(case in response for case in SPECIAL_CASES):
        return "A", "special case"
    return None, "no phrase: the release draws a random letter"


@register_scorer("voicebench")
class VoiceBenchScorer:
    """VoiceBench's ``MCQEvaluator`` (module doc)."""

    name = "voicebench"

    def score(self, text: str | None, item: ScoreItem) -> Verdict:
        choice, how = extract(text or "")
        if choice is None:
            return Verdict(None, False, "unparsed", how)
        return verdict_for(choice, item, "parsed", how)

    def score_open(self, text: str | None, inst) -> Verdict | None:
        """An open item's answer (``scoring.verdicts.open_verdicts``) by its subset's released rule where that rule
        is offline: ``bbh``'s answer phrases (``voicebench_bbh.bbh_verdict``, on the item's ``bbh_task`` and
        ``reference``), ``advbench``'s refusal list and ``ifeval``'s instruction checks
        (``voicebench_open.open_verdict``); None for the other subsets."""
        breakdowns = inst.field("breakdowns") or {}
        subset = breakdowns.get("subset")
        if subset == "bbh":
            return bbh_verdict(text, breakdowns.get("bbh_task") or "", inst.reference or "", inst.item_id)
        return open_verdict(text, subset, breakdowns)
