"""``n_items`` of every metrics row and paired row is the number of distinct items behind that row, checked against a
pandas computation over the predictions themselves, for every protocol and the open-ended metrics; and the report
marks an interval ‡ exactly where its row rests on fewer than 30 items.

The predictions are hand-built so that sub-scopes (anchors, tasks, subtasks, categories, input counts, selection
types, conditions with dropped rows, confidence methods, judges) have different item counts, some under 30 in units
of 30 or more items; rows are invalid or errored at random, and one model lacks some items (its comparisons run on
the common items). The reference reads the predictions with pandas only: which rows each metric reads is written out
here from the definitions in docs/reference.md, then ``groupby(...).item_id`` gives the items.
"""

from __future__ import annotations

import itertools
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import polars as pl
import pytest

from omnieval.report import report_command
from omnieval.stats.paired import metrics_and_paired
from omnieval.stats.read import read_predictions

FEW = 30
DISSONANCE_CONDITIONS = ["C" + "".join(b) for b in itertools.product("01", repeat=3)]
DIRECTIONS = ["A->T", "A->V", "T->A", "T->V", "V->A", "V->T"]
ERRORS = ["engine error: timeout", "media decode failed: truncated"]
VERDICTS = ("correct", "incorrect", "abstained")


def _answer(rng: np.random.Generator, target: str, labels: str,
            p_correct: float = 0.6) -> tuple[str | None, str | None]:
    """(choice, error): errored 4%, invalid 7%, else right with ``p_correct``."""
    u = rng.random()
    if u < 0.04:
        return None, ERRORS[int(rng.integers(2))]
    if u < 0.11:
        return None, None
    if rng.random() < p_correct:
        return target, None
    return str(rng.choice([c for c in labels if c != target])), None


def _base(model, protocol, item, condition, target, choice, error, **kw) -> dict:
    return dict(model=model, prompt="zs", protocol=protocol, split="s", item_id=item,
                instance_id=f"{item}|{condition}", condition=condition, target=target, choice=choice,
                abstain_label=kw.pop("abstain_label", None), confidence=kw.pop("confidence", None),
                confidence_method=kw.pop("confidence_method", None), error=error, **kw)


# --- predictions ---------------------------------------------------------------------------------------------------

def dissonance_rows(rng) -> list[dict]:
    """Anchors with 36, 20, 9 and 4 items (69): C111 dropped for every 4th item, C000 for items 3, 10, 17, ...;
    confidences of two methods on random rows; ``m1`` answers items 5, 18, 31, ... with nothing parseable (they
    count for the human abstention targets and ``ace``, not for accuracy)."""
    rows = []
    anchors = {"a0": 36, "a1": 20, "a2": 9, "a3": 4}
    items = [(f"d{a}-{i:02d}", a) for a, count in anchors.items() for i in range(count)]
    for model in ("m1", "m2"):
        for idx, (item, anchor) in enumerate(items):
            for c in DISSONANCE_CONDITIONS:
                if (c == "C111" and idx % 4 == 0) or (c == "C000" and idx % 7 == 3):
                    continue
                k = c.count("1")
                target = "E" if k >= 2 and rng.random() < 0.3 else "A"
                choice, error = _answer(rng, target, "ABCDE")
                if model == "m1" and idx % 13 == 5:
                    choice, error = None, None
                conf = {}
                if choice is not None and rng.random() < 0.5:
                    conf = dict(confidence=float(rng.random()), confidence_method=str(rng.choice(["rs", "tp"])))
                rows.append(_base(model, "dissonance", item, c, target, choice, error, abstain_label="E",
                                  anchor=anchor, **conf))
    return rows


def crossmodal_rows(rng) -> list[dict]:
    """Tasks of 40 (two subtasks of 28 and 12), 12 and 5 items and 3 items without a task; every 5th item misses
    V->A, every 9th T->V, and items 1, 12, 23, ... have A->T and T->A only (out of ``T vs A`` disparity)."""
    rows = []
    tasks = [("perception", "music", 28), ("perception", "speech", 12), ("spatial", "depth", 12),
             ("temporal", "order", 5), (None, None, 3)]
    items = [(f"x{t}-{s}-{i:02d}", t, s) for t, s, count in tasks for i in range(count)]
    for model in ("m1", "m2"):
        for idx, (item, task, subtask) in enumerate(items):
            for d in DIRECTIONS:
                if (d == "V->A" and idx % 5 == 0) or (d == "T->V" and idx % 9 == 0):
                    continue
                if idx % 11 == 1 and d not in ("A->T", "T->A"):
                    continue
                target = "ABCD"[int(rng.integers(4))]
                choice, error = _answer(rng, target, "ABCD")
                rows.append(_base(model, "crossmodal", item, d, target, choice, error, task=task, subtask=subtask))
    return rows


SPECTRUM_CONDITIONS = ["normal", "image_only", "audio_only", "text_only", "random", "no_image", "no_audio",
                       "no_text"]


def spectrum_rows(rng) -> list[dict]:
    """Categories of 34, 14 and 6 items and 2 without one (56); every 6th item misses no_audio."""
    rows = []
    cats = {"charts": 34, "maps": 14, "sounds": 6, None: 2}
    items = [(f"s{c}-{i:02d}", c) for c, count in cats.items() for i in range(count)]
    for model in ("m1", "m2"):
        for idx, (item, cat) in enumerate(items):
            for c in SPECTRUM_CONDITIONS:
                if c == "no_audio" and idx % 6 == 0:
                    continue
                choice, error = _answer(rng, "A", "ABCD", 0.8 if c in ("normal", "image_only") else 0.3)
                rows.append(_base(model, "spectrum", item, c, "A", choice, error, category=cat, n_options=4))
    return rows


def contrastive_rows(rng) -> list[dict]:
    """10 items of 2 inputs, 40 of 3, 16 of 4 (66), random or similar negatives, answer modalities skewed; ``m2``
    has no prediction for the first three items (its comparisons run on the common items)."""
    rows = []
    items = []
    modalities = ["image"] * 6 + ["audio"] * 3 + ["video"] * 2 + ["pointcloud"]
    for n, count in ((2, 10), (3, 40), (4, 16)):
        for i in range(count):
            items.append((f"c{n}-{i:02d}", n, "similar" if i % 3 == 0 else "random",
                          modalities[int(rng.integers(len(modalities)))]))
    for model in ("m1", "m2"):
        for idx, (item, n, selection, modality) in enumerate(items):
            if model == "m2" and idx < 3:
                continue
            perms = [p for p in itertools.permutations(range(n))][1:]
            orders = [("original", tuple(range(n)))] + [
                ("perm:" + "".join("ABCD"[j] for j in p), p) for p in perms[:2]]
            answer = idx % n
            for condition, order in orders:
                target = "ABCD"[order.index(answer)]
                choice, error = _answer(rng, target, "ABCD"[:n])
                rows.append(_base(model, "contrastive", item, condition, target, choice, error, n_inputs=n,
                                  n_options=n, selection_type=selection, answer_modality=modality))
    return rows


def open_rows(rng) -> list[dict]:
    """Dissonance, model ``omni``: multiple-choice answers to 40 items in C000, C100 and C111 (C111 only for 12),
    open answers to the first 32 items graded by two judges (a verdict left unparseable now and then)."""
    rows = []
    for i in range(40):
        item = f"o{i:02d}"
        for c in ("C000", "C100", "C111"):
            if c == "C111" and i >= 12:
                continue
            target = "E" if c == "C111" and i % 3 == 0 else "A"
            choice, error = _answer(rng, target, "ABCDE")
            rows.append(_base("omni", "dissonance", item, c, target, choice, error, abstain_label="E", mode="mcq"))
            if i >= 32:
                continue
            _, error = _answer(rng, target, "ABCDE")
            verdicts = [{"judge": j, "verdict": None if rng.random() < 0.1 else str(rng.choice(VERDICTS)),
                         "raw_text": "", "attempts": 1, "template": "v1"} for j in ("j1", "j2")]
            rows.append(_base("omni", "dissonance", item, c, target, None, error, abstain_label="E", mode="open",
                              verdicts=None if error else verdicts))
    return rows


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The predictions of every protocol (pandas, with the flags of docs/reference.md), and the metrics and paired
    tables of one ``omnieval metrics`` pass over the files."""
    rng = np.random.default_rng(18)
    folder = tmp_path_factory.mktemp("n-items")
    paths = []
    frames = []
    for name, make in (("dissonance", dissonance_rows), ("crossmodal", crossmodal_rows),
                       ("spectrum", spectrum_rows), ("contrastive", contrastive_rows), ("open", open_rows)):
        rows = make(rng)
        path = folder / f"{name}.parquet"
        pl.DataFrame(rows, infer_schema_length=None).write_parquet(path)
        paths.append(path)
        frame = pd.DataFrame(rows)
        frame["file"] = name
        frames.append(frame)
    metrics, paired = metrics_and_paired(read_predictions(paths), resamples=60, seed=1, permutations=200)
    pred = pd.concat(frames, ignore_index=True)
    pred["answered"] = pred["error"].isna()
    pred["valid"] = pred["answered"] & pred["choice"].notna()
    return pred, metrics, paired, folder


# --- the reference: which predictions each row reads, and their items -------------------------------------------

Items = dict[tuple[str, str], frozenset]


def put(ref: Items, metric: str, key: str, rows: pd.DataFrame) -> None:
    if len(rows):
        ref[(metric, key)] = frozenset(rows["item_id"])


def per(ref: Items, metric: str, rows: pd.DataFrame, by, key=str) -> None:
    """One entry per group of ``by``: its items (pandas groupby)."""
    for value, items in rows.groupby(by)["item_id"]:
        ref[(metric, key(value))] = frozenset(items)


def error_rates(ref: Items, rows: pd.DataFrame, kinds: list[str], metric: str = "error_rate") -> None:
    put(ref, metric, "", rows)
    for kind in kinds:
        put(ref, metric, kind, rows)


def kinds_of(rows: pd.DataFrame) -> list[str]:
    present = {("engine" if e.startswith("engine error") else "media") for e in rows["error"].dropna()}
    return [k for k in ("media", "engine") if k in present]


def dissonance_reference(u: pd.DataFrame, kinds: list[str], methods: list[str]) -> Items:
    ref: Items = {}
    u = u.assign(k=u["condition"].str.count("1"))
    valid, answered = u[u["valid"]], u[u["answered"]]
    per(ref, "accuracy", valid, "condition")
    if valid["condition"].nunique() == 8:
        per(ref, "accuracy_k", valid, "k")
        for m, only in {"video": "C100", "audio": "C010", "text": "C001"}.items():
            put(ref, "shapley", m, valid)
            put(ref, "reliance", m, valid[valid["condition"].isin(["C000", only])])
    per(ref, "abstention_k", valid, "k")
    per(ref, "human_abstention_k", answered, "k")
    if valid["k"].nunique() == 4 and answered["k"].nunique() == 4:
        put(ref, "ace", "", answered)  # abstention (valid rows) against the human targets (answered rows)
    conf = valid[valid["confidence"].notna()]
    suffix = (lambda m: f"@{m}") if len(methods) > 1 else (lambda m: "")
    per(ref, "confidence_k", conf, ["confidence_method", "k"], key=lambda v: f"{v[1]}{suffix(v[0])}")
    for name in ("ece", "rc_auc"):
        per(ref, name, conf, "confidence_method", key=suffix)
    per(ref, "anchor_accuracy", valid[valid["k"] == 0], "anchor")
    put(ref, "invalid_rate", "", answered)
    error_rates(ref, u, kinds)
    return ref


def crossmodal_reference(u: pd.DataFrame, kinds: list[str]) -> Items:
    ref: Items = {}
    for by in ((), ("task",), ("task", "subtask")):
        scopes = [((), u)] if not by else [((v,) if isinstance(v, str) else v, g) for v, g in u.groupby(list(by))]
        for scope, g in scopes:
            label = "/".join(scope)

            def key(k: str, label=label) -> str:
                return f"{label}/{k}" if label and k else (label or k)

            gv = g[g["valid"]]
            per(ref, "accuracy", gv, "condition", key=key)
            if set(DIRECTIONS) <= set(gv["condition"]):
                put(ref, "average", key(""), gv)
                put(ref, "std", key(""), gv)
                for x, y in (("T", "V"), ("T", "A"), ("V", "A")):
                    (z,) = {"A", "V", "T"} - {x, y}
                    four = [f"{z}->{y}", f"{z}->{x}", f"{y}->{z}", f"{x}->{z}"]
                    put(ref, "disparity", key(f"{x}_vs_{y}"), gv[gv["condition"].isin(four)])
                for x, y in (("A", "T"), ("V", "T"), ("V", "A")):
                    put(ref, "imbalance", key(f"{x}<->{y}"), gv[gv["condition"].isin([f"{x}->{y}", f"{y}->{x}"])])
            shown = g[g["answered"]].groupby("item_id")["condition"].agg(set)
            put(ref, "consistency", key(""), pd.DataFrame({"item_id": shown[shown.map(set(DIRECTIONS).issubset)]
                                                           .index}))
            for d1, d2 in itertools.combinations(DIRECTIONS, 2):
                both = shown[shown.map(lambda s, d1=d1, d2=d2: {d1, d2} <= s)].index
                put(ref, "agreement", key(f"{d1}|{d2}"), pd.DataFrame({"item_id": both}))
    put(ref, "invalid_rate", "", u[u["answered"]])
    error_rates(ref, u, kinds)
    return ref


def spectrum_reference(u: pd.DataFrame, kinds: list[str]) -> Items:
    """``dependency`` is keyed by its scope alone here (its label depends on the intervals)."""
    ref: Items = {}
    for scope, g in [("", u), *u.groupby("category")]:
        def key(k: str, label=scope) -> str:
            return f"{label}/{k}" if label and k else (label or k)

        gv = g[g["valid"]]
        present = set(gv["condition"])

        def read(*conditions, gv=gv):
            return gv[gv["condition"].isin(conditions)]

        per(ref, "accuracy", gv, "condition", key=key)
        put(ref, "chance", key(""), g[g["n_options"] > 0])
        named = [m for m in ("image", "video", "audio", "text") if f"{m}_only" in present or f"no_{m}" in present]
        gains = [m for m in named if "random" in present and f"{m}_only" in present]
        for m in gains:
            put(ref, "intra", key(m), read(f"{m}_only", "random"))
        if "normal" in present and named and all(f"{m}_only" in present for m in named):
            put(ref, "inter", key(""), read("normal", *(f"{m}_only" for m in named)))
        for m in named:
            if "normal" in present and f"no_{m}" in present:
                put(ref, "perceptual_score", key(m), read("normal", f"no_{m}"))
        if gains and len(gains) == len(named):
            put(ref, "dependency", scope, read("random", *(f"{m}_only" for m in gains)))
    put(ref, "invalid_rate", "", u[u["answered"]])
    error_rates(ref, u, kinds)
    return ref


def ensemble_predictions(spectrum: pd.DataFrame) -> pd.DataFrame:
    """The majority-vote model's rows: one per (prompt, split, item, condition) any model answered or not; valid
    when some model gave a valid choice; never errored. Only in the prompts where a vote can differ from every
    member: three or more models, or two with a confidence on every valid choice."""
    keep = []
    for _, p in spectrum.groupby("prompt"):
        n_models = p["model"].nunique()
        confident = (p["confidence"].notna() | p["choice"].isna()).all()
        if n_models >= 3 or (n_models == 2 and confident):
            keep.append(p)
    if not keep:
        return spectrum.iloc[:0]
    spectrum = pd.concat(keep)
    votes = spectrum.groupby(["prompt", "split", "item_id", "condition"], as_index=False).agg(
        valid=("choice", lambda s: s.notna().any()), category=("category", "first"),
        n_options=("n_options", "first"))
    return votes.assign(model="ensemble", protocol="spectrum", answered=True, error=None)


def contrastive_reference(u: pd.DataFrame, kinds: list[str]) -> Items:
    ref: Items = {}
    original = u[u["valid"] & (u["condition"] == "original")]
    put(ref, "accuracy", "all", original)
    per(ref, "accuracy", original, "n_inputs", key=lambda v: f"n={int(v)}")
    per(ref, "accuracy", original, "selection_type", key=lambda v: f"selection={v}")
    per(ref, "accuracy", original, "answer_modality", key=lambda v: f"modality={v}")
    put(ref, "permutation_consistency", "", u[u["answered"]])
    chosen = u[u["valid"] & u["n_inputs"].notna()]
    for i, label in enumerate("ABCD"):
        if (chosen["n_inputs"] > i).any():  # a label no instance shows has no expected share: no row
            put(ref, "position_bias", label, chosen)
    put(ref, "invalid_rate", "", u[u["answered"]])
    error_rates(ref, u, kinds)
    return ref


def open_reference(u: pd.DataFrame, kinds: list[str]) -> Items:
    """The open-ended rows of one unit (multiple-choice and open predictions of one model and prompt)."""
    ref: Items = {}
    u = u.assign(k=u["condition"].str.count("1"))
    opened = u[u["mode"] == "open"]
    graded = opened[opened["answered"]].copy()
    for j in ("j1", "j2"):
        graded[j] = graded["verdicts"].map(lambda vs, j=j: next(v["verdict"] for v in vs if v["judge"] == j))
        graded[f"ok_{j}"] = graded[j].isin(VERDICTS)
    graded["any_ok"] = graded["ok_j1"] | graded["ok_j2"]
    graded["all_ok"] = graded["ok_j1"] & graded["ok_j2"]
    mcq = u[(u["mode"] != "open") & u["valid"]]
    scopes = {"c": ("condition", str), "a": (None, None), "k": ("k", lambda v: f"k={v}")}
    for by, name in scopes.values():
        groups = [("all", graded, mcq)] if by is None else \
            [(name(v), g, mcq[mcq[by] == v]) for v, g in graded.groupby(by)]
        for label, g, m in groups:
            for metric in ("open_accuracy", "open_abstention"):
                for j in ("j1", "j2"):
                    put(ref, metric, f"{label}@{j}", g[g[f"ok_{j}"]])
                put(ref, metric, label, g[g["any_ok"]])
            put(ref, "judge_agreement", label, g[g["all_ok"]])
            if len(m) and g["any_ok"].any():
                put(ref, "mcq_open_gap", label, pd.concat([m, g[g["any_ok"]]]))
    for j in ("j1", "j2"):
        put(ref, "open_invalid_verdicts", j, graded)
    put(ref, "judge_kappa", "cohen", graded[graded["all_ok"]])
    error_rates(ref, opened, kinds, "open_error_rate")
    return ref


def reference(pred: pd.DataFrame, protocol: str) -> dict[tuple[str, str, str], Items]:
    """(model, prompt, split) -> (metric, key) -> items, for one protocol (open-ended rows included)."""
    part = pred[pred["protocol"] == protocol]
    mcq = part[part.get("mode", pd.Series("mcq", index=part.index)).fillna("mcq") != "open"]
    kinds = kinds_of(mcq)
    if protocol == "spectrum":
        mcq = pd.concat([mcq, ensemble_predictions(mcq)], ignore_index=True)
    methods = sorted(mcq.loc[mcq["valid"] & mcq["confidence"].notna(), "confidence_method"].unique())
    out = {}
    for unit, u in mcq.groupby(["model", "prompt", "split"]):
        out[unit] = {"dissonance": lambda u: dissonance_reference(u, kinds, methods),
                     "crossmodal": lambda u: crossmodal_reference(u, kinds),
                     "spectrum": lambda u: spectrum_reference(u, kinds),
                     "contrastive": lambda u: contrastive_reference(u, kinds)}[protocol](u)
    if "mode" in part and (part["mode"] == "open").any():
        opened = part[part["mode"] == "open"]
        open_kinds = kinds_of(opened)
        for unit, u in part.groupby(["model", "prompt", "split"]):
            if (u["mode"] == "open").any():
                out[unit].update(open_reference(u, open_kinds))
    return out


def table_items(metrics: pl.DataFrame, protocol: str) -> dict[tuple[str, str, str], dict[tuple[str, str], int]]:
    out: dict = {}
    for r in metrics.filter(pl.col("protocol") == protocol).iter_rows(named=True):
        key = r["key"]
        if r["metric"] == "dependency":  # the label's scope
            key = key.rsplit("/", 1)[0] if "/" in key else ""
        out.setdefault((r["model"], r["prompt"], r["split"]), {})[(r["metric"], key)] = r["n_items"]
    return out


# --- the tests ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["dissonance", "crossmodal", "spectrum", "contrastive"])
def test_every_row_counts_the_items_behind_it(study, protocol):
    pred, metrics, _, _ = study
    want = {unit: {row: len(items) for row, items in ref.items()} for unit, ref in reference(pred, protocol).items()}
    got = table_items(metrics, protocol)
    assert set(got) == set(want)
    for unit in want:
        assert got[unit] == want[unit], (unit, {r: (got[unit].get(r), want[unit].get(r))
                                                for r in set(got[unit]) | set(want[unit])
                                                if got[unit].get(r) != want[unit].get(r)})
    # the study has what the change is about: rows under 30 items in units of 30 or more
    units = pred[pred["protocol"] == protocol].groupby(["model", "prompt", "split"])["item_id"].nunique()
    few = [(unit, row) for unit, rows in want.items() for row, n in rows.items() if n < FEW <= units.get(unit, FEW)]
    assert few, protocol


def test_open_ended_rows_count_the_items_behind_them(study):
    pred, metrics, _, _ = study
    open_metrics = {"open_accuracy", "open_abstention", "judge_agreement", "mcq_open_gap", "open_invalid_verdicts",
                    "judge_kappa", "open_error_rate"}
    ref = reference(pred[pred["file"] == "open"], "dissonance")[("omni", "zs", "s")]
    want = {row: len(items) for row, items in ref.items() if row[0] in open_metrics}
    got = {row: n for row, n in table_items(metrics, "dissonance")[("omni", "zs", "s")].items()
           if row[0] in open_metrics}
    assert got == want
    assert want[("open_accuracy", "C111")] < FEW <= want[("open_accuracy", "all")]


def test_paired_rows_count_the_items_behind_the_row_on_both_sides(study):
    pred, _, paired, _ = study
    checked = set()
    for protocol in ("dissonance", "crossmodal", "spectrum", "contrastive"):
        refs = reference(pred, protocol)
        rows = paired.filter((pl.col("protocol") == protocol) & (pl.col("comparison") == "models"))
        assert len(rows), protocol
        for r in rows.iter_rows(named=True):
            a, b = refs[(r["a"], r["prompt"], r["split"])], refs[(r["b"], r["prompt"], r["split"])]
            assert r["n_items"] == len(a[(r["metric"], r["key"])] & b[(r["metric"], r["key"])]), r
            checked.add((protocol, r["metric"], r["key"]))
    # sub-scoped paired rows are among them (one input count, one confidence method), and the common-items pass
    assert ("contrastive", "accuracy", "n=2") in checked and ("dissonance", "ece", "@tp") in checked
    n2 = paired.filter((pl.col("protocol") == "contrastive") & (pl.col("key") == "n=2"))
    assert 0 < n2["n_items"][0] <= 7  # 10 items of two inputs, 3 of them without an m2 prediction
    # modes: multiple-choice minus open, on the items with both a valid choice and a graded open answer
    opened = pred[pred["file"] == "open"]
    mcq = opened[(opened["mode"] == "mcq") & opened["valid"]]
    graded = opened[(opened["mode"] == "open") & opened["answered"]]
    graded = graded[graded["verdicts"].map(lambda vs: any(v["verdict"] in VERDICTS for v in vs))]
    modes = paired.filter(pl.col("comparison") == "modes")
    assert len(modes)
    for r in modes.iter_rows(named=True):
        if r["key"] == "all":
            m, g = mcq, graded
        elif r["key"].startswith("k="):
            k = int(r["key"][2:])
            m, g = (x[x["condition"].str.count("1") == k] for x in (mcq, graded))
        else:
            m, g = (x[x["condition"] == r["key"]] for x in (mcq, graded))
        assert r["n_items"] == len(set(m["item_id"]) & set(g["item_id"])), r


class _Cells(HTMLParser):
    """Every table cell of a metrics row or a paired row: its data attributes and the interval text shown."""

    def __init__(self, text: str):
        super().__init__()
        self.cells: list[dict] = []
        self._cell: dict | None = None
        self._span: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "td" and ("data-metric" in a or "data-paired-metric" in a):
            self._cell = {"attrs": a, "ci": ""}
            self.cells.append(self._cell)
        elif tag == "span" and self._cell is not None:
            self._span = a.get("class")

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None
        elif tag == "span":
            self._span = None

    def handle_data(self, data):
        if self._cell is not None and self._span == "ci":
            self._cell["ci"] += data


def test_report_marks_exactly_the_intervals_on_few_clusters(study, tmp_path):
    """‡ marks an interval resting on fewer clusters than ``FEW_CLUSTERS`` (the resampling units, not the items):
    every dissonance interval here (4 anchors), a crossmodal task of 5 items in a unit of 57."""
    from omnieval.report.tables import FEW_CLUSTERS

    _, metrics, paired, _ = study
    folder = tmp_path / "metrics"
    folder.mkdir()
    metrics.write_parquet(folder / "metrics.parquet")
    paired.write_parquet(folder / "paired.parquet")
    assert report_command([str(folder)], str(tmp_path / "out")) == 0
    page = _Cells((tmp_path / "out" / "report.html").read_text())
    rows = {tuple(r[c] for c in ("protocol", "model", "prompt", "split", "metric", "key")): r
            for r in metrics.to_dicts()}
    marked, shown = 0, set()
    for cell in page.cells:
        a = cell["attrs"]
        if "data-metric" not in a or not cell["ci"]:
            continue
        ident = tuple(a[f"data-{c}"] for c in ("protocol", "model", "prompt", "split", "metric", "key"))
        row = rows[ident]
        assert re.fullmatch(r"\[\S+, \S+\]( ‡)?", cell["ci"]), cell["ci"]
        assert cell["ci"].endswith("‡") == (row["n_clusters"] < FEW_CLUSTERS), (a, row["n_clusters"], cell["ci"])
        shown.add(ident)
        marked += cell["ci"].endswith("‡")
    with_ci = metrics.filter(pl.col("ci_low").is_not_null() & pl.col("ci_high").is_not_null())
    assert shown == {tuple(r[c] for c in ("protocol", "model", "prompt", "split", "metric", "key"))
                     for r in with_ci.to_dicts()}
    assert 0 < marked < len(shown)
    # a sub-scoped row on few clusters in a unit of many more is marked: the crossmodal task of 5 items
    task = with_ci.filter((pl.col("protocol") == "crossmodal") & (pl.col("metric") == "accuracy")
                          & pl.col("key").str.starts_with("temporal/"))
    assert len(task) and (task["n_clusters"] < FEW_CLUSTERS).all()
    assert any(c["ci"].endswith("‡") for c in page.cells if c["attrs"].get("data-metric") == "accuracy"
               and c["attrs"].get("data-key", "").startswith("temporal/"))
    # dissonance resamples its 4 anchors: every interval marked, though a unit holds 69 items (the open-ended
    # file has no anchors: there the question is the unit)
    dissonance = with_ci.filter((pl.col("protocol") == "dissonance") & pl.col("model").is_in(["m1", "m2"]))
    assert len(dissonance) and (dissonance["n_clusters"] <= 4).all() and dissonance["n_items"].max() == 69
    # paired cells: marked where the difference rests on fewer than 30 items on both sides
    pairs = {(r["protocol"], r["comparison"], r["a"], r["b"], r["prompt"], r["model"], r["split"], r["metric"],
              r["key"]): r for r in paired.to_dicts()}
    seen = 0
    for cell in page.cells:
        a = cell["attrs"]
        if "data-paired-metric" not in a:
            continue
        r = pairs[(a["data-protocol"], a["data-comparison"], a["data-a"], a["data-b"], a["data-prompt"],
                   a["data-model"], a["data-split"], a["data-paired-metric"], a["data-paired-key"])]
        assert cell["ci"].endswith("‡") == (r["n_clusters"] < FEW_CLUSTERS), (a, r["n_clusters"], cell["ci"])
        seen += 1
    assert seen >= len(paired)
