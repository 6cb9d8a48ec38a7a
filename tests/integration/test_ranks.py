"""ladder's own launcher for several ranks (`python -m ladder.runner.ranks`, the proxy's by default): real processes.

torchrun 2.13 itself says what each of its two workers gets, and ladder's launcher must give the same; a real gloo
group forms from those variables; the first rank to fail ends the others and names the exit; a stop signal reaches
every rank; a rank that ignores SIGTERM is killed after the grace; nothing is left running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from ladder.core import torchenv
from ladder.runner import launch
from ladder.workloads.builtin import Placement, rank_launcher, torchrun
from tests.helpers import wait_for

DUMP_ENV = "import json, os, sys; open(sys.argv[1] + os.environ['RANK'], 'w').write(json.dumps(dict(os.environ)))"

# Two ranks that need each other: gloo from the environment (env://), one all-reduce of their ranks.
GLOO = textwrap.dedent(
    """
    import os, sys, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    x = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(x)
    print("sum", int(x.item()), "world", dist.get_world_size(), flush=True)
    print("to stderr", os.environ["LOCAL_RANK"], file=sys.stderr, flush=True)
    dist.destroy_process_group()
    """
)

# Rank 1 fails once rank 0 is ready (its log says so); rank 0 waits, and says which signal ended it.
FIRST_FAILS = textwrap.dedent(
    """
    import os, pathlib, signal, sys, time
    def bye(sig, frame):
        print("rank", os.environ["RANK"], "got", signal.Signals(sig).name, flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, bye)
    print("ready", os.environ["RANK"], flush=True)
    if os.environ["RANK"] == "1":
        first = pathlib.Path(os.environ["TORCHELASTIC_ERROR_FILE"]).parent.parent / "0" / "stdout.log"
        while not (first.is_file() and "ready" in first.read_text()):
            time.sleep(0.01)
        sys.exit(3)
    time.sleep(600)
    """
)


# Every rank says it is ready, then waits; with `ignore`, SIGTERM is ignored.
WAITS = textwrap.dedent(
    """
    import os, signal, sys, time
    if sys.argv[1:] == ["ignore"]:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", os.environ["RANK"], flush=True)
    time.sleep(600)
    """
)


def two(tmp_path: Path, port: int | None = None) -> Placement:
    return Placement("cpu", 2, port or launch.free_port(), sys.executable)


def rank_log(tmp_path: Path, rank: int, name: str = "stdout.log") -> Path:
    return Path(torchenv.rank_dir(str(tmp_path / "ranks"), rank)) / name


def start(
    tmp_path: Path, code: str, *args: str, grace_s: float | None = None, pin: bool = True
) -> subprocess.Popen[str]:
    script = tmp_path / "rank.py"
    script.write_text(code)
    argv = list(rank_launcher(replace(two(tmp_path), pin_ranks=pin), str(tmp_path)))
    if grace_s is not None:
        argv[argv.index("--") : argv.index("--")] = ["--grace-s", str(grace_s)]
    return subprocess.Popen([*argv, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def no_rank_left(launcher: subprocess.Popen[str], tmp_path: Path) -> bool:
    script = str(tmp_path / "rank.py")
    alive = []
    for proc in psutil.process_iter(["cmdline"]):
        if script in (proc.info["cmdline"] or []) and proc.pid != launcher.pid:
            alive.append(proc)
    return not alive


def test_each_rank_gets_what_torchrun_gives_its_worker(tmp_path: Path) -> None:
    """torchrun 2.13 with two workers, and ladder's launcher on the same port: the same variables, rank by rank."""
    script = tmp_path / "dump.py"
    script.write_text(DUMP_ENV)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    port = launch.free_port()
    for prefix, out in (
        (torchrun(two(tmp_path, port), str(tmp_path / "t")), tmp_path / "theirs"),
        (rank_launcher(two(tmp_path, port), str(tmp_path / "l")), tmp_path / "ours"),
    ):
        subprocess.run(
            [*prefix, str(script), str(out)],
            env=env,
            check=True,
            timeout=120,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    for rank in (0, 1):
        theirs, ours = (json.loads(Path(f"{tmp_path}/{who}{rank}").read_text()) for who in ("theirs", "ours"))
        added = {k: v for k, v in theirs.items() if env.get(k) != v}
        mine = {k: v for k, v in ours.items() if env.get(k) != v}
        # the agent's store is not there: rank 0 hosts the rendezvous (the one variable that must differ)
        assert set(added) - {"TORCHELASTIC_USE_AGENT_STORE"} <= set(mine), sorted(set(added) - set(mine))
        assert set(mine) <= set(added) | {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCHELASTIC_USE_AGENT_STORE"}
        same = set(added) - {"TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE"}
        assert {k: mine[k] for k in same} == {k: added[k] for k in same}
        # the error file where torchrun's --log-dir puts it: ranks/<run>/attempt_0/<rank>/error.json
        theirs_file = Path(added["TORCHELASTIC_ERROR_FILE"]).relative_to(tmp_path / "t").parts
        mine_file = Path(mine["TORCHELASTIC_ERROR_FILE"]).relative_to(tmp_path / "l").parts
        assert theirs_file[0] == mine_file[0] == "ranks" and theirs_file[-3:] == mine_file[-3:]


def test_two_ranks_form_a_gloo_group_and_their_output_is_logged_per_rank_and_copied(tmp_path: Path) -> None:
    launcher = start(tmp_path, GLOO)
    out, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 0, err
    assert sorted(line for line in out.splitlines() if "sum" in line) == [
        "[default0]:sum 3 world 2",
        "[default1]:sum 3 world 2",
    ]
    assert "[default1]:to stderr 1" in err.splitlines()
    assert rank_log(tmp_path, 1).read_text() == "sum 3 world 2\n"  # the rank's own log, as it printed it
    assert rank_log(tmp_path, 0, "stderr.log").read_text() == "to stderr 0\n"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin two ranks apart")
def test_pinned_ranks_each_run_on_their_own_share_of_the_launchers_cpus(tmp_path: Path) -> None:
    """`--pin` (the proxy's default, `workload.pin_ranks`): the two ranks' CPUs are disjoint and together the
    launcher's; without it each rank may run on every one of them."""
    code = "import os; print('cpus', sorted(os.sched_getaffinity(0)), flush=True)"
    mine = sorted(os.sched_getaffinity(0))
    seen = {}
    for pin in (True, False):
        (folder := tmp_path / str(pin)).mkdir()
        launcher = start(folder, code, pin=pin)
        out, err = launcher.communicate(timeout=120)
        assert launcher.returncode == 0, err
        seen[pin] = {line.split(":", 1)[0]: json.loads(line.split("cpus ", 1)[1]) for line in out.splitlines()}
    pinned = seen[True]
    assert set(pinned) == {"[default0]", "[default1]"}
    assert not set(pinned["[default0]"]) & set(pinned["[default1]"])
    assert sorted(pinned["[default0]"] + pinned["[default1]"]) == mine
    assert seen[False] == {"[default0]": mine, "[default1]": mine}


def test_the_first_rank_to_fail_ends_the_others_and_its_exit_is_the_launchers(tmp_path: Path) -> None:
    launcher = start(tmp_path, FIRST_FAILS)
    out, _ = launcher.communicate(timeout=120)
    assert launcher.returncode == 3  # rank 1's own code, not the SIGTERMed rank 0's
    assert "[default0]:rank 0 got SIGTERM" in out.splitlines()
    assert no_rank_left(launcher, tmp_path)


def test_a_stop_signal_reaches_every_rank_and_the_launcher_leaves_by_it(tmp_path: Path) -> None:
    launcher = start(tmp_path, WAITS)
    wait_for(lambda: all(rank_log(tmp_path, r).is_file() and rank_log(tmp_path, r).read_text() for r in (0, 1)))
    launcher.send_signal(signal.SIGTERM)  # the launcher alone, not its group
    launcher.communicate(timeout=120)
    assert launcher.returncode == -signal.SIGTERM
    assert no_rank_left(launcher, tmp_path)


def test_a_rank_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    launcher = start(tmp_path, WAITS, "ignore", grace_s=0.5)
    wait_for(lambda: all(rank_log(tmp_path, r).is_file() and rank_log(tmp_path, r).read_text() for r in (0, 1)))
    launcher.send_signal(signal.SIGINT)
    launcher.communicate(timeout=120)
    assert launcher.returncode == -signal.SIGKILL  # the first rank to end was SIGKILLed after the grace
    assert no_rank_left(launcher, tmp_path)


def test_bad_usage_is_refused_with_the_usage(tmp_path: Path) -> None:
    where = ["--port", "1", "--log-dir", str(tmp_path)]
    for argv in (
        ["--nproc", "2", *where],
        ["--nproc", "0", *where, "--", "true"],
        ["--nproc", "2", "--x", *where, "--", "true"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "ladder.runner.ranks", *argv], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and "usage: python -m ladder.runner.ranks" in done.stderr, argv


def test_a_child_that_holds_a_ranks_output_open_does_not_keep_the_launcher(tmp_path: Path) -> None:
    """A rank that leaves a child behind with its stdout: the launcher still leaves (the trial's stop kills the
    child, by its group and its trial id; here the test does)."""
    code = "import subprocess, sys; print('child', subprocess.Popen(['sleep', '600']).pid, flush=True)"
    launcher = start(tmp_path, code)
    out, _ = launcher.communicate(timeout=120)
    children = [int(line.split()[-1]) for line in out.splitlines() if "child" in line]
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    assert launcher.returncode == 0 and len(children) == 2
