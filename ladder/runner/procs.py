"""A trial's processes: the id each of them carries, the name of its memory cgroup, finding them all (its tree, as
the samplers walk it, and whatever carries its id), telling its launchers from its ranks, killing them all.

Every process a trial starts carries `LADDER_TRIAL_ID` and sits in the memory cgroup `ladder-<orchestrator
pid>-<trial id>` where the system allows one. Whoever ends a trial (the launcher's stop, the supervisor left alone,
the post-flight check, a later orchestrator after a dead one) kills it here, one way: SIGKILL to the cgroup and to
every process carrying the id, wait, reap what re-parented to us, remove the emptied cgroup.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ladder.runner.cgroup import ROOT, MemCgroup, parents

if TYPE_CHECKING:
    import psutil

# psutil is imported where it is used (the orchestrator's side): the supervisor and the rank launcher, which start
# with every trial, import this module too, and psutil's import is a fifth of their start (`python -X importtime`)

log = logging.getLogger(__name__)

TRIAL_ID_VAR = "LADDER_TRIAL_ID"
CGROUP_PREFIX = "ladder-"
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
WARM_MODULE = b"ladder.runner.warm"  # a warm client (a rank's stand-in), and with `serve` the starter
# What starts a trial's ranks: ladder's supervisor and rank launcher, torchrun's agent (`launches`)
LAUNCHER_MODULES = (b"ladder.runner.trialexec", b"ladder.runner.ranks", b"torch.distributed.run")


def cgroup_name(trial_id: str, owner_pid: int | None = None) -> str:
    """`ladder-<owner pid>-<trial id>`: the owner's pid tells a stale cgroup (dead owner) from a live one."""
    return f"{CGROUP_PREFIX}{os.getpid() if owner_pid is None else owner_pid}-{trial_id}"


def trial_cgroups(trial_id: str, root: Path = ROOT) -> list[MemCgroup]:
    """The trial's cgroups that exist, whichever orchestrator made them (and the older `ladder-<id>` form)."""
    found = []
    for parent, layout in parents(root):
        found += [MemCgroup(path, layout) for path in parent.glob(f"{CGROUP_PREFIX}*") if _of(path.name, trial_id)]
    return found


def _of(name: str, trial_id: str) -> bool:
    owner, sep, rest = name[len(CGROUP_PREFIX) :].partition("-")
    return (bool(sep) and owner.isdigit() and rest == trial_id) or name == CGROUP_PREFIX + trial_id


def carrying(trial_id: str) -> list[psutil.Process]:
    """Processes whose environment carries the trial's id (any of ours; the machine's others cannot be read)."""
    import psutil

    return [proc for proc in psutil.process_iter() if _carries(proc, trial_id)] if trial_id else []


def _carries(proc: psutil.Process, trial_id: str) -> bool:
    """Does this process's environment carry the trial's id? A process gone or not ours to read says no."""
    import psutil

    try:
        return bool(proc.environ().get(TRIAL_ID_VAR) == trial_id)
    except psutil.Error:
        return False


def environ(pid: int) -> dict[str, str]:
    """A process's environment as it started ({} once it is gone, or where it is not ours to read)."""
    import psutil

    try:
        return dict(psutil.Process(pid).environ())
    except psutil.Error:
        return {}


def members(trial_id: str, cgroups: Iterable[MemCgroup] = (), but: Collection[int] = ()) -> list[psutil.Process]:
    """Every live process of the trial: those in its cgroups and those carrying its id, less the pids in `but`."""
    import psutil

    procs = {p.pid: p for p in carrying(trial_id) if p.pid not in but}
    for pid in (pid for group in cgroups for pid in group.pids()):
        if pid not in procs and pid not in but:
            with contextlib.suppress(psutil.Error):
                procs[pid] = psutil.Process(pid)
    return list(procs.values())


def kill(procs: Iterable[psutil.Process]) -> None:
    import psutil

    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def kill_trial(
    trial_id: str, cgroups: Sequence[MemCgroup] | None = None, timeout_s: float = 5.0, remove: bool = True
) -> list[int]:
    """SIGKILL every process of the trial, reap them, wait until its cgroups (found by name when None is given) are
    empty and remove them (unless told to keep them, to read their figures first); returns the pids that were
    alive. Processes still alive after `timeout_s` are logged."""
    import psutil

    groups = trial_cgroups(trial_id) if cgroups is None else list(cgroups)
    procs = members(trial_id, groups)
    for group in groups:
        group.kill_all()
    kill(procs)
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)  # reaps those that re-parented to us
    for proc in alive:
        log.warning("process %d of trial %s survived SIGKILL for %g s", proc.pid, trial_id, timeout_s)
    reap_orphans()
    for group in groups:
        _wait_empty(group, timeout_s)
    if remove:
        remove_cgroups(groups)
    return [p.pid for p in procs]


def end_abandoned(number: int, trial_id: str, reachable: bool, host: str) -> int:
    """What is left of a trial whose orchestrator died (stored trial `number`), killed where it can be reached from
    here; returns how many processes were alive."""
    if not reachable:
        log.warning(
            "trial %d ran on %s: its processes, if any are left there, cannot be reached from here",
            number,
            host or "an unknown host",
        )
        return 0
    if not trial_id:
        log.warning("trial %d has no trial_id recorded: its leftover processes cannot be found", number)
        return 0
    if killed := kill_trial(trial_id, timeout_s=10.0):
        log.info("killed %d process(es) left alive by trial %d (%s)", len(killed), number, trial_id)
    return len(killed)


def remove_cgroups(groups: Iterable[MemCgroup]) -> None:
    for group in groups:
        group.remove()


def remove_stale(root: Path = ROOT) -> int:
    """Remove empty trial cgroups left by an orchestrator that was killed; returns how many."""
    removed = 0
    for parent, _ in parents(root):
        for path in parent.glob(f"{CGROUP_PREFIX}*"):
            if _owner_alive(path.name[len(CGROUP_PREFIX) :]):
                continue  # another orchestrator's trial, maybe created a moment ago and not yet joined
            try:
                path.rmdir()  # the kernel refuses while any process is inside
                removed += 1
            except OSError:
                continue
    return removed


def become_subreaper() -> bool:
    """Orphans of our trials re-parent to us (Linux), so none escapes the stop."""
    try:
        return bool(ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def die_with_parent(parent_pid: int, sig: signal.Signals) -> bool:
    """Ask the kernel to send this process `sig` when its parent dies (Linux); False where the parent, `parent_pid`,
    died before the request took effect. Where the request cannot be made (not Linux), the parent's own stop applies."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return True
    return os.getppid() == parent_pid


def reap_orphans() -> None:
    """Collect exited orphans that re-parented to us (we are their subreaper)."""
    import psutil

    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ChildProcessError):
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def python_module(pid: int) -> tuple[bytes, list[bytes], list[bytes]] | None:
    """(MODULE, ARGS, the whole command line) of a `python -m MODULE ARGS...` process; (b"", [], command line) for
    any other; None once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return None
    at = args.index(b"-m") if b"-m" in args[:-1] else -1
    return (args[at + 1], args[at + 2 :], args) if at >= 0 else (b"", [], args)


def exit_as(code: int) -> int:
    """Leave the way the program did: a signal as that signal (so the launcher reads -N), a code as that code."""
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP take no handler, and need none
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code
    return code


def _owner_alive(rest: str) -> bool:
    """`<pid>-<trial id>`: the orchestrator that made it is still running (older names carry no pid)."""
    import psutil

    pid, sep, _ = rest.partition("-")
    return bool(sep) and pid.isdigit() and psutil.pid_exists(int(pid))


def _wait_empty(cgroup: MemCgroup, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while cgroup.pids() and time.monotonic() < deadline:
        reap_orphans()
        time.sleep(0.05)


def no_link(pid: int) -> int | None:
    """No process here stands in for one forked elsewhere (`process_tree` without a warm starter's links)."""
    return None


def process_tree(root_pid: int, linked: Callable[[int], int | None] = no_link) -> list[tuple[int, int]]:
    """(pid, parent pid) of every descendant of root_pid, parents first; [] once the root is gone. A rank forked by
    a warm starter is listed as its client's child (`linked`: the rank a client stands in for,
    `ladder.runner.warm.Starters.linked`).

    Walks `/proc/<pid>/task/<tid>/children`, which reads only the tree; psutil's `children()` reads every process on
    the machine (3-6 ms), kept as the fallback where those files do not exist."""
    if not os.path.exists(f"/proc/{root_pid}/task/{root_pid}/children"):  # no /proc, or no CONFIG_PROC_CHILDREN
        return _psutil_tree(root_pid)
    out, todo = [], [root_pid]
    while todo:
        parent = todo.pop(0)
        kids = _proc_children(parent)
        if (rank := linked(parent)) is not None:  # a rank forked by the warm starter: its client's child here
            kids.append(rank)
        out += [(kid, parent) for kid in kids]
        todo += kids
    return out


def _proc_children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids += [int(k) for k in fh.read().split()]
    return kids


def _psutil_tree(root_pid: int) -> list[tuple[int, int]]:
    import psutil

    try:
        procs = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            out.append((proc.pid, proc.ppid()))
    return out


class TrialPids:
    """Which pids belong to the trial: its process tree (walked on refresh), or any process carrying its id."""

    def __init__(self, root_pid: int, trial_id: str = "", linked: Callable[[int], int | None] = no_link) -> None:
        self._root, self._trial_id, self._linked = root_pid, trial_id, linked
        self._tree: set[int] = {root_pid}
        self._marked: dict[int, bool] = {}

    def refresh(self) -> None:
        self._tree = {self._root, *(pid for pid, _ in process_tree(self._root, self._linked))}

    def __contains__(self, pid: object) -> bool:
        if pid in self._tree:
            return True
        if not self._trial_id or not isinstance(pid, int):
            return False
        if pid not in self._marked:  # workers orphaned to the sweep leave the tree but keep the trial's id
            self._marked[pid] = environ(pid).get(TRIAL_ID_VAR) == self._trial_id
        return self._marked[pid]


def is_warm_client(run: tuple[bytes, list[bytes], list[bytes]] | None) -> bool:
    """A warm client (`python -m ladder.runner.warm MODULE ...`, not `serve`), on a command line already read
    (`python_module`). A rank forked by the starter shows the starter's `serve` command line, and is a rank."""
    return run is not None and run[0] == WARM_MODULE and run[1][:1] != [b"serve"]


def launches(pid: int) -> bool:
    """Is this process one that starts ranks rather than one (ladder's trial supervisor, its rank launcher,
    torchrun's agent, a warm client standing in for a rank forked elsewhere)? Its few MiB are ladder's or
    torchrun's, not the trainer's; a rank that ended before the sampler saw it has no figure rather than its
    launcher's. A process gone says no."""
    run = python_module(pid)
    if run is None:
        return False
    module, _, args = run
    torchrun = any(os.path.basename(a) == b"torchrun" for a in args[:2])
    return module in LAUNCHER_MODULES or torchrun or is_warm_client(run)
