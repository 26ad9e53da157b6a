"""The mixture-of-models round-trip-consistency filter: MF / UF / PMF / PUF against hand-computed decisions,
including ties, invalid and missing answers, and a model that answers inconsistently across permutations."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import polars as pl
import pytest

from omnieval.stats.contrastive_filter import filter_command, rtc_filter

ROOT = Path(__file__).resolve().parents[1]

# item -> (n, selection, answer index)
ITEMS = {"a": (2, "random", 0), "b": (2, "similar", 0), "c": (3, "random", 2), "d": (3, "similar", 1),
         "e": (2, "random", 1), "f": (2, "similar", 0), "g": (4, "random", 3)}
# item -> condition -> target, written by hand (perm:BA of an answer in position A puts it in position B)
TARGETS = {"a": {"original": "A", "perm:BA": "B"}, "b": {"original": "A", "perm:BA": "B"},
           "c": {"original": "C", "perm:CAB": "A", "perm:BCA": "B"}, "d": {"original": "B", "perm:BAC": "A"},
           "e": {"original": "B", "perm:BA": "A"}, "f": {"original": "A", "perm:BA": "B"}}
# (item, condition, model) -> choice; absent = no prediction at all
CHOICES = {
    # a: everyone right everywhere -> all four criteria
    **{("a", c, m): TARGETS["a"][c] for c in TARGETS["a"] for m in ("m1", "m2", "m3")},
    # b: m3 flips on the permutation (inconsistent across orders) -> MF, UF, PMF; not PUF
    **{("b", "original", m): "A" for m in ("m1", "m2", "m3")},
    ("b", "perm:BA", "m1"): "B", ("b", "perm:BA", "m2"): "B", ("b", "perm:BA", "m3"): "A",
    # c: m3 wrong on the original only -> MF (2 of 3), PMF; not UF, PUF
    ("c", "original", "m1"): "C", ("c", "original", "m2"): "C", ("c", "original", "m3"): "A",
    **{("c", c, m): TARGETS["c"][c] for c in ("perm:CAB", "perm:BCA") for m in ("m1", "m2", "m3")},
    # d: 1 of 3 agrees on the original (m2 invalid, m3 wrong) -> nothing
    ("d", "original", "m1"): "B", ("d", "original", "m2"): None, ("d", "original", "m3"): "C",
    **{("d", "perm:BAC", m): "A" for m in ("m1", "m2", "m3")},
    # e: two models follow position A, not the content -> MF, UF on the original; not PMF, PUF
    **{("e", "original", m): "B" for m in ("m1", "m2", "m3")},
    ("e", "perm:BA", "m1"): "A", ("e", "perm:BA", "m2"): "B", ("e", "perm:BA", "m3"): "B",
    # f: m3 gave no prediction on the permutation -> missing is not agreement: MF, UF, PMF; not PUF
    **{("f", "original", m): "A" for m in ("m1", "m2", "m3")},
    ("f", "perm:BA", "m1"): "B", ("f", "perm:BA", "m2"): "B",
    # g: never evaluated (in the candidate items only)
}
EXPECTED = {  # item -> (MF, UF, PMF, PUF)
    "a": (True, True, True, True), "b": (True, True, True, False), "c": (True, False, True, False),
    "d": (False, False, False, False), "e": (True, True, False, False), "f": (True, True, True, False),
    "g": (False, False, False, False),
}


def rows(choices=CHOICES, prefix="captions:", prompt="zs") -> list[dict]:
    out = []
    for (item, cond, model), choice in choices.items():
        n, selection, _ = ITEMS[item]
        out.append(dict(model=model, prompt=prompt, protocol="contrastive", split="all", item_id=item,
                        instance_id=f"{item}|{prefix}{cond}", condition=prefix + cond, target=TARGETS[item][cond],
                        choice=choice, abstain_label=None, confidence=None, confidence_method=None, n_inputs=n,
                        selection_type=selection))
    return out


def items() -> list[dict]:
    suffix = {"image": "png", "audio": "wav", "video": "mp4", "pointcloud": "npy"}
    modalities = ["image", "audio", "video", "pointcloud"]
    return [{"item_id": k, "question": f"Which scene {k}?", "answer": answer, "selection_type": sel,
             "inputs": [{"modality": m, "path": f"{k}/{i}.{suffix[m]}", "caption": f"{k} {i}"}
                        for i, m in enumerate(modalities[:n])]}
            for k, (n, sel, answer) in ITEMS.items()]


def test_decisions_against_the_hand_computed_table():
    # media rows with the opposite answers are present too: the caption rows are the ones used
    media = rows({k: ("B" if v == "A" else "A") for k, v in CHOICES.items()}, prefix="")
    result = rtc_filter(pl.DataFrame(rows() + media), items())
    got = {r["item_id"]: tuple(r[c] for c in ("MF", "UF", "PMF", "PUF")) for r in result.decisions.iter_rows(
        named=True)}
    assert got == EXPECTED
    dec = {r["item_id"]: r for r in result.decisions.iter_rows(named=True)}
    assert dec["c"]["n_orders"] == 3 and dec["c"]["agree_original"] == 2 and dec["d"]["agree_original"] == 1
    assert dec["g"]["n_orders"] == 0 and dec["g"]["n_inputs"] == 4
    assert result.models == ["m1", "m2", "m3"] and result.prompt == "zs"


def test_retention_table_by_criterion_n_and_selection():
    result = rtc_filter(pl.DataFrame(rows()), items())
    ret = {(r["criterion"], r["n_inputs"], r["selection_type"]): (r["kept"], r["candidates"], r["retention"])
           for r in result.retention.iter_rows(named=True)}
    assert ret[("MF", "all", "all")] == (5, 7, pytest.approx(5 / 7))
    assert ret[("UF", "all", "all")][:2] == (4, 7)
    assert ret[("PMF", "all", "all")][:2] == (4, 7)
    assert ret[("PUF", "all", "all")][:2] == (1, 7)
    assert ret[("MF", "2", "random")][:2] == (2, 2)  # a, e
    assert ret[("PMF", "2", "random")][:2] == (1, 2)  # a
    assert ret[("PUF", "2", "similar")][:2] == (0, 2)  # b, f
    assert ret[("MF", "3", "similar")][:2] == (0, 1)  # d
    assert ret[("UF", "3", "all")][:2] == (0, 2)
    assert ret[("MF", "4", "random")] == (0, 1, 0.0)  # g, never evaluated
    assert ("MF", "4", "similar") in ret and ret[("MF", "4", "similar")] == (0, 0, None)
    assert len(ret) == 4 * 4 * 3  # criteria x (2, 3, 4, all) x (random, similar, all)


def test_ties_are_not_a_majority():
    """Four models: 2 of 4 agreeing is a tie even when it is the plurality (the others split); two models: 1 of 2."""
    def table(choices: dict[str, str | None], target="A") -> pl.DataFrame:
        return pl.DataFrame([dict(model=m, prompt="zs", item_id="t", condition="original", target=target,
                                  choice=c, n_inputs=4, selection_type="random") for m, c in choices.items()])

    plurality = rtc_filter(table({"w": "A", "x": "A", "y": "B", "z": "C"})).decisions.row(0, named=True)
    assert (plurality["MF"], plurality["UF"], plurality["PMF"]) == (False, False, False)
    three = rtc_filter(table({"w": "A", "x": "A", "y": "A", "z": "C"})).decisions.row(0, named=True)
    assert (three["MF"], three["UF"], three["PMF"], three["PUF"]) == (True, False, True, False)
    pair = rtc_filter(table({"w": "A", "x": "B"})).decisions.row(0, named=True)
    assert (pair["MF"], pair["UF"]) == (False, False)
    both = rtc_filter(table({"w": "A", "x": "A"})).decisions.row(0, named=True)
    assert (both["MF"], both["UF"], both["PMF"], both["PUF"]) == (True, True, True, True)
    # an explicit ensemble larger than the table: the absent model counts against
    named = rtc_filter(table({"w": "A", "x": "A"}), models=["w", "x", "v", "u"]).decisions.row(0, named=True)
    assert (named["MF"], named["n_models"]) == (False, 4)


def test_item_without_original_fails_and_input_errors():
    perm_only = {k: v for k, v in CHOICES.items() if k[0] == "a" and k[1] != "original"}
    dec = rtc_filter(pl.DataFrame(rows(perm_only))).decisions.row(0, named=True)
    assert (dec["MF"], dec["UF"], dec["PMF"], dec["PUF"]) == (False, False, False, False)
    with pytest.raises(ValueError, match="several prompt styles"):
        rtc_filter(pl.DataFrame(rows() + rows(prompt="cot")))
    only_cot = rtc_filter(pl.DataFrame(rows() + rows(prompt="cot")), prompt="cot")
    assert only_cot.prompt == "cot" and only_cot.decisions.height == 6
    with pytest.raises(ValueError, match="has 2 predictions"):
        rtc_filter(pl.DataFrame(rows() + rows()[:1]))


def test_filter_command_and_job_write_the_kept_items(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items()))
    pl.DataFrame(rows()).write_parquet(tmp_path / "pred.parquet")
    assert filter_command([tmp_path / "pred.parquet"], bench, tmp_path / "out") == 0
    for criterion, kept in (("MF", "abcef"), ("UF", "abef"), ("PMF", "abcf"), ("PUF", "a")):
        lines = (tmp_path / "out" / f"items_{criterion}.jsonl").read_text().splitlines()
        assert [json.loads(x)["item_id"] for x in lines] == list(kept)
    retention = pl.read_csv(tmp_path / "out" / "retention.csv")
    row = retention.filter((pl.col("criterion") == "PUF") & (pl.col("n_inputs") == "all")
                           & (pl.col("selection_type") == "all"))
    assert (row["kept"][0], row["candidates"][0]) == (1, 7)
    summary = json.loads((tmp_path / "out" / "filter.json").read_text())
    assert summary["kept"] == {"MF": 5, "UF": 4, "PMF": 4, "PUF": 1}
    # the job entry point takes the same arguments
    spec = importlib.util.spec_from_file_location("filter_rtc", ROOT / "jobs" / "filter_rtc.py")
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    assert job.main([str(tmp_path / "pred.parquet"), "--items", str(bench / "items.jsonl"), "--out",
                     str(tmp_path / "out2"), "--models", "m1", "m2"]) == 0
    # with m1 and m2 only: both right everywhere on a, b, c, f; d has 1 of 2 on its original, e 1 of 2 on perm:BA
    kept = [json.loads(x)["item_id"] for x in (tmp_path / "out2" / "items_PMF.jsonl").read_text().splitlines()]
    assert kept == ["a", "b", "c", "f"]


def test_the_cli_command_parses_its_arguments_and_reports_bad_items(tmp_path, capsys):
    """``omnieval filter rtc`` as a user types it: several prediction files, ``--models``, ``--prompt``; an items
    file with a broken record fails with exit status 2 and a message naming the file and line."""
    from omnieval.cli import main

    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items()))
    table = pl.DataFrame(rows() + rows(prompt="cot"))
    table.filter(pl.col("model") == "m1").write_parquet(tmp_path / "m1.parquet")
    table.filter(pl.col("model") != "m1").write_parquet(tmp_path / "rest.parquet")
    argv = ["filter", "rtc", str(tmp_path / "m1.parquet"), str(tmp_path / "rest.parquet"), "--items", str(bench),
            "--out", str(tmp_path / "out"), "--prompt", "zs", "--models", "m1", "m2"]
    assert main(argv) == 0
    assert "7 candidates, 2 models" in capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "filter.json").read_text())
    assert summary["models"] == ["m1", "m2"] and summary["prompt"] == "zs"
    kept = [json.loads(x)["item_id"] for x in (tmp_path / "out" / "items_PMF.jsonl").read_text().splitlines()]
    assert kept == ["a", "b", "c", "f"]  # as the job entry point gives for m1 and m2 (test above)
    (bench / "items.jsonl").write_text(json.dumps(items()[0]) + "\n{not json\n")
    assert main(argv[:-5] + ["--out", str(tmp_path / "out3"), "--prompt", "zs"]) == 2
    err = capsys.readouterr().err
    assert "items.jsonl" in err and "line 2" in err, err
