"""Recipes: how each model family's authors feed it, value by value, each value with where it comes from.

A ``Recipe`` is keyed by a family's registry name (``families.register_family``): how its videos are sampled (rule,
rate, bounds, factor, index rule), the pixel budget and side factor of its frames and images, its audio (sample
rate, length cap, whether a video's own soundtrack is heard), its system prompt, where media go relative to the
text, its chat template switches and its generation defaults. Every value is a ``Sourced`` pair: the value and
where it was read (the model card's evaluation settings, the family's reference utilities with package, version
and function, or the processor's own default). A family with no published recipe has ``NO_RECIPE``: omnieval's
own defaults, said so, never a number made up.

``decode`` holds the values the decoder applies, under the names of a run's ``decode:`` options
(``config.DecodeConfig``), so a recipe, a benchmark's pinned protocol settings and a config override one another
option group by option group (``run.recipe``: the resolution and its precedence). The other values are recorded
with the run (``run.json``) as the family's reference settings.

Each family's recipe is registered in its own module of ``engines/families/`` (``register_recipe``), beside its
adapter; this module holds the types, the sources and the Qwen reference utilities' values that several families
share. ``RECIPES`` is filled when ``omnieval.engines.families`` is imported: callers take ``recipe_for`` from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Where the values of the Qwen omni and Qwen-VL families come from.
QWEN_OMNI_UTILS = "qwen-omni-utils 0.0.9, qwen_omni_utils.v2_5.vision_process"
QWEN_OMNI_AUDIO = "qwen-omni-utils 0.0.9, qwen_omni_utils.v2_5.audio_process.process_audio_info"
QWEN_VL_UTILS = "qwen-vl-utils 0.0.14, qwen_vl_utils.vision_process"
QWEN25_OMNI_CARD = "https://huggingface.co/Qwen/Qwen2.5-Omni-7B (model card, usage: system prompt, use_audio_in_video)"
QWEN3_OMNI_CARD = "https://huggingface.co/Qwen/Qwen3-Omni-30B-A3B-Instruct (model card, usage: use_audio_in_video)"
#: Qwen3-Omni's card (and its repository's README, github.com/QwenLM/Qwen3-Omni at 0309c20) calls
#: ``process_mm_info(conversation, use_audio_in_video=...)`` without ``image_patch_size``: the utilities' default 14,
#: so its frames and images are sized to multiples of 28 (its processor then resizes them for its 16-pixel patches).
QWEN3_OMNI_PATCH = 14
QWEN3_VL_CARD = ("https://huggingface.co/Qwen/Qwen3-VL-8B-Instruct (model card: "
                 "process_vision_info(image_patch_size=16))")
OMNIEVAL_DEFAULT = "omnieval default, no published recipe"
TRANSFORMERS = "transformers 5.19.0"
#: The rule of transformers' video processors without a ``sample_frames`` of their own: the ``uniform`` index rule.
TRANSFORMERS_SAMPLING = f"{TRANSFORMERS}, video_utils.default_sample_indices_fn (BaseVideoProcessor.sample_frames)"
#: The system prompt the Qwen2.5-Omni model card requires (its audio output and its instruction following assume it).
QWEN25_OMNI_SYSTEM = ("You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving "
                      "auditory and visual inputs, as well as generating text and speech.")

#: The reference utilities' per-frame token bounds and their context length (``VIDEO_MIN_TOKEN_NUM``,
#: ``VIDEO_MAX_TOKEN_NUM``, ``IMAGE_MIN_TOKEN_NUM``, ``IMAGE_MAX_TOKEN_NUM``, ``MODEL_SEQ_LEN``): pixels are tokens
#: times the side factor squared (``fetch_video``, ``fetch_image``).
VIDEO_MIN_TOKENS, VIDEO_MAX_TOKENS = 128, 768
IMAGE_MIN_TOKENS, IMAGE_MAX_TOKENS = 4, 16384
MODEL_SEQ_LEN = 128_000


@dataclass(frozen=True)
class Sourced:
    """A recipe value and where it was read."""

    value: Any
    source: str


@dataclass(frozen=True)
class Recipe:
    """A family's reference settings (module doc). ``decode`` maps ``decode:`` option names to sourced values;
    ``image`` the image pixel budget (``min_pixels``, ``max_pixels``, ``size_factor``); ``generation`` the
    generation defaults; ``chat_template`` the template switches (``enable_thinking``)."""

    family: str
    decode: dict[str, Sourced] = field(default_factory=dict)
    image: dict[str, Sourced] = field(default_factory=dict)
    use_audio_in_video: Sourced = Sourced(False, OMNIEVAL_DEFAULT)
    system_prompt: Sourced = Sourced(None, OMNIEVAL_DEFAULT)
    media_first: Sourced = Sourced(True, OMNIEVAL_DEFAULT)
    chat_template: dict[str, Sourced] = field(default_factory=dict)
    generation: dict[str, Sourced] = field(default_factory=dict)

    @property
    def published(self) -> bool:
        """Whether any value comes from the family's authors (a recipe of omnieval's defaults only is not)."""
        return any(v.source != OMNIEVAL_DEFAULT for v in self.values().values())

    def values(self) -> dict[str, Sourced]:
        """Every value by a flat name (``decode.fps``, ``image.max_pixels``, ``system_prompt``): what ``run.json``
        records."""
        flat = {f"decode.{k}": v for k, v in self.decode.items()}
        flat |= {f"image.{k}": v for k, v in self.image.items()}
        flat |= {"use_audio_in_video": self.use_audio_in_video, "system_prompt": self.system_prompt,
                 "media_first": self.media_first}
        flat |= {f"chat_template.{k}": v for k, v in self.chat_template.items()}
        flat |= {f"generation.{k}": v for k, v in self.generation.items()}
        return flat

    def record(self) -> dict[str, dict[str, Any]]:
        """``{name: {"value": v, "source": s}}`` for ``run.json``."""
        return {name: {"value": v.value, "source": v.source} for name, v in self.values().items()}


def qwen_rate_sampling(source: str, patch: int) -> tuple[dict[str, Sourced], dict[str, Sourced]]:
    """The Qwen reference utilities' video and image settings for a vision encoder of ``patch``-pixel patches
    merged 2x2 (``SPATIAL_MERGE_SIZE``): 2 frames a second (``FPS``), 4..768 frames (``FPS_MIN_FRAMES``,
    ``FPS_MAX_FRAMES``) in pairs (``FRAME_FACTOR``), indices by ``linspace`` over the clip's frames (the video
    readers), and each frame within 128..768 tokens under a clip budget of ``MODEL_SEQ_LEN * 0.9`` tokens
    (``fetch_video``); images within 4..16384 tokens (``fetch_image``)."""
    factor = patch * 2
    frames = f"{source}.smart_nframes"
    size = f"{source}.fetch_video (image_patch_size={patch})"
    video = {
        "fps": Sourced(2.0, frames), "min_frames": Sourced(4, frames), "max_frames": Sourced(768, frames),
        "frame_factor": Sourced(2, frames),
        "index_rule": Sourced("linspace", f"{source}._read_video_torchvision (torch.linspace over the frames)"),
        "size_factor": Sourced(factor, size),
        "min_pixels": Sourced(VIDEO_MIN_TOKENS * factor * factor, size),
        "max_pixels": Sourced(VIDEO_MAX_TOKENS * factor * factor, size),
        "total_pixels": Sourced(int(MODEL_SEQ_LEN * factor * factor * 0.9), size),
    }
    image_source = f"{source}.fetch_image (image_patch_size={patch})"
    image = {"size_factor": Sourced(factor, image_source),
             "min_pixels": Sourced(IMAGE_MIN_TOKENS * factor * factor, image_source),
             "max_pixels": Sourced(IMAGE_MAX_TOKENS * factor * factor, image_source)}
    return video, image


def qwen_omni_recipe(family: str, patch: int, card: str, system_prompt: Sourced) -> Recipe:
    """Qwen2.5-Omni and Qwen3-Omni: the reference utilities' sampling, the whole soundtrack at 16 kHz
    (``process_audio_info`` reads the file whole, at its ``SAMPLE_RATE``) and the video's soundtrack heard as the
    card's usage sets ``use_audio_in_video``."""
    video, image = qwen_rate_sampling(QWEN_OMNI_UTILS, patch)
    audio = {"sample_rate": Sourced(16_000, QWEN_OMNI_AUDIO + " (SAMPLE_RATE)")}
    return Recipe(family=family, decode=video | audio, image=image,
                  use_audio_in_video=Sourced(True, card), system_prompt=system_prompt)


def qwen_vl_recipe(family: str, patch: int, patch_source: str) -> Recipe:
    """Qwen2.5-VL and Qwen3-VL: ``qwen-vl-utils``' sampling (the same constants as the omni utilities), with the
    patch size their cards pass (14 by the utilities' default; 16 for Qwen3-VL)."""
    video, image = qwen_rate_sampling(QWEN_VL_UTILS, patch)
    if patch_source:
        video["size_factor"] = image["size_factor"] = Sourced(patch * 2, patch_source)
    return Recipe(family=family, decode=video, image=image)


def processor_source(cls: str, attribute: str) -> str:
    """Where a value a processor class sets by default was read: ``transformers 5.19.0, <cls>.<attribute>``."""
    return f"{TRANSFORMERS}, {cls}.{attribute} (the processor's own default)"


def own_size(processor: str) -> Sourced:
    """``max_side: None`` for a family whose processor resizes frames itself from whatever size it is given (its card
    hands it the file): the frames go in at their own size, so the processor's resize is the reference's. The cost
    is memory: a decoded 1080p frame holds 6 MB."""
    return Sourced(None, f"{TRANSFORMERS}, {processor} resizes the frames itself: given them at their own size, as "
                         "the card gives it the file")


def audio_recipe(family: str, extractor: str, cap_seconds: float | None = None, cap_source: str = "") -> Recipe:
    """An audio family fed as its feature extractor takes audio: at its ``sampling_rate`` (16 kHz for every family
    here), and cut where the processor cuts it (``cap_seconds``, from ``cap_source``), so that a row's
    ``audio_seconds`` says what the model heard; no cap: the whole file, as the processor takes it."""
    decode = {"sample_rate": Sourced(16_000, processor_source(extractor, "sampling_rate"))}
    if cap_seconds is not None:
        decode["max_audio_seconds"] = Sourced(cap_seconds, cap_source)
    return Recipe(family=family, decode=decode)


RECIPES: dict[str, Recipe] = {}


def register_recipe(recipe: Recipe) -> Recipe:
    """Add a recipe under its family's registry name (a later one for the same name replaces the earlier)."""
    RECIPES[recipe.family] = recipe
    return recipe


def recipe_for(family: str) -> Recipe:
    """A family's recipe; a registered family without one has omnieval's defaults (``Recipe(family)``: every value
    says ``OMNIEVAL_DEFAULT``). The recipes are those of the family modules imported so far: take it from
    ``omnieval.engines.families``, which imports them all. Called before any is imported, it refuses rather than
    give every family omnieval's defaults without a word."""
    if not RECIPES:
        raise RuntimeError("no family recipes are registered yet: import recipe_for from omnieval.engines.families")
    return RECIPES.get(family) or Recipe(family=family)
