"""Both verdicts of generated answers, from the row builder to the metrics table.

The official rule here is a tiny one written in this file ("the first capital A-D anywhere in the text, A when
there is none", the quirk of a released scorer that reads "Based on the video, D." as B), registered for the tests
only; the expected readings and accuracies are worked out by a plain loop over the texts with that rule, and the
robust readings are written by hand from omnieval's documented rule (the last explicit ``Answer: X`` / ``(X)``, a
lone letter, an exact option text)."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from omnieval.core.schema import InputError, Instance, Segment
from omnieval.engines.base import EngineResult
from omnieval.run.answers import PredictionRows, answer_requests
from omnieval.run.stages import call_rows
from omnieval.scoring import base as scoring_base
from omnieval.scoring.base import Verdict, register_scorer
from omnieval.scoring.verdicts import check_scorer
from omnieval.stats.metrics import metrics_table

FIRST_CAPITAL, DROPPING = "test-first-capital", "test-drop-unextracted"
LABELS, OPTIONS = ["A", "B", "C", "D"], ["a dog", "a cat", "a bird", "a fish"]

# (generated text, gold label, robust reading by hand); the engine forces B from the logits after the reasoning
# that names no option
FORCED = "I cannot tell."
CASES = [
    ("Answer: B", "B", "B"),
    ("", "A", None),
    ("The answer is (C).", "C", "C"),
    (FORCED, "B", None),
    ("Based on the video, D.", "D", "D"),
    ("a cat", "B", "B"),
    ("C", "A", "C"),
    ("**Answer: D**", "D", "D"),
    ("<think>Maybe A.</think>\nAnswer: B", "A", "B"),
    ("Answer: B (simulated)", "C", "B"),
    ("d", "D", None),
    ("Answer: A", "A", "A"),
]


def first_capital(text: str) -> str | None:
    """The test's rule: the first character of the text that is A, B, C or D."""
    return next((ch for ch in text if ch in "ABCD"), None)


class FirstCapital:
    def score(self, text, item):
        found = first_capital(text or "")
        if found is None:
            return Verdict("A", item.answer == "A", "forced", "none found: A")
        return Verdict(found, found == item.answer, "parsed", "first capital")


class DropUnextracted:
    def score(self, text, item):
        found = first_capital(text or "")
        if found is None:
            return Verdict(None, None, "unparsed", "dropped")
        return Verdict(found, found == item.answer, "parsed", "first capital")


@pytest.fixture
def test_scorers():
    register_scorer(FIRST_CAPITAL)(FirstCapital)
    register_scorer(DROPPING)(DropUnextracted)
    yield
    scoring_base._REGISTRY.pop(FIRST_CAPITAL)
    scoring_base._REGISTRY.pop(DROPPING)


def instance(i: int, target: str, condition: str = "normal") -> Instance:
    return Instance(instance_id=f"q{i}|{condition}", item_id=f"q{i}", protocol="spectrum", benchmark="b", split="all",
                    condition=condition, segments=[Segment(kind="text", text="What is it?")], question="What is it?",
                    option_labels=LABELS, option_texts=OPTIONS, target=target)


LOGPROBS = [-3.0, -0.1, -3.0, -3.0]


class Scripted:
    """An engine that replies with a fixed text per instance: the robust reading as its choice (as a
    chain-of-thought engine parses it), B forced from the label logits for ``FORCED``, and item ``q99`` scored from
    the label logits alone (zero-shot: no text read)."""

    def __init__(self, texts: dict[str, tuple[str, str | None]]):
        self.texts = texts

    def score(self, requests):
        out = []
        for request in requests:
            inst = request.instance
            if inst.item_id == "q99":
                out.append(EngineResult(choice="B", confidence=0.9, confidence_method="rs", option_logprobs=LOGPROBS,
                                        raw_text="B"))
                continue
            text, robust = self.texts[inst.instance_id]
            if text == FORCED:
                out.append(EngineResult(choice="B", confidence=0.9, confidence_method="rs", option_logprobs=LOGPROBS,
                                        raw_text=text, answer_source="forced"))
            else:
                out.append(EngineResult(choice=robust, confidence=0.9 if robust else None,
                                        confidence_method="rs" if robust else None, option_logprobs=LOGPROBS,
                                        raw_text=text, answer_source="parsed" if robust else None))
        return out


def built_rows(scorer: str | None) -> list[dict]:
    """The prediction rows of ``CASES`` (and one zero-shot logits row) through the model stage's code and the row
    builder, with the run's scorer tag on every request row."""
    instances = [instance(i, gold) for i, (_, gold, _) in enumerate(CASES)] + [instance(99, "A")]
    texts = {inst.instance_id: (text, robust) for inst, (text, _, robust) in zip(instances, CASES, strict=False)}
    rows = [r | {"scorer": scorer or ""} for r in answer_requests(instances, ["mcq"], ["cot"], set(), {})]
    return PredictionRows("m", "openai")(call_rows(Scripted(texts), rows)).to_pylist()


def test_rows_carry_both_verdicts_as_each_rule_reads_the_text(test_scorers):
    rows = built_rows(FIRST_CAPITAL)
    for row, (text, gold, robust) in zip(rows, CASES, strict=False):
        assert row["raw_text"] == text
        assert (row["robust_choice"], row["robust_source"]) == (robust, "parsed" if robust else "unparsed"), text
        expected = first_capital(text)
        assert row["official_choice"] == (expected or "A"), text
        assert row["official_correct"] == ((expected or "A") == gold), text
        assert row["official_source"] == ("parsed" if expected else "forced"), text
        assert row["official_how"] == ("first capital" if expected else "none found: A")
    logits = rows[-1]  # scored from label logits: no rule reads it
    assert logits["choice"] == "B" and all(logits[c] is None for c in (
        "robust_choice", "robust_source", "official_choice", "official_correct", "official_source", "official_how"))


def test_no_official_scorer_leaves_the_official_columns_null():
    rows = built_rows(None)
    assert [r["robust_choice"] for r in rows[:-1]] == [robust for _, _, robust in CASES]
    assert all(r["official_choice"] is None and r["official_correct"] is None and r["official_source"] is None
               for r in rows)


def test_unknown_scorer_is_one_line_error():
    with pytest.raises(InputError, match="unknown scorer 'nope'; known scorers: .*robust"):
        check_scorer("nope")


def predictions(scorer: str | None) -> pl.DataFrame:
    return pl.DataFrame(built_rows(scorer)).with_columns(protocol=pl.lit("spectrum"))


def normal_row(table: pl.DataFrame, metric: str) -> dict:
    rows = table.filter((pl.col("metric") == metric) & (pl.col("key") == "normal")).to_dicts()
    assert len(rows) == 1, (metric, rows)
    return rows[0]


def expected(scorer: str) -> dict:
    """The cell ``normal``'s numbers, by a plain loop over the texts with the test's rule: the engine's accuracy
    (the row's choice: the robust reading, or B forced from the logits), the official accuracy over the answers the
    rule counts, disagreements, and the unparsed / forced shares."""
    counted = correct = disagree = forced = unparsed = valid = right = forced_by_logits = 0
    for text, gold, robust in CASES:
        choice = "B" if text == FORCED else robust
        valid += choice is not None
        right += choice == gold
        forced_by_logits += text == FORCED
        found = first_capital(text)
        official = found if found or scorer == DROPPING else "A"
        if official is not None:
            counted += 1
            correct += official == gold
        disagree += official != robust
        forced += found is None and scorer == FIRST_CAPITAL
        unparsed += robust is None
    n = len(CASES)
    return {"accuracy": right / (valid + 1), "n_accuracy": valid + 1,  # + the zero-shot row q99 (wrong)
            "official_accuracy": correct / counted, "n_official": counted, "disagree": disagree,
            "unparsed_share": unparsed / n, "forced_share": forced_by_logits / n, "official_forced_share": forced / n}


@pytest.mark.parametrize("scorer", [FIRST_CAPITAL, DROPPING])
def test_metrics_give_both_accuracies_disagreements_and_shares(test_scorers, scorer):
    table = metrics_table(predictions(scorer), resamples=200, seed=0)
    want = expected(scorer)
    got = normal_row(table, "official_accuracy")
    assert got["value"] == pytest.approx(want["official_accuracy"]) and got["n"] == want["n_official"]
    assert got["ci_low"] <= got["value"] <= got["ci_high"]
    for metric in ("disagree", "unparsed_share", "forced_share", "official_forced_share"):
        assert normal_row(table, metric)["value"] == pytest.approx(want[metric]), metric
    # accuracy stays the engine's reading, over the answers it gave an option
    accuracy = normal_row(table, "accuracy")
    assert accuracy["value"] == pytest.approx(want["accuracy"]) and accuracy["n"] == want["n_accuracy"]


def test_report_and_sweep_summary_show_both_accuracies_and_the_flags(test_scorers):
    from omnieval.report import verdicts as report_verdicts
    from omnieval.report.inputs import ProtocolInput
    from omnieval.stats.verdicts import render_verdicts, verdict_table
    from omnieval.sweep.status import RunOutcome, SweepResult

    table = metrics_table(predictions(FIRST_CAPITAL), resamples=200, seed=0)
    want = expected(FIRST_CAPITAL)
    assert want["unparsed_share"] > 0.05 and want["official_forced_share"] > 0  # both flags raised
    data = ProtocolInput("spectrum", table.with_columns(run=pl.lit("r"), _rid=pl.int_range(pl.len())), None, None,
                         ["r"])
    own, read = report_verdicts.split_metrics(data)
    assert not own.metrics["metric"].is_in(["official_accuracy", "disagree", "unparsed_share"]).any()
    shown = report_verdicts.section(read).blocks[0]
    row = {h: c.text for h, c in zip(shown.header, next(r for r in shown.rows if r[1].text == "normal"),
                                     strict=True)}
    assert row["accuracy"] == f"{want['accuracy']:.3f}" and row["official"] == f"{want['official_accuracy']:.3f}"
    assert row["disagree"] == str(want["disagree"]) and row["unparsed"] == f"{want['unparsed_share']:.3f}"
    assert row["flag"] == "unparsed > 5%; official rule credits unparseable answers"
    assert "unparsed > 5%" in render_verdicts(table)
    cells = verdict_table(table).filter(pl.col("key") == "normal").to_dicts()
    outcome = RunOutcome(key="s/spectrum/m/cot", model="m", protocol="spectrum", benchmark="b", prompt="cot",
                         output="o", fingerprint="f", status="done", verdicts=cells)
    summary = SweepResult(output="o", summary_path="o/summary.json", runs=[outcome]).summary()
    assert (f"s/spectrum/m/cot normal: {want['accuracy']:.3f} / {want['official_accuracy']:.3f}, disagree "
            f"{want['disagree']}, unparsed {want['unparsed_share']:.3f}") in summary
    assert "FLAG: unparsed > 5%; official rule credits unparseable answers" in summary


def test_report_says_no_official_scorer():
    from omnieval.report import verdicts as report_verdicts
    from omnieval.report.inputs import ProtocolInput

    table = metrics_table(predictions(None), resamples=50, seed=0)
    data = ProtocolInput("spectrum", table.with_columns(run=pl.lit("r"), _rid=pl.int_range(pl.len())), None, None,
                         ["r"])
    shown = report_verdicts.section(report_verdicts.split_metrics(data)[1]).blocks[0]
    official = shown.header.index("official")
    assert {r[official].text for r in shown.rows} == {"no official scorer"}


def test_official_accuracy_interval_matches_a_plain_bootstrap(test_scorers):
    """One question per row: the interval is a percentile bootstrap of the official verdicts, as numpy draws it
    from the same counts (within resampling noise)."""
    table = metrics_table(predictions(FIRST_CAPITAL), resamples=4000, seed=0)
    verdicts = np.array([(first_capital(t) or "A") == gold for t, gold, _ in CASES], dtype=float)
    rng = np.random.default_rng(0)
    means = verdicts[rng.integers(0, len(verdicts), (4000, len(verdicts)))].mean(axis=1)
    got = normal_row(table, "official_accuracy")
    assert got["ci_low"] == pytest.approx(np.percentile(means, 2.5), abs=0.09)
    assert got["ci_high"] == pytest.approx(np.percentile(means, 97.5), abs=0.09)


def test_files_without_verdict_columns_get_no_verdict_metrics():
    rows = [{k: v for k, v in r.items() if not re.match(r"(robust|official)_", k)} for r in built_rows(None)]
    table = metrics_table(pl.DataFrame(rows).with_columns(protocol=pl.lit("spectrum")), resamples=50)
    assert not set(table["metric"]) & {"official_accuracy", "disagree", "unparsed_share", "official_forced_share"}


@pytest.mark.slow
def test_a_ray_run_scores_its_cot_answers_by_the_configured_scorer(ray_session, bench, tmp_path):
    """Through the Ray pipeline: the run's scorer (here ``robust`` named as the official one, registered in every
    worker) reaches the row builder with the run's tag; the simulated engine's cot answers end in ``Answer: X``, so
    both readings are that letter, read here by a regular expression; zero-shot rows carry no verdict."""
    import json

    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    config = parse_run_config({"benchmark": str(bench), "output": str(tmp_path / "run"), "prompts": ["zs", "cot"],
                               "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}],
                               "decode": {"num_frames": 4, "max_side": 96}, "scorer": "robust", "limit_items": 4})
    result = run_evaluation(config, progress=False)
    rows = pl.read_parquet(result.predictions_path)
    cot, zs = rows.filter(pl.col("prompt") == "cot"), rows.filter(pl.col("prompt") == "zs")
    letters = [m.group(1) if (m := re.search(r"Answer: ([A-Z])", t or "")) else None for t in cot["raw_text"]]
    assert cot.height and None not in letters
    assert cot["official_choice"].to_list() == letters == cot["robust_choice"].to_list()
    assert cot["official_correct"].to_list() == [a == t for a, t in zip(letters, cot["target"], strict=True)]
    assert set(cot["official_source"]) == {"parsed"}
    assert zs.filter(pl.col("confidence_method").is_not_null())["robust_choice"].null_count() == zs.filter(
        pl.col("confidence_method").is_not_null()).height
    assert json.loads((tmp_path / "run" / "run.json").read_text())["scorer"] == "robust"


def test_csv_verdicts_read_as_written_and_a_bad_one_is_refused(test_scorers, tmp_path):
    from omnieval.stats.read import read_predictions

    frame = predictions(FIRST_CAPITAL).drop("option_logprobs", "breakdowns", "verdicts")
    path = tmp_path / "p.csv"
    frame.write_csv(path)
    got = normal_row(metrics_table(read_predictions([path]), resamples=50), "official_accuracy")
    assert got["value"] == pytest.approx(expected(FIRST_CAPITAL)["official_accuracy"])
    bad = frame.with_columns(official_correct=pl.when(pl.int_range(pl.len()) == 2).then(pl.lit("yes"))
                             .otherwise(pl.col("official_correct").cast(pl.Utf8)))
    bad.write_csv(path)
    with pytest.raises(InputError, match=r"row 3: official_correct 'yes' is not true, false or empty") as err:
        read_predictions([path])
    assert err.value.field == "official_correct"


def test_a_cell_with_no_parsed_answer_still_shows_what_the_official_rule_credits(test_scorers):
    """Only answers omnieval reads no option in (no accuracy to give): the official rule still counts them, and the
    report shows its accuracy beside an empty one, flagged."""
    from omnieval.report import verdicts as report_verdicts
    from omnieval.report.inputs import ProtocolInput

    unread = [(text, gold) for text, gold, robust in CASES if robust is None and text != FORCED]
    frame = predictions(FIRST_CAPITAL).filter(pl.col("raw_text").is_in([t for t, _ in unread]))
    table = metrics_table(frame, resamples=50, seed=0)
    official = sum((first_capital(t) or "A") == gold for t, gold in unread) / len(unread)
    assert normal_row(table, "official_accuracy")["value"] == pytest.approx(official)
    data = ProtocolInput("spectrum", table.with_columns(run=pl.lit("r"), _rid=pl.int_range(pl.len())), None, None,
                         ["r"])
    shown = report_verdicts.section(report_verdicts.split_metrics(data)[1]).blocks[0]
    row = {h: c.text for h, c in zip(shown.header, shown.rows[0], strict=True)}
    assert row["accuracy"] == "—" and row["official"] == f"{official:.3f}" and row["unparsed"] == "1.000"
    assert row["flag"] == "unparsed > 5%; official rule credits unparseable answers"


def test_sweep_summary_says_why_an_unavailable_official_rule_was_not_computed(tmp_path):
    """A run whose scorer's rule cannot be computed here (``mmau-pro``: NV-Embed): its summary lines say the official
    rule was not computed and why, as ``omnieval metrics`` does; a run with no scorer still says "no official
    scorer"."""
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.scoring.mmau_pro import REASON
    from omnieval.sweep.state import run_verdicts
    from omnieval.sweep.status import RunOutcome, SweepResult

    table = metrics_table(predictions(None), resamples=50, seed=0)  # no official columns filled, as mmau-pro's
    lines = {}
    for scorer in ("mmau-pro", None):
        store = RunOutputs(str(tmp_path / str(scorer)))
        store.write_table("metrics/metrics.parquet", table.to_arrow())
        store.write_json("run.json", {"scorer": scorer})
        outcome = RunOutcome(key="s/spectrum/m/cot", model="m", protocol="spectrum", benchmark="b", prompt="cot",
                             output="o", fingerprint="f", status="done", verdicts=run_verdicts(store))
        summary = SweepResult(output="o", summary_path="o/summary.json", runs=[outcome]).summary()
        lines[scorer] = [line for line in summary.splitlines() if line.startswith("  s/spectrum/m/cot normal:")]
    (unavailable,), (none,) = lines["mmau-pro"], lines[None]
    assert " / official rule not computed, " in unavailable and "no official scorer" not in unavailable
    assert "  FLAG: " in unavailable and unavailable.endswith(f"; official rule not computed: {REASON}")
    assert " / no official scorer, " in none and none.endswith("; no official scorer")
