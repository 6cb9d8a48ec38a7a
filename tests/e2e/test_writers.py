"""Many writers, measured: eight sweeps of eight cases started at once on one sweep folder and one storage (the
folder's journal, or a real PostgreSQL server), each walking its own ladder with a small real trainer. Every
trial is in storage once and in `trials.tsv` once, every trial folder has its row, and `best_by_case.tsv` has one row
per case: nothing lost, nothing written twice."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.helpers import DATA, SHORT_WINDOW

WRITERS = 8
CASES = [f"writer_{i}" for i in range(WRITERS)]


def sweep_argv(tmp_path: Path, case: str, storage: str | None) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ladder.search",
        "workload.kind=command",
        f"case={case}",
        f'workload.cmd="python {DATA / "trainers" / "near_cap.py"} {{num_envs}} progress.jsonl --cap-mb 640"',
        "workload.progress=jsonl",
        "ladder.rungs=[63,32]",  # e63 comes within a few percent of its card: run twice, then e32
        "profile=[default]",
        "device=cpu",
        *SHORT_WINDOW,
        "sweep=many",
        f"output_root={tmp_path}/out",
        *([f"storage={storage}"] if storage else []),
    ]


@pytest.mark.parametrize("where", ["journal", "postgresql"])
def test_eight_sweeps_of_eight_cases_on_one_folder_and_one_storage_lose_no_row_and_write_none_twice(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    storage = request.getfixturevalue("pg_url") if where == "postgresql" else None
    logs = [open(tmp_path / f"{case}.log", "w") for case in CASES]  # noqa: SIM115 (closed below)
    try:
        sweeps = [
            subprocess.Popen(sweep_argv(tmp_path, case, storage), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
            for case, log in zip(CASES, logs, strict=True)
        ]
        codes = [s.wait(timeout=600) for s in sweeps]
    finally:
        for log in logs:
            log.close()
    outputs = {case: (tmp_path / f"{case}.log").read_text() for case in CASES}
    assert codes == [ExitCode.PICK_FOUND] * WRITERS, outputs

    root = tmp_path / "out" / "case_gpu_bench_many"
    trials = read_tsv(root / "trials.tsv")
    keys = Counter((t["case"], t["trial_dir"]) for t in trials)
    assert [k for k, n in keys.items() if n > 1] == []  # no row twice
    on_disk = {(d.parent.name, f"trials/{d.parent.name}/{d.name}") for d in root.glob("trials/*/*") if d.is_dir()}
    assert set(keys) == on_disk  # every trial that ran has its row, and every row its trial
    assert sorted({case for case, _ in keys}) == CASES
    best = read_tsv(root / "best_by_case.tsv")
    assert sorted(r["case"] for r in best) == CASES  # one row per case
    assert all((r["status"], r["num_envs"]) == ("ok", "32") for r in best)
    assert len(trials) == 3 * WRITERS  # e63 twice (near its cap, so run once more), e32 once: 24 trials, 8 writers

    source = storage or str(root)  # what storage holds, read alone: the same trials as the TSV, once each
    rebuilt = tmp_path / "from_storage.tsv"
    done = subprocess.run(
        [sys.executable, "-m", "ladder.merge", "--trials-from-storage", source, "--sweep", "many", str(rebuilt)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stored = Counter((t["case"], t["trial_dir"], t["status"]) for t in read_tsv(rebuilt))
    assert stored == Counter((t["case"], t["trial_dir"], t["status"]) for t in trials)
