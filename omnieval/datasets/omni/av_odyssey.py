"""AV-Odyssey (questions on pictures or clips with sounds) -> one ``spectrum`` benchmark per set of modalities, the
items that show several media of one kind refused one by one.

The release folder as lmms-eval reads it (``AV-Odyssey/AV_Odyssey_Bench_LMMs_Eval``, its archives unpacked):
``av_odyssey.parquet`` (the ``test`` split) beside the media its rows name. Columns: ``question_id``, ``question``
(with tags ``[imgN]``, ``[videoN]``, ``[audioN]`` where the N-th medium of a kind belongs), ``options`` (four texts
written ``"A. ..."``), ``answer`` (a label), ``subfield`` (Timbre, Tone, Melody, Space, Time, Hallucination,
Intricacy), ``data_type`` (whether the pictures are images or videos: lmms-eval reads ``image_path`` where it
names ``image``, else ``video_path`` where it names ``video``, and ``audio_path`` always), and the lists of relative
paths ``image_path``, ``video_path``, ``audio_path``. A path is looked for as written, then under a folder of its
first component's name (an archive unpacked into a folder of its own name, as lmms-eval's first reader had it).
``question_type_id`` (the task number) is the item's ``task`` where the file has it; ``category`` is ``subfield``.

**One benchmark per set of modalities.** A ``spectrum`` benchmark has one set of modalities and one file per
modality per item, so the items are grouped by the kinds of media they show and each group is written as its own
benchmark folder, ``--out/<set>/`` (``image+audio``, ``video+audio``, ...; the modalities in the order image, video,
audio), named ``<name>-<set>``. ``--out`` is a suite (``output_folder``): ``benchmarks.json`` lists the folders.

**Items with several media of one kind** (four pictures to choose from, two sounds to compare) cannot be such an
item: each is refused, not dropped silently: ``--out/skipped.jsonl`` lists it with the reason (``2 audio clips``)
and the summary counts them by reason. A tag naming a medium the row does not have (``[img2]`` with one picture)
is an error naming the row.

**Tags.** The ``spectrum`` prompt shows the media before the question in its own order (image, video, audio), so
each tag becomes a short marker, ``[image]``, ``[video]`` or ``[audio]``: the sentence still reads whole and says
which input it speaks of, and with one medium of a kind no number is needed. The item's ``media`` lists the media in
the order the question's tags first name them (the rest after, in the order above).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_images import missing_cell
from omnieval.datasets.mcq_sources import parquet_rows
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Where,
    check_out,
    field_text,
    given_answer,
    option_texts,
    release_sources,
    write_release,
)
from omnieval.datasets.output_folder import SUITE_INDEX, building_folder
from omnieval.protocols.spectrum import MEDIA

CONVERTER = "av-odyssey"
QUESTIONS = "av_odyssey.parquet"
SPLIT = "test"
TAG_KINDS = {"img": "image", "video": "video", "audio": "audio"}
"""The tag words of the release and the modality each names."""
PATH_COLUMNS = {"image": "image_path", "video": "video_path", "audio": "audio_path"}
MARKERS = {m: f"[{m}]" for m in MEDIA}
NOUNS = {"image": ("image", "images"), "video": ("video", "videos"), "audio": ("audio clip", "audio clips")}
_TAG = re.compile(r"\[(img|video|audio)(\d+)\]")


@dataclass(frozen=True)
class Refused:
    """An item left out, and why (``skipped.jsonl``)."""

    item_id: str
    file: str
    row: str
    reason: str


@dataclass
class ConvertedSuite:
    """What ``convert_av_odyssey`` wrote: one ``Converted`` per set of modalities, and the items refused."""

    out: Path
    benchmarks: dict[str, Converted]
    refused: list[Refused] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def skipped_splits(self) -> dict[str, int]:
        return {f"{name}/{split}": n for name, part in self.benchmarks.items()
                for split, n in part.skipped_splits.items()}

    def summary(self) -> str:
        parts = "; ".join(f"{name}/: {part.n_items} items, {part.n_media} media files"
                          for name, part in self.benchmarks.items())
        text = f"wrote {len(self.benchmarks)} benchmark{'s' if len(self.benchmarks) != 1 else ''} to {self.out} " \
               f"({parts})"
        if self.refused:
            by_reason: dict[str, list[str]] = {}
            for r in self.refused:
                by_reason.setdefault(r.reason, []).append(r.item_id)
            reasons = "; ".join(f"{reason}: {len(ids)} ({', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''})"
                                for reason, ids in sorted(by_reason.items()))
            text += (f"; refused {len(self.refused)} items with several media of one kind, listed in "
                     f"{self.out / 'skipped.jsonl'}: {reasons}")
        return text


def read_av_odyssey(release: Path) -> tuple[dict[str, list[Entry]], list[Refused]]:
    """The entries of ``release/av_odyssey.parquet`` grouped by their set of modalities (module doc), and the
    items refused."""
    path = release / QUESTIONS
    if not path.is_file():
        parts = sorted(release.glob("av_odyssey_part*.parquet"))
        hint = (f" ({parts[0].name} and the like embed the media: that is the AV_Odyssey_Bench release; this reads "
                "AV_Odyssey_Bench_LMMs_Eval, whose rows name their files)") if parts else ""
        raise InputError(f"no {QUESTIONS} in the release folder{hint}", file=release)
    groups: dict[str, list[Entry]] = {}
    refused: list[Refused] = []
    for row in parquet_rows(path, SPLIT):
        where = Where(row.file, f"row {row.number}")
        record = row.record
        qid = field_text(record, "question_id", where)
        where = Where(row.file, f"row {row.number} (question {qid})")
        paths = _media_paths(record, where)
        several = [f"{len(p)} {NOUNS[m][1]}" for m, p in paths.items() if len(p) > 1]
        if several:
            refused.append(Refused(qid, str(row.file), f"row {row.number}", ", ".join(several)))
            continue
        entry = _entry(record, where, qid, {m: p[0] for m, p in paths.items() if p})
        groups.setdefault(modality_set(entry.media), []).append(entry)
    return dict(sorted(groups.items(), key=lambda kv: [MEDIA.index(m) for m in kv[0].split("+")])), refused


def modality_set(media) -> str:
    """The folder name of a set of modalities: ``image+audio``, in the order image, video, audio."""
    return "+".join(m for m in MEDIA if m in media)


def _media_paths(record: dict, where: Where) -> dict[str, list[str]]:
    """The relative paths of each kind of medium the row shows (``data_type`` picks images or videos, as lmms-eval
    reads it)."""
    data_type = field_text(record, "data_type", where, required=False) or ""
    visual = "image" if "image" in data_type else "video" if "video" in data_type else None
    out = {}
    for modality in (visual, "audio"):
        if modality is None:
            continue
        column = PATH_COLUMNS[modality]
        value = record.get(column)
        if hasattr(value, "tolist"):
            value = value.tolist()
        if value is None:
            value = []
        if not isinstance(value, list):
            raise where.error(f"expected a list of paths, got {type(value).__name__}", column)
        for i, p in enumerate(value):
            if missing_cell(p) or not isinstance(p, str):
                raise where.error(f"path {i} is {p!r}", column)
        out[modality] = [p.strip() for p in value]
    return out


def _entry(record: dict, where: Where, qid: str, media: dict[str, str]) -> Entry:
    raw_options = record.get("options")
    if hasattr(raw_options, "tolist"):
        raw_options = raw_options.tolist()
    options = option_texts(raw_options, where, "options")
    named: list[str] = []
    question = _markers(field_text(record, "question", where), media, named, where, "question")
    options = [_markers(o, media, named, where, "options") for o in options]
    order = named + [m for m in MEDIA if m in media and m not in named]
    return Entry(
        where=where, item_id=qid, question=question, options=options,
        answer=given_answer(record, "answer", options, where, raw_options), split=SPLIT,
        media={m: MediaRef(PATH_COLUMNS[m], _candidates(media[m])) for m in order},
        category=field_text(record, "subfield", where, required=False),
        task=field_text(record, "question_type_id", where, required=False))


def _markers(text: str, media: dict[str, str], named: list[str], where: Where, field_name: str) -> str:
    """``text`` with each tag replaced by its marker (module doc); ``named`` gathers the modalities in the order the
    tags first name them. A tag for a medium the row does not have is an error."""
    def marker(match: re.Match) -> str:
        modality, number = TAG_KINDS[match.group(1)], int(match.group(2))
        if modality not in media or number != 1:
            have = 1 if modality in media else 0
            raise where.error(f"tag {match.group(0)} but the row has {have} {NOUNS[modality][have != 1]}",
                              field_name)
        if modality not in named:
            named.append(modality)
        return MARKERS[modality]

    return _TAG.sub(marker, text)


def _candidates(path: str) -> tuple[str, ...]:
    """The path as written, then under a folder named after its first component (module doc)."""
    first = PurePosixPath(path).parts[0] if PurePosixPath(path).parts else ""
    nested = f"{first}/{path}" if first and first != path else None
    return (path, nested) if nested else (path,)


def convert_av_odyssey(release: str | Path, out: str | Path, *, name: str = "av-odyssey",
                       media_root: str | Path | None = None, copy: bool = False,
                       overwrite: bool = False) -> ConvertedSuite:
    """Write the suite ``out`` (one benchmark folder per set of modalities, module doc) from the AV-Odyssey release
    folder; media are read only under ``release`` and ``media_root`` (a folder holding the media folders)."""
    release = Path(release)
    sources = release_sources(release, media_root)
    check_out(out, CONVERTER, sources, overwrite)
    groups, refused = read_av_odyssey(release)
    if not groups:
        raise InputError(f"every one of the {len(refused)} items shows several media of one kind: nothing to write",
                         file=release / QUESTIONS)
    written: dict[str, Converted] = {}
    with building_folder(out, CONVERTER, overwrite=overwrite, sources=sources, prefix=f".{CONVERTER}-") as tmp:
        for key, entries in groups.items():
            part = write_release(entries, tmp / key, converter=CONVERTER, name=f"{name}-{key}", release=release,
                                 media_root=media_root, copy=copy, meta={"modalities": key.split("+")})
            written[key] = replace(part, out=Path(out) / key)  # where it ends up, not where it was built
        if refused:
            (tmp / "skipped.jsonl").write_text("".join(json.dumps(asdict(r), ensure_ascii=False) + "\n"
                                                       for r in refused), encoding="utf-8")
        index = {"name": name, "benchmarks": list(groups), "source": str(release),
                 "generator": "omnieval.datasets.omni.av_odyssey",
                 "items": {key: part.n_items for key, part in written.items()}, "refused": len(refused)}
        (tmp / SUITE_INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return ConvertedSuite(out=Path(out), benchmarks=written, refused=refused)
