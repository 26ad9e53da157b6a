"""Follow-up commands that a command prints, written so that they run as printed."""

from __future__ import annotations

import os
import shlex
import shutil
import sys


def command_prefix() -> str:
    """How to call this very ``omnieval`` in a printed follow-up command: ``omnieval`` when that is the one on
    PATH, else the path of the one running (``.venv/bin/omnieval``), so printed commands run as printed."""
    here = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    on_path = shutil.which("omnieval")
    if os.path.basename(here) == "omnieval" and on_path and os.path.realpath(on_path) == here:
        return "omnieval"
    if os.path.basename(here) == "omnieval":
        return shlex.quote(os.path.relpath(here) if not os.path.relpath(here).startswith("..") else here)
    return f"{shlex.quote(sys.executable)} -m omnieval.cli"
