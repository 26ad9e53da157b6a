"""The ``omnieval`` parser: every command and option, as they were when ``build_parser`` was one function (a
split into one function per command group must keep them), and a parser built without importing dev tooling."""

from __future__ import annotations

import argparse
import subprocess
import sys

from omnieval.cli import build_parser

# command -> its options: flags (or a positional's name with its nargs), =default, {choices}, (required)
COMMANDS = {
    "omnieval": ["-h/--help", "--version"],
    "omnieval bench": ["-h/--help"],
    "omnieval bench engine": [
        "-h/--help", "--model", "--quick", "--anchors", "--questions", "--small-items", "--repeats", "--device='cpu'",
        "--vllm-options", "--workdir",
    ],
    "omnieval bench gpu": [
        "-h/--help", "--size='7b' {7b,tiny}", "--device='cuda'", "--dtype='bfloat16' {bfloat16,float16,float32}",
        "--benchmark", "--batch-size", "--instances", "--peer-instances", "--max-batch", "--decode-seconds",
        "--skip {throughput,profile,max_batch,decode}", "--out", "--workdir",
    ],
    "omnieval bench decode": ["-h/--help", "--quick", "--long", "--only", "--counts", "--workdir"],
    "omnieval bench coverage": ["-h/--help", "--quick", "--replicates", "--resamples", "--seed=0",
                                "--part {main,few-anchors,few-items,ranks,samples}"],
    "omnieval bench pipeline": ["-h/--help", "--quick", "--workdir"],
    "omnieval bench report": ["-h/--help", "--quick", "--scale", "--sizes", "--workdir"],
    "omnieval bench stats": ["-h/--help", "--quick", "--scale", "--sizes", "--workdir"],
    "omnieval bench sweep": ["-h/--help", "--quick", "--workdir"],
    "omnieval datasets": ["-h/--help"],
    "omnieval datasets av-odyssey": [
        "-h/--help", "release", "--out (required)", "--name='av-odyssey'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets check": [
        "-h/--help", "folder", "--item", "--seed=0", "--media-check='probe' {probe,exists,off}", "--protocol-options",
    ],
    "omnieval datasets contra4": [
        "-h/--help", "release", "--media-root", "--media-map", "--out (required)", "--name='contra4'", "--split",
        "--copy", "--on-missing='error' {error,skip}", "--overwrite",
    ],
    "omnieval datasets daily-omni": [
        "-h/--help", "release", "--out (required)", "--name='daily-omni'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets mcq": [
        "-h/--help", "source", "--out (required)", "--name", "--format='auto' {auto,parquet,hf-disk,tsv}", "--split",
        "--answer-format='auto' {auto,label,index,text}", "--column", "--skip-missing-image", "--limit",
        "--media-root", "--overwrite",
    ],
    "omnieval datasets jointavbench": [
        "-h/--help", "release", "--out (required)", "--name='jointavbench'", "--media-root", "--copy",
        "--option-order='release' {release,seeded}", "--seed=0", "--overwrite",
    ],
    "omnieval datasets mmar": [
        "-h/--help", "release", "--out (required)", "--name='mmar'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets mmau": [
        "-h/--help", "release", "--out (required)", "--name='mmau'", "--media-root", "--copy",
        "--version {original,v05.15.25}", "--overwrite",
    ],
    "omnieval datasets mmau-pro": [
        "-h/--help", "release", "--out (required)", "--name='mmau-pro'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets mmsu": [
        "-h/--help", "release", "--out (required)", "--name='mmsu'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets omnibench": [
        "-h/--help", "release", "--out (required)", "--name='omnibench'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets omnivideobench": [
        "-h/--help", "release", "--out (required)", "--name='omnivideobench'", "--media-root", "--copy",
        "--overwrite",
    ],
    "omnieval datasets synth": [
        "-h/--help", "--out (required)", "--protocol='dissonance' {dissonance,crossmodal,spectrum,contrastive}",
        "--entities=6", "--items=48", "--anchors=4", "--questions=2", "--question-jitter", "--speech", "--soundtrack",
        "--seed=0", "--overwrite",
    ],
    "omnieval datasets video-holmes": [
        "-h/--help", "release", "--out (required)", "--name='video-holmes'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets videomme": [
        "-h/--help", "release", "--out (required)", "--name='videomme'", "--media-root", "--copy", "--duration",
        "--overwrite",
    ],
    "omnieval datasets videomme-v2": [
        "-h/--help", "release", "--out (required)", "--name='videomme-v2'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets voicebench": [
        "-h/--help", "release", "--out (required)", "--name='voicebench'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets worldsense": [
        "-h/--help", "release", "--out (required)", "--name='worldsense'", "--media-root", "--copy", "--overwrite",
    ],
    "omnieval datasets xmodbench": [
        "-h/--help", "release", "--out (required)", "--copy", "--name='xmodbench'", "--media-root", "--overwrite",
    ],
    "omnieval demo": ["-h/--help", "--out='./omnieval-demo'", "--no-hf", "--anchors=4", "--questions=2", "--seed=0"],
    "omnieval cards": ["-h/--help", "--model", "--benchmark"],
    "omnieval filter": ["-h/--help"],
    "omnieval filter rtc": [
        "-h/--help", "predictions+", "--items (required)", "--out (required)", "--models", "--prompt",
    ],
    "omnieval import": [
        "-h/--help", "format", "paths+", "--out (required)", "--model", "--cluster-field", "--filter",
    ],
    "omnieval metrics": [
        "-h/--help", "predictions+", "--out (required)", "--resamples=10000", "--permutations=10000", "--seed=0",
        "--interval='t' {t,percentile,bca}", "--address", "--random",
        "--cluster",
    ],
    "omnieval models": ["-h/--help"],
    "omnieval models tiny": [
        "-h/--help",
        "--arch {qwen2,qwen2.5-omni,qwen2-audio,qwen2.5-vl,llava-onevision,internvl,gemma3n,qwen3-omni,qwen3-vl,"
        "qwen3-vl-moe,qwen3.5,audioflamingo3,musicflamingo,granite-speech,voxtral,gemma4,gemma4-unified,"
        "phi4-multimodal,videollama3,nemotron-h-omni} (required)",
        "--out (required)", "--seed=0",
    ],
    "omnieval compare": ["-h/--help", "candidate", "baseline", "--margin (required)", "--alpha=0.05"],
    "omnieval parse": ["-h/--help", "input", "--scorer (required)", "--out (required)", "--robust"],
    "omnieval power": [
        "-h/--help", "predictions*", "--out", "--items", "--accuracy", "--correlation", "--instances=1", "--icc=0.0",
        "--effect", "--alpha=0.05", "--power=0.8", "--address", "--cluster",
    ],
    "omnieval report": [
        "-h/--help", "inputs+", "--out (required)", "--resamples", "--permutations", "--seed", "--title",
        "--cluster",
    ],
    "omnieval run": ["-h/--help", "config", "--out", "--address", "--overwrite"],
    "omnieval stats": ["-h/--help", "predictions+", "--out (required)", "--permutations=10000", "--seed=0",
                       "--address", "--cluster"],
    "omnieval sweep": ["-h/--help", "config", "--address"],
}


def _option(action: argparse.Action) -> str:
    positional = not action.option_strings
    text = action.dest + (action.nargs if action.nargs in ("+", "*", "?") else "") if positional \
        else "/".join(action.option_strings)
    if not positional and not any(action.default is v for v in (None, False, argparse.SUPPRESS)):
        text += f"={action.default!r}"
    if action.choices is not None:
        text += " {" + ",".join(str(c) for c in action.choices) + "}"
    return text + (" (required)" if action.required and not positional else "")


def _commands(parser: argparse.ArgumentParser, path: str, found: dict[str, list[str]]) -> dict[str, list[str]]:
    options = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _commands(sub, f"{path} {name}", found)
        else:
            options.append(_option(action))
    found[path] = options
    return found


def test_every_command_keeps_its_options():
    assert _commands(build_parser(), "omnieval", {}) == COMMANDS


def test_each_help_lists_its_subcommands_and_options(capsys):
    for path, options in COMMANDS.items():
        try:
            build_parser().parse_args([*path.split()[1:], "--help"])
        except SystemExit as exc:
            assert exc.code == 0
        text = capsys.readouterr().out
        subcommands = {p.split()[-1] for p in COMMANDS if p.rsplit(" ", 1)[0] == path and p != path}
        assert all(name in text for name in subcommands), path
        for option in options:
            flag = option.split("=")[0].split(" ")[0].split("/")[-1].rstrip("+*?")
            assert flag in text, (path, flag)
            if "{" in option:  # choices are shown, in the usage or in the option's help
                assert all(c in text for c in option.split("{")[1].split("}")[0].split(",")), (path, option)


def test_building_the_parser_imports_no_dev_tooling():
    code = ("import sys; from omnieval.cli import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.startswith('omnieval.dev')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
