"""The import contracts (``make imports``): the real tree keeps them, and planted violations break them.

Planted violations go into a copy of the packages (or a throwaway package) in ``tmp_path``, checked by the same
commands CI runs, as subprocesses: ``scripts/lint_imports.py`` (``lint-imports`` on the tree as installed, with
``omnieval.kernels`` inside ``omnieval``) for the contracts in ``pyproject.toml`` and
``scripts/check_import_cycles.py`` for cycles between modules. Each must exit non-zero and name the planted modules
and lines; the allow-list of known cycles must fail when an entry no longer matches.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECKER = REPO / "scripts" / "check_import_cycles.py"
LINT_IMPORTS = [sys.executable, REPO / "scripts" / "lint_imports.py"]  # lint-imports on the installed layout


def run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    # Wide lines (rich wraps at the terminal width) and only the tree under test on the path.
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": str(cwd)}
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def plant(path: Path, code: str) -> int:
    """Append a function holding ``code`` (an import) to ``path``; return the line number of the import."""
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, "", "", "def _planted():", f"    {code}  # noqa", ""]))
    return len(lines) + 4


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(text))


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    """A copy of omnieval and kernels with five planted imports (all inside functions, which count), one of them in
    a module that is new to the run layer: contracts name packages, so it is covered without being listed."""
    root = tmp_path_factory.mktemp("planted")
    for package in ("omnieval", "kernels"):
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "import_contracts.py", root / "scripts")
    shutil.copy(REPO / "pyproject.toml", root)
    lines = {
        # a cycle, and kernels importing omnieval
        "omnieval.kernels.bootstrap": plant(root / "kernels" / "bootstrap.py",
                                            "from omnieval.stats.bootstrap import UNIT"),
        "omnieval.kernels.rng": plant(root / "kernels" / "rng.py", "import polars"),
        "omnieval.engines.simulated": plant(root / "omnieval" / "engines" / "simulated.py",
                                            "from omnieval import sweep"),
        "omnieval.protocols.dissonance": plant(root / "omnieval" / "protocols" / "dissonance.py",
                                               "from omnieval.stats.metrics import metrics_table"),
    }
    (root / "omnieval" / "run" / "brand_new.py").write_text('"""A module the contracts do not name."""\n')
    lines["omnieval.run.brand_new"] = plant(root / "omnieval" / "run" / "brand_new.py",
                                            "from omnieval.stats.paired import paired_table")
    return root, lines


def test_the_real_tree_keeps_the_contracts():
    lint = run([*LINT_IMPORTS, "--no-cache"], REPO)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert " 0 broken" in lint.stdout
    cycles = run([sys.executable, CHECKER], REPO)
    assert cycles.returncode == 0, cycles.stdout + cycles.stderr
    assert cycles.stdout.splitlines()[-1].startswith("OK: ")


def test_planted_imports_break_the_contracts(planted):
    root, lines = planted
    result = run([*LINT_IMPORTS, "--no-cache"], root)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "kernels import only the standard library, numpy and numba BROKEN" in out
    assert f"- omnieval.kernels.bootstrap -> omnieval.stats.bootstrap (l.{lines['omnieval.kernels.bootstrap']})" in out
    assert f"- omnieval.kernels.rng -> polars (l.{lines['omnieval.kernels.rng']})" in out
    assert "the packages are layers: each imports only the layers below it (docs/architecture.md) BROKEN" in out
    assert f"omnieval.engines.simulated -> omnieval.sweep (l.{lines['omnieval.engines.simulated']})" in out
    assert (f"omnieval.protocols.dissonance -> omnieval.stats.metrics (l.{lines['omnieval.protocols.dissonance']})"
            in out)
    assert "the run layer never imports the statistics" in out
    assert f"omnieval.run.brand_new -> omnieval.stats.paired (l.{lines['omnieval.run.brand_new']})" in out
    assert "the run config never imports engine code" in out and "KEPT" in out  # untouched contracts still hold


def test_an_ignored_import_that_no_longer_occurs_fails(planted):
    """An import a contract tolerates by name (``ignore_imports``) must still exist: a name that matches no import
    (the import was removed, or misspelt) fails the run, so such a list can only shrink as the imports go."""
    root, _ = planted
    config = (REPO / "pyproject.toml").read_text()
    anchor = 'type = "forbidden"\nsource_modules = ["omnieval.config"]\n'
    assert anchor in config
    stale = root / "stale.toml"
    ignored = 'ignore_imports = ["omnieval.config -> omnieval.engines.hf"]\n'
    stale.write_text(config.replace(anchor, anchor + ignored))
    result = run([*LINT_IMPORTS, "--no-cache", "--config", stale], root)
    assert result.returncode == 1
    expected = "No matches for ignored import omnieval.config -> omnieval.engines.hf."
    assert expected in result.stdout + result.stderr


def test_planted_cycle_is_named_with_its_import_lines(planted):
    root, lines = planted
    result = run([sys.executable, CHECKER, "--root", root], root)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    # omnieval.kernels.calibration and stats.intervals import omnieval.kernels.bootstrap and are imported by
    # stats.bootstrap: they are in the cycle too
    assert ("import cycle among 4 modules: omnieval.kernels.bootstrap, omnieval.kernels.calibration, "
            "omnieval.stats.bootstrap, omnieval.stats.intervals") in out
    there = lines["omnieval.kernels.bootstrap"]
    assert f"omnieval.kernels.bootstrap -> omnieval.stats.bootstrap: kernels/bootstrap.py line {there}" in out
    back = line_of(root / "omnieval" / "stats" / "bootstrap.py", "from omnieval.kernels.bootstrap import")
    assert f"omnieval.stats.bootstrap -> omnieval.kernels.bootstrap: omnieval/stats/bootstrap.py line {back}" in out
    assert out.splitlines()[-1].startswith("FAILED: 1 import cycle(s)")


def write_package(root: Path, modules: dict[str, str], allowed: list[list[str]]) -> None:
    """A throwaway package ``cyc`` with these modules, and a pyproject.toml allowing these cycles."""
    shutil.rmtree(root / "cyc", ignore_errors=True)
    (root / "cyc").mkdir(parents=True)
    (root / "cyc" / "__init__.py").write_text("")
    for name, code in modules.items():
        (root / "cyc" / f"{name}.py").write_text(textwrap.dedent(code))
    entries = ", ".join("[" + ", ".join(f'"{m}"' for m in entry) + "]" for entry in allowed)
    (root / "pyproject.toml").write_text(f'[tool.omnieval.import-cycles]\npackages = ["cyc"]\nallowed = [{entries}]\n')


@pytest.fixture
def check(monkeypatch, capsys):
    """The checker called in-process on a throwaway package (the subprocess runs above cover the command line):
    ``check(root) -> (exit status, stdout, stderr)``."""
    spec = importlib.util.spec_from_file_location("check_import_cycles", CHECKER)
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the checker puts the root first; undone after the test

    def call(root: Path) -> tuple[int, str, str]:
        capsys.readouterr()
        status = checker.main(["--root", str(root)])
        out, err = capsys.readouterr()
        return status, out, err

    return call


A_IMPORTS_B = "import cyc.b\n"
B_IMPORTS_A_IN_A_FUNCTION = "X = 1\n\n\ndef f():\n    from cyc import a\n    return a\n"


def test_allow_list_matches_exactly_and_cannot_go_stale(tmp_path, check):
    write_package(tmp_path, {"a": A_IMPORTS_B, "b": B_IMPORTS_A_IN_A_FUNCTION}, allowed=[])
    status, out, err = check(tmp_path)
    assert status == 1
    assert "import cycle among 2 modules: cyc.a, cyc.b" in out
    assert "  cyc.a -> cyc.b -> cyc.a" in out
    assert "cyc.a -> cyc.b: cyc/a.py line 1" in out
    assert "cyc.b -> cyc.a: cyc/b.py line 5" in out  # an import inside a function counts

    write_package(tmp_path, {"a": A_IMPORTS_B, "b": B_IMPORTS_A_IN_A_FUNCTION}, allowed=[["cyc.b", "cyc.a"]])
    assert check(tmp_path)[0] == 0

    # The cycle grows: reported as a new cycle, and the entry as gone (with what its modules form now).
    write_package(tmp_path, {"a": A_IMPORTS_B, "b": "import cyc.c\n", "c": "import cyc.a\n"},
                  allowed=[["cyc.a", "cyc.b"]])
    status, out, err = check(tmp_path)
    assert status == 1
    assert "import cycle among 3 modules: cyc.a, cyc.b, cyc.c" in out
    assert "allowed cycle no longer occurs: cyc.a, cyc.b (its modules now form: cyc.a, cyc.b, cyc.c)" in out

    # The cycle is gone: the stale entry fails the check on its own.
    write_package(tmp_path, {"a": A_IMPORTS_B, "b": "X = 1\n"}, allowed=[["cyc.a", "cyc.b"]])
    status, out, err = check(tmp_path)
    assert status == 1
    assert "allowed cycle no longer occurs: cyc.a, cyc.b;" in out
    assert "import cycle among" not in out


def test_a_bad_allow_list_is_a_configuration_error(tmp_path, check):
    write_package(tmp_path, {"a": "X = 1\n"}, allowed=[["cyc.a"]])
    status, out, err = check(tmp_path)
    assert status == 2
    assert "allowed[0] must list two or more distinct module names" in err
