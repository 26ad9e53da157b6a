"""The OpenAI-compatible endpoint engine (``engine: openai``): a model served over HTTP (``vllm serve``, SGLang,
llama.cpp, a hosted API) answers through chat completions.

Options: ``base_url`` (``http://host:8000/v1``), ``served_model`` (the ``model`` field sent; default: the configured
name), ``api_key_env`` (the name of an environment variable holding the key; the key itself is read in the engine's
process, sent only in the ``Authorization`` header, and never stored in the config, the run's identity, run.json or
an error message), ``logprobs`` (below), ``top_logprobs``, ``modalities`` and ``video`` (``endpoint_content``),
``max_new_tokens``, and the transport: ``concurrency`` (requests in flight per engine replica), ``timeout_s`` (per
attempt), ``max_retries``, ``backoff_s``, ``max_backoff_s`` (``endpoint_http``).

How option-label logprobs are read (``logprobs``):

* ``token_ids`` (what ``auto`` picks on a vLLM server, found by its ``/tokenize`` route): each label's token id comes
  from the server's own tokenizer (``/tokenize``), and the one-token completion asks for exactly those ids with
  vLLM's ``logprob_token_ids`` extension (``return_tokens_as_token_ids`` names them back): the full-vocabulary
  logprob of every label, as the in-process vLLM engine reads it. Choice and confidence: restricted softmax, ``rs``.
  Chain of thought: greedy generation, then a one-token pass at the answer position (the reasoning up to its last
  ``Answer:`` as a partial assistant message, ``continue_final_message``), the rule of ``engines/chat.py``.
* ``top`` (what ``auto`` picks elsewhere): the standard ``logprobs`` / ``top_logprobs`` (at most 20 on OpenAI's
  API); a label is found where a returned token's text is exactly the label. All labels found: ``rs``, exact. Some
  missing: their logprobs are null, the restricted softmax runs over the found ones and the row says
  ``confidence_method: rs_topk`` (a missing label is given probability 0, so confidence is an upper bound).
  No label among them, or no logprobs in the reply: generate and parse, as ``none``. Chain of thought is generated
  and parsed (no answer-position pass: that needs ``continue_final_message``, a vLLM extension).
* ``none``: generate (``max_new_tokens``, greedy) and parse the label (``prompts.parse_answer``); no confidence,
  ``confidence_method`` null, the reply in ``raw_text``.

A request that fails for good (HTTP 4xx, or 5xx / timeouts / malformed replies past the retries) is an errored row
(``error: openai engine: ...``, no choice), never an answer; a rerun of the run retries it.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from omnieval.core.prompts import parse_answer, render_prompt
from omnieval.engines.base import (
    Engine,
    EngineRequest,
    EngineResult,
    GenerationRequest,
    GenerationResult,
    OptionError,
    cot_result,
    register_engine,
    result_from_option_logprobs,
)
from omnieval.engines.chat import cot_answer_position, label_token_ids
from omnieval.engines.endpoint_content import SENT_MODALITIES, VIDEO_FORMATS, user_content
from omnieval.engines.endpoint_http import EndpointError, JsonClient, RetryPolicy

LOGPROB_MODES = ("auto", "token_ids", "top", "none")
TOKEN_ID_PREFIX = "token_id:"


@register_engine("openai")
class OpenAIEngine(Engine):
    def __init__(self, model: str, *, base_url: str, served_model: str | None = None, api_key_env: str | None = None,
                 logprobs: str = "auto", top_logprobs: int = 20, modalities: Sequence[str] = SENT_MODALITIES,
                 video: str = "mp4", max_new_tokens: int = 64, concurrency: int = 8, timeout_s: float = 120.0,
                 max_retries: int = 3, backoff_s: float = 1.0, max_backoff_s: float = 30.0):
        super().__init__(model, base_url=base_url)
        _check(base_url=base_url, served_model=served_model, api_key_env=api_key_env, logprobs=logprobs,
               top_logprobs=top_logprobs, modalities=modalities, video=video, max_new_tokens=max_new_tokens,
               concurrency=concurrency, timeout_s=timeout_s, max_retries=max_retries, backoff_s=backoff_s,
               max_backoff_s=max_backoff_s)
        key = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise ValueError(f"openai engine: api_key_env names {api_key_env!r}, which is not set (or empty) in "
                                 "the environment of the engine's process")
        policy = RetryPolicy(timeout_s=float(timeout_s), max_retries=int(max_retries), backoff_s=float(backoff_s),
                             max_backoff_s=float(max_backoff_s))
        self.client = JsonClient(base_url, api_key=key, policy=policy)
        root = base_url.rstrip("/")
        self.server = JsonClient(root[:-3] if root.endswith("/v1") else root, api_key=key, policy=policy)
        self.served_model = served_model or model
        self.requested_mode = logprobs
        self.top_logprobs = int(top_logprobs)
        self.modalities, self.video = tuple(modalities), video
        self.max_new_tokens, self.concurrency = int(max_new_tokens), int(concurrency)
        self.tokenizer = ServerTokenizer(self.server, self.served_model)
        self._mode: str | None = None if logprobs == "auto" else logprobs
        self._mode_lock = threading.Lock()

    @classmethod
    def validate_options(cls, options: dict) -> None:
        """Values, and the key's variable set where the run starts (the replicas inherit the driver's environment
        on a local Ray; a cluster's workers need it too), so a missing key stops the run before any model work."""
        _check(**options)
        name = options.get("api_key_env")
        if name and not os.environ.get(name):
            raise OptionError("api_key_env", f"openai engine: the environment variable {name!r} named by api_key_env "
                                             "is not set (or empty)")

    @classmethod
    def accepted_modalities(cls, options: dict) -> frozenset[str]:
        """Its ``modalities`` option (default image, audio, video): what the served model is sent as content parts."""
        return frozenset(options.get("modalities", SENT_MODALITIES))

    # -- the protocol -------------------------------------------------------------------------------------------
    def mode(self) -> str:
        """The logprob route in use: ``auto`` resolves once, to ``token_ids`` where the server tokenizes
        (``/tokenize`` answers), to ``top`` where it has no such route (HTTP 404/405). Other failures propagate
        (the request is errored) and the next request asks again."""
        with self._mode_lock:
            if self._mode is None:
                try:
                    self.tokenizer.encode("A")
                    self._mode = "token_ids"
                except EndpointError as exc:
                    if exc.status not in (404, 405):
                        raise
                    self._mode = "top"
            return self._mode

    def _messages(self, parts, media: dict) -> list[dict]:
        return [{"role": "user", "content": user_content(parts, media, modalities=self.modalities,
                                                          video=self.video)}]

    def _chat(self, messages: list[dict], max_tokens: int) -> str:
        reply, _ = self.client.post("/chat/completions", {
            "model": self.served_model, "messages": messages, "max_tokens": int(max_tokens), "temperature": 0.0})
        message = _first_choice(reply).get("message") or {}
        return message.get("content") or ""

    def _label_logprobs(self, messages: list[dict], labels: Sequence[str], ids: list[int] | None,
                        continue_final: bool = False) -> list[float | None] | None:
        """The logprob of each label's token at the next position (None where the reply has none), or None where
        the reply carries no logprobs at all. ``ids``: exact, by token id (vLLM); None: by token text (top-k)."""
        body = {"model": self.served_model, "messages": messages, "max_tokens": 1, "temperature": 0.0,
                "logprobs": True, "top_logprobs": self.top_logprobs}
        if ids is not None:
            body |= {"logprob_token_ids": ids, "return_tokens_as_token_ids": True}
        if continue_final:
            body |= {"add_generation_prompt": False, "continue_final_message": True}
        reply, _ = self.client.post("/chat/completions", body)
        content = (_first_choice(reply).get("logprobs") or {}).get("content")
        if not content:
            return None
        first = content[0]
        table = {t["token"]: float(t["logprob"]) for t in [first, *(first.get("top_logprobs") or [])]
                 if isinstance(t, dict) and t.get("logprob") is not None and "token" in t}
        if ids is None:
            return [table.get(label) for label in labels]
        by_id = {int(tok[len(TOKEN_ID_PREFIX):]): lp for tok, lp in table.items() if tok.startswith(TOKEN_ID_PREFIX)}
        return [by_id.get(i) for i in ids]

    # -- scoring ------------------------------------------------------------------------------------------------
    def score(self, requests: Sequence[EngineRequest]) -> list[EngineResult]:
        return self._map(self._score_one, requests, lambda msg: EngineResult(choice=None, error=msg))

    def _score_one(self, request: EngineRequest) -> EngineResult:
        inst = request.instance
        messages = self._messages(render_prompt(inst, request.prompt_style), request.media)
        mode = self.mode()
        if request.prompt_style == "cot":
            text = self._chat(messages, self.max_new_tokens)
            if mode != "token_ids":
                return _parsed(inst, text, cot=True)
            reasoning, ids = cot_answer_position(self.tokenizer, text, inst.option_labels)
            answer_turn = [*messages, {"role": "assistant", "content": reasoning}]
            lp = self._label_logprobs(answer_turn, inst.option_labels, ids, continue_final=True)
            if lp is None or any(x is None for x in lp):
                return _parsed(inst, text, cot=True)
            return cot_result(inst, lp, text)
        if mode == "none":
            return _parsed(inst, self._chat(messages, self.max_new_tokens))
        ids = label_token_ids(self.tokenizer, inst.option_labels) if mode == "token_ids" else None
        lp = self._label_logprobs(messages, inst.option_labels, ids)
        if lp is None or all(x is None for x in lp):
            return _parsed(inst, self._chat(messages, self.max_new_tokens))
        if all(x is not None for x in lp):
            return result_from_option_logprobs(inst.option_labels, lp)
        res = result_from_option_logprobs(inst.option_labels, [-math.inf if x is None else x for x in lp])
        res.option_logprobs, res.confidence_method = lp, "rs_topk"
        return res

    # -- free text ----------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Greedy chat completion of each request's parts (media as content parts, as for scoring)."""
        def one(req: GenerationRequest) -> GenerationResult:
            return GenerationResult(self._chat(self._messages(req.parts, req.media),
                                               req.max_new_tokens or self.max_new_tokens))

        return self._map(one, requests, lambda msg: GenerationResult(None, error=msg))

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _map(self, fn: Callable, items: Sequence, failed: Callable[[str], object]) -> list:
        """``fn`` over ``items`` with at most ``concurrency`` requests in flight, in order; an exception becomes
        ``failed(message)`` for that item alone."""
        def safe(item):
            try:
                return fn(item)
            except EndpointError as exc:
                return failed(f"openai engine: {exc}")
            except Exception as exc:
                return failed(f"openai engine: {type(exc).__name__}: {exc}")

        if len(items) <= 1 or self.concurrency == 1:
            return [safe(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(safe, items))


class ServerTokenizer:
    """``encode`` through the server's ``/tokenize`` route (vLLM): the label token ids of the served model's own
    tokenizer, memoised. Duck-types what ``engines/chat.py``'s label helpers call."""

    def __init__(self, client: JsonClient, served_model: str):
        self.client, self.served_model = client, served_model
        self._memo: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        with self._lock:
            if text in self._memo:
                return list(self._memo[text])
        reply, _ = self.client.post("/tokenize", {"model": self.served_model, "prompt": text,
                                                  "add_special_tokens": bool(add_special_tokens)})
        tokens = reply.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ValueError(f"/tokenize reply has no list of token ids: {str(reply)[:200]}")
        with self._lock:
            self._memo[text] = list(tokens)
        return list(tokens)


def _first_choice(reply: dict) -> dict:
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError(f"the reply has no choices: {str(reply)[:200]}")
    return choices[0]


def _parsed(inst, text: str, cot: bool = False) -> EngineResult:
    """Generate-and-parse: the label read from the reply, no confidence (an unparseable reply is no answer, never
    forced)."""
    choice = parse_answer(text, inst.option_labels, inst.option_texts)
    return EngineResult(choice=choice, raw_text=text, answer_source="parsed" if cot and choice else None)


def _check(base_url=None, served_model=None, api_key_env=None, logprobs="auto", top_logprobs=20,
           modalities=SENT_MODALITIES, video="mp4", max_new_tokens=64, concurrency=8, timeout_s=120.0,
           max_retries=3, backoff_s=1.0, max_backoff_s=30.0) -> None:
    """Value checks of the options (no network): ``OptionError`` naming the option."""
    from urllib.parse import urlsplit

    if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https") \
            or not urlsplit(base_url).hostname:
        raise OptionError("base_url", f"openai engine: base_url must be an http(s) URL such as "
                                      f"http://127.0.0.1:8000/v1, got {base_url!r}")
    for name, value in (("served_model", served_model), ("api_key_env", api_key_env)):
        if value is not None and (not isinstance(value, str) or not value):
            raise OptionError(name, f"openai engine: {name} must be a non-empty string, got {value!r}")
    if api_key_env is not None and not api_key_env.replace("_", "").isalnum():
        raise OptionError("api_key_env", "openai engine: api_key_env is the NAME of an environment variable "
                                         "holding the key (e.g. OPENAI_API_KEY), not the key itself")
    if logprobs not in LOGPROB_MODES:
        raise OptionError("logprobs", f"openai engine: logprobs must be one of {', '.join(LOGPROB_MODES)}, "
                                      f"got {logprobs!r}")
    if video not in VIDEO_FORMATS:
        raise OptionError("video", f"openai engine: video must be one of {', '.join(VIDEO_FORMATS)}, got {video!r}")
    if isinstance(modalities, str) or not isinstance(modalities, Sequence) \
            or not all(isinstance(m, str) and m in SENT_MODALITIES for m in modalities):
        raise OptionError("modalities", f"openai engine: modalities must be a list of {', '.join(SENT_MODALITIES)}"
                                        f" (what the served model takes), got {modalities!r}")
    for name, value, low in (("top_logprobs", top_logprobs, 1), ("max_new_tokens", max_new_tokens, 1),
                             ("concurrency", concurrency, 1), ("max_retries", max_retries, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise OptionError(name, f"openai engine: {name} must be an integer >= {low}, got {value!r}")
    for name, value in (("timeout_s", timeout_s), ("backoff_s", backoff_s), ("max_backoff_s", max_backoff_s)):
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0 \
                or (name == "timeout_s" and value == 0):
            raise OptionError(name, f"openai engine: {name} must be a number of seconds > 0, got {value!r}")
