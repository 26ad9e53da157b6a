"""MMAU as its repository ships it (``mmau-test-mini.json`` beside ``test-mini-audios/``, ``mmau-test.json`` with its
answers withheld beside ``test-audios/``, the release's keys and quirks: answers given as choice texts, one-letter
choices that are musical notes, repeated choices, ``category`` written as a one-element list) and as lmms-eval's copy
(``data/test_mini-*.parquet``, ``choices`` as JSON text, the clip embedded), converted to audio items with the
version read recorded and MMAU's own breakdowns kept; the version told by the (id, answer) pairs only one version
has (digests computed here with hashlib, whatever the file's indentation or key order), or by a withheld file's git
blob id (checked against ``git hash-object``), given where nothing tells, refused where the files contradict each
other or ``--version``; unsound entries skipped and listed by file, entry and field; the benchmark run through two
simulated models, metrics and report."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
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
    assert ("MMAU v05.15.25 (given (--version); mmau-test-mini.json tells nothing: none of its 8 (id, answer) pairs "
            "is one that only one version has; mmau-test.json tells nothing: it has no answers and its bytes are no "
            "known revision)") in done.stderr
    assert f"in 1 question ({IDS[5]})" in done.stderr
    items = items_of(tmp_path / "bench")
    assert list(items) == IDS
    for i, record in enumerate(mini_entries()):
        item = items[record["id"]]
        assert (item["question"], item["split"]) == (record["question"], "test-mini")
        assert (item["category"], item["task"]) == (record["task"], record["sub-category"])
        assert item["breakdowns"] == {"task": record["task"], "difficulty": record["difficulty"],
                                      "sub-category": record["sub-category"]}
        assert item["media"] == {"audio": f"media/test-mini-audios/{record['id']}.wav"}
        assert (tmp_path / "bench" / item["media"]["audio"]).read_bytes() == sounds[i].read_bytes()
        if i not in (2, 5):
            assert item["options"] == record["choices"]
            assert item["answer"] == "ABCD"[(3 * i) % 4]
    assert (items[IDS[2]]["options"], items[IDS[2]]["answer"]) == (["G", "A#", "D", "E"], "C")
    assert (items[IDS[5]]["options"], items[IDS[5]]["answer"]) == (["one", "ten", "fifteen"], "C")
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["version"] == "v05.15.25" and meta["changed_options"] == [IDS[5]] and meta["scorer"] == "mmau"
    assert meta["skipped_splits"] == {"test": 3}
    mini = folder / "mmau-test-mini.json"
    assert meta["question_files"]["mmau-test-mini.json"] == {
        "git_blob": git_blob_id(mini), "answered": 8, "answers_only_in": {"original": 0, "v05.15.25": 0}}
    assert set(meta["question_files"]) == {"mmau-test-mini.json", "mmau-test.json"}


def digest(item_id: str, answer: str) -> str:
    """The digest of an (id, answer) pair as mmau_versions documents it, computed here."""
    return hashlib.sha256((item_id + "\x1f" + " ".join(answer.split())).encode()).hexdigest()[:10]


def as_only_in(monkeypatch, version: str, records: list[dict]) -> None:
    """As if these questions' answers were ones only ``version``'s test-mini has."""
    monkeypatch.setitem(mmau.ONLY_IN, version, frozenset({digest(r["id"], r["answer"]) for r in records}))


def resaved(path: Path) -> None:
    """The file written again as another tool would: keys in reverse order, no indentation."""
    data = json.loads(path.read_text())
    path.write_text(json.dumps([dict(reversed(list(r.items()))) for r in data]))


def test_a_files_version_is_known_from_its_answers_however_it_is_saved(tmp_path, sounds, monkeypatch):
    folder = release(tmp_path / "MMAU", sounds)
    resaved(folder / "mmau-test-mini.json")
    with pytest.raises(InputError, match="cannot tell which MMAU version mmau-test-mini.json is: none of its 8") as err:
        convert_mmau(folder, tmp_path / "bench")
    assert err.value.field == "--version" and "give --version (original or v05.15.25)" in str(err.value)
    entries = mini_entries()
    as_only_in(monkeypatch, "v05.15.25", entries[3:6])
    done = convert_mmau(folder, tmp_path / "bench")
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["version"] == "v05.15.25"
    assert meta["version_from"].startswith("mmau-test-mini.json by its content (3 of its 8 answers are "
                                           "v05.15.25's alone)")
    assert meta["question_files"]["mmau-test-mini.json"]["answers_only_in"] == {"original": 0, "v05.15.25": 3}
    assert done.notes[0] == f"MMAU v05.15.25 ({meta['version_from']})"
    with pytest.raises(InputError, match="mmau-test-mini.json is v05.15.25 by its content .*, not original") as err:
        convert_mmau(folder, tmp_path / "other", version="original")
    assert err.value.field == "--version"
    as_only_in(monkeypatch, "original", entries[7:])
    with pytest.raises(InputError, match="its answers are a mix: 1 are original's alone and 3 are v05.15.25's alone"):
        convert_mmau(folder, tmp_path / "other")
    convert_mmau(folder, tmp_path / "other", version="original")  # a mix, told by the user
    assert json.loads((tmp_path / "other" / "benchmark.json").read_text())["version"] == "original"


def test_a_withheld_file_is_known_by_its_bytes(tmp_path, sounds, monkeypatch):
    folder = release(tmp_path / "MMAU", sounds)
    mini, full = folder / "mmau-test-mini.json", folder / "mmau-test.json"
    if shutil.which("git"):  # the id git itself gives the content
        for path in (mini, full):
            assert git_blob_id(path) == subprocess.run(["git", "hash-object", str(path)], capture_output=True,
                                                       text=True, check=True).stdout.strip()
    # as if mmau-test.json were a revision in the repository's history
    monkeypatch.setitem(mmau.REVISIONS, git_blob_id(full), ("mmau-test.json", "2025-05-24", "v05.15.25"))
    convert_mmau(folder, tmp_path / "bench")
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["version"] == "v05.15.25"
    assert meta["version_from"].startswith("mmau-test.json by its bytes (the revision of 2025-05-24); "
                                           "mmau-test-mini.json tells nothing")
    assert meta["question_files"]["mmau-test.json"] == {"git_blob": git_blob_id(full), "revision": "2025-05-24",
                                                        "version": "v05.15.25"}
    as_only_in(monkeypatch, "original", mini_entries())
    with pytest.raises(InputError, match="of two MMAU versions .mmau-test-mini.json is original, mmau-test.json is "
                                         "v05.15.25"):
        convert_mmau(folder, tmp_path / "other")
    assert not (tmp_path / "other").exists()


def lmms_eval_copy(folder: Path, sounds, records: list[dict]) -> Path:
    """lmms-eval's copy as the Hub serves it: a test_mini shard whose ``choices`` are JSON text and whose ``audio``
    cells embed the clips."""
    (folder / "data").mkdir(parents=True)
    rows = [{**r, "choices": json.dumps(r["choices"]), "category": json.dumps(r["category"]),
             "audio": {"bytes": sounds[i].read_bytes(), "path": f"{r['id']}.wav"}} for i, r in enumerate(records)]
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / "test_mini-00000-of-00001.parquet")
    return folder


def test_lmms_evals_copy_is_read_and_its_version_told(tmp_path, sounds, monkeypatch):
    records = mini_entries()
    folder = lmms_eval_copy(tmp_path / "mmau-hub", sounds, records)
    as_only_in(monkeypatch, "original", records[:2])
    done = convert_mmau(folder, tmp_path / "bench")
    assert done.splits == {"test-mini": 8}
    meta = json.loads((tmp_path / "bench" / "benchmark.json").read_text())
    assert meta["version"] == "original"
    assert meta["version_from"] == ("test_mini-00000-of-00001.parquet by its content (2 of its 8 answers are "
                                    "original's alone)")
    items = items_of(tmp_path / "bench")
    for i, record in enumerate(records):
        item = items[record["id"]]
        if i not in (2, 5):
            assert item["options"] == record["choices"] and item["answer"] == "ABCD"[(3 * i) % 4]
        assert item["breakdowns"]["difficulty"] == record["difficulty"]
        assert (tmp_path / "bench" / item["media"]["audio"]).read_bytes() == sounds[i].read_bytes()
    assert (items[IDS[2]]["options"], items[IDS[2]]["answer"]) == (["G", "A#", "D", "E"], "C")


def test_the_committed_digests_are_of_the_documented_form():
    from omnieval.datasets.omni.mmau_versions import ORIGINAL_ONLY, V05_15_25_ONLY, answer_digest

    assert answer_digest(" x-1 ", "Two  words\n") == digest("x-1", "Two words")
    assert not ORIGINAL_ONLY & V05_15_25_ONLY and (len(ORIGINAL_ONLY), len(V05_15_25_ONLY)) == (254, 443)
    assert all(len(d) == 10 and int(d, 16) >= 0 for d in ORIGINAL_ONLY | V05_15_25_ONLY)


def test_the_known_revisions_follow_the_announced_date():
    assert len(mmau.REVISIONS) == 31 and all(len(blob) == 40 for blob in mmau.REVISIONS)
    for name, date, version in mmau.REVISIONS.values():
        assert name in mmau.FILES and version == ("v05.15.25" if date >= "2025-05-15" else "original")


def test_a_folder_without_the_question_files_is_refused(tmp_path):
    (tmp_path / "MMAU" / "data").mkdir(parents=True)
    with pytest.raises(InputError, match="neither mmau-test-mini.json nor mmau-test.json .*lmms-eval's copy"):
        convert_mmau(tmp_path / "MMAU", tmp_path / "bench")
    with pytest.raises(InputError, match="unknown MMAU version 'v1'"):
        mmau.release_version([], "v1", tmp_path)


@pytest.mark.parametrize("edit, n, item, field, message", [
    (lambda r: r[3].update(answer="Source 9 of clip 3"), 3, f"entry 3 (id {IDS[3]})", "answer",
     "answer 'Source 9 of clip 3' is not exactly one of the options"),
    (lambda r: r[4].update(choices="A or B"), 4, f"entry 4 (id {IDS[4]})", "choices",
     "expected a list of options, got str"),
    (lambda r: r[6].update(audio_id="./test-mini-audios/missing.wav"), 6, f"entry 6 (id {IDS[6]})", "audio_id",
     "no media file './test-mini-audios/missing.wav'"),
    (lambda r: r[0].pop("audio_id"), 0, "entry 0", "audio_id", "missing or empty 'audio_id'"),
])
def test_an_unsound_entry_is_skipped_and_listed(tmp_path, sounds, edit, n, item, field, message):
    records = mini_entries()
    edit(records)
    folder = release(tmp_path / "MMAU", sounds, records, test=False)
    done = convert_mmau(folder, tmp_path / "bench", version="original")
    assert list(items_of(tmp_path / "bench")) == IDS[:n] + IDS[n + 1:]
    [line] = [json.loads(t) for t in (tmp_path / "bench" / "skipped.jsonl").read_text().splitlines()]
    assert line == {"item_id": IDS[n] if n else None, "file": str(folder / "mmau-test-mini.json"), "entry": item,
                    "field": field, "reason": line["reason"]}
    assert line["reason"].startswith(message) and "\n" not in line["reason"]
    assert json.loads((tmp_path / "bench" / "benchmark.json").read_text())["skipped_entries"] == 1
    assert "skipped 1 entry that could not be converted, each with its reason in " in done.summary()


@pytest.mark.slow
def test_converted_release_runs_with_two_simulated_models(ray_session, tmp_path, sounds):
    convert_mmau(release(tmp_path / "MMAU", sounds), tmp_path / "bench", version="v05.15.25")
    run_and_check(tmp_path / "bench", tmp_path, ["normal", "audio_only", "text_only", "random"])
