"""Generation never emits a media placeholder token (``engines/chat.py``: ``media_token_ids``).

A chain-of-thought or open-ended answer is generated token by token; a placeholder token generated and fed back has
no media behind it. On transformers' Phi-4-multimodal that failed the whole row ("'NoneType' object has no
attribute 'view'": it looks for the image the token stands for), seen on 6 of 56 rows of a ``cot`` spectrum run of
the tiny build. Checked here: for every family, the token its processor repeats for a picture (or a clip) is among
the ids kept out, and a model pushed to emit them (their logits raised by 10^4) still answers, with none of them in
its reasoning."""

from __future__ import annotations

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.base import GenerationRequest  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402

rng = np.random.default_rng(0)
PICTURE = DecodedMedia("image", rng.integers(0, 255, (224, 224, 3), np.uint8), "i0")
CLIP = DecodedMedia("audio", (0.1 * rng.standard_normal(16_000)).astype(np.float32), "a0", sample_rate=16_000)

FAMILIES = ["qwen2.5-omni", "qwen2-audio", "qwen2.5-vl", "llava-onevision", "internvl", "qwen3-omni", "qwen3-vl",
            "qwen3-vl-moe", "qwen3.5", "audioflamingo3", "musicflamingo", "granite-speech", "voxtral", "gemma4",
            "gemma4-unified", "phi4-multimodal", "videollama3", "nemotron-h-omni"]


def request(media: dict, style: str = "zs") -> EngineRequest:
    segments = [Segment(kind="media", modality=m.modality, path=ref) for ref, m in media.items()]
    inst = Instance(instance_id="i", item_id="i", protocol="spectrum", benchmark="b", split="s", condition="normal",
                    segments=[*segments, Segment(kind="text", text="Text: a passage")], question="Which is it?",
                    option_labels=list("AB"), option_texts=["red", "blue"], target="A")
    return EngineRequest(inst, media, style)


def engine_and_media(tiny_models, arch: str):
    folder = tiny_models(arch)
    engine = create_engine("hf", model=arch, path=str(folder), max_new_tokens=12)
    takes = engine.accepted_modalities({"path": str(folder)})
    return engine, ({"i": PICTURE} if "image" in takes else {"a": CLIP})


@pytest.mark.parametrize("arch", FAMILIES)
def test_the_placeholder_a_processor_repeats_is_never_generated(tiny_models, arch):
    engine, media = engine_and_media(tiny_models, arch)
    req = request(media)
    parts = render_prompt(req.instance, "zs")
    encoded = engine.encode(media, parts, engine.prompt_text(parts))
    ids = np.asarray(encoded["input_ids"] if isinstance(encoded, dict) else encoded.input_ids).reshape(-1)
    placeholder, count = collections.Counter(ids.tolist()).most_common(1)[0]
    assert count >= 12, (arch, count)  # the picture (clip) expanded to its features' count
    assert placeholder in engine.media_token_ids, (arch, placeholder, engine.media_token_ids)
    assert engine.tokenizer.eos_token_id not in engine.media_token_ids


@pytest.mark.parametrize("arch", ["phi4-multimodal", "qwen2.5-vl", "qwen3-omni"])
def test_a_model_pushed_to_emit_placeholders_still_answers_without_them(tiny_models, arch):
    engine, media = engine_and_media(tiny_models, arch)
    banned = torch.tensor(engine.media_token_ids)
    head = engine.net.get_output_embeddings()

    def push(_module, _args, logits):
        logits = logits.clone()
        logits[..., banned] += 1e4
        return logits

    req = request(media, "cot")
    handle = head.register_forward_hook(push)
    try:
        (result,) = engine.score([req])  # chain of thought
        (free,) = engine.generate([GenerationRequest(render_prompt(req.instance, "zs"), media)])  # open-ended
    finally:
        handle.remove()
    for error, text in ((result.error, result.raw_text), (free.error, free.raw_text)):
        assert error is None, error
        generated = engine.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert text and not set(generated) & set(engine.media_token_ids)
