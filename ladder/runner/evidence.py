"""A running trial's first evidence that it ran out of memory, so that it is stopped then and there.

A rank that exhausts its memory writes its error (torchrun's error.json, its traceback in its own log) at once,
but the launcher only notices the dead rank at its next poll, then tears the others down (about a third of a
failing probe's time on CPU: `scripts/bench_failures.py`). Memory exhaustion is the one failure that ends the
question for the rung (no later line of another rank explains it away: see `rules.root_hit`), so the trial can
stop at its first line.
Anything else (a communication error may be another rank's symptom) is left to run its course, and so is memory
evidence of low confidence (a simulator's buffer overflow, an allocator's warning: the run may go on and tell). One
more line ends the question for the rung: the trainer's own report of its training gone NaN or infinite
(`ladder.failures.diverged`): the rung fits so far, but no window makes it an answer, so the trial stops there too
(`Evidence.diverged`) rather than measure one.

`Evidence.check` reads only what the logs gained since the last look (the trial's own logs, where a program that
starts its own ranks writes, and torchrun's per-rank logs), whole lines only, and classifies them as
`rules.classify` does at the end, only when new text names memory exhaustion or an error file appears.
"""

from __future__ import annotations

import time
from pathlib import Path

from ladder.core.records import Confidence, Ending, Verdict
from ladder.failures import diverged, files, patterns, rules

CHECK_EVERY_S = 0.25
KEEP_CHARS = 256 * 1024  # of each log, the tail kept for the verdict


class Evidence:
    """Watches one trial folder: its *.log files and torchrun's (`--log-dir`: <run>/attempt_<n>/<rank>/*.log)."""

    def __init__(self, trial_dir: Path, every_s: float = CHECK_EVERY_S) -> None:
        self.trial_dir, self.every_s = trial_dir, every_s
        self._due = 0.0
        self._read: dict[Path, int] = {}  # bytes consumed of each log (up to its last whole line)
        self._texts: dict[Path, str] = {}
        self._error_files = 0
        self.diverged = ""  # the first line read that reports diverged training

    def check(self, oom_kills: int = 0) -> Verdict | None:
        """A memory verdict once the trial's files prove one; None until then (and between looks)."""
        now = time.monotonic()
        if now < self._due:
            return None
        self._due = now + self.every_s
        alarm = oom_kills > 0
        own, ranks = files.folder_logs(self.trial_dir), files.rank_log_paths(self.trial_dir)
        for path in [*own, *(p for paths in ranks.values() for p in paths)]:
            new = self._new_lines(path)
            alarm = alarm or any(patterns.is_memory(hit.reason) and not hit.weak for hit in rules.find_hits(new))
        errors = tuple(files.read_error_files(self.trial_dir, warn=False))
        alarm, self._error_files = alarm or len(errors) > self._error_files, len(errors)
        if not alarm:
            return None
        verdict = rules.classify(
            Ending(
                exit_code=None,
                log_text=self._joined(own),
                error_files=errors,
                oom_kills=oom_kills,
                rank_logs={rank: self._joined(paths) for rank, paths in ranks.items()},
            )
        )
        return verdict if patterns.is_memory(verdict.reason) and verdict.confidence is Confidence.HIGH else None

    def _joined(self, paths: list[Path]) -> str:
        return "\n".join(self._texts.get(path, "") for path in paths)

    def _new_lines(self, path: Path) -> str:
        start = self._read.get(path, 0)
        try:
            with path.open("rb") as fh:
                fh.seek(start)
                data = fh.read()
        except OSError:
            return ""
        whole = data[: data.rfind(b"\n") + 1]
        if not whole:
            return ""
        self._read[path] = start + len(whole)
        text = whole.decode("utf-8", errors="replace")
        self._texts[path] = (self._texts.get(path, "") + text)[-KEEP_CHARS:]
        self.diverged = self.diverged or diverged.diverged_line(text)
        return text
