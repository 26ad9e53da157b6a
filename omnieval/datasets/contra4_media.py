"""Where a Contra4 example's media file is: the layouts of the release's baselines and of the source datasets.

The release holds no media: its baselines read each source from a folder of its own (``COCO_DIR``,
``AUDIOCAPS_DIR``, ``MSRVTT_DIR``, ``CLOTHO_DIR``, ``OBJAVERSE_DIR``), and each dataset is downloaded in its own
layout. The folders searched for an example of source ``S``, in order: every folder given for ``S``
(``MediaFolders.per_source``; ``--media-root S=DIR``), then ``ROOT/S`` (``MediaFolders.root``: ``--media-root DIR``,
by default the release file's folder). In each folder the names below are tried in order; the first file found wins:

===================  ==========================================================================================
source               names tried (``<id>`` the example id; ``<n>`` a numeric id zero-padded to 12 digits)
===================  ==========================================================================================
every source         ``media_map[S][<id>]``, then ``<id>`` as it is (Clotho ids are file names, with spaces)
``pointllm``,        ``<id>_8192.npz`` (the baselines' ``OBJAVERSE_DIR``), ``<id>/<id>_8192.npz`` (ULIP's
``objaverse*``       ``objaverse_pc_parallel`` as published; xyz under ``arr_0``), ``<id>_8192.npy`` (PointLLM's
                     xyz + rgb files)
``coco*``            ``<n>.jpg`` (val2017, as the baselines read ``COCO_DIR``), ``COCO_val2014_<n>.jpg`` and
                     ``val2014/COCO_val2014_<n>.jpg`` (val2014, as ``data2path.json`` lists them),
                     ``val2017/<n>.jpg``
``msrvtt*``          ``<id>.mp4``
``audiocaps*``       ``<id>.wav`` (the baselines), then ``<youtube id>_<start>.flac`` / ``.wav`` from the example's
                     ``url`` and ``meta.start_time`` (the layout of ``aac-datasets``, which ``data2path.json`` lists)
``clotho*``          ``evaluation/<id>``, ``validation/<id>``, ``development/<id>`` (Clotho's audio folders)
every source         ``<id>`` with each suffix of its modality (``.jpg``.., ``.wav``.., ``.mp4``..,
                     ``.npy`` / ``.npz`` / ``.ply``), and ``<n>`` with them for numeric ids
===================  ==========================================================================================

``media_map`` is ``{source: {id: file}}``, or the shape of the release's ``data/data2path.json``, ``{table:
{"directory": ..., "key2path": {id: file}}}``: ``directory`` (a folder of the authors' machine) is ignored and each
file is looked up in the source's folders. A table named differently from the source serves it when both are of one
family (``objaverse_val`` for ``pointllm``, ``audiocaps_val`` for ``audiocaps``, ``clothov1_instruct_val`` and
``clothov2_instruct_val`` for ``clotho``).

A name is read only when it resolves (links followed) inside the folder it was looked up in: ids such as ``../x``
and links out of the folder are never followed, and nothing outside the release folder and the folders given is
read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omnieval.datasets.release_media import is_inside

SUFFIXES = {
    "image": (".jpg", ".jpeg", ".png", ".webp", ".bmp"),
    "audio": (".wav", ".flac", ".mp3", ".m4a", ".ogg"),
    "video": (".mp4", ".webm", ".mkv", ".avi", ".mov"),
    "pointcloud": (".npy", ".npz", ".ply"),
}
FAMILIES: tuple[tuple[str, str], ...] = (("pointllm", "objaverse"), ("objaverse", "objaverse"), ("coco", "coco"),
                                         ("msrvtt", "msrvtt"), ("audiocaps", "audiocaps"), ("clotho", "clotho"))
"""Source name prefix -> the family whose file names it uses."""
POINTS = 8192
CLOTHO_FOLDERS = ("evaluation", "validation", "development")
_YOUTUBE = re.compile(r"(?:[?&]v=|youtu\.be/|/embed/)([A-Za-z0-9_-]{11})")


def family(source: str) -> str | None:
    low = source.lower()
    return next((fam for prefix, fam in FAMILIES if low.startswith(prefix)), None)


@dataclass(frozen=True)
class Wanted:
    """What is looked for: one example's source, id and modality, and what names an AudioCaps file."""

    source: str
    id: str
    modality: str
    url: str | None = None
    start: str | None = None  # meta.start_time as the file name writes it: "60", "30.5"


def youtube_id(url: str | None) -> str | None:
    match = _YOUTUBE.search(url or "")
    return match.group(1) if match else None


def candidate_names(w: Wanted) -> list[str]:
    """The names tried in each folder of the example's source, in order (module doc), without the media map."""
    i, fam = w.id, family(w.source)
    padded = f"{int(i):012d}" if i.isdigit() else None
    names = [i]
    if fam == "objaverse":
        names += [f"{i}_{POINTS}.npz", f"{i}/{i}_{POINTS}.npz", f"{i}_{POINTS}.npy"]
    elif fam == "coco" and padded:
        names += [f"{padded}.jpg", f"COCO_val2014_{padded}.jpg", f"val2014/COCO_val2014_{padded}.jpg",
                  f"val2017/{padded}.jpg"]
    elif fam == "msrvtt":
        names += [f"{i}.mp4"]
    elif fam == "audiocaps":
        names += [f"{i}.wav"]
        video = youtube_id(w.url)
        if video and w.start is not None:
            names += [f"{video}_{w.start}.flac", f"{video}_{w.start}.wav"]
    elif fam == "clotho":
        names += [f"{sub}/{i}" for sub in CLOTHO_FOLDERS]
    names += [f"{i}{s}" for s in SUFFIXES[w.modality]]
    if padded:
        names += [f"{padded}{s}" for s in SUFFIXES[w.modality]]
    return list(dict.fromkeys(names))


@dataclass
class MediaFolders:
    """Where media are looked for: ``root`` holds one folder per source; ``per_source`` folders hold one source's
    files themselves; ``media_map`` names files by id (module doc)."""

    root: Path
    per_source: dict[str, list[Path]] = field(default_factory=dict)
    media_map: Mapping | None = None

    @classmethod
    def build(cls, root: str | Path, per_source: Mapping[str, str | Path | Sequence[str | Path]] | None = None,
              media_map: Mapping | None = None) -> MediaFolders:
        folders = {}
        for source, dirs in (per_source or {}).items():
            dirs = [dirs] if isinstance(dirs, str | Path) else list(dirs)
            folders[str(source)] = [Path(d) for d in dirs]
        return cls(Path(root), folders, media_map)

    def folders(self, source: str) -> list[tuple[Path, Path]]:
        """The folders searched for ``source``, in order, each with the folder it must lie in (``ROOT/S`` in
        ``ROOT``: a source named ``../x``, or a link out of the root, reads nothing)."""
        return [*((d, d) for d in self.per_source.get(source, [])), (self.root / source, self.root)]

    def mapped(self, w: Wanted) -> list[str]:
        """The media map's files for this example: its source's table, then same-family tables (module doc)."""
        if not self.media_map:
            return []
        tables = [self.media_map[w.source]] if w.source in self.media_map else []
        fam = family(w.source)
        if fam is not None:
            tables += [t for name, t in self.media_map.items() if name != w.source and family(str(name)) == fam]
        out = []
        for table in tables:
            if isinstance(table, Mapping) and isinstance(table.get("key2path"), Mapping):
                table = table["key2path"]
            name = table.get(w.id) if isinstance(table, Mapping) else None
            if isinstance(name, str) and name.strip():
                out.append(name)
        return out


@dataclass(frozen=True)
class Found:
    """A media file and where it was found: ``folder`` and the ``name`` relative to it."""

    path: Path
    folder: Path
    name: str


@dataclass
class Search:
    """The outcome of one search: the file, or what was tried (for the error)."""

    found: Found | None
    folders: list[Path]
    names: list[str]
    outside: Path | None = None  # a candidate that exists but resolves outside its folder: never read

    def tried(self, limit: int = 8) -> str:
        names = ", ".join(repr(n) for n in self.names[:limit])
        more = f" and {len(self.names) - limit} more" if len(self.names) > limit else ""
        where = " then ".join(str(f) for f in self.folders)
        text = f"looked in {where} for {names}{more}"
        if self.outside is not None:
            text += f"; {self.outside} resolves outside those folders and was not read"
        return text


def find_media(w: Wanted, media: MediaFolders) -> Search:
    """The first file of the documented order (module doc) for one example."""
    mapped = media.mapped(w)
    names = [*mapped, *candidate_names(w)]
    pairs = media.folders(w.source)
    folders = [f for f, _ in pairs]
    outside = None
    for raw in mapped:
        if Path(raw).is_absolute():  # a map may give absolute paths: inside a folder given, or not at all
            path = Path(raw)
            home = next((f for f, bound in pairs if is_inside(path, [f]) and is_inside(f, [bound])), None)
            if home is not None and path.is_file():
                return Search(Found(path.resolve(), home, path.resolve().relative_to(home.resolve()).as_posix()),
                              folders, names)
            outside = outside or (path if path.exists() else None)
    for folder, bound in pairs:
        for name in names:
            if Path(name).is_absolute():
                continue
            candidate = folder / name
            try:
                exists = candidate.is_file()
            except OSError:  # a name too long for the file system
                continue
            if not exists:
                continue
            if not (is_inside(candidate, [folder]) and is_inside(folder, [bound])):
                outside = outside or candidate
                continue
            full = candidate.resolve()
            return Search(Found(full, folder, full.relative_to(folder.resolve()).as_posix()), folders, names)
    return Search(None, folders, names, outside)
