"""The published-numbers table (``omnieval/report/cards.csv``), ``omnieval cards``, how a run's model is matched to
it, and the report's "Published numbers" section: a simulated model named (``card:``) as Qwen3-Omni-30B-A3B-Instruct
run on a small benchmark whose ``benchmark.json`` is named ``mmau``, its gap and verdict recounted from its
predictions with numpy (screenshot: docs/report-published.png)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from omnieval.cli import main
from omnieval.core.schema import InputError
from omnieval.report import cards
from omnieval.report.browser import find_chromium, open_page
from tests.omni_release_run import make_clips
from tests.test_report import ReportPage

SHIPPED = Path(cards.__file__).with_name("cards.csv")
OMNI = {"mmau", "mmar", "videomme", "worldsense", "daily-omni", "omnibench", "av-odyssey", "omnivideobench",
        "voicebench", "mmsu", "jointavbench", "videomme-v2", "video-holmes", "mmau-pro"}
CARD = "Qwen3-Omni-30B-A3B-Instruct"
CARD_MMAU = 77.5  # the Qwen3-Omni README's MMAU-v05.15.25 figure for the Instruct model


def _raw_rows() -> list[dict]:
    with SHIPPED.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- the table ------------------------------------------------------------------------------------------------------


def test_shipped_table_schema():
    """Read with the csv module alone: every column filled (variant may be empty), a known benchmark, an accuracy
    in [0, 100], a URL, an ISO date, no figure twice."""
    rows = _raw_rows()
    assert len(rows) >= 10
    assert list(rows[0]) == ["model", "variant", "benchmark", "version", "setting", "number", "source", "date"]
    keys = set()
    for row in rows:
        assert all(row[c].strip() for c in row if c != "variant"), row
        assert row["benchmark"] in OMNI
        assert 0 <= float(row["number"]) <= 100
        assert re.match(r"^https://\S+$", row["source"])
        assert re.match(r"^\d{4}-\d{2}-\d{2}$", row["date"])
        key = (row["model"].lower(), row["variant"], row["benchmark"], row["version"], row["setting"])
        assert key not in keys, key
        keys.add(key)
    assert len(cards.read_cards()) == len(rows)


def test_shipped_table_holds_the_figures_the_issue_quotes():
    """Qwen3-Omni's Daily-Omni 75.8 is the Thinking model's (issue 44); and a repository source is pinned to a
    commit, so the number can be found again where it was read."""
    daily = {(r["variant"], float(r["number"])) for r in _raw_rows()
             if r["benchmark"] == "daily-omni" and r["model"].startswith("Qwen3-Omni")}
    assert ("Thinking", 75.8) in daily and ("Instruct", 75.8) not in daily
    for row in _raw_rows():
        if row["source"].startswith("https://github.com/"):
            assert re.search(r"/blob/[0-9a-f]{40}/", row["source"]), row["source"]


def test_a_variant_agrees_with_the_name_it_is_published_under():
    """A model published as ``...-Instruct`` or ``...-Thinking`` carries that variant, so a Thinking model's figure
    is never shown beside an Instruct run; any other model has no variant, or the mode its source names
    (MiniCPM-o 4.5's instruct mode)."""
    for row in _raw_rows():
        suffix = row["model"].rsplit("-", 1)[-1]
        if suffix in ("Instruct", "Thinking"):
            assert row["variant"] == suffix, row
        else:
            assert row["variant"] in ("", "Instruct"), row


def test_the_table_covers_the_omni_benchmarks_the_sources_give():
    """Rows for the benchmarks a card, a technical report or a benchmark's own leaderboard gives for an open model
    (AV-Odyssey and OmniVideoBench have none yet: no source read states an open model's number there; Video-MME-v2's
    leaderboard names no checkpoint of the table or of a family omnieval runs by its Hugging Face name; MMAU-Pro's
    published numbers are its NV-Embed verdicts, which omnieval does not compute: none is entered to compare with)."""
    covered = {r["benchmark"] for r in _raw_rows()}
    assert covered == OMNI - {"av-odyssey", "omnivideobench", "videomme-v2", "mmau-pro"}


def test_every_benchmark_is_an_omni_converter():
    """The table's benchmark names are the omni converters' own (``CONVERTER`` of each module under
    ``omnieval/datasets/omni``, the name ``benchmark.json`` records), every one of them, and no other."""
    import importlib
    import pkgutil

    import omnieval.datasets.omni as omni

    converters = {getattr(importlib.import_module(f"{omni.__name__}.{m.name}"), "CONVERTER", None)
                  for m in pkgutil.iter_modules(omni.__path__)} - {None}
    assert set(cards.BENCHMARKS) == converters == OMNI
    assert {r["benchmark"] for r in _raw_rows()} <= converters


def test_voicebench_rows_are_its_multiple_choice_subsets():
    """omnieval converts VoiceBench's ``openbookqa`` and ``mmsu`` subsets only: every VoiceBench row names one of
    them, never an overall average over the open subsets; the Qwen3-Omni README's figures as printed there."""
    from omnieval.datasets.omni.voicebench import MCQ_SUBSETS

    voice = [r for r in _raw_rows() if r["benchmark"] == "voicebench"]
    assert voice and {r["version"] for r in voice} == {f"subset {s}" for s in MCQ_SUBSETS}
    figures = {(r["model"], r["version"]): float(r["number"]) for r in voice}
    assert figures[("Qwen3-Omni-30B-A3B-Instruct", "subset openbookqa")] == 89.7
    assert figures[("Qwen3-Omni-30B-A3B-Thinking", "subset mmsu")] == 83.0
    mmsu = {r["variant"]: float(r["number"]) for r in _raw_rows()
            if r["benchmark"] == "mmsu" and r["model"].startswith("Qwen3-Omni")}
    assert mmsu == {"Instruct": 69.0, "Thinking": 70.2}


def test_a_leaderboard_row_names_the_checkpoint_its_release_loads():
    """JointAVBench's and Video-Holmes' own tables name models by short names ("Qwen2.5-VL", 7B); a row's model is the
    checkpoint the release's evaluation script loads for that name, said in its setting, so the figure is matched
    to those weights and no other size or variant. JointAVBench's Qwen2.5-Omni average is its Table 3's 56.2."""
    own = ("https://github.com/jointavbench/JointAVBench/", "https://github.com/TencentARC/Video-Holmes/")
    rows = [r for r in _raw_rows() if r["source"].startswith(own)]
    assert {r["benchmark"] for r in rows} == {"jointavbench", "video-holmes"}
    for row in rows:
        named = re.search(r"checkpoint (\S+)/(\S+) as the release's", row["setting"])
        assert named and named.group(2) == row["model"], row
    joint = {r["model"]: float(r["number"]) for r in rows if r["benchmark"] == "jointavbench"}
    assert joint["Qwen2.5-Omni-7B"] == 56.2


@pytest.mark.parametrize(("edit", "field"), [
    (lambda r: r.update(number="101"), "number"),
    (lambda r: r.update(number="n/a"), "number"),
    (lambda r: r.update(benchmark="mme"), "benchmark"),
    (lambda r: r.update(source="README.md"), "source"),
    (lambda r: r.update(date="Sept 2025"), "date"),
    (lambda r: r.update(setting=""), "setting"),
])
def test_a_bad_row_is_named_by_line_and_field(tmp_path, edit, field):
    rows = _raw_rows()
    edit(rows[2])
    path = _write(tmp_path / "cards.csv", rows)
    with pytest.raises(InputError) as caught:
        cards.read_cards(path)
    assert caught.value.item == "line 4" and caught.value.field == field
    assert str(path) in str(caught.value)


def test_a_figure_twice_or_a_model_spelled_twice_is_refused(tmp_path):
    rows = _raw_rows()
    with pytest.raises(InputError, match="the same figure as line 2"):
        cards.read_cards(_write(tmp_path / "twice.csv", [*rows, dict(rows[0])]))
    other = dict(rows[0], model=rows[0]["model"].lower(), setting="another setting")
    with pytest.raises(InputError, match="spelled") as caught:
        cards.read_cards(_write(tmp_path / "spelled.csv", [*rows, other]))
    assert caught.value.field == "model"


def _write(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


# --- omnieval cards -------------------------------------------------------------------------------------------------


def test_cards_command_lists_the_rows_asked_for(capsys):
    assert main(["cards", "--model", CARD.lower(), "--benchmark", "mmau"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    expected = [r for r in _raw_rows() if r["model"] == CARD and r["benchmark"] == "mmau"]
    assert len(lines) == 1 + len(expected) == 2
    assert lines[0].split()[:4] == ["model", "variant", "benchmark", "version"]
    assert lines[1].split()[:3] == [CARD, "Instruct", "mmau"] and expected[0]["source"] in lines[1]
    assert " 77.5 " in lines[1]
    assert main(["cards"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 + len(_raw_rows())


def test_cards_command_with_nothing_to_show(capsys):
    assert main(["cards", "--model", "no-such-model"]) == 1
    assert "no published number" in capsys.readouterr().out
    assert main(["cards", "--benchmark", "mme"]) == 2
    assert "unknown benchmark 'mme'" in capsys.readouterr().err


# --- matching -------------------------------------------------------------------------------------------------------


NAMES = ["Qwen2.5-Omni-7B", CARD, "MiniCPM-o-4_5"]


@pytest.mark.parametrize(("entry", "card"), [
    ({"name": "m", "options": {"path": "/models/Qwen2.5-Omni-7B"}}, "Qwen2.5-Omni-7B"),
    ({"name": "m", "options": {"path": "/models/qwen2.5-omni-7b/"}}, "Qwen2.5-Omni-7B"),
    ({"name": "m", "options": {"path": "/hf/hub/models--Qwen--Qwen2.5-Omni-7B/snapshots/ae9e1690543ffd5c"}},
     "Qwen2.5-Omni-7B"),
    ({"name": "m", "path": "/weights/MiniCPM-o-4_5"}, "MiniCPM-o-4_5"),
    ({"name": "m", "card": CARD.upper(), "options": {"path": "/models/Qwen2.5-Omni-7B"}}, CARD),  # card: first
    ({"name": "Qwen2.5-Omni-7B", "options": {"path": "/models/finetuned"}}, None),  # the name is not the path
    ({"name": "m", "options": {"path": "/models/Qwen2.5-Omni-7B-AWQ"}}, None),  # exact, not a prefix
    ({"name": "m", "engine": "simulated", "options": {}}, None),
])
def test_a_model_is_matched_by_its_card_else_its_folder(entry, card):
    assert cards.match_model(entry, NAMES).card == card


def test_an_unknown_card_or_an_ambiguous_spelling_matches_nothing_and_says_why():
    unknown = cards.match_model({"name": "m", "card": "Qwen9-Omni"}, NAMES)
    assert unknown.card is None and "names no model" in unknown.how
    ambiguous = cards.match_model({"name": "m", "options": {"path": "/x/minicpm-o-4_5"}},
                                  [*NAMES, "MINICPM-O-4_5"])
    assert ambiguous.card is None and "ambiguous" in ambiguous.how


def test_card_is_a_label_not_part_of_the_run_identity():
    from omnieval.config import ModelConfig
    from omnieval.run.identity import model_identity
    from omnieval.sweep.config import SweepModel

    plain = ModelConfig(name="m", engine="simulated")
    named = ModelConfig(name="m", engine="simulated", card=CARD)
    assert model_identity(plain) == model_identity(named)
    assert named.model_dump()["card"] == CARD
    assert SweepModel(name="m", engine="simulated", card=CARD).as_model_config().card == CARD
    swept = SweepModel(name="m", engine="hf", path="/weights/Qwen2.5-Omni-7B").as_model_config()  # run.json's entry
    assert cards.match_model(swept.model_dump(mode="json"), NAMES).card == "Qwen2.5-Omni-7B"


# --- the report -----------------------------------------------------------------------------------------------------

N_ITEMS = 16


@pytest.fixture(scope="module")
def published(ray_session, tmp_path_factory):
    """A run of a simulated model labelled ``card: Qwen3-Omni-30B-A3B-Instruct`` on a benchmark named ``mmau``
    (audio questions, split test-mini), a second model without a card, and the report of it."""
    base = tmp_path_factory.mktemp("published")
    clips = make_clips(base / "clips", 4)
    bench = base / "bench"
    lines = []
    for i in range(N_ITEMS):
        sound = bench / "media" / f"sound{i % 4}.wav"
        sound.parent.mkdir(parents=True, exist_ok=True)
        sound.write_bytes(clips[i % 4]["sound"].read_bytes())
        lines.append(json.dumps({"item_id": f"mmau-{i:03d}", "benchmark": "mmau", "split": "test-mini",
                                 "question": f"Question {i}?", "options": ["one", "two", "three", "four"],
                                 "answer": "ABCD"[i % 4], "media": {"audio": str(sound.relative_to(bench))}}))
    (bench / "items.jsonl").write_text("\n".join(lines) + "\n")
    (bench / "benchmark.json").write_text(json.dumps({"name": "mmau", "protocol": "spectrum", "n_items": N_ITEMS}))
    models = [{"name": "sim-omni", "engine": "simulated", "card": CARD,
               "options": {"seed": 7, "reliance": {"audio": 0.8}}},
              {"name": "sim-other", "engine": "simulated", "options": {"seed": 8, "reliance": {"audio": 0.5}}}]
    config = base / "run.yaml"
    config.write_text(yaml.safe_dump({"benchmark": str(bench), "output": str(base / "run"), "protocol": "spectrum",
                                      "decode": {"num_frames": 2, "max_side": 32}, "models": models}))
    assert main(["run", str(config)]) == 0
    assert main(["report", str(base / "run"), "--out", str(base / "report"), "--resamples", "300",
                 "--permutations", "200"]) == 0
    return base


def _published_table(page: ReportPage) -> dict:
    (table,) = [t for t in page.tables if t["attrs"].get("data-table") == "published"]
    return table


def _body(table: dict) -> list[dict[str, dict]]:
    header = [c["text"].strip() for c in table["rows"][0]]
    return [dict(zip(header, row, strict=True)) for row in table["rows"][1:]]


def test_report_sets_our_accuracy_beside_the_card(published):
    """One row (the card has one MMAU figure, the other model no card): the card's 77.5, our accuracy on the full
    input recounted from the predictions with numpy, the gap card minus ours, and the verdict of our interval."""
    page = ReportPage((published / "report" / "report.html").read_text(encoding="utf-8"))
    assert "published" in page.sections
    (row,) = _body(_published_table(page))
    rows = pl.read_parquet(published / "run" / "predictions.parquet").filter(
        (pl.col("model") == "sim-omni") & (pl.col("condition") == "normal") & pl.col("choice").is_not_null())
    ours = 100 * np.mean(np.asarray(rows["choice"].to_list()) == np.asarray(rows["target"].to_list()))
    assert row["card model"]["text"].strip() == CARD and row["model"]["text"].strip() == "sim-omni"
    assert float(row["card %"]["text"]) == CARD_MMAU
    assert float(row["ours %"]["v"]) == pytest.approx(ours, abs=0.05)
    assert float(row["gap (pp)"]["text"]) == pytest.approx(CARD_MMAU - ours, abs=0.05)
    low, high = (float(x) for x in re.findall(r"[\d.]+", row["ours %"]["ci"]))
    assert row["card in our interval"]["text"].strip() == ("inside" if low <= CARD_MMAU <= high else "outside")
    assert row["card version"]["text"].strip() == "MMAU-v05.15.25" and row["our split"]["text"].strip() == "test-mini"
    assert row["our settings"]["text"].strip() == "prompt zs, 2 frames, max_side 32"
    assert "greedy" in row["card's setting"]["text"]


def test_verdict_follows_the_interval(published):
    """Cards placed inside and outside the run's interval (as the metrics give it) get the verdict, and the gap,
    each implies."""
    from omnieval.report.inputs import load_runs

    (run,) = load_runs([str(published / "run")], resamples=300, permutations=200)
    cell = run.metrics.filter((pl.col("model") == "sim-omni") & (pl.col("metric") == "accuracy")
                              & (pl.col("key") == "normal")).row(0, named=True)
    low, high, value = 100 * cell["ci_low"], 100 * cell["ci_high"], 100 * cell["value"]
    assert low < high
    base = cards.read_cards()[0]
    outside = high + 0.5 if high <= 99.5 else low - 0.5
    made = [cards.CardRow(CARD, "Instruct", "mmau", "v", f"setting {x}", x, base.source, base.date)
            for x in ((low + high) / 2, outside, low, high)]
    shown, unmatched = cards.published_rows([run], made)
    assert unmatched == []
    assert [p.inside for p in shown] == [True, False, True, True]  # the interval's ends belong to it
    for p, card in zip(shown, made, strict=True):
        assert p.gap == pytest.approx(card.number - value, abs=1e-9)


def test_an_unknown_card_is_reported_not_matched(published):
    from omnieval.report.inputs import load_runs

    (run,) = load_runs([str(published / "run")], resamples=300, permutations=200)
    run.info["config"]["models"][0]["card"] = "Qwen9-Omni"
    section = cards.section([run])
    assert [b.text for b in section.blocks] == [f"Not matched: {run.label}: model sim-omni: card 'Qwen9-Omni' "
                                                "names no model of the table"]


@pytest.mark.skipif(find_chromium() is None, reason="chromium not installed: run scripts/setup_chromium.sh")
def test_published_section_in_headless_chromium(published, tmp_path):
    """Loads without console messages; the section is there in the browser as written."""
    result = open_page(published / "report" / "report.html", screenshot=tmp_path / "shot.png", width=1400,
                       height=900)
    assert result.returncode == 0 and result.console == [], result.console
    dom = ReportPage(result.dom)
    assert len(_body(_published_table(dom))) == 1


def test_a_cot_run_read_by_the_official_rule_is_compared_by_it():
    """A card's number was counted by the benchmark's own rule, so where a run has the official accuracy of a cell
    (generated answers read by the benchmark's scorer), that cell, its interval and its n are the ones compared,
    and the row says so; a zero-shot cell (no official twin) keeps omnieval's accuracy."""
    from types import SimpleNamespace

    card = cards.CardRow("Qwen3-Omni-30B-A3B-Instruct", "Instruct", "mmau", "test-mini", "", 77.5, "https://x", "d")
    rows = [("spectrum", "accuracy", "normal", "m", "cot", "test", 0.70, 0.60, 0.80, 50),
            ("spectrum", "official_accuracy", "normal", "m", "cot", "test", 0.50, 0.40, 0.60, 46),
            ("spectrum", "accuracy", "normal", "m", "zs", "test", 0.65, 0.55, 0.75, 50)]
    metrics = pl.DataFrame(rows, schema=["protocol", "metric", "key", "model", "prompt", "split", "value", "ci_low",
                                         "ci_high", "n"], orient="row")
    info = {"benchmark_name": "mmau", "scorer": "mmau", "recipes": {"m": {"decode": {
                "fps": {"value": 2.0, "level": "recipe"}, "max_frames": {"value": 768, "level": "recipe"},
                "num_frames": {"value": None, "level": "default"}}}},
            "config": {"models": [{"name": "m", "card": "Qwen3-Omni-30B-A3B-Instruct"}], "decode": {"num_frames": 8}}}
    run = SimpleNamespace(label="r", info=info, metrics=metrics)
    published, unmatched = cards.published_rows([run], [card])
    assert not unmatched
    by_prompt = {p.prompt: p for p in published}
    assert by_prompt["cot"].scored_by == "official (mmau)"
    assert (by_prompt["cot"].ours, by_prompt["cot"].n) == (0.50, 46)
    assert by_prompt["cot"].gap == pytest.approx(77.5 - 50.0) and by_prompt["cot"].inside is False
    assert by_prompt["zs"].scored_by.startswith("omnieval") and by_prompt["zs"].ours == 0.65
    assert by_prompt["cot"].recipe == "prompt cot, fps 2 (max_frames 768)"  # the model's resolved settings
