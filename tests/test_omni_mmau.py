"""MMAU as its repository ships it (``mmau-test-mini.json`` beside ``test-mini-audios/``, ``mmau-test.json`` with its
answers withheld beside ``test-audios/``, the release's keys and quirks: answers given as choice texts, one-letter
choices that are musical notes, repeated choices, ``category`` written as a one-element list), converted to audio
items with the version read recorded; the version known from a file's git blob id (checked against ``git
hash-object``), given where the file is no known revision, refused where it contradicts the file or cannot be told;
refused entries named by file, entry and field; the benchmark run through two simulated models, metrics and report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omnieval.core.schema import InputError
from omnieval.datasets.omni import mmau
from omnieval.datasets.omni.mmau import convert_mmau, git_blob_id
from tests.omni_release_run import items_of, place, run_and_check

ROOT = Path(__file__).resolve().parents[1]
IDS = [f"3fe64f3d-282c-4bc8-a753-{i:012d}" for i in range(8)]
TASKS = ["sound", "music", "speech"]
SUBCATEGORIES = ["Acoustic Source Inference", "Harmony and Chord Progressions", "Phonemic Stress Pattern Analysis"]


def mini_entries() -> list[dict]:
    out = []
    for i, qid in enumerate(IDS):
        choices = [f"Source {k} of clip {i}" for k in range(4)]
        answer = choices[(3 * i) % 4]
        if i == 2:  # musical notes: the answer "D" is the choice that reads D, not the fourth
            choices, answer = ["G", "A#", "D", "E"], "D"
        if i == 5:  # a choice written twice: one option
            choices, answer = ["one", "ten", "fifteen", "fifteen"], "fifteen"
        out.append({"id": qid, "audio_id": f"./test-mini-audios/{qid}.wav", "question": f"What is heard ({i})?",
                    "choices": choices, "answer": answer, "dataset": "AudioSet", "task": TASKS[i % 3],
                    "split": "test-mini", "category": ["Reasoning"] if i == 1 else "Reasoning",
                    "sub-category": SUBCATEGORIES[i % 3], "difficulty": "medium"})
    return out


def withheld_entries() -> list[dict]:
    return [{"id": f"t{i}", "audio_id": f"./test-audios/t{i}.wav", "question": f"Test question {i}?",
             "choices": ["a", "b", "c", "d"], "answer": "", "dataset": "musicbench", "task": "music", "split": "test",
             "category": "Reasoning", "sub-category": "Instrumentation", "difficulty": "hard"} for i in range(3)]



@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> list[Path]:
    from omnieval.media.synth import beep_audio

    folder = tmp_path_factory.mktemp("mmau-media")
    return [beep_audio(folder / f"s{i}.wav", frequency=300 + 70 * i, beeps=1 + i % 3, duration=0.5,
                       sample_rate=8000) for i in range(len(IDS) + 3)]


def release(folder: Path, sounds, mini: list[dict] | None = None, test: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "mmau-test-mini.json").write_text(json.dumps(mini_entries() if mini is None else mini, indent=4))
    for qid, sound in zip(IDS, sounds, strict=False):
        place(sound, folder / "test-mini-audios" / f"{qid}.wav")
    if test:
        (folder / "mmau-test.json").write_text(json.dumps(withheld_entries(), indent=4))
        for i in range(3):
            place(sounds[len(IDS) + i], folder / "test-audios" / f"t{i}.wav")
    return folder


def test_the_release_with_its_version_given(tmp_path, sounds):
    folder = release(tmp_path / "MMAU", sounds)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "datasets", "mmau", str(folder), "--out",
                           str(tmp_path / "bench"), "--version", "v05.15.25"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 8 items (test-mini: 8) and 8 media files" in done.stdout
    assert "skipped split 'test' (3 questions): none of its questions has an answer" in done.stderr
    assert "MMAU v05.15.25 (given (--version); no file is a known revision)" in done.stderr
    assert f"in 1 question ({IDS[5]})" in done.stderr
    items = items_of(tmp_path / "bench")
    assert list(items) == IDS
    for i, record in enumerate(mini_entries()):
        item = items[record["id"]]
        assert (item["question"], item["split"]) == (record["question"], "test-mini")
        assert (item["category"], item["task"]) == (record["task"], record["sub-category"])
        assert item["media"] == {"audio": f"media/test-mini-audios/{record['id']}.wav"}
        assert (tmp_path / "bench" / item["media"]["audio"]).read_bytes() == sounds[i].read_bytes()
        if i not in (2, 5):
            assert item["options"] == record["choices"]
            assert item["answer"] == "ABCD"[(3 * i) % 4]
    assert (items[IDS[2]]["options"], items[IDS[2]]["answer"]) == (["G", "A#", "D", "E"], "C")
    assert (items[IDS[5]]["options"], items[IDS[5]]["answer"]) == (["one", "ten", "fifteen"], "C")
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["version"] == "v05.15.25" and meta["changed_options"] == [IDS[5]]
    assert meta["skipped_splits"] == {"test": 3}
    mini = folder / "mmau-test-mini.json"
    assert meta["question_files"]["mmau-test-mini.json"] == {"git_blob": git_blob_id(mini)}
    assert set(meta["question_files"]) == {"mmau-test-mini.json", "mmau-test.json"}


def test_a_files_version_is_known_from_its_content(tmp_path, sounds, monkeypatch):
    folder = release(tmp_path / "MMAU", sounds)
    mini, full = folder / "mmau-test-mini.json", folder / "mmau-test.json"
    if shutil.which("git"):  # the id git itself gives the content
        for path in (mini, full):
            assert git_blob_id(path) == subprocess.run(["git", "hash-object", str(path)], capture_output=True,
                                                       text=True, check=True).stdout.strip()
    with pytest.raises(InputError, match="cannot tell which MMAU version") as err:
        convert_mmau(folder, tmp_path / "bench")
    assert err.value.field == "--version" and "give --version (original or v05.15.25)" in str(err.value)
    # as if these files were revisions in the repository's history
    monkeypatch.setitem(mmau.REVISIONS, git_blob_id(mini), ("mmau-test-mini.json", "2025-08-09", "v05.15.25"))
    monkeypatch.setitem(mmau.REVISIONS, git_blob_id(full), ("mmau-test.json", "2025-05-24", "v05.15.25"))
    convert_mmau(folder, tmp_path / "bench")
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert (meta["version"], meta["version_from"]) == ("v05.15.25", "known from the files' content")
    assert meta["question_files"]["mmau-test-mini.json"] == {"git_blob": git_blob_id(mini), "revision": "2025-08-09",
                                                             "version": "v05.15.25"}
    with pytest.raises(InputError, match="is the v05.15.25 revision of 2025-08-09, not original") as err:
        convert_mmau(folder, tmp_path / "other", version="original")
    assert err.value.field == "--version"
    monkeypatch.setitem(mmau.REVISIONS, git_blob_id(full), ("mmau-test.json", "2024-12-09", "original"))
    with pytest.raises(InputError, match="of two MMAU versions"):
        convert_mmau(folder, tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_the_known_revisions_follow_the_announced_date():
    assert len(mmau.REVISIONS) == 31 and all(len(blob) == 40 for blob in mmau.REVISIONS)
    for name, date, version in mmau.REVISIONS.values():
        assert name in mmau.FILES and version == ("v05.15.25" if date >= "2025-05-15" else "original")


def test_a_folder_without_the_question_files_is_refused(tmp_path):
    (tmp_path / "MMAU" / "data").mkdir(parents=True)
    with pytest.raises(InputError, match="neither mmau-test-mini.json nor mmau-test.json.*Hugging Face copy"):
        convert_mmau(tmp_path / "MMAU", tmp_path / "bench")
    with pytest.raises(InputError, match="unknown MMAU version 'v1'"):
        mmau.release_version([tmp_path / "x.json"], "v1")


@pytest.mark.parametrize("edit, item, field, message", [
    (lambda r: r[3].update(answer="Source 9 of clip 3"), f"entry 3 (id {IDS[3]})", "answer",
     "answer 'Source 9 of clip 3' is not exactly one of the options"),
    (lambda r: r[4].update(choices="A or B"), f"entry 4 (id {IDS[4]})", "choices",
     "expected a list of options, got str"),
    (lambda r: r[6].update(audio_id="./test-mini-audios/missing.wav"), f"entry 6 (id {IDS[6]})", "audio_id",
     "no media file './test-mini-audios/missing.wav'"),
    (lambda r: r[0].pop("audio_id"), "entry 0", "audio_id", "missing or empty 'audio_id'"),
])
def test_refused_entries_name_file_entry_and_field(tmp_path, sounds, edit, item, field, message):
    records = mini_entries()
    edit(records)
    folder = release(tmp_path / "MMAU", sounds, records, test=False)
    with pytest.raises(InputError) as err:
        convert_mmau(folder, tmp_path / "bench", version="original")
    assert (err.value.file, err.value.item, err.value.field) == (str(folder / "mmau-test-mini.json"), item, field)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "bench").exists()


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, sounds):
    convert_mmau(release(tmp_path / "MMAU", sounds), tmp_path / "bench", version="v05.15.25")
    run_and_check(tmp_path / "bench", tmp_path, ["normal", "audio_only", "text_only", "random"])
