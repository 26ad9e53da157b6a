"""The report's plots, drawn with matplotlib's Agg canvas (no display, no server) and returned as PNG bytes.

Every plot takes plain series: ``Series(label, points)`` where a point is ``(x, value, ci_low, ci_high)``. Colours
are the Okabe-Ito palette (distinguishable with colour-vision deficiencies) and every series also has its own marker
or hatch, so the plots read in greyscale print; heatmaps use cividis.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--", "++")
DPI = 90


@dataclass
class Series:
    """``colour`` and ``style`` (palette and marker/hatch indices) keep one model's colour across its prompt styles
    (``style`` tells the prompts apart); left None, a series takes its position's."""

    label: str
    points: list[tuple[str, float | None, float | None, float | None]]  # (x, value, ci_low, ci_high)
    colour: int | None = None
    style: int | None = None

    def look(self, i: int) -> tuple[str, str, str]:
        """(colour, marker, hatch) of the series drawn ``i``-th."""
        c = i if self.colour is None else self.colour
        k = i if self.style is None else self.style
        return PALETTE[c % len(PALETTE)], MARKERS[k % len(MARKERS)], HATCHES[k % len(HATCHES)]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)  # a renderer to measure text with (the legend's width) before drawing
    fig.set_facecolor("white")
    return fig


def _style(ax) -> None:
    ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=8)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _errors(points) -> tuple[list[float], list[list[float]]]:
    """Values and asymmetric error-bar lengths (0 where no interval)."""
    vals, lo, hi = [], [], []
    for _, v, low, high in points:
        v = v if _finite(v) else math.nan
        vals.append(v)
        lo.append(max(0.0, v - low) if _finite(low) and _finite(v) else 0.0)
        hi.append(max(0.0, high - v) if _finite(high) and _finite(v) else 0.0)
    return vals, [lo, hi]


def _legend(fig, axes, n: int) -> None:
    """One legend for every panel: each label once, from whichever panel draws it (panels of different
    benchmarks hold different runs; the first panel's labels alone would name its runs under every panel)."""
    found: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    if found:
        _fit_legend(fig, list(found.values()), list(found), min(4, max(1, n, len(found))))


def _fit_legend(fig, handles, labels, ncols: int) -> None:
    """A legend below the axes that lies inside the figure: constrained layout makes room for its height but not its
    width, so with long labels the columns are cut to what fits, the figure grows by the rows added, and a single
    column still too wide widens the figure."""
    base_height = fig.get_figheight()
    legend = None
    for cols in range(max(1, ncols), 0, -1):
        if legend is not None:
            legend.remove()
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=cols, fontsize=8, frameon=False)
        width = legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi
        if width <= fig.get_figwidth() - 0.2:
            break
    if width > fig.get_figwidth() - 0.2:
        fig.set_figwidth(width + 0.3)
    rows = math.ceil(len(labels) / cols)
    first_rows = math.ceil(len(labels) / max(1, ncols))
    fig.set_figheight(base_height + 0.2 * (rows - first_rows))


def line_panels(panels: Sequence[tuple[str, str, list[Series], Series | None]], xlabel: str,
                ylim: tuple[float, float] | None = (0.0, 1.0), ncols: int | None = None) -> bytes:
    """One axis per panel ``(title, ylabel, series, reference)``: lines with CI error bars over categorical x; the
    reference series (e.g. the human abstention target) is drawn dashed in black."""
    ncols = ncols or len(panels)
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(3.3 * ncols + 0.4, 2.6 * nrows + 0.5)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    n_series = 0
    for ax, (title, ylabel, series, reference) in zip(axes, panels):
        _style(ax)
        n_series = max(n_series, len(series))
        for i, s in enumerate(series):
            xs = [p[0] for p in s.points]
            vals, err = _errors(s.points)
            colour, marker, _ = s.look(i)
            ax.errorbar(xs, vals, yerr=err, label=s.label, color=colour,
                        marker=marker, markersize=5, linewidth=1.5, capsize=3, elinewidth=0.9)
        if reference is not None:
            ax.plot([p[0] for p in reference.points], [p[1] for p in reference.points], color="black",
                    linestyle="--", marker="x", linewidth=1.2, label=reference.label)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        if ylim:
            ax.set_ylim(ylim[0] - 0.03, ylim[1] + 0.03)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    handles, labels = {}, []
    for ax in axes[: len(panels)]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    if handles:
        _fit_legend(fig, [handles[lab] for lab in labels], labels, min(4, len(labels)))
    return _png(fig)


def bar_panels(panels: Sequence[tuple[str, str, list[Series], str]], ncols: int | None = None,
               ylim: tuple[float, float] | None = None) -> bytes:
    """Grouped bars per panel ``(title, ylabel, series, xlabel)``: x groups are the points' x, one bar per series,
    with CI error bars and a zero line; the x label says what the groups are."""
    ncols = ncols or len(panels)
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(3.4 * ncols + 0.4, 2.6 * nrows + 0.5)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    n_series = 0
    for ax, (title, ylabel, series, xlabel) in zip(axes, panels):
        _style(ax)
        n_series = max(n_series, len(series))
        groups = list(dict.fromkeys(p[0] for s in series for p in s.points))
        width = 0.8 / max(1, len(series))
        for i, s in enumerate(series):
            by_x = {p[0]: p for p in s.points}
            pts = [by_x.get(g, (g, None, None, None)) for g in groups]
            vals, err = _errors(pts)
            xs = [j - 0.4 + width * (i + 0.5) for j in range(len(groups))]
            colour, _, hatch = s.look(i)
            ax.bar(xs, vals, width=width * 0.92, yerr=err, capsize=2.5, label=s.label,
                   color=colour, hatch=hatch, edgecolor="black",
                   linewidth=0.5, error_kw={"elinewidth": 0.9})
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(groups)), groups, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        if ylim:
            ax.set_ylim(*ylim)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    _legend(fig, axes, n_series)
    return _png(fig)


def heatmap(rows: list[str], cols: list[str], values: list[list[float | None]], title: str,
            cbar_label: str = "accuracy") -> bytes:
    """An annotated cividis heatmap over [0, 1] (e.g. models x directions)."""
    import numpy as np

    fig = _figure(1.0 + 0.75 * len(cols) + 1.6, 0.9 + 0.42 * len(rows))
    ax = fig.add_subplot()
    data = np.array([[math.nan if v is None else v for v in row] for row in values], dtype=float)
    image = ax.imshow(data, cmap="cividis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    for i in range(len(rows)):
        for j in range(len(cols)):
            if math.isfinite(data[i, j]):
                ax.text(j, i, f"{data[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if data[i, j] > 0.55 else "white")
    ax.set_title(title, fontsize=9)
    bar = fig.colorbar(image, ax=ax, fraction=0.05)
    bar.set_label(cbar_label, fontsize=8)
    bar.ax.tick_params(labelsize=7)
    return _png(fig)


def reliability(panels: Sequence[tuple[str, list[tuple[str, list[float], list[float], list[int]]]]]) -> bytes:
    """Reliability diagrams: per panel ``(title, [(label, mean confidence per bin, accuracy per bin, count per
    bin)])``, the diagonal is perfect calibration; marker area grows with the bin's count."""
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(3.2 * ncols + 0.4, 3.0 * nrows + 0.5)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    n_series = 0
    for ax, (title, series) in zip(axes, panels):
        _style(ax)
        ax.grid(True, axis="x", color="#dddddd", linewidth=0.6)
        ax.plot([0, 1], [0, 1], color="#777777", linestyle=":", linewidth=1.0)
        n_series = max(n_series, len(series))
        for i, (label, conf, acc, count) in enumerate(series):
            total = max(1, sum(count))
            sizes = [12 + 160 * c / total for c in count]
            ax.plot(conf, acc, color=PALETTE[i % len(PALETTE)], linewidth=1.2, label=label)
            ax.scatter(conf, acc, s=sizes, color=PALETTE[i % len(PALETTE)], marker=MARKERS[i % len(MARKERS)],
                       edgecolor="black", linewidth=0.4, zorder=3)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("confidence", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
        ax.set_title(title, fontsize=9)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    _legend(fig, axes, n_series)
    return _png(fig)
