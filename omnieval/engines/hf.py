"""The transformers engine: option-label logits from one forward pass -> choice and rs confidence
(docs/reference.md, Prompting and parsing).

Options (the run config's ``options``): ``path`` (model folder, required), ``dtype`` (``float32``), ``device``
(``cpu``; ``cuda`` where configured), ``max_new_tokens`` for ``cot`` and a thinking answer (64), ``batch_size`` (8:
zero-shot requests are padded on the left and scored together), ``thinking_budget`` (reasoning tokens of the
``thinking`` style, 4096) and ``seed`` (0: a thinking generation samples, seeded by the instance).

Two families, detected from the folder's ``config.json``:

* **omni** (``model_type: qwen2_5_omni``, also a thinker-only ``qwen2_5_omni_thinker`` save; ``qwen3_omni_moe``):
  the Qwen2.5-Omni or Qwen3-Omni thinker, loaded from the full-model folder (its ``thinker.`` weights; talker and
  token2wav or code2wav are never built). The prompt goes through the model's chat template with one placeholder
  per media part (media first, then the text part); the model's own processor (``families.OmniFamily``,
  ``families.Qwen3OmniFamily``) turns it and the video frames, audio waveforms and images from ``DecodedMedia``
  into the thinker's inputs, a video's own soundtrack interleaved with it (``use_audio_in_video``). Zero-shot
  prompts are left-padded into batches like a text model's. Qwen2.5-Omni's vision and audio towers (and
  Qwen2.5-VL's) attend within blocks in one call per block length (``engines/grouped_attention.py``), not one per
  block. Other media kinds (point clouds) become a text note,
  ``[pointcloud omitted: this model does not take pointcloud]``.
* **family** (a ``model_type`` registered in ``engines/families/``: Qwen2-Audio, Qwen2.5-VL, LLaVA-OneVision,
  InternVL, Gemma 3n, Gemma 4, Gemma 4 Unified, Phi-4-multimodal, Qwen3-VL, Qwen3-VL-MoE, Qwen3.5, the audio
  families): the model's own ``AutoProcessor`` renders the chat template over typed content parts (in the request's
  part order) and turns the decoded frames, waveforms and images into the model's tensors; the class named by the
  adapter is loaded, and given what else the adapter says (``prepare_hf_model``: Phi-4-multimodal's modality
  adapters). One forward pass per prompt (the processor's tensors as the adapter's ``hf_model_inputs`` passes them:
  Gemma 4's media encoded first). Media the family does not take become a text note. A processor that cannot be
  built (Qwen-style video processors, the omni one included, import torchvision), or a family whose model code needs
  a missing package (Gemma 3n: timm), is a one-line error naming the package.
* **text** (any other ``AutoModelForCausalLM``): text only. Each media part becomes a one-line note,
  ``[video omitted: this model takes text only]``, so the model still sees that something was there (a text
  baseline; it is told, not left to guess, that it cannot see the video).

Zero-shot: next-token logits after the assistant turn opens. ``option_logprobs`` = full-vocabulary log-softmax at
the option-label tokens (``A``, ``B``, ...); choice = argmax of their restricted softmax, confidence = its max.

Chain-of-thought: greedy generation (deterministic) up to ``max_new_tokens``; ``raw_text`` keeps it. A second pass
reads the label logits at the answer position: prompt + the generated text up to and including its last
``Answer:``, or, if it wrote none, prompt + the whole reasoning + ``\\nAnswer:``; the label tokens there are
`` A``, `` B``, ... (with the space that follows ``Answer:``). Rule: choice = the label parsed from the generated
text (``parse_answer``) when it parses, else the argmax at the answer position; confidence = the restricted
softmax of the chosen label at the answer position (so a parsed answer the logits disagree with gets low
confidence).

A request that cannot be scored (missing or wrong media, a label that is not one token, a failing forward pass)
gets an ``EngineResult`` with ``error`` set; ``score`` never raises for one request.

Each result says what the model was shown (``shown``: frames, their size and the seconds heard as the processor took
them, placeholder tokens per modality and the input length, ``engines/shown.py``), and a request whose input ids
hold no placeholder of a medium it shows (a soundtrack the processor dropped) is an error of kind ``media``.

Thinking (``engines/thinking.py``): every prompt is rendered with the chat template's thinking switch, off for
``zs``, ``cot`` and free generation (a Qwen3 template then writes an empty ``<think>`` block before the answer, so
the label logits are read after it), on for ``thinking``; a template that always opens a block refuses ``zs`` and
``cot`` in one line, and one without a block refuses ``thinking``. A ``thinking`` request samples with the model
folder's ``generation_config.json`` settings up to ``thinking_budget`` tokens or the closing ``</think>``, closes a
block left open by force, generates the answer after it (``max_new_tokens``) and reads the label logits at the
first position after the block: choice and confidence as for ``cot``, from the answer text alone (``raw_text``);
the block goes to ``reasoning`` with its token count.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import torch

from omnieval.core.keyed import keyed_seed
from omnieval.core.prompts import PromptPart, render_prompt
from omnieval.engines.base import (
    Engine,
    EngineRequest,
    EngineResult,
    GenerationRequest,
    GenerationResult,
    OptionError,
    check_model_folder,
    cot_result,
    register_engine,
    result_from_option_logprobs,
)
from omnieval.engines.chat import (
    chat_prompt,
    cot_answer_position,
    folder_modalities,
    label_token_ids,
    media_token_ids,
)
from omnieval.engines.families import family_for, load_processor
from omnieval.engines.feeding import FEEDING_OPTIONS, Feeding
from omnieval.engines.grouped_attention import use_grouped_block_attention
from omnieval.engines.omni_inputs import Encoded, collate
from omnieval.engines.shown import (
    Shown,
    check_media_tokens,
    error_kind_of,
    placeholder_ids,
    processed_shown,
    shown_of,
)
from omnieval.engines.thinking import (
    DEFAULT_THINKING_BUDGET,
    THINKING_STYLE,
    TemplateSwitches,
    check_system_prompt,
    close_token_id,
    ends_inside_block,
    generation_settings,
    read_thought,
    style_refusal,
    switches_for,
    template_mode,
)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@register_engine("hf")
class HFEngine(Engine):
    def __init__(self, model: str, *, path: str, dtype: str = "float32", device: str = "cpu",
                 max_new_tokens: int = 64, batch_size: int = 8, thinking_budget: int = DEFAULT_THINKING_BUDGET,
                 seed: int = 0, system_prompt: str | None = None, image_pixels: dict | None = None,
                 soundtrack: bool | None = None, media_first: bool = True):
        super().__init__(model, path=path, dtype=dtype, device=device, max_new_tokens=max_new_tokens,
                         batch_size=batch_size, thinking_budget=thinking_budget, seed=seed,
                         system_prompt=system_prompt, image_pixels=image_pixels, soundtrack=soundtrack,
                         media_first=media_first)
        self.system_prompt = system_prompt
        self.validate_options(self.options)
        self.feeding = Feeding.from_options("hf", image_pixels, soundtrack, media_first)
        check_model_folder("hf", path)
        self.path = Path(path)
        self.device, self.dtype = torch.device(device), DTYPES[dtype]
        self.max_new_tokens, self.batch_size = max_new_tokens, batch_size
        self.thinking_budget, self.seed = thinking_budget, seed
        self._template_mode: str | None = None
        with _quiet_default_talker_config():
            self._load()

    model_folder_option = "path"
    prompt_styles = ("zs", "cot", THINKING_STYLE)
    packages = ("torch", "transformers")
    extra = "hf"

    @classmethod
    def accepted_modalities(cls, options: dict) -> frozenset[str]:
        """What the folder's model takes (``chat.folder_modalities``: Qwen2.5-Omni video, audio and image; a
        registered family what its adapter says; any other model nothing)."""
        return folder_modalities("hf", options.get("path"))

    @classmethod
    def validate_options(cls, options: dict) -> None:
        dtype = options.get("dtype", "float32")
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise OptionError("dtype", f"hf engine: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        device = options.get("device", "cpu")
        if not isinstance(device, str) or not device:
            raise OptionError("device", f"hf engine: device must be a device name such as cpu, cuda or cuda:0, "
                                        f"got {device!r}")
        for name in ("max_new_tokens", "batch_size", "thinking_budget"):
            value = options.get(name, 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise OptionError(name, f"hf engine: {name} must be an integer >= 1, got {value!r}")
        Feeding.from_options("hf", **{k: options[k] for k in FEEDING_OPTIONS if k in options})

    def _load(self) -> None:
        from transformers import AutoTokenizer

        self.family = family_for(self.path)  # the omni models' adapters too (families.OmniFamily)
        refusal = self.family.refusal("hf") if self.family is not None else None
        if refusal:
            raise OptionError("path", f"{refusal} (model folder {self.path})")
        # the processor first: it names a missing package in one line (Voxtral's tokenizer is mistral_common's)
        self.processor = load_processor(self.path) if self.family is not None else None
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        if self.family is not None:
            import transformers

            net = self._build_net(getattr(transformers, self.family.model_class))
        else:
            from transformers import AutoModelForCausalLM

            net = self._build_net(AutoModelForCausalLM)
        self.net = net.to(self.device).eval()
        # the decoder's own logits where the model class leaves a scaling out (families.GraniteSpeechFamily)
        self.logit_scale = self.family.logit_scale(self.net.config) if self.family is not None else 1.0
        if self.family is not None:
            self.family.prepare_hf_model(self.net, self.path)
        self.grouped_towers = use_grouped_block_attention(self.net)
        self.media_token_ids = media_token_ids(self.path, self.tokenizer, self.processor)
        self.placeholders = (placeholder_ids(self.processor, self.tokenizer,
                                             getattr(self.family, "placeholder_tokens", None))
                             if self.family is not None else {})
        self.audio_token_id = self.placeholders.get("audio")  # the audio placeholder's id, where the model has one

    def _build_net(self, model_class):
        """The network from the folder's weights (a full-model omni folder: ``from_pretrained`` takes the thinker
        sub-config and strips the ``thinker.`` prefix). ``omnieval bench gpu`` overrides this one step to build
        real-size random weights on the GPU, so everything else it times is this engine's own code."""
        return model_class.from_pretrained(self.path, dtype=self.dtype)

    # -- prompts ----------------------------------------------------------------------------------------------
    def prompt_text(self, parts: Sequence[PromptPart], style: str = "zs") -> str:
        """The chat-formatted prompt: media parts as placeholders (omni, with a video's own soundtrack inside its
        video placeholder, ``chat.omni_layout``; families through their processor) or as text notes (text models);
        the template's thinking switch on for the ``thinking`` style only (``thinking.switches_for``)."""
        switches = switches_for(style)
        if self.family is not None:
            text = self.family.prompt(TemplateSwitches(self.processor, self.system_prompt, **switches),
                                      self.family.prompt_parts(parts))
        else:
            text = chat_prompt(TemplateSwitches(self.tokenizer, self.system_prompt, **switches), parts, False)
        return check_system_prompt(text, self.system_prompt, self.model)

    def template_mode(self) -> str:
        """``switch``, ``always`` or ``none``: how the chat template treats thinking (``thinking.template_mode``,
        from one probe prompt rendered with the switch off and on; once per engine)."""
        if self._template_mode is None:
            probe = [PromptPart("text", text="Question?")]
            try:
                self._template_mode = template_mode(self.prompt_text(probe), self.prompt_text(probe, THINKING_STYLE))
            except Exception:  # a family that cannot render a text-only prompt: no thinking, zs and cot as before
                self._template_mode = "none"
        return self._template_mode

    def encode(self, media_by_path: dict, parts: Sequence[PromptPart], text: str) -> Encoded:
        """``text`` (``prompt_text(parts)``, maybe with a suffix) as the model's inputs: a family model's processor
        output; an omni request's ``Encoded`` from its processor (refused where its ids do not carry all of its
        audio, ``chat.check_audio_tokens``); a text model's ids."""
        return self.encode_shown(media_by_path, parts, text)[0]

    def encode_shown(self, media_by_path: dict, parts: Sequence[PromptPart], text: str) -> tuple[Encoded, Shown]:
        """``encode``, and what the inputs show the model (``shown.processed_shown``: frames, sizes and seconds as
        the processor took them, placeholder tokens counted in the ids). A request whose ids hold no placeholder
        of a medium it shows is refused (``shown.MediaDropped``)."""
        if self.family is None:  # a text model: media were text notes
            enc = self._encode(media_by_path, parts, text)[0]
            return enc, Shown(prompt_tokens=len(enc.input_ids))
        enc, items = self._encode(self.feeding.media(media_by_path), parts, text)  # images within their budget
        ids = enc.input_ids if isinstance(enc, Encoded) else enc["input_ids"][0].tolist()
        tensors = enc.tensors if isinstance(enc, Encoded) else enc
        shown = self.feeding.shown(processed_shown(items, tensors, self.processor, ids, self.placeholders))
        check_media_tokens(items, shown)
        return enc, shown

    def _encode(self, media_by_path: dict, parts: Sequence[PromptPart], text: str) -> tuple[Encoded, list]:
        """The inputs and the decoded media given to the processor with them (a video's soundtrack included)."""
        if self.family is not None:  # the family's processor on the prompt (``FamilyAdapter.hf_encode``)
            return self.family.hf_encode(self.processor, text, parts, media_by_path)
        return Encoded(self.tokenizer.encode(text, add_special_tokens=False)), []

    def label_ids(self, labels: Sequence[str], prefix: str = "") -> list[int]:
        return label_token_ids(self.tokenizer, labels, prefix)

    # -- model calls ------------------------------------------------------------------------------------------
    def _inputs(self, batch: Sequence[Encoded]) -> dict:
        """The model's inputs for one forward pass: a family model's as its adapter lays them out
        (``FamilyAdapter.hf_batch``: one prompt a pass, or the omni families' left-padded batches with
        ``use_audio_in_video``, whose requests the caller batches apart); a text model's ids left-padded, with
        position ids that ignore the padding."""
        if self.family is not None:
            return self.family.hf_batch(self.net, batch, self.pad_id, self.device, self.dtype)
        return collate(batch, self.pad_id, self.device, self.dtype, text_positions=True)

    @torch.no_grad()
    def next_token_logprobs(self, batch: Sequence[Encoded]) -> torch.Tensor:
        """(len(batch), vocab) float32 log-softmax of the next token after each prompt (family models: one
        forward pass per prompt, each with exactly its processor's tensors)."""
        if self.family is not None and not self.family.batched_forward and len(batch) > 1:
            return torch.cat([self.next_token_logprobs([enc]) for enc in batch])
        with _last_position_logits(self.net):
            logits = self.net(**self._inputs(batch), use_cache=False).logits[:, -1].float()
        if self.logit_scale != 1.0:
            logits = logits * self.logit_scale
        return torch.log_softmax(logits, dim=-1).cpu()

    @torch.no_grad()
    def greedy(self, enc: Encoded, max_new_tokens: int | None = None) -> str:
        """Greedy continuation of one encoded prompt (special tokens dropped); media placeholder tokens are never
        generated (``chat.media_token_ids``)."""
        inputs = self._inputs([enc])
        eos = [i for i in {self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids("<|im_end|>")}
               if isinstance(i, int) and i >= 0]
        out = self.net.generate(**inputs, max_new_tokens=max_new_tokens or self.max_new_tokens, do_sample=False,
                                temperature=None, top_p=None, top_k=None, pad_token_id=self.pad_id,
                                eos_token_id=eos or None, suppress_tokens=self.media_token_ids or None)
        return self.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    # -- scoring ----------------------------------------------------------------------------------------------
    def _prepare(self, request: EngineRequest) -> tuple[list[PromptPart], str]:
        inst = request.instance
        missing = [s.ref for s in inst.media_segments() if s.ref not in request.media]
        if missing:
            raise ValueError(f"media not decoded for this request: {', '.join(map(str, missing))}")
        refusal = style_refusal(self.model, request.prompt_style, self.template_mode())
        if refusal:
            raise ValueError(refusal)
        parts = self.feeding.parts(render_prompt(inst, request.prompt_style))  # soundtracks and media order
        return parts, self.prompt_text(parts, request.prompt_style)

    def _score_zs(self, requests: Sequence[EngineRequest]) -> list[EngineResult]:
        """Encode each request (errors stay per request), then one forward pass per ``batch_size`` chunk; a chunk
        that fails is retried one request at a time so only the bad request carries the error."""
        results: list[EngineResult | None] = [None] * len(requests)
        ready: list[tuple[int, Encoded, list[int]]] = []
        shown: dict[int, Shown] = {}
        for i, req in enumerate(requests):
            try:
                parts, text = self._prepare(req)
                enc, shown[i] = self.encode_shown(req.media, parts, text)
                ready.append((i, enc, self.label_ids(req.instance.option_labels)))
            except Exception as exc:
                results[i] = _error(exc, shown.get(i))
        # requests whose videos carry their soundtracks go in forward passes of their own (one flag per pass)
        chunks = []
        for flag in (False, True):
            group = [entry for entry in ready if _soundtrack_flag(entry[1]) is flag]
            chunks += [group[start:start + self.batch_size] for start in range(0, len(group), self.batch_size)]
        for chunk in chunks:
            try:
                logprobs = self.next_token_logprobs([enc for _, enc, _ in chunk])
                rows = list(zip(chunk, logprobs, strict=True))
            except Exception:
                rows = []
                for item in chunk:
                    try:
                        rows.append((item, self.next_token_logprobs([item[1]])[0]))
                    except Exception as exc:
                        results[item[0]] = _error(exc, shown[item[0]])
            for (i, _, ids), lp in rows:
                labels = requests[i].instance.option_labels
                results[i] = result_from_option_logprobs(labels, [float(lp[t]) for t in ids])
                results[i].shown = shown[i].to_dict()
        return results  # type: ignore[return-value]

    def _score_cot(self, request: EngineRequest) -> EngineResult:
        inst = request.instance
        parts, text = self._prepare(request)
        enc, shown = self.encode_shown(request.media, parts, text)  # what the question showed, before reasoning
        generated = self.greedy(enc)
        reasoning, ids = cot_answer_position(self.tokenizer, generated, inst.option_labels)
        logprobs = self.next_token_logprobs([self.encode(request.media, parts, text + reasoning)])[0]
        result = cot_result(inst, [float(logprobs[t]) for t in ids], generated)
        result.shown = shown.to_dict()
        return result

    @torch.no_grad()
    def sample_ids(self, enc: Encoded, max_new_tokens: int, seed: int, stop: Sequence[int] = ()) -> list[int]:
        """The token ids one thinking generation adds to an encoded prompt, sampled with the model's own settings
        (``thinking.generation_settings``; greedy where its folder sets none), seeded by ``seed``; it stops at an
        end of turn or a ``stop`` id (kept as the last id). Media placeholder tokens are never generated."""
        inputs = self._inputs([enc])
        settings = generation_settings(self.path, THINKING_STYLE)
        eos = [i for i in {self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids("<|im_end|>"), *stop}
               if isinstance(i, int) and i >= 0]
        sampled = bool(settings["temperature"])
        torch.manual_seed(seed)
        out = self.net.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=sampled,
                                temperature=settings["temperature"] if sampled else None,
                                top_p=settings["top_p"] if sampled else None,
                                top_k=settings["top_k"] if sampled else None, pad_token_id=self.pad_id,
                                eos_token_id=eos or None, suppress_tokens=self.media_token_ids or None)
        return out[0, inputs["input_ids"].shape[1]:].tolist()

    def _score_thinking(self, request: EngineRequest) -> EngineResult:
        """Reasoning up to the budget or its closing marker, the block closed by force where left open, the answer
        generated after it, the label logits read at the first position after the block (module doc)."""
        inst = request.instance
        parts, text = self._prepare(request)
        close = close_token_id(self.tokenizer)
        seed = request.thinking_seed(self.seed, self.model, THINKING_STYLE)
        ids = self.sample_ids(self.encode(request.media, parts, text), self.thinking_budget, seed, stop=[close])
        generated = self.tokenizer.decode(ids, skip_special_tokens=True)
        thought = read_thought(ids, generated, ends_inside_block(text), close, set(self.tokenizer.all_special_ids))
        context, answer = text, thought.split.answer  # no block opened: the text is the answer, read where it starts
        if thought.suffix is not None:
            context = text + thought.suffix
            answer_ids = self.sample_ids(self.encode(request.media, parts, context), self.max_new_tokens,
                                         keyed_seed(seed, "answer"))
            answer = self.tokenizer.decode(answer_ids, skip_special_tokens=True).strip()
        labels = self.label_ids(inst.option_labels)
        logprobs = self.next_token_logprobs([self.encode(request.media, parts, context)])[0]
        res = cot_result(inst, [float(logprobs[t]) for t in labels], answer)
        res.reasoning, res.reasoning_tokens = thought.split.reasoning or "", thought.tokens  # "": no block written
        return res

    def score(self, requests: Sequence[EngineRequest]) -> list[EngineResult]:
        results: list[EngineResult | None] = [None] * len(requests)
        one_by_one = {"cot": self._score_cot, THINKING_STYLE: self._score_thinking}
        zs = [i for i, r in enumerate(requests) if r.prompt_style not in one_by_one]
        for i, res in zip(zs, self._score_zs([requests[i] for i in zs]), strict=True):
            results[i] = res
        for i, req in enumerate(requests):
            if req.prompt_style in one_by_one:
                try:
                    results[i] = one_by_one[req.prompt_style](req)
                except Exception as exc:
                    results[i] = _error(exc)
        return results  # type: ignore[return-value]

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Free text for each request: its parts through the chat template (media as for scoring), greedy."""
        out = []
        for req in requests:
            try:
                parts = self.feeding.parts(req.parts)
                enc, shown = self.encode_shown(req.media, parts, self.prompt_text(parts))
                out.append(GenerationResult(self.greedy(enc, req.max_new_tokens), shown=shown.to_dict()))
            except Exception as exc:
                out.append(GenerationResult(None, error=f"hf engine: {type(exc).__name__}: {exc}",
                                            error_kind=error_kind_of(exc), shown=shown_of(exc)))
        return out

    def close(self) -> None:
        self.net = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


@contextmanager
def _quiet_default_talker_config():
    """transformers 5.19 builds a default Qwen2.5-Omni talker config (7B ids, 8k vocabulary) whenever it parses an
    omni config and warns that those default ids are out of range, for every checkpoint. Drop exactly that message
    while loading; every other warning passes."""
    import logging

    class Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "must be `None` or an integer within the vocabulary" not in record.getMessage()

    logger, drop = logging.getLogger("transformers.configuration_utils"), Drop()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


@contextmanager
def _last_position_logits(net):
    """Project only the last position through the output head during one scoring pass. The Qwen2.5-Omni thinker
    (transformers 5.19) has no ``logits_to_keep`` and computes logits for every prompt position: at a 152k vocabulary
    that is 0.3 MB per token in bfloat16, more than the rest of a batch's activations. Only the last row is read
    (prompts are left-padded), so the head's input is cut to it; the logits of that row are the same."""
    head = net.get_output_embeddings() if hasattr(net, "get_output_embeddings") else None
    if head is None:
        yield
        return
    handle = head.register_forward_pre_hook(lambda _module, args: (args[0][:, -1:], *args[1:]))
    try:
        yield
    finally:
        handle.remove()


def _soundtrack_flag(enc) -> bool:
    """An omni request's ``use_audio_in_video``; a family model's processor output (a ``BatchFeature``, whose
    attribute lookup raises for a key it lacks) has none."""
    return bool(enc.use_audio_in_video) if isinstance(enc, Encoded) else False


def _error(exc: Exception, shown: Shown | None = None) -> EngineResult:
    """The result of a request that could not be scored (of kind ``media`` where a medium was dropped), with what
    it showed where that is known."""
    return EngineResult(choice=None, error=f"hf engine: {type(exc).__name__}: {exc}", error_kind=error_kind_of(exc),
                        shown=shown.to_dict() if shown is not None else shown_of(exc))
