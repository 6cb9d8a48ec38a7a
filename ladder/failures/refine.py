"""A verdict refined by what only the watch of a running trial knows: a trainer whose lines never matched, a
survivor without a window, a stall's last progress line, the cgroup's OOM kills, a fit too near its cap or with
its memory still rising, training gone NaN in a progress file of its own. Pure: the runner passes what it saw."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ladder.core import paths
from ladder.core.measure.peak import is_cycle_unseen, near_cap
from ladder.core.records import Confidence, Ending, Reason, Status, StopCause, Verdict
from ladder.failures import diverged, patterns, rules

SHOWN_LINES = 3  # lines of the trainer's own output a "no progress matched" verdict shows
MIB = 1024 * 1024
# ladder's own SIGTERM, echoed back by torchrun or the trainer: never the trainer's evidence
OWN_SIGNAL = re.compile(r"SignalException|got signal: 15\b|Received Signals\.SIGTERM|signal SIGTERM|Terminated$")


class Budget(Protocol):
    """The measure settings a verdict names (`MeasureConf` is one)."""

    @property
    def trial_timeout_s(self) -> float: ...
    @property
    def budget_s(self) -> float: ...
    @property
    def min_window_iters(self) -> int: ...
    @property
    def window_s(self) -> float: ...
    @property
    def cap_headroom_frac(self) -> float: ...


@dataclass(frozen=True)
class Seen:
    """What the watch saw of a trial that its folder does not show."""

    stopped_by: StopCause = StopCause.NONE  # why ladder stopped it (NONE: it ended by itself)
    points: int = 0  # progress points read
    window_points: int = 0  # ... of them in its window (0: no window opened)
    tail: str = ""  # the progress file's tail when ladder decided to stop it (before its own SIGTERM is echoed)
    pattern: re.Pattern[str] | None = None  # the progress regex, where the reader has one
    reader: str = ""  # the progress reader, in words ("the regex '...' in stdout.log")
    printed: str = ""  # the tail of the trainer's stdout
    progress_text: str = ""  # the progress file's tail, where it is not one of the logs the rules read already
    pace_s: float | None = None  # its seconds per progress point
    due_s: float | None = None  # when its window could close, seconds from launch at its pace
    unsettled: str = ""  # why its closed window could not stand for a fit (memory still rising)
    oom_kills: int = 0  # the memory cgroup's OOM kills
    peak_bytes: int = 0  # ... and its peak
    cgroup: str = "?"  # ... and its name
    card_mb: float | None = None  # the GPU memory its peak must stay clear of (None: no card)
    ran_s: float | None = None  # how long it ran, seconds from launch (a pause with the sweep left out)
    window_end_s: float | None = None  # when its window was to close, seconds from launch (None: none opened)


def verdict(ending: Ending, seen: Seen, figures: Mapping[str, float], budget: Budget) -> Verdict:
    """The trial's verdict: its folder's (`rules.classify`), refined by what the watch saw, in this order."""
    found = settled(with_last_progress(rules.classify(ending), seen), seen, budget)
    found = confident_fit(with_cgroup_oom(found, seen), figures, seen, budget)
    return unread_before(learned(found, ending, seen), seen)


def read_with_logs(progress_file: Path) -> bool:
    """A progress file the rules read with the trial's logs already (its stdout, a .log)."""
    return progress_file.name == paths.STDOUT or progress_file.suffix == ".log"


def learned(found: Verdict, ending: Ending, seen: Seen) -> Verdict:
    """A fit whose trainer printed its training gone NaN or infinite (`ladder.failures.diverged`) is `diverged`:
    its memory fits, but it is no setting to train with. This finds one in a progress file of its own too."""
    if found.status is not Status.OK:
        return found
    texts = [ending.log_text, *ending.rank_logs.values(), seen.progress_text]
    return diverged.verdict(texts) or found


def unread_before(found: Verdict, seen: Seen) -> Verdict:
    """A trial that went NaN before ladder read any progress line of it is `diverged`, but its progress setting may
    be wrong as well: its evidence says so, so that the fix of one does not hide the other."""
    if found.status is not Status.DIVERGED or seen.points:
        return found
    return replace(
        found,
        evidence=f"{found.evidence} (and no progress line was read before it: if the trainer printed any, "
        "workload.progress / workload.progress_regex does not match it)",
    )


def confident_fit(found: Verdict, figures: Mapping[str, float], seen: Seen, budget: Budget) -> Verdict:
    """A survivor is a fit only if its window outlived its memory peak and the peak stayed clear of its cap; else it
    is weak `oom_or_nccl` evidence (`near_cap`, `memory_rising`): the walk runs the rung once more, and a second such
    outcome steps down. Its figures stay, but no pick is made from them. A survivor whose reader never saw its cycle
    ran its whole budget first: an `ok` of low confidence that says so (`cycle_unseen`), never a step-down, since a
    trainer whose updates are too short to show (a bar over every step) is no failure."""
    if found.status is not Status.OK:
        return found
    if is_cycle_unseen(seen.unsettled):
        found = Verdict(
            Status.OK,
            Reason.CYCLE_UNSEEN,
            f"ran its whole budget (measure.budget_s={budget.budget_s:g} s) without failing, but {seen.unsettled}",
            Confidence.LOW,
            "a fit by time alone: a progress regex with an iter group that moves once an update (or a preset that "
            "prints once an iteration) would show the update, and end the window sooner",
        )
        seen = replace(seen, unsettled="")
    if seen.unsettled:
        return Verdict(
            Status.OOM_OR_NCCL,
            Reason.MEMORY_RISING,
            f"{_stood(seen, budget)}, but {seen.unsettled}",
            Confidence.LOW,
            "no whole cycle was measured: its memory may still reach its cap",
        )
    if near := near_cap(figures, seen.card_mb, budget.cap_headroom_frac):
        return Verdict(
            Status.OOM_OR_NCCL,
            Reason.NEAR_CAP,
            f"survived at {near}",
            Confidence.LOW,
            "a fit this near its cap is not a confident one (measure.cap_headroom_frac)",
        )
    return found


def _stood(seen: Seen, budget: Budget) -> str:
    """How far a survivor got: its window closed early (cut, as a probe that cannot matter), or its budget ran out."""
    if seen.ran_s is not None and seen.ran_s < budget.trial_timeout_s:
        return f"its window closed after {seen.ran_s:.0f} s"
    return f"survived its budget (measure.trial_timeout_s={budget.trial_timeout_s:g} s)"


def with_cgroup_oom(found: Verdict, seen: Seen) -> Verdict:
    """The kernel killed a process of the trial for the cgroup's cap: that is the cause, whatever the parent did
    after (an EOFError from its dead worker, an exit code 1, a hang). Only a stop by the user keeps its verdict."""
    if seen.oom_kills <= 0 or seen.stopped_by is StopCause.INTERRUPTED:
        return found
    said = f"memory cgroup {seen.cgroup} counted {seen.oom_kills} OOM kill(s) (peak {seen.peak_bytes / MIB:.0f} MiB)"
    also = "" if found.evidence.startswith("memory cgroup") or not found.evidence else f"; {found.evidence}"
    return Verdict(patterns.status_of(Reason.HOST_OOM), Reason.HOST_OOM, said + also)


def with_last_progress(found: Verdict, seen: Seen) -> Verdict:
    """A stalled trial's evidence: the last progress line it wrote before it went silent (the last one its regex
    matches, for a regex over a log; never ladder's own SIGTERM echoed back: the tail is the one read when ladder
    decided to stop it)."""
    if found.reason is not Reason.STALLED:
        return found
    pattern = seen.pattern
    lines = [line for line in own_lines(seen.tail) if pattern is None or pattern.search(line)]
    return replace(found, evidence=f"{found.evidence}; last progress: {lines[-1] if lines else '(none)'}")


def settled(found: Verdict, seen: Seen, budget: Budget) -> Verdict:
    """What only the watch knows: a trainer that printed but never a line the reader matched is a setting to fix
    (error, never a step-down); one that survived without enough window points is `unmeasured`, not `ok`."""
    survived = found.status is Status.OK or found.reason in (Reason.STALLED, Reason.TRIAL_TIMEOUT)
    if not seen.points and survived:
        printed = own_lines(seen.printed)
        if printed or found.status is Status.OK:
            shown = " | ".join(line[:200] for line in printed[-SHOWN_LINES:]) or "(nothing)"
            return Verdict(
                Status.ERROR,
                Reason.NO_PROGRESS_MATCH,
                f"no line matched {seen.reader}: fix the progress setting (workload.progress_regex or "
                f"a preset, workload.progress_file); its last lines: {shown}",
            )
        return found
    done = seen.stopped_by is StopCause.WINDOW_DONE
    if found.status is Status.OK and seen.stopped_by is StopCause.NONE and seen.ran_s is not None:
        return Verdict(Status.UNMEASURED, Reason.FEW_POINTS, exited_early(seen, budget, seen.ran_s))
    if found.status is Status.OK and not done or found.reason is Reason.TRIAL_TIMEOUT and seen.points:
        return Verdict(
            Status.UNMEASURED,
            Reason.FEW_POINTS,
            f"survived, but its window held {seen.window_points} progress point(s) of the {budget.min_window_iters} "
            f"needed: no figures; {budget_advice(seen, budget)}",
        )
    return found


def exited_early(seen: Seen, budget: Budget, ran_s: float) -> str:
    """A trainer that ended by itself, healthy, before its window stood: how long it ran and what its window still
    needed (to open, to close at `window_s`, or to stand: `unsettled`); no budget of ladder's changes that, a
    longer run of the trainer does."""
    ran = f"it exited by itself after {ran_s:.1f} s ({seen.points} progress point(s))"
    longer = "no figures; run the trainer longer (its own setting: more steps or iterations)"
    if seen.window_end_s is None:
        return f"{ran}, before its window opened (on steady steps after measure.warmup_iters): {longer}"
    if seen.unsettled:
        return f"{ran}, before its window could stand: {seen.unsettled}; {longer}"
    held = f"{seen.window_points} progress point(s) of the {budget.min_window_iters} needed"
    if ran_s >= seen.window_end_s:  # its time was up: the points were what it lacked
        return f"{ran}, its window holding {held} (measure.min_window_iters): {longer}"
    return (
        f"{ran}, before its window closed {seen.window_end_s:.1f} s after launch (measure.window_s="
        f"{budget.window_s:g}; it held {held}): {longer}"
    )


def budget_advice(seen: Seen, budget: Budget) -> str:
    """What would measure a trainer that ran out of time: at its pace, the budget its window needs."""
    if seen.due_s is None or seen.pace_s is None:
        return (
            f"try a longer measure.budget_s (now {budget.budget_s:g} s; measure.trial_timeout_s "
            f"{budget.trial_timeout_s:g} s) or a trainer setting that prints progress more often"
        )
    need = max(budget.trial_timeout_s, math.ceil(seen.due_s * 1.1 / 60) * 60)  # a tenth more, in whole minutes
    return (
        f"at its pace ({seen.pace_s:.3g} s per progress point) its window would close about {seen.due_s:.0f} s after "
        f"launch: measure.budget_s={need:g} would measure it (now {budget.budget_s:g} s), or a trainer setting "
        f"that prints progress more often"
    )


def own_lines(text: str) -> list[str]:
    """The non-blank lines of a log tail, less ladder's own stop echoed back."""
    return [s for line in text.splitlines() if (s := line.strip()) and not OWN_SIGNAL.search(s)]
