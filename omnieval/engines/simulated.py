"""A simulated model with a configurable modality-reliance profile: the known-answer instrument.

It reads no media (it reports only what a model taking its ``modalities`` would have been shown: frames, their
size, seconds of audio, ``engines.shown``). It reads the instance's ``simulation_hints`` (which option each modality's
content supports, recorded by the protocol that built the instance) and behaves like a model that perceives each
modality with a set probability:

1. Each percept in the instance's ``simulation_hints`` is perceived with probability ``reliance[percept]``. A
   percept is a modality (``video``), a joint percept (``image+text``: the image and the question together) or a
   directed one (``audio->text``: matching an audio context to text candidates, which may differ from ``text->audio``);
   a joint or directed percept missing from ``reliance`` gets the product of its modalities' reliances,
   so ``{"image+text": 0.9}`` is a model that only succeeds when it combines both, and ``{"audio": 0.7,
   "text": 0.9}`` one whose audio->text matching succeeds 0.63 of the time. Missing modalities: 0. A medium's
   text stand-in (percept ``audio_as_text``, spectrum's ``<m>_as_text`` conditions) is text: missing from
   ``reliance``, it gets ``reliance["text"]``.
2. Each perceived percept votes for the option its content supports (if any).
3. Decision: a unique top-voted option is chosen. A tie between two or more options (the modalities conflict) is
   an abstention with probability ``abstain_on_conflict``, else one of the tied options at random. No vote at all is
   an abstention with probability ``abstain_on_unsupported``, else a uniform guess among the non-abstention options.
4. Logits: ``margin`` on the decided option plus Gaussian ``noise`` on every option, divided by ``temperature``;
   ``option_logprobs`` = log-softmax over the options, choice = argmax, confidence = restricted-softmax max (rs).
5. ``invalid_rate``: that share of answers is unparseable (choice null), to exercise the invalid path.
   ``modalities``: the media modalities it takes (default all: ``video``, ``audio``, ``image``, ``pointcloud``);
   a percept that involves any other media modality is never perceived (a run's ``unsupported_media: note``
   then measures it as the text model it stands for), and the run's policy sees what it takes through
   ``accepted_modalities``.
6. ``delay_ms``: sleep that long per request, to emulate a model's latency in pipeline tests and benchmarks.
   ``batch_s``: sleep that long per batch (a ``score`` or ``generate`` call), whatever its size: a GPU's time for
   one forward pass. ``load_s``: sleep that long when the engine is built (a replica loading its weights), so a
   sweep bench pays model loads as a real sweep does; the driver's option check builds one without it.
7. ``thinking`` style: the same decision, with a reasoning block (``reasoning``, its word count as
   ``reasoning_tokens``) that names another option than the answer, which ``raw_text`` holds after it.

Free text (``generate``), read from the request's structured ``meta`` (and, for an answer, its ``instance``):

* ``answer`` (open-ended): the option it would decide on by the rules above, said in words (the option's text, a
  refusal for the abstention option); ``invalid_rate`` of the answers are off-topic. CoT adds a line of reasoning
  and ``Answer: ...``. An open instance (no options) is answered with its reference (or, without one, a refusal)
  when a percept showing its own question is perceived, else with a sentence saying the question was missed.
* ``rate`` (a rating judge, ``core.judges``): 5 where the answer quotes the request, else 1 (``judge_error`` and
  ``judge_invalid_rate`` as for verdicts).
* ``judge``: the true verdict (the answer's words contain the reference: ``correct``; a refusal: ``abstained``
  where offered; else ``incorrect``), replaced with probability ``judge_error`` by another allowed verdict drawn
  uniformly, and, with probability ``judge_invalid_rate`` per attempt, an unparseable sentence instead.
* ``describe``: ``"<modality> showing <what the caption or file name says>"``.

So a text-only model (``reliance={"text": 0.9}``) is right ~0.9 + 0.1/4 of the time where text is clean and near
chance where the text shows another anchor whose answer is not an option. Every draw is keyed on
``(seed, model, instance_id, purpose)``: deterministic for any batching, worker count or order.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence

import numpy as np

from omnieval.core.keyed import keyed_rng
from omnieval.core.schema import MEDIA_MODALITIES
from omnieval.engines.base import (
    Engine,
    EngineRequest,
    EngineResult,
    GenerationRequest,
    GenerationResult,
    OptionError,
    register_engine,
    result_from_option_logprobs,
)
from omnieval.engines.shown import decoded_shown
from omnieval.media.decoded import DecodedMedia


@register_engine("simulated")
class SimulatedEngine(Engine):
    def __init__(self, model: str, *, reliance: dict[str, float] | None = None, abstain_on_conflict: float = 0.5,
                 abstain_on_unsupported: float = 0.2, margin: float = 4.0, noise: float = 1.0,
                 temperature: float = 1.0, invalid_rate: float = 0.0, seed: int = 0, delay_ms: float = 0.0,
                 judge_error: float = 0.0, judge_invalid_rate: float = 0.0, modalities: list[str] | None = None,
                 load_s: float = 0.0, batch_s: float = 0.0):
        super().__init__(model)
        self.modalities = _media_modalities(modalities)
        self.reliance = _reliance(reliance)
        for name, value in (("abstain_on_conflict", abstain_on_conflict),
                            ("abstain_on_unsupported", abstain_on_unsupported), ("invalid_rate", invalid_rate),
                            ("judge_error", judge_error), ("judge_invalid_rate", judge_invalid_rate)):
            _number(name, value, "a probability in [0, 1]", lambda v: 0.0 <= v <= 1.0)
        _number("margin", margin, "a number (the decided option's logit boost)", lambda v: True)
        _number("noise", noise, "a number >= 0 (the logits' Gaussian noise)", lambda v: v >= 0)
        _number("temperature", temperature, "a number > 0", lambda v: v > 0)
        _number("delay_ms", delay_ms, "a number of milliseconds >= 0", lambda v: v >= 0)
        _number("load_s", load_s, "a number of seconds >= 0 (the model load time)", lambda v: v >= 0)
        _number("batch_s", batch_s, "a number of seconds >= 0 (the time per batch)", lambda v: v >= 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise OptionError("seed", f"simulated engine: seed must be an integer, got {seed!r}")
        self.abstain_on_conflict = abstain_on_conflict
        self.abstain_on_unsupported = abstain_on_unsupported
        self.margin, self.noise, self.temperature = margin, noise, temperature
        self.invalid_rate, self.seed, self.delay_ms = invalid_rate, seed, delay_ms
        self.judge_error, self.judge_invalid_rate = judge_error, judge_invalid_rate
        self.batch_s = batch_s
        if load_s:
            time.sleep(load_s)

    @classmethod
    def validate_options(cls, options: dict) -> None:
        """The constructor loads nothing: build one (without its ``load_s``, checked first) and report what it
        refuses (``OptionError``)."""
        _number("load_s", options.get("load_s", 0.0), "a number of seconds >= 0 (the model load time)",
                lambda v: v >= 0)
        cls("options-check", **{**options, "load_s": 0.0})

    @classmethod
    def accepted_modalities(cls, options: dict) -> frozenset[str]:
        """Its ``modalities`` option; every media modality when not given (it reads percepts, not media)."""
        return _media_modalities(options.get("modalities"))

    def perceive_probability(self, percept: str) -> float:
        """``reliance[percept]``, else for a joint percept the product of its modalities' reliances; 0 for a
        percept involving a media modality the model does not take (``modalities``)."""
        parts = re.split(r"\+|->", percept)
        if any(m in MEDIA_MODALITIES and m not in self.modalities for m in parts):
            return 0.0
        if percept in self.reliance:
            return float(self.reliance[percept])
        if percept.endswith("_as_text"):  # a medium's text stand-in is read as text
            return float(self.reliance.get("text", 0.0))
        return float(np.prod([self.reliance.get(m, 0.0) for m in parts]))

    def _take_time(self, n_requests: int) -> None:
        """The emulated compute time of one batch: ``batch_s`` plus ``delay_ms`` per request."""
        seconds = self.batch_s + self.delay_ms * n_requests / 1000
        if seconds:
            time.sleep(seconds)

    def _decide(self, request: EngineRequest, rng: np.random.Generator) -> str:
        inst = request.instance
        votes: dict[str, int] = {}
        for percept in sorted(inst.simulation_hints):
            perceived = rng.random() < self.perceive_probability(percept)
            label = inst.simulation_hints[percept]
            if perceived and label is not None:
                votes[label] = votes.get(label, 0) + 1
        answers = [lab for lab in inst.option_labels if lab != inst.abstain_label]
        if votes:
            top = max(votes.values())
            tied = sorted(lab for lab, v in votes.items() if v == top)
            if len(tied) == 1:
                return tied[0]
            if inst.abstain_label and rng.random() < self.abstain_on_conflict:
                return inst.abstain_label
            return tied[int(rng.integers(len(tied)))]
        if inst.abstain_label and rng.random() < self.abstain_on_unsupported:
            return inst.abstain_label
        return answers[int(rng.integers(len(answers)))]

    def _score_one(self, request: EngineRequest) -> EngineResult:
        inst = request.instance
        # a repeated sample's reasoning (cot, thinking) is its own draw, as a sampling model's is; zero-shot logits
        # stay the model's one distribution, from which the model stage draws each sample's label
        sampled = () if request.sample_seed is None or request.prompt_style == "zs" else (request.sample_seed,)
        rng = keyed_rng(self.seed, self.model, inst.instance_id, request.prompt_style, "simulated", *sampled)
        decided = self._decide(request, rng)
        logits = rng.normal(0.0, self.noise, size=len(inst.option_labels))
        logits[inst.option_labels.index(decided)] += self.margin
        logits = logits / self.temperature
        logprobs = logits - np.logaddexp.reduce(logits)
        text = f"Answer: {inst.option_labels[int(np.argmax(logprobs))]} (simulated)"
        if rng.random() < self.invalid_rate:
            return EngineResult(choice=None, option_logprobs=[float(x) for x in logprobs],
                                raw_text="(simulated) I am not sure what you are asking.", shown=self.shown(request))
        res = result_from_option_logprobs(inst.option_labels, logprobs.tolist(), raw_text=text)
        if request.prompt_style in ("cot", "thinking"):  # its reasoning always ends in "Answer: X" (no forced answers)
            res.answer_source = "parsed"
        if request.prompt_style == "thinking":
            res.reasoning = thought(inst.option_labels, res.choice)
            res.reasoning_tokens = len(res.reasoning.split())
        res.shown = self.shown(request)
        return res

    prompt_styles = ("zs", "cot", "thinking")

    def shown(self, request: EngineRequest) -> dict | None:
        """What a model taking ``modalities`` would have been shown: the frames, their size and the seconds of
        audio of the request's decoded media (``shown.decoded_shown``); no tokens (it has no input ids). None
        where the request carries no decoded media (tests that call it without decoding)."""
        items = [request.media.get(seg.ref) for seg in request.instance.media_segments()
                 if seg.modality in self.modalities]
        decoded = [item for item in items if isinstance(item, DecodedMedia)]
        return decoded_shown(decoded).to_dict() if decoded else None

    def score(self, requests: Sequence[EngineRequest]) -> list[EngineResult]:
        out = []
        self._take_time(len(requests))
        for request in requests:
            try:
                out.append(self._score_one(request))
            except Exception as exc:  # one bad request never sinks the batch
                out.append(EngineResult(choice=None, error=f"simulated engine: {type(exc).__name__}: {exc}"))
        return out

    # -- free text ---------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        out = []
        self._take_time(len(requests))
        for request in requests:
            try:
                task = request.meta.get("task")
                rng = keyed_rng(self.seed, self.model, request.key, "simulated-generate")
                if task == "answer":
                    text = self._open_answer(request, rng)
                elif task == "judge":
                    text = self._verdict(request.meta, rng)
                elif task == "rate":
                    text = self._rating(request.meta, rng)
                elif task == "describe":
                    what = request.meta.get("caption") or request.meta.get("path", "something")
                    text = f"{request.meta.get('modality', 'media')} showing {what}"
                else:
                    raise ValueError(f"no simulated behaviour for task {task!r}")
                out.append(GenerationResult(raw_text=text))
            except Exception as exc:
                out.append(GenerationResult(raw_text=None, error=f"simulated engine: {type(exc).__name__}: {exc}"))
        return out

    def _open_answer(self, request: GenerationRequest, rng: np.random.Generator) -> str:
        inst, meta = request.instance, request.meta
        if inst is None:
            raise ValueError("an open-ended answer needs the request's instance")
        if inst.open_only:
            return self._open_item_answer(request, rng)
        decided = self._decide(EngineRequest(inst, {}, meta.get("style", "zs")), rng)
        if rng.random() < self.invalid_rate:
            return "(simulated) I am not sure what you are asking."
        if decided == inst.abstain_label:
            words = "I cannot answer: the inputs disagree."
        else:
            words = inst.option_texts[inst.option_labels.index(decided)]
        return f"Looking at the inputs (simulated).\nAnswer: {words}" if meta.get("style") == "cot" else words

    def _open_item_answer(self, request: GenerationRequest, rng: np.random.Generator) -> str:
        """An open instance's answer (no options): a percept showing the item's own question, perceived, makes the
        model answer it, with the reference where there is one, else with ``OPEN_REFUSAL`` (an item without a
        reference is scored by its release's rule: VoiceBench's ``advbench`` asks for a refusal); none perceived,
        it says it did not catch the question (``OPEN_MISSED``). A ``rated`` item's perceived request is answered by
        a sentence that quotes it."""
        inst, style = request.instance, request.meta.get("style", "zs")
        perceived = False
        for percept in sorted(inst.simulation_hints):  # one draw per percept, in ``_decide``'s order
            hit = rng.random() < self.perceive_probability(percept)
            perceived = perceived or (hit and inst.simulation_hints[percept] is not None)
        if rng.random() < self.invalid_rate:
            return "(simulated) I am not sure what you are asking."
        if not perceived:
            words = OPEN_MISSED
        elif inst.rated:  # a reply a rating judge can check: it takes up the request
            words = f'To answer "{inst.judge_question}": here is my answer.'
        else:
            words = inst.reference or OPEN_REFUSAL
        return f"Listening to the question (simulated).\nAnswer: {words}" if style == "cot" else words

    def _rating(self, meta: dict, rng: np.random.Generator) -> str:
        """A 1-5 rating: 5 where the answer quotes the request, else 1; with probability ``judge_error`` another
        rating drawn uniformly, with probability ``judge_invalid_rate`` a sentence with no rating."""
        rating = 5 if _norm(meta.get("question", "")) in _norm(meta.get("answer", "")) else 1
        if rng.random() < self.judge_error:
            rating = [r for r in range(1, 6) if r != rating][int(rng.integers(4))]
        if rng.random() < self.judge_invalid_rate:
            return f"I would say about {rating} out of five."
        return str(rating)

    def _verdict(self, meta: dict, rng: np.random.Generator) -> str:
        allowed = ["correct", "incorrect", "abstained"] if meta.get("abstention") else ["correct", "incorrect"]
        answer = _norm(meta.get("answer", ""))
        if meta.get("abstention") and REFUSAL.search(answer):
            truth = "abstained"
        elif not meta.get("reference_is_abstention") and f" {_norm(meta.get('reference', ''))} " in f" {answer} ":
            truth = "correct"
        else:
            truth = "incorrect"
        verdict = truth
        if rng.random() < self.judge_error:
            verdict = [v for v in allowed if v != truth][int(rng.integers(len(allowed) - 1))]
        if rng.random() < self.judge_invalid_rate:
            return f"Let me think about whether this is {verdict}."
        return verdict


DEFAULT_RELIANCE = {"video": 0.8, "audio": 0.6, "text": 0.9}
RELIANCE_FORM = ("a mapping of percept -> probability in [0, 1], e.g. {video: 0.8, audio: 0.6, text: 0.9} (a "
                 "percept: a modality, a joint one such as image+text, or a directed one such as audio->text)")


def _reliance(reliance) -> dict[str, float]:
    """``reliance`` checked in the user's terms (a YAML scalar or list would otherwise fail inside ``dict``)."""
    if reliance is None or (isinstance(reliance, Mapping) and not reliance):
        return dict(DEFAULT_RELIANCE)
    if not isinstance(reliance, Mapping):
        raise OptionError("reliance", f"simulated engine: reliance must be {RELIANCE_FORM}; got {reliance!r}")
    for percept, value in reliance.items():
        if not isinstance(percept, str) or not percept.strip():
            raise OptionError("reliance", f"simulated engine: reliance must be {RELIANCE_FORM}; {percept!r} is not "
                                          "a percept name")
        _number(f"reliance.{percept}", value, "a probability in [0, 1]", lambda v: 0.0 <= v <= 1.0)
    return dict(reliance)


def _number(name: str, value, what: str, ok) -> None:
    """A finite int or float (never a bool or a string: ``"0.5"`` in YAML is text) for which ``ok`` holds."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) \
            or not ok(float(value)):
        raise OptionError(name, f"simulated engine: {name} must be {what}, got {value!r}")


def _media_modalities(modalities) -> frozenset[str]:
    if modalities is None:
        return frozenset(MEDIA_MODALITIES)
    if isinstance(modalities, str) or not isinstance(modalities, Sequence) \
            or not all(isinstance(m, str) and m in MEDIA_MODALITIES for m in modalities):
        raise OptionError("modalities", f"simulated engine: modalities must be a list of "
                                        f"{', '.join(MEDIA_MODALITIES)}, got {modalities!r}")
    return frozenset(modalities)


OPEN_REFUSAL = "I'm sorry, I cannot help with that."
OPEN_MISSED = "(simulated) I did not catch the question."
REFUSAL = re.compile(r"cannot answer|can't answer|unable to answer|not possible to (tell|answer)")


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", str(text).lower()).strip()


def thought(labels: Sequence[str], choice: str | None) -> str:
    """A simulated thinking model's reasoning block (``thinking`` style): it names another option than the one it
    answers, so a reader that took an option from inside the block would be seen taking the wrong one."""
    other = next((lab for lab in labels if lab != choice), labels[0])
    return f"(simulated) Option {other} looked likely at first; the inputs say otherwise. Answer: {other}"
