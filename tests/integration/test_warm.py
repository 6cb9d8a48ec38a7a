"""The warm starter: a rank forked from it runs, ends and is stopped as the same rank started cold would be.

Real processes: a starter (torch imported), clients started as a rank launcher starts them, a trial cgroup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ladder.core import torchenv
from ladder.runner import launch, procs, warm
from ladder.runner.cgroup import MemCgroup
from ladder.runner.host import HostSampler
from tests.helpers import need_memory_cgroups, wait_for

pytestmark = pytest.mark.integration

RANK = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    out = Path(os.environ["OUT"])
    threads = __import__("torch").get_num_threads()
    seen = {"pid": os.getpid(), "argv": sys.argv[1:], "cwd": os.getcwd(), "var": os.environ.get("VAR"),
            "cpus": sorted(os.sched_getaffinity(0))}
    part = out.with_name(f"{out.name}.{os.getpid()}")  # whole or not there: a rank stopped mid-write (two ranks
    part.write_text(json.dumps({**seen, "threads": threads}))  # share OUT, and the first to end stops the other)
    os.replace(part, out)
    what = sys.argv[1]
    if what == "wait":  # its handler set before it says hello: a test that waits for the hello may stop it then
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
    print("rank says hello", flush=True)
    if what == "exit":
        sys.exit(int(sys.argv[2]))
    if what == "raise":
        raise KeyError("no_such_key")
    if what == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "wait":
        while True:
            time.sleep(0.05)
    """
)


@pytest.fixture(scope="module")
def pool() -> Iterator[warm.Starters]:
    """This file's own starters, as an orchestrator has them (`pool.linked` finds their ranks), not the test
    session's shared one, which is set aside meanwhile."""
    need_memory_cgroups()
    shared = os.environ.pop(warm.SHARED_VAR, None)
    own = warm.Starters()
    try:
        yield own
    finally:
        own.close()
        if shared is not None:
            os.environ[warm.SHARED_VAR] = shared


@pytest.fixture(scope="module")
def starter(pool: warm.Starters) -> warm.Starter:
    got = pool.get(sys.executable)
    assert got is not None and got.owned, "the warm starter did not get ready"
    return got


@pytest.fixture
def cgroup(tmp_path: Path) -> Iterator[MemCgroup]:
    group = MemCgroup.create(procs.cgroup_name(tmp_path.name[-12:]), None)
    assert group is not None
    yield group
    procs.remove_cgroups([group])


def client(tmp_path: Path, env: dict[str, str], *args: str, cpus: set[int] | None = None) -> subprocess.Popen[bytes]:
    (tmp_path / "rankmod.py").write_text(RANK)
    return subprocess.Popen(
        [sys.executable, "-m", warm.MODULE, "rankmod", *args],
        cwd=tmp_path,
        env={**os.environ, **env, "OUT": str(tmp_path / "out.json"), "VAR": "given", "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,  # noqa: PLW1509 - as trialexec pins
    )


def seen(tmp_path: Path) -> dict[str, object]:
    wait_for(lambda: (tmp_path / "out.json").exists() and (tmp_path / "out.json").read_text())
    return json.loads((tmp_path / "out.json").read_text())


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [(("exit", "0"), 0, ""), (("exit", "3"), 3, ""), (("raise",), 1, "KeyError: 'no_such_key'"), (("kill",), -9, "")],
)
def test_a_warm_rank_ends_as_a_cold_one(
    tmp_path: Path, starter: warm.Starter, cgroup: MemCgroup, args: tuple[str, ...], code: int, said: str
) -> None:
    codes = []
    for env in (starter.env(cgroup.path), {}):  # warm, then cold (no starter named)
        (tmp_path / "out.json").unlink(missing_ok=True)
        proc = client(tmp_path, env, *args)
        out, err = proc.communicate(timeout=120)
        codes.append(proc.returncode)
        assert b"rank says hello" in out
        assert said.encode() in err
        got = seen(tmp_path)
        assert got["argv"] == list(args) and got["cwd"] == str(tmp_path) and got["var"] == "given"
        assert got["threads"] == 1  # OMP_NUM_THREADS reaches a forked rank too
        assert got["pid"] != proc.pid if env else got["pid"] == proc.pid
    assert codes == [code, code]


def test_the_rank_runs_in_the_trial_cgroup_under_its_client(
    tmp_path: Path, pool: warm.Starters, starter: warm.Starter, cgroup: MemCgroup
) -> None:
    proc = client(tmp_path, starter.env(cgroup.path), "wait")
    rank = int(str(seen(tmp_path)["pid"]))
    assert rank in cgroup.pids()
    wait_for(lambda: pool.linked(proc.pid) == rank)
    assert (rank, proc.pid) in procs.process_tree(os.getpid(), pool.linked)  # the sampler's tree walk finds it
    proc.send_signal(signal.SIGTERM)  # a stop reaches the rank, whose own handler leaves with 7
    assert proc.wait(timeout=60) == 7
    wait_for(lambda: not psutil.pid_exists(rank))
    assert pool.linked(proc.pid) is None


def test_the_sampler_counts_the_rank_and_not_its_stand_in(
    tmp_path: Path, pool: warm.Starters, starter: warm.Starter, cgroup: MemCgroup
) -> None:
    """The host sampler's rank is the forked rank alone: its client (ladder's stand-in) is walked through, never
    counted. Started cold, the client has become the rank (exec) and is counted as such."""
    proc = client(tmp_path, {**starter.env(cgroup.path), "LOCAL_RANK": "0"}, "wait")
    rank = int(str(seen(tmp_path)["pid"]))
    wait_for(lambda: pool.linked(proc.pid) == rank)
    assert warm.stands_in(proc.pid) and not warm.stands_in(rank)
    sampler = HostSampler(os.getpid(), starters=pool)
    try:
        (sample,) = sampler.sample(0.0)
        assert sample.index == 0 and set(sampler._rank_of) == {rank}  # noqa: SLF001 - which processes it counts
    finally:
        sampler.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 7
    (tmp_path / "cold").mkdir()
    cold = client(tmp_path / "cold", {"LOCAL_RANK": "0"}, "wait")
    wait_for(lambda: (tmp_path / "cold" / "out.json").exists() and (tmp_path / "cold" / "out.json").read_text())
    assert not warm.stands_in(cold.pid) and "rankmod" in psutil.Process(cold.pid).cmdline()
    sampler = HostSampler(os.getpid(), starters=pool)
    try:
        (sample,) = sampler.sample(0.0)
        assert set(sampler._rank_of) == {cold.pid}  # noqa: SLF001
    finally:
        sampler.close()
        cold.send_signal(signal.SIGTERM)
        assert cold.wait(timeout=60) == 7


def launcher(tmp_path: Path, env: dict[str, str], *args: str, fork: bool = True) -> subprocess.Popen[bytes]:
    """Two ranks through ladder's rank launcher, each a warm client of `rankmod`, as a proxy trial starts them."""
    (tmp_path / "rankmod.py").write_text(RANK)
    own = ["--nproc", "2", "--port", str(launch.free_port()), "--log-dir", str(tmp_path / "ranks")]
    return subprocess.Popen(
        [sys.executable, "-m", "ladder.runner.ranks", *own, *([] if fork else ["--no-fork"]), "--"]
        + [sys.executable, "-m", warm.MODULE, "rankmod", *args],
        cwd=tmp_path,
        env={**os.environ, **env, "OUT": str(tmp_path / "out.json"), "VAR": "given"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def said_hello(tmp_path: Path, ranks: tuple[int, ...] = (0, 1)) -> bool:
    logs = [Path(torchenv.rank_dir(str(tmp_path / "ranks"), r), "stdout.log") for r in ranks]
    return all(log.is_file() and "rank says hello" in log.read_text() for log in logs)


@pytest.mark.parametrize("fork", [True, False])
def test_the_rank_launcher_forks_its_warm_clients_and_the_ranks_are_the_same(
    tmp_path: Path, pool: warm.Starters, starter: warm.Starter, cgroup: MemCgroup, fork: bool
) -> None:
    """The launcher forks each warm client (no interpreter of its own: its command line is the launcher's, which the
    sampler counts as a launcher's) or, with `--no-fork`, starts it; either way each rank is forked by the starter
    into the trial's cgroup, the sampler counts it under its own LOCAL_RANK, its output is logged per rank and
    copied, and a stop reaches it."""
    proc = launcher(tmp_path, starter.env(cgroup.path), "wait", fork=fork)
    wait_for(lambda: said_hello(tmp_path))
    clients = psutil.Process(proc.pid).children()
    assert len(clients) == 2
    ranks = set()
    for c in clients:
        assert procs.launches(c.pid)  # counted as ladder's, never as a rank
        assert warm.stands_in(c.pid) is not fork  # forked: the launcher's command line; started: a client's
        wait_for(lambda c=c: pool.linked(c.pid) is not None)
        rank = pool.linked(c.pid)
        assert rank is not None and rank in cgroup.pids() and rank not in {x.pid for x in clients}
        ranks.add(rank)
    sampler = HostSampler(proc.pid, starters=pool)
    try:
        assert sorted(s.index for s in sampler.sample(0.0)) == [0, 1]
        assert set(sampler._rank_of) == ranks and sorted(sampler._rank_of.values()) == [0, 1]  # noqa: SLF001
    finally:
        sampler.close()
    proc.send_signal(signal.SIGTERM)  # the launcher passes it on; each rank's handler leaves with 7
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 7
    assert out.count(b"rank says hello") == 2 and b"[default0]:rank says hello" in out


@pytest.mark.parametrize(("args", "code"), [(("exit", "3"), 3), (("kill",), -9), (("raise",), 1)])
def test_a_forked_client_leaves_as_its_rank_did(
    tmp_path: Path, starter: warm.Starter, cgroup: MemCgroup, args: tuple[str, ...], code: int
) -> None:
    proc = launcher(tmp_path, starter.env(cgroup.path), *args)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code
    assert said_hello(tmp_path, (0,)) or said_hello(tmp_path, (1,))  # the first to end may stop the other first
    if code == 1:
        assert b"KeyError: 'no_such_key'" in err
    assert seen(tmp_path)["pid"] not in {proc.pid} and not cgroup.pids()


def test_the_rank_keeps_the_cpus_its_trial_leased(tmp_path: Path, starter: warm.Starter, cgroup: MemCgroup) -> None:
    one = {min(os.sched_getaffinity(0))}
    proc = client(tmp_path, starter.env(cgroup.path), "exit", "0", cpus=one)
    assert proc.wait(timeout=120) == 0
    got = seen(tmp_path)
    assert got["pid"] != proc.pid and got["cpus"] == sorted(one)


def test_a_killed_client_takes_its_rank_with_it(tmp_path: Path, starter: warm.Starter, cgroup: MemCgroup) -> None:
    proc = client(tmp_path, starter.env(cgroup.path), "wait")
    rank = int(str(seen(tmp_path)["pid"]))
    proc.kill()
    proc.wait()
    wait_for(lambda: not psutil.pid_exists(rank) or psutil.Process(rank).status() == psutil.STATUS_ZOMBIE)


def test_a_rank_cannot_outlive_its_starter(tmp_path: Path, cgroup: MemCgroup) -> None:
    need_memory_cgroups()
    own = warm.start(sys.executable)  # a starter of this test's own, to end
    assert own is not None
    try:
        proc = client(tmp_path, own.env(cgroup.path), "wait")
        rank = int(str(seen(tmp_path)["pid"]))
        own.proc.kill()  # the starter dies: its keeper, then the rank, die with it
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1 and b"warm starter ended before the rank did" in err
        wait_for(lambda: not psutil.pid_exists(rank) or psutil.Process(rank).status() == psutil.STATUS_ZOMBIE)
    finally:
        own.close()


def test_without_a_cgroup_it_starts_cold(tmp_path: Path, starter: warm.Starter) -> None:
    env = {warm.SOCKET_VAR: starter.socket_path, warm.CGROUP_VAR: str(tmp_path / "no_such_cgroup")}
    proc = client(tmp_path, env, "exit", "5")
    assert proc.wait(timeout=120) == 5
    assert seen(tmp_path)["pid"] == proc.pid


def test_the_starter_ends_with_its_orchestrator(tmp_path: Path) -> None:
    code = (
        "import os, sys; from ladder.runner import warm; s = warm.start(sys.executable); "
        "print(s.proc.pid, s.folder, flush=True); os._exit(0)"  # no atexit: the starter sees its stdin close
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=True)
    pid, folder = int(out.stdout.split()[0]), out.stdout.split()[1]
    wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    wait_for(lambda: not os.path.exists(folder))  # its folder, made for it alone, went with it


def test_a_starter_run_by_hand_removes_what_it_made_and_leaves_the_rest_of_its_folder(tmp_path: Path) -> None:
    """`serve --socket PATH` in a folder of one's own (to share it, `LADDER_WARM_STARTER`): when it ends, its socket
    and identity go, and the folder with what else was in it stays."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept")
    proc = subprocess.Popen(
        [sys.executable, "-m", warm.MODULE, "serve", "--socket", str(mine / "sock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == b"ready"
    assert {p.name for p in mine.iterdir()} == {"notes.txt", "sock", warm.IDENTITY}
    proc.stdin.close()  # its cue to end
    assert proc.wait(timeout=60) == 0
    assert {p.name for p in mine.iterdir()} == {"notes.txt"}
    assert (mine / "notes.txt").read_text() == "kept"


SHARER = (
    "import sys; from ladder.runner import warm; s = warm.STARTERS.get(sys.executable); "
    "print(s.owned, s.folder, flush=True); warm.STARTERS.close()"
)


def test_an_orchestrator_forks_from_a_shared_starter_of_its_interpreter_and_leaves_it_running(
    starter: warm.Starter,
) -> None:
    env = {**os.environ, warm.SHARED_VAR: starter.folder}
    out = subprocess.run([sys.executable, "-c", SHARER], env=env, capture_output=True, text=True, timeout=180)
    assert out.stdout.split() == ["False", starter.folder], out.stderr
    assert starter.proc is not None and starter.proc.poll() is None  # its owner's still: closing it ended nothing
    assert os.path.exists(starter.socket_path)


def test_a_shared_starter_of_another_pythonpath_is_not_used(tmp_path: Path, starter: warm.Starter) -> None:
    """Another PYTHONPATH may import other modules than the starter holds: the orchestrator starts its own."""
    env = {**os.environ, warm.SHARED_VAR: starter.folder, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", SHARER], env=env, capture_output=True, text=True, timeout=180)
    owned, folder = out.stdout.split()
    assert owned == "True" and folder != starter.folder, out.stderr
    assert not os.path.exists(folder)  # its own, ended with it
