"""What ``--out`` may be for every ``omnieval datasets`` converter (synth, xmodbench, mcq, contra4, and daily-omni for
the omni releases, which share one writer: ``omnieval.datasets.omni.common``; av-odyssey for the suite of benchmarks
its pre-release versions wrote, refused now):
a new or empty folder, or with ``--overwrite`` a previous output of the same converter. A folder of other files, the
working folder, the release, the source or a media root is refused in one line (exit 2) with every file left byte for
byte.

The releases are the smallest each converter accepts, written here: a one-entry XModBench question file beside its
audio clip, a two-row VLMEvalKit TSV with base64 PNGs, a one-entry Contra4 release with its two audio files, a
two-question Daily-Omni release with its clips, a two-row AV-Odyssey table with its files."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from omnieval.cli import main
from omnieval.datasets.benchmark import load_benchmark


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` by relative path: a file's bytes, None for a folder."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


def png(colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), colour).save(buffer, "PNG")
    return buffer.getvalue()


def xmodbench_release(root: Path) -> Path:
    release = root / "XModBench"
    folder = release / "tasks" / "01_perception" / "instruments"
    folder.mkdir(parents=True)
    (release / "violin.wav").write_bytes(b"RIFF-violin")
    entry = {"question": "Which instrument is this?", "conditions": {"modality": "Audio", "input": "violin.wav"},
             "options": {"A": {"modality": "Text", "input": "violin"}, "B": {"modality": "Text", "input": "cello"}},
             "correct_answer": "A"}
    (folder / "solos_questions_audio_text.json").write_text(json.dumps([entry]))
    return release


def mcq_source(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rows = [["index", "question", "A", "B", "answer", "image"],
            ["1", "What colour?", "red", "blue", "A", base64.b64encode(png("red")).decode()],
            ["2", "What colour?", "red", "blue", "B", base64.b64encode(png("blue")).decode()]]
    source = root / "bench.tsv"
    source.write_text("".join("\t".join(r) + "\n" for r in rows))
    return source


def contra4_release(root: Path) -> tuple[Path, Path]:
    """(the release file, its media root with one folder per source)."""
    media = root / "media-root"
    (media / "audiocaps").mkdir(parents=True)
    for ident in ("1", "2"):
        (media / "audiocaps" / f"{ident}.wav").write_bytes(f"RIFF-{ident}".encode())
    entry = {"id": "e1", "selection_type": "random", "question": "Which scene has a dog?", "answer": "Scene B",
             "examples": [{"source": "audiocaps", "id": "1", "caption": "rain"},
                          {"source": "audiocaps", "id": "2", "caption": "a dog barks"}],
             "modalities": ["audio", "audio"]}
    release = root / "contra4" / "test.json"
    release.parent.mkdir(parents=True)
    release.write_text(json.dumps([entry]))
    return release, media


def daily_omni_release(root: Path) -> Path:
    release = root / "Daily-Omni"
    questions = []
    for clip in ("clip1", "clip2"):
        (release / "Videos" / clip).mkdir(parents=True)
        (release / "Videos" / clip / f"{clip}_video.mp4").write_bytes(f"mp4-{clip}".encode())
        (release / "Videos" / clip / f"{clip}_audio.wav").write_bytes(f"RIFF-{clip}".encode())
        questions.append({"Question": "What barks?", "Choice": ["A. rain", "B. a dog"], "Answer": "B",
                          "video_id": clip, "Type": "Reasoning"})
    (release / "qa.json").write_text(json.dumps(questions))
    return release


def av_odyssey_release(root: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    release = root / "AV-Odyssey"
    (release / "image").mkdir(parents=True)
    (release / "audio").mkdir()
    rows = []
    for qid in ("1_1", "1_2"):
        (release / "image" / f"{qid}.png").write_bytes(png("red"))
        (release / "audio" / f"{qid}.wav").write_bytes(f"RIFF-{qid}".encode())
        rows.append({"question_id": qid, "question": "Does [img1] make [audio1]?", "options": ["A. yes", "B. no"],
                     "answer": "A", "data_type": "image", "image_path": [f"image/{qid}.png"],
                     "audio_path": [f"audio/{qid}.wav"]})
    pq.write_table(pa.Table.from_pylist(rows), release / "av_odyssey.parquet")
    return release


def command(converter: str, root: Path, out: str) -> list[str]:
    """The converter's command line on a release built under ``root`` (once), writing ``out``."""
    if converter == "synth":
        return ["datasets", "synth", "--protocol", "spectrum", "--items", "8", "--out", out]
    if converter == "xmodbench":
        release = root / "XModBench" if (root / "XModBench").exists() else xmodbench_release(root)
        return ["datasets", "xmodbench", str(release), "--out", out]
    if converter == "mcq":
        source = root / "src" / "bench.tsv" if (root / "src").exists() else mcq_source(root / "src")
        return ["datasets", "mcq", str(source), "--out", out]
    if converter == "daily-omni":
        release = root / "Daily-Omni" if (root / "Daily-Omni").exists() else daily_omni_release(root)
        return ["datasets", "daily-omni", str(release), "--out", out]
    if converter == "av-odyssey":
        release = root / "AV-Odyssey" if (root / "AV-Odyssey").exists() else av_odyssey_release(root)
        return ["datasets", "av-odyssey", str(release), "--out", out]
    release, media = ((root / "contra4" / "test.json", root / "media-root") if (root / "contra4").exists()
                      else contra4_release(root))
    return ["datasets", "contra4", str(release), "--media-root", str(media), "--out", out]


CONVERTERS = ["synth", "xmodbench", "mcq", "contra4", "daily-omni"]


def refused(argv: list[str], capsys) -> str:
    """The one line a refused command prints (exit status 2, no traceback)."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("omnieval: error: ") and "Traceback" not in err
    return err


@pytest.mark.parametrize("converter", [*CONVERTERS, "av-odyssey"])
def test_a_folder_of_other_files_is_refused_and_left_as_it_was(converter, tmp_path, capsys):
    out = tmp_path / "papers"
    (out / "drafts").mkdir(parents=True)
    (out / "thesis.tex").write_text("\\chapter{One}\n")
    (out / "drafts" / "notes.md").write_bytes(b"# notes\n\x00\x01")
    (out / "items.jsonl").write_text("mine, not a benchmark's\n")
    before = tree(out)
    for extra in ([], ["--overwrite"]):  # --overwrite replaces only a converter's own output
        err = refused(command(converter, tmp_path, str(out)) + extra, capsys)
        assert "not empty" in err and "no benchmark written by an omnieval converter" in err and str(out) in err
        assert tree(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left beside it


def test_out_dot_in_a_working_folder_with_files_deletes_nothing(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "README").write_text("my project\n")
    (work / "src" / "main.py").write_text("print('hi')\n")
    before = tree(work)
    monkeypatch.chdir(work)
    for extra in ([], ["--overwrite"]):
        err = refused(["datasets", "synth", "--protocol", "spectrum", "--items", "8", "--out", "."] + extra, capsys)
        assert "not empty" in err and f"'{work}'" in err
        assert tree(work) == before


def test_out_dot_in_an_empty_working_folder_writes_there(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["datasets", "synth", "--protocol", "spectrum", "--items", "8", "--out", "."]) == 0
    assert Path.cwd() == work and work.is_dir()
    bench = load_benchmark(work)
    assert (bench.protocol, len(bench.items)) == ("spectrum", 8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]


@pytest.mark.parametrize("place", ["the release", "inside the release", "containing the release"])
def test_xmodbench_out_at_inside_or_around_the_release_is_refused(place, tmp_path, capsys):
    release = xmodbench_release(tmp_path / "data")
    if place == "containing the release":
        # a previous xmodbench output that the release was later moved into: --overwrite would delete it
        assert main(["datasets", "xmodbench", str(release), "--out", str(tmp_path / "bench")]) == 0
        release = Path((release).rename(tmp_path / "bench" / "media" / "XModBench"))
    out = {"the release": release, "inside the release": release / "tasks" / "converted",
           "containing the release": tmp_path / "bench"}[place]
    before = tree(release)
    err = refused(["datasets", "xmodbench", str(release), "--out", str(out), "--overwrite"], capsys)
    word = {"the release": "is the release folder", "inside the release": "is inside the release folder",
            "containing the release": "contains the release folder"}[place]
    assert word in err and str(release) in err
    assert tree(release) == before


@pytest.mark.parametrize("converter", ["mcq", "contra4", "xmodbench", "daily-omni"])
def test_out_equal_to_a_media_root_is_refused(converter, tmp_path, capsys):
    media = tmp_path / "shared-media"
    media.mkdir()
    (media / "keep.wav").write_bytes(b"RIFF-keep")
    argv = command(converter, tmp_path, str(media))
    argv += ["--media-root", str(media)] if converter != "contra4" else []
    if converter == "contra4":
        argv[argv.index("--media-root") + 1] = str(media)
        (media / "audiocaps").mkdir()
        for ident in ("1", "2"):
            (media / "audiocaps" / f"{ident}.wav").write_bytes(b"RIFF")
    before = tree(media)
    err = refused(argv + ["--overwrite"], capsys)
    assert "is the --media-root folder" in err
    assert tree(media) == before


def test_mcq_out_containing_the_source_file_is_refused(tmp_path, capsys):
    source = mcq_source(tmp_path / "src")
    before = tree(tmp_path / "src")
    err = refused(["datasets", "mcq", str(source), "--out", str(tmp_path / "src"), "--overwrite"], capsys)
    assert "contains the source file" in err
    assert tree(tmp_path / "src") == before


@pytest.mark.parametrize("converter", CONVERTERS)
def test_overwrite_replaces_a_previous_output_of_the_same_converter(converter, tmp_path, capsys):
    out = tmp_path / "bench"
    argv = command(converter, tmp_path, str(out))
    assert main(argv) == 0
    meta = json.loads((out / "benchmark.json").read_text())
    assert meta["converter"] == converter
    load_benchmark(out)  # the recorded converter leaves the folder a benchmark the loader reads
    (out / "media" / "stale.bin").write_bytes(b"from the earlier output")
    before = tree(out)
    err = refused(argv, capsys)  # without --overwrite: refused, untouched
    assert f"written by `omnieval datasets {converter}`; pass --overwrite to replace it" in err
    assert tree(out) == before
    assert main(argv + ["--overwrite"]) == 0
    after = tree(out)
    assert "media/stale.bin" not in after and after == {k: v for k, v in before.items() if k != "media/stale.bin"}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("writer,other", [("synth", "mcq"), ("mcq", "xmodbench"), ("xmodbench", "contra4"),
                                          ("contra4", "daily-omni"), ("daily-omni", "synth")])
def test_overwrite_refuses_the_output_of_another_converter(writer, other, tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(command(writer, tmp_path, str(out))) == 0
    before = tree(out)
    err = refused(command(other, tmp_path, str(out)) + ["--overwrite"], capsys)
    assert f"written by `omnieval datasets {writer}`, not by `omnieval datasets {other}`" in err
    assert tree(out) == before


def test_a_folder_naming_its_writer_by_module_only_is_not_a_converter_output(tmp_path, capsys):
    """Benchmark folders written before the first release named their writer by module alone (``generator``); such
    a folder is not taken for a converter's output, so ``--overwrite`` refuses it like any folder of other files."""
    out = tmp_path / "bench"
    argv = command("mcq", tmp_path, str(out))
    assert main(argv) == 0
    meta = json.loads((out / "benchmark.json").read_text())
    del meta["converter"]
    (out / "benchmark.json").write_text(json.dumps(meta | {"generator": "omnieval.datasets.mcq"}))
    before = tree(out)
    err = refused(argv + ["--overwrite"], capsys)
    assert "holds no benchmark written by an omnieval converter" in err
    assert tree(out) == before


def test_a_previous_output_holding_other_files_is_not_replaced(tmp_path, capsys):
    out = tmp_path / "bench"
    argv = command("mcq", tmp_path, str(out))
    assert main(argv) == 0
    (out / "results.csv").write_text("model,accuracy\n")  # the user's own file, kept beside the benchmark
    before = tree(out)
    err = refused(argv + ["--overwrite"], capsys)
    assert "'results.csv', which no converter writes" in err
    assert tree(out) == before


def test_a_suite_of_benchmarks_as_an_earlier_av_odyssey_wrote_is_not_replaced(tmp_path, capsys):
    """Before the first release ``datasets av-odyssey`` wrote a suite (``benchmarks.json`` indexing one benchmark
    folder per set of modalities, beside ``skipped.jsonl``); such a folder is not a converter's output now, so
    ``--overwrite`` refuses it in one line and leaves it as it was."""
    out = tmp_path / "benches"
    argv = command("av-odyssey", tmp_path, str(out / "image+audio"))
    assert main(argv) == 0
    (out / "benchmarks.json").write_text(json.dumps({"name": "av-odyssey", "benchmarks": ["image+audio"],
                                                     "converter": "av-odyssey", "refused": 0}))
    (out / "skipped.jsonl").write_text("")
    argv[argv.index("--out") + 1] = str(out)
    before = tree(out)
    err = refused(argv + ["--overwrite"], capsys)
    assert "holds no benchmark written by an omnieval converter" in err
    assert tree(out) == before
