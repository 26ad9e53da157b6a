"""The VLMEvalKit reader on a work dir laid out as VLMEvalKit's ``run.py`` and ``dump`` write it
(tests/data/imports/vlmevalkit/README.md): two models (one with ``_`` in its name), a circular dataset in ``.xlsx``
(MMBench_DEV_EN: 4 rotation rows per question in the prediction file) and a plain one in ``.tsv`` (MMStar), each
run's files linked from the model folder, and an older unlinked run of one model.

References: the prediction files read with the ``csv`` module / openpyxl and a plain loop (a question is correct
only if every rotation's prediction is its answer: VLMEvalKit's CircularEval), the ``_result`` files' ``hit``
column, and VLMEvalKit's own ``_acc.csv`` ``Overall``; hand-written tables for the refusals.
"""

from __future__ import annotations

import csv
import json
import sys
from datetime import datetime
from pathlib import Path

import pytest

from omnieval.core.schema import InputError
from omnieval.imports import ImportOptions, get_format

OUTPUTS = Path(__file__).parent / "data" / "imports" / "vlmevalkit" / "outputs"
QWEN, LLAVA = "Qwen2.5-Omni-7B", "llava_onevision_qwen2_7b_ov"
RUN = {QWEN: "T20260301-101500", LLAVA: "T20260302-090000"}
OLDER_LLAVA = "T20260220-170000"


def read(paths, **options):
    return list(get_format("vlmevalkit")(paths, ImportOptions(**options)))


def table(path: Path) -> list[dict]:
    if path.suffix == ".xlsx":
        openpyxl = pytest.importorskip("openpyxl")
        sheet = openpyxl.load_workbook(path, read_only=True).worksheets[0]
        lines = list(sheet.iter_rows(values_only=True))
        return [dict(zip(lines[0], (None if v is None else str(v) for v in line))) for line in lines[1:]]
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t" if path.suffix == ".tsv" else ","))


def verdicts_from_predictions(path: Path) -> dict[str, bool]:
    """Per question (``index % 1e6``), whether every one of its rows predicted its answer."""
    verdicts: dict[str, bool] = {}
    for row in table(path):
        question = str(int(row["index"]) % 1_000_000)
        verdicts[question] = verdicts.get(question, True) and row["prediction"] == row["answer"]
    return verdicts


def overall(model: str, dataset: str, run: str) -> float:
    return float(table(OUTPUTS / model / run / f"{model}_{dataset}_acc.csv")[0]["Overall"])


@pytest.mark.parametrize("dataset, ext", [("MMBench_DEV_EN", "xlsx"), ("MMStar", "tsv")])
@pytest.mark.parametrize("model", [QWEN, LLAVA])
def test_accuracy_and_count_per_model_equal_the_tools_own(model, dataset, ext):
    if ext == "xlsx":
        pytest.importorskip("openpyxl")
    folder = OUTPUTS / model / RUN[model]
    rows = read([folder / f"{model}_{dataset}_exact_matching_result.{ext}"])
    assert {(r.model, r.task) for r in rows} == {(model, dataset)}
    reference = verdicts_from_predictions(folder / f"{model}_{dataset}.{ext}")
    assert {r.sample_id: r.correct for r in rows} == reference
    assert len(rows) == len(reference) == (3 if ext == "xlsx" else 5)
    assert sum(r.correct for r in rows) / len(rows) == pytest.approx(overall(model, dataset, RUN[model]))


def test_a_model_folder_reads_each_linked_file_once_and_keeps_the_older_run_apart():
    pytest.importorskip("openpyxl")
    rows = read([OUTPUTS / LLAVA])
    # the latest run (linked from the model folder, read once) and the older run: 3 + 5 questions each
    assert len(rows) == 16
    by_run: dict[float, list] = {}
    for row in rows:
        by_run.setdefault(row.written, []).append(row)
    older, latest = sorted(by_run)
    assert latest - older == (datetime(2026, 3, 2, 9) - datetime(2026, 2, 20, 17)).total_seconds()
    for stamp, run in ((older, OLDER_LLAVA), (latest, RUN[LLAVA])):
        for dataset in ("MMBench_DEV_EN", "MMStar"):
            mine = [r for r in by_run[stamp] if r.task == dataset]
            assert sum(r.correct for r in mine) / len(mine) == pytest.approx(overall(LLAVA, dataset, run))


def test_two_models_share_question_ids():
    pytest.importorskip("openpyxl")
    rows = read([OUTPUTS / QWEN, OUTPUTS / LLAVA / RUN[LLAVA]])
    ids = {model: {(r.task, r.sample_id) for r in rows if r.model == model} for model in (QWEN, LLAVA)}
    assert ids[QWEN] == ids[LLAVA] == {("MMBench_DEV_EN", "0"), ("MMBench_DEV_EN", "1"), ("MMBench_DEV_EN", "2"),
                                       *(("MMStar", str(i)) for i in range(10, 15))}


def test_fields_of_a_record_as_written():
    row = next(r for r in read([OUTPUTS / QWEN / f"{QWEN}_MMStar_exact_matching_result.tsv"]) if r.sample_id == "14")
    assert (row.correct, row.target, row.text, row.cluster, row.repeat, row.filter) == (False, "A", "B", None, 0, "")
    assert row.model == QWEN  # from the folder: the link lives in the model folder


def write(path: Path, rows: list[dict]) -> Path:
    """A table as VLMEvalKit's dump writes a .tsv/.csv: every field quoted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t" if path.suffix == ".tsv" else ",",
                                quoting=csv.QUOTE_ALL)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_rotation_rows_count_a_question_correct_only_if_all_are(tmp_path):
    """A result table that keeps every rotation's own hit: question 7 has one wrong rotation, question 8 none."""
    hits = {7: [1, 1, 0, 1], 8: [1, 1, 1, 1]}
    rows = [{"index": g + k * 1_000_000, "answer": "A", "prediction": "A", "hit": h}
            for g, per in hits.items() for k, h in enumerate(per)]
    path = write(tmp_path / "m" / "m_SomeCircular_exact_matching_result.tsv", rows)
    got = {r.sample_id: (r.correct, r.extra) for r in read([path])}
    assert got == {"7": (False, {"rows": 4}), "8": (True, {"rows": 4})}


def test_video_column_and_cluster_field(tmp_path):
    rows = [{"index": 1, "video": "v1", "category": "x", "answer": "A", "prediction": "A", "hit": 1},
            {"index": 2, "video": "v1", "category": "y", "answer": "B", "prediction": "A", "hit": 0}]
    path = write(tmp_path / "m" / "m_Vid_gpt-4o-mini_result.csv", rows)
    assert [(r.task, r.cluster) for r in read([path])] == [("Vid", "v1"), ("Vid", "v1")]
    assert [r.cluster for r in read([path], cluster_field="category")] == ["x", "y"]
    with pytest.raises(InputError, match="'missing'"):
        read([path], cluster_field="missing")


def one_line_error(paths, **options) -> str:
    with pytest.raises(InputError) as caught:
        read(paths, **options)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_bad_hit_is_one_line_naming_file_row_and_field(tmp_path):
    path = write(tmp_path / "m" / "m_D_exact_matching_result.tsv",
                 [{"index": 1, "hit": 1}, {"index": 2, "hit": "0.5"}])
    message = one_line_error([path])
    assert str(path) in message and "index 2" in message and "field 'hit'" in message


def test_a_prediction_file_without_verdicts_points_to_the_result_file(tmp_path):
    path = write(tmp_path / "m" / "m_D_exact_matching_result.tsv", [{"index": 1, "prediction": "A"}])
    message = one_line_error([path])
    assert "field 'hit'" in message and "_result" in message
    bad_index = write(tmp_path / "m" / "m_E_exact_matching_result.tsv", [{"index": "x1", "hit": 1}])
    assert "field 'index'" in one_line_error([bad_index])


def test_a_model_name_the_folder_does_not_give_is_refused_not_guessed(tmp_path):
    """``a_b_MMStar_exact_matching_result.tsv`` outside a folder named ``a_b``: model ``a`` or ``a_b``?"""
    path = write(tmp_path / "loose" / "a_b_MMStar_exact_matching_result.tsv", [{"index": 1, "hit": 1}])
    message = one_line_error([path])
    assert str(path) in message and "--model" in message
    assert {(r.model, r.task) for r in read([path], model="a_b")} == {("a_b", "MMStar")}


def test_model_option_renames_and_folders_without_results_are_refused(tmp_path):
    rows = read([OUTPUTS / QWEN / f"{QWEN}_MMStar_exact_matching_result.tsv"], model="qwen-omni")
    assert {r.model for r in rows} == {"qwen-omni"}
    (tmp_path / "empty").mkdir()
    assert "no VLMEvalKit result file" in one_line_error([tmp_path / "empty"])
    assert "no such file" in one_line_error([tmp_path / "nothing"])


def test_a_damaged_xlsx_is_one_line(tmp_path):
    pytest.importorskip("openpyxl")
    source = OUTPUTS / QWEN / RUN[QWEN] / f"{QWEN}_MMBench_DEV_EN_exact_matching_result.xlsx"
    path = tmp_path / QWEN / source.name
    path.parent.mkdir()
    path.write_bytes(source.read_bytes()[:500])
    assert "cannot read the table" in one_line_error([path])


def test_without_openpyxl_an_xlsx_is_one_line_naming_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # what an environment without it does on import
    path = OUTPUTS / QWEN / f"{QWEN}_MMBench_DEV_EN_exact_matching_result.xlsx"
    message = one_line_error([path])
    assert str(path) in message and "openpyxl" in message


def test_a_json_result_as_dump_writes_it(tmp_path):
    """``PRED_FORMAT=json``: ``dump`` writes the frame's records as a JSON list (``indent=4``)."""
    rows = [{"index": 3, "question": "q", "answer": "C", "prediction": "C", "hit": 1, "log": "ok"},
            {"index": 4, "question": "q", "answer": "D", "prediction": "A", "hit": 0, "log": "ok"}]
    path = tmp_path / "m" / "m_MMStar_exact_matching_result.json"
    path.parent.mkdir()
    path.write_text(json.dumps(rows, indent=4, ensure_ascii=False))
    assert [(r.sample_id, r.correct, r.text) for r in read([path])] == [("3", True, "C"), ("4", False, "A")]
    path.write_text('{"index": 3}')
    assert "not a list of records" in one_line_error([path])
