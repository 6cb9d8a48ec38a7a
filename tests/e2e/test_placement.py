"""`placement=measure` end to end on CPU (ranks are cores): the pick as one 2-rank job against two 1-rank jobs side
by side, each on its own core and port, with the proxy and with a real trainer (stable-baselines3), through
`python -m ladder.search`; the answer in the console, best_by_case.tsv and the report; interrupted and resumed,
nothing measured twice."""

from __future__ import annotations

import contextlib
import glob
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from ladder.core.errors import ExitCode
from ladder.core.records import Phase, Status
from ladder.runner import launch
from ladder.storage import studies
from ladder.storage.tsv import read_tsv
from tests.helpers import DATA, LIGHT_PROXY, need_module, wait_for

PROXY = [
    "case=amp_pi_plus",
    "profile=[default]",
    "ladder.rungs=[64]",
    "measure=demo",
    "measure.window_s=4",
    "workload.nproc=2",
    LIGHT_PROXY,
]


def search(tmp_path: Path, sweep: str, *overrides: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "device=cpu",
        "reuse=false",
        "placement=measure",
        f"output_root={tmp_path}/out",
        f"sweep={sweep}",
        *overrides,
    ]
    return subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], code: int = 0) -> str:
    out, _ = proc.communicate(timeout=400)
    assert proc.returncode == code, out
    return out


def sweep_dir(tmp_path: Path, sweep: str) -> Path:
    return tmp_path / "out" / f"case_gpu_bench_{sweep}"


def trial_ids(pid: int) -> set[str]:
    found = set()
    for proc in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            found.add(proc.environ().get(launch.TRIAL_ID_VAR, ""))
    return found - {""}


def answered(tmp_path: Path, sweep: str, out: str) -> dict[str, str]:
    """The answer, where people look: the console's line, best_by_case.tsv's columns, the report's line."""
    (row,) = read_tsv(sweep_dir(tmp_path, sweep) / "best_by_case.tsv")
    assert row["placement"] in ("one_job", "per_device", "tie"), out
    assert float(row["machine_sps_one_job"]) == float(row["samples_per_s"]) > 0  # the pick's own window
    assert float(row["machine_sps_per_device"]) > 0
    assert "95% intervals" in row["placement_note"] and "run-to-run" in row["placement_note"]
    assert "samples/day" in row["placement_note"] and row["action"].count("measured: ") == 1
    line = next(x for x in out.splitlines() if x.startswith("placement: "))
    assert row["placement"] in line and "samples/s side by side" in line, out
    report = subprocess.run(
        [sys.executable, "-m", "ladder.report", str(sweep_dir(tmp_path, sweep))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stdout + report.stderr
    page = (sweep_dir(tmp_path, sweep) / "report.md").read_text()
    assert f"**Placement.** {row['placement']}: " in page
    print(line)  # the figures, for whoever reads the test's output
    return row


def test_the_proxy_measured_as_one_2_rank_job_against_two_1_rank_jobs_interrupted_and_resumed(tmp_path: Path) -> None:
    cut = search(tmp_path, "p", *PROXY)
    running = str(sweep_dir(tmp_path, "p") / "trials" / "*" / "*_placement_*" / "progress.jsonl")
    wait_for(lambda: sum(1 for p in glob.glob(running) if Path(p).read_text().strip()) == 2, timeout_s=240)
    ids = trial_ids(cut.pid)
    cut.send_signal(signal.SIGINT)
    finish(cut, ExitCode.INTERRUPTED)
    assert {i: launch.leftovers(i) for i in ids} == {i: [] for i in ids}  # both twins reaped

    out = finish(search(tmp_path, "p", *PROXY))
    records = studies.sweep_records(studies.open_storage_at(str(sweep_dir(tmp_path, "p"))))
    probes = [r for r in records if r.phase is Phase.PROBE]
    twins = [r for r in records if r.phase is Phase.PLACEMENT]
    assert len(probes) == 1 and probes[0].info["nproc"] == "2", out  # the walk's trial is not run again
    assert [r.status for r in twins].count(Status.INTERRUPTED) == 2, out  # the interrupted pair ...
    done = [r for r in twins if r.status is Status.OK]
    assert len(done) == 2 and {r.info["nproc"] for r in done} == {"1"}, out  # ... ran again, once
    assert {r.info["devices"] for r in done} == {"0", "1"}  # each on its own core
    assert len({r.info["port"] for r in done}) == 2
    row = answered(tmp_path, "p", out)

    again = finish(search(tmp_path, "p", *PROXY))
    after = studies.sweep_records(studies.open_storage_at(str(sweep_dir(tmp_path, "p"))))
    assert len(after) == len(records), again  # measured once: a resume reuses it
    assert read_tsv(sweep_dir(tmp_path, "p") / "best_by_case.tsv")[0]["placement"] == row["placement"]


def test_a_real_trainer_sb3_measured_as_one_2_core_job_against_two_1_core_jobs(tmp_path: Path) -> None:
    need_module("stable_baselines3", "pip install stable-baselines3 (the test extra)")
    trainer = DATA / "trainers" / "sb3_procs.py"
    command = ",".join(["'{python}'", str(trainer), "--n-envs", "'{num_envs}'", "--procs", "'{nproc}'"])
    sb3 = [
        "case=amp_pi_plus",
        "workload.kind=command",
        f"workload.command=[{command}]",
        "workload.progress=regex",
        "workload.progress_regex=sb3",
        "workload.nproc=2",
        "objective=samples_per_s",
        "ladder.rungs=[4]",
        "profile=[default]",
        "measure.window_s=3",
        "measure.warmup_iters=2",
        "measure.stable_k=2",
        "measure.stable_tol=1.0",
        "measure.warmup_timeout_s=20",
        "measure.extend_unstable=false",
    ]
    out = finish(search(tmp_path, "s", *sb3))
    records = studies.sweep_records(studies.open_storage_at(str(sweep_dir(tmp_path, "s"))))
    twins = [r for r in records if r.phase is Phase.PLACEMENT]
    assert [r.status for r in twins] == [Status.OK, Status.OK], out
    assert {r.info["devices"] for r in twins} == {"0", "1"}
    answered(tmp_path, "s", out)
    again = finish(search(tmp_path, "s", *sb3))
    assert len(studies.sweep_records(studies.open_storage_at(str(sweep_dir(tmp_path, "s"))))) == len(records), again
