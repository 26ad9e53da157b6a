"""Wide tables from the long metrics table: rows are models (x run, prompt, split, scope), columns are metric keys.

``MetricView`` holds one protocol's metric rows with two derived columns: ``scope`` (a task, subtask, category or
confidence method the row is of) and ``leaf`` (what the row is of inside it), as the protocol's ``scope_and_leaf`` reads
them from the row's key parts (the columns of ``stats.key_parts.key_columns``; the ``key`` label is never parsed).
Every cell it writes remembers its metrics-table row, so a section can list whatever rows no table showed
(``leftover_table``) and nothing is silently dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import polars as pl

from omnieval.report.blocks import Cell, Table, excludes_zero, fmt, text_cell

IDENTITY = ("run", "model", "prompt", "split", "scope")
ROW_LABELS = {"run": "run", "model": "model", "prompt": "prompt", "split": "split", "scope": "scope"}
PROMPT_ORDER = {"zs": 0, "cot": 1}
FEW_CLUSTERS = 12
"""Below this many clusters (the bootstrap's resampling units, not the items inside them) an interval is marked
``FEW_MARK`` as unreliable: the coverage study (``omnieval bench coverage``, docs/reference.md, Statistics common to
all protocols) finds the default t interval covering (0.92 or more, 0.93 within its Monte Carlo error) from 12
clusters on, in anchors of ten questions and in single-question clusters alike, and single-question clusters down
to 0.89 below."""
FEW_MARK = "‡"


def few_clusters(n_clusters) -> bool:
    return n_clusters is not None and 0 < n_clusters < FEW_CLUSTERS


def clusters_of(rec: dict) -> int | None:
    """The clusters behind a metrics or paired row."""
    return rec.get("n_clusters")

ScopeAndLeaf = Callable[[dict], tuple[str, str, tuple[str, ...]]]
"""(scope, leaf, kind) of one metrics row (a dict of its columns), read from its key parts: ``scope`` as shown,
``leaf`` what the row is of inside it, ``kind`` what the scope is (``("task",)``, ``("breakdown", "duration")``;
``()`` for none): what a section selects scopes by (``MetricView.kind_of``)."""


def by_label(rec: dict) -> tuple[str, str, tuple[str, ...]]:
    """No scope; the leaf is the row's whole key label (a protocol whose report names its columns by key)."""
    return "", rec["key"], ()


@dataclass(frozen=True)
class Col:
    """One column: the rows of ``metric`` whose leaf is ``leaf`` (and, if set, of one ``split``)."""

    label: str
    metric: str
    leaf: str = ""
    group: str | None = None
    split: str | None = None
    scale: str | None = "seq"  # "seq": [0, 1] sequential shade; "div": signed, diverging shade; None: no shade
    title: str | None = None


def _blend(rgba: Sequence[float], amount: float) -> str:
    """A colour mixed with white (``amount`` of the colour), as CSS hex: light enough for black text in print."""
    r, g, b = (round(255 * (amount * c + (1 - amount))) for c in rgba[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def shade(value: float | None, scale: str | None, vmax: float = 1.0) -> str | None:
    """Background colour of a value: cividis over [0, 1] (sequential) or purple-orange around 0 (diverging);
    both read in greyscale print and by colour-blind readers (no red-green)."""
    if scale is None or value is None or not math.isfinite(value):
        return None
    from matplotlib import colormaps

    if scale == "seq":
        return _blend(colormaps["cividis"](min(max(value, 0.0), 1.0)), 0.42)
    t = 0.5 + 0.5 * max(-1.0, min(1.0, value / vmax)) if vmax > 0 else 0.5
    return _blend(colormaps["PuOr_r"](t), 0.6)


def order_of(values: Iterable[str], *, prompts: bool = False) -> dict[str, int]:
    """Order of first appearance (prompts: zs, cot, then the others as they come)."""
    out: dict[str, int] = {}
    for v in values:
        out.setdefault(v, len(out))
    if prompts:
        return {v: (PROMPT_ORDER.get(v, 2), i) for v, i in out.items()}  # type: ignore[misc]
    return out


class MetricView:
    """One protocol's metric rows, indexed by identity, metric and leaf."""

    def __init__(self, frame: pl.DataFrame, scope_and_leaf: ScopeAndLeaf | None = None):
        scope_and_leaf = scope_and_leaf or by_label
        parts = [scope_and_leaf(rec) for rec in frame.iter_rows(named=True)]
        self.kinds: dict[str, tuple[str, ...]] = {p[0]: p[2] for p in parts}
        self.frame = frame.with_columns(scope=pl.Series([p[0] for p in parts], dtype=pl.Utf8),
                                        leaf=pl.Series([p[1] for p in parts], dtype=pl.Utf8))
        self.records = self.frame.to_dicts()
        self.index: dict[tuple, dict] = {}
        for rec in self.records:
            self.index[(*(rec[c] for c in IDENTITY), rec["metric"], rec["leaf"])] = rec
        self.order = {c: order_of(self.frame[c].to_list(), prompts=c == "prompt") for c in IDENTITY}
        self.used: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.records)

    def has(self, metric: str, leaf: str | None = None) -> bool:
        return any(r["metric"] == metric and (leaf is None or r["leaf"] == leaf) for r in self.records)

    def leaves(self, metric: str, scope: Callable[[str], bool] = lambda s: s == "") -> list[str]:
        """Leaves of a metric in order of first appearance, over the scopes accepted by ``scope``."""
        return list(order_of(r["leaf"] for r in self.records if r["metric"] == metric and scope(r["scope"])))

    def kind_of(self, scope: str) -> tuple[str, ...]:
        """What a scope shown in this view is (the ``kind`` its protocol's ``scope_and_leaf`` gave it)."""
        return self.kinds.get(scope, ())

    def scopes(self, metric: str) -> list[str]:
        return list(order_of(r["scope"] for r in self.records if r["metric"] == metric))

    def distinct(self, column: str) -> list[str]:
        return sorted(self.order[column], key=self.order[column].__getitem__)

    def get(self, ident: dict, metric: str, leaf: str) -> dict | None:
        return self.index.get((*(ident[c] for c in IDENTITY), metric, leaf))

    def cell(self, rec: dict | None, scale: str | None = "seq", vmax: float = 1.0, label: str | None = None) -> Cell:
        """The cell of one metrics row (``—`` when the row does not exist)."""
        if rec is None:
            return Cell(text="—", sort=None)
        self.used.add(rec["_rid"])
        value, low, high = rec["value"], rec["ci_low"], rec["ci_high"]
        where = " · ".join(str(rec[c]) for c in ("run", "model", "prompt", "split") if rec.get(c))
        data = {c: str(rec[c]) for c in ("protocol", "run", "model", "prompt", "split", "metric", "key")}
        if value is None:  # a label (spectrum's dependency): the key says it
            data["value"] = ""
            text = label or rec["leaf"]
            title = f"{rec['metric']} — {where}: {text} (n = {rec['n']})"
            if few_clusters(clusters_of(rec)):  # a label rests on intervals: as unreliable as they are
                text = f"{text} {FEW_MARK}"
                title += f" ({FEW_MARK} fewer than {FEW_CLUSTERS} clusters: the intervals behind it are unreliable)"
            return Cell(text=text, sort=label or rec["leaf"], data=data, strong=True, title=title)
        data["value"] = repr(float(value))
        has_ci = low is not None and high is not None
        if has_ci:
            data["ci_low"], data["ci_high"] = repr(float(low)), repr(float(high))
        ci = f"[{fmt(low)}, {fmt(high)}]" if has_ci else None
        n_items, n_clusters = rec.get("n_items"), clusters_of(rec)
        title = (f"{rec['metric']} {rec['key']} — {where}: {value:.4f}"
                 + (f", 95% CI [{low:.4f}, {high:.4f}]" if has_ci else "") + f", n = {rec['n']}"
                 + (f", {n_items} items" if n_items is not None else "")
                 + (f" in {n_clusters} clusters" if n_clusters is not None and n_clusters != n_items else ""))
        if has_ci and few_clusters(n_clusters):
            ci = f"{ci} {FEW_MARK}"
            title += f" ({FEW_MARK} fewer than {FEW_CLUSTERS} clusters: the interval is unreliable)"
        strong = scale == "div" and excludes_zero(low, high)
        return Cell(text=fmt(value), ci=ci, title=title, sort=float(value), shade=shade(value, scale, vmax),
                    strong=strong, data=data)

    def table(self, caption: str, cols: Sequence[Col], *, rows: Sequence[str] = ("run", "model", "prompt", "split"),
              scope: Callable[[str], bool] = lambda s: s == "", scope_label: str = "scope",
              note: str | None = None, collapsed: bool = False, name: str = "") -> Table | None:
        """A table with one row per identity (the ``rows`` columns) that has at least one of ``cols``; identity
        columns other than model and scope are shown only when they vary. None when no column has data."""
        wanted = {(c.metric, c.leaf) for c in cols}
        split_cols = any(c.split is not None for c in cols)
        ident_cols = [c for c in rows if not (split_cols and c == "split")]
        idents: dict[tuple, dict] = {}
        for rec in self.records:
            if (rec["metric"], rec["leaf"]) in wanted and scope(rec["scope"]):
                ident = {c: rec[c] if c in ident_cols else None for c in IDENTITY}
                idents.setdefault(tuple(ident.values()), ident)
        if not idents:
            return None
        ordered = sorted(idents.values(), key=lambda d: tuple(self.order[c].get(d[c], -1) if d[c] is not None
                                                              else -1 for c in IDENTITY))
        shown = [c for c in ident_cols
                 if c in ("model", "scope") or len({d[c] for d in ordered}) > 1]
        vmax = {}
        for col in cols:
            if col.scale == "div":
                vals = [abs(r["value"]) for r in self.records if r["metric"] == col.metric and r["value"] is not None
                        and math.isfinite(r["value"])]
                vmax[col] = max([0.05, *vals])
        body = []
        for ident in ordered:
            row = [text_cell(str(ident[c]), header=True) for c in shown]
            for col in cols:
                key = dict(ident)
                if col.split is not None:
                    key["split"] = col.split
                row.append(self.cell(self.get(self._full(key), col.metric, col.leaf), col.scale, vmax.get(col, 1.0)))
            body.append(row)
        header = [scope_label if c == "scope" else ROW_LABELS[c] for c in shown] + [c.label for c in cols]
        groups = None
        if any(c.group for c in cols):
            groups = [("", len(shown))]
            for col in cols:
                if groups[-1][0] == (col.group or "") and len(groups) > 1:
                    groups[-1] = (groups[-1][0], groups[-1][1] + 1)
                else:
                    groups.append((col.group or "", 1))
        titles = [None] * len(shown) + [c.title for c in cols]
        return Table(caption=caption, header=header, rows=body, groups=groups, note=note, collapsed=collapsed,
                     name=name, header_titles=titles)

    @staticmethod
    def _full(ident: dict) -> dict:
        return {c: ident[c] if ident[c] is not None else "" for c in IDENTITY}

    def leftover_table(self, caption: str = "Other metrics") -> Table | None:
        """Every row no table of the section has shown, as a long table."""
        rest = [r for r in self.records if r["_rid"] not in self.used]
        if not rest:
            return None
        rows = []
        for rec in rest:
            rows.append([text_cell(str(rec[c]), header=c == "model")
                         for c in ("run", "model", "prompt", "split", "metric", "key")] + [self.cell(rec, None)])
        return Table(caption=caption, header=["run", "model", "prompt", "split", "metric", "key", "value"],
                     rows=rows, collapsed=True, name="other")


def error_cols(view: MetricView, *, group: str | None = None, split: str | None = None,
               metric: str = "error_rate") -> list[Col]:
    """Columns of ``error_rate`` (rows that failed before or inside the model call; they are left out of every
    other column): all kinds together, then one column per kind present (media, engine, describe, other); for the
    multiple-choice error rate, then ``forced_rate`` where chain-of-thought answers were recorded (the answers the
    label logits made because the reasoning named none)."""
    cols = []
    if view.has(metric):
        title = "share of predictions with an error (media decode, engine or describer failure): left out of accuracy"
        cols.append(Col("errors", metric, "", group=group, split=split, scale=None, title=title))
        cols += [Col(f"errors: {kind}", metric, kind, group=group, split=split, scale=None)
                 for kind in view.leaves(metric) if kind]
    if metric == "error_rate" and view.has("forced_rate"):
        cols.append(Col("forced (CoT)", "forced_rate", "", group=group, split=split, scale=None,
                        title="chain-of-thought answers whose reasoning named no answer: the label logits chose"))
    return cols


def series_label(view: MetricView, rec: dict, with_run: bool | None = None) -> str:
    """A model's name in plots: with its prompt and run when the report holds several (``with_run`` False: a panel
    that already names its runs' benchmark, where each model and prompt is one run)."""
    parts = [str(rec["model"])]
    if len(view.order["prompt"]) > 1:
        parts.append(str(rec["prompt"]))
    if with_run if with_run is not None else len(view.order["run"]) > 1:
        parts.append(str(rec["run"]))
    return " · ".join(parts)


def plot_series(view: MetricView, metric: str, leaves: Sequence[str], *, split: str, scope: str = "",
                xlabels: Sequence[str] | None = None, runs: Sequence[str] | None = None):
    """One ``plots.Series`` per run x model x prompt of ``split`` (of ``runs`` only, when given): the metric's value
    and interval per leaf. Labels name the run only where two series of one model and prompt need it."""
    from omnieval.report.plots import Series

    xlabels = list(xlabels or leaves)
    seen: dict[tuple, dict] = {}
    for rec in view.records:
        if rec["metric"] == metric and rec["split"] == split and rec["scope"] == scope and rec["leaf"] in leaves \
                and (runs is None or rec["run"] in runs):
            seen.setdefault((rec["run"], rec["model"], rec["prompt"]), rec)
    models_prompts = [(model, prompt) for _, model, prompt in seen]
    with_run = None if runs is None else len(set(models_prompts)) < len(models_prompts)
    ordered = sorted(seen.items(), key=lambda kv: (view.order["run"][kv[0][0]], view.order["model"][kv[0][1]],
                                                   view.order["prompt"][kv[0][2]]))
    out = []
    for (run, model, prompt), rec in ordered:
        points = []
        for leaf, x in zip(leaves, xlabels):
            r = view.index.get((run, model, prompt, split, scope, metric, leaf))
            values = (None, None, None) if r is None else (r["value"], r["ci_low"], r["ci_high"])
            points.append((x, *values))
        prompts = view.distinct("prompt")
        out.append(Series(series_label(view, rec, with_run), points, colour=view.order["model"][model],
                          style=prompts.index(prompt) if len(prompts) > 1 else None))
    return out
