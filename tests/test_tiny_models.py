"""Tiny random-weight models: built offline, loadable with the standard classes, deterministic in the seed, and laid
out the way vLLM loads a Qwen2.5-Omni checkpoint (STACK.md)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from omnieval.demo.tiny_model import OMNI_MEDIA_TOKENS, SINGLE_TOKEN_STRINGS  # noqa: E402
from omnieval.dev.tiny_models import build_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def qwen2_dir(tiny_models):
    return tiny_models("qwen2")


@pytest.fixture(scope="module")
def omni_dir(tiny_models):
    return tiny_models("qwen2.5-omni")


def test_qwen2_loads_with_auto_classes(qwen2_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen2_dir)
    model = AutoModelForCausalLM.from_pretrained(qwen2_dir).eval()
    cfg = model.config
    assert cfg.model_type == "qwen2" and cfg.hidden_size // cfg.num_attention_heads >= 32
    assert cfg.vocab_size == len(tok)
    for s in SINGLE_TOKEN_STRINGS + ["<|im_start|>", "<|im_end|>"]:
        assert len(tok.encode(s, add_special_tokens=False)) == 1, s
    text = tok.apply_chat_template([{"role": "user", "content": "Question: which?"}], tokenize=False,
                                   add_generation_prompt=True)
    ids = tok(text, return_tensors="pt")["input_ids"]
    assert ids[0, 0].item() == tok.convert_tokens_to_ids("<|im_start|>")
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], cfg.vocab_size) and torch.isfinite(logits).all()


def test_omni_layout_is_what_vllm_loads(omni_dir):
    cfg = json.loads((omni_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen2_5_omni" and cfg["architectures"] == ["Qwen2_5OmniModel"]
    assert cfg["enable_audio_output"] is False
    thinker = cfg["thinker_config"]
    text = thinker["text_config"]
    head = text["hidden_size"] // text["num_attention_heads"]
    assert head >= 32 and sum(text["rope_parameters"]["mrope_section"]) == head // 2
    keys = load_file(omni_dir / "model.safetensors").keys()
    assert keys and all(k.startswith("thinker.") for k in keys)
    proc = json.loads((omni_dir / "processor_config.json").read_text())
    assert proc["processor_class"] == "Qwen2_5OmniProcessor"
    assert proc["feature_extractor"]["feature_extractor_type"] == "WhisperFeatureExtractor"
    tok_cfg = json.loads((omni_dir / "tokenizer_config.json").read_text())
    for name, token in OMNI_MEDIA_TOKENS.items():
        assert tok_cfg[name] == token
    assert tok_cfg["eos_token"] == "<|im_end|>" and tok_cfg["pad_token"] == "<|endoftext|>"


def test_omni_thinker_loads_and_runs_with_media(omni_dir):
    from transformers import AutoTokenizer, Qwen2_5OmniThinkerForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(omni_dir)
    thinker = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(omni_dir).eval()
    saved = load_file(omni_dir / "model.safetensors")
    for name, value in thinker.state_dict().items():
        assert torch.equal(saved["thinker." + name], value), name
    assert thinker.config.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_bos|>")
    assert thinker.config.video_token_id == tok.convert_tokens_to_ids(tok.video_token)
    assert thinker.config.audio_token_id == tok.convert_tokens_to_ids(tok.audio_token)
    text = tok.apply_chat_template([{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Q"}]}],
                                   tokenize=False, add_generation_prompt=True)
    assert "<|vision_bos|><|VIDEO|><|vision_eos|>Q<|im_end|>" in text


def test_same_seed_same_model_other_seed_other_weights(tmp_path, qwen2_dir):
    again = build_tiny_model("qwen2", tmp_path / "again", seed=0)
    other = build_tiny_model("qwen2", tmp_path / "other", seed=1)
    a, b, c = (load_file(p / "model.safetensors") for p in (qwen2_dir, again, other))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (qwen2_dir / "tokenizer.json").read_bytes() == (again / "tokenizer.json").read_bytes()
    shared = [k for k in a if k in c and a[k].shape == c[k].shape and a[k].std() > 0]
    assert shared and not all(torch.equal(a[k], c[k]) for k in shared)


def test_omni_same_seed_same_weights(tmp_path, omni_dir):
    again = build_tiny_model("qwen2.5-omni", tmp_path / "again", seed=0)
    a, b = load_file(omni_dir / "model.safetensors"), load_file(again / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_unknown_arch_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="unknown tiny model arch"):
        build_tiny_model("llama-9000", tmp_path)


def test_cli_writes_a_tiny_model(tmp_path, capsys):
    from omnieval.cli import main

    assert main(["models", "tiny", "--arch", "qwen2", "--out", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m" / "config.json").exists() and "wrote tiny" in capsys.readouterr().out


@pytest.mark.parametrize(("arch", "package"), [("gemma3n", "timm"), ("granite-speech", "torchaudio")])
def test_cli_names_a_missing_package_in_one_line(tmp_path, capsys, monkeypatch, arch, package):
    import importlib.util

    from omnieval.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a))
    assert main(["models", "tiny", "--arch", arch, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err == f"omnieval: error: tiny {arch}: missing package {package!r} (pip install {package})\n"
    assert not (tmp_path / "m" / "config.json").exists()


def test_qwen3_omni_is_laid_out_as_released_and_loads_its_experts(tiny_models):
    """The tiny Qwen3-Omni: a full-model config with the thinker under ``thinker_config`` (audio output off), every
    weight under ``thinker.`` with the experts one by one (the checkpoint layout vLLM's loader reads), the released
    flat ``preprocessor_config.json``, and a thinker that transformers loads with exactly these weights (its experts
    fused: gate and up projections stacked per expert)."""
    from transformers import AutoTokenizer, Qwen3OmniMoeThinkerForConditionalGeneration

    from omnieval.dev.tiny_qwen3_omni import QWEN3_OMNI_TOKENS

    path = tiny_models("qwen3-omni")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "qwen3_omni_moe"
    assert cfg["architectures"] == ["Qwen3OmniMoeForConditionalGeneration"] and cfg["enable_audio_output"] is False
    text, vision = cfg["thinker_config"]["text_config"], cfg["thinker_config"]["vision_config"]
    rope = text["rope_parameters"]
    assert text["head_dim"] >= 32 and sum(rope["mrope_section"]) == text["head_dim"] // 2 and rope["mrope_interleaved"]
    assert text["num_experts"] > text["num_experts_per_tok"] > 1
    assert (vision["image_size"] // vision["patch_size"]) ** 2 == vision["num_position_embeddings"]
    saved = load_file(path / "model.safetensors")
    assert all(k.startswith("thinker.") for k in saved)
    assert not any(k.startswith(("talker.", "code2wav.")) for k in saved)
    experts = {k for k in saved if ".mlp.experts." in k and k.startswith("thinker.model.layers.0.")}
    assert experts == {f"thinker.model.layers.0.mlp.experts.{e}.{w}_proj.weight"
                       for e in range(text["num_experts"]) for w in ("gate", "up", "down")}
    pre = json.loads((path / "preprocessor_config.json").read_text())
    assert pre["processor_class"] == "Qwen3OmniMoeProcessor" and pre["patch_size"] == 16 and pre["feature_size"] == 128
    assert not (path / "video_preprocessor_config.json").exists()
    tok_cfg = json.loads((path / "tokenizer_config.json").read_text())
    assert {name: tok_cfg[name] for name in QWEN3_OMNI_TOKENS} == QWEN3_OMNI_TOKENS

    tok = AutoTokenizer.from_pretrained(path)
    thinker = Qwen3OmniMoeThinkerForConditionalGeneration.from_pretrained(path).eval()
    assert thinker.config.audio_token_id == tok.convert_tokens_to_ids("<|audio_pad|>")
    assert thinker.config.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    state = thinker.state_dict()
    for name, value in state.items():
        if ".mlp.experts." not in name:
            assert torch.equal(saved["thinker." + name], value), name
    fused = state["model.layers.1.mlp.experts.gate_up_proj"]
    for e in range(text["num_experts"]):
        gate, up = (saved[f"thinker.model.layers.1.mlp.experts.{e}.{w}_proj.weight"] for w in ("gate", "up"))
        assert torch.equal(fused[e], torch.cat([gate, up]))


# The published processor files of Qwen/Qwen3-VL-8B-Instruct (the Qwen3.5 releases ship the same values).
QWEN3_VL_IMAGE = {"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16,
                  "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
QWEN3_VL_VIDEO = {**QWEN3_VL_IMAGE, "size": {"shortest_edge": 4096, "longest_edge": 25165824}}
QWEN3_VL_CLASSES = {"qwen3-vl": ("qwen3_vl", "Qwen3VLForConditionalGeneration"),
                    "qwen3-vl-moe": ("qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration"),
                    "qwen3.5": ("qwen3_5", "Qwen3_5ForConditionalGeneration")}


@pytest.mark.parametrize("arch", list(QWEN3_VL_CLASSES))
def test_qwen3_vl_families_are_laid_out_as_released_and_load_with_their_class(tiny_models, arch):
    """Qwen3-VL, Qwen3-VL-MoE and Qwen3.5: the released config layout (multimodal rotary sections covering the rotated
    half of each head, token ids the tokenizer's), the released processor files, weights under
    ``model.language_model.``, ``model.visual.`` and ``lm_head.``, and the transformers class loading exactly them
    (the mixture-of-experts tensors fused per layer and lying transposed as released: transformers turns them)."""
    import transformers
    from transformers import AutoProcessor, AutoTokenizer

    pytest.importorskip("torchvision")
    model_type, model_class = QWEN3_VL_CLASSES[arch]
    path = tiny_models(arch)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == model_type and cfg["architectures"] == [model_class]
    text, vision = cfg["text_config"], cfg["vision_config"]
    rope = text["rope_parameters"]
    rotated = text["head_dim"] * rope.get("partial_rotary_factor", 1.0)
    assert text["head_dim"] >= 32 and 2 * sum(rope["mrope_section"]) == rotated and rope["mrope_interleaved"]
    assert vision["patch_size"] == 16 and vision["spatial_merge_size"] == 2
    assert round(vision["num_position_embeddings"] ** 0.5) ** 2 == vision["num_position_embeddings"]
    assert vision.get("deepstack_visual_indexes", []) == ([] if arch == "qwen3.5" else [0])
    tok = AutoTokenizer.from_pretrained(path)
    for key, token in (("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
                       ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>")):
        assert cfg[key] == tok.convert_tokens_to_ids(token), key
    for s in SINGLE_TOKEN_STRINGS:
        assert len(tok.encode(s, add_special_tokens=False)) == 1, s
    image = json.loads((path / "preprocessor_config.json").read_text())
    video = json.loads((path / "video_preprocessor_config.json").read_text())
    assert {k: image[k] for k in QWEN3_VL_IMAGE} == QWEN3_VL_IMAGE and image["processor_class"] == "Qwen3VLProcessor"
    assert {k: video[k] for k in QWEN3_VL_VIDEO} == QWEN3_VL_VIDEO
    assert video["video_processor_type"] == "Qwen3VLVideoProcessor"
    processor = AutoProcessor.from_pretrained(path)
    assert type(processor).__name__ == "Qwen3VLProcessor"
    assert processor.video_processor.size == QWEN3_VL_VIDEO["size"] and processor.image_processor.size == \
        QWEN3_VL_IMAGE["size"]

    saved = load_file(path / "model.safetensors")
    assert {k.split(".")[0] + "." + k.split(".")[1] for k in saved} == {"model.language_model", "model.visual",
                                                                       "lm_head.weight"}
    assert not any(k.startswith("mtp.") for k in saved)
    model = getattr(transformers, model_class).from_pretrained(path).eval()
    state = model.state_dict()
    assert state.keys() == saved.keys()
    fused = [k for k in saved if k.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))]
    for name, value in saved.items():
        assert torch.equal(state[name], value.transpose(1, 2) if name in fused else value), name
    if arch == "qwen3-vl-moe":  # (experts, hidden, 2 x intermediate) and (experts, intermediate, hidden)
        sizes = model.config.text_config  # transformers 5.19 writes num_experts as num_local_experts
        experts, inner, hidden = sizes.num_experts, sizes.moe_intermediate_size, sizes.hidden_size
        assert experts > sizes.num_experts_per_tok > 1 and 2 * inner != hidden
        assert len(fused) == 2 * text["num_hidden_layers"]
        assert saved["model.language_model.layers.0.mlp.experts.gate_up_proj"].shape == (experts, hidden, 2 * inner)
        assert saved["model.language_model.layers.0.mlp.experts.down_proj"].shape == (experts, inner, hidden)
    else:
        assert not fused
    if arch == "qwen3.5":  # one Gated DeltaNet layer, one full-attention layer
        assert text["layer_types"] == ["linear_attention", "full_attention"]
        assert "model.language_model.layers.0.linear_attn.in_proj_qkv.weight" in saved
        assert "model.language_model.layers.1.self_attn.q_proj.weight" in saved


def released_name(name: str) -> str:
    """A loaded audio-and-text model's weight name as the released checkpoints write it: the text decoder under
    ``language_model.model.`` with its head beside it, the towers and projector at the top."""
    if name == "lm_head.weight":
        return "language_model.lm_head.weight"
    if name.startswith("model.language_model."):
        return "language_model.model." + name[len("model.language_model."):]
    return name[len("model."):]


# arch -> (model_type, transformers class, the released processor's class and audio token, the weight prefixes)
AUDIO_FAMILIES = {
    "audioflamingo3": ("audioflamingo3", "AudioFlamingo3ForConditionalGeneration", "AudioFlamingo3Processor",
                       "<sound>", {"audio_tower", "multi_modal_projector", "language_model"}),
    "musicflamingo": ("musicflamingo", "MusicFlamingoForConditionalGeneration", "MusicFlamingoProcessor",
                      "<sound>", {"audio_tower", "multi_modal_projector", "language_model"}),
    "granite-speech": ("granite_speech", "GraniteSpeechForConditionalGeneration", "GraniteSpeechProcessor",
                       "<|audio|>", {"encoder", "projector", "language_model"}),
}


@pytest.mark.parametrize("arch", list(AUDIO_FAMILIES))
def test_audio_families_are_laid_out_as_released_and_load_with_exactly_these_weights(tiny_models, arch):
    """Each tiny audio-and-text build: the released ``model_type`` and class, the text decoder's weights under
    ``language_model.model.`` (not transformers 5.19's ``language_model.model.model.``, which vLLM's loader does not
    know), the released processor class and audio token, and a model that transformers loads with exactly the saved
    weights; the audio token is the config's."""
    import transformers
    from transformers import AutoTokenizer

    model_type, model_class, processor_class, audio_token, prefixes = AUDIO_FAMILIES[arch]
    if arch == "granite-speech":
        pytest.importorskip("torchaudio")  # its feature extractor (scripts/install_torchaudio.sh)
    path = tiny_models(arch)
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == model_type and cfg["architectures"] == [model_class]
    saved = load_file(path / "model.safetensors")
    assert {k.split(".")[0] for k in saved} == prefixes
    assert any(k.startswith("language_model.model.layers.") for k in saved)
    assert not any(k.startswith("language_model.model.model.") for k in saved)
    proc = json.loads((path / "processor_config.json").read_text())
    assert proc["processor_class"] == processor_class and proc["audio_token"] == audio_token
    model = getattr(transformers, model_class).from_pretrained(path).eval()
    state = model.state_dict()
    assert {released_name(k) for k in state} - {"audio_tower.embed_positions.weight"} <= set(saved)
    for name, value in state.items():
        if released_name(name) in saved:
            assert torch.equal(saved[released_name(name)], value), name
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.audio_token_id == tok.convert_tokens_to_ids(audio_token)
    text = tok.apply_chat_template([{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": "Q"}]}],
                                   tokenize=False, add_generation_prompt=True)
    assert f"{audio_token}Q<|im_end|>" in text


def test_voxtral_holds_both_released_layouts_with_the_same_weights(tiny_models):
    """The tiny Voxtral: transformers' ``config.json`` + ``model.safetensors`` and Mistral's ``params.json`` +
    ``consolidated.safetensors`` (what vLLM reads) hold the same numbers, the query and key rows in Mistral's rotary
    order (transformers' are the published conversion's permutation of them, written out here); ``tekken.json`` is
    a Tekken tokenizer with the released special ranks and audio section, every option label one token."""
    pytest.importorskip("mistral_common")
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    from transformers import VoxtralForConditionalGeneration

    path = tiny_models("voxtral")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "voxtral" and cfg["architectures"] == ["VoxtralForConditionalGeneration"]
    assert cfg["audio_token_id"] == 24
    params = json.loads((path / "params.json").read_text())
    text = cfg["text_config"]
    assert (params["dim"], params["n_layers"], params["n_heads"], params["n_kv_heads"], params["head_dim"]) == (
        text["hidden_size"], text["num_hidden_layers"], text["num_attention_heads"], text["num_key_value_heads"],
        text["head_dim"])
    encoder = params["multimodal"]["whisper_model_args"]["encoder_args"]
    assert encoder["dim"] * 4 == encoder["hidden_dim"] == cfg["audio_config"]["intermediate_size"]
    assert encoder["audio_encoding_args"] == {"sampling_rate": 16000, "frame_rate": 12.5, "num_mel_bins": 128,
                                              "hop_length": 160, "window_size": 400, "chunk_length_s": 30.0}
    assert params["multimodal"]["whisper_model_args"]["downsample_args"] == {"downsample_factor": 4}

    hf, mistral = load_file(path / "model.safetensors"), load_file(path / "consolidated.safetensors")
    assert len(hf) == len(mistral) + 1  # the encoder's sinusoid table is computed, not stored, in Mistral's layout
    heads, kv_heads, head_dim = text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]

    def to_transformers(w, n):  # the published Mistral -> transformers rotary permutation
        return w.view(n, head_dim // 2, 2, w.shape[1]).transpose(1, 2).reshape(w.shape)

    for i in range(text["num_hidden_layers"]):
        assert torch.equal(hf[f"language_model.model.layers.{i}.self_attn.q_proj.weight"],
                           to_transformers(mistral[f"layers.{i}.attention.wq.weight"], heads))
        assert torch.equal(hf[f"language_model.model.layers.{i}.self_attn.k_proj.weight"],
                           to_transformers(mistral[f"layers.{i}.attention.wk.weight"], kv_heads))
        assert torch.equal(hf[f"language_model.model.layers.{i}.mlp.gate_proj.weight"],
                           mistral[f"layers.{i}.feed_forward.w1.weight"])
    assert torch.equal(hf["language_model.model.embed_tokens.weight"],
                       mistral["mm_whisper_embeddings.tok_embeddings.weight"])
    assert torch.equal(hf["multi_modal_projector.linear_2.weight"],
                       mistral["mm_whisper_embeddings.audio_language_projection.2.weight"])
    assert torch.equal(hf["audio_tower.layers.0.self_attn.q_proj.bias"],
                       mistral["mm_whisper_embeddings.whisper_encoder.transformer.layers.0.attention.wq.bias"])

    # Whisper's sinusoids: sin of the first half of the channels, cos of the second, timescales up to 10000
    table = hf["audio_tower.embed_positions.weight"].double()
    half = table.shape[1] // 2
    rates = torch.exp(-torch.arange(half, dtype=torch.float64) * (torch.log(torch.tensor(10000.0)) / (half - 1)))
    angles = torch.arange(table.shape[0], dtype=torch.float64)[:, None] * rates[None]
    # float32 angles up to 1500 rad are exact to ~1.5e-4
    torch.testing.assert_close(table, torch.cat([angles.sin(), angles.cos()], dim=1), atol=3e-4, rtol=0)

    model = VoxtralForConditionalGeneration.from_pretrained(path).eval()
    for name, value in model.state_dict().items():
        assert torch.equal(hf[released_name(name)], value), name

    tekken = json.loads((path / "tekken.json").read_text())
    ranks = {t["token_str"]: t["rank"] for t in tekken["special_tokens"]}
    assert (ranks["<s>"], ranks["[INST]"], ranks["[/INST]"], ranks["[AUDIO]"], ranks["[BEGIN_AUDIO]"]) == (1, 3, 4,
                                                                                                         24, 25)
    assert len(tekken["special_tokens"]) == tekken["config"]["default_num_special_tokens"] == 1000
    assert tekken["audio"]["frame_rate"] == 12.5 and tekken["audio"]["chunk_length_s"] == 30.0
    tokenizer = Tekkenizer.from_file(path / "tekken.json")
    assert tokenizer.n_words == text["vocab_size"]
    for label in SINGLE_TOKEN_STRINGS:
        assert len(tokenizer.encode(label, bos=False, eos=False)) == 1, label


def test_gemma4_is_laid_out_as_released_and_loads(tiny_models):
    """The tiny Gemma 4: the released E2B/E4B config layout (three sub-configs, media ids the tokenizer's, tied
    embeddings, the pad id 0 that both engines use for media positions' per-layer inputs), the weights under
    ``model.*`` with no separate output head, the released nested ``processor_config.json``, and a model that
    transformers loads with exactly these weights."""
    from transformers import AutoTokenizer, Gemma4ForConditionalGeneration

    from omnieval.dev.tiny_gemma4 import GEMMA4_TOKENS

    path = tiny_models("gemma4")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "gemma4" and cfg["architectures"] == ["Gemma4ForConditionalGeneration"]
    text, vision, audio = cfg["text_config"], cfg["vision_config"], cfg["audio_config"]
    assert (text["model_type"], vision["model_type"], audio["model_type"]) == ("gemma4_text", "gemma4_vision",
                                                                                "gemma4_audio")
    assert cfg["tie_word_embeddings"] and text["pad_token_id"] == 0 and text["use_bidirectional_attention"] is None
    assert text["layer_types"][-1] == "full_attention" and text["head_dim"] >= 32
    assert text["vocab_size_per_layer_input"] == text["vocab_size"] and text["hidden_size_per_layer_input"] > 0
    tok = AutoTokenizer.from_pretrained(path)
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in GEMMA4_TOKENS.items()}
    assert {key: cfg[key] for key in ("boi_token_id", "image_token_id", "eoi_token_id", "boa_token_id",
                                      "audio_token_id", "eoa_token_id", "video_token_id")} == {
        "boi_token_id": ids["boi_token"], "image_token_id": ids["image_token"], "eoi_token_id": ids["eoi_token"],
        "boa_token_id": ids["boa_token"], "audio_token_id": ids["audio_token"], "eoa_token_id": ids["eoa_token"],
        "video_token_id": ids["video_token"]}
    saved = load_file(path / "model.safetensors")
    towers = ("language_model", "vision_tower", "audio_tower", "embed_vision", "embed_audio")
    assert {key.split(".")[1] for key in saved} == set(towers) and all(k.startswith("model.") for k in saved)
    proc = json.loads((path / "processor_config.json").read_text())
    assert proc["processor_class"] == "Gemma4Processor"
    assert proc["image_processor"]["image_processor_type"] == "Gemma4ImageProcessor"
    assert proc["video_processor"]["video_processor_type"] == "Gemma4VideoProcessor"
    assert proc["feature_extractor"]["feature_extractor_type"] == "Gemma4AudioFeatureExtractor"
    assert proc["image_processor"]["max_soft_tokens"] == vision["default_output_length"]  # vLLM reads the latter
    assert (proc["audio_seq_length"], proc["audio_ms_per_token"]) == (750, 40)

    model = Gemma4ForConditionalGeneration.from_pretrained(path).eval()
    state = model.state_dict()
    assert set(state) == set(saved) | {"lm_head.weight"}
    for name, value in saved.items():
        assert torch.equal(state[name], value), name
    assert torch.equal(state["lm_head.weight"], saved["model.language_model.embed_tokens.weight"])


def test_gemma4_unified_is_laid_out_as_released_and_loads(tiny_models):
    """The tiny Gemma 4 Unified: no towers (the patch embedder saved as released, ``model.vision_embedder.*`` with
    its projection under ``model.embed_vision.*``, the waveform projection under ``model.embed_audio.*``), keys
    that are the values in the full-attention layer (no ``v_proj`` there), bidirectional attention over vision
    tokens, the image budget where vLLM reads it, and a model that transformers loads with exactly these weights
    (under its own module names)."""
    from transformers import Gemma4UnifiedForConditionalGeneration

    path = tiny_models("gemma4-unified")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "gemma4_unified"
    assert cfg["architectures"] == ["Gemma4UnifiedForConditionalGeneration"]
    text, vision, audio = cfg["text_config"], cfg["vision_config"], cfg["audio_config"]
    assert text["use_bidirectional_attention"] == "vision" and text["attention_k_eq_v"]
    assert not text.get("hidden_size_per_layer_input") and cfg["tie_word_embeddings"]  # no per-layer inputs
    saved = load_file(path / "model.safetensors")
    assert {key.split(".")[1] for key in saved} == {"language_model", "vision_embedder", "embed_vision",
                                                   "embed_audio"}
    assert {k for k in saved if k.startswith("model.embed_vision.")} == {
        "model.embed_vision.embedding_projection.weight"}
    full = text["layer_types"].index("full_attention")
    assert f"model.language_model.layers.{full}.self_attn.v_proj.weight" not in saved
    assert saved["model.embed_audio.embedding_projection.weight"].shape[1] == audio["audio_embed_dim"] == 640
    proc = json.loads((path / "processor_config.json").read_text())
    assert proc["processor_class"] == "Gemma4UnifiedProcessor"
    assert proc["image_processor"]["max_soft_tokens"] == vision["num_soft_tokens"]
    assert proc["feature_extractor"]["audio_samples_per_token"] == 640

    model = Gemma4UnifiedForConditionalGeneration.from_pretrained(path).eval()
    state = model.state_dict()
    renamed = {"model.vision_embedder.": "model.embed_vision.",
               "model.embed_vision.embedding_projection": "model.embed_vision.multimodal_embedder.embedding_projection"}
    for name, value in saved.items():
        for old, new in renamed.items():
            if name.startswith(old):
                name = new + name[len(old):]
                break
        assert torch.equal(state[name], value), name
    assert len(state) == len(saved) + 1  # and the tied output head


def test_phi4_multimodal_is_laid_out_as_released_and_loads(tiny_models):
    """The tiny Phi-4-multimodal: the transformers-native config (the media token ids in the tower configs, where the
    model reads them; the released 448-pixel crops of 14-pixel patches), its two modality adapters in their own
    folders in the PEFT layout, each weight pair naming a linear layer of the text decoder, and a model that
    transformers loads with exactly these weights."""
    from transformers import AutoTokenizer, Phi4MultimodalForCausalLM

    path = tiny_models("phi4-multimodal")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "phi4_multimodal" and cfg["architectures"] == ["Phi4MultimodalForCausalLM"]
    tok = AutoTokenizer.from_pretrained(path)
    assert cfg["vision_config"]["image_token_id"] == tok.convert_tokens_to_ids("<|image|>")
    assert cfg["audio_config"]["audio_token_id"] == tok.convert_tokens_to_ids("<|audio|>")
    assert (cfg["vision_config"]["crop_size"], cfg["vision_config"]["patch_size"]) == (448, 14)
    assert cfg["hidden_size"] // cfg["num_attention_heads"] >= 32
    proc = json.loads((path / "processor_config.json").read_text())
    assert proc["processor_class"] == "Phi4MultimodalProcessor"
    assert proc["audio_processor"]["feature_extractor_type"] == "Phi4MultimodalFeatureExtractor"
    assert proc["image_processor"]["dynamic_hd"] == 36

    model = Phi4MultimodalForCausalLM.from_pretrained(path).eval()
    saved = load_file(path / "model.safetensors")
    state = model.state_dict()
    for name, value in saved.items():
        assert torch.equal(state[name], value), name
    linear = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    for folder in ("speech-lora", "vision-lora"):
        adapter = json.loads((path / folder / "adapter_config.json").read_text())
        assert adapter["peft_type"] == "LORA" and adapter["lora_alpha"] == 2 * adapter["r"]
        keys = load_file(path / folder / "adapter_model.safetensors").keys()
        modules = {k.removeprefix("base_model.model.").rsplit(".lora_", 1)[0] for k in keys}
        assert modules <= linear and all(m.startswith("model.layers.") for m in modules)
        assert len(keys) == 2 * len(modules) == 2 * 4 * cfg["num_hidden_layers"]


def test_videollama3_is_laid_out_as_released_and_loads(tiny_models):
    """The tiny VideoLLaMA3: the transformers-native config (a Qwen2 decoder with an untied output head, the vision
    tower's two-dimensional rotary positions, 14-pixel patches, media ids the tokenizer's pads), the weights under
    ``model.vision_model``, ``model.projector``, ``model.language_model`` and ``lm_head``, the released processor
    settings (images unmerged within 16..16384 patches, videos merged 2 x 2 within 16384 merged patches a clip with
    token compression), a chat template writing each pad and a newline, and a model that transformers loads with
    exactly these weights."""
    from transformers import AutoProcessor, AutoTokenizer, VideoLlama3ForConditionalGeneration

    path = tiny_models("videollama3")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "video_llama_3" and cfg["architectures"] == ["VideoLlama3ForConditionalGeneration"]
    text, vision = cfg["text_config"], cfg["vision_config"]
    assert text["model_type"] == "qwen2" and not cfg["tie_word_embeddings"]
    assert text["hidden_size"] // text["num_attention_heads"] >= 32
    assert vision["model_type"] == "video_llama_3_vision" and vision["patch_size"] == 14
    assert vision["rope_parameters"]["rope_type"] == "axial"
    tok = AutoTokenizer.from_pretrained(path)
    assert (cfg["image_token_id"], cfg["video_token_id"]) == (tok.convert_tokens_to_ids("<|image_pad|>"),
                                                              tok.convert_tokens_to_ids("<|video_pad|>"))
    saved = load_file(path / "model.safetensors")
    assert {".".join(k.split(".")[:2]) for k in saved} == {"model.vision_model", "model.projector",
                                                          "model.language_model", "lm_head.weight"}
    image = json.loads((path / "preprocessor_config.json").read_text())
    video = json.loads((path / "video_preprocessor_config.json").read_text())
    assert image["image_processor_type"] == "VideoLlama3ImageProcessor" and image["merge_size"] == 1
    assert image["size"] == {"shortest_edge": 16 * 14 * 14, "longest_edge": 16384 * 14 * 14}
    assert image["image_mean"] == image["image_std"] == [0.5, 0.5, 0.5]
    assert video["video_processor_type"] == "VideoLlama3VideoProcessor" and video["merge_size"] == 2
    assert video["size"] == {"shortest_edge": 16 * 28 * 28, "longest_edge": 16384 * 28 * 28}
    assert video["use_token_compression"] and video["temporal_patch_size"] == 1
    processor = AutoProcessor.from_pretrained(path)
    assert type(processor).__name__ == "VideoLlama3Processor"
    message = [{"role": "user", "content": [{"type": "image"}, {"type": "video"}, {"type": "text", "text": "Q"}]}]
    assert processor.apply_chat_template(message, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>user\n<|image_pad|>\n<|video_pad|>\nQ<|im_end|>\n<|im_start|>assistant\n")

    model = VideoLlama3ForConditionalGeneration.from_pretrained(path).eval()
    state = model.state_dict()
    assert set(state) == set(saved)
    for name, value in saved.items():
        assert torch.equal(state[name], value), name


def test_nemotron_h_omni_is_laid_out_as_released_and_loads(tiny_models, tmp_path):
    """The tiny Nemotron-H omni: the transformers-native config (a Nemotron-H decoder of one Mamba-2 and one
    attention layer with heads of 32, a RADIO vision tower on 16-pixel patches taking two frames a temporal patch,
    a Parakeet audio tower subsampling 8x, media ids the tokenizer's, video frames on the image id), the weights
    under the released prefixes (``language_model.backbone``, ``vision_model.radio_model``, ``mlp1``,
    ``sound_encoder.encoder``, ``sound_projection``), the processor settings of the module doc, a chat template writing
    ``<image>``, ``<video>`` and ``<so_embedding>``, and a model that transformers loads with nothing missing or
    left over, and saves back to exactly these weights."""
    pytest.importorskip("librosa")
    from transformers import AutoProcessor, AutoTokenizer, NemotronH_Omni_Reasoning_V3

    path = tiny_models("nemotron-h-omni")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["model_type"] == "nemotron_h_omni" and cfg["architectures"] == ["NemotronH_Omni_Reasoning_V3"]
    text, vision, audio = cfg["text_config"], cfg["vision_config"], cfg["audio_config"]
    assert text["model_type"] == "nemotron_h" and text["layers_block_type"] == ["linear_attention", "full_attention"]
    assert text["head_dim"] == 32 and text["hidden_size"] == 128
    assert vision["model_type"] == "radio" and vision["patch_size"] == 16
    assert vision["video_temporal_patch_size"] == cfg["video_temporal_patch_size"] == 2
    assert audio["model_type"] == "parakeet_encoder" and audio["subsampling_factor"] == 8
    tok = AutoTokenizer.from_pretrained(path)
    assert (cfg["image_token_id"], cfg["video_token_id"], cfg["audio_token_id"]) == (
        tok.convert_tokens_to_ids("<image>"), tok.convert_tokens_to_ids("<image>"),
        tok.convert_tokens_to_ids("<so_embedding>"))
    saved = load_file(path / "model.safetensors")
    prefixes = {".".join(k.split(".")[:2]) for k in saved}
    assert prefixes == {"language_model.backbone", "language_model.lm_head", "vision_model.radio_model", "mlp1.0",
                        "mlp1.1", "mlp1.3", "sound_encoder.encoder", "sound_projection.norm",
                        "sound_projection.linear1", "sound_projection.linear2"}
    settings = json.loads((path / "processor_config.json").read_text())
    image, video = settings["image_processor"], settings["video_processor"]
    assert (image["patch_size"], image["min_num_patches"], image["max_num_patches"]) == (16, 1024, 13312)
    assert video["patch_size"] == 16 and video["downsample_ratio"] == 0.5
    assert settings["feature_extractor"]["feature_size"] == 128 and settings["audio_hop_length"] == 160
    processor = AutoProcessor.from_pretrained(path)
    assert type(processor).__name__ == "NemotronH_Omni_Reasoning_V3Processor"
    assert type(processor.feature_extractor).__name__ == "ParakeetFeatureExtractor"
    message = [{"role": "user", "content": [{"type": "image"}, {"type": "video"}, {"type": "audio"},
                                            {"type": "text", "text": "Q"}]}]
    assert processor.apply_chat_template(message, tokenize=False, add_generation_prompt=True).endswith(
        "<|im_start|>user\n<image><video><so_embedding>Q<|im_end|>\n<|im_start|>assistant\n")

    model, info = NemotronH_Omni_Reasoning_V3.from_pretrained(path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert sum(v.numel() for v in model.state_dict().values()) == sum(v.numel() for v in saved.values())
    model.save_pretrained(tmp_path / "again")
    again = load_file(tmp_path / "again" / "model.safetensors")
    assert set(again) == set(saved)
    for name, value in saved.items():
        assert torch.equal(again[name], value), name
