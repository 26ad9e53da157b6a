"""Published numbers: the accuracies model cards, technical reports and the benchmarks' own leaderboards give on the
omni benchmarks, shipped with omnieval (``cards.csv``), and the report's "Published numbers" section that sets a
run's own accuracy beside them.

**The table.** One row per published figure: ``model`` (the name the model is published under, as its Hugging Face
repository spells it), ``variant`` (Instruct, Thinking, ...; empty for a model published in one variant),
``benchmark`` (the converter's name, as ``benchmark.json`` records it), ``version`` (the benchmark's version or split
as the source states it, ``not stated`` otherwise), ``setting`` (what the source says of how it was run: subtitles,
frame rate, decoding; who measured it where that is not the model's authors), ``number`` (accuracy in %),
``source`` (the page the number was read from, pinned to a commit where it is a repository file) and ``date`` (the
day it was read there). A row is a figure someone published; none is estimated, and a benchmark no source reports
for a model has no row.

**VoiceBench.** omnieval converts VoiceBench's two multiple-choice subsets only (``openbookqa`` and ``mmsu``, each a
split of the run), so its rows are those subsets' own figures, the subset in ``version``; an overall VoiceBench
score (averaged over the open subsets GPT rates, the refusal and instruction checks) measures something else and has
no row. VoiceBench's ``mmsu`` subset (spoken MMLU-Pro questions) is not the MMSU benchmark (``mmsu``), a table of
its own in the sources too.

**Short names.** A leaderboard that names a model by family and size ("Qwen2.5-VL", 7B) gets a row under the
checkpoint the benchmark's own evaluation script loads for that name, said in ``setting``; where nothing the source
ships fixes the checkpoint (JointAVBench's "Qwen3-Omni" 30B with no variant, Video-MME-v2's leaderboard image and
its "-Instruct"/"-Think" names) there is no row.

**Matching.** A model of a run matches the table's ``model`` named by its ``card:`` field, else the one equal to its
weights folder's name (``options.path``, or ``path`` in a sweep; a Hugging Face cache snapshot is named by its
repository), compared without regard to case. A ``card:`` naming no model of the table, or a folder name that equals
two spellings of the table's, matches nothing, and the section says why. A matched run's accuracy on the full
input (spectrum's ``accuracy`` of condition ``normal``, per prompt style and split) is shown beside every row of its
model for its benchmark (``benchmark.json``'s name): the card's number, ours with its interval, the gap (card minus
ours, in points), whether the card's number lies inside our interval, and our settings beside the card's.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.report.blocks import Cell, Note, Section, Table, fmt, text_cell

COLUMNS = ("model", "variant", "benchmark", "version", "setting", "number", "source", "date")
BENCHMARKS = ("mmau", "mmar", "videomme", "worldsense", "daily-omni", "omnibench", "av-odyssey", "omnivideobench",
              "voicebench", "mmsu", "jointavbench", "videomme-v2", "video-holmes", "mmau-pro")
"""The omni converters' names: what ``benchmark.json`` records and a row's ``benchmark`` must be."""
OURS = ("spectrum", "accuracy", "normal")
"""The metrics row compared with a card: the spectrum protocol's accuracy with every modality as given (no scope)."""
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class CardRow:
    model: str
    variant: str
    benchmark: str
    version: str
    setting: str
    number: float
    source: str
    date: str

    @property
    def key(self) -> tuple[str, ...]:
        """What makes a row one figure: two rows alike in all of these would contradict each other."""
        return (self.model.casefold(), self.variant, self.benchmark, self.version, self.setting)


def default_path():
    """The table shipped inside the package."""
    return resources.files("omnieval.report").joinpath("cards.csv")


def read_cards(path: str | Path | None = None) -> list[CardRow]:
    """The table's rows, checked: every column present, a known benchmark, a number in [0, 100], an http(s) source,
    an ISO date, no figure twice, and one spelling per model. A bad row is an ``InputError`` naming its line."""
    source = default_path() if path is None else Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the published-numbers table: {exc}", file=str(source)) from exc
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", file=str(source))
    rows: list[CardRow] = []
    seen: dict[tuple[str, ...], int] = {}
    spelling: dict[str, str] = {}
    for line, raw in enumerate(reader, start=2):
        row = _row(raw, source, line)
        if row.key in seen:
            raise InputError(f"the same figure as line {seen[row.key]}", file=str(source), item=f"line {line}")
        if spelling.setdefault(row.model.casefold(), row.model) != row.model:
            raise InputError(f"model spelled {row.model!r} here and {spelling[row.model.casefold()]!r} above",
                             file=str(source), item=f"line {line}", field="model")
        seen[row.key] = line
        rows.append(row)
    return rows


def _row(raw: dict, source, line: int) -> CardRow:
    """One checked row (``read_cards``)."""
    def bad(field: str, why: str) -> InputError:
        return InputError(why, file=str(source), item=f"line {line}", field=field)

    values = {c: (raw.get(c) or "").strip() for c in COLUMNS}
    for column in ("model", "benchmark", "version", "setting", "number", "source", "date"):
        if not values[column]:
            raise bad(column, "empty")
    if values["benchmark"] not in BENCHMARKS:
        raise bad("benchmark", f"unknown benchmark {values['benchmark']!r}; known: {', '.join(BENCHMARKS)}")
    try:
        number = float(values["number"])
    except ValueError:
        raise bad("number", f"not a number: {values['number']!r}") from None
    if not (math.isfinite(number) and 0 <= number <= 100):
        raise bad("number", f"an accuracy in % lies in [0, 100], not {number}")
    if not values["source"].startswith(("https://", "http://")):
        raise bad("source", f"not a URL: {values['source']!r}")
    if not DATE.match(values["date"]):
        raise bad("date", f"not a date YYYY-MM-DD: {values['date']!r}")
    return CardRow(**{**values, "number": number})


# --- omnieval cards -----------------------------------------------------------------------------------------------


def cards_text(rows: list[CardRow], *, model: str | None = None, benchmark: str | None = None) -> str:
    """The rows (those of ``model``, case aside, and of ``benchmark`` when given) as a plain text table."""
    chosen = [r for r in rows if (model is None or r.model.casefold() == model.casefold())
              and (benchmark is None or r.benchmark == benchmark)]
    header = ["model", "variant", "benchmark", "version", "setting", "%", "date", "source"]
    lines = [[r.model, r.variant or "-", r.benchmark, r.version, r.setting, f"{r.number:g}", r.date, r.source]
             for r in chosen]
    widths = [max(len(x) for x in column) for column in zip(header, *lines)]
    out = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [header, *lines]]
    return "\n".join(out)


def cards_command(model: str | None = None, benchmark: str | None = None) -> int:
    """``omnieval cards [--model M] [--benchmark B]``: print the table; 1 when nothing matches the filters."""
    rows = read_cards()
    if benchmark is not None and benchmark not in BENCHMARKS:
        raise InputError(f"unknown benchmark {benchmark!r}; known: {', '.join(BENCHMARKS)}", field="--benchmark")
    text = cards_text(rows, model=model, benchmark=benchmark)
    if text.count("\n") == 0:
        print(f"omnieval cards: no published number for model {model or 'any'}, benchmark {benchmark or 'any'}; "
              f"models in the table: {', '.join(dict.fromkeys(r.model for r in rows))}")
        return 1
    print(text)
    return 0


# --- matching a run's model ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """What a run's model matched: the table's model name, or None with why (shown in the section)."""

    card: str | None
    how: str


def folder_name(path: str) -> str:
    """The name a weights folder goes by: its last part, or the repository of a Hugging Face cache snapshot
    (``.../models--Qwen--Qwen2.5-Omni-7B/snapshots/<revision>`` is ``Qwen2.5-Omni-7B``)."""
    parts = [p for p in re.split(r"[/\\]", path.rstrip("/\\")) if p]
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3].split("--")[-1]
    return parts[-1] if parts else ""


def match_model(entry: dict, names: list[str]) -> Match:
    """The table model a run config's model entry (``run.json``'s ``config.models[i]``) is: its ``card:``, else
    its weights folder's name, either equal to one of ``names`` without regard to case."""
    card = entry.get("card")
    options = entry.get("options") if isinstance(entry.get("options"), dict) else {}
    path = options.get("path") or entry.get("path")
    wanted, how = (card, "card") if card else (folder_name(str(path)), "path") if path else (None, "")
    if not wanted:
        return Match(None, "no card: field and no weights folder")
    found = [n for n in dict.fromkeys(names) if n.casefold() == str(wanted).casefold()]
    if len(found) > 1:
        return Match(None, f"{how} {wanted!r} is ambiguous: the table spells it {' and '.join(found)}")
    if not found:
        return Match(None, f"{how} {wanted!r} names no model of the table" if how == "card" else "")
    return Match(found[0], f"{how} {wanted!r}")


# --- the report section ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    """One card row beside one of our cells (a model, prompt style and split of a run)."""

    run: str
    model: str
    prompt: str
    split: str
    card: CardRow
    how: str
    ours: float | None
    low: float | None
    high: float | None
    n: int | None
    recipe: str
    scored_by: str = "robust"

    @property
    def gap(self) -> float | None:
        """Card minus ours, in percentage points."""
        return None if self.ours is None else self.card.number - 100 * self.ours

    @property
    def inside(self) -> bool | None:
        """Whether the card's number lies in our interval (None without one)."""
        if self.low is None or self.high is None or not (math.isfinite(self.low) and math.isfinite(self.high)):
            return None
        return 100 * self.low <= self.card.number <= 100 * self.high


def recipe_text(config: dict, prompt: str, resolved: dict | None = None) -> str:
    """Our run's settings as the card's ``setting`` is compared with: prompt style, frames (a count or a rate with
    its bounds), frame size (longest side or pixel budget), audio cut. ``resolved``: the model's entry of
    ``run.json``'s ``recipes`` (its recipe with the benchmark's and the config's settings over it), else the
    config's ``decode:`` (runs written before recipes)."""
    decode = config.get("decode") if isinstance(config.get("decode"), dict) else {}
    if isinstance(resolved, dict) and isinstance(resolved.get("decode"), dict):
        decode = {k: v.get("value") if isinstance(v, dict) else v for k, v in resolved["decode"].items()}
    parts = [f"prompt {prompt}" if prompt else "prompt —"]
    if decode.get("fps") is not None:
        bounds = ", ".join(f"{k} {decode[k]}" for k in ("min_frames", "max_frames") if decode.get(k) is not None)
        parts.append(f"fps {decode['fps']:g}" + (f" ({bounds})" if bounds else ""))
    elif decode.get("num_frames") is not None:
        parts.append(f"{decode['num_frames']} frames")
    if decode.get("max_pixels") is not None:
        parts.append(f"max_pixels {decode['max_pixels']}")
    elif decode.get("max_side") is not None:
        parts.append(f"max_side {decode['max_side']}")
    if decode.get("max_audio_seconds") is not None:
        parts.append(f"audio up to {decode['max_audio_seconds']:g} s")
    return ", ".join(parts)


def published_rows(runs, cards: list[CardRow]) -> tuple[list[Published], list[str]]:
    """Every card row of a matched model for its run's benchmark beside that run's cells, and a line for each
    model that was named for the table but matched nothing (a ``card:`` not in it, an ambiguous spelling)."""
    import polars as pl

    names = [c.model for c in cards]
    out: list[Published] = []
    unmatched: list[str] = []
    protocol, metric, key = OURS
    for run in runs:
        config = (run.info or {}).get("config") or {}
        benchmark = (run.info or {}).get("benchmark_name")
        if not isinstance(config, dict) or benchmark is None:
            continue
        cells = run.metrics.filter((pl.col("protocol") == protocol) & (pl.col("metric") == metric)
                                   & (pl.col("key") == key))
        official = {(r["model"], r["prompt"], r["split"]): r for r in run.metrics.filter(
            (pl.col("protocol") == protocol) & (pl.col("metric") == "official_accuracy")
            & (pl.col("key") == key)).iter_rows(named=True) if r["value"] is not None}
        scorer = (run.info or {}).get("scorer")
        for entry in config.get("models") or []:
            match = match_model(entry, names)
            if match.card is None:
                if match.how and entry.get("card") or "ambiguous" in match.how:
                    unmatched.append(f"{run.label}: model {entry.get('name')}: {match.how}")
                continue
            rows = [c for c in cards if c.model == match.card and c.benchmark == benchmark]
            mine = cells.filter(pl.col("model") == entry.get("name")).sort(
                pl.col("prompt") != "zs", pl.col("prompt") != "cot", "prompt", "split")  # zs, cot, the others
            for rec in mine.iter_rows(named=True):
                recipe = recipe_text(config, rec["prompt"],
                                     ((run.info or {}).get("recipes") or {}).get(entry.get("name")))
                rec, scored_by = _comparable(rec, official, scorer)
                out += [Published(run.label, rec["model"], rec["prompt"], rec["split"], card, match.how,
                                  rec["value"], rec["ci_low"], rec["ci_high"], rec["n"], recipe, scored_by)
                        for card in rows]
    return out, unmatched


def _comparable(rec: dict, official: dict, scorer: str | None) -> tuple[dict, str]:
    """The cell a card's number is compared with: the benchmark's official rule's accuracy where the run read
    generated answers with it (the rule the card's number was counted by), else the accuracy as omnieval reads it
    (option log-probabilities, or the robust parser), said in the "scored by" column."""
    twin = official.get((rec["model"], rec["prompt"], rec["split"]))
    if twin is not None:
        return twin, f"official ({scorer})" if scorer else "official"
    return rec, "omnieval (log-probabilities)" if rec["prompt"] == "zs" else "omnieval (robust parser)"


def _pct(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def _row_cells(p: Published) -> list[Cell]:
    card = p.card
    ours = Cell(text=_pct(p.ours), ci=f"[{_pct(p.low)}, {_pct(p.high)}]" if p.inside is not None else None,
                title=f"{fmt(p.ours, 4)} [{fmt(p.low, 4)}, {fmt(p.high, 4)}], n={p.n}",
                sort=-1.0 if p.ours is None else 100 * p.ours,
                data={"run": p.run, "model": p.model, "prompt": p.prompt, "split": p.split,
                      "metric": "official_accuracy" if p.scored_by.startswith("official") else OURS[1],
                      "key": OURS[2], "protocol": OURS[0]})
    gap = Cell(text="—" if p.gap is None else f"{p.gap:+.1f}", sort=p.gap if p.gap is not None else 0.0,
               strong=p.inside is False, title="card minus ours, in percentage points")
    inside = {True: "inside", False: "outside", None: "—"}[p.inside]
    return [text_cell(p.run, header=True), text_cell(p.model), text_cell(card.model, title=p.how),
            text_cell(card.variant or "—"), text_cell(card.benchmark), text_cell(p.split), text_cell(card.version),
            text_cell(p.prompt), text_cell(p.scored_by), Cell(text=f"{card.number:g}", sort=card.number), ours, gap,
            text_cell(inside),
            text_cell(p.recipe), text_cell(card.setting), text_cell(card.date, title=card.source)]


HEADER = ["run", "model", "card model", "variant", "benchmark", "our split", "card version", "prompt", "scored by",
          "card %", "ours %", "gap (pp)", "card in our interval", "our settings", "card's setting", "read on"]


def section(runs, cards: list[CardRow] | None = None) -> Section | None:
    """The "Published numbers" section: one row per card figure of a matched model for its run's benchmark
    (``published_rows``), the sources listed under it; None when no run's model matches a card row and none was
    named for the table in vain."""
    cards = read_cards() if cards is None else cards
    rows, unmatched = published_rows(runs, cards)
    if not rows and not unmatched:
        return None
    blocks = []
    if rows:
        table = Table(caption="Published numbers beside ours: the card's accuracy, ours with its interval, the gap "
                              "(card minus ours) and the settings of each", header=HEADER,
                      rows=[_row_cells(p) for p in rows], name="published",
                      note="Ours: the accuracy with every modality as given (spectrum condition normal), in %; "
                           "gap in bold where the card's number lies outside our interval.")
        blocks.append(table)
        sources = dict.fromkeys(f"{p.card.model}: {p.card.source}" for p in rows)
        blocks.append(Note("Sources: " + "; ".join(sources)))
    blocks += [Note(f"Not matched: {line}") for line in unmatched]
    return Section("published", "Published numbers", blocks=blocks,
                   intro="A model is matched to the table (omnieval cards) by its card: field, else by its weights "
                         "folder's name; settings differ wherever the two settings columns do.")
