"""Crash-safe resume and shared storage, end to end with `python -m ladder.search` (real torchrun trials on CPU).

A sweep killed with SIGKILL mid-trial and resumed ends with the records of a sweep never interrupted: no finished
trial lost or duplicated, no process of the killed trial left. Two sweeps of different cases share one PostgreSQL
storage and one results folder, and the storage password appears nowhere they print or write.
"""

from __future__ import annotations

import contextlib
import glob
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

from ladder import launch, store
from ladder.records import Phase, Reason, Status, TrialRecord
from ladder.results import read_tsv
from ladder.search import known_cases
from tests.test_store import wait_for

FIRST = "amp_pi_plus"
FAST = ["profile=[default]", "ladder.rungs=[256,64]", "measure.window_s=3", "measure.warmup_iters=2",
        "measure.stable_tol=0.5"]  # fmt: skip

# The entry point without Hydra's command line, for a case that is not a file in conf/case: the same composition,
# validation (less the known-case check) and sweep as `python -m ladder.search`.
COMPOSED = textwrap.dedent(
    """
    import sys
    from hydra import compose, initialize_config_dir
    from ladder.config import register, settings_from
    from ladder.search import CONF_DIR, execute
    register()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=sys.argv[1:])
    sys.exit(execute(settings_from(cfg)))
    """
)


def search(cwd: Path, *overrides: str, composed: bool = False) -> subprocess.Popen[str]:
    entry = ["-c", COMPOSED] if composed else ["-m", "ladder.search"]
    # the CPU path on any host; each sweep runs its own trials (these tests compare sweeps)
    argv = [sys.executable, *entry, "device=cpu", "reuse=false", f"output_root={cwd}/output/train", *overrides]
    return subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], timeout_s: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, out
    return out


def sweep_dir(cwd: Path, name: str) -> Path:
    return cwd / "output" / "train" / f"case_gpu_bench_{name}"


def trial_ids(pid: int) -> set[str]:
    """The LADDER_TRIAL_ID of every process below `pid`."""
    found = set()
    for proc in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            found.add(proc.environ().get(launch.TRIAL_ID_VAR, ""))
    return found - {""}


def outcome(records: list[TrialRecord], interrupted: bool = False) -> list[tuple[str, str, str, str]]:
    keep = [r for r in records if interrupted or r.status is not Status.INTERRUPTED]
    return [(r.case, r.variant, str(r.num_envs), str(r.status)) for r in keep]


def tsv_outcome(path: Path) -> list[tuple[str, str, str, str]]:
    return [(r["case"], r["variant"], r["num_envs"], r["status"]) for r in read_tsv(path)]


def test_sigkill_mid_trial_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    finish(search(tmp_path, f"case={FIRST}", *FAST, "sweep=whole"))
    cut = search(tmp_path, f"case={FIRST}", *FAST, "sweep=cut")
    progress = str(sweep_dir(tmp_path, "cut") / "trials" / "*" / "*" / "progress.jsonl")
    wait_for(lambda: any(Path(p).read_text().strip() for p in glob.glob(progress)), timeout_s=180)
    ids = trial_ids(cut.pid)
    assert ids, "the running trial's processes carry its id"
    cut.kill()
    cut.communicate(timeout=30)

    resumed = finish(search(tmp_path, f"case={FIRST}", *FAST, "sweep=cut"))
    assert {i: launch.leftovers(i) for i in ids} == {i: [] for i in ids}, resumed
    whole = store.sweep_records(store.open_storage_at(str(sweep_dir(tmp_path, "whole"))))
    got = store.sweep_records(store.open_storage_at(str(sweep_dir(tmp_path, "cut"))))
    assert outcome(got) == outcome(whole)  # none lost, none duplicated
    assert [r.status for r in got].count(Status.INTERRUPTED) == 1
    assert len({r.number for r in got}) == len(got)
    assert tsv_outcome(sweep_dir(tmp_path, "cut") / "trials.tsv") == outcome(got, interrupted=True)
    best = [tsv_outcome(sweep_dir(tmp_path, name) / "best_by_case.tsv") for name in ("whole", "cut")]
    assert best[0] == best[1] and len(best[0]) == 1


def test_resume_latest_picks_the_newest_sweep_folder_and_redoes_nothing(tmp_path: Path) -> None:
    older, newer = sweep_dir(tmp_path, "20260101_000000"), sweep_dir(tmp_path, "mine")
    older.mkdir(parents=True)
    os.utime(older, (1_700_000_000, 1_700_000_000))
    study = store.open_study(store.open_storage(None, newer), FIRST, "mine")
    trial = store.begin(study, "default", 64, ("default", "hiutil"), {"case": FIRST, "method": "amp"})
    done = TrialRecord(FIRST, "amp", "default", 64, Phase.PROBE, Status.OK, Reason.NONE, "", {"min_avg_util": 40.0},
                       {"trial_dir": "trials/amp_pi_plus/default_e64_probe_1"})  # fmt: skip
    store.finish(study, trial, done, 40.0)
    out = finish(search(tmp_path, f"case={FIRST}", "profile=[default]", "ladder.rungs=[64]", "resume=latest"))
    assert "sweep mine" in out
    assert [r.status for r in store.records(study)] == [Status.OK]
    assert not older.joinpath("journal.log").exists()


def second_case() -> tuple[str, bool]:
    """Another case for the second sweep: a conf/case file when there is one, else a renamed copy of the first
    (which only the composed entry point accepts: the command line rejects a case with no file)."""
    others = [c for c in known_cases() if c != FIRST]
    same_robot = [c for c in others if c.endswith("_pi_plus")]
    return ((same_robot or others)[0], False) if others else (f"{FIRST}_copy", True)


def test_two_sweeps_on_different_cases_share_one_postgresql_storage_and_results(tmp_path: Path, pg_url: str) -> None:
    other, composed = second_case()
    shared = [*FAST, "sweep=shared", f"storage={pg_url}"]
    first = search(tmp_path, f"case={FIRST}", *shared)
    second = search(tmp_path, f"case={FIRST}", f"case.name={other}", *shared, composed=True) if composed else \
        search(tmp_path, f"case={other}", *shared)  # fmt: skip
    outs = [finish(first), finish(second)]

    root = sweep_dir(tmp_path, "shared")
    records = store.sweep_records(store.open_storage(pg_url, root), "shared")
    assert {r.case for r in records} == {FIRST, other}
    assert all(r.status is not Status.INTERRUPTED for r in records)
    assert sorted(tsv_outcome(root / "trials.tsv")) == sorted(outcome(records))  # the last writer saw them all
    assert sorted(r["case"] for r in read_tsv(root / "best_by_case.tsv")) == sorted([FIRST, other])
    assert not (root / "journal.log").exists()

    password = pg_url.split(":")[2].split("@")[0]
    assert all(password not in out for out in outs)
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert leaks == []
