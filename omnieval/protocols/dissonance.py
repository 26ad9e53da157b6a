"""Protocol ``dissonance`` (OMD-Bench; docs/reference.md, Protocol `dissonance`).

Every item is expanded into the 8 corruption vectors ``C000 .. C111`` (digits: video, audio, text; 1 = replaced by
the asset of another anchor of the same split). Options are the item's four answers plus the abstention option,
shuffled per instance and labelled A-E. The target follows the evidence rule: each modality supports the answer of
the anchor it shows (if that answer is an option); the option with strictly more support than every other wins,
else the abstention option. A human ``target_override`` wins over the rule.

All randomness (replacement anchors, option order) is keyed on ``(seed, item_id, condition, purpose)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from omnieval.core.keyed import keyed_rng
from omnieval.core.schema import LABELS, Anchor, DissonanceItem, InputError, Instance, Segment, option_key
from omnieval.protocols.spec import ProtocolSpec

NAME = "dissonance"
MODALITIES: tuple[str, ...] = ("video", "audio", "text")
CONDITIONS: tuple[str, ...] = tuple("C" + "".join(map(str, bits)) for bits in itertools.product((0, 1), repeat=3))
Item = DissonanceItem


def condition_vector(condition: str) -> tuple[int, int, int]:
    """``'C101'`` -> ``(1, 0, 1)`` (video, audio, text; 1 = corrupted)."""
    if condition not in CONDITIONS:
        raise ValueError(f"unknown dissonance condition {condition!r}")
    return tuple(int(c) for c in condition[1:])  # type: ignore[return-value]


def level(condition: str) -> int:
    """Corruption level k = number of replaced modalities."""
    return sum(condition_vector(condition))


def instance_id(item_id: str, condition: str, seed: int) -> str:
    return f"{item_id}|{condition}|s{seed}"


def validate(item: DissonanceItem, library: Mapping[str, Anchor], *, file: str | Path | None = None) -> None:
    """Cross-field checks a pydantic model cannot do alone; errors name the file, item and field."""
    where = {"file": file, "item": item.item_id}
    if item.anchor not in library:
        raise InputError(f"anchor {item.anchor!r} is not in the anchor library of split {item.split!r}",
                         field="anchor", **where)
    others = [a for a in library if a != item.anchor]
    if not others:
        raise InputError(f"split {item.split!r} has a single anchor: nothing to replace a modality with",
                         field="anchor", **where)
    if item.anchor not in item.answer_key:
        raise InputError(f"answer_key has no answer for the item's own anchor {item.anchor!r}",
                         field="answer_key", **where)
    own = item.answer_key[item.anchor]
    if own not in item.options:
        raise InputError(f"the answer of the item's anchor ({own!r}) is not among the options",
                         field="options", **where)
    if option_key(item.abstain_text) in {option_key(o) for o in item.options}:
        raise InputError(f"the abstention text {item.abstain_text!r} reads as one of the answer options (case, spaces "
                         "and punctuation aside)", field="abstain_text", **where)
    if item.target_override:
        allowed = set(item.options) | {item.abstain_text}
        for cond, text in item.target_override.items():
            if cond not in CONDITIONS:
                raise InputError(f"unknown condition {cond!r}", field=f"target_override.{cond}", **where)
            if text not in allowed:
                raise InputError(f"override {text!r} is neither an option nor the abstention text",
                                 field=f"target_override.{cond}", **where)


def evidence_target(evidence: Mapping[str, str | None], abstain_label: str) -> str:
    """The evidence rule: the label with strictly more support than every other, else the abstention label."""
    support: dict[str, int] = {}
    for label in evidence.values():
        if label is not None:
            support[label] = support.get(label, 0) + 1
    if not support:
        return abstain_label
    ranked = sorted(support.values(), reverse=True)
    if len(ranked) > 1 and ranked[0] == ranked[1]:
        return abstain_label
    return max(support, key=support.__getitem__)


def expand(item: DissonanceItem, library: Mapping[str, Anchor], seed: int) -> list[Instance]:
    """The 8 instances of one item. ``library`` is the anchor library of the item's split."""
    others = sorted(a for a in library if a != item.anchor)
    instances = []
    for condition in CONDITIONS:
        vector = condition_vector(condition)
        shown: dict[str, str] = {}
        for modality, corrupted in zip(MODALITIES, vector, strict=True):
            if corrupted:
                rng = keyed_rng(seed, item.item_id, condition, "replace", modality)
                shown[modality] = others[int(rng.integers(len(others)))]
            else:
                shown[modality] = item.anchor
        texts = [*item.options, item.abstain_text]
        order = keyed_rng(seed, item.item_id, condition, "options").permutation(len(texts))
        option_texts = [texts[i] for i in order]
        labels = list(LABELS[: len(option_texts)])
        label_of = dict(zip(option_texts, labels, strict=True))
        abstain_label = label_of[item.abstain_text]
        evidence = {m: label_of.get(item.answer_key.get(shown[m], ""), None) for m in MODALITIES}
        if item.target_override and condition in item.target_override:
            target = label_of[item.target_override[condition]]
        else:
            target = evidence_target(evidence, abstain_label)
        video = item.media.video if shown["video"] == item.anchor else library[shown["video"]].media.video
        audio = item.media.audio if shown["audio"] == item.anchor else library[shown["audio"]].media.audio
        passage = item.media.text if shown["text"] == item.anchor else library[shown["text"]].media.text
        instances.append(Instance(
            instance_id=instance_id(item.item_id, condition, seed),
            item_id=item.item_id, protocol=NAME, benchmark=item.benchmark, split=item.split,
            condition=condition, question=item.question,
            segments=[Segment(kind="media", modality="video", path=video),
                      Segment(kind="media", modality="audio", path=audio),
                      Segment(kind="text", text=f"Text: {passage}")],
            option_labels=labels, option_texts=option_texts, target=target, abstain_label=abstain_label,
            task=item.task, category=item.category, simulation_hints=evidence,
            protocol_fields=SPEC.fields(k=sum(vector), anchor=item.anchor),
        ))
    return instances


def build_library(anchors: Iterable[Anchor]) -> dict[str, dict[str, Anchor]]:
    """split -> anchor name -> Anchor."""
    out: dict[str, dict[str, Anchor]] = {}
    for a in anchors:
        out.setdefault(a.split, {})[a.anchor] = a
    return out


def expand_items(items: Sequence[DissonanceItem], anchors: Sequence[Anchor], seed: int, *,
                 file: str | Path | None = None) -> list[Instance]:
    """Validate every item against its split's library (fail loud, before any model work), then expand."""
    libraries = build_library(anchors)
    out: list[Instance] = []
    for item in items:
        library = libraries.get(item.split, {})
        validate(item, library, file=file)
    for item in items:
        out.extend(expand(item, libraries[item.split], seed))
    return out


class InstanceFields(BaseModel):
    """What a dissonance instance carries of its own (``Instance.protocol_fields``): its corruption level ``k`` and
    the anchor of its item, both prediction columns the metrics group by."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int
    anchor: str


class Options(BaseModel):
    """The dissonance protocol has no knobs yet (the corruption vectors are the eight of docs/reference.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def media_refs(item: DissonanceItem) -> list[tuple[str, str, str]]:
    return [(item.media.video, "video", "media.video"), (item.media.audio, "audio", "media.audio")]


TEXT_FILE_SUFFIXES = (".txt", ".md", ".srt", ".vtt", ".json")


def check_text_is_a_passage(text: str, root: str | Path | None, *, field: str, **where) -> None:
    """``media.text`` is the passage the model reads (``Text: <passage>``), not a path: a value naming a file of the
    benchmark, or a single word ending in a text-file suffix, would be shown to the model verbatim."""
    value = text.strip()
    named_file = False
    if root is not None and value and "\n" not in value and len(value) < 256:
        try:
            named_file = (Path(root) / value).is_file()
        except OSError:  # a passage no file system takes as a name
            named_file = False
    if named_file or (" " not in value and value.lower().endswith(TEXT_FILE_SUFFIXES)):
        raise InputError(f"media.text {value!r} looks like a file path, but it is the passage the model reads, shown "
                         "as written: put the file's text itself in media.text", field=field, **where)


def validate_items(items: Sequence[DissonanceItem], bench, file: str | Path | None = None) -> None:
    """Every item against its split's anchor library, and every text a passage, not a file path."""
    libraries = build_library(bench.anchors)
    root = getattr(bench, "root", None)
    for item in items:
        validate(item, libraries.get(item.split, {}), file=file)
        check_text_is_a_passage(item.media.text, root, field="media.text", file=file, item=item.item_id)
    anchors_file = Path(root) / "anchors.jsonl" if root is not None else None
    for anchor in bench.anchors:
        check_text_is_a_passage(anchor.media.text, root, field="media.text", file=anchors_file, item=anchor.anchor)
    check_corruptions_differ(items, libraries, root, file=file)


def check_corruptions_differ(items: Sequence[DissonanceItem], libraries: Mapping[str, Mapping[str, Anchor]],
                             root: str | Path | None, *, file: str | Path | None = None) -> None:
    """A corrupted modality shows another anchor's: that must never be the item's own content. An item whose video,
    audio or text has the same content (file bytes, ``shared_media``; the passage itself) as another anchor's of its
    split would be shown its own media in a condition that claims to have replaced it."""
    from omnieval.protocols.shared_media import content_keys

    refs = [ref for lib in libraries.values() for a in lib.values() for ref in (a.media.video, a.media.audio)]
    refs += [ref for it in items for ref in (it.media.video, it.media.audio)]
    keys = content_keys(refs, root)
    for item in items:
        own = {"video": keys[item.media.video], "audio": keys[item.media.audio], "text": item.media.text.strip()}
        for name, anchor in libraries.get(item.split, {}).items():
            if name == item.anchor:
                continue
            other = {"video": keys[anchor.media.video], "audio": keys[anchor.media.audio],
                     "text": anchor.media.text.strip()}
            same = [m for m in MODALITIES if own[m] == other[m]]
            if same:
                raise InputError(f"the item's {same[0]} has the same content as anchor {name!r}'s "
                                 f"({getattr(anchor.media, same[0]) if same[0] != 'text' else 'the same passage'}): "
                                 f"a condition that replaces its {same[0]} with that anchor's would show its own; "
                                 "give every anchor of a split media of its own", file=file, item=item.item_id,
                                 field=f"media.{same[0]}")


def expand_all(items: Sequence[DissonanceItem], bench, seed: int, options: Options | None = None) -> list[Instance]:
    """The protocol contract's entry: ``expand_items`` over the benchmark's anchor library."""
    return expand_items(items, bench.anchors, seed, file=bench.items_file or None)


# === metrics (cell means -> metric values) ===
# The metrics of docs/reference.md, Protocol `dissonance`, as functions of cell means. Every array holds one value per
# bootstrap row (row 0 = the data, rows 1..R = resamples), so one resampling pass serves every metric and each CI is the
# metric recomputed on the resamples' cell means. ``metrics_spec()`` tells ``stats.metrics`` which cells to build and
# how to read them.

import numpy as np  # noqa: E402

LEVELS: tuple[int, ...] = (0, 1, 2, 3)
ONLY_CORRUPTED: dict[str, str] = {"video": "C100", "audio": "C010", "text": "C001"}


def clean_set_condition(mask: int) -> str:
    """The condition in which exactly the modalities in bitmask ``mask`` are clean (bit 0 video, 1 audio, 2 text)."""
    return "C" + "".join("0" if mask >> m & 1 else "1" for m in range(len(MODALITIES)))


def accuracy_k(acc: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Mean of the condition accuracies at each level k (k=1, 2 average three conditions each), not pooled."""
    return {k: np.mean([acc[c] for c in CONDITIONS if level(c) == k], axis=0) for k in LEVELS}


def ace(abstention: Mapping[int, np.ndarray], human: Mapping[int, np.ndarray]) -> np.ndarray:
    """Abstention calibration error: ``(1/4) sum_k |abstention_k - human_abstention_k|``."""
    return np.mean([np.abs(abstention[k] - human[k]) for k in LEVELS], axis=0)


def shapley(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Exact Shapley value per modality with v(S) = accuracy of the condition where exactly S is clean."""
    from omnieval.kernels.shapley import shapley_values

    table = np.column_stack([acc[clean_set_condition(mask)] for mask in range(2 ** len(MODALITIES))])
    phi = shapley_values(np.ascontiguousarray(table, dtype=np.float64))
    return {m: phi[:, i] for i, m in enumerate(MODALITIES)}


def reliance(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``(acc[C000] - acc[C_m]) / acc[C000]`` with C_m = only modality m corrupted (NaN where acc[C000] = 0)."""
    base = acc["C000"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return {m: np.where(base > 0, (base - acc[c]) / np.where(base > 0, base, 1), np.nan)
                for m, c in ONLY_CORRUPTED.items()}


def metric_rows(cells):
    """All metrics of docs/reference.md, Protocol `dissonance`, of one model x prompt x split from its resampled cells
    (``omnieval.core.metric_types.Cells``).

    Yields ``MetricRow`` records (values over rows, the support, ``n`` and items, from the cells each metric
    reads; the key as its parts: ``leaf`` a condition, level, modality or anchor, ``method`` a confidence method);
    metrics whose cells are missing in this unit are left out.
    """
    from omnieval.core.metric_types import MetricRow, support_of

    def row(metric, values, support, leaf="", method=""):
        label = f"{leaf}{cells.method_suffix(method)}" if method else leaf
        return MetricRow(metric, values, support, label, {"leaf": leaf, "method": method})

    acc = {c: cells.mean("acc", c) for c in CONDITIONS if cells.has("acc", c)}
    n_acc = {c: cells.support("acc", c) for c in acc}
    for c in acc:
        yield row("accuracy", acc[c], n_acc[c], c)
    complete = len(acc) == len(CONDITIONS)
    if complete:
        for k, values in accuracy_k(acc).items():
            yield row("accuracy_k", values, sum(n_acc[c] for c in CONDITIONS if level(c) == k), str(k))
    abst = {k: cells.mean("abst", str(k)) for k in LEVELS if cells.has("abst", str(k))}
    human = {k: cells.mean("human", str(k)) for k in LEVELS if cells.has("human", str(k))}
    n_abst = {k: cells.support("abst", str(k)) for k in abst}
    n_human = {k: cells.support("human", str(k)) for k in human}
    for k in abst:
        yield row("abstention_k", abst[k], n_abst[k], str(k))
    for k in human:
        yield row("human_abstention_k", human[k], n_human[k], str(k))
    if len(abst) == len(LEVELS) and len(human) == len(LEVELS):
        yield row("ace", ace(abst, human), support_of(*n_abst.values(), *n_human.values(),
                                                      n=sum(s.n for s in n_abst.values())))
    for method, k in cells.keys("conf"):
        yield row("confidence_k", cells.mean("conf", method, k), cells.support("conf", method, k), k, method)
    for method in sorted({key[1] for key in cells.stats if key[0] == "ece"}):
        for name in ("ece", "rc_auc"):
            values, support = cells.stat(name, method)
            yield row(name, values, support, method=method)
    if complete:
        n_all = sum(n_acc.values())
        for m, values in shapley(acc).items():
            yield row("shapley", values, n_all, m)
        for m, values in reliance(acc).items():
            yield row("reliance", values, n_acc["C000"] + n_acc[ONLY_CORRUPTED[m]], m)
    for (anchor,) in cells.keys("anchor"):
        yield row("anchor_accuracy", cells.mean("anchor", anchor), cells.support("anchor", anchor), anchor)
    if cells.has("invalid"):
        yield row("invalid_rate", cells.mean("invalid"), cells.support("invalid"))


def derive_columns(frame):
    """``k`` from the condition name where the input has none (other tools' files), and the k=0 validity flag."""
    import polars as pl

    from_condition = pl.col("condition").replace_strict({c: level(c) for c in CONDITIONS}, default=None,
                                                        return_dtype=pl.Int64)
    k = pl.coalesce(pl.col("k").cast(pl.Int64), from_condition) if "k" in frame.columns else from_condition
    frame = frame.with_columns(k=k)
    return frame.with_columns(valid_k0=pl.col("valid") & (pl.col("k") == 0))


CONDITION_NOTE = ("C<video><audio><text>: 1 = that modality shows another anchor (corrupted), 0 = clean; "
                  "k = number of corrupted modalities")


def _shapley_rows(table):
    import polars as pl

    return table.filter(pl.col("metric") == "shapley")


def _level_rows(table):
    import polars as pl

    return table.filter(pl.col("metric").is_in(["accuracy_k", "abstention_k", "ace"]))


def metrics_spec():
    """The cells and metric function of this protocol for ``omnieval.stats.metrics`` (one bootstrap pass for all),
    with the metrics its paired differences compare, its headline tables and its significance tests: Wilcoxon
    between the drops of two single-modality corruptions over anchors, Friedman over models per level k, McNemar
    between models on the clean items."""
    from omnieval.core.metric_types import DIFFERENCE, UNIT, CellFamily, ProtocolMetrics
    from omnieval.core.protocol_views import ConditionTests, HeadlineTable, PairedHeadline

    return ProtocolMetrics(
        name=NAME,
        families=(
            CellFamily("acc", "correct", "valid", ("condition",)),
            CellFamily("abst", "abstained", "valid", ("k",)),
            CellFamily("human", "human_abstain", "answered", ("k",)),
            CellFamily("conf", "confidence", "has_conf", ("conf_method", "k")),
            CellFamily("anchor", "correct", "valid_k0", ("anchor",)),
            CellFamily("invalid", "invalid", "answered"),
        ),
        metrics=metric_rows,
        derive=derive_columns,
        conditions=CONDITIONS,
        calibration=True,
        paired=PairedHeadline(every_key=("accuracy", "accuracy_k", "shapley", "reliance", "ece"), overall=("ace",)),
        cluster="anchor",  # an anchor's questions share its video and audio (docs/reference.md, Resampling unit)
        headlines=(
            HeadlineTable("Shapley modality attribution of accuracy", _shapley_rows, columns="key"),
            HeadlineTable(f"Accuracy and abstention by corruption level k, ACE ({CONDITION_NOTE})", _level_rows),
        ),
        tests=ConditionTests(baseline="C000", drops=tuple(ONLY_CORRUPTED.items()),
                             drop_pairs=(("text", "video"), ("text", "audio"), ("video", "audio")),
                             block="anchor", level="k"),
        bounds={**dict.fromkeys(("accuracy", "accuracy_k", "abstention_k", "human_abstention_k", "confidence_k",
                                 "anchor_accuracy", "ace"), UNIT),
                "shapley": DIFFERENCE, "reliance": (-np.inf, 1.0)},
    )


# === the protocol, as the registry knows it (omnieval.protocols.spec) ===

SPEC = ProtocolSpec(
    name=NAME, item=DissonanceItem, options=Options, media_refs=media_refs, validate_items=validate_items,
    expand_all=expand_all, metrics=metrics_spec, instance_fields=InstanceFields,
    item_local=True,  # an item's instances depend on it and the benchmark's anchor library, never on other items
    paired_matrix=(("accuracy_k", None), ("ace", ""), ("shapley", None)),
    report_section="omnieval.report.dissonance:section",
    value_ranges={"reliance": "reliance, the share of the clean accuracy lost when one modality is corrupted, is at "
                              "most 1 and has no lower bound (negative: the model did better with that modality "
                              "corrupted)"},
    synthetic_benchmark="omnieval.datasets.synthetic:synthetic_benchmark",
)
