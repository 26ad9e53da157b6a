"""Phi-4-multimodal on the transformers engine (the tiny build, ``omnieval models tiny --arch phi4-multimodal``): the
placeholders against the published arithmetic worked out by hand, and its modality adapters (``engines/lora.py``):
each prompt scored as the model with the adapter it needs merged into the weights by hand (``W + alpha / r x B A``,
plain torch), the adapter chosen by the prompt's media; a folder missing the adapter a prompt needs refuses that
prompt; adapter files this does not apply are errors. The whole crossmodal run: tests/test_vllm_family_runs.py
(transformers only: vLLM 0.32 no longer carries this layout)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.families.phi4 import phi4_audio_tokens, phi4_image_tokens  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402

rng = np.random.default_rng(0)
IMAGE = DecodedMedia("image", rng.integers(0, 255, (240, 320, 3), np.uint8), "i0")
TALL = DecodedMedia("image", rng.integers(0, 255, (160, 96, 3), np.uint8), "i1")
WIDE = DecodedMedia("image", rng.integers(0, 255, (300, 1000, 3), np.uint8), "i2")
AUDIO = DecodedMedia("audio", (0.1 * rng.standard_normal(32_000)).astype(np.float32), "a0", sample_rate=16_000)
ODD = DecodedMedia("audio", (0.1 * rng.standard_normal(23_457)).astype(np.float32), "a1", sample_rate=16_000)


def request(**media: DecodedMedia) -> EngineRequest:
    segments = [Segment(kind="media", modality=m.modality, path=ref) for ref, m in media.items()]
    inst = Instance(instance_id="i", item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[*segments, Segment(kind="text", text="Text: a passage")], question="Which is it?",
                    option_labels=list("ABCDE"), option_texts=["red", "blue", "green", "cat", "I cannot answer"],
                    target="A")
    return EngineRequest(inst, dict(media), "zs")


@pytest.fixture(scope="module")
def folder(tiny_models):
    return tiny_models("phi4-multimodal")


@pytest.fixture(scope="module")
def hf(folder):
    return create_engine("hf", model="phi4", path=str(folder))


def encode(engine, req: EngineRequest):
    parts = render_prompt(req.instance, req.prompt_style)
    return engine.encode(req.media, parts, engine.prompt_text(parts))


def test_by_hand_the_counts_of_two_pictures_and_a_clip():
    """240 x 320: one crop, scaled by 1.4 to 448 x 336, 112 rows of padding below: 8 patch rows dropped, 24 x 32
    patches pooled to 12 x 16 = 192 tokens, 12 row tokens, 1 separator, 256 + 16 for the whole picture: 477.
    160 x 96: scaled by 2.8 to 268 x 448, 180 columns of padding: 12 patch columns dropped, 16 x 10 = 160, 16 rows,
    273: 449. Two seconds: 198 whole windows, 25 tokens."""
    assert phi4_image_tokens(240, 320) == 477
    assert phi4_image_tokens(160, 96) == 449
    assert phi4_audio_tokens(32_000) == 25


@pytest.mark.parametrize("media", [(IMAGE, AUDIO), (TALL, ODD), (WIDE, AUDIO)], ids=["small", "tall", "wide"])
def test_placeholders_follow_the_published_arithmetic(hf, media):
    image, audio = media
    ids = encode(hf, request(im=image, a=audio))["input_ids"][0].tolist()
    count = {t: ids.count(hf.tokenizer.convert_tokens_to_ids(t)) for t in ("<|image|>", "<|audio|>")}
    assert count == {"<|image|>": phi4_image_tokens(*image.data.shape[:2]),
                     "<|audio|>": phi4_audio_tokens(len(audio.data))}


def merged(folder, adapter: str | None):
    """The model with ``adapter``'s low-rank update added to its weights by hand (no hooks), or as loaded."""
    from safetensors.torch import load_file
    from transformers import Phi4MultimodalForCausalLM

    model = Phi4MultimodalForCausalLM.from_pretrained(folder).eval()
    if adapter is None:
        return model
    config = json.loads((folder / adapter / "adapter_config.json").read_text())
    weights = load_file(folder / adapter / "adapter_model.safetensors")
    modules = dict(model.named_modules())
    with torch.no_grad():
        for key, a in weights.items():
            if key.endswith(".lora_A.weight"):
                name = key.removeprefix("base_model.model.").removesuffix(".lora_A.weight")
                b = weights[key.replace("lora_A", "lora_B")]
                modules[name].weight += config["lora_alpha"] / config["r"] * (b @ a)
    return model


@pytest.mark.parametrize(("media", "adapter"), [
    ({"im": IMAGE}, "vision-lora"), ({"a": AUDIO}, "speech-lora"), ({"im": TALL, "a": ODD}, "vision-lora"),
    ({}, None)], ids=["image", "audio", "image-and-audio", "text"])
def test_each_prompt_scores_as_the_model_with_its_adapter_merged(hf, folder, media, adapter):
    req = request(**media)
    enc = encode(hf, req)
    got = hf.next_token_logprobs([enc])[0]
    reference = merged(folder, adapter)
    with torch.no_grad():
        logits = reference(**{k: v for k, v in enc.items() if hasattr(v, "to")}).logits[0, -1]
    # float32 sums in another order (the low-rank update added to the output, not to the weight): within ~2e-4
    np.testing.assert_allclose(got.numpy(), torch.log_softmax(logits.float(), -1).numpy(), atol=1e-3)
    others = [a for a in ("vision-lora", "speech-lora", None) if a != adapter]
    with torch.no_grad():  # the adapter matters: the other choices give other scores
        for other in others:
            logits = merged(folder, other)(**{k: v for k, v in enc.items() if hasattr(v, "to")}).logits[0, -1]
            assert np.abs(torch.log_softmax(logits.float(), -1).numpy() - got.numpy()).max() > 1e-3, other


def test_a_folder_without_the_adapter_a_prompt_needs_refuses_it(folder, tmp_path):
    partial = tmp_path / "no-speech"
    shutil.copytree(folder, partial)
    shutil.rmtree(partial / "speech-lora")
    engine = create_engine("hf", model="phi4", path=str(partial))
    audio, image = engine.score([request(a=AUDIO), request(im=IMAGE)])
    assert audio.choice is None and "no speech-lora/ adapter" in audio.error
    assert image.error is None and image.choice is not None


def test_adapter_files_it_does_not_apply_are_errors(folder, tmp_path):
    from safetensors.torch import load_file, save_file

    from omnieval.engines.lora import read_adapter

    scale, pairs = read_adapter(folder / "speech-lora")
    assert scale == 2.0 and pairs and all(a.shape[0] == b.shape[1] == 4 for a, b in pairs.values())
    bad = tmp_path / "dora"
    shutil.copytree(folder / "speech-lora", bad)
    config = json.loads((bad / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(ValueError, match="use_dora=True"):
        read_adapter(bad)
    (bad / "adapter_config.json").write_text(json.dumps(config))
    weights = load_file(bad / "adapter_model.safetensors")
    save_file({**weights, "base_model.model.lm_head.lora_embedding_A": torch.ones(4, 8)},
              bad / "adapter_model.safetensors")
    with pytest.raises(ValueError, match="unexpected adapter weight 'base_model.model.lm_head.lora_embedding_A'"):
        read_adapter(bad)
