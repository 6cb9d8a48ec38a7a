"""The whole bench from one command (`case=all:<robot>`): every case of the robot in one sweep, in the bench's
order, saying where it stands on the terminal and in bench.log; the same command resumes it with every finished
case reused; its dry run is one table. Real proxy trials, one rank, short windows, a ladder of one rung."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ladder.storage.tsv import read_tsv
from tests.helpers import LIGHT_PROXY

TINY = [
    "device=cpu",
    "profile=[default]",
    "ladder.rungs=[64]",
    "measure.window_s=2",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "workload.nproc=1",
    LIGHT_PROXY,
]
BENCH = "case=all:a*_pi_plus"  # add_pi_plus and amp_pi_plus: a glob over the names


def bench(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        BENCH,
        "sweep=b1",
        f"output_root={tmp_path}/out",
        f"hydra.sweep.dir={tmp_path}/multirun",
        *TINY,
        *extra,
    ]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_a_bench_runs_its_cases_in_one_sweep_says_where_it_stands_and_resumes_with_the_same_command(
    tmp_path: Path,
) -> None:
    first = bench(tmp_path)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out
    assert "bench: 2 case(s) into sweep b1" in out and "in this order: add_pi_plus, amp_pi_plus" in out
    root = tmp_path / "out" / "case_gpu_bench_b1"
    best = read_tsv(root / "best_by_case.tsv")
    assert sorted((r["case"], r["sweep"]) for r in best) == [("add_pi_plus", "b1"), ("amp_pi_plus", "b1")]
    assert [r["case"] for r in read_tsv(root / "bench.tsv")] == ["add_pi_plus", "amp_pi_plus"]
    told = (root / "bench.log").read_text()
    assert "bench: case 1/2 add_pi_plus: starting; 0 done" in told
    assert "bench: case 2/2 amp_pi_plus: done; 2 done" in told
    assert "bench:   add_pi_plus: default e" in told and "bench:   amp_pi_plus: default e" in told
    launched = len(read_tsv(root / "trials.tsv"))

    again = bench(tmp_path)  # the same command: every finished case reused, nothing launched
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(read_tsv(root / "trials.tsv")) == launched
    assert "bench: case 2/2 amp_pi_plus: finished before: its trials are reused" in again.stdout + again.stderr

    plan = bench(tmp_path, "dry_run=true")  # the plan of the finished bench: one table, nothing left to launch
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    assert lines[0].startswith("bench plan: sweep b1")
    rows = {ln.split()[1]: ln.split() for ln in lines[2:4]}
    assert set(rows) == {"add_pi_plus", "amp_pi_plus"} and all(r[2] == "default" for r in rows.values())
    assert any(ln.startswith("first rungs of amp_pi_plus: ") for ln in lines)
    assert len(read_tsv(root / "trials.tsv")) == launched
