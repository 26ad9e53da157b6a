"""The records between the run's stages (run/records.py): request rows are Arrow lists and structs, not JSON text;
one result record (``EngineResult``) goes from the engine to the prediction row, each field into the column of the
same name. Expected values are the ones a scripted engine was told to return, or worked out here from the
instance (its media segments, the keyed seed), never read back from the code under test."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

from omnieval.core.keyed import keyed_seed
from omnieval.core.schema import PREDICTION_SCHEMA, RESULT_COLUMN, Instance, Segment
from omnieval.engines.base import Engine, EngineResult, GenerationResult


def _instance(n: int, media: bool = True) -> Instance:
    segments = [Segment(kind="text", text=f"Text: fox number {n}")]
    if media:
        segments = [Segment(kind="media", modality="video", path=f"media/{n}.mp4"),
                    Segment(kind="media", modality="audio", path=f"media/{n}.wav"), *segments]
    return Instance(instance_id=f"q{n}|C000", item_id=f"q{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=segments, question="Which animal is it?",
                    option_labels=list("ABCDE"), option_texts=["a fox", "a cat", "a car", "a drum", "I cannot answer"],
                    target="A", abstain_label="E", protocol_fields={"k": 0},
                    simulation_hints={"text": "A"})


class Scripted(Engine):
    """Returns the result it was given for each instance id (score) or key (generate)."""

    def __init__(self, model: str, scores: dict, texts: dict):
        super().__init__(model)
        self.scores, self.texts = scores, texts

    def score(self, requests):
        return [self.scores[r.instance.instance_id] for r in requests]

    def generate(self, requests):
        return [self.texts[r.key] for r in requests]


def test_request_rows_are_typed_lists_and_structs():
    """Every column that was JSON text is an Arrow list or struct, and holds the values the instance gives."""
    from omnieval.run.answers import SampleDraws, answer_requests, request_table

    instances = [_instance(0), _instance(1)]
    cascade = {"q0|C000": {"cascade": "d:audio", "intermediate_text": '{"media/0.wav": "a bark"}',
                           "stage_engines": "describe=simulated:d;answer=simulated:m"}}
    rows = list(answer_requests(instances, ["mcq", "open"], ["zs"], set(), cascade,
                                draws=SampleDraws(2, 5, 0.7, None)))
    table = request_table(rows, {"run": 3})
    types = {f.name: f.type for f in table.schema}
    assert types["media_paths"] == pa.list_(pa.string())
    assert pa.types.is_list(types["parts"]) and pa.types.is_struct(types["parts"].value_type)
    for name in ("meta", "sampling", "cascade"):
        assert pa.types.is_struct(types[name]), name
    assert not {"media_paths_json", "parts_json", "meta_json", "cascade_json", "sampling_json"} & set(types)

    got = table.to_pylist()
    first = got[0]
    assert first["media_paths"] == ["media/0.mp4", "media/0.wav"]
    assert first["cascade"] == cascade["q0|C000"]
    assert first["sampling"] == {"seed": keyed_seed(5, "sample", 0), "temperature": 0.7, "top_p": 1.0}
    assert got[1]["sampling"]["seed"] == keyed_seed(5, "sample", 1)  # 64-bit seeds come back exact
    assert all(r["cascade"] is None for r in got if r["instance_id"] == "q1|C000")
    opened = next(r for r in got if r["mode"] == "open")
    assert opened["meta"]["task"] == "answer" and opened["meta"]["style"] == "zs"
    assert opened["parts"][-1]["kind"] == "text" and "Question: Which animal is it?" in opened["parts"][-1]["text"]
    assert all(r["run"] == 3 for r in got)


def test_a_request_column_without_a_type_is_refused_by_name():
    from omnieval.run.records import request_rows_table

    with pytest.raises(ValueError, match="media_path_json"):
        request_rows_table([{"call": "generate", "media_path_json": "[]"}])


def test_each_result_field_reaches_the_prediction_column_of_its_name():
    """A scored result's fields and a generated result's ``raw_text`` land in the prediction row unchanged, under the
    same names; a NaN confidence is stored as null; the stage adds the latency."""
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.stages import call_rows

    instances = [_instance(0, media=False), _instance(1, media=False)]
    scores = {
        "q0|C000": EngineResult(choice="B", confidence=0.625, confidence_method="rs",
                                option_logprobs=[-1.5, -0.25, -3.0, -4.0, -5.0], raw_text="B", answer_source=None,
                                reasoning="thought", reasoning_tokens=7, shown={"video_frames": 4}),
        "q1|C000": EngineResult(choice="C", confidence=math.nan, confidence_method="rs", raw_text="C"),
    }
    texts = {"q0|C000|zs": GenerationResult(raw_text="It is\nAnswer: a fox"),
             "q1|C000|zs": GenerationResult(raw_text=None, error="no reply", error_kind="media")}
    rows = list(answer_requests(instances, ["mcq", "open"], ["zs"], set(), {}))
    batch = call_rows(Scripted("m", scores, texts), rows)
    assert all(type(r) is EngineResult for r in batch[RESULT_COLUMN])
    out = {(r["instance_id"], r["mode"]): r for r in PredictionRows("m", "scripted")(batch).to_pylist()}

    scored = out["q0|C000", "mcq"]
    assert (scored["choice"], scored["confidence"], scored["confidence_method"], scored["option_logprobs"],
            scored["raw_text"], scored["reasoning"], scored["reasoning_tokens"], scored["error"]) == \
        ("B", 0.625, "rs", [-1.5, -0.25, -3.0, -4.0, -5.0], "B", "thought", 7, None)
    assert scored["video_frames"] == 4 and scored["latency_s"] >= 0
    assert out["q1|C000", "mcq"]["confidence"] is None and out["q1|C000", "mcq"]["choice"] == "C"
    opened = out["q0|C000", "open"]
    assert (opened["raw_text"], opened["answer_text"], opened["error"]) == ("It is\nAnswer: a fox", "a fox", None)
    failed = out["q1|C000", "open"]
    assert (failed["raw_text"], failed["error"], failed["error_kind"]) == (None, "no reply", "media")


def test_the_result_record_names_are_the_prediction_columns():
    """The fields a prediction row takes from the result record are its columns of the same names (no rename on
    the way: the generated text is ``raw_text`` from the engine to the row)."""
    from dataclasses import fields

    row_fields = {"choice", "confidence", "confidence_method", "option_logprobs", "raw_text", "error", "error_kind",
                  "answer_source", "reasoning", "reasoning_tokens", "latency_s"}
    assert row_fields <= {f.name for f in fields(EngineResult)}
    assert row_fields <= set(PREDICTION_SCHEMA.names)
    assert "raw_text" in {f.name for f in fields(GenerationResult)}


def test_judge_rows_carry_their_retry_as_a_struct_and_parse_it():
    """A judge's request row holds its retry (suffix, allowed words, key) as a struct; the model stage asks again
    when the first reply is not an allowed word, and the judgement row reads the verdict with those words."""
    from omnieval.core.judges import JudgeCase, JudgementRows, judge_request
    from omnieval.run.stages import call_rows

    case = JudgeCase(key="m|zs|q0", question="Which?", reference="a fox", answer="a fox", abstention=False)
    row = judge_request("j", "v1", case, model="m", prompt="zs", instance_id="q0|C000")
    assert row["retry"]["words"] == ["correct", "incorrect"] and row["retry"]["key"] == "m|zs|q0|j|2"
    assert json.dumps(row["meta"])  # plain values: no JSON text inside
    texts = {"m|zs|q0|j|1": GenerationResult("I think it is right"), "m|zs|q0|j|2": GenerationResult("correct")}
    batch = call_rows(Scripted("j", {}, texts), [row])
    (judged,) = JudgementRows("j", "v1")(batch).to_pylist()
    assert (judged["verdict"], judged["attempts"], judged["raw_text"]) == ("correct", 2, "correct")


def test_a_struct_field_its_type_does_not_name_is_refused_by_name():
    """Arrow drops a dict key its struct type lacks without a word; a request row with one is refused instead."""
    from omnieval.run.records import request_rows_table

    row = {"call": "generate", "key": "k", "meta": {"task": "judge", "answer": "a", "colour": "red"}}
    with pytest.raises(ValueError, match="meta has no field colour"):
        request_rows_table([row])
    row["meta"].pop("colour")
    assert request_rows_table([row]).column("meta").to_pylist()[0]["answer"] == "a"
