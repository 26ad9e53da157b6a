"""Thinking models: the chat template's thinking switch, the reasoning block split off the answer, and the sampling
settings a thinking generation uses (docs/runs.md, Prompt styles). Pure functions over rendered text and a model
folder, shared by the transformers and vLLM engines so both treat a thinking model alike.

* **The switch.** Qwen3-family chat templates read ``enable_thinking``: on, the assistant turn is left open for the
  model to write ``<think>...</think>`` first; off, the template writes an empty block (``<think>\\n\\n</think>\\n\\n``)
  so the answer comes first. ``TemplateSwitches`` hands the switch to whatever renders the template (a tokenizer or
  a processor) without changing how each family renders; a template that does not read a switch never gets it.
* **Which templates.** ``template_mode`` renders one probe prompt with the switch off and on: ``switch`` where they
  differ, ``always`` where the prompt with the switch off still ends inside an open ``<think>`` (the model's first
  token would be a reasoning token), ``none`` otherwise. ``style_refusal`` says which prompt styles a mode refuses:
  option-logprob scoring (``zs``) and ``cot`` read label logits where the model would be reasoning under an
  ``always`` template, and ``thinking`` needs a template with thinking in it.
* **The split.** ``split_reasoning`` cuts a generation at its closing marker: the reasoning (kept in the
  predictions' ``reasoning`` column) and the text after it, the only text a scorer reads (``raw_text``).
* **The budget.** A reasoning that has not closed after ``thinking_budget`` tokens is closed by force: the engine
  appends ``FORCED_CLOSE`` and generates the answer from there, as Qwen3's documentation describes for budgets.
  Such a row's ``reasoning_tokens`` equals the budget (a reasoning that closes by itself counts fewer tokens, the
  closing marker not among them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_GAP = "\n\n"
"""What follows the closing marker before the answer (Qwen3 templates write ``</think>\\n\\n``)."""
FORCED_CLOSE = "\n" + THINK_CLOSE + ANSWER_GAP
"""Appended to a reasoning that hit the budget unclosed: the answer is generated after it."""
THINKING_SWITCH = "enable_thinking"
THINKING_STYLE = "thinking"
DEFAULT_THINKING_BUDGET = 4096
"""Reasoning tokens a thinking generation may use before its block is closed by force (engine option
``thinking_budget``)."""
SAMPLING_KEYS = ("temperature", "top_p", "top_k")


class TemplateSwitches:
    """A tokenizer or processor whose ``apply_chat_template`` gets the chat-template ``switches``
    (``{"enable_thinking": False}``) in every call, and passes them on to its ``tokenizer``; every other attribute
    is the wrapped object's. A switch the template never names is not passed (a processor would take it for one of
    its own arguments). ``system``: a system message put first in every conversation that has none (a family's
    required system prompt, from its recipe or the model's ``system_prompt`` option)."""

    def __init__(self, target, system: str | None = None, **switches):
        self._target, self._system, self._switches = target, system, switches

    def __getattr__(self, name):
        return getattr(self._target, name)

    @property
    def tokenizer(self):
        return TemplateSwitches(self._target.tokenizer, self._system, **self._switches)

    def apply_chat_template(self, conversation, *args, **kwargs):
        source = str(getattr(self._target, "chat_template", "") or "")
        named = {k: v for k, v in self._switches.items() if k in source}
        if self._system and conversation and isinstance(conversation[0], dict) \
                and conversation[0].get("role") != "system":
            first = conversation[0].get("content")  # a template that takes text content gets text, else parts
            system = self._system if isinstance(first, str) else [{"type": "text", "text": self._system}]
            conversation = [{"role": "system", "content": system}, *conversation]
        return self._target.apply_chat_template(conversation, *args, **{**named, **kwargs})


def check_system_prompt(text: str, system: str | None, model: str) -> str:
    """``text`` (a rendered prompt) when it holds ``system`` (or none was asked for); a family whose prompt is not
    rendered from a conversation (its own message builder) would drop it silently: refused in one line instead."""
    if system and system not in text:
        raise ValueError(f"model {model}: its prompt is not rendered by a chat template that takes a system message, "
                         "so option system_prompt cannot be applied (remove it, or set recipe: false)")
    return text


def switches_for(style: str) -> dict:
    """The chat-template switches of a prompt style: thinking on for ``thinking``, off for every other style."""
    return {THINKING_SWITCH: style == THINKING_STYLE}


def ends_inside_block(text: str) -> bool:
    """Whether ``text`` ends inside an open reasoning block (its last ``<think>`` not closed after it)."""
    return text.rfind(THINK_OPEN) > text.rfind(THINK_CLOSE)


def template_mode(off: str, on: str) -> str:
    """``always``, ``switch`` or ``none`` (module doc) from one probe prompt rendered with the switch off and on."""
    if ends_inside_block(off):
        return "always"
    return "switch" if off != on else "none"


def style_refusal(model: str, style: str, mode: str) -> str | None:
    """The one-line reason a prompt style cannot be run on a model whose template is of ``mode``, or None."""
    if mode == "always" and style != THINKING_STYLE:
        return (f"model {model!r}: its chat template always opens a reasoning block ({THINK_OPEN}), so prompt "
                f"style {style!r} would read option logprobs at a reasoning token; use prompt style "
                f"{THINKING_STYLE!r}")
    if mode == "none" and style == THINKING_STYLE:
        return (f"model {model!r}: its chat template has no thinking switch ({THINKING_SWITCH} changes nothing "
                f"and no {THINK_OPEN} block is opened), so prompt style {THINKING_STYLE!r} cannot be run")
    return None


@dataclass(frozen=True)
class Split:
    """A thinking generation cut at its closing marker: ``reasoning`` (None where no block was opened), the
    ``answer`` after it (stripped), and whether the block was ``closed``."""

    reasoning: str | None
    answer: str
    closed: bool


def split_reasoning(text: str, opened: bool = False) -> Split:
    """Split a generation into its reasoning block and the answer after it. ``opened``: the prompt already ends
    inside the block (a template that writes ``<think>`` itself), so the text starts in the reasoning; a closing
    marker with no opening one before it says the same. The first closing marker ends the block; an unclosed block
    is all reasoning and leaves no answer."""
    start, lead = 0, text.lstrip()
    if not opened and lead.startswith(THINK_OPEN):
        start = len(text) - len(lead) + len(THINK_OPEN)
    elif not opened and THINK_CLOSE not in text:
        return Split(None, text.strip(), True)
    end = text.find(THINK_CLOSE, start)
    if end < 0:
        return Split(text[start:].strip(), "", False)
    return Split(text[start:end].strip(), text[end + len(THINK_CLOSE):].strip(), True)


@dataclass(frozen=True)
class Thought:
    """What a thinking generation's first phase (reasoning up to the budget or the closing marker) came to:
    its ``split``, the reasoning's length in ``tokens``, and the ``suffix`` that closes the block after the generated
    text, before the answer (None where no block was opened: the text is the answer itself)."""

    split: Split
    tokens: int
    suffix: str | None


def read_thought(ids: list[int], text: str, opened: bool, close: int, specials: set[int]) -> Thought:
    """The ``Thought`` of a first phase that generated ``ids`` (decoded: ``text``, special tokens dropped) after a
    prompt that ``opened`` the block or not; ``close`` is the closing marker's id, where generation stopped if the
    model closed the block. The reasoning's tokens are those before the marker, or every generated one but end of
    turn where the block was left open (then the budget, when it ran out)."""
    split = split_reasoning(text, opened)
    if split.reasoning is None:
        return Thought(split, 0, None)
    tokens = ids.index(close) if close in ids else sum(1 for t in ids if t not in specials)
    return Thought(split, tokens, text + (ANSWER_GAP if split.closed else FORCED_CLOSE))


def close_token_id(tokenizer) -> int:
    """The id of the closing marker, which a thinking generation stops at; a tokenizer that splits it into several
    tokens cannot stop there, and the thinking style is refused for it in one line."""
    ids = tokenizer.encode(THINK_CLOSE, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"the tokenizer splits the reasoning block's closing marker {THINK_CLOSE!r} into {len(ids)} "
                         f"tokens; prompt style {THINKING_STYLE!r} needs it as one token")
    return ids[0]


def generation_settings(folder, style: str) -> dict:
    """The sampling settings of a generation in ``style``: for ``thinking``, the ``temperature``, ``top_p`` and
    ``top_k`` of the model folder's ``generation_config.json`` (as its authors set them; greedy where it sets no
    temperature or ``do_sample: false``); greedy for every other style. ``source`` says where they came from; this
    dict is what run.json records per model."""
    greedy = {"temperature": 0.0, "top_p": None, "top_k": None, "source": "greedy"}
    if style != THINKING_STYLE or folder is None:
        return greedy
    path = Path(folder) / "generation_config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return greedy | {"source": "greedy (no readable generation_config.json)"}
    if not isinstance(config, dict) or config.get("do_sample") is False or not config.get("temperature"):
        return greedy | {"source": "greedy (generation_config.json does not sample)"}
    values = {k: config.get(k) for k in SAMPLING_KEYS}
    return {**values, "source": "generation_config.json"}
