"""A fifth protocol, defined in the tests alone (``fifth_protocol.py``, whose ``SPEC`` is all the registry reads),
plugs in with one registration and nothing else: its synthetic benchmark, a run through the real pipeline
(simulated engine, local Ray), ``omnieval metrics`` (metrics with intervals, paired differences, headline table),
``omnieval stats`` (McNemar on its baseline condition, permutation tests) and ``omnieval report`` (its own section,
comparisons and tests) all come from its spec.

Every number is checked against a computation of its own from the predictions (polars, numpy, scipy), never against
the code under test."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from omnieval.cli import main
from omnieval.config import parse_run_config
from omnieval.core.schema import InputError
from omnieval.protocols import PROTOCOLS, get_protocol, register_protocol, unregister_protocol
from omnieval.protocols.spec import ProtocolSpec
from omnieval.run.pipeline import run_evaluation

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

MODULE = "tests.fifth_protocol"
N_ITEMS = 12  # 2^12 sign flips: every sign-flip p below is exact (permutations >= 4096)
MODELS = [{"name": "sim-image", "engine": "simulated", "options": {"seed": 3, "reliance": {"image": 0.9}}},
          {"name": "sim-text", "engine": "simulated", "options": {"seed": 4, "reliance": {"text": 0.95}}}]


@pytest.fixture(scope="module")
def fifth():
    register_protocol("fifth", MODULE)
    yield get_protocol("fifth")
    unregister_protocol("fifth")


@pytest.fixture(scope="module")
def outputs(fifth, ray_session, tmp_path_factory):
    """The benchmark, the run, and the metrics / stats / report folders, made through the CLI and the pipeline."""
    base = tmp_path_factory.mktemp("fifth")
    bench, run = base / "bench", base / "run"
    assert main(["datasets", "synth", "--protocol", "fifth", "--out", str(bench), "--items", str(N_ITEMS)]) == 0
    config = parse_run_config({"benchmark": str(bench), "output": str(run), "models": MODELS, "prompts": ["zs"],
                               "decode": {"max_side": 64}})
    result = run_evaluation(config, progress=False)
    return {"bench": bench, "run": run, "predictions": Path(result.predictions_path), "base": base}


@pytest.fixture(scope="module")
def truth(outputs) -> pl.DataFrame:
    """Per model, item and condition: right or wrong (every row answered: the simulated engine has no invalid
    answers here, checked)."""
    rows = pl.read_parquet(outputs["predictions"])
    assert rows["error"].null_count() == len(rows) and rows["choice"].null_count() == 0
    assert rows.height == N_ITEMS * 2 * len(MODELS)
    return rows.select("model", "item_id", "condition", correct=(pl.col("choice") == pl.col("target")))


def _accuracy(truth: pl.DataFrame, model: str, condition: str) -> float:
    return float(truth.filter((pl.col("model") == model) & (pl.col("condition") == condition))["correct"].mean())


def _per_item(truth: pl.DataFrame, model: str, condition: str | None) -> np.ndarray:
    """Per item (sorted), the mean correctness over the given condition (all conditions: None)."""
    sel = truth.filter(pl.col("model") == model)
    if condition is not None:
        sel = sel.filter(pl.col("condition") == condition)
    return sel.group_by("item_id").agg(pl.col("correct").cast(pl.Float64).mean()).sort("item_id")["correct"] \
        .to_numpy()


def _exact_sign_flip(d: np.ndarray) -> tuple[float, float]:
    """Mean of ``d`` and the two-sided p over all 2^n sign flips, enumerated."""
    observed = d.mean()
    null = np.array([np.mean(np.array(signs) * d) for signs in itertools.product((1.0, -1.0), repeat=len(d))])
    less, greater = np.mean(null <= observed + 1e-12), np.mean(null >= observed - 1e-12)
    return float(observed), float(min(1.0, 2 * min(less, greater)))


def test_the_pipeline_runs_both_conditions_of_every_item(outputs, truth):
    assert set(truth["condition"].unique()) == {"normal", "no_image"}
    # the picture model loses its picture in no_image; the text model reads the captions that name the answer
    assert _accuracy(truth, "sim-image", "normal") > _accuracy(truth, "sim-image", "no_image")


def test_metrics_with_intervals_and_the_headline_table(outputs, truth, capsys):
    out = outputs["base"] / "metrics"
    assert main(["metrics", str(outputs["predictions"]), "--out", str(out), "--resamples", "2000",
                 "--permutations", "10000"]) == 0
    printed = capsys.readouterr().out
    assert "fifth: Accuracy with and without the picture, and the gain (value [95% bootstrap CI])" in printed
    table = pl.read_csv(out / "metrics.csv", schema_overrides={"key": pl.Utf8}).filter(pl.col("protocol") == "fifth")
    got = {(r["model"], r["metric"], r["key"] or ""): r for r in table.iter_rows(named=True)}
    for model in ("sim-image", "sim-text"):
        acc = {c: _accuracy(truth, model, c) for c in ("normal", "no_image")}
        for condition, value in acc.items():
            row = got[(model, "accuracy", condition)]
            assert row["value"] == pytest.approx(value, abs=1e-12)
            assert row["n"] == N_ITEMS and row["n_items"] == N_ITEMS
            assert row["ci_low"] <= row["value"] <= row["ci_high"]
        gain = acc["normal"] - acc["no_image"]
        assert got[(model, "image_gain", "")]["value"] == pytest.approx(gain, abs=1e-12)
        assert got[(model, "image_gain", "")]["n"] == 2 * N_ITEMS
        assert got[(model, "image_share", "")]["value"] == pytest.approx(gain / acc["normal"], abs=1e-12)
        assert got[(model, "invalid_rate", "")]["value"] == 0.0
    gain_row = got[("sim-image", "image_gain", "")]
    assert gain_row["ci_low"] <= gain_row["value"] <= gain_row["ci_high"] and gain_row["ci_low"] < gain_row["ci_high"]

    paired = pl.read_csv(out / "paired.csv", schema_overrides={"key": pl.Utf8}).filter(pl.col("protocol") == "fifth")
    models = paired.filter(pl.col("comparison") == "models")
    assert set(zip(models["metric"], models["key"].fill_null(""), strict=True)) == {
        ("accuracy", "normal"), ("accuracy", "no_image"), ("image_gain", "")}
    for row in models.iter_rows(named=True):
        assert (row["a"], row["b"]) == ("sim-image", "sim-text")
        if row["metric"] == "accuracy":
            a, b = _per_item(truth, "sim-image", row["key"]), _per_item(truth, "sim-text", row["key"])
            estimate, p = _exact_sign_flip(a - b)
            assert row["estimate"] == pytest.approx(estimate, abs=1e-12)
            assert row["p_method"] == "permutation" and row["p_value"] == pytest.approx(p, abs=1e-12)
        else:
            gains = [_accuracy(truth, m, "normal") - _accuracy(truth, m, "no_image") for m in ("sim-image", "sim-text")]
            assert row["estimate"] == pytest.approx(gains[0] - gains[1], abs=1e-12)
            assert row["p_method"] == "bootstrap"
        assert row["ci_low"] <= row["estimate"] <= row["ci_high"] and row["n_items"] == N_ITEMS


def test_significance_tests_on_its_baseline_condition(outputs, truth):
    from scipy.stats import binomtest

    out = outputs["base"] / "stats"
    assert main(["stats", str(outputs["predictions"]), "--out", str(out), "--permutations", "10000"]) == 0
    tests = pl.read_csv(out / "tests.csv").filter(pl.col("protocol") == "fifth")
    [mcnemar] = tests.filter(pl.col("test") == "mcnemar").iter_rows(named=True)
    a, b = _per_item(truth, "sim-image", "normal") == 1, _per_item(truth, "sim-text", "normal") == 1
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(~a & b))
    assert (mcnemar["model"], mcnemar["comparison"], mcnemar["n"]) == ("sim-image vs sim-text", "normal", N_ITEMS)
    assert mcnemar["estimate"] == pytest.approx(a.mean() - b.mean(), abs=1e-12)
    assert mcnemar["statistic"] == min(only_a, only_b)
    if only_a + only_b:
        assert mcnemar["p_value"] == pytest.approx(binomtest(min(only_a, only_b), only_a + only_b).pvalue, abs=1e-12)
    by_comparison = {r["comparison"]: r for r in tests.filter(pl.col("test") == "permutation_models")
                     .iter_rows(named=True)}
    assert set(by_comparison) == {"all", "normal", "no_image"}
    for comparison, row in by_comparison.items():
        condition = None if comparison == "all" else comparison
        estimate, p = _exact_sign_flip(_per_item(truth, "sim-image", condition) - _per_item(truth, "sim-text",
                                                                                              condition))
        assert row["estimate"] == pytest.approx(estimate, abs=1e-12)
        assert row["p_value"] == pytest.approx(p, abs=1e-12)
    assert tests.filter(pl.col("test").is_in(["wilcoxon", "friedman"])).is_empty()  # it names no blocks


class _Cells(HTMLParser):
    """The ``data-*`` attributes of every table cell and the ids of every section."""

    def __init__(self):
        super().__init__()
        self.cells: list[dict] = []
        self.sections: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td" and "data-metric" in attrs:
            self.cells.append(attrs)
        if tag == "section":
            self.sections.append(attrs["id"])


def test_report_section_from_its_layout_registered_through_the_environment(outputs, truth):
    """``omnieval report`` in a process of its own, the protocol registered by ``OMNIEVAL_PROTOCOLS`` alone."""
    out = outputs["base"] / "report"
    env = os.environ | {"OMNIEVAL_PROTOCOLS": f"fifth={MODULE}",
                        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "report", str(outputs["run"]), "--out", str(out),
                           "--resamples", "500", "--permutations", "500"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    page = (out / "report.html").read_text()
    parsed = _Cells()
    parsed.feed(page)
    assert {"fifth", "paired-fifth", "significance-fifth"} <= set(parsed.sections)
    assert "Fifth: what the picture adds" in page and "What the picture adds" in page
    assert 'data-figure="fifth-accuracy"' in page
    assert "image_share, the gain over the accuracy with the picture, is at most 1" in page  # its spec's value_ranges
    gains = {c["data-model"]: float(c["data-value"]) for c in parsed.cells
             if c["data-metric"] == "image_gain" and c.get("data-protocol") == "fifth"}
    for model in ("sim-image", "sim-text"):
        assert gains[model] == pytest.approx(_accuracy(truth, model, "normal") - _accuracy(truth, model, "no_image"),
                                             abs=1e-12)


def test_registration_refuses_a_module_that_is_not_a_protocol(fifth):
    with pytest.raises(InputError, match="exports no SPEC = ProtocolSpec"):
        register_protocol("media", "omnieval.protocols.shared_media")
    with pytest.raises(InputError, match="is called 'fifth', not 'sixth'"):
        register_protocol("sixth", MODULE)
    with pytest.raises(InputError, match="already registered as module"):
        register_protocol("fifth", "omnieval.protocols.spectrum")
    register_protocol("fifth", MODULE)  # the same registration again: nothing changes
    assert PROTOCOLS["fifth"] == MODULE and "media" not in PROTOCOLS and "sixth" not in PROTOCOLS


def test_the_registry_hands_out_the_module_spec(fifth):
    """What every layer gets for the name is the module's one ``SPEC`` value, its fields as the module states them."""
    import tests.fifth_protocol as module

    assert fifth is module.SPEC and isinstance(fifth, ProtocolSpec)
    assert (fifth.name, fifth.item_local, fifth.prompt_layout) == ("fifth", True, "options")
    assert fifth.paired_matrix == (("accuracy", None), ("image_gain", ""))
    assert fifth.report_section is None and fifth.report.title == "Fifth: what the picture adds"


def test_a_spec_of_the_wrong_shape_is_refused_when_made(fifth):
    """A field of the wrong kind is refused where the spec is written, naming the protocol and the field."""
    import dataclasses

    with pytest.raises(TypeError, match="'fifth': item must be a pydantic model class"):
        dataclasses.replace(fifth, item=dict)
    with pytest.raises(TypeError, match="'fifth': prompt_layout 'grid' is not one of options, scenes"):
        dataclasses.replace(fifth, prompt_layout="grid")
    with pytest.raises(TypeError, match="'fifth': synthetic_benchmark must be a 'package.module:function'"):
        dataclasses.replace(fifth, synthetic_benchmark="tests.fifth_protocol.make_benchmark")
    with pytest.raises(TypeError, match="paired_matrix entries are"):
        dataclasses.replace(fifth, paired_matrix=(("accuracy",),))


def test_expansion_refuses_instances_that_do_not_follow_the_spec(fifth, tmp_path):
    """The spec's prompt layout is what its instances carry: a protocol whose instances say otherwise is refused at
    expansion (``ProtocolSpec.expand``), before any model is asked, naming the instance."""
    import dataclasses

    from omnieval.datasets.benchmark import load_benchmark

    bench = load_benchmark(main_synth(tmp_path))
    options = fifth.options()
    assert len(fifth.expand(bench.items, bench, 0, options)) == 2 * 8
    scenes = dataclasses.replace(fifth, prompt_layout="scenes")
    with pytest.raises(ValueError, match=r"instance 'q000\|normal\|s0' with protocol 'fifth' and prompt layout "
                                         r"'options'; its spec says 'fifth' and 'scenes'"):
        scenes.expand(bench.items, bench, 0, options)


def test_its_own_instance_field_is_declared_by_the_spec_alone(fifth, tmp_path):
    """``text_tells`` is declared in the module's ``InstanceFields`` and nowhere else: every instance carries it with
    the value read off its item (the text holds the answer's option text), and a spec that does not declare it
    refuses the instances at expansion, naming the instance and the field."""
    import dataclasses
    import json

    from omnieval.core.schema import Instance
    from omnieval.datasets.benchmark import load_benchmark
    from omnieval.protocols.spec import NoFields

    assert "text_tells" not in Instance.model_fields
    bench = load_benchmark(main_synth(tmp_path))
    items = {json.loads(line)["item_id"]: json.loads(line)
             for line in (tmp_path / "bench" / "items.jsonl").read_text().splitlines()}
    instances = fifth.expand(bench.items, bench, 0, fifth.options())
    for inst in instances:
        item = items[inst.item_id]
        tells = item["options"]["ABCDE".index(item["answer"])] in item["text"]
        assert inst.protocol_fields == {"text_tells": tells}
    assert {inst.field("text_tells") for inst in instances} == {True, False}  # both kinds of item in the benchmark
    undeclared = dataclasses.replace(fifth, instance_fields=NoFields)
    with pytest.raises(ValueError, match=r"instance 'q000\|normal\|s0' with protocol field 'text_tells': Extra inputs"):
        undeclared.expand(bench.items, bench, 0, fifth.options())


def main_synth(tmp_path: Path) -> Path:
    """An eight-item benchmark of the fifth protocol, written by its spec's synthetic benchmark writer."""
    bench = tmp_path / "bench"
    assert main(["datasets", "synth", "--protocol", "fifth", "--out", str(bench), "--items", "8"]) == 0
    return bench
