"""``omnieval datasets check DIR``: validate a benchmark as a run would (items, media, expansion) and show what one
item becomes: each condition's instance with the file shown for every medium and, for a shuffle, the item it came
from. What a run would refuse is refused here with the same one-line error; what it would silently do (which clip an
item hears in a shuffled condition) is printed, so it can be checked before any model work."""

from __future__ import annotations

from pathlib import Path


def check_benchmark(folder: str | Path, *, item: str | None = None, seed: int = 0, media_check: str = "probe",
                    protocol_options: dict | None = None) -> str:
    """The report ``datasets check`` prints; ``InputError`` for anything a run would refuse."""
    from pydantic import ValidationError

    from omnieval.core.schema import InputError
    from omnieval.datasets.benchmark import check_media, load_benchmark
    from omnieval.protocols import get_protocol

    bench = load_benchmark(folder)
    protocol = get_protocol(bench.protocol)
    try:
        options = protocol.options.model_validate(protocol_options or {})
    except ValidationError as exc:  # the first error, on one line, naming the option as a run config would
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"{first['msg']} (got {first.get('input')!r})",
                         field=f"protocol_options.{where}" if where else "protocol_options") from None
    n_media = check_media(bench, mode=media_check)
    instances = protocol.expand(bench.items, bench, seed, options)
    ids = sorted({inst.item_id for inst in instances})
    chosen = item if item is not None else (ids[0] if ids else None)
    if chosen is not None and chosen not in ids:
        raise InputError(f"no item {chosen!r} in this benchmark (first ids: {', '.join(ids[:5])})", file=bench.root,
                         field="--item")
    splits = sorted({inst.split for inst in instances})
    lines = [f"{bench.root}: {bench.protocol} benchmark {bench.name!r}, {len(bench.items)} items, {len(instances)} "
             f"instances (seed {seed}), splits {', '.join(splits)}; {n_media} media files checked ({media_check})",
             "", f"item {chosen!r}: the instances a run asks (the media each shows; <- the item a shuffle took "
                 "it from)"]
    for inst in (i for i in instances if i.item_id == chosen):
        shown = [f"{seg.modality} {seg.path}" + (f" <- {inst.donors[seg.modality]}" if inst.donors and
                                                   seg.modality in inst.donors else "")
                 for seg in inst.media_segments()]
        if inst.donors and "text" in inst.donors:
            shown.append(f"text <- {inst.donors['text']}")
        lines.append(f"  {inst.condition:<12} target {inst.target}  " + "; ".join(shown))
    return "\n".join(lines)
