"""Failure classification: the one table of failure patterns, and the rules that name a trial's root cause.

Every way a trial can fail that ladder recognises is a row of `PATTERNS`: a compiled regex, the `Reason` it
proves and the real output it was written from. Nothing else in ladder matches failure text.

Choosing the root cause among many matched lines (the traps are tested in tests/integration/test_failures.py):

* Each line is named by the first row that matches it (rows are ordered memory, fatal, port, communication,
  catch-all). A key phrase wrapped onto the next line (``CUDA out of mem`` / ``ory``) still matches; a next line
  that matches on its own is named by itself, never run together with the line before it.
* Higher tiers win: memory > fatal program error > port in use > communication failures and unrecognised
  exceptions. One rank's OOM followed by pages of NCCL/gloo errors from the others is an OOM.
* Order breaks ties (the earliest line wins), and order demotes memory: a memory line after an NCCL timeout or a
  fatal error is its consequence (an absurd "Tried to allocate more than 1EB" after a watchdog timeout).
* A memory line asking for many times what its device or host holds (`ladder.failures.sizes`) is a size bug: a
  fatal `oversized_alloc` error, never a step down.
* Sources, most structured first: torchrun error files (earliest timestamp), per-rank logs (earliest-failing rank
  where their stamps tell, else memory first), the combined log, the cgroup's OOM kills, the exit code. The first
  source that shows a failure names it, except that a communication failure or an unrecognised exception yields
  to a memory failure that a later source shows.
* After a clean exit (code 0), or a measurement window that ran to its end (ladder stopped the group, so its exit
  code says nothing), unrecognised exception lines are not failures: only the named ones are.

This module is pure (text and exit facts in, a verdict out); `ladder.failures.files` reads a trial folder and
`ladder.failures.cli` is `python -m ladder.failures`.
"""

from __future__ import annotations

import bisect
import math
import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

from ladder.core.records import HEALTHY_STOPS, Confidence, Ending, Reason, Status, Verdict
from ladder.failures import diverged, sizes
from ladder.failures.patterns import _KILL, PATTERNS, Pattern, Tier, is_memory, status_of

EVIDENCE_CHARS = 300  # longest evidence kept: a window of the proving line around the match

# A glog-style line prefix (E1002 18:16:40.662, W906 15:02:06.204): month and day, then the time of day.
_STAMP = re.compile(r"\b[IWEF](\d{3,4}) (\d\d):(\d\d):(\d\d(?:\.\d+)?)\b")


@dataclass(frozen=True)
class Hit:
    """A failure found in one source: its reason, how strongly it claims the root cause, and the proving line."""

    reason: Reason
    tier: Tier
    evidence: str
    line: int = 0  # index of the line where the match starts
    stamp: float | None = None  # the line's glog time stamp, where it has one (orders ranks)
    weak: str = ""  # why this evidence alone leaves the cause open ("" = it proves it)
    row: Pattern | None = field(default=None, compare=False, repr=False)  # the table's row that named the line

    @property
    def cuts_off(self) -> bool:
        """Memory lines after this one are its consequence, not the cause."""
        return self.reason is Reason.NCCL_TIMEOUT or self.tier is Tier.FATAL

    def verdict(self) -> Verdict:
        confidence = Confidence.LOW if self.weak else Confidence.HIGH
        return Verdict(status_of(self.reason), self.reason, self.evidence, confidence, self.weak)


# --- one text ---


def find_hits(text: str, keep_generic: bool = True) -> list[Hit]:
    """Every line of `text` that a row of the table names, in order (one hit per line); without `keep_generic`, only
    the lines whose row counts after a clean ending (a line named by a catch-all or a warning row is no failure)."""
    lines = text.splitlines()
    hits = (_line_hit(lines, i, PATTERNS) for i in _candidate_lines(lines, PATTERNS))
    return [hit for hit in hits if hit and (keep_generic or (hit.row and hit.row.counts_after_a_clean_ending))]


def _candidate_lines(lines: Sequence[str], rows: Iterable[Pattern]) -> list[int]:
    """Lines some row may match, found by scanning the whole text per row (fast); `_line_hit` then decides.

    The text is scanned with its lines joined by newlines and, for keywords wrapped across a line end, with its lines
    run together; a match marks the lines it touches.
    """
    joined, flat = "\n".join(lines), "".join(lines)
    joined_starts = list(accumulate((len(line) + 1 for line in lines), initial=0))
    flat_starts = list(accumulate((len(line) for line in lines), initial=0))
    found: set[int] = set()
    lowered = flat.lower()  # holds every line's text and every wrapped phrase
    for row in rows:
        if row.needles and not any(needle in lowered for needle in row.needles):
            continue
        for text, starts in ((joined, joined_starts), (flat, flat_starts)):
            for match in row.scanner.finditer(text):
                first = bisect.bisect_right(starts, match.start()) - 1
                last = bisect.bisect_right(starts, max(match.start(), match.end() - 1)) - 1
                found.update(range(first, last + 1))
    return sorted(found)


def _line_hit(lines: Sequence[str], i: int, rows: Iterable[Pattern]) -> Hit | None:
    line = lines[i]
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    for row in rows:
        match, text = row.regex.search(line), line
        if match is None and nxt:
            match, text = _wrapped(row.regex, line, nxt), line + nxt
        if match is not None:
            reason, tier = _sized(row, f"{text}\n{nxt}")
            return Hit(reason, tier, _clip(text, match.start()), i, _stamp(line), row.weak, row)
    return None


def _sized(row: Pattern, text: str) -> tuple[Reason, Tier]:
    """A memory line whose request is many times what its device or host holds names a size bug, not a shortage."""
    if is_memory(row.reason) and sizes.oversized(text, on_gpu=row.reason is Reason.CUDA_OOM):
        return Reason.OVERSIZED_ALLOC, Tier.FATAL
    return row.reason, row.tier


def _wrapped(regex: re.Pattern[str], line: str, nxt: str) -> re.Match[str] | None:
    """A match that starts on `line` and runs on into `nxt`: a key phrase wrapped by a terminal or a paste.

    Not when `nxt` matches by itself: then two separate lines only met when run together (a banner's "CUDA Toolkit
    12.8, Driver 13.0" and the failure line after it), and `nxt` is named on its own, its evidence its own line.
    """
    match = regex.search(line + nxt)
    if match is None or not match.start() < len(line) < match.end():
        return None
    return None if regex.search(nxt) else match


def _clip(text: str, start: int) -> str:
    """The proving line, stripped (of a box's borders too); a long one is cut to a window that keeps the match."""
    begin = max(0, min(start - 40, len(text) - EVIDENCE_CHARS))
    return _unboxed(text[begin : begin + EVIDENCE_CHARS])


# the borders rich/tyro draw around a message (╭─ title ─╮, │ text │, ╰───╯)
_BOX = "│┃║╭╮╰╯├┤┬┴┼─━═┌┐└┘╔╗╚╝╠╣"


def _unboxed(line: str) -> str:
    return line.strip(_BOX + " \t\r\n\f\v")


def _stamp(line: str) -> float | None:
    match = _STAMP.search(line)
    if match is None:
        return None
    mmdd, hours, minutes, seconds = match.groups()
    return int(mmdd) * 86400.0 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def root_hit(hits: Sequence[Hit]) -> Hit | None:
    """The root cause among one text's hits: the highest tier, then proving evidence before weak, then the earliest
    line.

    A memory line (an absurd request too) after the first NCCL timeout or fatal error is dropped: it is that failure's
    consequence.
    """
    cutoff = next((hit.line for hit in hits if hit.cuts_off), None)
    kept = [hit for hit in hits if not (_memory_line(hit) and cutoff is not None and hit.line > cutoff)]
    return max(kept, key=lambda hit: (hit.tier, not hit.weak, -hit.line), default=None)


def _memory_line(hit: Hit) -> bool:
    return hit.tier is Tier.MEMORY or (hit.row is not None and is_memory(hit.row.reason))


def as_json(verdict: Verdict) -> dict[str, str]:
    """A verdict as verdict.json and `python -m ladder.failures` show it."""
    return {
        "status": str(verdict.status),
        "reason": str(verdict.reason),
        "evidence": verdict.evidence,
        "confidence": str(verdict.confidence),
        "basis": verdict.basis,
    }


def classify_text(text: str, exit_code: int | None = None) -> Verdict:
    """The verdict for one log text and the exit code of the process that wrote it."""
    return classify(Ending(exit_code=exit_code, log_text=text))


# --- the full ending ---


def classify(ending: Ending) -> Verdict:
    """The verdict for a trial's ending: ladder's own stop, then the failure evidence, then the exit code."""
    stopped = _stopped_verdict(ending.stopped_by)
    if stopped is not None:
        return stopped
    hits = _source_hits(ending)
    hit = _combine(hits)
    if hit is None:
        return _fallback(ending)
    if hit.weak and any(other.reason is hit.reason and not other.weak for other in hits):
        hit = replace(hit, weak="")  # another source proves it (the kernel's OOM kill behind a bare `Killed`)
    return with_what_was_said(hit.verdict(), ending.log_text)


def _stopped_verdict(stopped_by: str) -> Verdict | None:
    reason = {"interrupted": Reason.INTERRUPTED, "stalled": Reason.STALLED, "trial_timeout": Reason.TRIAL_TIMEOUT}
    if stopped_by not in reason:
        return None
    return Verdict(status_of(reason[stopped_by]), reason[stopped_by], f"stopped by ladder: {stopped_by}")


def _source_hits(ending: Ending) -> list[Hit]:
    """The root hit of each source, most structured first (a window that ran to its end keeps no exit code)."""
    done = ending.stopped_by in HEALTHY_STOPS
    keep_generic = not done and ending.exit_code != 0
    found = (
        _error_files_hit(ending.error_files, keep_generic),
        _rank_logs_hit(ending.rank_logs, keep_generic),
        root_hit(find_hits(ending.log_text, keep_generic)),
        _oom_kills_hit(ending.oom_kills),
        None if done else _exit_hit(ending.exit_code),
    )
    return [hit for hit in found if hit is not None]


def _combine(hits: Sequence[Hit]) -> Hit | None:
    """The first source names the cause, unless it shows only a symptom and a later source shows memory."""
    if not hits:
        return None
    if hits[0].tier is Tier.LOW:
        return next((hit for hit in hits if hit.tier is Tier.MEMORY), hits[0])
    return hits[0]


def _fallback(ending: Ending) -> Verdict:
    """No failure line anywhere: a clean exit (or a finished window) is OK, one stopped at its line of diverged
    training `diverged`, anything else a plain error."""
    if ending.stopped_by == "diverged":
        found = diverged.verdict([ending.log_text, *ending.rank_logs.values()])
        return found or Verdict(Status.DIVERGED, Reason.NONE, "stopped by ladder: its training went NaN or infinite")
    done = ending.stopped_by in HEALTHY_STOPS
    uncaught = "" if done else uncaught_exception(ending.log_text)
    if uncaught:  # a launcher that returned 0 after its program died of an exception
        return with_what_was_said(Verdict(Status.ERROR, Reason.ERROR, _clip(uncaught, 0)), ending.log_text)
    if done or ending.exit_code == 0:
        return Verdict(Status.OK, Reason.NONE, "window done, no failure line" if done else "exit code 0")
    evidence = _clip(telling_line(ending.log_text), 0)
    return with_what_was_said(
        Verdict(Status.ERROR, Reason.ERROR, evidence or describe_exit(ending.exit_code)), ending.log_text
    )


# torchrun's own report of a failed child (its traceback, separators, the failures table) says nothing of the cause
_LAUNCHER_NOISE = re.compile(
    r"^(?:[=\-]{8,}|Traceback \(most recent|File \"|\^+$|\S+ FAILED$|Failures:|Root Cause|<NO_OTHER_FAILURES>"
    r"|\[\d+\]:$)"
    r"|ChildFailedError|elastic/multiprocessing/|^(?:time|host|rank|exitcode|error_file|traceback)\s*:"
)
# hints that follow an error and say nothing of it: where to read more, how to see more, how to run help
_HINT = re.compile(
    r"^(?:Set the environment variable HYDRA_FULL_ERROR=1|For full helptext|Try '[^']*--help' for help"
    r"|usage:|To append to your config use|For debugging consider passing|The above exception was the direct cause"
    r"|During handling of the above exception|Perhaps you meant|Did you mean)",
    re.IGNORECASE,
)
_ERRORISH = re.compile(
    r"error|exception|fatal|abort|failed|unrecognized|could not|cannot|can't|invalid|no such|not found|missing"
    r"|required|unknown",
    re.IGNORECASE,
)
_MUTE_EXCEPTION = re.compile(r"^[\w.]*(?:Error|Exception)(?::\s*(?:None)?)?\s*$")  # raised with no message
_SUGGESTION = re.compile(r"^(?:Perhaps you meant|Did you mean)\b", re.IGNORECASE)


_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+)')  # a traceback's frame (stripped)
_WARNING = re.compile(r":\d+: \w*Warning: ")  # `path.py:6: UserWarning: ...`, its source line printed under it
_EXCEPTION_LINE = next(
    p.regex for p in PATTERNS if p.generic and p.reason is Reason.ERROR and "Error|Exception" in p.regex.pattern
)
_TAIL_LINES = 60


def uncaught_exception(text: str) -> str:
    """The exception line that ends a log whose last lines hold a Python traceback: the program died of it, whatever
    exit code a launcher then returned; '' when the log goes on after its last traceback."""
    lines = [s for line in text.splitlines()[-_TAIL_LINES:] if (s := line.strip())]
    if not lines or not any(line.startswith(_TRACEBACK) for line in lines):
        return ""
    return lines[-1] if _EXCEPTION_LINE.search(lines[-1]) else ""


# torchrun's agent on the first rank that failed: which rank, and its exit code (negative: the signal)
_AGENT_FAILED = re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+.*")


def telling_line(text: str) -> str:
    """The line that best says why a run without a known failure line ended: the last error-like line that is
    not the launcher's own report nor a hint (HYDRA_FULL_ERROR, --help, usage), with a box's borders taken off and
    the CLI's suggestion that follows it (tyro's "Perhaps you meant:", click's "Did you mean"); else torchrun's word
    on the first rank that failed (its exit code); else the last line that is none of those, else ''."""
    raw = text.splitlines()
    code_lines = {i + 1 for i, line in enumerate(raw) if line.lstrip().startswith('File "')}  # a frame's source
    lines = [
        s
        for i, line in enumerate(raw)
        if i not in code_lines and (s := _unboxed(line)) and not _LAUNCHER_NOISE.search(s)
    ]
    told = [(i, line) for i, line in enumerate(lines) if not _HINT.search(line)]
    agent = _AGENT_FAILED.search(text)
    if not any(_ERRORISH.search(line) for _, line in told) and agent:
        return agent.group(0)
    if not told:
        return ""
    i, line = next(((i, line) for i, line in reversed(told) if _ERRORISH.search(line)), told[-1])
    after = lines[i + 1 : i + 3]
    if after and _SUGGESTION.search(after[0]):  # the suggestion, and its value where it is on the next line
        line += " " + " ".join(after if after[0].endswith(":") else after[:1])
    return line


def with_what_was_said(verdict: Verdict, text: str) -> Verdict:
    """An error raised with no message (`AssertionError: None` from `assert ok, print(why)`, a bare `ValueError`)
    says nothing; what the program printed just before its traceback began usually does, so it joins the evidence.
    Where that is a warning's (its header, or the source line Python prints under it) or nothing, the line that
    failed does instead: the source of the traceback's last frame (`assert num_envs % device_count == 0`)."""
    if verdict.status is not Status.ERROR or not _MUTE_EXCEPTION.match(verdict.evidence.strip()):
        return verdict
    lines = [line.strip() for line in text.splitlines()[-_TAIL_LINES:] if line.strip()]
    start = max((j for j, line in enumerate(lines) if line.startswith(_TRACEBACK)), default=-1)
    before = lines[start - 1] if start > 0 else ""
    warned = any(_WARNING.search(line) for line in lines[max(0, start - 2) : max(0, start)])
    if before and not warned and not _HINT.search(before) and not _LAUNCHER_NOISE.search(before):
        return replace(verdict, evidence=f"{verdict.evidence.strip()} (printed before its traceback: {before})")
    if start >= 0 and (failed := failing_line(lines[start:])):
        return replace(verdict, evidence=f"{verdict.evidence.strip()} (raised at {failed})")
    return verdict


def failing_line(traceback: Sequence[str]) -> str:
    """`ppo/train.py:254: assert num_envs % device_count == 0`: where a traceback's last frame is (its file's last
    two parts and line) and the source line it shows; '' where it shows no source."""
    frames = [j for j, line in enumerate(traceback) if _FRAME.match(line)]
    if not frames or frames[-1] + 1 >= len(traceback):
        return ""
    frame, source = _FRAME.match(traceback[frames[-1]]), traceback[frames[-1] + 1]
    if frame is None or _FRAME.match(source) or _EXCEPTION_LINE.search(source) or set(source) <= set("^~ "):
        return ""
    where = "/".join(frame["file"].replace("\\", "/").split("/")[-2:])
    return f"{where}:{frame['line']}: {source}"


def describe_exit(code: int | None) -> str:
    """`exit code -9 (SIGKILL)`: the code, and the signal it stands for (negative, or a shell's 128 + n)."""
    if code is None:
        return "no exit code and no failure line"
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        return f"exit code {code} ({signal.Signals(number).name})"
    except ValueError:
        return f"exit code {code}"


def _exit_hit(code: int | None) -> Hit | None:
    """SIGKILL (-9, or 137 from a shell) is how the kernel's OOM killer ends a process (and how others do)."""
    if code not in (-9, 137):
        return None
    return Hit(Reason.HOST_OOM, Tier.MEMORY, describe_exit(code), weak=_KILL)


def _oom_kills_hit(count: int) -> Hit | None:
    if count <= 0:
        return None
    return Hit(Reason.HOST_OOM, Tier.MEMORY, f"memory cgroup counted {count} OOM kill(s)")


def _rank_logs_hit(logs: dict[int, str], keep_generic: bool) -> Hit | None:
    """The earliest-failing rank where every failing rank's line has a time stamp; else memory first, then rank."""
    hits = [hit for _, text in sorted(logs.items()) if (hit := root_hit(find_hits(text, keep_generic)))]
    if not hits:
        return None
    if all(hit.stamp is not None for hit in hits):
        return min(hits, key=lambda hit: (hit.stamp, -hit.tier))
    return max(hits, key=lambda hit: hit.tier)


_SYMPTOMS = frozenset({Reason.PEER_LOST, Reason.NCCL_ERROR, Reason.NCCL_TIMEOUT})


def _error_files_hit(files: Sequence[dict[str, Any]], keep_generic: bool) -> Hit | None:
    """torchrun's rule: the error file with the earliest timestamp is the root cause. Stamps have 1 s resolution,
    so within a tie a communication failure is the symptom of the other rank's failure, and memory comes first."""
    hits = [(_error_stamp(data), hit) for data in files if (hit := _error_file_hit(data, keep_generic))]
    return min(hits, key=lambda pair: (pair[0], pair[1].reason in _SYMPTOMS, -pair[1].tier))[1] if hits else None


def _error_file_hit(data: dict[str, Any], keep_generic: bool) -> Hit | None:
    text = _error_text(data)
    hit = root_hit(find_hits(text, keep_generic))
    if hit is None and keep_generic and text.strip():
        return Hit(Reason.ERROR, Tier.LOW, _clip(text.strip().splitlines()[0], 0))
    return hit


def _error_text(data: dict[str, Any]) -> str:
    """The message and Python call stack of one error file ({"message": {...}} or {"message": "<str>"})."""
    message = data.get("message")
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return ""
    extra = message.get("extraInfo") or {}
    parts = (message.get("message"), extra.get("py_callstack") if isinstance(extra, dict) else None)
    return "\n".join(part for part in parts if isinstance(part, str))


def _error_stamp(data: dict[str, Any]) -> float:
    message = data.get("message")
    extra = message.get("extraInfo") if isinstance(message, dict) else None
    raw = extra.get("timestamp") if isinstance(extra, dict) else data.get("timestamp")
    try:
        return float(raw) if raw is not None else math.inf
    except (TypeError, ValueError):
        return math.inf
