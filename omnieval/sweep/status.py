"""What a sweep reports while it runs: each run's outcome, the sweep's result and its printed table, and a run's
progress logged from its part files."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RunOutcome:
    key: str
    model: str
    protocol: str
    benchmark: str
    prompt: str
    output: str
    fingerprint: str
    status: str = "pending"  # skipped | done | failed
    reason: str = ""
    expected: int = 0
    predictions: int = 0
    scored: int = 0
    resumed: int = 0
    errors: int = 0
    skipped_rows: int = 0  # rows not asked: media the model cannot take (unsupported_media: skip)
    skipped_media: dict[str, int] = field(default_factory=dict)  # those rows by modality
    skipped_conditions: dict[str, dict] = field(default_factory=dict)  # run.json's skipped.conditions
    verdicts: list[dict] = field(default_factory=list)  # overall accuracy cells with both verdicts (state.run_verdicts)
    metric_rows: int = 0
    attempts: int = 0
    started: float | None = None
    finished: float | None = None
    seconds: float = 0.0
    failure: str | None = None


@dataclass
class SweepResult:
    output: str
    summary_path: str
    runs: list[RunOutcome] = field(default_factory=list)
    max_error_rate: float = 0.0
    decodes: int = 0  # media decoded by this sweep's passes (a file shared by runs of one pass: once)
    decoded_store_hits: int = 0  # media its passes read from the decoded-media store instead

    def add_pass(self, kinds: dict[str, list[str]]) -> None:
        """Count one pass's media work (``pipeline.decode_tally`` terms: a hit is not a decode)."""
        self.decodes += sum(kind != "hit" for done in kinds.values() for kind in done)
        self.decoded_store_hits += sum(kind == "hit" for done in kinds.values() for kind in done)

    @property
    def ok(self) -> bool:
        """Every run complete, and none with more errored rows than ``max_error_rate`` allows."""
        return all(r.status in ("done", "skipped") and r.errors <= self.max_error_rate * max(1, r.predictions)
                   for r in self.runs)

    def summary(self) -> str:
        lines = [f"sweep summary: {self.summary_path}",
                 f"{'run':<48} {'status':<8} {'rows':>7} {'scored':>7} {'errors':>6} {'skipped':>7} "
                 f"{'seconds':>8}"]
        for r in self.runs:
            lines.append(f"{r.key:<48} {r.status:<8} {r.predictions:>7} {r.scored:>7} {r.errors:>6} "
                         f"{r.skipped_rows:>7} {r.seconds:>8.1f}")
        counts = {s: sum(r.status == s for r in self.runs) for s in ("done", "skipped", "failed")}
        lines.append(f"{len(self.runs)} runs: {counts['done']} done, {counts['skipped']} skipped (complete), "
                     f"{counts['failed']} failed; media decoded {self.decodes}, read from the decoded-media store "
                     f"{self.decoded_store_hits}")
        lines += self.verdict_lines()
        if nothing := self.measured_nothing():
            lines.append(f"WARNING: {len(nothing)} run(s) measured nothing, every row skipped (media the model cannot "
                         f"take; unsupported_media: note gives a text-only baseline): {', '.join(nothing)}")
        if counts["done"] + counts["skipped"]:
            lines += ["", "next:", f"  {self.report_command()}"]
        return "\n".join(lines)

    def verdict_lines(self) -> list[str]:
        """Per run and overall accuracy cell of answers read from generated text: both accuracies, the answers the
        rules read differently, the unparsed and forced shares, and the flags (``stats.verdicts.cell_flags``)."""
        from omnieval.stats.verdicts import NO_SCORER, NOT_COMPUTED_TEXT, official_text

        cells = [(r.key, cell) for r in self.runs for cell in r.verdicts]
        if not cells:
            return []
        lines = ["answer verdicts (accuracy / official, disagree, unparsed, forced, official forced):"]
        for key, c in cells:
            reason = c.get("not_computed")  # an official rule named but not computable here (state.run_verdicts)
            official = official_text(c["official_accuracy"], c["disagree"] is not None, _share, reason)
            flags = c["flags"].replace(NO_SCORER, f"{NOT_COMPUTED_TEXT}: {reason}") if reason else c["flags"]
            flags = f"  FLAG: {flags}" if flags and flags != NO_SCORER else ""
            split = f" {c['split']}" if c.get("split") not in (None, "", "all") else ""  # a run's splits apart
            lines.append(f"  {key}{split} {c['key'] or 'all'}: {_share(c['accuracy'])} / {official}, "
                         f"disagree {_count(c['disagree'])}, unparsed {_share(c['unparsed_share'])}, "
                         f"forced {_share(c['forced_share'])}, official forced {_share(c['official_forced_share'])}"
                         f"{flags}")
        return lines

    def measured_nothing(self) -> list[str]:
        """The complete runs whose every row was skipped (``skipped_rows``): no metric, nothing in the report."""
        return [r.key for r in self.runs if r.status in ("done", "skipped") and r.predictions and
                r.skipped_rows == r.predictions]

    def report_command(self) -> str:
        """The command that shows every run of the sweep side by side, printed so that it runs as printed (the
        report beside a local output, in the working folder for a remote one)."""
        import shlex

        from omnieval.core.commands import command_prefix

        out = self.output.rstrip("/")
        base = out if "://" not in out else f"./{out.rsplit('/', 1)[-1]}"
        return f"{command_prefix()} report {shlex.quote(self.output)} --out {shlex.quote(base + '-report')}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _count(value: float | None) -> str:
    return "—" if value is None else str(round(value))


class RunProgress:
    """Logs a run's rows written so far (from its part files' footers) every ``interval`` seconds."""

    def __init__(self, store, model: str, expected: int, label: str, interval: float, log: Callable[[str], None]):
        self.store, self.model, self.expected, self.label = store, model, expected, label
        self.interval, self.log = interval, log
        self._rows: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweep-progress", daemon=True)

    def rows(self) -> int:
        import pyarrow.parquet as pq

        for path in self.store.part_files(self.model):
            if path not in self._rows:  # parts are immutable once renamed into place
                with self.store.fs.open_input_file(path) as f:
                    self._rows[path] = pq.read_metadata(f).num_rows
        return sum(self._rows.values())

    def _loop(self) -> None:
        start = time.monotonic()
        try:
            before = self.rows()  # written by an earlier attempt: resumed, not part of this attempt's rate
        except OSError:
            before = 0
        while not self._stop.wait(self.interval):
            try:
                n = self.rows()
            except OSError:
                continue
            rate = (n - before) / max(1e-9, time.monotonic() - start)
            self.log(f"{self.label}: {min(n, self.expected)}/{self.expected} predictions "
                     f"({100 * min(n, self.expected) / max(1, self.expected):.0f}%), {rate:.1f}/s")

    def __enter__(self) -> RunProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def log_line(message: str) -> None:
    """The default log: a timestamped line on stdout (the job log under ``ray job submit``)."""
    print(f"{time.strftime('%H:%M:%S')} [omnieval sweep] {message}", flush=True)

