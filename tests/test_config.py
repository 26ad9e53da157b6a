"""Run configs: valid ones load, invalid ones fail before any work with an error naming file and field."""

from __future__ import annotations

import pytest

from omnieval.cli import main
from omnieval.config import load_run_config
from omnieval.core.schema import InputError

VALID = """
name: t
benchmark: bench
output: out
prompts: [zs, cot]
models:
  - name: sim
    engine: simulated
    options: {reliance: {text: 0.9}}
"""


def _write(tmp_path, text):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_valid_config_resolves_paths_relative_to_the_file(tmp_path):
    config = load_run_config(_write(tmp_path, VALID))
    assert config.benchmark == str(tmp_path / "bench")
    assert config.output == str(tmp_path / "out")
    assert config.prompts == ["zs", "cot"] and config.models[0].replicas == 1


@pytest.mark.parametrize("text, field, words", [
    (VALID.replace("engine: simulated", "engine: gpt-omni-9000"), "models[0].engine", "unknown engine"),
    (VALID.replace("prompts: [zs, cot]", "prompts: [zs, fewshot]"), "prompts", "unknown prompt style"),
    (VALID + "    replicas: -2\n", "models[0].replicas", "greater than or equal"),
    (VALID.replace("benchmark: bench\n", ""), "benchmark", "required"),
    (VALID + "colour: blue\n", "colour", "Extra inputs"),
    (VALID + "  - name: sim\n    engine: simulated\n", None, "unique"),
    (VALID + "    modes: [open]\n", None, "among the run's modes"),
    (VALID.replace("output: out", "output: ''"), "output", "at least 1 character"),
    (VALID.replace("output: out", "output: bench"), "output", "is the benchmark folder or inside it"),
    (VALID.replace("output: out", "output: bench/runs/x"), "output", "is the benchmark folder or inside it"),
    (VALID.replace("output: out", "output: ."), "output", "holds the benchmark folder"),
])
def test_invalid_config_names_file_and_field(tmp_path, text, field, words):
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_run_config(path)
    msg = str(err.value)
    assert str(path) in msg and words in msg
    if field:
        assert f"field '{field}'" in msg


def test_invalid_yaml_names_line(tmp_path):
    path = _write(tmp_path, "name: t\nmodels: [unclosed\n")
    with pytest.raises(InputError, match=r"invalid YAML at line \d+"):
        load_run_config(path)


def test_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    path = _write(tmp_path, VALID.replace("engine: simulated", "engine: nope"))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown engine 'nope'" in err and str(path) in err and "Traceback" not in err


def test_model_modes_are_a_subset_of_the_runs(tmp_path):
    from omnieval.config import modes_of

    text = VALID.replace("models:", "modes: [mcq, open]\njudges:\n  - {name: j, engine: simulated}\nmodels:") \
        + "  - name: mcq-only\n    engine: simulated\n    modes: [mcq]\n"
    config = load_run_config(_write(tmp_path, text))
    assert modes_of(config, config.models[0]) == ["mcq", "open"]
    assert modes_of(config, config.models[1]) == ["mcq"]


@pytest.mark.parametrize("written, read", [("off", "off"), ("'off'", "off"), ("false", "off"), ("exists", "exists")])
def test_media_check_off_as_documented_loads(tmp_path, written, read):
    """YAML reads an unquoted ``off`` as false: the documented ``media_check: off`` must still mean off."""
    config = load_run_config(_write(tmp_path, VALID + f"decode: {{media_check: {written}}}\n"))
    assert config.decode.media_check == read


def test_sweep_output_holding_a_benchmark_is_refused(tmp_path):
    from omnieval.sweep.config import load_sweep_config

    path = tmp_path / "sweep.yaml"
    path.write_text("output: .\nprotocols: [{protocol: dissonance, benchmark: bench}]\n"
                    "models: [{name: s, engine: simulated}]\n")
    with pytest.raises(InputError, match="holds the benchmark folder .protocols.0..benchmark"):
        load_sweep_config(path)


def test_a_model_path_beside_engine_is_options_path_as_in_a_sweep(tmp_path):
    """A model entry copied from a sweep (``path:`` beside ``engine:``) into a run config: the same model, its
    folder taken relative to the file, the same config (so the same run identity) as ``options: {path: ...}``."""
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    entry = "  - {name: m, engine: hf, %s}\n"
    head = VALID.split("models:")[0] + "models:\n"
    beside = load_run_config(_write(tmp_path, head + entry % "path: models/tiny, options: {max_new_tokens: 8}"))
    inside = load_run_config(_write(tmp_path, head + entry % "options: {path: models/tiny, max_new_tokens: 8}"))
    assert beside.models[0].options == {"max_new_tokens": 8, "path": str(tmp_path / "models" / "tiny")}
    assert beside.model_dump() == inside.model_dump()
    with pytest.raises(InputError, match="disagree") as err:
        load_run_config(_write(tmp_path, head + entry % "path: models/tiny, options: {path: models/other}"))
    assert err.value.field == "models[0]"
