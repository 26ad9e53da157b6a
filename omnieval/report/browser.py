"""Open a report in headless Chromium: the DOM after its scripts ran, its console messages, a screenshot.

Used by the tests (the report must load with no console message at all: its script logs nothing, so any message is
an error) and to make the screenshots in ``docs/``. Needs Debian's ``chromium`` (``scripts/setup_chromium.sh``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CONSOLE = re.compile(r":CONSOLE[^\]]*\]\s*(.*)$|(Uncaught .*)$")


@dataclass
class BrowserResult:
    dom: str
    console: list[str]
    log: str
    returncode: int


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def console_messages(log: str) -> list[str]:
    """The page's console output (``console.*`` calls and uncaught exceptions) in a ``--enable-logging`` log."""
    out = []
    for line in log.splitlines():
        m = CONSOLE.search(line)
        if m:
            out.append((m.group(1) or m.group(2)).strip())
    return out


def open_page(page: str | Path, *, screenshot: str | Path | None = None, width: int = 1280, height: int = 1600,
              budget_ms: int = 5000, timeout_s: float = 60.0) -> BrowserResult:
    """Load a local HTML file headless (scripts run, ``budget_ms`` of virtual time for the load event); return the
    DOM, the console messages and, if asked, write a ``width`` x ``height`` screenshot of the top of the page."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium found on PATH (install it with scripts/setup_chromium.sh)")
    url = Path(page).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="omnieval-chromium-") as profile:
        cmd = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
               f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
               f"--virtual-time-budget={budget_ms}", f"--window-size={width},{height}", "--dump-dom"]
        if screenshot is not None:
            cmd.append(f"--screenshot={Path(screenshot).resolve()}")
        proc = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    return BrowserResult(dom=proc.stdout, console=console_messages(proc.stderr), log=proc.stderr,
                         returncode=proc.returncode)
