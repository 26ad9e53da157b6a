"""User text in the report (model names, anchors, titles) is shown as text, never as markup, in report.html and
report.md; and the share of errored predictions is shown beside the invalid share, equal to a plain computation."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from omnieval.report import report_command

MODEL = "<script>alert(1)</script>"
ANCHOR = "<b>bold</b>"
TITLE = "<i>my & report</i>"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    rng = np.random.default_rng(0)
    rows = []
    for model in (MODEL, "plain"):
        for i in range(12):
            for c in ("C000", "C100", "C010", "C001", "C110", "C101", "C011", "C111"):
                k = sum(int(d) for d in c[1:])
                error = "media decode failed: x.wav: truncated audio" if rng.random() < 0.15 else None
                choice = None if error else "ABCDE"[rng.integers(5)]
                rows.append(dict(model=model, prompt="zs", protocol="dissonance", split="s", item_id=f"q{i}",
                                 instance_id=f"q{i}|{c}", condition=c, target="A", choice=choice,
                                 abstain_label="E", confidence=None, confidence_method=None,
                                 anchor=ANCHOR if i % 2 else "plain-anchor", k=k, n_options=5, error=error))
    frame = pl.DataFrame(rows)
    d = tmp_path_factory.mktemp("escaping")
    frame.write_parquet(d / "predictions.parquet")
    assert report_command([str(d / "predictions.parquet")], str(d / "out"), resamples=50, permutations=50,
                          title=TITLE) == 0
    return frame, (d / "out" / "report.html").read_text(), (d / "out" / "report.md").read_text()


def test_html_report_escapes_user_text(report):
    _, html, _ = report
    for raw in (MODEL, ANCHOR, TITLE):
        assert raw not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "&lt;i&gt;my &amp; report&lt;/i&gt;" in html


def test_markdown_report_escapes_user_text(report):
    _, _, md = report
    for raw in (MODEL, ANCHOR, TITLE, "<script", "<b>", "<i>", "</"):
        assert raw not in md, raw
    assert "&lt;script>alert(1)&lt;/script>" in md and "&lt;b>bold&lt;/b>" in md
    assert "# &lt;i>my & report&lt;/i>" in md


def test_errors_column_equals_the_share_of_errored_rows(report):
    frame, _, md = report
    lines = md.splitlines()
    header_at = next(i for i, line in enumerate(lines) if line.startswith("| model") and "errors" in line)
    header = [c.strip() for c in lines[header_at].strip("|").split("|")]
    for line in lines[header_at + 2:]:
        if not line.startswith("|"):
            break
        cells = {h.split(" · ")[-1]: c.strip() for h, c in zip(header, line.strip("|").split("|"), strict=True)}
        model = "plain" if cells["model"] == "plain" else MODEL
        rows = frame.filter(pl.col("model") == model)
        expected = rows["error"].is_not_null().mean()
        answered = rows.filter(pl.col("error").is_null())
        assert float(re.match(r"[\d.]+", cells["errors"]).group()) == pytest.approx(expected, abs=5e-4)
        assert float(re.match(r"[\d.]+", cells["invalid"]).group()) == pytest.approx(
            answered["choice"].is_null().mean(), abs=5e-4)
