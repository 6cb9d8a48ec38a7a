"""The host's sampler: CPU% and memory of each rank's process tree, a `Sample` per rank (its LOCAL_RANK). What a
machine without NVIDIA's driver measures, and what rides along with NVML where there is one.

A process's memory is its PSS (proportional set size: a page shared by k processes counts 1/k in each), so a tree
whose workers share pages (forked from a parent that filled a buffer, Ray's workers, one set of libraries) counts
them once, as a memory cgroup charges them; RSS would count them once per process."""

from __future__ import annotations

import contextlib
import os
import re
import time

import psutil

from ladder.core.records import Sample, Source
from ladder.runner.monitor import MIB, SLOW_S
from ladder.runner.procs import environ, launches, process_tree
from ladder.runner.warm import STARTERS, Starters

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


DEAD = (b"Z", b"X")  # /proc/<pid>/stat's state of a process that exited (a zombie) or is being removed
PSS_LINE = re.compile(rb"^Pss:\s+(\d+) kB", re.MULTILINE)  # /proc/<pid>/smaps_rollup's total, in kB
PSS_EVERY_S = 1.0  # a process's PSS is read at most once a second ...
PSS_CPU_FRAC = 0.001  # ... and no more often than keeps its reads under this share of a core (they walk its pages)


class _ProcStat:
    """CPU% and memory of one process: CPU time and RSS from one `pread` of /proc/<pid>/stat on a descriptor kept
    open (a few µs; psutil takes ~90 µs for both), and its PSS from /proc/<pid>/smaps_rollup, whose read walks the
    process's pages (its cost grows with its memory): at most once a second and within `PSS_CPU_FRAC` of a core.
    Between two such reads its memory is its RSS less the shared excess (RSS - PSS) the last one found, so that
    new private memory shows at once. psutil's RSS where there is no /proc; RSS alone where smaps_rollup cannot be
    read (another user's process, a kernel before 4.14)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._fd: int | None = None
        self._proc: psutil.Process | None = None
        if os.path.exists(f"/proc/{pid}/stat"):
            with contextlib.suppress(OSError):
                self._fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        else:
            with contextlib.suppress(psutil.Error):
                self._proc = psutil.Process(pid)
        self._prev: tuple[float, float] | None = None  # (cpu seconds, monotonic time)
        self._excess_mb = 0.0  # RSS - PSS at the last PSS read: the pages it shares, counted once per process by RSS
        self._next_pss = float("-inf")  # monotonic time of the next PSS read

    def read(self) -> tuple[float, float] | None:
        """(CPU % since the last read, memory MiB: its PSS); None once the process is gone."""
        got = self._raw()
        if got is None:
            return None
        cpu_s, rss_mb = got
        now, prev = time.monotonic(), self._prev
        self._prev = (cpu_s, now)
        pct = 100.0 * (cpu_s - prev[0]) / (now - prev[1]) if prev is not None and now > prev[1] else 0.0
        if now >= self._next_pss:
            self._read_pss(rss_mb, now)
        return max(0.0, pct), max(0.0, rss_mb - self._excess_mb)

    def share_changed(self) -> None:
        """Its PSS is read at the next sample, whenever the last read was."""
        self._next_pss = float("-inf")

    def _read_pss(self, rss_mb: float, now: float) -> None:
        """Opened afresh each time: a descriptor kept open would go on reading the memory of before an exec."""
        if self._fd is None:
            return
        began = time.thread_time()
        try:
            with open(f"/proc/{self._pid}/smaps_rollup", "rb", buffering=0) as fh:
                found = PSS_LINE.search(fh.read(4096))
        except OSError:
            found = None
        if found is not None:
            self._excess_mb = max(0.0, rss_mb - int(found[1]) / 1024)
        self._next_pss = now + max(PSS_EVERY_S, (time.thread_time() - began) / PSS_CPU_FRAC)

    def _raw(self) -> tuple[float, float] | None:
        if self._fd is not None:
            try:
                stat = os.pread(self._fd, 4096, 0)
            except OSError:
                return None
            fields = stat[stat.rindex(b")") + 2 :].split()  # after "pid (comm) ": state is field 3
            if fields[0] in DEAD:  # killed, not yet reaped: its RSS reads 0, which is no measurement
                return None
            return (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[21]) * PAGE / MIB
        try:
            assert self._proc is not None
            times = self._proc.cpu_times()
            return times.user + times.system, self._proc.memory_info().rss / MIB
        except (psutil.Error, AssertionError):
            return None

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class HostSampler:
    """CPU% and memory (PSS: `_ProcStat`) of each rank's process tree. A process's rank is the LOCAL_RANK in its
    environment (torchrun sets it; children inherit it), else its parent's; a tree with no LOCAL_RANK at all
    (MimicKit spawns its own ranks) is one series, index 0, root included. The processes that start ranks
    (`launches`: ladder's supervisor and rank launcher, torchrun's agent, a warm client) are never counted: before
    the first rank is up there is no sample, rather than one of a launcher's few MiB."""

    source = Source.HOST

    def __init__(self, root_pid: int, every_s: float = 0.0, starters: Starters = STARTERS) -> None:
        self._root_pid = root_pid
        self._starters = starters  # whose links name the ranks forked warm, and their LOCAL_RANK
        self._every_s = every_s  # at most one reading per this many seconds (when it rides along with NVML)
        self._last = float("-inf")
        self._next_scan = float("-inf")
        self._rank_of: dict[int, int] = {}
        self._stats: dict[int, _ProcStat] = {}
        self._env_rank: dict[int, int | None] = {}
        self._not_launcher: set[int] = set()

    def sample(self, now: float) -> list[Sample]:
        if now - self._last < self._every_s:
            return []
        self._last = now
        if now >= self._next_scan:
            self._rescan()
            self._next_scan = now + SLOW_S  # the tree walk once a second, not every tick (measured)
        totals: dict[int, list[float]] = {}
        for pid, rank in self._rank_of.items():
            got = self._stats[pid].read()
            if got is not None:
                acc = totals.setdefault(rank, [0.0, 0.0])
                acc[0], acc[1] = acc[0] + got[0], acc[1] + got[1]
        return [Sample(now, rank, cpu, rss, Source.HOST) for rank, (cpu, rss) in sorted(totals.items())]

    def _rescan(self) -> None:
        """The tree again; where a process came or went (a fork shares its parent's pages, an exit gives its share
        back), every process's PSS is read afresh at once: what each one shares changed without its RSS changing."""
        tree = process_tree(self._root_pid, self._starters.linked)
        ranks = {pid: rank for pid, rank in self._ranks(tree).items() if not self._launches(pid)}
        for pid in set(self._stats) - set(ranks):
            self._stats.pop(pid).close()
        for pid in set(ranks) - set(self._stats):
            self._stats[pid] = _ProcStat(pid)
        if set(ranks) != set(self._rank_of):
            for stat in self._stats.values():
                stat.share_changed()
        self._rank_of = ranks

    def _ranks(self, tree: list[tuple[int, int]]) -> dict[int, int]:
        ranks: dict[int, int] = {}
        for pid, parent in tree:
            own = self._env_rank[pid] if pid in self._env_rank else self._read_rank(pid, parent)
            rank = own if own is not None else ranks.get(parent)
            if rank is not None:
                ranks[pid] = rank
        return ranks or {pid: 0 for pid in (self._root_pid, *(pid for pid, _ in tree)) if not self._launches(pid)}

    def _launches(self, pid: int) -> bool:
        """One of the processes that start a trial's ranks, not a rank (`launches`): not sampled, so that a rank's
        figures are its own. A process that is none never becomes one (it is remembered); a warm client may become
        its rank cold (exec), so it is looked at again."""
        if pid in self._not_launcher:
            return False
        if launches(pid):
            return True
        self._not_launcher.add(pid)
        return False

    def _read_rank(self, pid: int, parent: int) -> int | None:
        """Its LOCAL_RANK: from its environment, or, for a rank forked by the warm starter (whose environment in
        /proc is the starter's), from its client's link (`Starters.link`)."""
        value = environ(pid).get("LOCAL_RANK")
        rank = int(value) if value is not None and value.isdigit() else None
        if rank is None and (got := self._starters.link(parent)) is not None and got[0] == pid:
            rank = got[1]
        self._env_rank[pid] = rank
        return rank

    def close(self) -> None:
        for stat in self._stats.values():
            stat.close()
        self._stats.clear()
