"""Model families that take media through their own processor: an open registry of adapters, one per family.

An adapter says, for the ``model_type`` values of a family's ``config.json``, which modalities the model takes, which
transformers class holds it, and how the decoded media of a request go into the model's own ``AutoProcessor``
(transformers engine) and into vLLM's ``multi_modal_data`` (vLLM engine, which runs the same processor itself):

* the prompt is the processor's chat template applied to one user message whose content parts follow the request's
  ``PromptPart`` order: ``{"type": "text"}`` for text, ``{"type": "video" | "audio" | "image"}`` for each media part
  the model takes (the template writes the family's placeholder), and a one-line text note for a part it cannot
  take (``[pointcloud omitted: this model does not take pointcloud]``);
* ``hf_inputs``: the processor called on that prompt and the decoded arrays (frames, waveforms, images) in prompt
  order, plus the family's processor kwargs (video fps through ``video_metadata``, the audio sampling rate);
* ``vllm_fields``: ``multi_modal_data`` with the same arrays, ``multi_modal_uuids`` (the decode-cache content
  hashes, so vLLM's encoder and prefix caches hit across the conditions of an item) and ``mm_processor_kwargs``.

``accepted_modalities(model_type)`` is what a run can ask before it loads anything.

One module per family, or per group of families whose adapters share a class, holds the family's adapter and its
registration, its recipe (``recipes.register_recipe``: how its authors feed it, each value with its source) and its
placeholder-count rule (the count of each medium's placeholder tokens worked out from the published preprocessing
alone: the tests' reference for the token ids each engine sends)::

    base.py             FamilyAdapter, AudioFamily, video_metadata; the registry (FAMILIES, register_family,
                        family_for, accepted_modalities, load_processor)
    qwen_omni.py        Qwen2.5-Omni, Qwen3-Omni          qwen_vl.py       Qwen2.5-VL, Qwen3-VL(-MoE), Qwen3.5
    audio.py            Qwen2-Audio, Audio Flamingo 3, Music Flamingo, Granite Speech
    voxtral.py          Voxtral                           gemma.py         Gemma 3n, Gemma 4, Gemma 4 Unified
    phi4.py             Phi-4-multimodal                  llava_onevision.py, internvl.py, videollama3.py, nemotron.py

The registry and the recipes are filled by importing the family modules, in the one list below. The tiny
random-weight builds of the families stay in ``omnieval/dev`` (``tiny_models.py``, ``tiny_families.py``,
``tiny_<family>.py``): ``dev`` is a layer above ``engines`` (the import contract in pyproject.toml), so a module
here cannot import them.

The engines never ask which family a model is: they call the adapter's hooks, whose ``FamilyAdapter`` defaults are
what most families need and which a family overrides where it differs (``OmniFamily`` for both omni families):
``prompt_parts`` (the parts as the prompt places them: a video merged with its own soundtrack), ``hf_encode`` and
``hf_batch`` (the processor's inputs; one prompt a forward pass, or left-padded batches), ``check_audio_ids`` (the
ids carry every audio given), ``vllm_processor`` and ``vllm_request`` (what vLLM is given and what the row says it
was shown), ``install_vllm_positions`` / ``vllm_positions_needed`` / ``positions_refusal`` (vLLM's positions
replaced by the model's, ``engines/vllm_positions.py``, ``engines/vllm_qwen3_positions.py``).

How to add a family: a module here, one line in the list below, and in it::

    ADAPTER = register_family(FamilyAdapter(
        name="my-vlm", model_types=("my_vlm",), modalities=("image",),
        model_class="MyVlmForConditionalGeneration"))
    register_recipe(Recipe("my-vlm", decode={"num_frames": Sourced(16, "<where the authors say so>")}))

then, if its processor needs more than the arrays (a sampling rate, frame metadata), subclass ``FamilyAdapter`` and
override ``media_kwargs`` / ``vllm_item``. Add its placeholder-count rule beside it, a tiny build to
``omnieval/dev/tiny_families.py`` (or a ``tiny_<family>.py``), and a test that the two engines agree
(tests/test_vllm_families.py); the conformance kit (tests/test_conformance.py) picks the family up from the registry.
"""

from __future__ import annotations

# The family modules: importing one registers its adapter and its recipe (a new family is one more name here).
from omnieval.engines.families import (
    audio,
    gemma,
    internvl,
    llava_onevision,
    nemotron,
    phi4,
    qwen_omni,
    qwen_vl,
    videollama3,
    voxtral,
)
from omnieval.engines.families.audio import GraniteSpeechFamily, OneAudioFamily, refuse_several_audios
from omnieval.engines.families.base import (
    FAMILIES,
    PROCESSOR_ARGS,
    AudioFamily,
    FamilyAdapter,
    accepted_modalities,
    family_for,
    load_processor,
    model_type,
    register_family,
    video_metadata,
)
from omnieval.engines.families.gemma import Gemma4Family
from omnieval.engines.families.llava_onevision import OneImageOnVllmFamily
from omnieval.engines.families.nemotron import NemotronOmniFamily
from omnieval.engines.families.phi4 import Phi4MultimodalFamily
from omnieval.engines.families.qwen_omni import (
    OMNI,
    QWEN3_HOP,
    QWEN3_OMNI,
    QWEN3_POSITIONS_PER_SECOND,
    QWEN3_TRAILING_SILENCE,
    QWEN3_WINDOW_FRAMES,
    QWEN3_WINDOW_TOKENS,
    OmniFamily,
    Qwen3OmniFamily,
    expected_audio_tokens,
    qwen3_audio_samples,
    qwen3_audio_tokens,
)
from omnieval.engines.families.qwen_vl import QWEN3_5_VLLM_REFUSAL, QwenVisionFamily, TimestampedVideoFamily
from omnieval.engines.families.voxtral import VoxtralFamily
from omnieval.engines.recipes import RECIPES, recipe_for

FAMILY_MODULES = (qwen_omni, audio, qwen_vl, llava_onevision, gemma, voxtral, phi4, internvl, videollama3, nemotron)


def family_names() -> list[str]:
    """The registered families' names (what ``recipe: <family>`` may name)."""
    return sorted({adapter.name for adapter in FAMILIES.values()})


__all__ = [
    "FAMILIES", "FAMILY_MODULES", "OMNI", "PROCESSOR_ARGS", "QWEN3_5_VLLM_REFUSAL", "QWEN3_HOP", "QWEN3_OMNI",
    "QWEN3_POSITIONS_PER_SECOND", "QWEN3_TRAILING_SILENCE", "QWEN3_WINDOW_FRAMES", "QWEN3_WINDOW_TOKENS", "RECIPES",
    "AudioFamily", "FamilyAdapter", "Gemma4Family", "GraniteSpeechFamily", "NemotronOmniFamily", "OmniFamily",
    "OneAudioFamily", "OneImageOnVllmFamily", "Phi4MultimodalFamily", "Qwen3OmniFamily", "QwenVisionFamily",
    "TimestampedVideoFamily", "VoxtralFamily", "accepted_modalities", "expected_audio_tokens", "family_for",
    "family_names", "load_processor", "model_type", "qwen3_audio_samples", "qwen3_audio_tokens", "recipe_for",
    "refuse_several_audios", "register_family", "video_metadata",
]
