"""The decision table on the seeds' own figures, and the seed's Fast Command A on a TSV that ladder wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ladder.core.caseclass import (
    CaseClass,
    classify_row,
)
from ladder.storage.tsv import write_best
from tests.helpers import DATA, REPO
from tests.unit.test_decide import SEED_ROWS, broken_row, row

ROOT = REPO


def seed_rows() -> list[dict[str, str]]:
    rows = [
        row(util=str(u), mem0=str(m0), mem1=str(m1)) | {"case": c, "num_envs": str(e)}
        for c, e, u, m0, m1, _ in SEED_ROWS
    ]
    return rows + [row(status="oom_or_nccl", util="0.4") | {"case": "broken_case", "reason": "cuda_oom"}]


def run_in(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True)


def test_seed_command_a_reads_our_tsv(tmp_path: Path) -> None:
    write_best(tmp_path / "output" / "train" / "case_gpu_bench_20260101_000000" / "best_by_case.tsv", seed_rows())
    out = run_in(tmp_path, sys.executable, str(DATA / "seed_001_command_a.txt")).stdout.splitlines()
    assert out[0] == "deepmimic_go2_ppo amp util 24.96 max_mem 3807 variant hiutil e 4096"
    assert out[-1] == "ase_humanoid amp util 66.92 max_mem 5480 variant hiutil e 1024"
    assert len(out) == len(SEED_ROWS)  # the failed row is left out, as the seed's filter does


def test_seed_summary_adds_class_and_action(tmp_path: Path) -> None:
    root = tmp_path / "output" / "train"
    write_best(root / "case_gpu_bench_20250101_000000" / "best_by_case.tsv", seed_rows()[:1])  # older sweep
    write_best(root / "case_gpu_bench_20260101_000000" / "best_by_case.tsv", seed_rows())
    out = run_in(tmp_path, sys.executable, str(ROOT / "scripts" / "seed_summary.py")).stdout.splitlines()
    assert out[0].endswith("case_gpu_bench_20260101_000000/best_by_case.tsv")
    assert out[1] == (
        "deepmimic_go2_ppo amp util 24.96 max_mem 3807 variant hiutil e 4096 class throughput/env-bound "
        "action run two single-GPU trials side by side instead of one dual-GPU trial"
    )
    assert "amp_pi_plus amp util 51.54 max_mem 24115 variant hiutil e 38 class VRAM-bound mixed" in "\n".join(out)
    assert out[-1].startswith("broken_case amp status oom_or_nccl cuda_oom class unstable")


def test_seed_readers_on_a_case_with_only_errors(tmp_path: Path) -> None:
    """The seed's one-liner leaves the error row out (it is not ok); seed_summary says to fix the configuration,
    and no reader finds a num_envs that looks like an answer."""
    sweep = tmp_path / "output" / "train" / "case_gpu_bench_20260101_000000"
    error = broken_row() | {"class": str(CaseClass.BROKEN), "action": classify_row(broken_row())[1]}
    write_best(sweep / "best_by_case.tsv", [*seed_rows()[:1], error])
    seed = run_in(tmp_path, sys.executable, str(DATA / "seed_001_command_a.txt")).stdout.splitlines()
    assert [line.split()[0] for line in seed] == [SEED_ROWS[0][0]]
    out = run_in(tmp_path, sys.executable, str(ROOT / "scripts" / "seed_summary.py")).stdout.splitlines()
    assert out[-1].startswith(
        "amp_pi_plus amp status error error class broken configuration action fix the configuration: FileNotFoundError"
    )
    assert "trials/amp_pi_plus/default_e256_probe_1" in out[-1] and " e " not in out[-1]
