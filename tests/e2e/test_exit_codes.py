"""`python -m ladder.search` exits with a code that says how the sweep ended (ladder.core.errors.ExitCode), and its
advice matches: real runs of the proxy demo under its emulated card, a missing program and a typo'd flag through
`workload.kind=command`, bad settings, and a multirun whose jobs end differently."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.helpers import LIGHT_PROXY, wait_for

TINY = [
    "device=cpu",
    "profile=[default]",
    "measure.window_s=2",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "workload.nproc=1",  # one rank, started directly: the ranks are not what these tests are about
    LIGHT_PROXY,
]


STEP_DOWN = "step num_envs down"


# argparse, as a trainer's own command line: `--num-envz` is a typo of `--num-envs`
TRAINER = textwrap.dedent(
    """
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-envs", type=int, default=1)
    parser.parse_args()
    """
)


# one trainer for two cases: amp_pi_plus allocates past a data-segment cap (a real allocation failure), add_pi_plus
# starts a program that is not there
TWO_CASES = textwrap.dedent(
    """
    import os, resource, sys
    case, num_envs = sys.argv[1], int(sys.argv[2])
    if case == "add_pi_plus":
        os.execvp("no_such_trainer_xyz", ["no_such_trainer_xyz", "--num-envs", str(num_envs)])
    resource.setrlimit(resource.RLIMIT_DATA, (512 * 2**20, 512 * 2**20))
    import torch
    print(torch.empty(num_envs * 2**20, 64).sum())
    """
)


# ladder.search run as `python -m`, with a bug put into the sweep: what a crash inside ladder exits with
CRASHING = textwrap.dedent(
    """
    import runpy, sys
    import ladder.sweep.loop
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug inside the sweep")
    ladder.sweep.loop.run = broken
    runpy.run_module("ladder.search", run_name="__main__", alter_sys=True)
    """
)


def search(tmp_path: Path, *overrides: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ladder.search", "case=amp_pi_plus", f"output_root={tmp_path}/out", *overrides]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=timeout_s)


def best_rows(tmp_path: Path, sweep: str) -> list[dict[str, str]]:
    return read_tsv(tmp_path / "out" / f"case_gpu_bench_{sweep}" / "best_by_case.tsv")


def trials(tmp_path: Path, sweep: str) -> list[tuple[str, str, str]]:
    rows = read_tsv(tmp_path / "out" / f"case_gpu_bench_{sweep}" / "trials.tsv")
    return [(t["variant"], t["num_envs"], t["status"]) for t in rows]


def test_a_pick_found_exits_0(tmp_path: Path) -> None:
    done = search(tmp_path, *TINY, "ladder.rungs=[64]", "sweep=fits")
    assert done.returncode == ExitCode.PICK_FOUND, done.stdout + done.stderr
    assert "best: amp_pi_plus" in done.stdout and STEP_DOWN not in done.stdout
    assert [(r["num_envs"], r["status"]) for r in best_rows(tmp_path, "fits")] == [("64", "ok")]


def test_no_rung_fits_exits_3_and_advises_stepping_down(tmp_path: Path) -> None:
    done = search(tmp_path, *TINY, "ladder.rungs=[4096]", "sweep=nofit")
    assert done.returncode == ExitCode.NO_RUNG_FITS, done.stdout + done.stderr
    assert trials(tmp_path, "nofit") == [("default", "4096", "oom_or_nccl")]
    assert "best: none of the rungs fits" in done.stdout and STEP_DOWN in done.stdout
    (row,) = best_rows(tmp_path, "nofit")
    assert (row["num_envs"], row["status"], row["class"]) == ("4096", "oom_or_nccl", "unstable")


def test_a_missing_program_exits_4_and_is_told_to_fix_the_configuration(tmp_path: Path) -> None:
    done = search(
        tmp_path,
        "device=cpu",
        "ladder.rungs=[256,128]",
        "workload.kind=command",
        "sweep=missing",
        "workload.command=[no_such_trainer_xyz,--num-envs,'{num_envs}']",
    )
    out = done.stdout + done.stderr
    assert done.returncode == ExitCode.BROKEN_CONFIG, out
    # no step-down; hiutil would run the same command (the template reads no profile), so it does not run
    assert trials(tmp_path, "missing") == [("default", "256", "error")]
    assert STEP_DOWN not in out and "none of the rungs fits" not in out
    assert "class: broken configuration -> fix the configuration: FileNotFoundError" in out
    assert "no_such_trainer_xyz" in out and "trials/amp_pi_plus/" in out
    (row,) = best_rows(tmp_path, "missing")
    assert (row["status"], row["num_envs"], row["class"]) == ("error", "", "broken configuration")  # no rung: no answer
    assert row["action"].startswith("fix the configuration: FileNotFoundError") and row["trial_dir"] in row["action"]


def test_a_typod_trainer_flag_exits_4_with_the_trainers_own_message(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAINER)
    done = search(
        tmp_path,
        "device=cpu",
        "profile=[default]",
        "ladder.rungs=[256,128]",
        "workload.kind=command",
        f"workload.command=[{sys.executable},{tmp_path}/train.py,--num-envz,'{{num_envs}}']",
        "sweep=typo",
    )
    out = done.stdout + done.stderr
    assert done.returncode == ExitCode.BROKEN_CONFIG, out
    assert trials(tmp_path, "typo") == [("default", "256", "error")]
    assert "unrecognized arguments: --num-envz 256" in out and STEP_DOWN not in out
    (row,) = best_rows(tmp_path, "typo")
    assert (row["status"], row["num_envs"]) == ("error", "") and "--num-envz" in row["action"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("ladder=defualt", "unknown ladder 'defualt' (did you mean default?); known: default"),
        ("ladder.rungs=[64,128]", "strictly descending"),
        ("profile=[hiutli]", "unknown profile 'hiutli' (did you mean hiutil"),
    ],
    ids=["typod-ladder", "ascending-rungs", "typod-profile"],
)
def test_bad_settings_exit_2_and_launch_nothing(tmp_path: Path, override: str, message: str) -> None:
    done = search(tmp_path, "device=cpu", override, timeout_s=120)
    assert done.returncode == ExitCode.BAD_SETTINGS and message in done.stderr, done.stdout + done.stderr
    assert not list((tmp_path / "out").glob("case_gpu_bench_*"))


@pytest.mark.parametrize(
    "override",
    ["workload.widht_factor=0.1", "measure.window_s=abc", "ladder.rungs=[64"],
    ids=["misspelt-key", "bad-value", "unparsable"],
)
def test_an_override_that_does_not_compose_exits_2(tmp_path: Path, override: str) -> None:
    done = search(tmp_path, "device=cpu", override, timeout_s=120)
    assert done.returncode == ExitCode.BAD_SETTINGS, done.stdout + done.stderr
    # a key the schema lacks is named with the nearest it has; Hydra names a value it cannot compose; ladder names an
    # override it cannot even parse, with its fix
    named = {
        "workload.widht_factor=0.1": "unknown setting 'workload.widht_factor'; did you mean workload.width_factor?",
        "measure.window_s=abc": "ladder: fix the override named above",
        "ladder.rungs=[64": f"ladder: cannot read {override!r}",
    }[override]
    assert named in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_crash_inside_ladder_exits_1_not_bad_settings(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-c",
        CRASHING,
        "case=amp_pi_plus",
        "device=cpu",
        "ladder.rungs=[64]",
        f"output_root={tmp_path}/out",
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == ExitCode.CRASH, done.stdout + done.stderr
    assert "ZeroDivisionError: a bug inside the sweep" in done.stderr and "ladder: fix" not in done.stderr


def test_a_multirun_exits_with_its_worst_job_after_every_job_ran(tmp_path: Path) -> None:
    """amp_pi_plus finds no rung (3), add_pi_plus is broken (4): both run, both rows land, the multirun exits 4."""
    (tmp_path / "trainer.py").write_text(TWO_CASES)
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "-m",
        "case=amp_pi_plus,add_pi_plus",
        "device=cpu",
        "profile=[default]",
        "ladder.rungs=[64]",
        "workload.kind=command",
        "sweep=shared",
        f"workload.command=[{sys.executable},{tmp_path}/trainer.py,'{{case}}','{{num_envs}}']",
        f"output_root={tmp_path}/out",
        f"hydra.sweep.dir={tmp_path}/multirun",
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == ExitCode.BROKEN_CONFIG, done.stdout + done.stderr
    rows = {r["case"]: (r["status"], r["num_envs"]) for r in best_rows(tmp_path, "shared")}
    assert rows == {"amp_pi_plus": ("oom_or_nccl", "64"), "add_pi_plus": ("error", "")}
    codes = sorted(int(p.read_text()) for p in (tmp_path / "multirun").glob("*/ladder_exit_code"))
    assert codes == [ExitCode.NO_RUNG_FITS, ExitCode.BROKEN_CONFIG]


def test_a_multirun_stopped_by_sigterm_stops_at_once_and_exits_143(tmp_path: Path) -> None:
    """SIGTERM during the first job: its trial is recorded `interrupted`, the second job never starts."""
    long = [o for o in TINY if not o.startswith("measure.window_s=")] + ["measure.window_s=600"]
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "-m",
        "case=amp_pi_plus,add_pi_plus",
        *long,
        "ladder.rungs=[64]",
        "sweep=cut",
        f"output_root={tmp_path}/out",
        f"hydra.sweep.dir={tmp_path}/multirun",
    ]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    trial = tmp_path / "out" / "case_gpu_bench_cut" / "trials" / "amp_pi_plus" / "default_e64_probe_1"
    progress = trial / "progress.jsonl"
    wait_for(lambda: progress.exists() and b'"iter"' in progress.read_bytes(), timeout_s=240)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.TERMINATED, out
    assert trials(tmp_path, "cut") == [("default", "64", "interrupted")]
    assert not (tmp_path / "out" / "case_gpu_bench_cut" / "trials" / "add_pi_plus").exists()
