"""A family's required system prompt (its recipe's ``system_prompt``) reaches the chat template: the hf engine's
prompt equals the model's own template rendered over a conversation that opens with that system message, and the
run puts it on a model's engine unless the model sets its own or opts out of its recipe."""

from __future__ import annotations

import json

import pytest

from omnieval.config import parse_run_config
from omnieval.core.prompts import render_prompt
from omnieval.core.schema import Instance, Segment
from omnieval.engines.recipes import QWEN25_OMNI_SYSTEM
from omnieval.run.identity import predictions_identity
from omnieval.run.recipe import model_decode, recipe_options, with_recipe_options


def _config(tmp_path, models, **extra):
    return parse_run_config({"benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "out"), "models": models,
                             **extra})


def _omni_folder(tmp_path) -> str:
    folder = tmp_path / "omni"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_5_omni"}))
    return str(folder)


def test_a_recipe_adds_its_system_prompt_where_the_model_leaves_it_unset(tmp_path):
    path = _omni_folder(tmp_path)
    config = _config(tmp_path, [
        {"name": "auto", "engine": "hf", "options": {"path": path}},
        {"name": "own", "engine": "hf", "options": {"path": path, "system_prompt": "Be brief."}},
        {"name": "off", "engine": "hf", "options": {"path": path}, "recipe": False},
        {"name": "sim", "engine": "simulated", "recipe": "qwen2.5-omni"},
        {"name": "vl", "engine": "vllm", "recipe": "qwen2.5-vl", "options": {"path": path}}])
    got = {m.name: recipe_options(config, m) for m in config.models}
    # the reference utilities' image budget: 4..16384 tokens of 28 x 28 pixels (tests/test_feeding.py: the rest)
    budget = {"size_factor": 28, "min_pixels": 4 * 28 * 28, "max_pixels": 16384 * 28 * 28}
    assert got == {"auto": {"system_prompt": QWEN25_OMNI_SYSTEM, "image_pixels": budget, "soundtrack": True},
                   "own": {"image_pixels": budget, "soundtrack": True}, "off": {}, "sim": {},
                   "vl": {"image_pixels": budget}}
    built = {m.name: with_recipe_options(config, m).options.get("system_prompt") for m in config.models}
    assert built["auto"] == QWEN25_OMNI_SYSTEM and built["own"] == "Be brief." and built["off"] is None
    quiet = _config(tmp_path, [{"name": "auto", "engine": "hf", "options": {"path": path}}], recipes=False)
    assert recipe_options(quiet, quiet.models[0]) == {}


def test_the_system_prompt_a_recipe_adds_is_part_of_the_rows_identity(tmp_path):
    path = _omni_folder(tmp_path)
    on = _config(tmp_path, [{"name": "m", "engine": "hf", "options": {"path": path}}])
    off = _config(tmp_path, [{"name": "m", "engine": "hf", "options": {"path": path}, "recipe": False}])
    ident_on = predictions_identity(on, on.models[0], "d", model_decode(on, on.models[0]).decode)
    ident_off = predictions_identity(off, off.models[0], "d", model_decode(off, off.models[0]).decode)
    assert ident_on["recipe_options"]["system_prompt"] == QWEN25_OMNI_SYSTEM
    assert "recipe_options" not in ident_off


def _instance() -> Instance:
    return Instance(instance_id="i0", item_id="i", protocol="spectrum", benchmark="b", split="s",
                    condition="normal", segments=[Segment(kind="text", text="A dog barks.")],
                    question="Which sound is heard?", option_labels=["A", "B"], option_texts=["a dog", "a bell"],
                    target="A")


@pytest.mark.parametrize("style", ["zs", "cot"])
def test_the_hf_engine_renders_the_system_prompt_through_the_models_own_template(tiny_models, style):
    pytest.importorskip("transformers")
    from transformers import AutoProcessor

    from omnieval.engines import create_engine

    path = tiny_models("qwen2.5-omni")
    inst = _instance()
    parts = render_prompt(inst, style)
    content = [{"type": "text", "text": p.text or ""} for p in parts]
    processor = AutoProcessor.from_pretrained(path)
    reference = processor.apply_chat_template(
        [{"role": "system", "content": [{"type": "text", "text": QWEN25_OMNI_SYSTEM}]},
         {"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    with_system = create_engine("hf", model="m", path=str(path), system_prompt=QWEN25_OMNI_SYSTEM)
    plain = create_engine("hf", model="m", path=str(path))
    assert with_system.prompt_text(parts, style) == reference
    assert QWEN25_OMNI_SYSTEM not in plain.prompt_text(parts, style)
