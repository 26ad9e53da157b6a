"""How a request's media are fed to a model beyond its decode settings, as its family's recipe says
(``engines.recipes``) or its ``options`` override: the three engine options the transformers and vLLM engines share.

* ``image_pixels``: each image resized under a pixel budget before the model's processor sees it, as the family's
  reference utilities do (``qwen-vl-utils`` / ``qwen-omni-utils`` ``fetch_image``: sides multiples of
  ``size_factor``, ``min_pixels <= h * w <= max_pixels``, the aspect ratio kept, ``media.sampling.pixel_size``; then
  a bicubic resize, Pillow's default filter the utilities use). The processor's own resize then finds the sides
  already on its grid. Unset: images as decoded.
* ``soundtrack``: whether a video's own soundtrack is heard (the recipe's ``use_audio_in_video``). ``false``: an
  audio part of the same file beside a video part (``families.soundtrack_pairs``) is not passed, and the row's
  ``audio_seconds`` says 0 heard. ``true`` or unset: passed, laid out as the family takes a video with sound (one
  interleaved placeholder for the omni families, a separate audio item for the others).
* ``media_first``: ``true`` (default) keeps the rendered layout, the context media before the question;
  ``false`` moves them right after the first text part (the question block), as families whose authors put the
  text first do. Media shown inside the options (after each label) stay where they are.

A bad value is an ``OptionError`` naming the option, on the driver before any model work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from omnieval.core.prompts import PromptPart
from omnieval.engines.base import OptionError
from omnieval.engines.families.base import soundtrack_pairs
from omnieval.engines.shown import Shown
from omnieval.media.decoded import DecodedMedia
from omnieval.media.sampling import SIZE_FACTOR, pixel_size

PIXEL_KEYS = ("min_pixels", "max_pixels", "size_factor")
FEEDING_OPTIONS = ("image_pixels", "soundtrack", "media_first")


@dataclass(frozen=True)
class Feeding:
    """The three options of the module doc, checked (``from_options``)."""

    image_pixels: Mapping[str, int] | None = None
    soundtrack: bool | None = None
    media_first: bool = True

    @classmethod
    def from_options(cls, engine: str, image_pixels=None, soundtrack=None, media_first=True) -> Feeding:
        """The options as an engine is given them; a value of the wrong kind is an ``OptionError`` naming it."""
        if soundtrack is not None and not isinstance(soundtrack, bool):
            raise OptionError("soundtrack", f"{engine} engine: soundtrack must be true or false, got {soundtrack!r}")
        if not isinstance(media_first, bool):
            raise OptionError("media_first", f"{engine} engine: media_first must be true or false, "
                                             f"got {media_first!r}")
        return cls(_pixel_budget(engine, image_pixels), soundtrack, media_first)

    # -- the prompt -----------------------------------------------------------------------------------------------
    def parts(self, parts: Sequence[PromptPart]) -> list[PromptPart]:
        """The rendered parts with the soundtracks left out where they are not heard, in the media order asked."""
        kept = list(parts)
        if self.soundtrack is False:
            muted = {audio for _, audio in soundtrack_pairs(kept)}
            kept = [part for i, part in enumerate(kept) if i not in muted]
        return kept if self.media_first else _text_first(kept)

    def shown(self, shown: Shown) -> Shown:
        """``shown`` saying 0 s heard where soundtracks are not passed and no other audio was (rather than no
        value: the row had a video whose sound the model was not given)."""
        if self.soundtrack is False and shown.audio_seconds is None and shown.video_frames:
            return replace(shown, audio_seconds=0.0)
        return shown

    # -- the media ------------------------------------------------------------------------------------------------
    def media(self, media: Mapping[str, DecodedMedia]) -> dict[str, DecodedMedia]:
        """The request's decoded media with each image resized under the pixel budget (the rest as decoded)."""
        if not self.image_pixels:
            return dict(media)
        return {ref: self.image(item) if item.modality == "image" else item for ref, item in media.items()}

    def image(self, item: DecodedMedia) -> DecodedMedia:
        """One image within the budget (module doc). A resized image gets a content hash of its own: vLLM's
        caches key on it."""
        budget = self.image_pixels or {}
        height, width = item.data.shape[:2]
        factor = budget.get("size_factor", SIZE_FACTOR)
        h, w = pixel_size(height, width, factor, budget.get("min_pixels", factor * factor), budget["max_pixels"])
        if (h, w) == (height, width):
            return item
        return replace(item, data=resize_rgb(item.data, h, w),
                       content_hash=f"{item.content_hash}:px{h}x{w}" if item.content_hash else "")


def resize_rgb(data: np.ndarray, height: int, width: int) -> np.ndarray:
    """An RGB uint8 (H, W, 3) array resized to ``height`` x ``width`` by Pillow's bicubic filter (``Image.resize``'s
    default for RGB, which the reference utilities call)."""
    from PIL import Image

    return np.asarray(Image.fromarray(data).resize((width, height), Image.Resampling.BICUBIC))


def _pixel_budget(engine: str, value) -> dict[str, int] | None:
    """``image_pixels`` checked: a mapping with ``max_pixels`` and optionally ``min_pixels`` and ``size_factor``,
    each a positive integer, ``min_pixels <= max_pixels``."""
    if value is None:
        return None
    example = "{max_pixels: 12845056, min_pixels: 3136, size_factor: 28}"
    if not isinstance(value, Mapping) or "max_pixels" not in value or set(value) - set(PIXEL_KEYS):
        raise OptionError("image_pixels", f"{engine} engine: image_pixels must be a mapping with max_pixels and "
                                          f"optionally min_pixels and size_factor (e.g. {example}), got {value!r}")
    for key, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise OptionError("image_pixels", f"{engine} engine: image_pixels.{key} must be an integer >= 1, "
                                              f"got {number!r}")
    if value.get("min_pixels", 1) > value["max_pixels"]:
        raise OptionError("image_pixels", f"{engine} engine: image_pixels.min_pixels {value['min_pixels']} is above "
                                          f"max_pixels {value['max_pixels']}")
    return dict(value)


def _text_first(parts: list[PromptPart]) -> list[PromptPart]:
    """The media before the first text part moved right after it (module doc)."""
    first_text = next((i for i, part in enumerate(parts) if part.kind == "text"), None)
    if first_text is None:
        return parts
    lead = parts[:first_text]
    return [parts[first_text], *lead, *parts[first_text + 1:]]
