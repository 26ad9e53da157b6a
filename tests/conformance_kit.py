"""The conformance kit's fixtures: the media it is run on, the decode settings that reproduce each family's reference
pipeline, and how each reference is called (``test_conformance.py`` runs them).

**Decode settings** (``REFERENCE_DECODE``): per family, the ``decode:`` options of a run that make omnieval sample and
size a clip as the family's reference pipeline does by default; the recipes (frames, pixels, audio per family) are
meant to resolve to these. Qwen2.5-Omni and Qwen3-Omni: ``qwen-omni-utils`` (``vision_process``: ``FPS`` 2,
``FPS_MIN_FRAMES`` 4, ``FPS_MAX_FRAMES`` 768, ``FRAME_FACTOR`` 2, indices ``linspace`` over the clip's frames,
``VIDEO_MIN_TOKEN_NUM`` 128 and ``VIDEO_MAX_TOKEN_NUM`` 768 merged patches a frame, ``MODEL_SEQ_LEN`` 128000 x 0.9
over the clip; the whole soundtrack, ``audio_process``). Both model cards call ``process_mm_info`` with its default
``image_patch_size`` 14, so Qwen3-Omni's frames are sized to multiples of 28 there too, and its processor resizes them
to its own multiples of 32. Qwen2.5-VL and Qwen3-VL: ``qwen-vl-utils``, the same rules with 16-pixel patches (factor
32) for Qwen3-VL, whose card passes ``image_patch_size=16``. The families whose processor samples the file itself
(``PROCESSOR_SAMPLED``: LLaVA-OneVision, InternVL, Gemma 4, Gemma 4 Unified, VideoLLaMA3, Qwen3.5): the count or
rate their cards or processors set, their processors' index rule (``uniform``, InternVL's ``uniform_shifted``,
Qwen3.5's ``linspace``), and the frames at their own size, as the processor reads them from the file.

**References** (``REFERENCES``): a family runs its reference here or says why not; every registered family has an
entry, and its line is in the README (``test_every_registered_family_has_a_reference_line``).

**Media** (``make_media``, ffmpeg, once per test session): a 23.5 s clip at 25 fps with moving content (``testsrc2``)
and a 16 kHz PCM soundtrack (lossless, so the reference's reader and PyAV decode the same samples), already at a size
inside the Qwen budget (392 x 280, multiples of 28: neither pipeline resizes it); a portrait clip (180 x 320, 30 fps,
7.3 s) with an AAC soundtrack at 44.1 kHz, which both pipelines upscale and resample; a 640 x 480 (4:3) PNG; a 41 s
WAV at 16 kHz (longer than Whisper's 30 s window).

**Card snippets** (``TEMPLATE_CARD``, Voxtral): Gemma 3n's card gives its processor's ``apply_chat_template`` the
media and lets it load them (the image is given opened with PIL here: transformers reads a path with torchvision's
image decoder, whose compiled extension the CPU build lacks; PIL decodes the lossless PNG to the same pixels).
Voxtral's card shows two requests, both run: for vLLM, mistral-common's ``Audio.from_file(path, strict=False)``,
``AudioChunk.from_audio`` and a ``UserMessage`` encoded by the Tekken tokenizer (``encode_chat_completion``: the
ids, and the clips padded to whole 30 s chunks that vLLM is given); for transformers,
``VoxtralProcessor.apply_chat_template`` on a message holding the file's path (ids and log-mel features). Both read
audio files with soundfile, which reads no video container: Voxtral is checked on the WAV only.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

QWEN_OMNI_UTILS = {"fps": 2.0, "min_frames": 4, "max_frames": 768, "frame_factor": 2, "index_rule": "linspace",
                   "min_pixels": 128 * 28 * 28, "max_pixels": 768 * 28 * 28, "size_factor": 28,
                   "total_pixels": int(128000 * 28 * 28 * 0.9)}
QWEN3_VL_UTILS = {**QWEN_OMNI_UTILS, "min_pixels": 128 * 32 * 32, "max_pixels": 768 * 32 * 32, "size_factor": 32,
                  "total_pixels": int(128000 * 32 * 32 * 0.9)}

#: The families whose reference is their own processor sampling the file (``do_sample_frames=True``, read with its
#: default video reader, torchcodec), given the count or rate their recipe holds, as the cards give it.
PROCESSOR_SAMPLED: dict[str, dict] = {
    "llava-onevision": {"num_frames": 8, "index_rule": "uniform", "max_side": None},
    "internvl": {"num_frames": 8, "index_rule": "uniform_shifted", "max_side": None},
    "gemma4": {"num_frames": 32, "index_rule": "uniform", "max_side": None},
    "gemma4-unified": {"num_frames": 32, "index_rule": "uniform", "max_side": None},
    "videollama3": {"fps": 1.0, "min_frames": 4, "max_frames": 180, "frame_factor": 1, "index_rule": "uniform",
                    "max_side": None},
    "qwen3.5": {"fps": 2.0, "min_frames": 4, "max_frames": 768, "frame_factor": 1, "index_rule": "linspace",
                "max_side": None},
}

#: The audio families whose cards load the file with ``librosa.load(path, sr=<the feature extractor's rate>)`` and
#: give the waveform to the processor: the reference is that, on the kit's 41 s WAV.
AUDIO_CARD = ("qwen2-audio", "audioflamingo3", "musicflamingo", "granite-speech")

#: The families whose card hands the files to the processor's own ``apply_chat_template(tokenize=True)``, which
#: loads them itself (Gemma 3n: the 4:3 image and the 41 s WAV; it takes no video).
TEMPLATE_CARD = ("gemma3n",)

#: family name -> the ``decode:`` options that reproduce its reference pipeline's defaults (module doc).
REFERENCE_DECODE: dict[str, dict] = {
    **PROCESSOR_SAMPLED,
    "qwen2.5-omni": QWEN_OMNI_UTILS,
    "qwen3-omni": QWEN_OMNI_UTILS,  # the card's process_mm_info keeps image_patch_size 14 (module doc)
    "qwen2.5-vl": QWEN_OMNI_UTILS,  # qwen-vl-utils' defaults are qwen-omni-utils' for 14-pixel patches
    "qwen3-vl": QWEN3_VL_UTILS,
    "qwen3-vl-moe": QWEN3_VL_UTILS,
}

#: The cap the kit sets on both sides to keep its cost small: the reference reads ``max_frames`` from the message.
KIT_MAX_FRAMES = 16


@dataclass(frozen=True)
class Reference:
    """How a family's inputs are checked: ``runner`` names the reference pipeline ``test_conformance`` runs, or
    ``status`` says why it is not run (``cannot run here: ...`` or ``not checked yet: ...``)."""

    runner: str | None = None
    status: str | None = None

    def line(self) -> str:
        """The family's line in the README."""
        return f"conformance: equal to {self.runner}" if self.runner else self.status


_PROCESSOR = "its processor sampling the file itself (do_sample_frames=True, {})"
_REMOTE = "cannot run here: its card's snippet runs the release's remote processor code, which cannot be fetched here"
_AUDIO = "librosa.load(sr=16000) + its processor, as its card loads audio"
REFERENCES: dict[str, Reference] = {
    "qwen2.5-omni": Reference("qwen-omni-utils process_mm_info + Qwen2_5OmniProcessor(use_audio_in_video=True)"),
    "qwen3-omni": Reference("qwen-omni-utils process_mm_info + Qwen3OmniMoeProcessor(use_audio_in_video=True)"),
    "qwen2.5-vl": Reference("qwen-vl-utils process_vision_info + Qwen2_5_VLProcessor"),
    "qwen3-vl": Reference("qwen-vl-utils process_vision_info(image_patch_size=16) + Qwen3VLProcessor"),
    "qwen3-vl-moe": Reference("qwen-vl-utils process_vision_info(image_patch_size=16) + Qwen3VLProcessor"),
    "qwen3.5": Reference(_PROCESSOR.format("its own 2 fps, as Qwen3VLVideoProcessor samples by default")),
    "llava-onevision": Reference(_PROCESSOR.format("num_frames=8, omnieval's count: none is "
                                                   "published")),
    "internvl": Reference(_PROCESSOR.format("num_frames=8 as the InternVL3 card's load_video; the card's own "
                                            "load_video reads frames with decord, which is not installed")),
    "gemma4": Reference(_PROCESSOR.format("its 32 frames")),
    "gemma4-unified": Reference(_PROCESSOR.format("its 32 frames")),
    "videollama3": Reference(_PROCESSOR.format("fps=1, max_frames=180 as its card; the card's own snippet runs the "
                                               "release's remote processor code, which cannot be fetched here")),
    "nemotron-h-omni": Reference(status=_REMOTE),
    "phi4-multimodal": Reference(status=_REMOTE),
    "qwen2-audio": Reference(_AUDIO),
    "gemma3n": Reference("its processor's apply_chat_template(tokenize=True) on the files, as its card (the image "
                         "opened with PIL: transformers reads an image path with torchvision's image extension, "
                         "which the CPU build here lacks)"),
    "audioflamingo3": Reference(_AUDIO),
    "musicflamingo": Reference(_AUDIO),
    "granite-speech": Reference(_AUDIO),
    "voxtral": Reference("its card's two requests: mistral-common Audio.from_file + AudioChunk + "
                         "encode_chat_completion (vLLM), VoxtralProcessor.apply_chat_template on the file's path "
                         "(transformers)"),
}


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True)


def make_media(folder: Path) -> dict[str, Path]:
    """The kit's four files (module doc), written with ffmpeg into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {name: folder / name for name in ("clip.mov", "portrait.mp4", "image.png", "long.wav")}
    chirp = "aevalsrc=0.3*sin(2*PI*(200+40*t)*t)+0.05*(random(0)-0.5)"
    _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=392x280:rate=25:duration=23.5", "-f", "lavfi",
            "-i", f"{chirp}:s=16000:d=23.5", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "50",
            "-c:a", "pcm_s16le", "-shortest", str(out["clip.mov"]))
    _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=180x320:rate=30:duration=7.3", "-f", "lavfi",
            "-i", "aevalsrc=0.2*sin(2*PI*330*t):s=44100:d=7.3", "-c:v", "libx264", "-pix_fmt", "yuv420p",
            "-c:a", "aac", "-shortest", str(out["portrait.mp4"]))
    _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=640x480:rate=1", "-frames:v", "1", str(out["image.png"]))
    _ffmpeg("-f", "lavfi", "-i", "aevalsrc=0.3*sin(2*PI*(300+5*t)*t)+0.05*(random(0)-0.5):s=16000:d=41",
            "-c:a", "pcm_s16le", str(out["long.wav"]))
    return out
