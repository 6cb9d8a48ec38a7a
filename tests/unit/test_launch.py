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


def test_no_orphans_left_by_this_module() -> None:
    mine = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    assert mine == []
