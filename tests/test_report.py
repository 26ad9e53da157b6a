"""``omnieval report``: the report of the demo run checked number by number against its metrics tables, in headless
Chromium (no console message, tables and images present, sortable, screenshot not blank), and its sections against
hand-made metrics tables of the protocols the demo does not run."""

from __future__ import annotations

import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from omnieval.cli import main
from omnieval.report import report_command
from omnieval.report.browser import find_chromium, open_page
from omnieval.report.tables import FEW_CLUSTERS
from omnieval.stats.metrics import metrics_table
from omnieval.stats.read import read_predictions
from omnieval.stats.significance import stats_table

pytestmark = pytest.mark.slow
needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="chromium not installed: run scripts/setup_chromium.sh (CI installs it)")
ROW_ID = ("protocol", "model", "prompt", "split", "metric", "key")


class ReportPage(HTMLParser):
    """Tables (cells with their attributes, shown value and interval), images, sections, external references."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: list[dict] = []
        self.images: list[dict] = []
        self.sections: list[str] = []
        self.sources: list[str] = []
        self.figures: list[str] = []
        self._cell: dict | None = None
        self._span: str | None = None
        self._row: list | None = None
        self._caption = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if "src" in a or "href" in a:
            self.sources.append(a.get("src") or a.get("href"))
        if tag == "table":
            self.tables.append({"attrs": a, "rows": [], "caption": ""})
        elif tag == "caption":
            self._caption = True
        elif tag == "tr" and self.tables:
            self._row = []
            self.tables[-1]["rows"].append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = {"tag": tag, "attrs": a, "text": "", "v": "", "ci": ""}
            self._row.append(self._cell)
        elif tag == "span" and self._cell is not None:
            self._span = a.get("class")
        elif tag == "img":
            self.images.append(a)
        elif tag == "section":
            self.sections.append(a["id"])
        elif tag == "figure":
            self.figures.append(a.get("data-figure", ""))

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._cell = None
        elif tag == "caption":
            self._caption = False
        elif tag == "span":
            self._span = None

    def handle_data(self, data):
        if self._caption:
            self.tables[-1]["caption"] += data
        if self._cell is not None:
            self._cell["text"] += data
            if self._span in ("v", "ci"):
                self._cell[self._span] += data

    def cells(self, attr: str = "data-metric") -> list[dict]:
        return [c for t in self.tables for r in t["rows"] for c in r if attr in c["attrs"]]

    def body_rows(self) -> list[list[list[str]]]:
        """Per table, its body rows as the text each cell shows (value and interval joined by a space)."""
        out = []
        for t in self.tables:
            rows = [[f"{c['v']} {c['ci']}".strip() if c["v"] else c["text"].strip() for c in r]
                    for r in t["rows"] if any(c["tag"] == "td" for c in r)]
            out.append(rows)
        return out


def markdown_rows(text: str) -> list[list[list[str]]]:
    """Per Markdown table, its body rows as cell texts (escapes and bold markers removed)."""
    tables, current = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip().replace("\\|", "|").replace("\\\\", "\\") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if current is None:
            current = {"header": cells, "rows": []}
            tables.append(current)
        elif all(re.fullmatch(r"-+:?", c) for c in cells):
            continue
        else:
            current["rows"].append([c[2:-2] if c.startswith("**") and c.endswith("**") else c for c in cells])
    return [t["rows"] for t in tables]


def _close(text: str, value: float) -> bool:
    return abs(float(text) - value) <= 5e-4 + 1e-12


def assert_report_equals_metrics(page: ReportPage, metrics: pl.DataFrame) -> None:
    """Every metrics row is shown, with its value and interval; every number shown is a metrics row."""
    shown: dict[tuple, list[dict]] = {}
    for cell in page.cells():
        shown.setdefault(tuple(cell["attrs"][f"data-{c}"] for c in ROW_ID), []).append(cell)
    rows = {tuple(r[c] for c in ROW_ID): r for r in metrics.to_dicts()}
    assert set(shown) <= set(rows), f"cells with no metrics row: {sorted(set(shown) - set(rows))[:5]}"
    missing = set(rows) - set(shown)
    assert not missing, f"{len(missing)} metrics rows not in the report, e.g. {sorted(missing)[:5]}"
    for ident, cells in shown.items():
        row = rows[ident]
        for cell in cells:
            if row["value"] is None:  # a label: the key's last part is the text shown, marked as its intervals are
                few = 0 < _clusters(row) < FEW_CLUSTERS
                assert cell["v"] == row["key"].rsplit("/", 1)[-1] + (" ‡" if few else ""), ident
                continue
            assert float(cell["attrs"]["data-value"]) == row["value"], ident
            assert _close(cell["v"], row["value"]), (ident, cell["v"], row["value"])
            if row["ci_low"] is None or row["ci_high"] is None:
                assert cell["ci"] == "", ident
            else:
                low, high, few = re.fullmatch(r"\[(\S+), (\S+)\]( ‡)?", cell["ci"]).groups()
                assert _close(low, row["ci_low"]) and _close(high, row["ci_high"]), (ident, cell["ci"])
                # the mark of an interval on fewer than FEW_CLUSTERS clusters (resampling units), where the table
                # counts them (n_clusters; n_items in a table written before the unit was a choice)
                assert bool(few) == (0 < _clusters(row) < FEW_CLUSTERS), (ident, cell["ci"])
                assert f"n = {row['n']}" in cell["attrs"]["title"] and "95% CI" in cell["attrs"]["title"]


def _clusters(row: dict) -> int:
    """The clusters behind a metrics row: ``n_clusters``, else ``n_items`` (older tables), else none counted."""
    n = row.get("n_clusters")
    n = row.get("n_items") if n is None else n
    return FEW_CLUSTERS if n is None else n


# --- the demo run ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo(ray_session, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report-demo") / "demo"
    assert main(["demo", "--out", str(out), "--no-hf"]) == 0
    return out


@pytest.fixture(scope="module")
def demo_built(demo, tmp_path_factory) -> tuple[Path, dict]:
    """The demo's report, and its matplotlib figures by name (the figure whose PNG is ``figures/<name>.png``)."""
    from omnieval.report import plots

    out = tmp_path_factory.mktemp("report-out")
    drawn = []
    save = plots._png

    def keep(fig):
        png = save(fig)
        drawn.append((png, fig))
        return png

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "_png", keep)
        assert report_command([str(demo)], str(out)) == 0
    by_png = {png: fig for png, fig in drawn}
    figures = {p.stem: by_png[p.read_bytes()] for p in (out / "figures").glob("*.png")}
    return out, figures


@pytest.fixture(scope="module")
def demo_report(demo_built) -> Path:
    return demo_built[0]


@pytest.fixture(scope="module")
def demo_figures(demo_built) -> dict:
    return demo_built[1]


@pytest.fixture(scope="module")
def demo_page(demo_report) -> ReportPage:
    return ReportPage((demo_report / "report.html").read_text())


DEMO_RUNS = ("", "crossmodal", "spectrum", "contrastive")  # the demo's protocol folders (dissonance at the top)


def _demo_metrics(demo: Path) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(demo / sub / "metrics" / "metrics.parquet") for sub in DEMO_RUNS])


def test_report_numbers_equal_the_metrics_tables(demo, demo_report, demo_page):
    metrics = _demo_metrics(demo)
    assert set(metrics["protocol"].to_list()) == {"dissonance", "crossmodal", "spectrum", "contrastive"}
    assert_report_equals_metrics(demo_page, metrics)
    # the Markdown report shows the same cells as the HTML report, table by table
    html_rows = [rows for rows in demo_page.body_rows()]
    md_rows = markdown_rows((demo_report / "report.md").read_text())
    assert len(md_rows) == len(html_rows) and md_rows == html_rows
    # and the figures it references were written
    for name in re.findall(r"\]\(figures/([\w-]+)\.png\)", (demo_report / "report.md").read_text()):
        assert (demo_report / "figures" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_sections_plots_and_tests_of_the_demo(demo, demo_page):
    assert demo_page.sections[:3] == ["runs", "dissonance", "dissonance-anchors"]
    assert {"dissonance-open", "crossmodal", "crossmodal-tasks", "spectrum", "spectrum-categories", "contrastive",
            "significance", "significance-dissonance", "significance-crossmodal", "significance-spectrum",
            "significance-contrastive"} <= set(demo_page.sections)
    # every metric has its place in a protocol table: nothing fell through to "Other metrics"
    names = [t["attrs"].get("data-table") for t in demo_page.tables]
    assert set(names) == {"runs", "shown", "accuracy_k", "accuracy", "abstention", "calibration", "attribution",
                          "anchors-real", "anchors-synthetic", "directions", "directions-task", "directions-subtask",
                          "disparity", "disparity-scoped", "agreement", "spectrum", "spectrum-category",
                          "dependency", "dependency-category", "contrastive", "position", "pairs", "tests",
                          "dissonance-open", "dissonance-open-judges", "dissonance-open-abstention",
                          "dissonance-open-abstention-judges", "dissonance-gap", "dissonance-agreement",
                          "paired-models", "paired-modes", "paired-all", "power", "leaderboard"}
    table_1 = demo_page.tables[names.index("accuracy_k")]["rows"]
    assert [c["text"] for c in table_1[0]] == ["", "split real", "split synthetic"]
    assert [c["text"] for c in table_1[1]] == ["model", *(["k=0", "k=1", "k=2", "k=3", "invalid", "errors"] * 2)]
    assert set(demo_page.figures) == {"dissonance-k", "dissonance-reliability", "dissonance-shapley",
                                      "crossmodal-heatmap", "crossmodal-disparity", "spectrum-gains",
                                      "contrastive-bars", "dissonance-open-bars"}
    assert len(demo_page.images) == 8 and all(i["src"].startswith("data:image/png;base64,") for i in demo_page.images)
    # self-contained: nothing is fetched from anywhere
    assert all(s.startswith(("data:", "#")) for s in demo_page.sources), demo_page.sources
    # the significance numbers are the tests of the predictions (same seed and permutation count)
    tests = pl.concat([stats_table(read_predictions([demo / sub / "run" / "predictions.parquet"]))
                       for sub in DEMO_RUNS])
    by_id = {tuple(r[c] for c in ("protocol", "model", "prompt", "split", "test", "comparison")): r
             for r in tests.to_dicts()}
    cells = demo_page.cells("data-field")
    assert len(cells) >= 4 * len(tests)
    for cell in cells:
        a = cell["attrs"]
        row = by_id[tuple(a[f"data-{c}"] for c in ("protocol", "model", "prompt", "split", "test", "comparison"))]
        expected = row[a["data-field"]]
        if expected is None:
            assert a["data-value"] == ""
            continue
        sign = 1.0
        if "data-orientation" in a:  # model-pair matrix: row minus column
            first, second = a["data-orientation"].split(" - ")
            sign = 1.0 if row["model"] == f"{first} vs {second}" else -1.0
            assert row["model"] in (f"{first} vs {second}", f"{second} vs {first}")
        assert float(a["data-value"]) == sign * expected
    pairs = [c for c in cells if "data-orientation" in c["attrs"]]
    # both orientations of every pooled model-pair permutation test
    n_pairs = len(tests.filter((pl.col("test") == "permutation_models") & (pl.col("comparison") == "all")))
    assert n_pairs >= 5 and len(pairs) == 2 * n_pairs



def test_report_comparisons_equal_the_paired_and_power_tables(demo, demo_page):
    """Every paired-difference cell is a row of the runs' paired.parquet (difference, interval, adjusted p), the
    tests table shows the same interval beside its p, and the detectable effects are ``omnieval.stats.power``'s."""
    from omnieval.stats.power import power_table

    assert {"paired", "paired-dissonance", "paired-crossmodal"} <= set(demo_page.sections)
    paired = pl.concat([pl.read_parquet(demo / sub / "metrics" / "paired.parquet") for sub in DEMO_RUNS])
    ident = ("protocol", "comparison", "model", "prompt", "split", "a", "b")
    rows = {(*(r[c] for c in ident), r["metric"], r["key"]): r for r in paired.to_dicts()}
    cells = demo_page.cells("data-paired-metric")
    assert len(cells) >= len(paired)  # the long tables show every row, the matrices some again
    seen = set()
    for cell in cells:
        a = cell["attrs"]
        row = rows[(*(a[f"data-{c}"] for c in ident), a["data-paired-metric"], a["data-paired-key"])]
        seen.add(id(row))
        assert float(a["data-paired-value"]) == row["estimate"] and _close(cell["v"], row["estimate"])
        low, high, p = re.match(r"\[(\S+), (\S+)\] p=(\S+)", cell["ci"]).groups()
        assert _close(low, row["ci_low"]) and _close(high, row["ci_high"])
        assert float(p.removesuffix("*")) == pytest.approx(row["p_adjusted"], rel=5e-3, abs=1e-12)
        assert p.endswith("*") == (row["p_adjusted"] < 0.05)  # the p's own mark, apart from bold
        assert ("strong" in a["class"]) == (row["ci_low"] > 0 or row["ci_high"] < 0)  # bold: the interval
        assert cell["ci"].endswith("‡") == (row["n_clusters"] < FEW_CLUSTERS)
    assert len(seen) == len(paired) and {"models", "modes"} <= set(paired["comparison"])
    tests = [t for t in demo_page.tables if t["attrs"].get("data-table") == "tests"]
    with_ci = [r for t in tests for r in t["rows"] if len(r) > 7 and r[7]["text"].startswith("[")]
    assert with_ci  # model pairs per condition and multiple-choice vs open-ended carry their interval
    power = pl.concat([power_table(read_predictions([demo / sub / "run" / "predictions.parquet"]))
                       for sub in DEMO_RUNS])
    mde = {(r["prompt"], r["split"], r["key"]): r["mde"] for r in power.filter(pl.col("protocol") == "dissonance")
           .to_dicts()}
    shown = [c for t in demo_page.tables if t["attrs"].get("data-table") == "power" for r in t["rows"] for c in r
             if "data-mde" in c["attrs"]]
    dis = [c for c in shown if (c["attrs"]["data-power-prompt"], c["attrs"]["data-power-split"],
                                c["attrs"]["data-power-key"]) in mde]
    assert len(dis) == sum(v is not None for v in mde.values()) > 0
    for c in dis:
        a = c["attrs"]
        assert float(a["data-mde"]) == mde[(a["data-power-prompt"], a["data-power-split"], a["data-power-key"])]


def test_open_ended_subsection_and_cascade_marks(demo, demo_page):
    """Per-judge rows name their judge; every table that names models marks the cascade model (and only it)."""
    names = [t["attrs"].get("data-table") for t in demo_page.tables]
    judges = demo_page.tables[names.index("dissonance-open-judges")]["rows"]
    header = [c["text"] for c in judges[1]]
    col = header.index("judge")
    assert sorted({row[col]["text"] for row in judges[2:]}) == ["judge-careful", "judge-noisy"]
    marked = 0
    for table in demo_page.tables:
        head = next((r for r in table["rows"] if any(c["text"] == "model" for c in r)), None)
        if head is None:
            continue
        at = [c["text"] for c in head].index("model")
        for row in table["rows"]:
            if len(row) <= at:
                continue
            for part in row[at]["text"].strip().split(" vs "):
                if part.removesuffix(" †") == "sim-balanced+audio-desc":
                    assert part.endswith(" †") and "sim-describer:audio" in row[at]["attrs"].get("title", "")
                    marked += 1
                else:
                    assert not part.endswith("†"), part
    assert marked >= 10
    predictions = pl.read_parquet(demo / "run" / "predictions.parquet")
    assert predictions.filter(pl.col("model") == "sim-balanced+audio-desc")["intermediate_text"].null_count() == 0


def test_legends_lie_inside_their_figures_and_bar_plots_name_their_x_axis(demo_report, demo_figures):
    """Drawn again on an Agg canvas, every legend's window extent lies inside the figure's bbox, which is the saved
    PNG's size (nothing outside it is in the file); every bar plot (the open-ended ones included) labels its x axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    assert {"dissonance-reliability", "spectrum-gains", "dissonance-open-bars"} <= set(demo_figures)
    for name, fig in demo_figures.items():
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        with Image.open(demo_report / "figures" / f"{name}.png") as image:
            assert image.size == (int(fig.bbox.width), int(fig.bbox.height)), name  # Agg drops the fraction
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
        for legend in legends:
            box = legend.get_window_extent(canvas.get_renderer())
            assert box.x0 >= -0.5 and box.y0 >= -0.5, (name, box.bounds, fig.bbox.bounds)
            assert box.x1 <= fig.bbox.x1 + 0.5 and box.y1 <= fig.bbox.y1 + 0.5, (name, box.bounds, fig.bbox.bounds)
        if name.endswith("-bars") or name == "dissonance-shapley":
            labels = [ax.get_xlabel() for ax in fig.axes if ax.get_visible()]
            assert labels and all(labels), (name, labels)
    open_bars = demo_figures["dissonance-open-bars"]
    assert {ax.get_xlabel() for ax in open_bars.axes if ax.get_visible()} == {"corruption level k"}


def test_header_states_the_range_of_every_value_shown(demo, demo_page, demo_report):
    """The header gives every metric shown the range its protocol declares (``ProtocolMetrics.bounds_of``) and every
    value lies in it: fractions in [0, 1], differences in [-1, 1], disparity (a sum of two differences) in [-2, 2],
    reliance (a ratio of a difference to an accuracy) at most 1 with no lower bound; the protocols' notes follow."""
    from omnieval.protocols import metric_spec

    text = html.unescape((demo_report / "report.html").read_text())
    header = re.search(r"<header>(.*?)</header>", text, flags=re.S).group(1)
    assert "disparity, a sum of two differences, lies in [-2, 2]" in header
    assert "reliance" in header and "is at most 1 and has no lower bound" in header
    sentence = re.search(r"Each metric's values lie in the range its protocol declares: (.*?)\.", header).group(1)
    stated = {}
    for group in sentence.split("; "):
        names, where = re.match(r"(.*?) ((?:in|at most|at least) .*)$", group).groups()
        stated.update(dict.fromkeys(names.split(", "), where))
    expected = {"accuracy": "in [0, 1]", "shapley": "in [-1, 1]", "disparity": "in [-2, 2]",
                "reliance": "at most 1"}
    assert {m: stated[m] for m in expected} == expected
    metrics = _demo_metrics(demo)
    for cell in demo_page.cells():
        a = cell["attrs"]
        if a.get("data-value"):
            low, high = metric_spec(a["data-protocol"]).bounds_of(a["data-metric"])
            assert low <= float(a["data-value"]) <= high, a
            assert a["data-metric"] in stated, a
    # the header names only the metrics the runs have: a metrics folder without crossmodal has no disparity
    assert {"disparity", "reliance"} <= set(metrics["metric"].to_list())
    from omnieval.report import value_ranges
    from omnieval.report.inputs import load_runs

    alone = value_ranges(load_runs([str(demo / "spectrum" / "metrics")], resamples=50, seed=0, permutations=50))
    assert "disparity" not in alone and "reliance" not in alone and "intra" in alone and "in [-1, 1]" in alone


def test_captions_mention_only_what_their_table_shows(demo_page):
    """The calibration caption explains the confidence methods its rows have, and no other (the demo's models
    report ``rs`` only, so no ``tp`` is promised)."""
    table = next(t for t in demo_page.tables if t["attrs"].get("data-table") == "calibration")
    head = next(r for r in table["rows"] if any(c["text"] == "method" for c in r))
    col = [c["text"] for c in head].index("method")
    methods = {r[col]["text"] for r in table["rows"][table["rows"].index(head) + 1:]}
    assert methods == {"rs"}
    for method in ("rs", "tp"):
        assert (f"{method}: " in table["caption"]) == (method in methods), (method, table["caption"])
    assert_captions_promise_only_shown_columns(demo_page)


def assert_captions_promise_only_shown_columns(page: ReportPage) -> None:
    """A caption that speaks of errors heads a table with an errors column."""
    for table in page.tables:
        header = {c["text"] for r in table["rows"] for c in r if c["tag"] == "th"}
        if "errors" in table["caption"]:
            assert any(h.startswith("errors") for h in header), (table["attrs"], table["caption"])


@needs_chromium
def test_report_in_headless_chromium(demo_report, demo_page, tmp_path):
    shot = tmp_path / "report.png"
    result = open_page(demo_report / "report.html", screenshot=shot, width=1280, height=1600)
    assert result.returncode == 0, result.log[-2000:]
    assert result.console == [], result.console
    body = re.search(r"<body([^>]*)>", result.dom).group(1)
    assert 'data-ready="yes"' in body
    assert f'data-images-loaded="{len(demo_page.images)}"' in body  # every embedded plot decoded
    dom = ReportPage(result.dom)
    assert len(dom.tables) == len(demo_page.tables) >= 15
    assert len(dom.cells()) == len(demo_page.cells())
    from PIL import Image, ImageStat

    with Image.open(shot) as image:
        assert image.size == (1280, 1600)
        grey = image.convert("L")
        inked = sum(grey.histogram()[:240]) / (1280 * 1600)
        assert inked > 0.03 and ImageStat.Stat(grey).stddev[0] > 20


@needs_chromium
def test_report_tables_sort_in_the_browser(demo_report, tmp_path):
    probe = """<script>window.addEventListener('load', function () { setTimeout(function () {
      var t = document.querySelector('table[data-table="accuracy"]');
      var head = t.tHead.rows[t.tHead.rows.length - 1], col = -1;
      for (var i = 0; i < head.cells.length; i++) { if (head.cells[i].textContent === 'C111') { col = i; } }
      function order() { return Array.prototype.map.call(t.tBodies[0].rows, function (r) {
        return r.cells[col].getAttribute('data-sort') + '/' + r.cells[0].textContent; }).join(','); }
      document.body.setAttribute('data-before', order());
      head.cells[col].click();
      document.body.setAttribute('data-desc', order() + '|' + head.cells[col].getAttribute('aria-sort'));
      head.cells[col].click();
      document.body.setAttribute('data-asc', order() + '|' + head.cells[col].getAttribute('aria-sort'));
    }, 0); });</script></body>"""
    page = tmp_path / "probe.html"
    page.write_text((demo_report / "report.html").read_text().replace("</body>", probe))
    result = open_page(page)
    assert result.console == [], result.console
    attrs = dict(re.findall(r'data-(before|desc|asc)="([^"]*)"', re.search(r"<body[^>]*>", result.dom).group(0)))
    before = attrs["before"].split(",")
    desc, desc_dir = attrs["desc"].split("|")
    asc, asc_dir = attrs["asc"].split("|")
    values = [float(x.split("/")[0]) for x in desc.split(",")]
    assert desc_dir == "descending" and values == sorted(values, reverse=True)
    assert asc_dir == "ascending" and [float(x.split("/")[0]) for x in asc.split(",")] == sorted(values)
    assert sorted(desc.split(",")) == sorted(before) and len(before) == 6 and len(set(values)) > 1


@needs_chromium
def test_wide_tables_say_how_many_columns_are_out_of_view(demo_report, tmp_path):
    """At a 1280 px window, with every collapsed table opened, the page is no wider than the window (the contents line
    wraps), and a table whose wrapper scrolls sideways has a visible line above it giving the number of header
    columns whose right edge is beyond the wrapper's; one that fits has none. Scrolled to its end, the widest
    table's line turns to the columns on the left."""
    probe = """<script>window.addEventListener('load', function () { setTimeout(function () {
      document.querySelectorAll('details').forEach(function (d) { d.open = true; });
      function measure() { return Array.prototype.map.call(document.querySelectorAll('.table-wrap'), function (w) {
        var t = w.querySelector('table'), cue = w.previousElementSibling, box = w.getBoundingClientRect();
        var head = t.tHead.rows[t.tHead.rows.length - 1], out = 0;
        Array.prototype.forEach.call(head.cells, function (th) {
          if (th.getBoundingClientRect().right > box.right + 1) { out += 1; } });
        var shown = cue !== null && cue.tagName === 'P' && cue.getBoundingClientRect().height > 0
          && getComputedStyle(cue).visibility === 'visible';
        return {name: t.getAttribute('data-table'), scroll: w.scrollWidth, client: w.clientWidth, out: out,
                cells: head.cells.length, cue: shown ? cue.textContent : null};
      }); }
      setTimeout(function () {
        var before = measure(), widest = 0, wraps = document.querySelectorAll('.table-wrap');
        before.forEach(function (m, i) { if (m.scroll - m.client > before[widest].scroll - before[widest].client) {
          widest = i; } });
        var done = false;
        function finish() {  // after the page's own scroll handler (registered first), or at the latest in 2 s
          if (done) { return; }
          done = true;
          var root = document.documentElement;
          document.body.setAttribute('data-wraps', JSON.stringify({before: before, widest: widest,
            after: measure()[widest], page: [root.scrollWidth, root.clientWidth]}));
        }
        wraps[widest].addEventListener('scroll', finish);
        wraps[widest].scrollLeft = wraps[widest].scrollWidth;
        setTimeout(finish, 2000);
      }, 200);
    }, 0); });</script></body>"""
    import html
    import json

    page = tmp_path / "probe.html"
    page.write_text((demo_report / "report.html").read_text().replace("</body>", probe))
    result = open_page(page, width=1280, height=1000)
    assert result.console == [], result.console
    found = json.loads(html.unescape(re.search(r'data-wraps="([^"]*)"', result.dom).group(1)))
    assert found["page"][0] <= found["page"][1], found["page"]  # the page itself never scrolls sideways
    wide = [m for m in found["before"] if m["scroll"] > m["client"]]
    assert len(wide) >= 3, found["before"]  # the demo has tables wider than the page (e.g. the power table)
    for m in found["before"]:
        if m["scroll"] > m["client"] + 1:
            assert m["out"] >= 1 and m["cue"] is not None, m
            word = "column" if m["out"] == 1 else "columns"
            assert re.fullmatch(rf"Scroll the table right for {m['out']} more {word} \u2192", m["cue"]), m
        else:
            assert m["out"] == 0 and m["cue"] is None, m
    after, before = found["after"], found["before"][found["widest"]]
    assert after["out"] == 0 and after["cue"] is not None and after["cue"].endswith("to the left"), after
    left = int(re.search(r"(\d+) more", after["cue"]).group(1))
    assert 1 <= left < after["cells"] and before["out"] >= 2


@needs_chromium
def test_console_check_catches_a_broken_page(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>undefinedFunction();</script></body></html>")
    result = open_page(page)
    assert any("Uncaught ReferenceError" in m for m in result.console), result.log[-2000:]


def test_report_from_a_metrics_folder_uses_its_predictions(demo, tmp_path):
    """A metrics folder alone: only its protocol's section, tests from the predictions metrics.json names."""
    assert report_command([str(demo / "metrics")], str(tmp_path)) == 0
    page = ReportPage((tmp_path / "report.html").read_text())
    assert "dissonance" in page.sections and "crossmodal" not in page.sections
    assert "significance-dissonance" in page.sections and "significance-crossmodal" not in page.sections
    assert_report_equals_metrics(page, pl.read_parquet(demo / "metrics" / "metrics.parquet"))


def test_report_takes_a_stats_folder_beside_the_run(demo, tmp_path):
    """``omnieval stats --out ROOT/stats`` next to ``ROOT/metrics``: the report shows those tests, not new ones."""
    root = tmp_path / "study"
    shutil.copytree(demo / "metrics", root / "metrics")
    (root / "stats").mkdir()
    tests = stats_table(read_predictions([demo / "run" / "predictions.parquet"]), permutations=200)
    tests = tests.with_columns(p_adjusted=pl.when(pl.int_range(pl.len()) == 0).then(0.0123)
                               .otherwise(pl.col("p_adjusted")))
    tests.write_parquet(root / "stats" / "tests.parquet")
    assert report_command([str(root)], str(tmp_path / "out")) == 0
    page = ReportPage((tmp_path / "out" / "report.html").read_text())
    shown = [c for c in page.cells("data-field") if c["attrs"]["data-field"] == "p_adjusted"]
    assert len(shown) == len(tests) and sum(c["v"] == "0.0123*" for c in shown) == 1


def test_report_from_predictions_computes_metrics_and_compares_runs(demo, tmp_path):
    """Two runs of one protocol given as predictions only: metrics computed (equal to ``metrics_table``), shown side
    by side, and the paired tests between the runs' models."""
    source = demo / "crossmodal" / "run"
    baseline, candidate = tmp_path / "baseline", tmp_path / "candidate"
    for folder in (baseline, candidate):
        folder.mkdir()
        shutil.copy(source / "run.json", folder / "run.json")
    shutil.copy(source / "predictions.parquet", baseline / "predictions.parquet")
    preds = pl.read_parquet(source / "predictions.parquet")
    better = "sim-weak-audio"
    preds.with_columns(choice=pl.when(pl.col("model") == better).then(pl.col("target")).otherwise(pl.col("choice"))) \
        .write_parquet(candidate / "predictions.parquet")
    out = tmp_path / "report"
    assert report_command([str(baseline), str(candidate)], str(out), resamples=300, permutations=2000) == 0
    page = ReportPage((out / "report.html").read_text())
    expected = pl.concat([
        metrics_table(read_predictions([baseline / "predictions.parquet"]), resamples=300, seed=0)
        .with_columns(run=pl.lit("baseline")),
        metrics_table(read_predictions([candidate / "predictions.parquet"]), resamples=300, seed=0)
        .with_columns(run=pl.lit("candidate"))])
    cells = page.cells()
    assert {c["attrs"]["data-run"] for c in cells} == {"baseline", "candidate"}
    for run in ("baseline", "candidate"):
        sub = ReportPage.__new__(ReportPage)
        sub.tables = [{"rows": [[c for c in r if c["attrs"].get("data-run", run) == run] for r in t["rows"]]}
                      for t in page.tables]
        assert_report_equals_metrics(sub, expected.filter(pl.col("run") == run).drop("run"))
    directions = next(t for t in page.tables if t["attrs"].get("data-table") == "directions")
    assert [c["text"] for c in directions["rows"][1][:2]] == ["run", "model"]
    perfect = [c for c in cells if c["attrs"]["data-run"] == "candidate" and c["attrs"]["data-model"] == better
               and c["attrs"]["data-metric"] == "accuracy"]
    assert perfect and all(c["v"] == "1.000" for c in perfect)
    # the paired test between the runs: candidate minus baseline = mean per-item share of errors in the baseline
    base = read_predictions([baseline / "predictions.parquet"]).filter(pl.col("model") == better)
    per_item = base.group_by("item_id").agg((pl.col("choice") != pl.col("target")).cast(pl.Float64).mean())
    gain = float(per_item["choice"].mean())
    pair = [c for c in page.cells("data-orientation")
            if c["attrs"]["data-orientation"] == f"candidate:{better} - baseline:{better}"]
    assert len(pair) == 1 and gain > 0.1
    assert np.isclose(float(pair[0]["attrs"]["data-value"]), gain)


# --- the protocols the demo does not run: hand-made metrics tables --------------------------------------------

def handmade_metrics() -> pl.DataFrame:
    rows = []

    parts = ("leaf", "method", "judge", "scope_by", "scope_value", "n_inputs", "selection_type", "answer_modality")

    def add(protocol, model, metric, key, value, low=None, high=None, n=40, split="all", **kw):
        """A row with its key label and its key parts (``leaf`` the label where no part is given)."""
        named = kw or ({"leaf": key} if key else {})
        rows.append({"protocol": protocol, "model": model, "prompt": "zs", "split": split, "metric": metric,
                     "key": key, "value": value, "ci_low": low, "ci_high": high, "n": n,
                     "n_items": None, "n_clusters": None, **{p: named.get(p, "") for p in parts}})

    for i, model in enumerate(["m-vision", "m-text", "ensemble"]):
        for scope in ("", "charts/", "maps/"):
            category = {"scope_by": "category", "scope_value": scope.rstrip("/")} if scope else {}
            acc = {"normal": 0.8 - 0.1 * i, "image_only": 0.7 - 0.2 * i, "text_only": 0.3 + 0.1 * i,
                   "random": 0.25}
            for condition, v in acc.items():
                add("spectrum", model, "accuracy", scope + condition, v, v - 0.05, v + 0.05, leaf=condition,
                    **category)
                # rotated copies of each question: CircularEval is at most the accuracy
                add("spectrum", model, "circular_accuracy", scope + condition, 0.7 * v, 0.7 * v - 0.05, 0.7 * v + 0.05,
                    leaf=condition, **category)
            add("spectrum", model, "chance", scope.rstrip("/"), 0.25, None, None, **category, leaf="")
            for m in ("image", "text"):
                gain = acc[f"{m}_only"] - 0.25
                add("spectrum", model, "intra", scope + m, gain, gain - 0.05, gain + 0.05, leaf=m, **category)
            add("spectrum", model, "inter", scope.rstrip("/"), 0.1, 0.02, 0.18, **category, leaf="")
            add("spectrum", model, "perceptual_score", scope + "image", acc["normal"] - acc["text_only"], 0.3, 0.5,
                leaf="image", **category)
            add("spectrum", model, "perceptual_score", scope + "text", acc["normal"] - acc["image_only"], 0.0, 0.3,
                leaf="text", **category)
            label = "image-intra" if i < 2 else "image-intra+text-intra"
            add("spectrum", model, "dependency", scope + label, None, leaf=label, **category)
        add("spectrum", model, "invalid_rate", "", 0.01 * i, 0.0, 0.02)
    for model in ("clip-like", "clip-like+captions"):
        subsets = {"n=2": ("n_inputs", "2"), "n=3": ("n_inputs", "3"), "n=4": ("n_inputs", "4"),
                   "selection=random": ("selection_type", "random"), "selection=similar": ("selection_type", "similar"),
                   "modality=audio": ("answer_modality", "audio"), "modality=image": ("answer_modality", "image")}
        add("contrastive", model, "accuracy", "all", 0.6, 0.5, 0.7, leaf="")
        for key, v in {"n=2": 0.7, "n=3": 0.55, "n=4": 0.5, "selection=random": 0.7,
                       "selection=similar": 0.5, "modality=audio": 0.4, "modality=image": 0.8}.items():
            add("contrastive", model, "accuracy", key, v, v - 0.1, v + 0.1, **dict([subsets[key]]))
        add("contrastive", model, "permutation_consistency", "", 0.3, 0.2, 0.4)
        for label, v in zip("ABCD", (0.1, -0.02, -0.05, -0.03)):
            add("contrastive", model, "position_bias", label, v, v - 0.03, v + 0.03)
        add("contrastive", model, "invalid_rate", "", 0.0, 0.0, 0.0)
        add("contrastive", model, "a_future_metric", "x", 0.5, 0.4, 0.6)
    add("newproto", "m1", "accuracy", "cond-a", 0.5, 0.4, 0.6)
    add("newproto", "m1", "invalid_rate", "", 0.0, 0.0, 0.0)
    return pl.DataFrame(rows, schema={"protocol": pl.Utf8, "model": pl.Utf8, "prompt": pl.Utf8, "split": pl.Utf8,
                                      "metric": pl.Utf8, "key": pl.Utf8, "value": pl.Float64, "ci_low": pl.Float64,
                                      "ci_high": pl.Float64, "n": pl.Int64, "n_items": pl.Int64,
                                      "n_clusters": pl.Int64, **dict.fromkeys(parts, pl.Utf8)})


def test_report_sections_of_handmade_spectrum_and_contrastive_metrics(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    metrics = handmade_metrics()
    metrics.write_parquet(folder / "metrics.parquet")
    assert report_command([str(folder)], str(tmp_path / "out")) == 0
    page = ReportPage((tmp_path / "out" / "report.html").read_text())
    assert page.sections == ["runs", "spectrum", "spectrum-categories", "contrastive", "newproto"]
    assert_report_equals_metrics(page, metrics)
    assert page.figures == ["spectrum-gains", "contrastive-bars"]
    assert_captions_promise_only_shown_columns(page)  # the hand-made metrics have no error_rate rows
    dependency = {(c["attrs"]["data-model"], c["attrs"]["data-key"]): c["v"] for c in page.cells()
                  if c["attrs"]["data-metric"] == "dependency"}
    assert dependency[("ensemble", "image-intra+text-intra")] == "image-intra+text-intra"
    assert dependency[("m-text", "maps/image-intra")] == "image-intra"
    # circular accuracy: overall keys in the main table, category keys in the per-category table
    circular = {t["attrs"].get("data-table"): {c["attrs"]["data-key"] for r in t["rows"] for c in r
                                               if c["attrs"].get("data-metric") == "circular_accuracy"}
                for t in page.tables}
    assert circular["spectrum"] == {"normal", "image_only", "text_only", "random"}
    assert circular["spectrum-category"] == {f"{s}/{c}" for s in ("charts", "maps")
                                             for c in ("normal", "image_only", "text_only", "random")}
    other = next(t for t in page.tables if t["attrs"].get("data-table") == "other")
    assert {c["attrs"]["data-metric"] for r in other["rows"] for c in r if "data-metric" in c["attrs"]} == \
        {"a_future_metric"}
    # signed metrics whose interval excludes 0 are bold; intervals containing 0 are not
    bias = {c["attrs"]["data-key"]: c for c in page.cells() if c["attrs"]["data-metric"] == "position_bias"}
    assert "strong" in bias["A"]["attrs"]["class"] and "strong" not in bias["B"]["attrs"]["class"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert markdown_rows(md) == page.body_rows()
    assert "| m-vision | charts | 0.800 [0.750, 0.850] |" in md


def test_report_rejects_a_folder_without_runs(tmp_path):
    from omnieval.core.schema import InputError

    with pytest.raises(InputError, match="no predictions.parquet or metrics.parquet"):
        report_command([str(tmp_path)], str(tmp_path / "out"))


def test_every_metric_the_demo_emits_is_defined_in_the_reference(demo):
    """docs/reference.md defines each metric name every protocol writes (read from the demo's own metrics tables),
    in that protocol's section or among the metrics common to all protocols."""
    import polars as pl

    doc = (Path(__file__).resolve().parents[1] / "docs" / "reference.md").read_text()
    sections = {}
    for block in re.split(r"\n## ", doc)[1:]:
        title, body = block.split("\n", 1)
        sections[title] = set(re.findall(r"^\| `(\w+)`", body, flags=re.M))
        sections[title] |= {m for line in body.splitlines() if line.startswith("| `")
                            for m in re.findall(r"`(\w+)`", line.split("|")[1])}
    common = set().union(*(v for k, v in sections.items() if k.startswith(("Statistics common", "Open-ended"))))
    emitted = pl.concat([pl.read_parquet(p).select("protocol", "metric") for p in demo.rglob("metrics.parquet")],
                        how="vertical_relaxed").unique()
    missing = []
    for protocol, metric in emitted.iter_rows():
        own = next(v for k, v in sections.items() if k.startswith(f"Protocol `{protocol}`"))
        if metric not in own | common:
            missing.append((protocol, metric))
    assert not missing and emitted.height > 20, missing
