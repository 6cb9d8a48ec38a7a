"""Ctrl-Z suspends the running trial with the sweep, and `fg`/`bg` resumes it with the sweep.

A trial runs in a session of its own (`ladder.runner.launch`), out of the terminal's reach: SIGTSTP (Ctrl-Z) stops
the sweep alone, and its trial would go on unwatched, holding its memory and its devices. `install` makes the sweep
stop every process of its running trials first (SIGSTOP, each process found as `ladder.runner.procs.members` finds
it, torchrun's workers in their own sessions included) and its warm starters (`ladder.runner.warm`), then stop
itself; on SIGCONT (`fg`, `bg`, `kill -CONT`) it continues them. Each pause is counted (`PAUSES`), so a trial's
watch can leave the pause out of its limits and restart its window (`ladder.runner.trial`): a window that spans a
pause measures the pause, not the trainer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from types import FrameType

import psutil

from ladder.runner import procs, warm
from ladder.runner.cgroup import MemCgroup


@dataclass
class Pauses:
    """The pauses of this process so far: how many, their total length, when the last one ended (unix time)."""

    count: int = 0
    total_s: float = 0.0
    last_end_t: float = 0.0
    started_mono: float | None = None  # the pause under way (its start)


PAUSES = Pauses()
_running: dict[str, list[MemCgroup]] = {}  # trial id -> its cgroups: the trials to stop with the sweep


def track(trial_id: str, cgroup: MemCgroup | None) -> None:
    _running[trial_id] = [cgroup] if cgroup is not None else []


def untrack(trial_id: str) -> None:
    _running.pop(trial_id, None)


def install() -> None:
    """Stop and continue the running trials with this process (call once, in the main thread)."""
    signal.signal(signal.SIGTSTP, _on_stop)
    signal.signal(signal.SIGCONT, _on_continue)


def _signal_trials(sig: signal.Signals) -> int:
    """`sig` to every process of the running trials (their count), then to the warm starters and their keepers."""
    sent = 0
    for trial_id, groups in list(_running.items()):
        for proc in procs.members(trial_id, groups, but={os.getpid()}):
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
                sent += 1
    for starter in warm.STARTERS.owned():  # idle between trials, but the sweep's: a stopped sweep holds them too
        assert starter.proc is not None
        with contextlib.suppress(psutil.Error):
            top = psutil.Process(starter.proc.pid)
            for proc in (top, *top.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
    return sent


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (text + "\n").encode())


def _on_stop(signum: int, frame: FrameType | None) -> None:
    stopped = _signal_trials(signal.SIGSTOP)
    if stopped:
        _say(
            f"suspended with the {stopped} process(es) of the running trial; `fg` resumes both (the pause counts "
            "toward none of its limits, and its window is measured after it)"
        )
    PAUSES.started_mono = time.monotonic()
    # SIGSTOP, not SIGTSTP again with its default action: the kernel drops a default SIGTSTP in an orphaned process
    # group (a sweep started by a launcher or under nohup), and the sweep would run on with its trial stopped.
    os.kill(os.getpid(), signal.SIGSTOP)  # stops here; SIGCONT goes on from this line


def _on_continue(signum: int, frame: FrameType | None) -> None:
    _signal_trials(signal.SIGCONT)
    if PAUSES.started_mono is None:  # a SIGCONT without a pause of ours (the sweep was not stopped by SIGTSTP)
        return
    PAUSES.total_s += time.monotonic() - PAUSES.started_mono
    PAUSES.count, PAUSES.last_end_t, PAUSES.started_mono = PAUSES.count + 1, time.time(), None
