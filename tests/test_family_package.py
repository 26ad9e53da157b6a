"""The families package (``omnieval/engines/families/``): one module per family, or per group whose adapters share a
class, each registering its families and its recipes; the package keeps every name callers imported from the single
module it replaced; and a recipe is never looked up before the family modules have registered theirs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.engines import families

PACKAGE = Path(families.__file__).parent

# Which families each module registers, and which recipes: the layout the package doc and docs/runs.md describe.
LAYOUT = {
    "qwen_omni": ({"qwen2.5-omni", "qwen3-omni"}, {"qwen2.5-omni", "qwen3-omni"}),
    "qwen_vl": ({"qwen2.5-vl", "qwen3-vl", "qwen3-vl-moe", "qwen3.5"},
                {"qwen2.5-vl", "qwen3-vl", "qwen3-vl-moe", "qwen3.5"}),
    "audio": ({"qwen2-audio", "audioflamingo3", "musicflamingo", "granite-speech"},
              {"qwen2-audio", "audioflamingo3", "musicflamingo", "granite-speech"}),
    "voxtral": ({"voxtral"}, {"voxtral"}),
    "gemma": ({"gemma3n", "gemma4", "gemma4-unified"}, {"gemma3n", "gemma4", "gemma4-unified"}),
    "phi4": ({"phi4-multimodal"}, {"phi4-multimodal"}),
    "llava_onevision": ({"llava-onevision"}, {"llava-onevision"}),
    "internvl": ({"internvl"}, {"internvl"}),
    "videollama3": ({"videollama3"}, {"videollama3"}),
    "nemotron": ({"nemotron-h-omni"}, {"nemotron-h-omni"}),
}

# Every public name of the module ``omnieval/engines/families.py`` before it became a package.
FORMER_NAMES = [
    "PROCESSOR_ARGS", "FamilyAdapter", "AudioFamily", "refuse_several_audios", "OneAudioFamily", "GraniteSpeechFamily",
    "VoxtralFamily", "video_metadata", "QwenVisionFamily", "TimestampedVideoFamily", "Gemma4Family",
    "NemotronOmniFamily", "Phi4MultimodalFamily", "OneImageOnVllmFamily", "OmniFamily", "expected_audio_tokens",
    "QWEN3_HOP", "QWEN3_WINDOW_FRAMES", "QWEN3_WINDOW_TOKENS", "QWEN3_POSITIONS_PER_SECOND", "QWEN3_TRAILING_SILENCE",
    "qwen3_audio_samples", "qwen3_audio_tokens", "Qwen3OmniFamily", "FAMILIES", "register_family", "OMNI",
    "QWEN3_OMNI", "QWEN3_5_VLLM_REFUSAL", "model_type", "family_for", "accepted_modalities", "load_processor",
]


def registered_in(module: str) -> tuple[set[str], set[str]]:
    """The family names a module's source passes to ``register_family`` and to ``register_recipe``: the first
    argument's ``name=`` keyword, or the family given first to a recipe call."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found: dict[str, set[str]] = {"register_family": set(), "register_recipe": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in found and node.args:
            inner = node.args[0]
            names = [k.value for k in getattr(inner, "keywords", []) if k.arg in ("name", "family")]
            names += getattr(inner, "args", [])[:1]
            found[node.func.id] |= {n.value for n in names if isinstance(n, ast.Constant)}
    return found["register_family"], found["register_recipe"]


@pytest.mark.parametrize("module", sorted(LAYOUT))
def test_each_module_registers_its_own_families_and_recipes(module):
    assert registered_in(module) == LAYOUT[module]
    assert getattr(families, module) in families.FAMILY_MODULES


def test_the_registry_is_the_union_of_the_modules():
    assert {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "base"} == set(LAYOUT)
    assert {a.name for a in families.FAMILIES.values()} == set().union(*(fams for fams, _ in LAYOUT.values()))
    assert set(families.RECIPES) == set().union(*(recipes for _, recipes in LAYOUT.values()))


@pytest.mark.parametrize("name", FORMER_NAMES)
def test_the_package_keeps_every_name_of_the_former_module(name):
    assert hasattr(families, name)


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parents[2])


def test_a_recipe_looked_up_before_any_family_module_is_imported_is_refused_in_one_line():
    done = run_python("from omnieval.engines.recipes import recipe_for; recipe_for('qwen2.5-omni')")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == ("RuntimeError: no family recipes are registered yet: import "
                                                    "recipe_for from omnieval.engines.families")


def test_importing_one_family_module_registers_every_family_and_recipe():
    done = run_python("import omnieval.engines.families.internvl; from omnieval.engines.recipes import RECIPES, "
                      "recipe_for; print(sorted(RECIPES)); print(recipe_for('qwen2.5-omni').decode['fps'].value)")
    assert done.returncode == 0, done.stderr
    names, fps = done.stdout.splitlines()
    assert names == str(sorted(set().union(*(recipes for _, recipes in LAYOUT.values()))))
    assert fps == "2.0"  # qwen-omni-utils' FPS
