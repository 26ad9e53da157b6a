"""What the wheel holds: the numba kernels as ``omnieval.kernels`` (the source tree's ``kernels/`` folder, mapped by
``[tool.setuptools] package-dir``), no top-level ``kernels`` package that would shadow PyPI's, every package of the
tree but ``omnieval.dev`` (the list in pyproject.toml is explicit because a mapped folder cannot be found by
``packages.find``), the demo and its tiny build; and what an install without ``omnieval.dev`` says about the benches."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tree_packages() -> set[str]:
    """Every package of the source tree, as the wheel must name it (``kernels/`` as ``omnieval.kernels``)."""
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "omnieval").rglob("__init__.py")}
    found |= {"omnieval." + ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "kernels").rglob("__init__.py")}
    return found


def test_the_package_list_names_every_package_of_the_tree():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"omnieval.kernels": "kernels"}
    listed = set(setuptools["packages"])
    assert "omnieval.kernels" in listed and "kernels" not in listed
    assert listed == _tree_packages() - {"omnieval.dev"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the tree (the build leaves ``build/`` and ``*.egg-info`` behind it)."""
    where = tmp_path_factory.mktemp("wheel")
    src = where / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("omnieval", "kernels"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(where / "dist"), str(src)], check=True, cwd=where, timeout=300)
    (built,) = (where / "dist").glob("omnieval-*.whl")
    return built


def test_the_wheel_holds_the_kernels_inside_omnieval_and_no_top_level_kernels(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"omnieval"}
    kernels = {n for n in names if n.startswith("omnieval/kernels/")}
    assert {f"omnieval/kernels/{p.name}" for p in (REPO / "kernels").glob("*.py")} == kernels
    assert not [n for n in names if n.startswith("omnieval/dev/")]
    assert {"omnieval/demo/run.py", "omnieval/demo/tiny_model.py", "omnieval/cli.py"} <= set(names)


def test_omnieval_kernels_imports_from_the_installed_wheel_and_kernels_names_nothing(wheel, tmp_path):
    """Unpacked as pip installs it, on a path without this checkout and without any ``.pth`` file (``-S``: an
    editable install of a checkout in this environment would map the names otherwise); numpy and numba from the
    environment's site-packages."""
    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    site = sysconfig.get_paths()["purelib"]
    code = ("import importlib.util, omnieval.kernels.rng as rng, omnieval.kernels.bootstrap as b;"
            "print(rng.__file__); print(b.__file__);"
            "print(importlib.util.find_spec('kernels'))")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": f"{installed}:{site}", "NUMBA_CACHE_DIR": str(tmp_path / "numba")},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    rng_file, bootstrap_file, kernels_spec = done.stdout.split("\n")[:3]
    assert Path(rng_file) == installed / "omnieval" / "kernels" / "rng.py"
    assert Path(bootstrap_file) == installed / "omnieval" / "kernels" / "bootstrap.py"
    assert kernels_spec == "None"


def test_a_source_checkout_on_pythonpath_maps_omnieval_kernels_to_its_kernels_folder(tmp_path):
    """No install at all: ``PYTHONPATH=<checkout>`` (and a Ray job's uploaded working dir) finds ``omnieval.kernels``
    in this checkout's ``kernels/`` folder, not in another checkout installed in the environment."""
    site = sysconfig.get_paths()["purelib"]
    code = "import omnieval.kernels.rng as rng; print(rng.__file__)"
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": f"{REPO}:{site}", "NUMBA_CACHE_DIR": str(tmp_path / "numba")},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == REPO / "kernels" / "rng.py"


def _installed(wheel: Path, tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` run by this interpreter on the unpacked wheel alone (``-S``: no ``.pth`` file, so no editable install
    of a checkout), numpy, numba and the rest from the environment's site-packages."""
    installed = tmp_path / "site"
    if not installed.exists():
        zipfile.ZipFile(wheel).extractall(installed)
    site = sysconfig.get_paths()["purelib"]
    return subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": f"{installed}:{site}", "NUMBA_CACHE_DIR": str(tmp_path / "numba")},
                          timeout=120)


def test_without_the_development_tools_bench_says_what_to_install(wheel, tmp_path):
    code = "import sys; from omnieval.cli import main; sys.exit(main(['bench', 'stats', '--quick']))"
    done = _installed(wheel, tmp_path, code)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("omnieval: error: `omnieval bench stats` needs the development tools: install ")
    assert "(`pip install -e '.[dev]'`)" in done.stderr


def test_the_demo_and_its_tiny_build_import_from_the_wheel_alone(wheel, tmp_path):
    """Every ``omnieval`` module the demo and its tiny build import, inside functions too, is in the wheel: the
    demo runs where ``omnieval.dev`` is absent (the import contracts keep dev above the demo)."""
    code = ("import ast, importlib, importlib.util, sys\n"
            "seen, todo = set(), ['omnieval.demo.run', 'omnieval.demo.tiny_model']\n"
            "while todo:\n"
            "    name = todo.pop()\n"
            "    if name in seen: continue\n"
            "    seen.add(name)\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    if spec is None: sys.exit('missing: ' + name)\n"
            "    if not spec.origin.endswith('.py'): continue\n"
            "    for node in ast.walk(ast.parse(open(spec.origin).read())):\n"
            "        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (\n"
            "            [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])\n"
            "        todo += [n for n in names if n.startswith('omnieval')]\n"
            "print(len(seen))\n")
    done = _installed(wheel, tmp_path, code)
    assert done.returncode == 0, done.stdout + done.stderr
    assert int(done.stdout) > 20  # the run, the statistics, the protocols: the demo's whole path was followed
