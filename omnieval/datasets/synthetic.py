"""The built-in synthetic dissonance benchmark: real media files, made here, deterministic from a seed.

Each anchor is a fictional creature whose identity every modality carries: the video shows its colour, size, speed
and stripes; the audio its call (tone frequency and number of beeps, optionally followed by its spoken name); the
text passage names it, describes how it looks and sounds, and states its facts. A question bank asks for facts
(home world, food, ...); each question's answer key gives every entity its own answer, so an anchor's answer is
evidence for that anchor.

Options are the anchor's answer plus three distractors drawn mostly from answers of *outside* entities (not anchors
of the benchmark); with probability ``p_bench_distractor`` one distractor is the answer of another benchmark anchor.
So a replaced modality usually supports no option, and the evidence-rule targets resemble the paper's human labels:
abstention rare at k=2, nearly always at k=3 (docs/reference.md, Protocol `dissonance`). At paper scale (27 anchors,
seed 0) the abstention targets are 0 at k<=1, 2.2-2.6% at k=2 and 97-99% at k=3 (paper: <=4% and ~98%).

``soundtrack=True`` writes each anchor as ONE video file with its call muxed in as an AAC soundtrack
(``media/<split>/<name>/clip.mp4``), named as both the anchor's ``video`` and its ``audio``, as real audio-visual
benchmarks ship their clips. The dissonance conditions replace video and audio independently, so a condition that
replaces one of them pairs an anchor's picture with another anchor's soundtrack (two files); only where both come
from the same anchor is the audio the video's own.

Default size is small for CI (4 anchors x 2 questions x 2 splits = 16 items, 128 instances); paper scale is
``n_anchors=27, n_questions=10`` (4,320 instances; ``question_jitter`` varies the count per anchor by -2..+1,
a mean of ~9.5 questions and ~4,140 instances, close to the paper's ~9.4).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from omnieval.core.keyed import keyed_rng
from omnieval.core.schema import Anchor, DissonanceItem, DissonanceMedia
from omnieval.datasets.benchmark import write_benchmark_files
from omnieval.datasets.output_folder import building_folder

if TYPE_CHECKING:
    from omnieval.datasets.synthetic_registry import SynthOptions

COLOURS = ["red", "blue", "green", "yellow", "magenta", "cyan", "orange", "purple", "white", "brown", "pink",
           "gray", "lime", "navy", "olive", "teal", "maroon", "gold", "salmon", "violet", "turquoise", "khaki",
           "coral", "indigo", "orchid", "tan", "plum", "crimson", "silver", "chocolate"]
QUESTIONS = [
    ("home", "Which world does this creature come from?", "world"),
    ("food", "What does this creature eat?", "food"),
    ("friend", "Who is this creature's best friend?", "friend"),
    ("tool", "Which tool does this creature carry?", "tool"),
    ("song", "What is the name of this creature's favourite song?", "song"),
    ("ship", "Which ship does this creature travel on?", "ship"),
    ("game", "Which game does this creature play?", "game"),
    ("city", "In which city was this creature born?", "city"),
    ("gem", "Which gem does this creature guard?", "gem"),
    ("river", "Beside which river does this creature sleep?", "river"),
    ("star", "Which star does this creature follow?", "star"),
    ("book", "Which book does this creature read?", "book"),
]
_SYLLABLES = ["ka", "zor", "bli", "mu", "tra", "vel", "qui", "nop", "dar", "fen", "lo", "gri", "sha", "pim", "ru",
              "tek", "wa", "xin", "yol", "bex", "cor", "dil", "eph", "gus"]


def _word(rng, used: set[str], parts: int = 3) -> str:
    while True:
        word = "".join(_SYLLABLES[int(i)] for i in rng.integers(len(_SYLLABLES), size=parts)).capitalize()
        if word not in used:
            used.add(word)
            return word


def _entities(seed: int, split: str, n: int, used: set[str]) -> list[str]:
    rng = keyed_rng(seed, split, "entity-names")
    return [_word(rng, used) for _ in range(n)]


def make_dissonance_benchmark(out_dir: str | Path, *, seed: int = 0, n_anchors: int = 4, n_questions: int = 2,
                              splits: tuple[str, ...] = ("real", "synthetic"), n_outside: int = 12,
                              p_bench_distractor: float = 1 / 3, question_jitter: bool = False,
                              speech: bool = False, soundtrack: bool = False, workers: int | None = None,
                              overwrite: bool = False) -> Path:
    """Write the benchmark folder (``benchmark.json``, ``anchors.jsonl``, ``items.jsonl``, ``media/``) and return
    its path. Written into a temporary folder first and moved into place, so a half-written benchmark never exists;
    ``out_dir`` must be new or empty, or with ``overwrite`` a previous ``synth`` output, which it replaces
    (``omnieval.datasets.output_folder``).

    ``speech=True`` makes each anchor's audio its tone pattern followed by its name spoken by espeak-ng (when the
    binary exists; else tones only, recorded as ``"speech": false`` in ``benchmark.json``). Media files are made by
    ``workers`` parallel ffmpeg processes (default: CPU count); each file depends only on its own arguments, so the
    bytes do not depend on the number of workers.
    """
    from omnieval.media.synth import has_speech

    speech = speech and has_speech()
    if n_anchors < 2:
        raise ValueError("a dissonance benchmark needs at least 2 anchors per split")
    if not 1 <= n_questions <= len(QUESTIONS):
        raise ValueError(f"n_questions must be in 1..{len(QUESTIONS)}")
    if n_anchors > len(COLOURS):
        raise ValueError(f"at most {len(COLOURS)} anchors per split")
    out = Path(out_dir)
    with building_folder(out, "synth", overwrite=overwrite, prefix=".synth-") as tmp:
        anchors, items, jobs = [], [], []
        used: set[str] = set()
        for split_index, split in enumerate(splits):
            names = _entities(seed, split, n_anchors, used)
            outside = _entities(seed, split + "/outside", n_outside, used)
            answers = {qid: {e: _word(keyed_rng(seed, split, qid, e, "answer"), used) for e in names + outside}
                       for qid, _, _ in QUESTIONS}
            for i, name in enumerate(names):
                media, job = _anchor_media(tmp, split, split_index, i, name, answers, speech, soundtrack)
                anchors.append(Anchor(anchor=name, split=split, media=media))
                jobs.extend(job)
            for name in names:
                rng = keyed_rng(seed, split, name, "questions")
                count = n_questions
                if question_jitter:
                    count = int(min(len(QUESTIONS), max(1, n_questions + rng.integers(-2, 2))))
                for qid, question, _ in [QUESTIONS[j] for j in sorted(rng.permutation(len(QUESTIONS))[:count])]:
                    items.append(_item(seed, split, name, qid, question, names, outside, answers[qid], anchors,
                                       p_bench_distractor))
        with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:  # ffmpeg runs outside the GIL
            list(pool.map(lambda write: write(), jobs))
        (tmp / "anchors.jsonl").write_text("".join(a.model_dump_json() + "\n" for a in anchors))
        meta = {"name": "omnieval-synthetic", "protocol": "dissonance", "seed": seed, "splits": list(splits),
                "n_anchors": n_anchors, "n_questions": n_questions, "question_jitter": question_jitter,
                "p_bench_distractor": p_bench_distractor, "n_outside": n_outside, "speech": speech,
                "soundtrack": soundtrack,
                "generator": "omnieval.datasets.synthetic"}
        write_benchmark_files(tmp, items, meta)
    return out


def _anchor_media(root: Path, split: str, split_index: int, index: int, name: str, answers: dict,
                  speech: bool, soundtrack: bool = False) -> tuple[DissonanceMedia, list]:
    """The anchor's media references and passage, plus the synthesis calls that write its files.

    Anchors differ within a split (colour, size, speed, stripes; pitch, beeps) and splits differ from each other
    (background, colour and pitch offsets), so no two media files of a benchmark have the same bytes."""
    from functools import partial

    from omnieval.media.synth import beep_audio, moving_box_video, spoken_call

    rel = Path("media") / split / name
    colour = COLOURS[(index + 11 * split_index) % len(COLOURS)]
    background = ["black", "0x202040", "0x204020", "0x402020"][split_index % 4]
    box, speed, stripes = 40 + 10 * (index % 4), 30 + 25 * (index % 5), index % 3
    frequency, beeps = 300 + 90 * index + 45 * split_index, 1 + index % 4
    video = partial(moving_box_video, root / rel / "video.mp4", colour=colour, background=background, box=box,
                    speed=speed, stripes=stripes)
    if speech:
        audio = partial(spoken_call, root / rel / "audio.wav", word=name, frequency=frequency, beeps=beeps)
    else:
        audio = partial(beep_audio, root / rel / "audio.wav", frequency=frequency, beeps=beeps)
    facts = "; ".join(f"its {label} is {answers[qid][name]}" for qid, _, label in QUESTIONS)
    call = f"{beeps} beeps at {frequency} Hz" + (" and then says its name" if speech else "")
    text = (f"This is {name}, a {colour} creature {box} pixels wide with {stripes} white stripes that drifts at "
            f"{speed} pixels per second and calls with {call}. About {name}: {facts}.")
    if soundtrack:
        clip = rel / "clip.mp4"
        media = DissonanceMedia(video=str(clip), audio=str(clip), text=text)
        return media, [partial(_muxed, root / clip, video, audio)]
    media = DissonanceMedia(video=str(rel / "video.mp4"), audio=str(rel / "audio.wav"), text=text)
    return media, [video, audio]


def _muxed(path: Path, video, audio) -> Path:
    """Write the silent clip and the call in a temporary folder (``video`` and ``audio``: the synthesis calls,
    partials whose first argument is their target), then mux them into ``path`` (the call as AAC)."""
    import tempfile
    from functools import partial

    from omnieval.media.synth import mux_clip

    with tempfile.TemporaryDirectory(prefix="omnieval-clip-") as tmp:
        silent, call = Path(tmp) / "video.mp4", Path(tmp) / "audio.wav"
        partial(video.func, silent, *video.args[1:], **video.keywords)()
        partial(audio.func, call, *audio.args[1:], **audio.keywords)()
        return mux_clip(path, video=silent, audio=call)


def _item(seed, split, name, qid, question, names, outside, answers, anchors, p_bench) -> DissonanceItem:
    rng = keyed_rng(seed, split, name, qid, "options")
    others = [n for n in names if n != name]
    chosen_outside = [outside[int(i)] for i in rng.permutation(len(outside))[:3]]
    distractors = list(chosen_outside)
    if rng.random() < p_bench:
        distractors[0] = others[int(rng.integers(len(others)))]
    key_entities = [name, *others, *distractors]
    media = next(a.media for a in anchors if a.anchor == name and a.split == split)
    return DissonanceItem(
        item_id=f"{split}-{name.lower()}-{qid}", benchmark="omnieval-synthetic", split=split, question=question,
        anchor=name, media=media, answer_key={e: answers[e] for e in dict.fromkeys(key_entities)},
        options=[answers[name], *(answers[d] for d in distractors)], task=qid, category="synthetic")


def synthetic_benchmark(out: str | Path, seed: int, options: SynthOptions, overwrite: bool = False) -> Path:
    """``omnieval datasets synth --protocol dissonance`` (the protocol's ``synthetic_benchmark``): the benchmark of the
    CLI's size knobs that apply to it (anchors, questions, question jitter, speech, soundtrack)."""
    return make_dissonance_benchmark(out, seed=seed, n_anchors=options.anchors, n_questions=options.questions,
                                     speech=options.speech, question_jitter=options.question_jitter,
                                     soundtrack=options.soundtrack, overwrite=overwrite)
