"""A family an engine does not carry is refused in one line, on the driver, before any model work: the run's check
of what each model takes (``run.media_policy.check_media_policies``) and the engine itself both name the family,
the engine and the reason; the other engine still takes the family's media."""

from __future__ import annotations

import json

import pytest

from omnieval.engines import families
from omnieval.engines.base import OptionError
from omnieval.engines.chat import folder_modalities


@pytest.fixture
def refused_family(tmp_path, monkeypatch):
    """A model folder of a made-up family that the vllm engine does not carry."""
    adapter = families.FamilyAdapter(name="made-up-vlm", model_types=("made_up_vlm",), modalities=("image",),
                                     model_class="MadeUpForConditionalGeneration",
                                     refusals={"vllm": "vLLM has no model class for it"})
    monkeypatch.setitem(families.FAMILIES, "made_up_vlm", adapter)
    folder = tmp_path / "made-up"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "made_up_vlm"}))
    return folder


def test_the_engine_that_does_not_carry_a_family_refuses_it_in_one_line(refused_family):
    assert folder_modalities("hf", refused_family) == frozenset({"image"})
    with pytest.raises(OptionError) as caught:
        folder_modalities("vllm", refused_family)
    message = str(caught.value)
    assert caught.value.option == "path" and "\n" not in message
    assert "vllm engine does not carry made-up-vlm models: vLLM has no model class for it" in message
    assert str(refused_family) in message


def test_a_run_config_naming_it_is_refused_before_any_model_work(refused_family, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError
    from omnieval.run.media_policy import check_media_policies

    config = parse_run_config({"benchmark": "synthetic", "output": str(tmp_path / "out"), "models": [
        {"name": "ok", "engine": "hf", "options": {"path": str(refused_family)}},
        {"name": "refused", "engine": "vllm", "options": {"path": str(refused_family)}}]})
    with pytest.raises(InputError) as caught:
        check_media_policies(config)
    assert caught.value.field == "models[1].options.path"
    assert "refused: vllm engine does not carry made-up-vlm models" in str(caught.value)
