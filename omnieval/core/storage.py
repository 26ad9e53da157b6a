"""Where outputs and inputs live: a local path or any pyarrow filesystem (``s3://``, ``gs://``).

``filesystem`` opens a location for writing (a run's output, a decoded-media store), ``bounded`` gives a remote call a
time limit so that storage without a network is one line, not minutes of retries; ``StoredPath`` / ``stored_path``
let the statistics commands read a run wherever it was written, and ``local_folder`` checks their output folder
before the work. What a run writes there is ``omnieval.core.run_outputs``'s."""

from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from omnieval.core.schema import InputError

STORAGE_TIMEOUT_ENV = "OMNIEVAL_STORAGE_TIMEOUT_S"
STORAGE_TIMEOUT_S = 30.0


def filesystem(uri: str, field: str = "output") -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and path of a local path or a ``scheme://`` URI (s3, gs, file, ...); a URI pyarrow
    cannot open (an unknown scheme or query option, an s3 bucket whose region cannot be asked: no network) is an
    ``InputError`` naming it and the config ``field`` that gave it."""
    if "://" in uri:
        try:  # s3 asks the network for the bucket's region here, unless the URI gives ``region=``
            return bounded(lambda: pafs.FileSystem.from_uri(uri), f"opening the {field}", uri, field)
        except (pa.ArrowException, ValueError, OSError) as exc:
            raise InputError(f"cannot open this location: {_one_line(exc)}", file=uri.split("?", 1)[0],
                             field=field) from None
    return pafs.LocalFileSystem(), str(uri)


def _one_line(exc: BaseException) -> str:
    """A storage client's message on one line (AWS errors run over several)."""
    return " ".join(str(exc).split())


def env_seconds(name: str, default: float) -> float:
    """A time limit the environment may set (``OMNIEVAL_*_TIMEOUT_S``): its value in seconds, else ``default``."""
    text = os.environ.get(name)
    try:
        return float(text) if text else default
    except ValueError:
        raise InputError(f"{name} must be a number of seconds, got {text!r}") from None


def storage_timeout() -> float:
    return env_seconds(STORAGE_TIMEOUT_ENV, STORAGE_TIMEOUT_S)


def bounded(call, what: str, uri: str, field: str = "output"):
    """``call()`` on a remote filesystem, given up after ``OMNIEVAL_STORAGE_TIMEOUT_S`` seconds (default 30) with
    an ``InputError``: without a network, pyarrow's GCS client retries for many minutes, and a run would sit there
    before any model work. The call goes on in a daemon thread that the process does not wait for."""
    if "://" not in uri:
        return call()
    timeout, outcome = storage_timeout(), {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="omnieval-storage", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise InputError(f"no answer from the storage within {timeout:g} s while {what} (no network, no "
                         f"credentials it can reach, or an endpoint that does not respond; set {STORAGE_TIMEOUT_ENV} "
                         "to wait longer)", file=uri.split("?", 1)[0], field=field)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# -- reading a run from anywhere it can be written (the statistics commands) --------------------------------------

@dataclass(frozen=True, order=True)
class StoredPath:
    """A file or folder on a pyarrow filesystem (``s3://``, ``gs://``, ``file://``), with the few ``pathlib.Path``
    methods the statistics commands read runs with, so ``metrics``, ``stats`` and ``report`` read wherever a run
    can write. ``str()`` is the URI without its query (options such as ``endpoint_override`` stay out of messages
    and labels); children and parents keep the query and the filesystem."""

    scheme: str
    path: str  # inside the filesystem, no leading or trailing slash
    query: str = ""
    fs: pafs.FileSystem = field(default=None, compare=False, hash=False, repr=False)

    def __truediv__(self, name: str) -> StoredPath:
        return replace(self, path=f"{self.path}/{name}")

    def __str__(self) -> str:
        return f"{self.scheme}://{self.path}"

    @property
    def uri(self) -> str:
        """The URI that opens this location again (with its query)."""
        return f"{self}?{self.query}" if self.query else str(self)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))

    @property
    def name(self) -> str:
        return self.parts[-1]

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.path).suffix

    @property
    def parent(self) -> StoredPath:
        return replace(self, path=str(PurePosixPath(self.path).parent))

    def resolve(self) -> StoredPath:
        return self

    def is_absolute(self) -> bool:
        return True

    def _type(self) -> pafs.FileType:
        return self.fs.get_file_info(self.path).type

    def exists(self) -> bool:
        return self._type() != pafs.FileType.NotFound

    def is_file(self) -> bool:
        return self._type() == pafs.FileType.File

    def is_dir(self) -> bool:
        return self._type() == pafs.FileType.Directory

    def iterdir(self) -> list[StoredPath]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.path))
        return [replace(self, path=i.path.rstrip("/")) for i in infos]

    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.path) as f:
            return f.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)


def stored_path(where: str | Path | StoredPath) -> Path | StoredPath:
    """A local path as ``pathlib.Path`` (as before), a URI (``s3://bucket/run?endpoint_override=...``) as a
    ``StoredPath`` on the filesystem pyarrow opens for it (the same ``FileSystem.from_uri`` a run writes with)."""
    if isinstance(where, StoredPath):
        return where
    if "://" not in str(where):
        return Path(where)
    uri = str(where)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise InputError(f"cannot open this location: {_one_line(exc)}", file=uri.split("?", 1)[0]) from None
    scheme, query = uri.split("://", 1)[0], urlsplit(uri).query
    return StoredPath(scheme=scheme, path=path.rstrip("/"), query=query, fs=fs)


def readable(path: Path | StoredPath) -> Path | io.BytesIO:
    """What polars' readers take: the local path, or the remote file's bytes."""
    return path if isinstance(path, Path) else io.BytesIO(path.read_bytes())


def local_folder(out: str | Path) -> Path:
    """An output folder of the statistics commands: local only (``Path("s3://b/x")`` would quietly become a local
    folder named ``s3:``), and one that can be made: the commands call this before their (possibly long) work, so
    an ``--out`` that is a file, lies under a file or in a folder that cannot be written is one line, not a
    traceback after the work is done."""
    if "://" in str(out):
        raise InputError("outputs (--out) go to a local folder; copy them to remote storage afterwards", file=out)
    folder = Path(out)
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists() or p.is_symlink())
    if not existing.is_dir():
        where = "is a file" if existing == folder else f"lies under {existing}, which is a file"
        raise InputError(f"the output folder {where}, not a folder: choose another --out", file=out, field="--out")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == folder else f" ({existing}, where it would be made)"
        raise InputError(f"the output folder{where} cannot be written: choose another --out", file=out,
                         field="--out")
    return folder
