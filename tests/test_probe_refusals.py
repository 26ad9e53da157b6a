"""What a hostile new user hit: each case reproduced as the user met it (the command line in a real subprocess, a
real signal, a real full disk), and each must end in one line naming the file, item or field, or a correct
result, never a traceback or a silent wrong number.

The expectations come from outside the code under test: the pid of a process this test started, the bytes of a
file this test cut, the names the test itself wrote, what the kernel reports about a process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _omnieval(*args: str, **kw) -> subprocess.CompletedProcess:
    """The command line as a user runs it, in its own process."""
    return subprocess.run([sys.executable, "-m", "omnieval.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=kw.pop("timeout", 300), **kw)


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------------------------
# A live lease holder is seen as live without psutil
# ---------------------------------------------------------------------------------------------------------------

HOLD_LEASE = """
import sys, time
from omnieval.core.run_outputs import RunOutputs
from omnieval.run.lease import OutputLease
lease = OutputLease(RunOutputs(sys.argv[1])).acquire()
assert "psutil" not in sys.modules and "ray" not in sys.modules
print("held", flush=True)
time.sleep(600)
"""


def _proc_start_time(pid: int) -> float:
    """The kernel's start time of ``pid`` in seconds since the epoch, computed here from /proc on its own."""
    btime = next(float(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime"))
    stat = open(f"/proc/{pid}/stat").read()
    return btime + int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process start times from /proc")
def test_a_second_sweep_on_a_held_output_is_refused_naming_the_live_holder(small_bench, tmp_path):
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.run.lease import LEASE_FILE, OutputBusy, OutputLease

    out = tmp_path / "sweep"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LEASE, str(out)], stdout=subprocess.PIPE, text=True,
                              env=env, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        held = json.loads((out / LEASE_FILE).read_text())
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(yaml.safe_dump({
            "output": str(out), "prompts": ["zs"], "decode": {"num_frames": 2, "max_side": 32},
            "protocols": [{"protocol": "dissonance", "benchmark": str(small_bench)}],
            "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}]}))
        done = _omnieval("sweep", str(sweep), env=env)
        assert done.returncode == 2, done.stderr
        line = _one_line(done.stderr)
        assert "another omnieval process is writing here" in line and f"pid {holder.pid} " in line
        assert holder.poll() is None  # the holder lives on, still holding its own lease
        assert json.loads((out / LEASE_FILE).read_text())["token"] == held["token"]
        assert "taking over" not in done.stderr
        assert held["pid"] == holder.pid and abs(held["pid_started"] - _proc_start_time(holder.pid)) < 1.0

        # the same pid with another start time is another program (the pid was reused): the lease is stale
        (out / LEASE_FILE).write_text(json.dumps(dict(held, pid_started=held["pid_started"] - 3600)))
        said: list[str] = []
        OutputLease(RunOutputs(str(out)), log=said.append).acquire().release()
        assert said and "pid now runs another program" in said[0]
        (out / LEASE_FILE).write_text(json.dumps(dict(held, heartbeat=time.time())))
        with pytest.raises(OutputBusy):
            OutputLease(RunOutputs(str(out))).acquire()
    finally:
        holder.kill()
        holder.wait(30)
    said = []  # killed: its lease is taken over at once, by any process
    OutputLease(RunOutputs(str(out)), log=said.append).acquire().release()
    assert said and f"its process {holder.pid} on this host has ended" in said[0]


# ---------------------------------------------------------------------------------------------------------------
# An MP4 cut in half is a decode error naming the file, even when its last frame still decodes
# ---------------------------------------------------------------------------------------------------------------

def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True, timeout=60)


@pytest.fixture(scope="module")
def cut_clip(tmp_path_factory) -> tuple[Path, Path]:
    """A 1 s clip of 4 frames with its sound, index first (as releases are written), and the same file's first
    half. x264 stores the frames as I P B B: the cut keeps the frames shown at 0, 0.25 and 0.75 s and loses the one
    at 0.5 s, so the frames that still decode reach the end of the clip."""
    d = tmp_path_factory.mktemp("cut")
    full = d / "clip.mp4"
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=4:duration=1", "-f", "lavfi", "-i",
            "sine=frequency=440:duration=1", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest",
            "-movflags", "+faststart", str(full))
    data = full.read_bytes()
    half = d / "half.mp4"
    half.write_bytes(data[: len(data) // 2])
    return full, half


def _presented_times(path: Path) -> list[float]:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return sorted(float(f.pts * f.time_base) for f in container.decode(stream))


def test_an_mp4_cut_in_half_is_refused_by_decode_and_by_datasets_check(cut_clip, tmp_path):
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.media import decode
    from omnieval.media.mp4_index import declared_end

    full, half = cut_clip
    assert _presented_times(full) == [0.0, 0.25, 0.5, 0.75]
    assert _presented_times(half) == [0.0, 0.25, 0.75]  # the frame at 0.5 s is gone, the last one is not
    assert decode.decode_video(full, num_frames=4).data.shape[0] == 4
    assert declared_end(full) == full.stat().st_size  # index first: the last sample ends the file
    for check in (lambda p: decode.decode_video(p, num_frames=4), decode.decode_audio,
                  lambda p: decode.probe_media(p, "video")):
        with pytest.raises(decode.MediaError, match=r"half\.mp4: truncated media: .* the file holds"):
            check(half)

    bench = make_dissonance_benchmark(tmp_path / "bench", n_anchors=2, n_questions=1, splits=("real",))
    item = json.loads((bench / "items.jsonl").read_text().splitlines()[0])
    shutil.copy(full, bench / item["media"]["video"])
    assert _omnieval("datasets", "check", str(bench)).returncode == 0
    shutil.copy(half, bench / item["media"]["video"])
    done = _omnieval("datasets", "check", str(bench))
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert item["media"]["video"] in line and "truncated media" in line


# ---------------------------------------------------------------------------------------------------------------
# --cluster naming nothing real is refused, not replaced by the default
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def predictions(tmp_path_factory) -> Path:
    """Two models' predictions on 12 dissonance questions in 4 anchors."""
    from omnieval.dev.bench_stats import synthetic_dissonance

    path = tmp_path_factory.mktemp("cluster") / "predictions.parquet"
    synthetic_dissonance(n_models=2, prompts=("zs",), splits=("s",), n_items=12, n_anchors=4, seed=0) \
        .write_parquet(path)
    return path


@pytest.mark.parametrize("command", ["metrics", "report"])
@pytest.mark.parametrize("value, said", [
    ("bogus=anchor", "no protocol 'bogus'; known protocols: "),
    ("disonance=item", "no protocol 'disonance'; known protocols: "),
    ("", "give a column (anchor) or protocol=column"),
    ("anchr", "the column is absent; units these predictions hold: item, group, item_id, anchor"),
])
def test_a_cluster_option_naming_nothing_real_is_refused(predictions, tmp_path, command, value, said):
    from omnieval.protocols import known_protocols

    out = tmp_path / "out"
    done = _omnieval(command, str(predictions), "--out", str(out), "--resamples", "50", "--permutations", "50",
                     "--cluster", value)
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert "--cluster" in line and said in line
    if "known protocols" in said:
        assert "dissonance" in known_protocols() and all(p in line for p in known_protocols())
    assert not out.exists() or not any(out.iterdir())  # nothing computed, no default recorded


# ---------------------------------------------------------------------------------------------------------------
# A full output disk: one line, no temporary left, and a rerun removes the ones a killed writer left
# ---------------------------------------------------------------------------------------------------------------

def mount_tmpfs(where: Path) -> Path:
    """``where``, a new folder with a real 1 MiB tmpfs mounted on it; the test is skipped where this process may not
    mount one (it needs root, CAP_SYS_ADMIN)."""
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
    return where


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB filesystem (tmpfs), mounted for the test; skipped where this process may not mount one."""
    where = mount_tmpfs(tmp_path / "disk")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` until ``leave`` bytes remain free (as statvfs counts them)."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    filler.write_bytes(b"\0" * (free - leave))
    assert os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize == leave
    return filler


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".tmp-" in p.name]


def test_a_full_output_disk_is_one_line_and_a_rerun_clears_what_a_killed_writer_left(small_bench, small_disk,
                                                                                      tmp_path):
    import polars as pl

    out = small_disk / "run"
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "benchmark": str(small_bench), "output": str(out), "prompts": ["zs"], "ray": {"num_cpus": 4},
        "decode": {"num_frames": 2, "max_side": 32},
        "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}]}))
    filler = _fill(small_disk, leave=3 * 4096)  # the lease and the identity fit; the first part does not
    done = _omnieval("run", str(cfg), timeout=600)
    assert done.returncode == 2, done.stderr
    errors = [s[s.index("omnieval: error:"):] for s in done.stderr.splitlines() if "omnieval: error:" in s]
    assert "Traceback" not in done.stderr and len(errors) == 1, done.stderr
    assert "No space left on device" in errors[0] and str(out) in errors[0] and "rerun" in errors[0]
    assert _temporaries(out) == []

    filler.unlink()  # space is back; a writer killed while writing a part had left its temporary
    stale = out / "parts" / "sim" / "part-000000-0123456789ab.parquet.tmp-89abcdef"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"PAR1 half a part")
    again = _omnieval("run", str(cfg), timeout=600)
    assert again.returncode == 0, again.stderr
    assert "removed 1 half-written file(s)" in again.stderr and "part-000000-0123456789ab" in again.stderr
    assert _temporaries(out) == []
    table = pl.read_parquet(out / "predictions.parquet")
    n_items = sum(1 for _ in open(small_bench / "items.jsonl"))
    assert table.height == table["instance_id"].n_unique() == n_items * 8


# ---------------------------------------------------------------------------------------------------------------
# A conversion stopped by Ctrl-C, SIGTERM or SIGKILL leaves nothing behind, or nothing the next one keeps
# ---------------------------------------------------------------------------------------------------------------

SLOW_COPY = """
import shutil, time
_copy2 = shutil.copy2
def copy2(*args, **kwargs):  # a slow disk: each copied file takes a quarter of a second
    done = _copy2(*args, **kwargs)
    time.sleep(0.25)
    return done
shutil.copy2 = copy2
"""


@pytest.fixture
def mmar_release(tmp_path):
    from omnieval.media.synth import beep_audio
    from tests.test_omni_mmar import IDS, release

    sounds = [beep_audio(tmp_path / "sounds" / f"s{i}.wav", frequency=250 + 90 * i, beeps=1, duration=0.5,
                         sample_rate=8000) for i in range(len(IDS))]
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_COPY)
    return release(tmp_path / "MMAR", sounds), slow


def _builds(folder: Path) -> list[Path]:
    return sorted(folder.glob(".mmar-*"))


def _convert_until_copying(release: Path, out: Path, slow: Path) -> subprocess.Popen:
    """``datasets mmar --copy`` on a slow disk, returned once two media files are in its build folder."""
    env = dict(os.environ, PYTHONPATH=f"{slow}{os.pathsep}{ROOT}")
    proc = subprocess.Popen([sys.executable, "-m", "omnieval.cli", "datasets", "mmar", str(release), "--out",
                             str(out), "--copy"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _wait_for(lambda: any(len(list(b.rglob("*.wav"))) >= 2 for b in _builds(out.parent)), 120, "the copy")
    assert proc.poll() is None
    return proc


@pytest.mark.parametrize("signum, said", [(signal.SIGINT, "Ctrl-C (SIGINT)"), (signal.SIGTERM, "SIGTERM")])
def test_a_conversion_stopped_by_a_signal_removes_its_folder_and_says_so(mmar_release, tmp_path, signum, said):
    release, slow = mmar_release
    out = tmp_path / "bench"
    proc = _convert_until_copying(release, out, slow)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum
    line = _one_line(err)
    assert f"omnieval: datasets mmar stopped by {said}; its unfinished folder was removed" in line
    assert _builds(tmp_path) == [] and not out.exists()


def test_a_later_conversion_removes_the_folder_a_killed_one_left(mmar_release, tmp_path):
    release, slow = mmar_release
    out = tmp_path / "bench"
    proc = _convert_until_copying(release, out, slow)
    proc.kill()  # SIGKILL: no clean-up can run
    proc.wait(30)
    left = _builds(tmp_path)
    assert [b.name.split("@")[0] for b in left] == [f".mmar-{proc.pid}"] and not out.exists()
    live = tmp_path / f".mmar-{os.getpid()}@{socket.gethostname()}.abcd1234"  # this test's own live pid
    elsewhere = tmp_path / ".mmar-1@another-host.abcd1234"  # a build on another machine sharing the folder
    for kept in (live, elsewhere):
        kept.mkdir()
    done = _omnieval("datasets", "mmar", str(release), "--out", str(out), "--copy")
    assert done.returncode == 0, done.stderr
    assert f"removed {left[0]}, left by a conversion that stopped before it finished (its process {proc.pid} is " \
           "gone)" in done.stderr
    assert _builds(tmp_path) == sorted([live, elsewhere])
    assert len(list((out / "media").rglob("*.wav"))) == len(list((release / "audio").iterdir()))


# ---------------------------------------------------------------------------------------------------------------
# An s3:// location on a machine with no network: one line naming it and its field
# ---------------------------------------------------------------------------------------------------------------

def _no_network() -> list[str]:
    """A prefix that runs a command in a network namespace of its own (no interface but a down loopback)."""
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -rn (a user and network namespace) is not allowed here")
    return ["unshare", "-rn"]


@pytest.mark.parametrize("field", ["output", "decode.store"])
def test_an_s3_location_without_network_is_one_line(small_bench, tmp_path, field):
    uri = "s3://omnieval-no-such-bucket/run"  # no region given: pyarrow asks the network for it
    config = {"benchmark": str(small_bench), "output": str(tmp_path / "out"), "prompts": ["zs"],
              "decode": {"num_frames": 2, "max_side": 32},
              "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}]}
    if field == "output":
        config["output"] = uri
    else:
        config["decode"]["store"] = uri
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(config))
    done = subprocess.run([*_no_network(), sys.executable, "-m", "omnieval.cli", "run", str(cfg)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith(f"omnieval: error: file '{uri}', field '{field}': cannot ")


# ---------------------------------------------------------------------------------------------------------------
# A refusal found inside Ray's expansion tasks is the same one line as datasets check's
# ---------------------------------------------------------------------------------------------------------------

def test_a_spectrum_benchmark_with_one_image_for_most_items_is_the_same_one_line_in_a_run(tmp_path):
    from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark

    bench = make_spectrum_benchmark(tmp_path / "bench", seed=0, n_items=8)
    items = [json.loads(line) for line in (bench / "items.jsonl").read_text().splitlines()]
    shared = items[0]["media"]["image"]
    for item in items[:6]:  # 6 of 8 items show one picture: no donor arrangement keeps an item off its own
        item["media"]["image"] = shared
    (bench / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items))
    checked = _omnieval("datasets", "check", str(bench))
    assert checked.returncode == 2
    refusal = _one_line(checked.stderr)
    assert "no donor for this item" in refusal and shared in refusal
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "benchmark": str(bench), "output": str(tmp_path / "out"), "prompts": ["zs"], "ray": {"num_cpus": 4},
        "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}]}))
    done = _omnieval("run", str(cfg), timeout=600)
    assert done.returncode == 2, done.stderr
    assert _one_line(done.stderr) == refusal


# ---------------------------------------------------------------------------------------------------------------
# datasets check --protocol-options: bad JSON, or options the protocol does not take, in one line
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("given, field, said", [
    ("{bad", "--protocol-options", "not valid JSON (Expecting property name enclosed in double quotes"),
    ("[1]", "--protocol-options", "expected a JSON object"),
    ('{"donor_within": 3}', "protocol_options.donor_within", "valid list (got 3)"),
    ('{"donr_within": []}', "protocol_options.donr_within", "Extra inputs are not permitted"),
])
def test_bad_protocol_options_of_datasets_check_are_one_line(tmp_path, given, field, said):
    from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark

    bench = make_spectrum_benchmark(tmp_path / "bench", seed=0, n_items=8)
    done = _omnieval("datasets", "check", str(bench), "--media-check", "off", "--protocol-options", given)
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert line.startswith(f"omnieval: error: field '{field}': ") and said in line


# ---------------------------------------------------------------------------------------------------------------
# An hf model folder whose config.json names a model_type transformers does not know: refused at pre-flight
# ---------------------------------------------------------------------------------------------------------------

def test_an_hf_model_of_an_unknown_model_type_is_refused_before_ray(small_bench, tmp_path):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen9_omni", "architectures": ["Qwen9Omni"]}))
    assert "qwen9_omni" not in CONFIG_MAPPING_NAMES and "qwen2" in CONFIG_MAPPING_NAMES
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "benchmark": str(small_bench), "output": str(tmp_path / "out"), "prompts": ["zs"], "ray": {"num_cpus": 4},
        "models": [{"name": "sim", "engine": "simulated"}, {"name": "q9", "engine": "hf",
                                                             "options": {"path": str(folder)}}]}))
    done = _omnieval("run", str(cfg), timeout=600)
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith(f"omnieval: error: file '{folder / 'config.json'}', field 'models[1].options.path': q9: ")
    assert "'model_type' is 'qwen9_omni'" in line
    assert not (tmp_path / "out").exists()  # before the output, the lease and Ray

    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))  # a type transformers knows: no word
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import engine_models
    from omnieval.run.preflight import check_engines

    config = parse_run_config(yaml.safe_load(cfg.read_text()))
    check_engines(config, engine_models(config))


# ---------------------------------------------------------------------------------------------------------------
# --media-root naming no folder is refused, not accepted without a word
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, said", [("missing", "does not exist"), ("file", "is a file, not a folder")])
def test_a_media_root_naming_no_folder_is_refused(mmar_release, tmp_path, kind, said):
    release, _ = mmar_release
    root = tmp_path / "media-rot"  # a typo of the media folder's name
    if kind == "file":
        root.write_text("not a folder")
    out = tmp_path / "bench"
    done = _omnieval("datasets", "mmar", str(release), "--out", str(out), "--media-root", str(root))
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert line == (f"omnieval: error: file '{root}', field '--media-root': the --media-root folder {said}; "
                    "nothing was changed: give the folder that holds the media")
    assert not out.exists() and _builds(tmp_path) == []


# ---------------------------------------------------------------------------------------------------------------
# decode.store that cannot be written (a regular file, a read-only filesystem): refused at pre-flight
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture
def read_only_disk(tmp_path):
    """A real read-only filesystem (a tmpfs mounted ro), holding one folder; skipped where mounting is not allowed."""
    where = mount_tmpfs(tmp_path / "ro")
    try:
        (where / "media").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.parametrize("kind", ["file", "read-only"])
def test_a_decode_store_that_cannot_be_written_is_refused_naming_it(small_bench, tmp_path, kind, request):
    if kind == "file":
        store = tmp_path / "store"
        store.write_text("a regular file")
        said = "the decoded-media store is a file, not a folder"
    else:
        store = request.getfixturevalue("read_only_disk") / "media"
        said = "the decoded-media store cannot be written (Read-only file system)"
        with pytest.raises(OSError):  # as the kernel sees it: root too may not write there
            (store / "x").write_bytes(b"")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "benchmark": str(small_bench), "output": str(tmp_path / "out"), "prompts": ["zs"],
        "decode": {"num_frames": 2, "max_side": 32, "store": str(store)},
        "models": [{"name": "sim", "engine": "simulated"}]}))
    done = _omnieval("run", str(cfg))
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith(f"omnieval: error: file '{store}', field 'decode.store': {said}")


def test_a_sweep_whose_decode_store_is_a_file_is_refused_before_its_lease(small_bench, tmp_path):
    store = tmp_path / "store"
    store.write_text("a regular file")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "output": str(tmp_path / "sweep"), "prompts": ["zs"], "decode": {"num_frames": 2, "store": str(store)},
        "protocols": [{"protocol": "dissonance", "benchmark": str(small_bench)}],
        "models": [{"name": "sim", "engine": "simulated"}]}))
    done = _omnieval("sweep", str(sweep))
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert line.startswith(f"omnieval: error: file '{store}', field 'decode.store': the decoded-media store is a "
                           "file, not a folder")
