"""The inspect reader on logs inspect-ai itself wrote (tests/data/imports/inspect/README.md: two mock-model runs of a
four-sample multiple-choice task, 2 epochs, each as ``.eval`` and its ``inspect log convert`` ``.json``).

References: the ``.json`` logs read with the ``json`` module and a plain loop (one verdict per sample and epoch,
``"C"`` correct), and inspect's own aggregate ``results.scores[0].metrics.accuracy``; edited copies of a log for the
refusals and for the verdict kinds the mock run does not write (numbers, booleans, several scorers).
"""

from __future__ import annotations

import json
import struct
import zipfile
from dataclasses import asdict
from pathlib import Path

import pytest

from omnieval.core.schema import InputError
from omnieval.imports import ImportOptions, get_format

LOGS = Path(__file__).parent / "data" / "imports" / "inspect" / "logs"
JSON_LOGS = sorted(LOGS.glob("*.json"))
EVAL_LOGS = sorted(LOGS.glob("*.eval"))


def read(paths, **options):
    return list(get_format("inspect")(paths, ImportOptions(**options)))


def plain_loop(log_path: Path) -> tuple[str, int, float, dict]:
    """(model, sample count, accuracy, {(id, epoch): (verdict, video id, answer letter)}) from the JSON log."""
    log = json.loads(log_path.read_text())
    verdicts = {}
    for sample in log["samples"]:
        score = sample["scores"]["choice"]
        verdicts[(str(sample["id"]), sample["epoch"])] = (score["value"] == "C", sample["metadata"]["video_id"],
                                                           score["answer"])
    hits = sum(v[0] for v in verdicts.values())
    return log["eval"]["model"], len(verdicts), hits / len(verdicts), verdicts


def accuracy(rows) -> float:
    return sum(r.correct for r in rows) / len(rows)


@pytest.mark.parametrize("kind", ["eval", "json"])
def test_accuracy_and_count_per_model_equal_the_logs_own(kind):
    logs = EVAL_LOGS if kind == "eval" else JSON_LOGS
    assert len(logs) == 2
    for log, reference in zip(logs, JSON_LOGS):
        model, n, acc, verdicts = plain_loop(reference)
        rows = read([log])
        assert {r.model for r in rows} == {model} and {r.task for r in rows} == {"video_mcq"}
        assert len(rows) == n == 8
        assert accuracy(rows) == pytest.approx(acc)
        aggregate = json.loads(reference.read_text())["results"]["scores"][0]["metrics"]["accuracy"]["value"]
        assert accuracy(rows) == pytest.approx(aggregate)  # balanced epochs: inspect's mean of per-sample means
        got = {(r.sample_id, r.repeat + 1): (r.correct, r.cluster, r.choice) for r in rows}
        assert got == verdicts


def test_the_two_models_differ_where_their_logs_do():
    by_model = {}
    for row in read([LOGS]):
        by_model.setdefault(row.model, []).append(row)
    assert sorted(by_model) == ["mockllm/model", "mockllm/other"]
    assert len(by_model["mockllm/model"]) == 16  # the .eval and its .json: the writer dedupes, the reader does not
    assert accuracy(by_model["mockllm/model"]) == pytest.approx(0.5)
    assert accuracy(by_model["mockllm/other"]) == pytest.approx(7 / 8)


def test_the_eval_and_its_json_conversion_yield_identical_records():
    for eval_log, json_log in zip(EVAL_LOGS, JSON_LOGS):
        assert eval_log.stem == json_log.stem

        def key(row):
            return (row.sample_id, row.repeat)

        from_eval = sorted(read([eval_log]), key=key)
        from_json = sorted(read([json_log]), key=key)
        strip = [{**asdict(r), "source": None} for r in from_eval]
        assert strip == [{**asdict(r), "source": None} for r in from_json]
        assert from_eval[0].written == from_json[0].written is not None


def test_the_eval_members_are_zstd_which_zipfile_cannot_read():
    """Why the reader decompresses the members itself: inspect writes them with zip method 93."""
    with zipfile.ZipFile(EVAL_LOGS[0]) as archive:
        assert {info.compress_type for info in archive.infolist()} == {93}
        with pytest.raises(NotImplementedError):
            archive.read("header.json")


def test_fields_of_a_record_as_logged():
    rows = {(r.sample_id, r.repeat): r for r in read([JSON_LOGS[0]])}
    q1 = rows[("q1", 0)]
    assert (q1.target, q1.choice, q1.text, q1.cluster, q1.filter) == ("A", "A", "ANSWER: A", "vid-a", "")
    assert rows[("4", 1)].sample_id == "4"  # an integer id, as text so that it joins across models


def test_model_and_cluster_field_options():
    rows = read([JSON_LOGS[0]], model="renamed", cluster_field="video_id")
    assert {r.model for r in rows} == {"renamed"}
    assert {r.cluster for r in rows} == {"vid-a", "vid-b", "vid-c"}


def edited(tmp_path: Path, edit) -> Path:
    """A copy of the first JSON log with ``edit(log)`` applied."""
    log = json.loads(JSON_LOGS[0].read_text())
    edit(log)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(log))
    return out


def one_line_error(paths, **options) -> str:
    with pytest.raises(InputError) as caught:
        read(paths, **options)
    message = str(caught.value)
    assert "\n" not in message
    return message


def set_value(value, index=1):
    def edit(log):
        log["samples"][index]["scores"]["choice"]["value"] = value
    return edit


@pytest.mark.parametrize("value, words", [("P", "partial credit"), (0.5, "not a verdict"), ("B", "not a verdict"),
                                          (None, "not a verdict")])
def test_a_score_that_is_not_a_verdict_is_one_line_naming_file_sample_and_field(tmp_path, value, words):
    path = edited(tmp_path, set_value(value))
    message = one_line_error([path])
    assert str(path) in message and words in message
    assert "samples[1] (id 'q1', epoch 1)" in message and "scores.choice.value" in message


def test_numbers_booleans_and_no_answer_are_verdicts(tmp_path):
    values = [1, 0, True, False, 1.0, "N"]
    expected = [True, False, True, False, True, False]

    def edit(log):
        for sample, value in zip(log["samples"], values):
            sample["scores"]["choice"]["value"] = value
    rows = read([edited(tmp_path, edit)])
    assert [r.correct for r in rows[: len(values)]] == expected


def test_several_scorers_give_one_record_each_named_by_filter(tmp_path):
    def edit(log):
        for sample in log["samples"]:
            sample["scores"]["exact"] = {"value": "C", "answer": "A"}
    rows = read([edited(tmp_path, edit)])
    assert len(rows) == 16
    assert {r.filter for r in rows} == {"choice", "exact"}
    assert all(r.correct for r in rows if r.filter == "exact")


@pytest.mark.parametrize("edit, field", [
    (lambda log: log["eval"].pop("model"), "eval.model"),
    (lambda log: log["samples"][2].pop("scores"), "scores"),
    (lambda log: log["samples"][2].update(epoch=0), "epoch"),
    (lambda log: log["samples"][2].pop("id"), "id"),
])
def test_a_bad_record_is_one_line_naming_its_field(tmp_path, edit, field):
    path = edited(tmp_path, edit)
    message = one_line_error([path])
    assert str(path) in message and f"field {field!r}" in message


def test_a_missing_cluster_field_is_named(tmp_path):
    message = one_line_error([JSON_LOGS[0]], cluster_field="audio_id")
    assert "metadata.audio_id" in message


def test_a_damaged_eval_zip_is_one_line(tmp_path):
    data = bytearray(EVAL_LOGS[0].read_bytes())
    with zipfile.ZipFile(EVAL_LOGS[0]) as archive:
        info = archive.getinfo("samples/q1_epoch_1.json")
    middle = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2
    data[middle] ^= 0xFF  # one byte of one sample's compressed data
    damaged = tmp_path / "damaged.eval"
    damaged.write_bytes(bytes(data))
    message = one_line_error([damaged])
    assert str(damaged) in message and "samples/q1_epoch_1.json" in message

    truncated = tmp_path / "truncated.eval"
    truncated.write_bytes(bytes(data[: len(data) // 2]))
    assert "not a readable .eval zip" in one_line_error([truncated])


def test_not_a_log_is_refused(tmp_path):
    other = tmp_path / "notes.json"
    other.write_text('{"title": "not a log"}')
    assert "not an inspect log" in one_line_error([other])
    assert "no such file or folder" in one_line_error([tmp_path / "empty"])
    (tmp_path / "empty").mkdir()
    assert "no inspect log" in one_line_error([tmp_path / "empty"])


def test_a_member_whose_crc_does_not_match_is_refused(tmp_path):
    """A zstd member that decompresses but not to what the zip recorded (its CRC in the central directory)."""
    data = EVAL_LOGS[0].read_bytes()
    with zipfile.ZipFile(EVAL_LOGS[0]) as archive:
        info = archive.getinfo("samples/q2_epoch_1.json")
    crc = struct.pack("<I", info.CRC)
    at = data.rindex(crc)  # the central directory's copy, the one zipfile (and the reader) use
    damaged = tmp_path / "crc.eval"
    damaged.write_bytes(data[:at] + struct.pack("<I", info.CRC ^ 1) + data[at + 4:])
    message = one_line_error([damaged])
    assert "CRC" in message and "samples/q2_epoch_1.json" in message


def test_a_failed_sample_is_left_out_as_inspects_results_leave_it(tmp_path):
    """inspect writes a failed sample with its ``error`` and no ``scores``; it is not scored, so not imported."""
    def edit(log):
        log["samples"][3].pop("scores")
        log["samples"][3]["error"] = {"message": "RuntimeError('boom')", "traceback": "", "traceback_ansi": ""}
    rows = read([edited(tmp_path, edit)])
    assert len(rows) == 7 and ("q3", 0) not in {(r.sample_id, r.repeat) for r in rows}
