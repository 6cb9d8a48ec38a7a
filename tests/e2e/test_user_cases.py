"""A user's own trainer as a first-class workload: one-line commands, per-trial environment, the trial folder as its
working folder, cases of its own (inline or from a config folder), and only the settings that apply shown."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path

from ladder.storage.tsv import read_tsv
from tests.helpers import wait_for

# A trainer that writes into its working folder (`runs/`), reports the variable it was given, and runs out of
# memory the way torch says it above 64 envs.
TRAIN_PY = """
import argparse, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--num-envs", type=int)
a = p.parse_args()
os.makedirs("runs", exist_ok=True)
open("runs/where.txt", "w").write(os.getcwd() + "\\n" + os.environ.get("FOO", "") + "\\n")
if a.num_envs > 64:
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    sys.exit(1)
for i in range(1, 100000):
    time.sleep(0.05)
    print(f"iter {i} samples {i * a.num_envs}", flush=True)
"""


def search(cwd: Path, *overrides: str, flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ladder.search", *flags, "device=cpu", f"output_root={cwd}/out", *overrides]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=240)


# ---- one-line commands -------------------------------------------------------------------------------------------


# ---- environment, working folder ---------------------------------------------------------------------------------


# ---- cases of one's own ------------------------------------------------------------------------------------------


def test_a_case_from_a_user_config_folder_is_listed_and_runs_dry(tmp_path: Path) -> None:
    (tmp_path / "conf" / "case").mkdir(parents=True)
    (tmp_path / "conf" / "case" / "cleanrl_cartpole.yaml").write_text("name: cleanrl_cartpole\n")
    (tmp_path / "train.py").write_text("")
    flags = ("--config-dir", str(tmp_path / "conf"))
    common = [
        "workload.kind=command",
        "dry_run=true",
        "ladder.rungs=[8,4]",
        'workload.cmd="python train.py --num-envs {num_envs}"',
    ]
    done = search(tmp_path, *common, "case=cleanrl_cartpole", flags=flags)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run: case cleanrl_cartpole" in done.stdout and "agent.yaml" not in done.stdout
    # the template reads no profile: hiutil would run default's command again, so it does not run
    assert "(1 profile(s) x 2 rung(s)" in done.stdout and "only default runs" in done.stderr, done.stdout + done.stderr
    unknown = search(tmp_path, "case=cleanrl_cartpol", flags=flags)
    assert unknown.returncode == 2 and "cleanrl_cartpole" in unknown.stderr and "amp_pi_plus" in unknown.stderr
    no_method = search(tmp_path, "case=cleanrl_cartpole", "dry_run=true", flags=flags)
    assert no_method.returncode == 2 and "has no method" in no_method.stderr


def test_the_command_printed_at_a_stop_resumes_a_sweep_of_ones_own_trainer(tmp_path: Path) -> None:
    """The printed command brings back what finds the case before the sweep's record is read (its config folder and
    `workload.kind=command`: without them the case is unknown), and the sweep's time-stamped name as written."""
    (tmp_path / "conf" / "case").mkdir(parents=True)
    (tmp_path / "conf" / "case" / "mine.yaml").write_text("name: mine\n")
    (tmp_path / "train.py").write_text(TRAIN_PY)
    argv = [
        *(sys.executable, "-m", "ladder.search", "--config-dir", str(tmp_path / "conf"), "device=cpu"),
        *(f"output_root={tmp_path}/out", "case=mine", "workload.kind=command", "profile=[default]"),
        *('workload.cmd="python train.py --num-envs {num_envs}"', "ladder.rungs=[128,32]", "measure.window_s=600"),
    ]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def stepping() -> bool:  # the fitting rung's trainer has printed its third iteration
        logs = list((tmp_path / "out").glob("case_gpu_bench_*/trials/mine/default_e32_probe_1/stdout.log"))
        return bool(logs) and "iter 3 " in logs[0].read_text()

    wait_for(stepping, timeout_s=120)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 143, out
    printed = shlex.split(out.split("resume with `", 1)[1].split("`", 1)[0])
    again = subprocess.run(
        [sys.executable, *printed[1:], "dry_run=true"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "default e128" in again.stdout and "[not launched: already run in this sweep (oom_or_nccl)]" in again.stdout
    assert "/train.py --num-envs 32" in again.stdout, again.stdout  # its command, from the record
    assert len(list((tmp_path / "out").glob("case_gpu_bench_*"))) == 1  # the same sweep, no new one


def test_a_template_that_cannot_be_filled_is_refused_before_the_sweep_writes_anything(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN_PY)
    done = search(tmp_path, "workload.kind=command", "case=mine", 'workload.cmd="python train.py --n {num_env}"')
    assert done.returncode == 2 and "unknown placeholder(s) ['num_env']" in done.stderr, done.stdout + done.stderr
    assert "fix: use {num_envs}" in done.stderr
    # no sweep folder, and resume=latest still names the sweep before (none here)
    assert not list((tmp_path / "out").glob("case_gpu_bench_*")) and not (tmp_path / "out" / "latest_sweep").exists()


def test_an_inline_case_runs_the_trainer_in_its_trial_folder(tmp_path: Path) -> None:
    """A real sweep of a real trainer: the case is named on the command line, the trainer's own outputs land in
    its trial folder, its variable reaches it and env.txt, and only what applies is shown and recorded."""
    (tmp_path / "train.py").write_text(TRAIN_PY)
    done = search(
        tmp_path,
        "workload.kind=command",
        "case=my_cartpole",
        "workload.env.FOO=bar",
        "sweep=s",
        'workload.cmd="python train.py --num-envs {num_envs}"',
        "ladder.rungs=[128,32]",
        "profile=[default]",
        "measure.window_s=2",
        "measure.warmup_iters=2",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "emulated card" not in out and "1 x cpu" in out  # the cap is not applied; one direct process
    trials = tmp_path / "out" / "case_gpu_bench_s" / "trials" / "my_cartpole"
    fit = trials / "default_e32_probe_1"
    assert (fit / "runs" / "where.txt").read_text().split("\n")[:2] == [str(fit.resolve()), "bar"]
    assert not (tmp_path / "runs").exists() and not (fit / "agent.yaml").exists()
    assert "FOO=bar" in (fit / "env.txt").read_text().splitlines()
    rows = read_tsv(tmp_path / "out" / "case_gpu_bench_s" / "trials.tsv")
    assert [(r["case"], r["num_envs"], r["status"]) for r in rows] == [
        ("my_cartpole", "128", "oom_or_nccl"),
        ("my_cartpole", "32", "ok"),
    ]
    best = read_tsv(tmp_path / "out" / "case_gpu_bench_s" / "best_by_case.tsv")
    assert [(b["case"], b["gpu_mem_total"], b["n_gpus"]) for b in best] == [("my_cartpole", "", "1")]


# ---- the knob's name ---------------------------------------------------------------------------------------------


# ---- the trainer's own code ----------------------------------------------------------------------------------------


def test_a_trainer_edited_between_sweeps_runs_again_and_one_left_as_it_was_is_reused(tmp_path: Path) -> None:
    """The trainer lives in a git checkout of the user's, with a config file its command names. A sweep that finds
    it unchanged reuses the earlier sweep's trial; once its config is edited (uncommitted), or a module it imports
    from its checkout, the rung runs again: the trial is no longer the same. Each is read from the dry run, which
    says what a sweep would reuse and launches nothing."""
    repo = tmp_path / "project"
    repo.mkdir()
    trainer = TRAIN_PY.replace(
        'p.add_argument("--num-envs", type=int)', 'p.add_argument("--num-envs", type=int)\np.add_argument("--config")'
    )
    (repo / "train.py").write_text("import model\n" + trainer)
    (repo / "model.py").write_text("HIDDEN = 64\n")
    (repo / "cfg.yaml").write_text("lr: 0.001\n")
    for argv in (["init", "-q"], ["add", "."], ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "a"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True)
    common = (
        "workload.kind=command",
        "case=mine",
        "ladder.rungs=[8]",
        "measure.window_s=0.5",
        "measure.warmup_iters=2",
        'workload.cmd="python train.py --num-envs {num_envs} --config=cfg.yaml"',
    )
    first = search(repo, *common, "sweep=first")
    assert first.returncode == 0 and [
        t["status"] for t in read_tsv(repo / "out" / "case_gpu_bench_first" / "trials.tsv")
    ] == ["ok"], first.stdout + first.stderr

    def dry() -> str:
        done = search(repo, *common, "sweep=next", "dry_run=true")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "from trials of the same code only (ladder " in done.stdout and ", trainer " in done.stdout
        return done.stdout

    assert "[not launched: reused from first#0 (ok)]" in dry()
    (repo / "cfg.yaml").write_text("lr: 0.01\n")  # a setting of the trainer's own, not on its command line
    assert "not launched" not in dry()
    (repo / "cfg.yaml").write_text("lr: 0.001\n")  # back as it ran: the same trial again
    assert "[not launched: reused from first#0 (ok)]" in dry()
    (repo / "model.py").write_text("HIDDEN = 4096\n")  # a module the script imports, in its checkout
    assert "not launched" not in dry()
