"""How a sweep is told to stop, and what it exits with: Ctrl-C (SIGINT), a closed terminal (SIGHUP), a kill or a
scheduler's preemption (SIGTERM, as SLURM sends before its SIGKILL), and a requeueing launcher's own preemption
signal (submitit's: SIGUSR2 unless `SUBMITIT_PREEMPT_SIGNAL` names another).

Each raises KeyboardInterrupt in the main thread, so that the running trial is stopped, reaped and recorded
`interrupted` on the way out (`ladder.runner.trial`), and the sweep ends with the command that resumes it. The first
signal decides the exit code: 130 for Ctrl-C and a closed terminal, 143 (128 + SIGTERM, the shell's convention) for
SIGTERM, so that a requeueing wrapper can tell a preemption from a user's Ctrl-C. A later signal while the sweep
stops (a second Ctrl-C, a scheduler that signals every process of the job) is noted, not raised again: the stop
under way is already the orderly one. A launcher's handler for its preemption signal (submitit's
checkpoint-and-requeue) is kept and handed the signal once the sweep has stopped (`hand_over`): the requeued job runs
the same command, which resumes.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from ladder.core.errors import ExitCode

Handler = Callable[[int, FrameType | None], object]


@dataclass
class Received:
    """The stop signals this process got, first first, and the launchers' handlers it took over."""

    signals: list[int] = field(default_factory=list)
    launcher: dict[int, Handler] = field(default_factory=dict)


RECEIVED = Received()


def preemption_signals() -> tuple[signal.Signals, ...]:
    """The signals a requeueing launcher may preempt with: submitit's (`SUBMITIT_PREEMPT_SIGNAL`, else USR2)."""
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2").upper().removeprefix("SIG")
    sig = getattr(signal, f"SIG{name}", None)
    return (sig,) if isinstance(sig, signal.Signals) and sig not in (signal.SIGINT, signal.SIGTERM) else ()


def install() -> None:
    """Take SIGINT, SIGTERM and SIGHUP (call once, in the main thread, before the sweep), and a launcher's
    preemption signal where the launcher set a handler for it (keeping that handler for `hand_over`). Only the
    first raises KeyboardInterrupt: a second Ctrl-C while the sweep stops (an impatient user) is noted, not raised
    into the stop under way, which would leave the trial unrecorded in trials.tsv and print a traceback."""
    RECEIVED.signals.clear()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    for sig in preemption_signals():
        previous = signal.getsignal(sig)
        if callable(previous) and previous is not _stop:
            RECEIVED.launcher[sig] = previous
            signal.signal(sig, _stop)


def stopped() -> None:
    """The stop is done (the trial recorded, the resume command printed): a Ctrl-C from here on changes nothing and
    is ignored, also while the interpreter ends (where Python puts the default action back, and a late press killed
    the process by SIGINT instead of its exit code 130)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(signum: int, frame: FrameType | None) -> None:
    RECEIVED.signals.append(signum)
    if len(RECEIVED.signals) == 1:
        raise KeyboardInterrupt


def first() -> int:
    """The signal that stopped the sweep (SIGINT where none of ladder's own was caught: Ctrl-C)."""
    return RECEIVED.signals[0] if RECEIVED.signals else signal.SIGINT


def exit_code() -> ExitCode:
    return ExitCode.TERMINATED if first() == signal.SIGTERM else ExitCode.INTERRUPTED


def described() -> str:
    """What stopped the sweep, in words for its last line."""
    sig = first()
    if sig in RECEIVED.launcher:
        return f"preempted ({signal.Signals(sig).name} from the launcher, which requeues the job)"
    return {
        signal.SIGTERM: "stopped (SIGTERM: a scheduler's preemption or a kill)",
        signal.SIGHUP: "stopped (the terminal closed)",
    }.get(signal.Signals(sig), "interrupted")


def hand_over() -> None:
    """Give the launcher's handler the preemption signal that stopped the sweep (submitit: checkpoint, requeue and
    exit the job); return at once where the sweep was stopped otherwise, or the handler returns."""
    sig = first()
    if (handler := RECEIVED.launcher.get(sig)) is not None:
        handler(sig, None)
