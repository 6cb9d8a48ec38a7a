"""A one-rank trial started without torchrun's agent (`workload.single_rank=direct`, the default): the trainer gets
the environment torchrun would give it, runs as one supervised process group, and ends with the same verdicts.

Real processes throughout: torchrun itself tells which variables it sets, the proxy trainer runs out of a real
memory cgroup, and a gloo trainer initialises torch.distributed from the variables ladder set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ladder.core.records import Status
from ladder.runner import launch
from ladder.storage import studies
from ladder.storage.tsv import read_tsv
from ladder.workloads.builtin import Placement, rank_env
from tests.e2e.test_resume import FIRST, finish, search, sweep_dir
from tests.helpers import LIGHT_PROXY, need_memory_cgroups

DUMP_ENV = "import json, os, sys; open(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))"


# A one-rank trainer that needs torch.distributed: gloo from the environment (env://), an all-reduce per step.
GLOO = textwrap.dedent(
    """
    import os, sys, time, torch, torch.distributed as dist
    envs = int(sys.argv[1])
    dist.init_process_group("gloo")
    print("ranks", dist.get_rank(), dist.get_world_size(), os.environ["LOCAL_RANK"], flush=True)
    for i in range(1, 10**6):
        x = torch.ones(envs)
        dist.all_reduce(x)
        print(f"iter {i} samples {i * envs}", flush=True)
        time.sleep(0.05)
    """
)


def test_the_variables_are_those_torchrun_sets_for_one_rank(tmp_path: Path) -> None:
    """torchrun 2.13 itself, started as ladder starts it, says what its one worker gets beyond its own environment."""
    script, seen = tmp_path / "dump.py", tmp_path / "seen.json"
    script.write_text(DUMP_ENV)
    port = launch.free_port()
    place = Placement("cpu", 1, port, sys.executable, single_rank="torchrun")
    from ladder.workloads.builtin import torchrun

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    subprocess.run(
        [*torchrun(place, str(tmp_path)), str(script), str(seen)],
        env=env,
        check=True,
        timeout=120,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = json.loads(seen.read_text())
    added = {k: v for k, v in worker.items() if env.get(k) != v}
    ours = rank_env(Placement("cpu", 1, port, sys.executable), str(tmp_path))
    assert set(added) - {"TORCHELASTIC_ERROR_FILE"} <= set(ours), sorted(set(added) - set(ours))
    assert set(ours) <= set(added) | {"TORCH_NCCL_ASYNC_ERROR_HANDLING"}  # nothing torchrun would not set
    same = set(added) - {"TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE"}
    assert {k: ours[k] for k in same} == {k: added[k] for k in same}
    # the error file lands where torchrun's --log-dir puts it, so the same glob finds it
    theirs, mine = Path(added["TORCHELASTIC_ERROR_FILE"]), Path(ours["TORCHELASTIC_ERROR_FILE"])
    assert theirs.relative_to(tmp_path).parts[-3:] == mine.relative_to(tmp_path).parts[-3:]
    assert theirs.relative_to(tmp_path).parts[0] == mine.relative_to(tmp_path).parts[0] == "ranks"


def test_a_direct_proxy_trial_under_a_memory_cgroup_steps_down_then_fits(tmp_path: Path) -> None:
    """amp_pi_plus in the proxy holds ~540 MB at 64 envs (RSS, measured), far more at 16384: 800 MB kills the first."""
    need_memory_cgroups()
    settings = [
        "profile=[default]",
        "ladder.rungs=[16384,64]",
        "workload.kind=proxy",
        "workload.nproc=1",
        "workload.emulate_gpu_mem_gb=null",
        "workload.host_mem_limit_gb=0.8",
        "measure.window_s=2",
        "measure.warmup_iters=2",
        "measure.stable_tol=0.5",
        LIGHT_PROXY,
        "sweep=direct",
    ]
    out = finish(search(tmp_path, f"case={FIRST}", *settings))
    folder = sweep_dir(tmp_path, "direct")
    rows = {r["num_envs"]: r for r in read_tsv(folder / "trials.tsv")}
    assert (rows["16384"]["status"], rows["16384"]["reason"]) == ("oom_or_nccl", "host_oom"), out
    assert rows["64"]["status"] == "ok", out
    for row in rows.values():
        assert "torch.distributed.run" not in (folder / row["trial_dir"] / "cmd.txt").read_text()
        assert "RANK=0" in (folder / row["trial_dir"] / "env.txt").read_text().splitlines()
    records = studies.sweep_records(studies.open_storage(None, folder), "direct")
    assert {r.info["launcher"] for r in records} == {"direct"}
    assert [r for r in records if r.status is Status.OK][0].info["nproc"] == "1"


def test_a_torchrun_command_on_one_rank_runs_directly_and_its_gloo_group_works(tmp_path: Path) -> None:
    trainer = tmp_path / "gloo_train.py"
    trainer.write_text(GLOO)
    command = f'workload.command=["{trainer}","{{num_envs}}"]'
    out = finish(
        search(
            tmp_path,
            f"case={FIRST}",
            "profile=[default]",
            "ladder.rungs=[32]",
            "workload.kind=command",
            command,
            "workload.launcher=torchrun",
            "workload.nproc=1",
            "measure.window_s=2",
            "measure.warmup_iters=2",
            "measure.stable_tol=0.5",
            "sweep=gloo",
        )
    )
    folder = sweep_dir(tmp_path, "gloo")
    [row] = read_tsv(folder / "trials.tsv")
    assert row["status"] == "ok", out
    assert "ranks 0 1 0" in (folder / row["trial_dir"] / "stdout.log").read_text()
    assert (folder / row["trial_dir"] / "cmd.txt").read_text().split()[:2] == [sys.executable, str(trainer)]
