"""How a sweep is told to stop (`ladder.runner.signals`): real signals to this process, ladder's handlers installed and
the previous ones put back after each test."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from ladder.core.errors import ExitCode
from ladder.runner import signals

TAKEN = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


@pytest.fixture(autouse=True)
def handlers_restored() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in TAKEN}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    signals.RECEIVED.signals.clear()
    signals.RECEIVED.launcher.clear()


def stopped_by(sig: signal.Signals) -> None:
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), sig)


def test_sigterm_stops_with_143_and_a_closed_terminal_or_ctrl_c_with_130() -> None:
    signals.install()
    stopped_by(signal.SIGTERM)
    assert signals.exit_code() is ExitCode.TERMINATED and int(signals.exit_code()) == 128 + signal.SIGTERM
    assert "SIGTERM" in signals.described()
    signals.install()
    stopped_by(signal.SIGHUP)
    assert signals.exit_code() is ExitCode.INTERRUPTED and "terminal" in signals.described()
    signals.install()
    stopped_by(signal.SIGINT)  # Ctrl-C
    assert signals.exit_code() is ExitCode.INTERRUPTED and signals.described() == "interrupted"


def test_a_second_ctrl_c_while_the_sweep_stops_is_noted_not_raised() -> None:
    """An impatient user presses Ctrl-C again while the trial is reaped and recorded: raised, it cut that short
    (the trial missing from trials.tsv) and printed a traceback from the cleanup."""
    signals.install()
    stopped_by(signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)
    assert signals.RECEIVED.signals == [signal.SIGINT] * 3 and signals.exit_code() is ExitCode.INTERRUPTED


def test_a_second_signal_while_the_sweep_stops_is_noted_not_raised() -> None:
    signals.install()
    stopped_by(signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)  # the scheduler signals every process of the job: no second unwinding
    os.kill(os.getpid(), signal.SIGHUP)
    assert signals.RECEIVED.signals == [signal.SIGTERM, signal.SIGTERM, signal.SIGHUP]
    assert signals.exit_code() is ExitCode.TERMINATED  # the first decides


def test_a_launchers_preemption_handler_is_handed_the_signal_once_the_sweep_has_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed: list[int] = []
    signal.signal(signal.SIGUSR2, lambda signum, frame: handed.append(signum))  # as submitit's, set before the job
    signals.install()
    stopped_by(signal.SIGUSR2)
    assert handed == []  # the trial is stopped and recorded first
    assert "preempted (SIGUSR2 from the launcher" in signals.described()
    signals.hand_over()
    assert handed == [signal.SIGUSR2]
    monkeypatch.setenv("SUBMITIT_PREEMPT_SIGNAL", "USR1")
    assert signals.preemption_signals() == (signal.SIGUSR1,)


def test_without_a_launcher_handler_the_preemption_signal_is_left_alone_and_nothing_is_handed_over() -> None:
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    signals.install()
    assert signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL
    stopped_by(signal.SIGTERM)
    signals.hand_over()  # returns: the sweep exits with its own code


@pytest.mark.parametrize("name", ["TERM", "INT", "NOSUCH"])
def test_a_preemption_signal_that_is_already_a_stop_or_unknown_is_not_taken_twice(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("SUBMITIT_PREEMPT_SIGNAL", name)
    assert signals.preemption_signals() == ()
