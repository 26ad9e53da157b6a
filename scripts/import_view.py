"""The package tree as the import checks must see it: ``omnieval.kernels`` inside ``omnieval/``.

The kernels sit in the top-level ``kernels/`` folder and the packaging maps them to ``omnieval.kernels``
(pyproject.toml ``[tool.setuptools] package-dir``). grimp, the import checks' engine, finds a package's modules by
walking its folder, where that mapping does not exist. So the checks read a view: a temporary folder holding an
``omnieval/`` of links to the real files and folders, plus ``omnieval/kernels`` linked to ``kernels/`` (grimp
follows links). Put first on ``sys.path`` before the graph is built; removed when the process ends."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

MAPPED = {"omnieval.kernels": "kernels"}
"""Package -> its folder in the source tree, where the packaging maps it (pyproject.toml package-dir)."""


def package_view(root: Path) -> Path:
    """A temporary folder whose ``omnieval/`` is ``root/omnieval`` with the mapped packages inside it."""
    view = Path(tempfile.mkdtemp(prefix="omnieval-imports-"))
    atexit.register(shutil.rmtree, view, True)
    package = view / "omnieval"
    package.mkdir()
    for entry in (root / "omnieval").iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, package / entry.name, target_is_directory=entry.is_dir())
    for name, folder in MAPPED.items():
        os.symlink(root / folder, view / Path(*name.split(".")), target_is_directory=True)
    return view


def use_view(root: Path) -> None:
    """``root`` first on ``sys.path`` (for ``importlib.util.find_spec``, which grimp calls), and before it
    ``package_view(root)`` where ``root`` holds omnieval."""
    sys.path.insert(0, str(root))
    if (root / "omnieval").is_dir():
        if "omnieval" in sys.modules:
            raise RuntimeError("omnieval is imported already: the import checks would read it, not the view")
        sys.path.insert(0, str(package_view(root)))


def source_file(module: str, is_package: bool) -> str:
    """The file of ``module`` in the source tree (``kernels/rng.py`` for ``omnieval.kernels.rng``)."""
    parts = module.split(".")
    for name, folder in MAPPED.items():
        if module == name or module.startswith(name + "."):
            parts = [folder, *parts[len(name.split(".")):]]
    stem = Path(*parts)
    return (stem / "__init__.py" if is_package else stem.with_suffix(".py")).as_posix()
