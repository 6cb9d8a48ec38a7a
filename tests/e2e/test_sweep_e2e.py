"""End to end: `python -m ladder.search` launches real trials (2 CPU ranks, gloo) under the emulated cap."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ladder.core.errors import ExitCode
from ladder.runner import warm
from ladder.storage.tsv import read_tsv
from tests.helpers import LIGHT_PROXY, wait_for
from tests.unit.test_results import SEED_ONE_LINER

# a 3 s window of 2 points, never extended: the probe's window stays short of a 5 s confirmation on a busy machine
FAST = [
    "profile=[default]",
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "measure.min_window_iters=2",
    "measure.extend_unstable=false",
    LIGHT_PROXY,
]
# The window opens at iteration 2 whatever the machine's speed (one step time is steady by itself, and the warm-up
# timeout is out of reach), so it starts on a real point and closes on the first point past its end: it always holds
# a measured interval, and its measured length is at least its set length. On a loaded machine the demo's 30 s warm-up
# timeout opened it ungated instead, between two points, and a slow trainer could close it with no interval inside.
GATED = ["measure.stable_k=1", "measure.warmup_timeout_s=150"]
# one rank, started directly (the first test walks the two-rank torchrun path): what the tests below check is the
# sweep around the trials, not their ranks
ONE = "workload.nproc=1"


def search(tmp_path: Path, *overrides: str, **kwargs) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "case=amp_pi_plus",
        "device=cpu",  # the CPU path (gloo, RLIMIT_DATA cap) also on a host with a GPU
        f"output_root={tmp_path}/output/train",
        *overrides,
    ]
    return subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)


def finish(proc: subprocess.Popen[str], timeout_s: float = 240) -> str:
    out, _ = proc.communicate(timeout=timeout_s)
    return out


def sweep_dir(tmp_path: Path, name: str) -> Path:
    return tmp_path / "output" / "train" / f"case_gpu_bench_{name}"


def trial_processes(tmp_path: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(tmp_path) in part for part in proc.info["cmdline"] or []) and proc.pid != os.getpid():
            found.append(proc)
    return found


def test_sweep_steps_down_from_a_real_oom_and_records_the_fitting_rung(tmp_path: Path) -> None:
    proc = search(tmp_path, *FAST, *GATED, "ladder.rungs=[256,64]", "sweep=e2e")
    out = finish(proc)
    assert proc.returncode == 0, out
    root = sweep_dir(tmp_path, "e2e")
    trials = read_tsv(root / "trials.tsv")
    assert [(t["num_envs"], t["status"], t["reason"]) for t in trials] == [
        ("256", "oom_or_nccl", "host_oom"),
        ("64", "ok", ""),
    ]
    assert "DefaultCPUAllocator" in trials[0]["evidence"]
    best = read_tsv(root / "best_by_case.tsv")
    assert len(best) == 1
    row = best[0]
    assert (row["case"], row["method"], row["variant"], row["num_envs"], row["status"]) == (
        "amp_pi_plus",
        "amp",
        "default",
        "64",
        "ok",
    )
    assert 0 < float(row["min_avg_util"]) <= 100 * 1.5  # a rank's CPU% (one thread each, some runtime threads)
    assert float(row["max_mem0"]) > 300 and float(row["max_mem1"]) > 300  # torch + the 343 MiB replay buffer
    assert float(row["samples_per_s"]) > 0
    assert list(row)[:8] == ["case", "method", "variant", "num_envs", "status", "min_avg_util", "max_mem0", "max_mem1"]
    trial = root / "trials" / "amp_pi_plus" / "default_e64_probe_1"
    for name in ("cmd.txt", "env.txt", "stdout.log", "samples.csv", "progress.jsonl", "agent.yaml", "verdict.json"):
        assert (trial / name).is_file(), name
    assert "NCCL_P2P_DISABLE=1" in (trial / "env.txt").read_text()
    assert "--emulate-mem-mb 614" in (trial / "cmd.txt").read_text()
    seed = subprocess.run(
        [sys.executable, "-c", SEED_ONE_LINER], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert seed.stdout.startswith("amp_pi_plus amp util ") and seed.stdout.rstrip().endswith("variant default e 64")
    assert "best: amp_pi_plus    default  e64    ok" in out
    if os.environ.get(warm.SHARED_VAR):  # the test session's starter (tests/conftest.py): the ranks were forked there
        assert "warm starter: shared" in out

    again = search(tmp_path, *FAST, "ladder.rungs=[256,64]", "sweep=e2e")
    out2 = finish(again)
    assert again.returncode == 0 and "2 finished trial(s) reused" in out2
    found = out2.split("found in sweep storage: 2 trial(s) this sweep recorded before (2 finished, not run again)\n")
    assert len(found) == 2, out2  # then both rows, as the first run printed them
    assert found[1].startswith("amp_pi_plus    default  e256   oom_or_nccl") and "default  e64    ok" in found[1]
    assert len(read_tsv(root / "trials.tsv")) == 2  # nothing redone
    assert trial_processes(tmp_path) == []

    # another sweep of the same configuration on this machine reuses both trials and launches nothing
    other = search(tmp_path, *FAST, *GATED, "ladder.rungs=[256,64]", "sweep=e2e_b")
    out3 = finish(other)
    assert other.returncode == 0 and "2 trial(s) reused from earlier sweeps" in out3, out3
    assert "(reused from e2e#0)" in out3 and "(reused from e2e#1)" in out3
    reused = read_tsv(sweep_dir(tmp_path, "e2e_b") / "trials.tsv")
    assert [(t["num_envs"], t["status"], t["reused_from"], t["sweep"]) for t in reused] == [
        ("256", "oom_or_nccl", "e2e#0", "e2e_b"),
        ("64", "ok", "e2e#1", "e2e_b"),
    ]
    assert (sweep_dir(tmp_path, "e2e_b") / reused[1]["trial_dir"] / "progress.jsonl").is_file()  # its own copy
    (best_b,) = read_tsv(sweep_dir(tmp_path, "e2e_b") / "best_by_case.tsv")
    assert (best_b["num_envs"], best_b["samples_per_s"]) == ("64", row["samples_per_s"])

    # a different card (another emulated cap) is other hardware: its trial runs
    changed = search(tmp_path, *FAST, *GATED, "ladder.rungs=[256]", "sweep=e2e_c", "workload.emulate_gpu_mem_gb=0.65")
    out4 = finish(changed)
    assert changed.returncode == ExitCode.NO_RUNG_FITS and "reused" not in out4, out4  # e256 alone: it fails there
    assert (sweep_dir(tmp_path, "e2e_c") / "trials" / "amp_pi_plus" / "default_e256_probe_1").is_dir()

    # a smaller card: e256 ran out of memory under a larger one (0.6 GB, and 0.65 GB), so it is not launched
    smaller = search(tmp_path, *FAST, "ladder.rungs=[256]", "sweep=e2e_d", "workload.emulate_gpu_mem_gb=0.55")
    out5 = finish(smaller)
    why = "ran out of memory under a larger card (0.6 GB, e2e#0): it cannot fit under 0.55 GB"
    assert smaller.returncode == ExitCode.NO_RUNG_FITS and why in out5, out5
    assert "1 rung(s) not launched" in out5, out5
    (carried,) = read_tsv(sweep_dir(tmp_path, "e2e_d") / "trials.tsv")
    assert (carried["status"], carried["reused_from"], carried["why"]) == ("oom_or_nccl", "e2e#0", why)
    assert carried["emulate_gpu_mem_gb"] == "0.6"  # the card it ran under, not ours


def test_sigterm_kills_the_trial_and_resume_runs_it_again(tmp_path: Path) -> None:
    proc = search(tmp_path, *FAST, ONE, "ladder.rungs=[64]", "sweep=stop", "measure.window_s=600")
    progress = sweep_dir(tmp_path, "stop") / "trials" / "amp_pi_plus" / "default_e64_probe_1" / "progress.jsonl"
    wait_for(lambda: progress.exists() and b'"iter"' in progress.read_bytes())
    proc.send_signal(signal.SIGTERM)
    out = finish(proc, timeout_s=30)
    assert proc.returncode == 143, out  # 128 + SIGTERM: a requeueing wrapper tells it from a Ctrl-C (130)
    assert "resume with" in out
    trials = read_tsv(sweep_dir(tmp_path, "stop") / "trials.tsv")
    assert [(t["num_envs"], t["status"]) for t in trials] == [("64", "interrupted")]
    assert trial_processes(tmp_path) == []

    # resumed at a 3 s window (the first run's was 600 s): a change of settings, accepted as such; the trial
    # interrupted under the old settings is set aside with the rest (its folder stays), not "to run again"
    resumed = search(tmp_path, *FAST, ONE, "ladder.rungs=[64]", "sweep=stop", "settings_change=accept")
    out2 = finish(resumed)
    assert resumed.returncode == 0, out2
    assert "1 earlier trial(s) no longer count" in out2 and "to run again" not in out2, out2
    trials = read_tsv(sweep_dir(tmp_path, "stop") / "trials.tsv")
    assert [(t["num_envs"], t["status"], t["trial_dir"]) for t in trials] == [
        ("64", "ok", "trials/amp_pi_plus/default_e64_probe_2"),
    ]
    assert (sweep_dir(tmp_path, "stop") / "trials" / "amp_pi_plus" / "default_e64_probe_1" / "progress.jsonl").is_file()
    # a dry run names the folder of the trial that answers for e64 (probe_2), not the interrupted first one
    dry = finish(search(tmp_path, *FAST, ONE, "ladder.rungs=[64]", "sweep=stop", "dry_run=true"))
    assert "default_e64_probe_2)  [not launched: already run in this sweep (ok)]" in dry, dry


@pytest.mark.parametrize(
    ("override", "message"),
    [("case=nope", "unknown case 'nope'; known: add_g1, "), ("ladder.rungs=[1,2]", "strictly descending")],
    ids=["unknown-case", "ascending-ladder"],
)
def test_bad_input_is_a_clear_error_and_launches_nothing(tmp_path: Path, override: str, message: str) -> None:
    proc = search(tmp_path, override)
    out = finish(proc, timeout_s=60)
    assert proc.returncode == 2 and message in out
    assert not list((tmp_path / "output" / "train").glob("case_gpu_bench_*"))


def test_confirm_runs_the_pick_long_and_the_best_row_carries_its_own_figures(tmp_path: Path) -> None:
    proc = search(tmp_path, *FAST, *GATED, ONE, "ladder.rungs=[64]", "sweep=confirm", "confirm_s=10")
    out = finish(proc)
    assert proc.returncode == 0, out
    root = sweep_dir(tmp_path, "confirm")
    trials = read_tsv(root / "trials.tsv")
    assert [(t["num_envs"], t["phase"], t["status"]) for t in trials] == [
        ("64", "probe", "ok"),
        ("64", "confirm", "ok"),
    ]
    assert float(trials[0]["window_s"]) >= 3 and float(trials[1]["window_s"]) >= 10  # each its own window, or longer
    (best,) = read_tsv(root / "best_by_case.tsv")
    own = ("samples_per_s", "samples_per_s_lo", "samples_per_s_hi", "window_s", "min_avg_util")
    assert best["phase"] == "confirm" and float(best["samples_per_s"]) > 0
    assert [best[k] for k in own] == [trials[1][k] for k in own]  # the confirmation's figures, not the probe's


def test_dry_run_shows_the_launches_with_a_usable_port_and_launches_nothing(tmp_path: Path) -> None:
    out = finish(search(tmp_path, "dry_run=true", "sweep=dry"))
    assert "16 trial(s) the walk could launch" in out and "expected" in out, out
    # the proxy's ranks: ladder's rank launcher (--port), or torchrun (--master-port)
    ports = {m[1] for line in out.splitlines() if (m := re.search(r" --(?:master-)?port (\d+)", line))}
    assert len(ports) == 1 and int(ports.pop()) > 0, out  # a port free when shown, not a placeholder
    assert not (sweep_dir(tmp_path, "dry") / "trials").exists()
    assert not (sweep_dir(tmp_path, "dry") / "journal.log").exists()


def test_repeats_measure_a_fitting_rung_again_and_the_best_row_is_their_median(tmp_path: Path) -> None:
    proc = search(
        tmp_path,
        *FAST,
        *GATED,
        ONE,
        "ladder.rungs=[256,64]",
        "sweep=rep",
        "measure.repeats=3",
        "objective=samples_per_s",
        "descent_gain_max=1.0",
    )
    out = finish(proc)
    assert proc.returncode == 0, out
    root = sweep_dir(tmp_path, "rep")
    trials = read_tsv(root / "trials.tsv")
    assert [(t["num_envs"], t["status"]) for t in trials] == [("256", "oom_or_nccl"), *[("64", "ok")] * 3], out
    # the windows that count: those whose own interval was narrow, or all where none was (`pick.median_repeats`)
    narrow = [t for t in trials[1:] if t["window_unstable"] != "1" or t.get("cut") == "1"] or trials[1:]
    values = sorted(float(t["samples_per_s"]) for t in narrow)
    (row,) = read_tsv(root / "best_by_case.tsv")
    assert float(row["samples_per_s"]) == values[(len(values) - 1) // 2]  # the middle one, never the best of three
    assert row["repeats"] == "3" and row["unstable"] in ("0", "1") and float(row["repeat_spread"]) >= 0
    assert [p.name for p in sorted((root / "trials" / "amp_pi_plus").iterdir())] == [
        "default_e256_probe_1",
        "default_e64_probe_1",
        "default_e64_probe_2",
        "default_e64_probe_3",
    ]
