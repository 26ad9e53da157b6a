"""Prompt rendering and answer parsing (docs/reference.md, Prompting and parsing), including adversarial outputs."""

from __future__ import annotations

import pytest

from omnieval.core.prompts import parse_answer, render_prompt
from omnieval.core.schema import Instance, Segment

LABELS = list("ABCDE")
TEXTS = ["a red circle", "a blue square", "a green star", "a cat", "I cannot answer"]


@pytest.mark.parametrize("text, expected", [
    ("B", "B"),
    ("  (C) ", "C"),
    ("Answer: D", "D"),
    ("answer: d", None),  # lower-case letters are words, not labels
    ("The answer is A.", "A"),
    ("**Answer:** E", "E"),
    ("I think it might be (A), but on reflection the answer is (C).", "C"),
    ("<think>Option A looks right. Answer: A</think>Answer: B", "B"),
    ("<think>unterminated reasoning Answer: A", None),
    ("C. a green star", "C"),
    ("a blue square", "B"),
    ("A blue square.", "B"),
    ("the answer is a cat", None),  # 'a' is an article, and 'a cat' is not the whole answer
    ("a cat", "D"),
    ("", None),
    (None, None),
    ("I refuse.", None),
    ("F", None),  # not a label of this instance
    ("Answer: F", None),
    ("ABBA", None),
    ("Option B", "B"),
    ("option b", None),  # lower case: a word, as above
    ("Choice: E", "E"),
    ("答案是B", "B"),
    ("答案：C", "C"),
    ("选D", "D"),
    ("**B. a blue square**", "B"),
    ("Based on the video, D.", "D"),  # a closing lone letter after a comma, not the B of "Based"
    ("\\boxed{C}", "C"),
    ("note: the video shows a dog", None),
])
def test_parse_answer(text, expected):
    assert parse_answer(text, LABELS, TEXTS) == expected


def test_render_puts_media_first_then_one_text_block():
    inst = Instance(instance_id="x", item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[Segment(kind="media", modality="video", path="v.mp4"),
                              Segment(kind="media", modality="audio", path="a.wav"),
                              Segment(kind="text", text="Text: hello")],
                    question="What is shown?", option_labels=LABELS, option_texts=TEXTS, target="A")
    parts = render_prompt(inst, "zs")
    assert [p.kind for p in parts] == ["media", "media", "text"]
    assert [p.modality for p in parts[:2]] == ["video", "audio"]
    body = parts[2].text
    assert body.index("Text: hello") < body.index("Question: What is shown?") < body.index("A. a red circle")
    assert "letter" in body
    assert "Answer: <letter>" in render_prompt(inst, "cot")[2].text
    with pytest.raises(KeyError):
        render_prompt(inst, "fewshot")


def test_the_layout_comes_from_the_instance_not_the_protocol_name():
    """The same two-option instance, whatever its protocol: the ``options`` layout lists the labelled options under
    the question; the ``scenes`` layout shows each option input after ``Scene X.``, then the question and the
    instruction (docs/reference.md, Protocol `contrastive`). The expected parts are written out by hand."""
    from pydantic import ValidationError

    from omnieval.core.prompts import INSTRUCTIONS

    inputs = [Segment(kind="media", modality="image", path="a.png"), Segment(kind="text", text="a dog barking")]
    fields = dict(instance_id="x", item_id="i", benchmark="b", split="s", condition="original", segments=[],
                  question="Which scene shows a dog?", option_labels=["A", "B"],
                  option_texts=["Scene A", "Scene B"], option_segments=inputs, target="B")
    scenes = [("text", "Scene A."), ("media", "a.png"),
              ("text", f"Scene B. a dog barking\nQuestion: Which scene shows a dog?\n{INSTRUCTIONS['zs']}")]
    options = [("text", "Question: Which scene shows a dog?\n\nOptions:\nA."), ("media", "a.png"),
               ("text", f"B. a dog barking\n{INSTRUCTIONS['zs']}")]

    def shown(inst):
        return [(p.kind, p.text if p.kind == "text" else p.path) for p in render_prompt(inst, "zs")]

    for protocol in ("contrastive", "fifth"):
        assert shown(Instance(protocol=protocol, layout="scenes", **fields)) == scenes
        assert shown(Instance(protocol=protocol, **fields)) == options  # the default layout, even for contrastive
    with pytest.raises(ValidationError, match="layout"):
        Instance(protocol="fifth", layout="grid", **fields)
