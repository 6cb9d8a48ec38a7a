"""Where a command's CPU goes, by kind of process and by test: run it (by default the README's test command) while
every process on the machine is read from /proc every `--every` seconds. Linux only.

The suite keeps both cores of a 2-core machine busy, so its time is its CPU; `time` and RUSAGE_CHILDREN miss much
of it (processes reaped outside pytest's chain, ranks killed at the end of a window). Here each process keeps the
last CPU (user + system) seen for it, so one that ends between two reads loses at most one period. Its kind comes
from its command line (a rank forked from the warm starter shows the starter's); its test from the
`PYTEST_CURRENT_TEST` it inherited. The machine's own busy time (/proc/stat) is printed beside the sum, so what the
reads missed shows.

    python scripts/suite_cpu.py [--every 0.25] [--top 25] [-- COMMAND ...]

Last line: `busy_cpu_min=<machine> accounted_cpu_min=<sum> wall_min=<command> rc=<its exit code>`.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SUITE = [sys.executable, "-m", "pytest", "-q", "-n", "4", "--dist", "loadfile", "--no-loadscope-reorder"]
HZ = os.sysconf("SC_CLK_TCK")
# (what a command line contains, its kind), first match wins: specific kinds before the pytest temp paths most hold
KINDS = (
    ("ladder.runner.warm serve", "warm starter and the ranks forked from it"),
    ("ladder.runner.warm ", "warm client (a forked rank's stand-in)"),
    ("ladder.search", "ladder.search (orchestrator)"),
    ("from ladder.search import", "ladder.search (orchestrator)"),
    ("ladder.workloads.proxy", "proxy rank, started cold"),
    ("torch.distributed.run", "torchrun"),
    ("torchrun", "torchrun"),
    ("mimickit", "MimicKit"),
    ("ladder.runner.trialexec", "trial supervisor"),
    ("ladder.runner.ranks", "ladder's rank launcher"),
    ("tests/data/trainers/", "a third-party trainer (tests/data/trainers)"),
    ("ladder.merge", "ladder.merge"),
    ("sheeprl", "sheeprl"),
    ("postgres", "PostgreSQL"),
    ("exec(eval(sys.stdin", "pytest-xdist worker (in-process tests)"),
    ("pytest", "pytest"),
)


@dataclass
class Seen:
    cpu_s: float
    cmd: str
    test: str


KERNEL = "kernel threads (no command line: cgroups, memory reclaim)"


def kind(cmd: str) -> str:
    if not cmd.strip():
        return KERNEL
    low = cmd.lower()
    return next((name for part, name in KINDS if part.lower() in low), "other")


def _read(pid: int) -> tuple[tuple[int, int], float, bytes] | None:
    """(pid, start time) as the process's key, its CPU seconds and its command line; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return (pid, int(fields[19])), (int(fields[11]) + int(fields[12])) / HZ, cmd


def _test_of(pid: int) -> str:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return ""
    for entry in environ.split(b"\0"):
        if entry.startswith(b"PYTEST_CURRENT_TEST="):
            return entry.split(b"=", 1)[1].decode(errors="replace").split(" (")[0]
    return ""


def sample(seen: dict[tuple[int, int], Seen], me: int) -> None:
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        got = _read(int(name))
        if got is None:
            continue
        key, cpu_s, raw = got
        cmd = raw.replace(b"\0", b" ").decode(errors="replace")
        old = seen.get(key)
        if old is None:
            seen[key] = Seen(cpu_s, cmd, _test_of(int(name)))
        else:  # a child shows its parent's command line until it has exec'd: keep the latest
            old.cpu_s, old.cmd = cpu_s, cmd or old.cmd


def busy_s() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / HZ  # less idle and iowait


def table(title: str, totals: dict[str, float], top: int) -> None:
    print(f"\n{title}")
    for name, cpu_s in sorted(totals.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {cpu_s:8.1f} s  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.25, help="seconds between two reads of /proc")
    parser.add_argument("--top", type=int, default=25, help="rows of each table")
    parser.add_argument("command", nargs="*", help="the command to run (after --); the README's tests by default")
    args = parser.parse_args()
    before: dict[tuple[int, int], Seen] = {}
    me = os.getpid()
    sample(before, me)  # what ran before the command: only its CPU from now on counts
    seen = {key: Seen(s.cpu_s, s.cmd, s.test) for key, s in before.items()}
    busy0, t0 = busy_s(), time.monotonic()
    proc = subprocess.Popen(args.command or SUITE)
    while proc.poll() is None:
        sample(seen, me)
        time.sleep(args.every)
    wall, busy = time.monotonic() - t0, busy_s() - busy0
    by_kind: dict[str, float] = collections.defaultdict(float)
    by_test: dict[str, float] = collections.defaultdict(float)
    by_file: dict[str, float] = collections.defaultdict(float)
    for key, s in seen.items():
        cpu_s = s.cpu_s - (before[key].cpu_s if key in before else 0.0)
        by_kind[kind(s.cmd)] += cpu_s
        if s.test:
            by_test[s.test] += cpu_s
            by_file[s.test.split("::")[0]] += cpu_s
    table("CPU by kind of process", by_kind, args.top)
    table("CPU by test file (processes a test started, the xdist workers not included)", by_file, args.top)
    table("CPU by test", by_test, args.top)
    accounted = sum(by_kind.values())
    print(
        f"\nbusy_cpu_min={busy / 60:.1f} accounted_cpu_min={accounted / 60:.1f} wall_min={wall / 60:.1f} "
        f"rc={proc.returncode}"
    )


if __name__ == "__main__":
    main()
