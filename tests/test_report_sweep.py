"""The report of a sweep over two spectrum benchmarks (an MMAU-like audio one, split ``test-mini``; an
OmniVideoBench-like video and audio one, split ``all``) with three simulated models, each model one run per benchmark
as a sweep writes them: every section and figure checked against a recount from the runs' ``predictions.parquet``,
against the metrics' declared bounds, and in headless Chromium (screenshot: docs/report-sweep.png)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from statsmodels.stats.multitest import multipletests

from omnieval.cli import main
from omnieval.report import plots
from omnieval.report.browser import find_chromium, open_page
from omnieval.report.inputs import load_runs, protocol_inputs
from tests.omni_release_run import make_clips
from tests.test_report import ReportPage

pytestmark = pytest.mark.slow
needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="chromium not installed: run scripts/setup_chromium.sh (CI installs it)")
BENCHMARKS = {"mmau": ("mmau-like", "test-mini", ("audio",)),
              "ovb": ("omnivideobench-like", "all", ("video", "audio"))}
MODELS = [{"name": "sim-sight", "engine": "simulated", "options": {"seed": 3, "reliance": {"video": 0.9}}},
          {"name": "sim-sound", "engine": "simulated", "options": {"seed": 4, "reliance": {"audio": 0.95}}},
          {"name": "sim-text", "engine": "simulated", "options": {"seed": 5, "reliance": {"text": 0.9}}}]
N_ITEMS = 18


def _benchmark(folder: Path, clips: list[dict], name: str, split: str, kinds: tuple[str, ...]) -> None:
    """A spectrum benchmark laid out as a converter writes one: items.jsonl and benchmark.json with its name."""
    lines = []
    for i in range(N_ITEMS):
        clip = clips[i % len(clips)]
        media = {}
        for kind in kinds:
            source = clip["sound"] if kind == "audio" else clip["picture"]
            target = folder / "media" / f"{kind}{i % len(clips)}{source.suffix}"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            media[kind] = str(target.relative_to(folder))
        lines.append(json.dumps({"item_id": f"{name}-{i:03d}", "benchmark": name, "split": split,
                                 "question": f"Question {i}?", "options": ["one", "two", "three", "four"],
                                 "answer": "ABCD"[i % 4], "media": media, "category": "xy"[i % 2]}))
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "benchmark.json").write_text(json.dumps({"name": name, "protocol": "spectrum", "split": split,
                                                       "n_items": N_ITEMS}))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    base = tmp_path_factory.mktemp("sweep-report")
    clips = make_clips(base / "clips", 6)
    for entry, (name, split, kinds) in BENCHMARKS.items():
        _benchmark(base / entry, clips, name, split, kinds)
    config = {"name": "two", "output": str(base / "out"), "prompts": ["zs"], "models": MODELS,
              "protocols": [{"protocol": "spectrum", "benchmark": str(base / e), "name": e} for e in BENCHMARKS],
              "decode": {"num_frames": 2, "max_side": 32}, "metrics": {"resamples": 300}}
    (base / "sweep.yaml").write_text(yaml.safe_dump(config))
    assert main(["sweep", str(base / "sweep.yaml")]) == 0
    assert main(["report", str(base / "out"), "--out", str(base / "report"), "--resamples", "300",
                 "--permutations", "300"]) == 0
    return base


@pytest.fixture(scope="module")
def page(sweep) -> ReportPage:
    return ReportPage((sweep / "report" / "report.html").read_text())


@pytest.fixture(scope="module")
def spectrum(sweep):
    (data,) = protocol_inputs(load_runs([str(sweep / "out")], resamples=300, permutations=300), resamples=300,
                              permutations=300)
    return data


def _predictions(sweep: Path, entry: str, model: str) -> pl.DataFrame:
    return pl.read_parquet(sweep / "out" / "runs" / entry / model / "zs" / "predictions.parquet")


def _accuracy(rows: pl.DataFrame, condition: str | None = None) -> float:
    """Share right among the valid answers (the metrics' accuracy), of one condition or pooled over all."""
    if condition is not None:
        rows = rows.filter(pl.col("condition") == condition)
    rows = rows.filter(pl.col("choice").is_not_null())
    return float((rows["choice"] == rows["target"]).mean())


def _table(page: ReportPage, caption_start: str) -> dict:
    return next(t for t in page.tables if t["caption"].startswith(caption_start))


def test_benchmarks_are_named_by_name_beside_their_split(page):
    for name, split, _ in BENCHMARKS.values():
        _table(page, f"Paired differences: model pairs, {name}, split {split}")
        _table(page, f"Model pairs, prompt zs, {name}, split {split}")
    power = next(t for t in page.tables if t["attrs"].get("data-table") == "power")
    named = {r[1]["text"].strip() for r in power["rows"][1:]}
    assert named == {f"{name}, split {split}" for name, split, _ in BENCHMARKS.values()}


def test_a_benchmark_matrix_shows_only_the_metrics_its_pairs_have(page):
    """The audio-only benchmark has no video: its matrix has no ``intra video`` column of dashes, the video one has."""
    audio = _table(page, "Paired differences: model pairs, mmau-like, split test-mini")
    both = _table(page, "Paired differences: model pairs, omnivideobench-like, split all")
    audio_header = [c["text"].strip() for c in audio["rows"][0]]
    both_header = [c["text"].strip() for c in both["rows"][0]]
    assert "intra audio" in audio_header and "intra video" not in audio_header
    assert {"intra audio", "intra video"} <= set(both_header)


def test_gains_figure_has_one_panel_per_benchmark_with_its_own_runs(sweep, spectrum, monkeypatch):
    """Each panel holds the runs of its benchmark only, its bars the intra gains recounted from their predictions
    (accuracy with m only minus accuracy with everything shuffled), and the legend names models, not runs."""
    from omnieval.report import spectrum as spectrum_report

    drawn, legends = [], []
    monkeypatch.setattr(plots, "_fit_legend", lambda fig, handles, labels, ncols: legends.append(list(labels)))
    real = plots.bar_panels
    monkeypatch.setattr(spectrum_report.plots, "bar_panels", lambda panels, **kw: drawn.extend(panels) or
                        real(panels, **kw))
    spectrum_report.section(spectrum)
    assert [title for title, *_ in drawn] == ["mmau-like, split test-mini", "omnivideobench-like, split all"]
    for (title, _, series, _), (entry, (name, split, kinds)) in zip(drawn, sorted(BENCHMARKS.items()), strict=True):
        assert title == f"{name}, split {split}"
        assert [s.label for s in series] == [m["name"] for m in MODELS]
        for s in series:
            rows = _predictions(sweep, entry, s.label)
            for x, value, _, _ in s.points:
                assert value == pytest.approx(_accuracy(rows, f"{x}_only") - _accuracy(rows, "random"), abs=1e-12)
            assert {x for x, *_ in s.points} == {*kinds, "text"}
    assert legends == [[m["name"] for m in MODELS]]


def test_no_ensemble_rows_where_the_metrics_have_no_ensemble(page, spectrum):
    """Each run holds one model, so no accuracy table has an ensemble row: neither do the comparisons and tests,
    and their adjusted p-values are Benjamini-Hochberg over the rows kept (statsmodels, per family)."""
    assert "ensemble" not in set(spectrum.metrics["model"].to_list())
    assert not any("ensemble" in c["text"] for t in page.tables for r in t["rows"] for c in r)
    paired = spectrum.paired
    for _, family in paired.group_by("comparison", "model", "prompt", "split"):
        family = family.filter(pl.col("p_value").is_not_null())
        expected = multipletests(family["p_value"].to_numpy(), method="fdr_bh")[1]
        assert np.allclose(family["p_adjusted"].to_numpy(), expected)
    tests = spectrum.tests.filter(pl.col("test") == "permutation_models")
    for _, family in tests.group_by("prompt", "split"):
        expected = multipletests(family["p_value"].to_numpy(), method="fdr_bh")[1]
        assert np.allclose(family["p_adjusted"].to_numpy(), expected)


def test_comparisons_and_significance_each_say_what_their_difference_is(sweep, page):
    """The Comparisons matrix shows one condition's accuracy (normal), the Significance matrix the accuracy pooled
    over every condition: both recounted from the predictions, and each caption says which it is."""
    for entry, (name, split, _) in BENCHMARKS.items():
        rows = {m["name"]: _predictions(sweep, entry, m["name"]) for m in MODELS}
        conditions = rows["sim-sight"]["condition"].unique().to_list()
        matrix = _table(page, f"Paired differences: model pairs, {name}, split {split}")
        header = [c["text"].strip() for c in matrix["rows"][0]]
        col = header.index("accuracy normal")
        tests = _table(page, f"Model pairs, prompt zs, {name}, split {split}: accuracy pooled over all "
                             f"{len(conditions)} conditions")
        names = [c["text"].strip() for c in tests["rows"][0]]
        for a, b in (("sim-sight", "sim-sound"), ("sim-sight", "sim-text"), ("sim-sound", "sim-text")):
            label = f"{entry}/{a} − {entry}/{b}"
            row = next(r for r in matrix["rows"] if r[0]["text"].strip() == label)
            one = _accuracy(rows[a], "normal") - _accuracy(rows[b], "normal")
            assert float(row[col]["attrs"]["data-paired-value"]) == pytest.approx(one, abs=1e-12)
            pooled_row = next(r for r in tests["rows"] if r[0]["text"].strip() == f"{entry}/{a}")
            pooled = pooled_row[names.index(f"{entry}/{b}")]
            expected = _accuracy(rows[a]) - _accuracy(rows[b])  # every condition has every item: equal weights
            assert float(pooled["attrs"]["data-value"]) == pytest.approx(expected, abs=1e-12)
    text = html.unescape((sweep / "report" / "report.html").read_text())
    assert "that condition's accuracy alone, not pooled over conditions" in text


def _interval(ci: str) -> tuple[float, float]:
    low, high = re.search(r"\[(-?[\d.]+), (-?[\d.]+)\]", ci).groups()
    return float(low), float(high)


def test_one_marking_rule_bold_by_interval_and_p_marked_apart(page, spectrum):
    """Every difference with an interval is bold exactly when the interval excludes 0 (paired cells, tests table,
    gains); an adjusted p carries * exactly when below 0.05 (read from the paired table); the header says so."""
    strong = 0
    paired = {(r["a"], r["b"], r["prompt"], r["split"], r["metric"], r["key"]): r
              for r in spectrum.paired.iter_rows(named=True)}
    for table in page.tables:
        for row in table["rows"]:
            for cell in row:
                a = cell["attrs"]
                is_strong = "strong" in a.get("class", "")
                if "data-paired-value" in a:
                    ref = paired[(a["data-a"], a["data-b"], a["data-prompt"], a["data-split"],
                                  a["data-paired-metric"], a["data-paired-key"])]
                    assert is_strong == (ref["ci_low"] > 0 or ref["ci_high"] < 0), a
                    p = re.search(r"p=([^ ]+)", cell["ci"]).group(1)
                    assert p.endswith("*") == (ref["p_adjusted"] < 0.05), (p, ref["p_adjusted"])
                    strong += is_strong
                elif a.get("data-metric") in ("intra", "inter", "perceptual_score") and a.get("data-ci-low"):
                    low, high = float(a["data-ci-low"]), float(a["data-ci-high"])
                    assert is_strong == (low > 0 or high < 0), a
                elif a.get("data-field") == "estimate" and table["attrs"].get("data-table") == "tests":
                    ci = row[[c["attrs"].get("data-field") for c in row].index("estimate") + 1]["text"].strip()
                    assert is_strong == (ci != "—" and (_interval(ci)[0] > 0 or _interval(ci)[1] < 0)), (a, ci)
                elif a.get("data-field") == "estimate":  # the pooled model pairs: no interval, so never bold
                    assert not is_strong and re.fullmatch(r"p=[^ ]+", cell["ci"].strip()), cell
    assert strong >= 3


def test_header_states_each_metrics_declared_range_and_every_value_lies_in_it(sweep, page, spectrum):
    """The header gives each metric the range its protocol declares (``ProtocolMetrics.bounds``), paired
    differences twice that width; every value in the metrics files and every paired difference lies within."""
    from omnieval.protocols.spectrum import metrics_spec

    bounds = metrics_spec().bounds
    text = html.unescape(re.search(r"<header>(.*?)</header>", (sweep / "report" / "report.html").read_text(),
                                   flags=re.S).group(1))
    assert "accuracy, chance, invalid_rate, error_rate in [0, 1]" in text
    assert "intra, inter, perceptual_score in [-1, 1]" in text
    assert "accuracy in [-1, 1]; intra, inter in [-2, 2]" in text
    assert bounds["intra"] == bounds["inter"] == bounds["perceptual_score"] == (-1.0, 1.0)
    assert "bold when the 95% interval excludes 0" in text and "carries * when below 0.05" in text
    for path in (sweep / "out" / "runs").glob("*/*/zs/metrics/metrics.parquet"):
        for r in pl.read_parquet(path).filter(pl.col("value").is_not_null()).iter_rows(named=True):
            low, high = bounds.get(r["metric"], (0.0, 1.0))
            assert low <= r["value"] <= high and low <= r["ci_low"] <= r["ci_high"] <= high, r
    for r in spectrum.paired.iter_rows(named=True):
        low, high = bounds[r["metric"]]
        assert low - high <= r["ci_low"] <= r["estimate"] <= r["ci_high"] <= high - low, r


def test_dependency_label_says_why_from_the_metrics_file(sweep, page):
    """Each label's 'why' lists the intra intervals of that run's metrics.parquet, and the modalities named in the
    label are those whose interval there lies above 0 (the definition of docs/reference.md)."""
    table = _table(page, "Dependency label")
    header = [c["text"].strip() for c in table["rows"][0]]
    for row in table["rows"][1:]:
        cells = dict(zip(header, (c["text"].strip() for c in row), strict=True))
        entry, model, _ = cells["run"].split("/")
        metrics = pl.read_parquet(sweep / "out" / "runs" / entry / model / "zs" / "metrics" / "metrics.parquet")
        intra = metrics.filter((pl.col("metric") == "intra") & ~pl.col("key").str.contains("/"))
        above = sorted(k for k, low in zip(intra["key"], intra["ci_low"], strict=True) if low > 0)
        for key, low, high in intra.select("key", "ci_low", "ci_high").iter_rows():
            assert f"{key} [{low:.3f}, {high:.3f}]" in cells["why"]
        label = cells["dependency"].removesuffix(" ‡")
        if above:
            assert sorted(p.removesuffix("-intra") for p in label.split("+")) == above, cells
        else:
            assert label in ("at-chance", "inter-only") and "no intra interval above 0" in cells["why"]
    by_run = {r[0]["text"].strip(): r[-2]["text"].strip().removesuffix(" ‡") for r in table["rows"][1:]}
    assert by_run["mmau/sim-text/zs"] == "text-intra" and by_run["ovb/sim-sight/zs"] == "video-intra"


@needs_chromium
def test_sweep_report_in_the_browser_pair_labels_stay_inside_their_tables(sweep, page, tmp_path):
    """Headless Chromium at 1200 px: no console message, every figure decodes, and every row label of the pair
    tables lies inside its table and its table inside its wrapper (no sideways scroll). The screenshot of the
    comparisons and the gains figure is docs/report-sweep.png (written when OMNIEVAL_SCREENSHOTS names a folder)."""
    import os

    probe = """<script>window.addEventListener('load', function () { setTimeout(function () {
      document.querySelectorAll('details').forEach(function (d) { d.open = true; });
      var out = [];
      document.querySelectorAll('table[data-table="pairs"], table[data-table="paired-models"]').forEach(
        function (t) {
          var box = t.getBoundingClientRect(), wrap = t.parentElement;
          Array.prototype.forEach.call(t.querySelectorAll('tbody th'), function (th) {
            var r = th.getBoundingClientRect();
            out.push({label: th.textContent, right: r.right, table: box.right, overflow: th.scrollWidth
                      - th.clientWidth, wrap: wrap.scrollWidth - wrap.clientWidth}); }); });
      document.body.setAttribute('data-pairs', JSON.stringify(out));
    }, 100); });</script></body>"""
    probe_page = tmp_path / "probe.html"
    probe_page.write_text((sweep / "report" / "report.html").read_text().replace("</body>", probe))
    result = open_page(probe_page, width=1200, height=1000)
    assert result.console == [], result.console
    body = re.search(r"<body([^>]*)>", result.dom).group(1)
    assert f'data-images-loaded="{len(page.images)}"' in body
    found = json.loads(html.unescape(re.search(r'data-pairs="([^"]*)"', body).group(1)))
    assert len(found) >= 12, found
    for label in found:
        assert label["right"] <= label["table"] + 0.5 and label["overflow"] <= 0 and label["wrap"] <= 0, label
    folder = os.environ.get("OMNIEVAL_SCREENSHOTS")
    if folder:
        shown = tmp_path / "shown.html"
        hide = ("<style>section#runs, section#spectrum > *:not(figure), section#significance, "
                "section#paired-spectrum > *:not(.table-wrap) {display: none}</style></head>")
        shown.write_text((sweep / "report" / "report.html").read_text().replace("</head>", hide))
        open_page(shown, screenshot=Path(folder) / "report-sweep.png", width=1200, height=1300)
