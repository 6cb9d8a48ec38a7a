"""Shared results: concurrent writers lose no row, `python -m ladder.merge` merges machines' files by the same rule,
and trials.tsv is rebuilt from the storage alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.storage import studies, tsv
from ladder.storage.tsv import read_tsv, write_best
from tests.unit.test_merge import row
from tests.unit.test_results import SEED_ONE_LINER

# One sweep's writes: each row its own locked, atomic merge into the shared file, all writers released at once.
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ladder.storage.tsv import write_best
    out, go, who, n = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    while not go.exists():
        time.sleep(0.001)
    for k in range(n):
        write_best(out, [{"case": f"{who}_{k}", "method": "amp", "variant": "default", "num_envs": "64",
                          "status": "ok", "min_avg_util": "50", "max_mem0": str(k), "gpu_name": "cpu", "n_gpus": "2",
                          "host": who, "finished_at": "2026-01-01T00:00:00+00:00"}])
    """
)


# A reader beside them: every file it opens is whole (a header and full rows), and rows never go missing.
READER = textwrap.dedent(
    """
    import csv, sys, time
    from pathlib import Path
    out, expected = Path(sys.argv[1]), int(sys.argv[2])
    seen, reads, deadline = 0, 0, time.monotonic() + 120
    while seen < expected and time.monotonic() < deadline:
        if not out.exists():
            continue
        lines = out.read_text().splitlines()
        rows = list(csv.reader(lines, delimiter="\\t"))
        assert rows and rows[0][:2] == ["case", "method"], f"torn header: {lines[:1]}"
        assert all(len(r) == len(rows[0]) for r in rows), "a torn row"
        assert len(rows) - 1 >= seen, f"rows lost: {len(rows) - 1} after {seen}"
        seen, reads = len(rows) - 1, reads + 1
    print(seen, reads)
    """
)

WRITERS, ROWS_EACH = 8, 12


def python(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_eight_processes_merging_into_one_file_lose_no_row(tmp_path: Path) -> None:
    out, go = tmp_path / "shared" / "best_by_case.tsv", tmp_path / "go"
    expected = WRITERS * ROWS_EACH
    argv = [[sys.executable, "-c", WRITER, str(out), str(go), f"w{i}", str(ROWS_EACH)] for i in range(WRITERS)]
    procs = [subprocess.Popen(a, stderr=subprocess.PIPE, text=True, umask=0o022) for a in argv]
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(out), str(expected)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * WRITERS, errors
    seen, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    assert int(seen.split()[0]) == expected
    rows = read_tsv(out)
    assert sorted(r["case"] for r in rows) == sorted(f"w{i}_{k}" for i in range(WRITERS) for k in range(ROWS_EACH))
    # no temp file left behind; the lock is hidden; others can read the result (umask 022 in the writers)
    assert sorted(p.name for p in out.parent.iterdir()) == [".best_by_case.tsv.lock", "best_by_case.tsv"]
    assert out.stat().st_mode & 0o777 == 0o644


def machine_files(tmp_path: Path) -> list[Path]:
    a = [
        row("amp_pi_plus", "RTX 4090", "ok", 40, "2026-01-01T10:00:00+00:00", "a"),
        row("add_pi_plus", "RTX 4090", "oom_or_nccl", 32, "2026-01-03T10:00:00+00:00", "a"),
    ]
    b = [
        row("amp_pi_plus", "RTX 4090", "ok", 38, "2026-01-02T10:00:00+00:00", "b"),
        row("amp_pi_plus", "H100", "ok", 256, "2026-01-01T09:00:00+00:00", "b"),
        row("add_pi_plus", "RTX 4090", "ok", 40, "2026-01-01T08:00:00+00:00", "b"),
    ]
    paths = []
    for name, rows in (("a", a), ("b", b)):
        path = tmp_path / name / "best_by_case.tsv"
        write_best(path, rows)
        paths.append(path)
    return paths


def test_merge_cli_applies_the_rule_in_any_order(tmp_path: Path) -> None:
    a, b = machine_files(tmp_path)
    merged = tmp_path / "output" / "train" / "case_gpu_bench_team" / "best_by_case.tsv"
    other = tmp_path / "other.tsv"
    done = python("-m", "ladder.merge", str(merged), str(a), str(b))
    assert done.returncode == 0, done.stderr
    assert "3 row(s) after merging 2 file(s)" in done.stdout
    assert python("-m", "ladder.merge", str(other), str(b), str(a), str(b)).returncode == 0
    assert merged.read_text() == other.read_text()
    again = python("-m", "ladder.merge", str(merged), str(other), str(a))
    assert again.returncode == 0 and "3 row(s) after merging 2 file(s) into its 3 row(s)" in again.stdout
    assert merged.read_text() == other.read_text()  # merging again changes nothing
    got = [(r["case"], r["gpu_name"], r["num_envs"], r["status"], r["host"]) for r in read_tsv(merged)]
    assert got == [
        ("add_pi_plus", "RTX 4090", "40", "ok", "b"),  # ok beats a newer failure
        ("amp_pi_plus", "H100", "256", "ok", "b"),  # another card: its own row
        ("amp_pi_plus", "RTX 4090", "38", "ok", "b"),  # the newer of two ok rows
    ]
    seed = python("-c", SEED_ONE_LINER, cwd=tmp_path)
    assert seed.returncode == 0 and len(seed.stdout.splitlines()) == 3


def test_merge_cli_refuses_what_is_not_a_best_by_case_file(tmp_path: Path) -> None:
    trials = tmp_path / "trials.tsv"
    trials.write_text("number\tstatus\n0\tok\n")
    real_trials = tmp_path / "sweep" / "trials.tsv"  # the columns a sweep's trials.tsv starts with
    real_trials.parent.mkdir()
    real_trials.write_text("number\tcase\tmethod\tvariant\tnum_envs\tstatus\n0\tamp_pi_plus\tamp\tdefault\t64\tok\n")
    for args, message in (
        ([str(trials)], "no `case` column"),
        ([str(real_trials)], "is a trials.tsv (a row per trial, no class or action), not a best_by_case.tsv"),
        ([str(real_trials.parent)], f"{real_trials.parent} is a folder"),
        ([str(tmp_path / "nope.tsv")], "no such file"),
        ([], "at least one IN"),
    ):
        done = python("-m", "ladder.merge", str(tmp_path / "out.tsv"), *args)
        assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "out.tsv").exists()


def trial_record(case: str, num_envs: int, status: Status) -> TrialRecord:
    figures = {"min_avg_util": 44.0, "max_mem0": 700.0, "max_mem1": 710.0} if status is Status.OK else {}
    return TrialRecord(
        case,
        "amp",
        "default",
        num_envs,
        Phase.PROBE,
        status,
        Reason.NONE if status is Status.OK else Reason.HOST_OOM,
        "DefaultCPUAllocator: can't allocate",
        figures,
        {"trial_dir": f"trials/{case}/default_e{num_envs}_probe_1", "sweep": "s"},
    )


def fill(storage_url_or_dir: str | Path, sweep: str = "s") -> None:
    storage = (
        studies.open_storage(None, storage_url_or_dir)
        if isinstance(storage_url_or_dir, Path)
        else studies.open_storage(storage_url_or_dir, Path("unused"))
    )
    for case in ("amp_pi_plus", "add_pi_plus"):
        study = studies.open_study(storage, case, sweep)
        for n, status in ((256, Status.OOM_OR_NCCL), (64, Status.OK)):
            trial = studies.begin(study, "default", n, ("default", "hiutil"), {})
            studies.finish(study, trial, trial_record(case, n, status), 44.0 if status is Status.OK else None)
    running = studies.open_study(storage, "amp_pi_plus", sweep)
    studies.begin(running, "default", 32, ("default", "hiutil"), {})  # still running: not a finished trial


def test_trials_tsv_is_rebuilt_from_the_storage_alone(tmp_path: Path) -> None:
    sweep = tmp_path / "case_gpu_bench_s"
    fill(sweep)
    storage = studies.open_storage(None, sweep)
    tsv.write_trials(sweep / "trials.tsv", lambda: studies.sweep_records(storage, "s"))
    written = (sweep / "trials.tsv").read_text()
    (sweep / "trials.tsv").unlink()
    for where in (str(sweep), str(sweep / "journal.log")):
        done = python("-m", "ladder.merge", "--trials-from-storage", where, str(sweep / "trials.tsv"), "--sweep", "s")
        assert done.returncode == 0, done.stderr
        assert "4 trial(s)" in done.stdout
        assert (sweep / "trials.tsv").read_text() == written
    rows = read_tsv(sweep / "trials.tsv")
    assert [(r["case"], r["num_envs"], r["status"]) for r in rows] == [
        ("add_pi_plus", "256", "oom_or_nccl"),
        ("add_pi_plus", "64", "ok"),
        ("amp_pi_plus", "256", "oom_or_nccl"),
        ("amp_pi_plus", "64", "ok"),
    ]


def test_trials_tsv_from_a_database_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    fill(url, sweep="night")
    fill(url, sweep="day")
    done = python("-m", "ladder.merge", "--trials-from-storage", url, str(tmp_path / "trials.tsv"), "--sweep", "night")
    assert done.returncode == 0, done.stderr
    assert len(read_tsv(tmp_path / "trials.tsv")) == 4
    missing = python("-m", "ladder.merge", "--trials-from-storage", str(tmp_path / "nowhere"), str(tmp_path / "t.tsv"))
    assert missing.returncode == 2 and "no journal file or storage URL" in missing.stderr


def test_trials_tsv_from_postgresql_never_shows_the_password(tmp_path: Path, pg_url: str) -> None:
    fill(pg_url)
    done = python("-m", "ladder.merge", "--trials-from-storage", pg_url, str(tmp_path / "trials.tsv"))
    assert done.returncode == 0, done.stderr
    assert len(read_tsv(tmp_path / "trials.tsv")) == 4
    password = pg_url.split(":")[2].split("@")[0]
    assert studies.redact(pg_url) in done.stdout
    assert password not in done.stdout + done.stderr + (tmp_path / "trials.tsv").read_text()


# ---------------------------------------------------------------- damaged files, rebuilt from storage


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)], ids=str)
def test_results_files_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    a, _ = machine_files(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "ladder.merge", str(tmp_path / "merged.tsv"), str(a)],
        umask=umask,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    fill(tmp_path / "sweep")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ladder.merge",
            "--trials-from-storage",
            str(tmp_path / "sweep"),
            str(tmp_path / "trials.tsv"),
        ],
        umask=umask,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert {p.name: p.stat().st_mode & 0o777 for p in tmp_path.glob("*.tsv")} == {
        "merged.tsv": mode,
        "trials.tsv": mode,
    }


def test_a_damaged_best_by_case_is_rebuilt_from_storage_keeping_other_hosts_readable_rows(tmp_path: Path) -> None:
    here = tmp_path / "output" / "train" / "case_gpu_bench_s"
    best = here / "best_by_case.tsv"
    fill(here)
    assert python("-m", "ladder.merge", "--best-from-storage", str(here), str(best)).returncode == 0
    ours = read_tsv(best)
    assert [(r["case"], r["num_envs"], r["status"], r["sweep"]) for r in ours] == [
        ("add_pi_plus", "64", "ok", "s"),
        ("amp_pi_plus", "64", "ok", "s"),
    ]
    far = {**ours[0], "case": "zz_case", "sweep": "far", "host": "elsewhere"}  # another host's sweep, merged in
    write_best(best, [far])
    whole = best.read_bytes()
    cut = whole.index(b"\n") + 10
    best.write_bytes(whole[:cut] + b"\x00\xff" + whole[cut:])  # a row of ours damaged, the other host's intact
    done = python("-m", "ladder.merge", "--best-from-storage", str(here), str(best))
    assert done.returncode == 0, done.stderr
    got = read_tsv(best)
    assert got[:2] == ours and [(k, v, far[k]) for k, v in got[2].items() if v != far[k]] == []
    assert read_tsv(best) == [*ours, far]
    assert "from the storage of sweep(s) s" in done.stdout and "rows of far kept as read" in done.stdout
    best.write_bytes(whole[:-20])  # the other host's row cut short: nothing of it can be read, nor rebuilt here
    done = python("-m", "ladder.merge", "--best-from-storage", str(here), str(best))
    assert done.returncode == 0, done.stderr
    assert read_tsv(best) == ours
    assert "LOST: the rows of far" in done.stdout
    assert len(list(here.glob("best_by_case.tsv.damaged-*"))) == 2
