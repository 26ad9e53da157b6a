"""The vLLM engine: one in-process ``vllm.LLM`` per engine replica, batched generation, exact option logprobs.

Runs inside the run's model stage like any other engine (``stages.ModelStage``: ``replicas`` actors, ``num_gpus``
each). A tensor-parallel model (``tensor_parallel_size: N``) needs ``num_gpus: N`` on its actor: vLLM then runs its
N workers on the actor's GPUs (one node; the run refuses a config where they differ).

* Prompts are built by ``engines/chat.py`` exactly as for the transformers engine (media placeholders first for
  omni models, a one-line note per media part for text models), so both engines see the same tokens.
* Zero-shot: ``SamplingParams(max_tokens=1, temperature=0, logprob_token_ids=<label ids>)`` returns the
  full-vocabulary log-probabilities of every option-label token in one decoding step (exact: unlike
  ``allowed_token_ids``, no label can fall out of a top-k). Choice and rs confidence as docs/reference.md, Prompting and
  parsing.
* Chain-of-thought: greedy generation, then a second one-token pass at the answer position (``engines/chat.py``'s
  rule), same choice rule as the transformers engine.
* What the model was shown (``engines/shown.py``): placeholder tokens per modality and the input length counted in
  each request output's ``prompt_token_ids`` (vLLM's own processing), frames, their size and seconds from the arrays
  vLLM was given; a prompt whose ids hold no placeholder of a medium it shows is an error of kind ``media``.
* Family models (``engines/families/``: Qwen2-Audio, Qwen2.5-VL, LLaVA-OneVision, InternVL, Gemma 3n, Gemma 4):
  the prompt is the model's own processor's chat template over typed content parts; ``multi_modal_data`` carries
  the decoded arrays (videos with their sampled fps as frame metadata where the family needs it),
  ``multi_modal_uuids`` the content hashes; vLLM runs the same processor on them. A model whose image and video
  tokens attend to each other in both directions (Gemma 4 Unified, the larger Gemma 4 releases) is run causally by
  vLLM's CPU attention: there, a prompt showing an image or a video is an errored row
  (``VISION_ATTENTION_REFUSAL``), not another model's scores.
* Omni models (Qwen2.5-Omni, Qwen3-Omni): ``multi_modal_data`` carries the decoded frames (uint8 T x H x W x 3)
  and waveforms ((float32, rate), as the family's processor is given them); ``multi_modal_uuids`` are the media
  content hashes, so vLLM's multimodal and prefix caches hit across the conditions of an item;
  ``mm_processor_kwargs`` passes the sampled video fps (the family's ``vllm_media_kwargs``). A video shown with its
  own soundtrack (``chat.omni_layout``) is one video placeholder, the audio item paired with it and
  ``use_audio_in_video: True``. Where vLLM's positions differ from transformers' they are replaced by them: a
  Qwen2.5-Omni video with its soundtrack (``vllm_positions``), every Qwen3-Omni video (fractional positions,
  ``vllm_qwen3_positions``); that needs the model in this process (``tensor_parallel_size: 1``; otherwise such
  requests are errored rows). The prompt ids vLLM returns are checked to carry every audio the request was given
  (``FamilyAdapter.check_audio_ids``; else an errored row naming the file).

* Thinking (``engines/thinking.py``), as the transformers engine does it: prompts rendered with the chat template's
  thinking switch off, on for the ``thinking`` style (vLLM's ``chat_template_kwargs``, given here to the template
  this engine renders itself); a ``thinking`` request samples with the model folder's ``generation_config.json``
  settings (a per-request ``seed`` from the instance) up to ``thinking_budget`` tokens or ``</think>``
  (``stop_token_ids``), a block left open is closed by force, then the answer is generated after the block
  and the labels read there in a one-token pass.

In a Ray actor the engine must run in-process: ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is set before vLLM is imported.

``kv_cache_memory_bytes`` fixes the KV cache's size. Without it vLLM sizes the cache from
``gpu_memory_utilization``; on its CPU build that is the fraction of the machine's memory *minus what the process
already holds* (its RSS when the engine starts), so the same config starts or fails depending on what ran before in
that process. On CPU, give it (``engines/vllm_cpu.py``: what the tests and the bench use).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

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
from omnieval.engines.families import family_for
from omnieval.engines.feeding import FEEDING_OPTIONS, Feeding
from omnieval.engines.shown import (
    Shown,
    check_media_tokens,
    decoded_shown,
    error_kind_of,
    known_token,
    placeholder_ids,
    shown_of,
    with_tokens,
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


def vllm_placeholder_tokens(family, tokenizer) -> dict[str, str]:
    """Modality -> the token a family's features fill in vLLM's prompt ids: the family's own overrides, with those
    vLLM's processor expands onto another token (``vllm_placeholder_tokens``: the first the tokenizer knows)."""
    out = dict(getattr(family, "placeholder_tokens", None) or {})
    for modality, candidates in (getattr(family, "vllm_placeholder_tokens", None) or {}).items():
        if (token := known_token(tokenizer, candidates)) is not None:
            out[modality] = token
    return out


_AUDIO_CHECK = "_omnieval_audio"  # a prompt's decoded audio, for the check after generation (never sent to vLLM)
_MEDIA = "_omnieval_media"  # a prompt's decoded media as given to vLLM (never sent to vLLM)
_SHOWN = "_omnieval_shown"  # set by ``_run``: what the prompt showed the model (``shown.Shown``), read by ``score``
_PRIVATE = (_AUDIO_CHECK, _MEDIA, _SHOWN)
VISION_ATTENTION_REFUSAL = ("this model's image and video tokens attend to each other in both directions "
                            "(use_bidirectional_attention: vision), which vLLM's CPU attention ignores: its scores "
                            "for an image or video prompt would not be the model's")


def _drops_vision_attention(llm) -> bool:
    """Whether the model gives the tokens of each image or video bidirectional attention (vLLM's
    ``is_mm_prefix_lm``: the larger Gemma 4 releases, Gemma 4 Unified) on a vLLM build whose attention ignores it:
    the CPU build's attention (0.32) has no multimodal-prefix support and runs such a model causally, without a
    word."""
    if not llm.model_config.is_mm_prefix_lm:
        return False
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return False
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return not CPUAttentionBackend.supports_mm_prefix()


@register_engine("vllm")
class VLLMEngine(Engine):
    def __init__(self, model: str, *, path: str, dtype: str = "auto", max_model_len: int = 8192,
                 gpu_memory_utilization: float = 0.9, tensor_parallel_size: int = 1, enforce_eager: bool = False,
                 max_new_tokens: int = 64, limit_mm_per_prompt: dict | None = None, seed: int = 0,
                 kv_cache_memory_bytes: int | None = None, engine_kwargs: dict | None = None,
                 thinking_budget: int = DEFAULT_THINKING_BUDGET, system_prompt: str | None = None,
                 image_pixels: dict | None = None, soundtrack: bool | None = None, media_first: bool = True):
        super().__init__(model, path=path)
        self.system_prompt = system_prompt
        self.feeding = Feeding.from_options("vllm", image_pixels, soundtrack, media_first)
        check_model_folder("vllm", path)
        self.path = Path(path)
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        self.family = family_for(self.path)  # an omni model's too: its vLLM fields and positions
        refusal = self.family.refusal("vllm") if self.family is not None else None
        if refusal:  # a family vLLM does not carry: one line before vLLM is asked to build it
            raise OptionError("path", f"{refusal} (model folder {path})")
        # a family model's own processor renders the chat template (vLLM runs the same processor on the media); an
        # omni model's tokenizer does (``FamilyAdapter.vllm_processor``)
        self.processor = self.family.vllm_processor(self.path) if self.family is not None else None
        kwargs = dict(engine_kwargs or {})
        if limit_mm_per_prompt:
            kwargs["limit_mm_per_prompt"] = limit_mm_per_prompt
        if kv_cache_memory_bytes is not None:  # a fixed budget, whatever the process already holds (docstring)
            kwargs["kv_cache_memory_bytes"] = kv_cache_memory_bytes
        # where vLLM's positions differ from transformers' (a Qwen2.5-Omni video with its soundtrack, a Qwen3-Omni
        # video), they are replaced (vllm_positions, vllm_qwen3_positions), which can be done only where the model
        # runs in this process: one worker, no engine subprocess. Installed before the model is built.
        in_process = (os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0" and tensor_parallel_size == 1
                      and kwargs.get("pipeline_parallel_size", 1) == 1
                      and kwargs.get("distributed_executor_backend") in (None, "uni"))
        self.positions_replaced = (self.family is not None and in_process
                                   and self.family.install_vllm_positions())
        self.llm = LLM(model=str(self.path), dtype=dtype, max_model_len=max_model_len,
                       gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size,
                       enforce_eager=enforce_eager, seed=seed, **kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_new_tokens, self.thinking_budget, self.seed = max_new_tokens, thinking_budget, seed
        self._template_mode: str | None = None
        # never generated (as the hf engine's suppress_tokens; vLLM bounds a bias to -100, which no greedy step
        # overcomes in practice)
        self.no_media_bias = {t: -100.0 for t in media_token_ids(self.path, self.tokenizer, self.processor)} or None
        self.vision_refusal = VISION_ATTENTION_REFUSAL if _drops_vision_attention(self.llm) else None
        # the placeholders counted in vLLM's prompt_token_ids (an omni model's tokenizer names them: no processor)
        self.placeholders = (placeholder_ids(self.processor or self.tokenizer, self.tokenizer,
                                             vllm_placeholder_tokens(self.family, self.tokenizer))
                             if self.family is not None else {})

    # -- requests -----------------------------------------------------------------------------------------------
    model_folder_option = "path"
    prompt_styles = ("zs", "cot", THINKING_STYLE)
    packages = ("vllm",)
    extra = "vllm"

    @classmethod
    def accepted_modalities(cls, options: dict) -> frozenset[str]:
        """What the folder's model takes (``chat.folder_modalities``: Qwen2.5-Omni video, audio and image; a
        registered family what its adapter says; any other model nothing)."""
        return folder_modalities("vllm", options.get("path"))

    @classmethod
    def validate_options(cls, options: dict) -> None:
        """Value types on the driver: vLLM would refuse them only inside the model's actor, in its own terms."""
        kwargs = options.get("engine_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise OptionError("engine_kwargs", f"vllm engine: engine_kwargs must be a mapping, got {kwargs!r}")
        for name in ("max_model_len", "tensor_parallel_size", "max_new_tokens", "thinking_budget"):
            value = options.get(name, 1)
            if value is None and name == "max_model_len":  # vLLM's own default: the model's context length
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise OptionError(name, f"vllm engine: {name} must be an integer >= 1, got {value!r}")
        share = options.get("gpu_memory_utilization", 0.9)
        if not isinstance(share, int | float) or isinstance(share, bool) or not 0 < share <= 1:
            raise OptionError("gpu_memory_utilization", "vllm engine: gpu_memory_utilization must be the share of "
                                                        f"GPU memory vLLM may use, in (0, 1], got {share!r}")
        checks = (("seed", 0, int, "an integer"), ("enforce_eager", False, bool, "true or false"),
                  ("dtype", "auto", str, "a dtype name such as auto, bfloat16 or float16"))
        for name, default, kind, what in checks:
            value = options.get(name, default)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise OptionError(name, f"vllm engine: {name} must be {what}, got {value!r}")
        limits = options.get("limit_mm_per_prompt") or {}
        if not isinstance(limits, dict) or not all(isinstance(k, str) for k in limits):
            raise OptionError("limit_mm_per_prompt", "vllm engine: limit_mm_per_prompt must be a mapping of "
                                                     f"modality -> most items per prompt (e.g. {{image: 2}}), "
                                                     f"got {limits!r}")
        kv = options.get("kv_cache_memory_bytes")
        if kv is not None and (isinstance(kv, bool) or not isinstance(kv, int) or kv <= 0):
            raise OptionError("kv_cache_memory_bytes", "vllm engine: kv_cache_memory_bytes must be a positive "
                                                       f"number of bytes, got {kv!r}")
        if kv is not None and "kv_cache_memory_bytes" in kwargs:
            raise OptionError("kv_cache_memory_bytes", "vllm engine: kv_cache_memory_bytes is given both as an "
                                                       "option and in engine_kwargs; keep one")
        Feeding.from_options("vllm", **{k: options[k] for k in FEEDING_OPTIONS if k in options})

    def _prompt(self, request: EngineRequest, suffix: str = "") -> dict:
        """The request's prompt in its style; a style its chat template cannot take is refused in one line
        (``thinking.style_refusal``)."""
        refusal = style_refusal(self.model, request.prompt_style, self.template_mode())
        if refusal:
            raise ValueError(refusal)
        parts = self.feeding.parts(render_prompt(request.instance, request.prompt_style))  # soundtracks, order
        return self._parts_prompt(parts, self.feeding.media(request.media), suffix, request.prompt_style)

    def template_mode(self) -> str:
        """How the chat template treats thinking (``thinking.template_mode``: one probe rendered with the switch
        off and on; once per engine)."""
        if self._template_mode is None:
            probe = [PromptPart("text", text="Question?")]
            try:
                off, on = (self._prompt_text(self._parts_prompt(probe, {}, "", style))
                           for style in ("zs", THINKING_STYLE))
                self._template_mode = template_mode(off, on)
            except Exception:  # a family that cannot render a text-only prompt: no thinking, zs and cot as before
                self._template_mode = "none"
        return self._template_mode

    def _prompt_text(self, prompt: dict) -> str:
        """A vLLM prompt's text (a family that gives token ids, Voxtral's, decoded)."""
        return prompt["prompt"] if "prompt" in prompt else self.tokenizer.decode(prompt["prompt_token_ids"])

    def _parts_prompt(self, parts, media: dict, suffix: str = "", style: str = "zs") -> dict:
        switches = switches_for(style)  # vLLM's chat_template_kwargs, for the template rendered here
        if self.family is None:  # a text model: media are text notes
            text = chat_prompt(TemplateSwitches(self.tokenizer, self.system_prompt, **switches), parts, False)
            return {"prompt": check_system_prompt(text, self.system_prompt, self.model) + suffix, _MEDIA: []}
        if self.vision_refusal and any(p.kind == "media" and p.modality in ("image", "video")
                                       and p.modality in self.family.modalities for p in parts):
            raise ValueError(self.vision_refusal)
        renderer = TemplateSwitches(self.processor or self.tokenizer, self.system_prompt, **switches)
        prompt, items, audios = self.family.vllm_request(renderer, parts, media, suffix, self.positions_replaced)
        check_system_prompt(self._prompt_text(prompt), self.system_prompt, self.model)
        return {**prompt, _MEDIA: items, _AUDIO_CHECK: audios}

    def _run(self, prompts: list[dict], params: list) -> list:
        """``LLM.generate`` on the prompts; each output, or the error of a prompt whose ids lack its audio or any
        placeholder of a medium it shows. Each prompt dict gets what it showed the model (``_SHOWN``)."""
        clean = [{k: v for k, v in p.items() if k not in _PRIVATE} for p in prompts]
        outs = self.llm.generate(clean, params, use_tqdm=False)
        checked = []
        for prompt, out in zip(prompts, outs, strict=True):
            try:
                self._check(prompt, out)
                checked.append(out)
            except ValueError as exc:
                checked.append(exc)
        return checked

    def _check(self, prompt: dict, out) -> None:
        """Record what ``prompt`` showed the model (``_SHOWN``): its decoded media (vLLM runs the processor itself,
        so frames, their size and seconds are those of the arrays vLLM was given) and the placeholder tokens of
        vLLM's own ``prompt_token_ids``. Then refuse it where the ids lost media: an omni prompt's audio tokens
        short of its waveforms' (``FamilyAdapter.check_audio_ids``), or no placeholder of a medium it shows
        (``shown.check_media_tokens``)."""
        items = prompt.get(_MEDIA) or []
        shown = self.feeding.shown(with_tokens(decoded_shown(items) if items else Shown(), out.prompt_token_ids,
                                               self.placeholders, {item.modality for item in items}))
        prompt[_SHOWN] = shown
        if self.family is not None:
            self.family.check_audio_ids(self.tokenizer, out.prompt_token_ids, prompt.get(_AUDIO_CHECK) or [])
        check_media_tokens(items, shown)

    def _one_token(self, prompts: list[dict], label_ids: list[list[int]]) -> list:
        """Full-vocabulary logprobs of the given token ids at the next position, one list per prompt (or the
        prompt's error)."""
        from vllm import SamplingParams

        params = [SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=ids) for ids in label_ids]
        outs = self._run(prompts, params)
        return [out if isinstance(out, Exception) else [float(out.outputs[0].logprobs[0][t].logprob) for t in ids]
                for out, ids in zip(outs, label_ids, strict=True)]

    def _batched(self, fn, items: list) -> list:
        """Run ``fn`` on the whole batch; if that fails, one by one so only the bad request carries the error."""
        try:
            return fn(items)
        except Exception:
            out = []
            for item in items:
                try:
                    out.extend(fn([item]))
                except Exception as exc:
                    out.append(exc)
            return out

    # -- scoring ------------------------------------------------------------------------------------------------
    def score(self, requests: Sequence[EngineRequest]) -> list[EngineResult]:
        results: list[EngineResult | None] = [None] * len(requests)
        zs, cot, thinking = [], [], []
        for i, req in enumerate(requests):
            try:
                entry = (i, self._prompt(req), label_token_ids(self.tokenizer, req.instance.option_labels))
                {"cot": cot, THINKING_STYLE: thinking}.get(req.prompt_style, zs).append(entry)
            except Exception as exc:
                results[i] = _error(exc)
        if thinking:
            for (i, _, _), res in zip(thinking, self._score_thinking(requests, thinking), strict=True):
                results[i] = res
        if zs:
            scored = self._batched(lambda e: self._one_token([p for _, p, _ in e], [ids for _, _, ids in e]), zs)
            for (i, prompt, _), lp in zip(zs, scored, strict=True):
                labels = requests[i].instance.option_labels
                results[i] = _error(lp) if isinstance(lp, Exception) else result_from_option_logprobs(labels, lp)
                results[i].shown = _shown_dict(prompt)
        if cot:
            texts = self._batched(self._generate, [p for _, p, _ in cot])
            second = []
            for (i, prompt, _), text in zip(cot, texts, strict=True):
                if isinstance(text, Exception):
                    results[i] = _error(text)
                    results[i].shown = _shown_dict(prompt)
                    continue
                labels = requests[i].instance.option_labels
                reasoning, ids = cot_answer_position(self.tokenizer, text, labels)
                second.append((i, text, self._prompt(requests[i], suffix=reasoning), ids, _shown_dict(prompt)))
            scored = self._batched(lambda e: self._one_token([x[2] for x in e], [x[3] for x in e]), second)
            for (i, text, _, _, shown), lp in zip(second, scored, strict=True):
                results[i] = _error(lp) if isinstance(lp, Exception) else cot_result(requests[i].instance, lp, text)
                results[i].shown = shown  # what the question showed, before the reasoning
        return results  # type: ignore[return-value]

    def _sample_ids(self, prompts: list[dict], max_tokens: int, seeds: list[int], stop: Sequence[int] = ()) -> list:
        """The token ids each prompt's thinking generation adds (or the prompt's error): the model's own sampling
        settings (``thinking.generation_settings``), one seed a prompt, stopping at end of turn or a ``stop`` id."""
        from vllm import SamplingParams

        settings = generation_settings(self.path, THINKING_STYLE)
        sampling = {k: settings[k] for k in ("temperature", "top_p", "top_k") if settings[k] is not None}
        params = [SamplingParams(max_tokens=max_tokens, seed=seed % 2**31, stop_token_ids=list(stop) or None,
                                 logit_bias=self.no_media_bias, **sampling) for seed in seeds]
        return [o if isinstance(o, Exception) else list(o.outputs[0].token_ids) for o in self._run(prompts, params)]

    def _score_thinking(self, requests: Sequence[EngineRequest], entries: list) -> list[EngineResult]:
        """The transformers engine's rule: the reasoning of every thinking request in one batched call, then for
        each the block closed (by force where left open), the answer after it and the label logprobs there."""
        try:
            close = close_token_id(self.tokenizer)
        except ValueError as exc:
            return [_error(exc) for _ in entries]
        seeds = [requests[i].thinking_seed(self.seed, self.model, THINKING_STYLE) for i, _, _ in entries]
        first = self._batched(lambda e: self._sample_ids([p for _, p, _ in e], self.thinking_budget,
                                                         [s for *_, s in e], [close]),
                              [(*entry[:2], seed) for entry, seed in zip(entries, seeds, strict=True)])
        specials = set(self.tokenizer.all_special_ids)
        results: list[EngineResult] = []
        for (i, prompt, ids), seed, out in zip(entries, seeds, first, strict=True):
            try:
                if isinstance(out, Exception):
                    raise out
                text = self._prompt_text(prompt)
                thought = read_thought(out, self.tokenizer.decode(out, skip_special_tokens=True),
                                       ends_inside_block(text), close, specials)
                results.append(self._thinking_answer(requests[i], ids, thought, keyed_seed(seed, "answer")))
            except Exception as exc:
                results.append(_error(exc))
        return results

    def _thinking_answer(self, request: EngineRequest, label_ids: list[int], thought, seed: int) -> EngineResult:
        """The answer after a thought's closed block (or its own text where no block was opened) and the label
        logprobs read where the answer starts."""
        answer = thought.split.answer
        context = self._prompt(request, suffix=thought.suffix or "")
        if thought.suffix is not None:
            out = self._sample_ids([context], self.max_new_tokens, [seed])[0]
            if isinstance(out, Exception):
                raise out
            answer = self.tokenizer.decode(out, skip_special_tokens=True).strip()
        logprobs = self._one_token([context], [label_ids])[0]
        if isinstance(logprobs, Exception):
            raise logprobs
        res = cot_result(request.instance, logprobs, answer)
        res.reasoning, res.reasoning_tokens = thought.split.reasoning or "", thought.tokens
        return res

    def _generate(self, prompts: list[dict], max_tokens: list[int] | None = None) -> list[str]:
        from vllm import SamplingParams

        budgets = max_tokens or [self.max_new_tokens] * len(prompts)
        params = [SamplingParams(max_tokens=int(m), temperature=0.0, logit_bias=self.no_media_bias) for m in budgets]
        return [o if isinstance(o, Exception) else o.outputs[0].text for o in self._run(prompts, params)]

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Free text: each request's parts as a prompt (media as for scoring), greedy, batched."""
        results: list[GenerationResult | None] = [None] * len(requests)
        ready = []
        for i, req in enumerate(requests):
            try:
                prompt = self._parts_prompt(self.feeding.parts(req.parts), self.feeding.media(req.media))
                ready.append((i, prompt, req.max_new_tokens or self.max_new_tokens))
            except Exception as exc:
                results[i] = GenerationResult(None, error=_error(exc).error)
        texts = self._batched(lambda e: self._generate([p for _, p, _ in e], [m for *_, m in e]), ready)
        for (i, prompt, _), text in zip(ready, texts, strict=True):
            failed = _error(text) if isinstance(text, Exception) else None
            results[i] = (GenerationResult(None, error=failed.error, error_kind=failed.error_kind)
                          if failed is not None else GenerationResult(text))
            results[i].shown = _shown_dict(prompt)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        self.llm = None


def _error(exc: Exception) -> EngineResult:
    return EngineResult(choice=None, error=f"vllm engine: {type(exc).__name__}: {exc}", error_kind=error_kind_of(exc),
                        shown=shown_of(exc))


def _shown_dict(prompt: dict) -> dict | None:
    """What a prompt that went through ``_run`` showed the model (None for one that never reached vLLM)."""
    shown = prompt.get(_SHOWN)
    return shown.to_dict() if shown is not None else None
