"""Device leases between real processes: two holders never share a slot, a waiter gets the freed one, a killed
holder's slot comes free."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ladder.runner import lease
from ladder.runner.lease import DeviceKind, LeaseError
from tests.helpers import REPO, wait_for

ROOT = REPO


# An orchestrator stand-in: lease `n` of `slots` CPU slots `rounds` times; each time record (slot, start, end) from
# inside the lease, then release. With hold=stdin it holds its first lease until its stdin closes.
HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from ladder.runner import lease
    lease_dir, slots, n, rounds, hold, out = sys.argv[1:]
    out = Path(out)
    for _ in range(int(rounds)):
        with lease.acquire(int(n), range(int(slots)), Path(lease_dir), 60, lease.DeviceKind.CPU, "test") as held:
            start = time.monotonic()
            with open(out.with_suffix(".held"), "a") as fh:
                fh.write(json.dumps(list(held.devices)) + "\\n")
            if hold == "stdin":
                sys.stdin.readline()
            else:
                time.sleep(float(hold))  # the work done under the lease
            end = time.monotonic()
            with open(out, "a") as fh:
                fh.write(json.dumps({"devices": list(held.devices), "start": start, "end": end}) + "\\n")
    """
)


def holder(tmp_path: Path, name: str, slots: int, n: int = 1, rounds: int = 1, hold: str = "stdin") -> subprocess.Popen:
    argv = [
        sys.executable,
        "-c",
        HOLDER,
        str(tmp_path / "leases"),
        str(slots),
        str(n),
        str(rounds),
        hold,
        str(tmp_path / f"{name}.jsonl"),
    ]
    return subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, text=True)


def held(tmp_path: Path, name: str) -> list[list[int]]:
    path = tmp_path / f"{name}.held"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def intervals(tmp_path: Path, names: list[str]) -> list[dict]:
    return [json.loads(line) for name in names for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]


def overlaps(records: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of records that held one device at intersecting times."""
    bad = []
    for i, a in enumerate(records):
        for b in records[i + 1 :]:
            shared = set(a["devices"]) & set(b["devices"])
            if shared and a["start"] < b["end"] and b["start"] < a["end"]:
                bad.append((a, b))
    return bad


def release(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_two_holders_take_disjoint_slots_and_a_third_waits_for_a_freed_one(tmp_path: Path) -> None:
    procs = {name: holder(tmp_path, name, slots=2) for name in ("a", "b", "c")}
    try:
        wait_for(lambda: sum(bool(held(tmp_path, n)) for n in procs) == 2)
        first = [n for n in procs if held(tmp_path, n)]
        (waiter,) = set(procs) - set(first)
        assert sorted(held(tmp_path, n)[0][0] for n in first) == [0, 1]
        assert held(tmp_path, waiter) == []  # both slots are held: it can only wait
        release(procs[first[0]])
        wait_for(lambda: bool(held(tmp_path, waiter)))
        assert held(tmp_path, waiter) == held(tmp_path, first[0])  # it got the slot that came free
        for name in (first[1], waiter):
            release(procs[name])
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    records = intervals(tmp_path, list(procs))
    assert len(records) == 3
    assert overlaps(records) == []


def test_many_rounds_of_contention_never_share_a_slot(tmp_path: Path) -> None:
    names = ["p0", "p1", "p2"]
    procs = [holder(tmp_path, name, slots=2, rounds=12, hold="0.01") for name in names]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    records = intervals(tmp_path, names)
    assert len(records) == 36
    assert {d for r in records for d in r["devices"]} == {0, 1}
    assert overlaps(records) == []


def test_two_device_leases_are_all_or_nothing(tmp_path: Path) -> None:
    names = ["pair0", "pair1", "one"]
    procs = [
        holder(tmp_path, "pair0", slots=3, n=2, rounds=8, hold="0.01"),
        holder(tmp_path, "pair1", slots=3, n=2, rounds=8, hold="0.01"),
        holder(tmp_path, "one", slots=3, n=1, rounds=8, hold="0.01"),
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    records = intervals(tmp_path, names)
    assert [len(r["devices"]) for r in records].count(2) == 16
    assert overlaps(records) == []


def test_a_sigkilled_holder_frees_its_slot(tmp_path: Path) -> None:
    victim = holder(tmp_path, "victim", slots=1)
    waiter = None
    try:
        wait_for(lambda: held(tmp_path, "victim") == [[0]])
        waiter = holder(tmp_path, "waiter", slots=1)
        holder_file = lease.holder_path(tmp_path / "leases", DeviceKind.CPU, 0)
        assert f"pid={victim.pid} " in holder_file.read_text()
        assert lease.try_take(1, [0], tmp_path / "leases", DeviceKind.CPU) is None  # the victim holds it
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=10) == -signal.SIGKILL
        wait_for(lambda: held(tmp_path, "waiter") == [[0]])
        assert f"pid={waiter.pid} " in holder_file.read_text()
        release(waiter)
    finally:
        for proc in (victim, waiter):
            if proc is not None:
                proc.kill()
                proc.wait()


def test_a_waiter_says_who_holds_its_device_and_that_a_stopped_holder_is_stopped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A sweep suspended with Ctrl-Z keeps its lease: another sweep waiting for that device says, once, who holds it
    and that the holder is stopped, with how to resume it, instead of waiting silently."""
    proc = holder(tmp_path, "victim", 1)
    try:
        wait_for(lambda: held(tmp_path, "victim") == [[0]], 30)
        for stopped in (False, True):
            if stopped:
                proc.send_signal(signal.SIGSTOP)
            caplog.clear()
            with caplog.at_level("WARNING", logger="ladder.runner.lease"), pytest.raises(LeaseError):  # noqa: SIM117
                with lease.acquire(1, [0], tmp_path / "leases", 1.0, DeviceKind.CPU, notice_s=0.2):
                    pass
            waits = [r.getMessage() for r in caplog.records if r.message.startswith("waiting for")]
            assert len(waits) == 1, waits  # said once
            assert f"cpu0 held by pid={proc.pid} " in waits[0] and " test" in waits[0]
            assert ("stopped" in waits[0] and f"kill -CONT {proc.pid}" in waits[0]) is stopped, waits[0]
    finally:
        proc.send_signal(signal.SIGCONT)
        release(proc)
