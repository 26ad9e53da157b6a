"""VoiceBench (spoken instructions to voice assistants) -> a ``spectrum`` benchmark of its multiple-choice subsets
and of the open subsets omnieval can score: the spoken question as the audio, its text as the audio's text
stand-in.

The release folder as the Hugging Face dataset ``hlt-lab/voicebench`` lays it out (its card; the loader of
github.com/MatthewCYM/VoiceBench, ``main.py``, reads it with ``load_dataset("hlt-lab/voicebench", <subset>,
split=<split>)``): one folder per subset, ``<subset>/<split>-NNNNN-of-NNNNN.parquet``, each row a spoken prompt with
its recording embedded in the ``audio`` cell, the prompt's text in ``prompt`` and, in the multiple-choice subsets,
the correct letter in ``reference``. lmms-eval's copy (``lmms-lab/voicebench``) has the same layout.

**Multiple-choice subsets** (``MCQ_SUBSETS``): ``openbookqa`` (split ``test``) and ``mmsu`` (one split per MMLU-Pro
domain: ``law``, ``physics``, ...), the two the release scores with its ``MCQEvaluator`` (``src/evaluator/mcq.py``,
``omnieval.scoring.voicebench``). Their options exist only inside the prompt: the question, then each option after
its letter (``A.``, ``A)`` or ``(A)``, on its own line or inline). The options are the texts between the last run
of letters ``A``, ``B``, ``C``, ... in order, the question the text before it; a prompt with fewer than two such
options is skipped and listed. ``reference`` gives the answer's letter. The release's model hears only the audio; a
``spectrum`` item shows its options as text as well, under a fixed ``question`` (``QUESTION``), and the prompt's
whole text is the audio's text stand-in (``audio_as_text``: the release's ``--modality text``).

**Open subsets** (``OPEN_SUBSETS``: ``alpacaeval``, ``alpacaeval_full``, ``commoneval``, ``wildvoice``, ``sd-qa``,
``ifeval``, ``advbench``, ``bbh``, ``mtbench``, ``alpacaeval_speaker``) are scored by the release with a GPT rating
(1-5), reference answers, answer phrases, instruction checks or a refusal list (``omnieval.scoring.voicebench_open``:
``OPEN_RULES``). Nine become open items (``spectrum.Item`` without options, asked only with ``modes: [open]``;
``voicebench_open.CONVERTED``): ``sd-qa`` (one split per speaker region: ``aus``, ``usa``, ...) and ``bbh`` with the
row's ``reference`` as the ground truth the run's judges compare the answer with, ``bbh``'s answers also scored by the
release's answer phrases (``omnieval.scoring.voicebench_bbh``: ``open_official_accuracy`` is the release's score; a
``reference`` other than ``yes``, ``no``, ``(A)``, ``(B)`` is an error naming the row); ``advbench`` with none, its
answers scored by the release's refusal list (the ``voicebench`` scorer's ``score_open``: the metric
``open_official_accuracy`` is its refusal rate); ``ifeval`` with none, its answers scored by IFEval's instruction
checks (``omnieval.scoring.ifeval``; ``open_official_accuracy`` is the release's score, the mean of IFEval's four
shares), each row's ``instruction_id_list`` and ``kwargs`` (one object of arguments per instruction, every argument
name of the set present, ``None`` where unused) kept as the breakdown ``ifeval_instructions`` (JSON, empty arguments
dropped; a row naming an id the checks do not know is skipped and listed); ``alpacaeval``, ``alpacaeval_full``,
``alpacaeval_speaker``, ``commoneval`` and ``wildvoice`` with none, rated 1-5 by the run's judges (``rated``;
``open_rating``). ``bbh``'s rows name their task in ``id`` (the release's ``BBHEvaluator`` tells
``sports_understanding``, ``hyperbaton``, ``navigate`` and ``web_of_lies`` apart by a substring of it): kept as the
breakdown ``bbh_task``, a row naming none of them skipped and listed (the release stops on it). ``mtbench`` is not
converted (the release scores it by no rule, ``voicebench_open.MTBENCH_NOTE``): the conversion names the open subsets
found, one note per rule (``benchmark.json``: ``open_subsets_converted``, ``open_subsets_not_converted``, and
``open_subset_rules``: per subset the release's evaluator, its kind of rule, and how omnieval reads it or why not).

Item ids are ``<subset>/<split>/<row>`` (the rows have no id of their own); the item's split and ``task`` are the
subset (the release scores each subset apart; a ``spectrum`` split is also where a shuffle takes its donors from, and
some of ``mmsu``'s domains are small), its ``category`` the Hugging Face split (the MMLU-Pro domain for ``mmsu``),
both kept as its ``breakdowns`` (``subset``, ``split``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from omnieval.core.schema import InputError
from omnieval.datasets.mcq_sources import parquet_rows, shard_split
from omnieval.datasets.omni.common import (
    Converted,
    Entry,
    MediaRef,
    Where,
    check_out,
    field_text,
    given_answer,
    release_sources,
    sound_entries,
    write_release,
)
from omnieval.scoring.ifeval import CHECKS, release_kwargs
from omnieval.scoring.voicebench_bbh import REFERENCE_INDEX
from omnieval.scoring.voicebench_open import CONVERTED, IFEVAL_BREAKDOWN, OPEN_RULES, RATED

CONVERTER = "voicebench"
SCORER = "voicebench"
"""The benchmark's released answer-scoring rule (``omnieval.scoring.voicebench``), recorded in ``benchmark.json``."""
MCQ_SUBSETS = ("openbookqa", "mmsu")
OPEN_SUBSETS = tuple(OPEN_RULES)
QUESTION = "Answer the question asked in the recording."
"""The item's written question: the question itself is spoken (module doc)."""
BBH_TASKS = ("sports_understanding", "hyperbaton", "navigate", "web_of_lies")
"""The ``bbh`` tasks, in the order the release's ``BBHEvaluator.extract_answer`` looks for them in a row's ``id``."""
_MARKER = re.compile(r"(?:^|(?<=\s))(?:\(([A-Z])\)|([A-Z])[.)])\s+")


def prompt_options(prompt: str) -> tuple[str, list[str]] | None:
    """(question, options) read out of a prompt that writes its options after letters (module doc); None where
    fewer than two options in letter order follow the question."""
    runs: list[list[re.Match]] = []
    for match in _MARKER.finditer(prompt):
        letter = match.group(1) or match.group(2)
        if letter == "A":
            runs.append([match])
        elif runs and letter == chr(ord(runs[-1][-1].group(1) or runs[-1][-1].group(2)) + 1):
            runs[-1].append(match)
    runs = [run for run in runs if len(run) >= 2]
    if not runs:
        return None
    run = runs[-1]
    ends = [m.start() for m in run[1:]] + [len(prompt)]
    options = [prompt[m.end():end].strip() for m, end in zip(run, ends, strict=True)]
    question = prompt[:run[0].start()].strip()
    if not question or not all(options):
        return None
    return question, options


def read_voicebench(release: Path):
    """One ``Entry`` per sound question of the multiple-choice subsets and the converted open subsets found (module
    doc), the entries skipped, and the open subsets found."""
    folders = release.iterdir() if release.is_dir() else []
    found = {p.name for p in folders if p.is_dir() and any(p.glob("*.parquet"))}
    subsets = [s for s in (*MCQ_SUBSETS, *CONVERTED) if s in found]
    if not subsets:
        raise InputError(f"no subset omnieval reads ({', '.join(f'{s}/*.parquet' for s in (*MCQ_SUBSETS, *CONVERTED))})"
                         " in the release folder (the Hugging Face dataset's layout)", file=release)
    records = []
    for subset in subsets:
        for path in sorted((release / subset).glob("*.parquet")):
            split = shard_split(path) or path.stem
            records += [(Where(row.file, f"row {row.number}"), (row.record, subset, split, row.number))
                        for row in parquet_rows(path, split)]
    entries, skipped = sound_entries(records, lambda r, where: _entry(*r, where=where))
    return entries, skipped, sorted(found & set(OPEN_SUBSETS))


def _entry(record, subset: str, split: str, number: int, *, where: Where) -> Entry:
    if not isinstance(record, dict):
        raise where.error(f"expected an object, got {type(record).__name__}")
    item_id = f"{subset}/{split}/{number}"
    where = where.named("item", item_id)
    prompt = field_text(record, "prompt", where)
    if subset in CONVERTED:
        return _open_entry(record, subset, split, item_id, prompt, where)
    parsed = prompt_options(prompt)
    if parsed is None:
        raise where.error("the prompt writes no options after letters A., B., ... (VoiceBench's multiple-choice "
                          "prompts end with them)", "prompt")
    _, options = parsed
    return Entry(where=where, item_id=item_id, question=QUESTION, options=options,
                 answer=given_answer(record, "reference", options, where), split=subset,
                 media={"audio": _recording(record, where)},
                 category=split, task=subset, text_alternatives={"audio": prompt},
                 breakdowns={"subset": subset, "split": split}, fields={"answer": "reference", "options": "prompt"})


def _recording(record: dict, where: Where) -> MediaRef:
    cell = record.get("audio")
    if not isinstance(cell, dict) or not cell.get("bytes"):
        raise where.error("expected the recording embedded in the audio cell (bytes)", "audio")
    return MediaRef("audio", data=bytes(cell["bytes"]), name=str(cell.get("path") or ""))


def _open_entry(record: dict, subset: str, split: str, item_id: str, prompt: str, where: Where) -> Entry:
    """An open item of a converted open subset (module doc): the reference where the subset has one."""
    reference = None if subset in ("advbench", "ifeval") or subset in RATED \
        else field_text(record, "reference", where)
    breakdowns = {"subset": subset, "split": split}
    if subset == "ifeval":
        breakdowns[IFEVAL_BREAKDOWN] = _ifeval_instructions(record, where)
    if subset == "bbh":
        row_id = field_text(record, "id", where)
        task = next((t for t in BBH_TASKS if t in row_id), None)
        if task is None:
            raise where.error(f"id {row_id!r} names none of the bbh tasks the release reads ({', '.join(BBH_TASKS)})",
                              "id")
        breakdowns["bbh_task"] = task
        if reference.lower() not in REFERENCE_INDEX:
            raise where.error(f"reference {reference!r} is none of yes, no, (A), (B) (the answers the release's bbh "
                              "rule reads; it raises on any other)", "reference")
    return Entry(where=where, item_id=item_id, question=QUESTION, options=[], answer=None, split=subset,
                 media={"audio": _recording(record, where)}, category=split, task=subset,
                 text_alternatives={"audio": prompt}, breakdowns=breakdowns, reference=reference, is_open=True,
                 rated=subset in RATED)


def _ifeval_instructions(record: dict, where: Where) -> str:
    """An ``ifeval`` row's instructions as its item keeps them (``voicebench_open.IFEVAL_BREAKDOWN``): each id of
    ``instruction_id_list`` with its entry of ``kwargs``, empty values dropped as the release drops them; an id the
    checks do not know, or lists of different lengths, is an error naming the field."""
    ids, kwargs = record.get("instruction_id_list"), record.get("kwargs")
    if not isinstance(ids, (list, tuple)) or not ids or not all(isinstance(i, str) for i in ids):
        raise where.error("expected a non-empty list of instruction ids", "instruction_id_list")
    if not isinstance(kwargs, (list, tuple)) or len(kwargs) != len(ids) \
            or not all(k is None or isinstance(k, dict) for k in kwargs):
        raise where.error(f"expected one object of arguments per instruction ({len(ids)})", "kwargs")
    unknown = [i for i in ids if i not in CHECKS]
    if unknown:
        raise where.error(f"instruction id {unknown[0]!r} is none of IFEval's checks", "instruction_id_list")
    pairs = [[i, {name: _plain(v) for name, v in release_kwargs(kw).items()}] for i, kw in zip(ids, kwargs,
                                                                                                   strict=True)]
    return json.dumps(pairs, sort_keys=True, ensure_ascii=False)


def _plain(value):
    """An argument as JSON holds it (a list cell of Arrow is read as a list)."""
    return list(value) if isinstance(value, tuple) else value


def convert_voicebench(release: str | Path, out: str | Path, *, name: str = "voicebench",
                       media_root: str | Path | None = None, copy: bool = False,
                       overwrite: bool = False) -> Converted:
    """Write the benchmark folder ``out`` from the VoiceBench release folder's multiple-choice subsets and the open
    subsets omnieval scores (module doc)."""
    release = Path(release)
    check_out(out, CONVERTER, release_sources(release, media_root), overwrite)
    entries, skipped, open_subsets = read_voicebench(release)
    notes, meta = open_subset_notes(open_subsets)
    return write_release(entries, out, converter=CONVERTER, name=name, release=release, media_root=media_root,
                         copy=copy, overwrite=overwrite, meta=meta, notes=notes, skipped=skipped,
                         skip_unsound=True, scorer=SCORER)


def open_subset_notes(open_subsets: list[str]) -> tuple[list[str], dict]:
    """The notes and ``benchmark.json`` fields naming the open subsets found (module doc): one note per kind of
    released rule, saying how omnieval reads those subsets or why it does not."""
    if not open_subsets:
        return [], {}
    by_kind: dict[str, list[str]] = {}
    for subset in open_subsets:
        by_kind.setdefault(OPEN_RULES[subset].kind, []).append(subset)
    notes = [f"{', '.join(subsets)} ({kind}): {OPEN_RULES[subsets[0]].note}" for kind, subsets in by_kind.items()]
    rules = {s: {"evaluator": OPEN_RULES[s].evaluator, "kind": OPEN_RULES[s].kind, "note": OPEN_RULES[s].note}
             for s in open_subsets}
    return notes, {"open_subsets_converted": [s for s in open_subsets if s in CONVERTED],
                   "open_subsets_not_converted": [s for s in open_subsets if s not in CONVERTED],
                   "open_subset_rules": rules}
