"""Bad input a user hits first gets one line in the user's terms, naming the file, the item and the field: a picture
cut short in an MCQ source, options that repeat the same text, a benchmark without ``benchmark.json``, an
``items.jsonl`` that is a folder, engine and protocol options of the wrong shape."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

from omnieval.cli import main
from omnieval.core.schema import InputError
from omnieval.datasets.benchmark import load_benchmark


def picture(colour: str, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(buffer, fmt)
    return buffer.getvalue()


def write_tsv(path: Path, rows: list[list[str]]) -> Path:
    header = ["index", "question", "A", "B", "C", "answer", "image"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(r) + "\n" for r in [header, *rows]))
    return path


def one_line_error(argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("omnieval: error: ") and "Traceback" not in err
    return err


def spectrum_bench(folder: Path, options: list[list[str]], *, meta: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    if meta is not False:
        (folder / "benchmark.json").write_text(json.dumps(meta or {"name": "b", "protocol": "spectrum"}))
    items = [{"item_id": f"q{i}", "question": "Which city?", "options": opts, "answer": "A",
              "media": {"image": f"media/{i}.png"}} for i, opts in enumerate(options)]
    (folder / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    return folder


# -- a picture cut short (datasets mcq) ----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_mcq_refuses_an_image_cut_short_naming_file_row_and_column(fmt, tmp_path, capsys):
    whole = base64.b64encode(picture("red", fmt)).decode()
    cut = base64.b64encode(picture("blue", fmt)).decode()
    cut = cut[: len(cut) * 2 // 3 // 4 * 4]  # still valid base64 (whole quads) and still starts like the format
    assert base64.b64decode(cut, validate=True)[:2] == picture("blue", fmt)[:2]
    source = write_tsv(tmp_path / "MMBench.tsv", [["1", "Colour?", "red", "blue", "green", "A", whole],
                                                  ["2", "Colour?", "red", "blue", "green", "B", cut]])
    err = one_line_error(["datasets", "mcq", str(source), "--out", str(tmp_path / "bench")], capsys)
    assert f"file '{source}'" in err and "item '2 (row 1)'" in err and "field 'image'" in err
    assert "does not decode" in err and fmt.replace("JPEG", "JPG") in err
    assert not (tmp_path / "bench").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# -- options that repeat the same text -------------------------------------------------------------------------

def test_spectrum_item_with_a_repeated_option_is_refused_at_load(tmp_path):
    bench = spectrum_bench(tmp_path / "b", [["Paris", "Rome", "Oslo"], ["Paris", "London", "Paris"]])
    with pytest.raises(InputError) as err:
        load_benchmark(bench)
    assert (err.value.file, err.value.item, err.value.field) == (str(bench / "items.jsonl"), "q1", "options")
    assert "options[0] (A) 'Paris' and options[2] (C) 'Paris' are the same text" in str(err.value)
    assert "Value error" not in str(err.value)


def test_options_that_differ_only_in_case_and_punctuation_are_refused(tmp_path):
    """An answer given as text is matched with case, spaces and punctuation ignored (``parse_answer``)."""
    from omnieval.core.prompts import parse_answer

    assert parse_answer("rome", ["A", "B", "C"], ["Paris", "Rome.", "Oslo"]) == "B"
    bench = spectrum_bench(tmp_path / "b", [["Paris", "Rome", "Oslo"], ["Rome.", "Oslo", "rome"]])
    with pytest.raises(InputError, match=r"options\[0\] \(A\) 'Rome\.' and options\[2\] \(C\) 'rome' read the "
                                         "same") as err:
        load_benchmark(bench)
    assert (err.value.item, err.value.field) == ("q1", "options")


def test_mcq_refuses_a_row_whose_options_repeat(tmp_path, capsys):
    image = base64.b64encode(picture("red")).decode()
    source = write_tsv(tmp_path / "src.tsv", [["1", "Colour?", "red", "blue", "green", "A", image],
                                              ["2", "Colour?", "red", "blue", "blue", "B", image]])
    err = one_line_error(["datasets", "mcq", str(source), "--out", str(tmp_path / "bench")], capsys)
    assert f"file '{source}'" in err and "item '2 (row 1)'" in err and "field 'options'" in err
    assert "options[1] (B) 'blue' and options[2] (C) 'blue'" in err
    assert not (tmp_path / "bench").exists()


def dissonance_item(options: list[str]) -> dict:
    media = {"video": "v.mp4", "audio": "a.wav", "text": "about Kabli"}
    return {"item_id": "d1", "question": "Food?", "anchor": "Kabli", "media": media,
            "answer_key": {"Kabli": options[0]}, "options": options}


def test_dissonance_options_that_read_the_same_are_refused(tmp_path):
    bench = tmp_path / "d"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps({"name": "d", "protocol": "dissonance"}))
    item = dissonance_item(["Zorbli", "Mutra", "zorbli!", "Fenlo"])
    (bench / "items.jsonl").write_text(json.dumps(item) + "\n")
    with pytest.raises(InputError, match=r"options\[0\] 'Zorbli' and options\[2\] 'zorbli!' read the same") as err:
        load_benchmark(bench)
    assert (err.value.item, err.value.field) == ("d1", "options")


def crossmodal_bench(folder: Path, item: dict) -> Path:
    folder.mkdir()
    (folder / "benchmark.json").write_text(json.dumps({"name": "x", "protocol": "crossmodal"}))
    (folder / "items.jsonl").write_text(json.dumps(item) + "\n")
    return folder


def test_crossmodal_explicit_options_that_repeat_are_refused(tmp_path):
    entry = {"question": "Which instrument?", "context": [{"modality": "audio", "input": "media/a.wav"}],
             "options": [{"modality": "text", "input": "Violin"}, {"modality": "text", "input": "Cello"},
                         {"modality": "text", "input": "violin"}], "answer": "A"}
    bench = crossmodal_bench(tmp_path / "x", {"item_id": "x1", "directions": {"A->T": entry}})
    with pytest.raises(InputError, match=r"options\[0\] \(A\) and options\[2\] \(C\) are the same text") as err:
        load_benchmark(bench)
    assert (err.value.item, err.value.field) == ("x1", "directions.A->T.options")


@pytest.mark.parametrize("rendering,field", [("text", "distractors[1].text"), ("audio", "distractors[1].audio")])
def test_crossmodal_entities_that_share_a_rendering_are_refused(rendering, field, tmp_path):
    def entity(name: str) -> dict:
        return {"text": f"A {name} bird", "audio": f"media/{name}.wav", "image": f"media/{name}.png"}

    context, one, two = entity("red"), entity("blue"), entity("green")
    two[rendering] = "a RED bird." if rendering == "text" else context["audio"]
    bench = crossmodal_bench(tmp_path / "x", {"item_id": "x1", "context": context, "distractors": [one, two]})
    with pytest.raises(InputError, match=f"is the same as context.{rendering}") as err:
        load_benchmark(bench)
    assert (err.value.item, err.value.field) == ("x1", field)


# -- a benchmark without benchmark.json; items.jsonl a folder --------------------------------------------------

def test_a_spectrum_benchmark_without_benchmark_json_says_so(tmp_path):
    bench = spectrum_bench(tmp_path / "b", [["Paris", "Rome"], ["Oslo", "Rome"]], meta=False)
    with pytest.raises(InputError) as err:
        load_benchmark(bench)
    text = str(err.value)
    assert err.value.file == str(bench / "benchmark.json") and err.value.field == "protocol"
    assert "has no benchmark.json, so its protocol is unknown" in text and "is a 'spectrum' item" in text
    assert "write benchmark.json with the benchmark's name and protocol" in text and "docs/benchmarks.md" in text
    assert "anchor" not in text
    (bench / "benchmark.json").write_text(json.dumps({"name": "b"}))  # a benchmark.json that names no protocol
    with pytest.raises(InputError, match="has a benchmark.json without 'protocol', so its protocol is unknown"):
        load_benchmark(bench)
    (bench / "benchmark.json").write_text(json.dumps({"name": "b", "protocol": "spectrum"}))
    assert len(load_benchmark(bench).items) == 2


def test_a_broken_item_without_benchmark_json_names_the_default_and_the_field(tmp_path):
    bench = tmp_path / "d"
    bench.mkdir()
    item = dissonance_item(["Zorbli", "Mutra", "Tek", "Fenlo"])
    del item["anchor"]
    (bench / "items.jsonl").write_text(json.dumps(item) + "\n")
    with pytest.raises(InputError, match="has no benchmark.json, so its protocol is unknown: read as a dissonance "
                                         "item .the default., its first item .line 1 of items.jsonl. fails: "
                                         "field 'anchor'"):
        load_benchmark(bench)


def test_items_jsonl_that_is_a_folder_is_one_line(tmp_path, capsys):
    bench = tmp_path / "b"
    (bench / "items.jsonl").mkdir(parents=True)
    (bench / "benchmark.json").write_text(json.dumps({"name": "b", "protocol": "spectrum"}))
    with pytest.raises(InputError, match="items.jsonl is a folder, not a file") as err:
        load_benchmark(bench)
    assert err.value.file == str(bench / "items.jsonl")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"benchmark": str(bench), "output": str(tmp_path / "run"),
                                      "models": [{"name": "sim", "engine": "simulated"}]}))
    err = one_line_error(["run", str(config)], capsys)
    assert f"file '{bench / 'items.jsonl'}'" in err and "is a folder, not a file" in err


def test_benchmark_json_that_is_not_an_object_is_one_line(tmp_path):
    bench = spectrum_bench(tmp_path / "b", [["Paris", "Rome"], ["Oslo", "Rome"]], meta=False)
    (bench / "benchmark.json").write_text('["spectrum"]')
    with pytest.raises(InputError, match="expected a JSON object .*got a JSON list"):
        load_benchmark(bench)


# -- engine and protocol options -----------------------------------------------------------------------------

def run_config(tmp_path: Path, options: dict, protocol_options: dict | None = None) -> Path:
    bench = spectrum_bench(tmp_path / "bench", [["Paris", "Rome"], ["Oslo", "Rome"]])
    config = tmp_path / "run.yaml"
    body = {"benchmark": str(bench), "output": str(tmp_path / "run"), "decode": {"media_check": "off"},
            "models": [{"name": "sim", "engine": "simulated", "options": options}]}
    if protocol_options is not None:
        body["protocol_options"] = protocol_options
    config.write_text(yaml.safe_dump(body))
    return config


def test_simulated_reliance_that_is_not_a_mapping_says_what_it_must_be(tmp_path, capsys):
    err = one_line_error(["run", str(run_config(tmp_path, {"reliance": "high"}))], capsys)
    assert "field 'models[0].options.reliance'" in err
    assert "reliance must be a mapping of percept -> probability in [0, 1], e.g. {video: 0.8, audio: 0.6, " \
           "text: 0.9}" in err and "got 'high'" in err
    assert "dictionary update sequence" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("options,field,says", [
    ({"reliance": {"video": "high"}}, "reliance.video", "reliance.video must be a probability in [0, 1], got 'high'"),
    ({"reliance": {"video": 1.5}}, "reliance.video", "reliance.video must be a probability in [0, 1], got 1.5"),
    ({"temperature": "warm"}, "temperature", "temperature must be a number > 0, got 'warm'"),
    ({"abstain_on_conflict": "0.5"}, "abstain_on_conflict", "must be a probability in [0, 1], got '0.5'"),
    ({"noise": -1}, "noise", "noise must be a number >= 0"),
    ({"seed": "seven"}, "seed", "seed must be an integer, got 'seven'"),
    ({"modalities": 5}, "modalities", "modalities must be a list of video, audio, image, pointcloud, got 5"),
])
def test_simulated_options_of_the_wrong_shape_name_the_option(options, field, says, tmp_path, capsys):
    err = one_line_error(["run", str(run_config(tmp_path, options))], capsys)
    assert f"field 'models[0].options.{field}'" in err and says in err
    assert "could not convert" not in err and "not supported between" not in err


@pytest.mark.parametrize("engine,options,field,says", [
    ("hf", {"path": "m", "dtype": ["float16"]}, "dtype", "dtype must be one of float32, float16, bfloat16"),
    ("vllm", {"path": "m", "max_model_len": "8k"}, "max_model_len", "max_model_len must be an integer >= 1"),
    ("vllm", {"path": "m", "gpu_memory_utilization": "high"}, "gpu_memory_utilization", "in (0, 1], got 'high'"),
    ("vllm", {"path": "m", "enforce_eager": "yes"}, "enforce_eager", "enforce_eager must be true or false"),
    ("openai", {"base_url": "http://127.0.0.1:9/v1", "modalities": 5}, "modalities", "modalities must be a list"),
])
def test_other_engines_options_of_the_wrong_shape_name_the_option(engine, options, field, says):
    """Checked on the driver before any model loads (vLLM would refuse them inside the model's actor)."""
    from omnieval.engines.base import OptionError, engine_class

    with pytest.raises(OptionError) as err:
        engine_class(engine).check_options(options)
    assert err.value.option == field and says in str(err.value)


@pytest.mark.parametrize("protocol_options,field,says", [
    ({"text_unit": "all"}, "text_unit", "Input should be 'question' or 'question+options', got 'all'"),
    ({"conditions": "normal"}, "conditions", "Input should be a valid list, got 'normal'"),
    ({"singleton": "pool"}, "singleton", "unknown option 'singleton' of protocol spectrum (its options: text_unit, "
                                         "donor_within, singletons, conditions)"),
])
def test_protocol_options_of_the_wrong_shape_say_what_was_given(protocol_options, field, says, tmp_path, capsys):
    err = one_line_error(["run", str(run_config(tmp_path, {}, protocol_options))], capsys)
    assert f"field 'protocol_options.{field}'" in err and says in err and "Extra inputs" not in err


def test_contrastive_permutations_of_the_wrong_shape_is_one_message():
    from pydantic import ValidationError

    from omnieval.protocols.contrastive import Options

    with pytest.raises(ValidationError) as err:
        Options(permutations="some")
    (only,) = err.value.errors()
    assert only["loc"] == ("permutations",) and "'all' or a sample size (an integer >= 0), got 'some'" in only["msg"]
