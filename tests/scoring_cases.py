"""The released-code verdicts the scorer tests compare against (``tests/data/scoring``).

``<bench>.jsonl`` holds answer texts models write, over a few items of the benchmark's shape, in the input format of
``omnieval parse``; each row's ``expected`` (``choice``: the option the release reads, null for none; ``correct``:
whether it counts the answer) was written by running the benchmark's released evaluation code, named with its
commit in ``<bench>.source.json``, on that row's text. The tests score the same file with ``omnieval parse``.
"""

from __future__ import annotations

import json
from pathlib import Path

from omnieval.cli import main

DATA = Path(__file__).parent / "data" / "scoring"


def release_source(bench: str) -> dict:
    return json.loads((DATA / f"{bench}.source.json").read_text(encoding="utf-8"))


def parsed_by_cli(bench: str, tmp_path: Path, *, robust: bool = False) -> list[dict]:
    """The rows of ``<bench>.jsonl`` as ``omnieval parse --scorer <bench>`` writes them."""
    out = tmp_path / f"{bench}{'-robust' if robust else ''}.jsonl"
    argv = ["parse", "--scorer", bench, str(DATA / f"{bench}.jsonl"), "--out", str(out)]
    assert main(argv + (["--robust"] if robust else [])) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def disagreements_with_release(rows: list[dict]) -> list[str]:
    """One line per row whose choice or correct differs from the released code's."""
    return [f"{row['id']} {row['text']!r}: release {row['expected']}, ours choice={row['choice']} "
            f"correct={row['correct']}" for row in rows
            if (row["choice"], row["correct"]) != (row["expected"]["choice"], row["expected"]["correct"])]


def assert_agrees_with_release(bench: str, tmp_path: Path) -> list[dict]:
    """Every row scored as the release scores it; prints the agreement count (pytest -s shows it)."""
    source = release_source(bench)
    assert {"repository", "commit", "path"} <= set(source) and len(source["commit"]) == 40
    rows = parsed_by_cli(bench, tmp_path)
    assert len(rows) >= 40
    wrong = disagreements_with_release(rows)
    print(f"{bench}: {len(rows) - len(wrong)} of {len(rows)} verdicts agree with {source['repository']} "
          f"@ {source['commit'][:7]} {source['path']}")
    assert not wrong, "\n".join(wrong)
    return rows
