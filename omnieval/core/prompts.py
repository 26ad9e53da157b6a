"""Prompt templates, option labelling and answer parsing (docs/reference.md, Prompting and parsing). Pure functions, no
model code.

A prompt is an ordered list of ``PromptPart``: the instance's context segments first (media before text, so that
every condition of one item shares a prefix for the engine's prefix cache), then one text part holding the question,
the labelled options and the instruction of the prompt style. Where the options are media (``option_segments``),
each option's media follows its label (``A.`` <audio> ``B.`` <audio> ...) and the instruction comes last. An
instance whose options are its inputs (``layout='scenes'``: docs/reference.md, Protocol `contrastive`) is laid out as
its scenes first (``Scene A.`` <input> ``Scene B.`` <input> ...), then the question and the instruction. The layout
travels with the instance (``Instance.layout``, set by its protocol: ``ProtocolSpec.prompt_layout``), so no code here
asks which protocol an instance is. Engines
turn parts into their own input format (a chat template with media placeholders for HF, ``prompt`` +
``multi_modal_data`` for vLLM).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from omnieval.core.schema import Instance, media_ref, option_key

INSTRUCTIONS: dict[str, str] = {
    "zs": "Answer with the option's letter from the given choices directly.",
    "cot": ("Think step by step about the question and the inputs. Then give your final answer on the last line "
            "in the form 'Answer: <letter>'."),
    # a thinking model reasons in its own block first (engines/thinking.py); the answer after it is asked for as in zs
    "thinking": "Answer with the option's letter from the given choices directly.",
}
PROMPT_STYLES = tuple(INSTRUCTIONS)
OPEN_INSTRUCTIONS: dict[str, str] = {
    "zs": "Answer the question directly in a few words.",
    "cot": ("Think step by step about the question and the inputs. Then give your final answer on the last line "
            "in the form 'Answer: <your answer>'."),
}

# What an engine writes in place of a media part its model cannot take (``unsupported_media: note``): one line, so
# the model is told that something was there.
TEXT_ONLY_NOTE = "[{modality} omitted: this model takes text only]"
UNSUPPORTED_NOTE = "[{modality} omitted: this model does not take {modality}]"


@dataclass(frozen=True)
class PromptPart:
    """``kind='text'`` with ``text``, or ``kind='media'`` with ``modality`` and benchmark-relative ``path``."""

    kind: str
    text: str | None = None
    modality: str | None = None
    path: str | None = None

    @property
    def ref(self) -> str:
        """Where an engine finds this part's decoded media (``schema.media_ref``: the path, or ``<path>#audio`` for
        a video file's soundtrack)."""
        return media_ref(self.path or "", self.modality)


def format_options(labels: Sequence[str], texts: Sequence[str]) -> str:
    return "\n".join(f"{label}. {text}" for label, text in zip(labels, texts, strict=True))


def render_prompt(instance: Instance, style: str = "zs") -> list[PromptPart]:
    """The prompt of one instance in a prompt style, in the instance's layout (``LAYOUTS``). Every engine builds its
    input from these parts."""
    if instance.layout not in LAYOUTS:
        raise KeyError(f"instance {instance.instance_id!r}: unknown prompt layout {instance.layout!r}; known: "
                       f"{', '.join(LAYOUTS)}")
    return LAYOUTS[instance.layout](instance, style)


def render_options(instance: Instance, style: str = "zs") -> list[PromptPart]:
    """The ``options`` layout: media parts, then the context text, the question, the labelled options and the
    instruction merged into one block (media options each right after its label)."""
    if style not in INSTRUCTIONS:
        raise KeyError(f"unknown prompt style {style!r}; known: {', '.join(INSTRUCTIONS)}")
    media = [PromptPart("media", modality=s.modality, path=s.path) for s in instance.segments if s.kind == "media"]
    context = [s.text for s in instance.segments if s.kind == "text" and s.text]
    if instance.option_segments is None:
        body = "\n\n".join([*context, f"Question: {instance.question}",
                            "Options:\n" + format_options(instance.option_labels, instance.option_texts),
                            INSTRUCTIONS[style]])
        return [*media, PromptPart("text", text=body)]
    # Media options: every candidate is shown right after its label, so the model sees each one (a model shown only
    # the first candidate's media scores at chance).
    parts = [*media, PromptPart("text", text="\n\n".join([*context, f"Question: {instance.question}", "Options:"]))]
    for label, seg in zip(instance.option_labels, instance.option_segments, strict=True):
        if seg.kind == "media":
            parts += [PromptPart("text", text=f"{label}."), PromptPart("media", modality=seg.modality, path=seg.path)]
        else:
            parts.append(PromptPart("text", text=f"{label}. {seg.text}"))
    parts.append(PromptPart("text", text=INSTRUCTIONS[style]))
    return _merge_text(parts)


def render_scenes(instance: Instance, style: str = "zs") -> list[PromptPart]:
    """The contrastive layout: each option input after its enumeration prefix (``Scene A.`` <media> ``Scene B.`` <media>
    ..., or ``Scene A. <caption>`` where the input is text), then ``Question: ...`` and the instruction of the prompt
    style; consecutive text merged. Context segments, if an instance has any, come first (media, then text)."""
    if style not in INSTRUCTIONS:
        raise KeyError(f"unknown prompt style {style!r}; known: {', '.join(INSTRUCTIONS)}")
    if not instance.option_segments:
        raise ValueError(f"instance {instance.instance_id!r} of protocol {instance.protocol!r} has no option "
                         "inputs to show as scenes")
    parts = [PromptPart("media", modality=s.modality, path=s.path) for s in instance.segments if s.kind == "media"]
    parts += [PromptPart("text", text=s.text) for s in instance.segments if s.kind == "text" and s.text]
    for label, seg in zip(instance.option_labels, instance.option_segments, strict=True):
        if seg.kind == "media":
            parts += [PromptPart("text", text=f"Scene {label}."),
                      PromptPart("media", modality=seg.modality, path=seg.path)]
        else:
            parts.append(PromptPart("text", text=f"Scene {label}. {seg.text}"))
    parts.append(PromptPart("text", text=f"Question: {instance.question}\n{INSTRUCTIONS[style]}"))
    return _merge_text(parts)


DEFAULT_LAYOUT = "options"
LAYOUTS = {DEFAULT_LAYOUT: render_options, "scenes": render_scenes}
"""Prompt layout name (``Instance.layout``, ``ProtocolSpec.prompt_layout``) -> the function laying an instance out."""


def render_open_prompt(instance: Instance, style: str = "zs") -> list[PromptPart]:
    """The open-ended prompt: the context (media first, then text) and the question, with no options at all
    (media candidates are left out too: the model has to name the answer). The instruction asks for a short free
    answer, or reasoning then ``Answer: <your answer>`` for ``cot``."""
    if style not in OPEN_INSTRUCTIONS:
        raise KeyError(f"unknown prompt style {style!r}; known: {', '.join(OPEN_INSTRUCTIONS)}")
    media = [PromptPart("media", modality=s.modality, path=s.path) for s in instance.segments if s.kind == "media"]
    context = [s.text for s in instance.segments if s.kind == "text" and s.text]
    body = "\n\n".join([*context, f"Question: {instance.question}", OPEN_INSTRUCTIONS[style]])
    return [*media, PromptPart("text", text=body)]


def open_media_paths(instance: Instance) -> list[str]:
    """Media streams (``media_ref``) an open-ended prompt shows (the context's; never the options')."""
    return [s.ref for s in instance.segments if s.kind == "media"]


_FINAL = re.compile(r"(?i:answer)\s*(?:is|:)\s*(.+)")


def final_answer(text: str | None) -> str:
    """The answer a judge grades: ``<think>`` blocks stripped, then what follows the last ``Answer:`` (or
    ``answer is``) when the text has one, else the whole text, trimmed."""
    if not text:
        return ""
    body = _THINK.sub(" ", text).strip()
    hits = _FINAL.findall(body)
    return (hits[-1] if hits else body).strip().strip("*").strip()


def _merge_text(parts: list[PromptPart]) -> list[PromptPart]:
    """Join consecutive text parts with a newline (fewer, larger text blocks; same tokens to a chat template)."""
    out: list[PromptPart] = []
    for part in parts:
        if part.kind == "text" and out and out[-1].kind == "text":
            out[-1] = PromptPart("text", text=f"{out[-1].text}\n{part.text}")
        else:
            out.append(part)
    return out


def prompt_text(parts: Sequence[PromptPart], placeholder: dict[str, str] | None = None) -> str:
    """Flatten parts to one string, media as ``placeholder[modality]`` (default ``<modality>``)."""
    placeholder = placeholder or {}
    out = []
    for part in parts:
        if part.kind == "media":
            out.append(placeholder.get(part.modality, f"<{part.modality}>"))
        else:
            out.append(part.text or "")
    return "\n".join(out)


_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


def parse_answer(text: str | None, labels: Sequence[str], option_texts: Sequence[str] = ()) -> str | None:
    """Parse a model's answer into one of ``labels`` or None (invalid).

    Order (docs/reference.md, Prompting and parsing): strip ``<think>`` blocks; an explicit ``Answer: X`` /
    ``answer is X`` / ``(X)`` pattern, then ``Option X`` / ``Choice: X``, the Chinese ``答案是X`` / ``答案：X`` /
    ``选X``, and ``\boxed{X}`` (within a pattern the last one wins, since reasoning may mention options before
    concluding; letters are matched in upper case only, so 'the answer is a cat' is not read as A); else a lone option
    letter; else a leading ``X.`` / ``X)`` (markdown bold around it allowed); else a sentence that ends in a lone
    letter after a comma or colon ('Based on the video, D.'); else an exact option-text match; else None.
    """
    if not text:
        return None
    body = _THINK.sub(" ", text).strip()
    if not body:
        return None
    label_set = "".join(re.escape(lab) for lab in labels)
    cls = f"[{label_set}]"
    explicit = [
        rf"(?i:answer)\s*(?i:is|:)\s*[\*\"'\(\[]*\s*({cls})(?![A-Za-z])",
        rf"\(({cls})\)",
        rf"(?i:option|choice)\s*[:：]?\s*[\*\"'\(\[]*\s*({cls})(?![A-Za-z])",
        rf"(?:答案\s*(?:是|为|[:：])|选项?)\s*[\*\"'\(\[（]*\s*({cls})(?![A-Za-z])",
        rf"\\boxed\{{\s*({cls})\s*\}}",
    ]
    for pattern in explicit:
        hits = [h for h in re.findall(pattern, body) if h in labels]
        if hits:
            return hits[-1]
    lone = re.fullmatch(rf"\s*[\*\"'\(\[]*({cls})[\)\]\.\:\*\"']*\s*", body)
    if lone:
        return lone.group(1)
    first_line = body.splitlines()[0].strip()
    lead = re.match(rf"[\*\"']*({cls})[\.\):](\s|\*|$)", first_line)
    if lead:
        return lead.group(1)
    closing = re.search(rf"[,:：]\s*[\*\"']*({cls})[\*\"']*[\.\)]?[\*\"']*\s*$", body)
    if closing:
        return closing.group(1)
    normalized = option_key(body)
    matches = [lab for lab, opt in zip(labels, option_texts, strict=False) if option_key(opt) == normalized]
    if len(matches) == 1:
        return matches[0]
    return None
