"""TSV columns, the best pick, merging, and the seed's own reader."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from ladder.core.records import Status, TrialRecord
from ladder.core.rows import best_row
from ladder.runner.machine import code_version
from ladder.storage.tsv import lock_path, read_tsv, write_best, write_trials
from tests.helpers import REPO
from tests.unit.test_results import SEED_ONE_LINER, rec


def test_write_trials_calls_a_loader_inside_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "trials.tsv"
    seen: list[bool] = []

    def load() -> list[TrialRecord]:
        seen.append(_held(path))
        return [rec("default", 64, Status.OK, 33.0)]

    write_trials(path, load)
    assert seen == [True]
    assert [r["num_envs"] for r in read_tsv(path)] == ["64"]


def _held(path: Path) -> bool:
    """Whether another process would find the lock taken now."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from filelock import FileLock, Timeout\n"
            "try:\n    FileLock(sys.argv[1], timeout=0).acquire()\nexcept Timeout:\n    sys.exit(3)",
            lock_path(path),
        ]
    )
    return probe.returncode == 3


def test_code_version_is_the_checkout_commit_or_the_package_version(tmp_path: Path) -> None:
    here = REPO
    inside = code_version(here)
    if (here / ".git").exists():
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
        assert head.startswith(inside.split("-dirty")[0])  # `-dirty.<hash of the edit>` where the tree is edited
    assert code_version(tmp_path) == "ladder==" + metadata.version("ladder")


def test_written_tsv_is_read_by_the_seed_one_liner(tmp_path: Path) -> None:
    sweep = tmp_path / "output" / "train" / "case_gpu_bench_20260101_000000"
    write_best(sweep / "best_by_case.tsv", [best_row(rec("hiutil", 38, Status.OK, 51.54), 5)])
    write_best(sweep / "best_by_case.tsv", [best_row(rec("default", 8, Status.OK, 20.0, n_dev=1), 2) | {"case": "x"}])
    out = subprocess.run(
        [sys.executable, "-c", SEED_ONE_LINER], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == [
        "x amp util 20 max_mem 1000 variant default e 8",
        "amp_pi_plus amp util 51.54 max_mem 1001 variant hiutil e 38",
    ]
