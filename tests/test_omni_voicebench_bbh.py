"""VoiceBench's ``bbh`` rule (``omnieval.scoring.voicebench_bbh``): answers read by hand through the release's
``BBHEvaluator`` (``src/evaluator/bbh.py`` at commit 533815410e3f4d602bd15a1de7105aea4acd828c: its normalisation, the
yes / no list read first, then the task's list, first match wins), per task a phrase that matches, one that does not,
and the order of checks where two match; then a release of the four tasks made in the test (``bbh/test-*.parquet``,
rows with ``id``, ``prompt``, ``reference`` and the recording), run open-ended through two simulated models and a
simulated judge, ``metrics`` and ``report``: the release's score recomputed from ``predictions.parquet`` by a loop
that knows each simulated answer's reading by hand."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from omnieval.cli import main
from omnieval.core.keyed import keyed_rng
from omnieval.datasets.omni.voicebench import convert_voicebench
from omnieval.engines.simulated import OPEN_MISSED
from omnieval.scoring.voicebench_bbh import bbh_verdict, normalize, read_answer
from tests.omni_release_run import MODELS, NAMES, OPEN_CONDITIONS, _Cells, items_of, run_open
from tests.test_omni_voicebench import shard

# (task, answer, the index the release reads: 0 no / (A), 1 yes / (B), None where it guesses), worked by hand
CASES = [
    # sports_understanding: the yes / no list first, then the sports phrases, then starts / ends with no / yes
    ("sports_understanding", "The answer is: No.", 0),  # "answer is no" (yes / no list)
    ("sports_understanding", "Considering these points, the sentence is plausible.", 1),  # a sports phrase
    ("sports_understanding", "Messi is a famous footballer.", None),  # no phrase: the release guesses
    # both "the sentence is not plausible" (sports, no) and "answer is yes" (yes / no list): the list read first wins
    ("sports_understanding", "The sentence is not plausible, so the answer is yes.", 1),
    ("sports_understanding", "The sentence about Messi is not plausible.", 1),  # the pattern that reads yes
    ("sports_understanding", "Nothing suggests otherwise: it is plausible.", 0),  # starts with "no"
    ("sports_understanding", "I would say that it is not a plausible sentence.", None),  # the phrase's dot is gone
    # hyperbaton: its own list alone
    ("hyperbaton", "The answer is (B).", 1),
    ("hyperbaton", "B) red big ball", 1),  # starts with "b)"
    ("hyperbaton", "b", 0),  # the bare "b" reads (A)
    ("hyperbaton", "(B)", None),  # no rule reads a bare "(b)"
    ("hyperbaton", "I prefer the second one.", None),
    # "the answer is (a)" comes before "the correct option is (b)" in the list, though later in the answer
    ("hyperbaton", "The correct option is (B), although the answer is (A) to some ears.", 0),
    ("hyperbaton", "The answer is actually (B).", 0),  # "answer is a" inside "answer is actually"
    # navigate: the yes / no list, then the navigate phrases
    ("navigate", "You return to the starting point.", 1),
    ("navigate", "You return to the starting point, so the answer is no.", 0),  # the yes / no list first
    ("navigate", "You haven't returned to the starting point.", None),  # the apostrophe is kept: no phrase
    ("navigate", "You haven-t returned to the starting point.", 0),  # "you haven t returned to the starting point"
    ("navigate", "Yes.", 1),
    ("navigate", "I walked back to the casino", 0),  # ends with "no"
    # web_of_lies: the yes / no list, then the lies phrases, patterns and endings
    ("web_of_lies", "So the answer is: Jim tells the truth.", 1),  # pattern "answer is (.+?) tells the truth"
    ("web_of_lies", "Jim lies.", 0),  # ends with "lies"
    ("web_of_lies", "Bob must be lying.", 1),  # the ending that reads yes
    ("web_of_lies", "Jim tells the truth. The answer is no.", 0),  # "answer is no" before "tells the truth"
    ("web_of_lies", "It depends on who you ask.", None),
    ("web_of_lies", "", None),  # the empty answer
]


@pytest.mark.parametrize(("task", "answer", "index"), CASES)
def test_the_answer_read_as_the_release_reads_it(task, answer, index):
    assert read_answer(answer, task)[0] == index


@pytest.mark.parametrize(("text", "normalised"), [
    ("<1> **Yes**, it is.<|user|>", "yes it is"),  # prefix and suffix cut, marks spaced, spaces collapsed
    ("The answer: (A).<|turn_end|>", "the answer (a)"),
    ("Don't - stop!", "don't stop!"),  # the apostrophe and "!" stay
    ("答案：是", "答案 是"),
])
def test_answers_normalised_as_the_release_does(text, normalised):
    assert normalize(text) == normalised


def test_the_verdict_against_the_reference_and_the_keyed_guess():
    """Right where the index read is the reference's (the release's mapping: yes 1, no 0, (a) 0, (b) 1, lower-cased);
    where no phrase matches, a guess drawn from the item and the answer (``core.keyed``), the same on every call,
    and marked ``forced``; a reference the release cannot map is an error."""
    assert bbh_verdict("The answer is (B).", "hyperbaton", "(B)", "i").correct is True
    assert bbh_verdict("The answer is (B).", "hyperbaton", "(a)", "i").correct is False
    assert bbh_verdict("Yes.", "navigate", "no", "i").source == "parsed"
    draws = {}
    for item in ("bbh/test/0", "bbh/test/1", "bbh/test/2", "bbh/test/3", "bbh/test/4", "bbh/test/5"):
        want = int(keyed_rng(0, "voicebench-bbh-guess", item, "(B)").integers(2))
        verdict = bbh_verdict("(B)", "hyperbaton", "(B)", item)
        assert (verdict.correct, verdict.source) == (want == 1, "forced")
        assert bbh_verdict("(B)", "hyperbaton", "(B)", item) == verdict
        draws[item] = want
    assert set(draws.values()) == {0, 1}  # the draw depends on the item
    with pytest.raises(ValueError, match="none of yes, no"):
        bbh_verdict("Yes.", "navigate", "maybe", "i")
    with pytest.raises(ValueError, match="none of the tasks"):
        read_answer("Yes.", "causal_judgement")


# each list's rule count and the SHA-256 of its rules as JSON ([[test, text, answer], ...], ensure_ascii=False),
# computed from the if/elif chains of the release's bbh.py at commit 533815410e3f4d602bd15a1de7105aea4acd828c
RELEASE_LISTS = {
    "YES_NO": (30, "0272152cefb9c5b5a287f0136accbbea3246c61d025fca0390a219c35e710e6f"),
    "SPORTS_UNDERSTANDING": (71, "8ef068ac00f989ee48900deb9382e535f5f227736b0e755aec9db617a8b90166"),
    "HYPERBATON": (210, "c069b5c3245d09eff5ea7bbed36a30c0f9319f0abaee5b7a450b83948df8a702"),
    "NAVIGATE": (39, "ec1a9625ae6e1ce999fe3cb70e11f268444ecedea6a93f6ce339be36e938b70a"),
    "WEB_OF_LIES": (31, "782e9a2c2c25f04ba9720fb4ebbfec63733aacbec6a16504a061bd926633a32c"),
}


@pytest.mark.parametrize("name", sorted(RELEASE_LISTS))
def test_the_phrase_lists_are_the_release_lists(name):
    """The transcribed lists hold the release's rules, in its order, none edited since (381 in all)."""
    import hashlib
    import json

    from omnieval.scoring import voicebench_bbh_phrases

    rules = [list(rule) for rule in getattr(voicebench_bbh_phrases, name)]
    digest = hashlib.sha256(json.dumps(rules, ensure_ascii=False).encode()).hexdigest()
    assert (len(rules), digest) == RELEASE_LISTS[name]


BBH = [("sports_understanding_12", "Is the following sentence plausible? Messi scored a touchdown.", "no"),
       ("hyperbaton_3", "Which sentence has the correct adjective order? (A) big red ball (B) red big ball", "(A)"),
       ("navigate_7", "Take one step forward, then one step back. Are you where you started?", "yes"),
       ("web_of_lies_2", "Jim tells the truth. Bob says Jim lies. Does Bob tell the truth?", "no"),
       ("hyperbaton_9", "Which sentence has the correct adjective order? (A) old wooden chair (B) wooden old chair",
        "(B)"),
       ("sports_understanding_4", "Is the following sentence plausible? Kobe made a three-pointer.", "yes"),
       ("navigate_1", "Always face forward. Take two steps left. Are you where you started?", "maybe")]
JUDGE = {"name": "judge", "engine": "simulated", "options": {"seed": 2}}


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> list[Path]:
    from omnieval.media.synth import beep_audio

    folder = tmp_path_factory.mktemp("voicebench-bbh-media")
    return [beep_audio(folder / f"s{i}.wav", frequency=220 + 70 * i, beeps=1 + i % 3, duration=0.5,
                       sample_rate=8000) for i in range(len(BBH))]


def release(folder: Path, sounds: list[Path]) -> Path:
    path = folder / "bbh" / "test-00000-of-00001.parquet"
    shard(path, [(prompt, reference) for _, prompt, reference in BBH], sounds)
    table = pq.read_table(path)
    pq.write_table(table.append_column("id", [[row_id for row_id, _, _ in BBH]]), path)
    return folder


def release_reading(answer: str, task: str, item_id: str) -> int:
    """The release's reading of the simulated model's answers, worked by hand: ``no`` and ``yes`` start with
    themselves in the three yes / no tasks; ``(A)``, ``(B)`` (hyperbaton reads no bare letter in brackets) and the
    sentence saying the question was missed match no phrase, so the release guesses: here the keyed guess."""
    if task != "hyperbaton" and answer in ("no", "yes"):
        return int(answer == "yes")
    assert answer in ("(A)", "(B)", OPEN_MISSED)
    return int(keyed_rng(0, "voicebench-bbh-guess", item_id, answer).integers(2))


@pytest.mark.slow
def test_bbh_run_scored_by_the_release_rule_beside_the_judge(ray_session, tmp_path, sounds):
    converted = convert_voicebench(release(tmp_path / "voicebench", sounds), tmp_path / "bench")
    assert converted.splits == {"bbh": 6}
    (skipped,) = converted.skipped  # a reference the release's rule cannot read: named by file, row and field
    assert (skipped.entry, skipped.field) == ("row 6 (item bbh/test/6)", "reference") and "'maybe'" in skipped.reason
    items = items_of(tmp_path / "bench")
    tasks = {f"bbh/test/{i}": row_id.rsplit("_", 1)[0] for i, (row_id, _, _) in enumerate(BBH[:6])}
    assert {i: items[i]["breakdowns"]["bbh_task"] for i in tasks} == tasks

    rows = run_open(tmp_path / "bench", tmp_path / "run", JUDGE)
    conditions = OPEN_CONDITIONS
    assert rows.height == 6 * len(conditions) * len(MODELS) and rows["error"].null_count() == rows.height
    references = {f"bbh/test/{i}": reference for i, (_, _, reference) in enumerate(BBH[:6])}
    truth = {"yes": 1, "no": 0, "(A)": 0, "(B)": 1}
    official, guessed = [], 0
    for item_id, answer, correct, source in rows.select("item_id", "answer_text", "official_correct",
                                                        "official_source").iter_rows():
        assert answer in {references[item_id], OPEN_MISSED}
        read = release_reading(answer, tasks[item_id], item_id)
        guessed += source == "forced"
        assert (source == "forced") == (answer in ("(A)", "(B)", OPEN_MISSED))
        assert correct == (read == truth[references[item_id]])
        official.append(read == truth[references[item_id]])
    assert 0 < guessed < rows.height  # both branches of the rule ran
    verdicts = rows.with_columns(verdict=pl.col("verdicts").list.first().struct.field("verdict"))
    # the judge's verdict stays beside the release's: the simulated judge says correct where the answer is the
    # reference
    assert verdicts["verdict"].to_list() == ["correct" if a == references[i] else "incorrect"
                                             for i, a in rows.select("item_id", "answer_text").iter_rows()]

    assert main(["metrics", str(tmp_path / "run" / "predictions.parquet"), "--out", str(tmp_path / "metrics"),
                 "--resamples", "200", "--permutations", "200"]) == 0
    table = pl.read_csv(tmp_path / "metrics" / "metrics.csv", schema_overrides={"key": pl.Utf8})
    got = {(r["model"], r["split"], r["metric"], r["key"]): r for r in table.iter_rows(named=True)}
    scored = rows.with_columns(pl.Series("release_right", official))
    for model in NAMES:
        for key in [*conditions, "all"]:
            cell = [(right, verdict) for m, c, right, verdict in
                    zip(scored["model"], scored["condition"], scored["release_right"], verdicts["verdict"],
                        strict=True) if m == model and key in (c, "all")]
            row = got[(model, "bbh", "open_official_accuracy", key)]
            assert row["value"] == pytest.approx(sum(r for r, _ in cell) / len(cell), abs=1e-12)
            assert row["n"] == len(cell)
            judged = got[(model, "bbh", "open_accuracy", key)]["value"]
            assert judged == pytest.approx(sum(v == "correct" for _, v in cell) / len(cell), abs=1e-12)

    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--resamples", "200",
                 "--permutations", "200"]) == 0
    page = _Cells()
    page.feed((tmp_path / "report" / "report.html").read_text(encoding="utf-8"))
    shown = {(c["data-model"], c["data-key"]): float(c["data-value"]) for c in page.cells
             if c["data-metric"] == "open_official_accuracy" and c.get("data-split") == "bbh" and c.get("data-value")}
    for model in NAMES:
        assert shown[(model, "all")] == pytest.approx(got[(model, "bbh", "open_official_accuracy", "all")]["value"],
                                                      abs=1e-12)
