"""Launch and stop real process trees: nothing survives, the cgroup sees the OOM kill."""

from __future__ import annotations

import psutil
import pytest

from ladder.runner import launch


@pytest.fixture(scope="module", autouse=True)
def subreaper() -> None:
    launch.become_subreaper()


def test_free_port_is_bindable() -> None:
    import socket

    port = launch.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_no_trial_process_is_left_behind_in_this_worker() -> None:
    """No process of a trial (one carrying its id) outlives the tests that ran before in this worker; a server a
    fixture keeps for the session (PostgreSQL, re-parented to this subreaper) is none of them."""
    mine = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE and launch.TRIAL_ID_VAR in _environ(p)
    ]
    assert mine == []


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except psutil.Error:
        return {}
