"""Decode once: a run-scoped Ray actor that maps a media content hash to the ObjectRef of its decoded form.

The first request for a key launches one decode task (a CPU task in the cluster); every later request, from any
worker on any node, gets the same ObjectRefs. The actor owns the refs, so decoded media live in the object store for
the whole run and are shared by every instance (condition, direction, permutation) that uses them; rows of the
Ray Data stream carry only the keys, never the arrays, and an engine reads the arrays zero-copy from the object
store. Each decode returns two objects: a small status (``""`` or the error message) that the media stage waits on,
and the payload (``DecodedMedia``, or ``None`` on failure) that only the engine fetches. The decode task never
raises: a file that fails to decode marks only the instances that use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import ray


@dataclass(frozen=True)
class MediaSpec:
    """What to decode: ``key`` is the content hash of the file plus the decode parameters."""

    key: str
    path: str
    modality: str
    params: tuple[tuple[str, object], ...] = ()


@ray.remote(num_cpus=1, max_retries=2, num_returns=2)
def decode_task(spec: MediaSpec):
    from omnieval.media.decode import decode_media

    try:
        return "", decode_media(spec.path, spec.modality, **dict(spec.params))
    except Exception as exc:  # recorded per instance, never fatal for the run
        return f"{spec.path}: {type(exc).__name__}: {exc}", None


@ray.remote(num_cpus=0)
class MediaCache:
    """Named per run; ``lookup`` returns ``[status_ref, payload_ref]`` per spec (refs nested in a list are not
    resolved by Ray on the way out)."""

    def __init__(self):
        self._refs: dict[str, list[ray.ObjectRef]] = {}
        self._decodes: dict[str, int] = {}

    def lookup(self, specs: list[MediaSpec]) -> list[list[ray.ObjectRef]]:
        out = []
        for spec in specs:
            if spec.key not in self._refs:
                self._refs[spec.key] = list(decode_task.remote(spec))
                self._decodes[spec.key] = self._decodes.get(spec.key, 0) + 1
            out.append(self._refs[spec.key])
        return out

    def decode_counts(self) -> dict[str, int]:
        """key -> number of decode tasks launched for it (1 for every key in a healthy run)."""
        return dict(self._decodes)
