"""``lint-imports`` on the tree as the packaging installs it: run this, not ``lint-imports`` itself.

The kernels are ``omnieval.kernels``, mapped from the top-level ``kernels/`` folder by the packaging; grimp finds a
package's modules by walking its folder, so plain ``lint-imports`` reports ``omnieval.kernels`` missing. This runs
import-linter's command, with the same arguments, in the view of ``scripts/import_view.py``. Run from the repository
root (the tree it checks, whose ``pyproject.toml`` it reads and whose ``scripts.import_contracts`` it imports).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import import_view  # noqa: E402 - a sibling script, found through the line above


def main(argv: list[str]) -> int:
    """import-linter puts its working directory first on ``sys.path``, so it runs inside the view, reading
    ``pyproject.toml`` of the tree (or ``--config``, relative to where this was started)."""
    import os

    root = Path.cwd()
    args = list(argv)
    if "--config" in args:
        i = args.index("--config") + 1
        args[i] = str((root / args[i]).resolve())
    else:
        args += ["--config", str(root / "pyproject.toml")]
    view = import_view.package_view(root)
    sys.path.append(str(root))  # scripts.import_contracts (the contract type pyproject.toml registers)
    os.chdir(view)
    from importlinter.cli import lint_imports_command

    sys.argv = ["lint-imports", *args]
    return lint_imports_command()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
