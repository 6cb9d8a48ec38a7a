"""One sweep, one set of settings; reuse only what still holds (issue 17, items 1-3 and 9).

The record and its comparison are pure (`ladder.settings.recorded`); end to end, `python -m ladder.search` launches real
torchrun trials (2 CPU ranks, gloo) under the emulated card, in the journal file and in a real PostgreSQL.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ladder.core.errors import ExitCode
from ladder.settings.config import register
from ladder.storage import sweeps
from ladder.storage.tsv import read_tsv
from ladder.sweep import resume
from tests.helpers import LIGHT_PROXY, wait_for
from tests.unit.test_sweep_settings import CASE, settings

FAST = [
    "profile=[default]",
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "workload.nproc=1",  # one rank, started directly: the ranks are not what these tests are about
    LIGHT_PROXY,
]


def sweep_dir(tmp_path: Path, name: str) -> Path:
    return tmp_path / "out" / f"case_gpu_bench_{name}"


register()


# ---------------------------------------------------------------- the record (pure)


# ---------------------------------------------------------------- the record in storage (journal and PostgreSQL)


# ---------------------------------------------------------------- resume=latest


def test_resume_latest_is_the_sweep_last_started_not_the_folder_touched_last(tmp_path: Path) -> None:
    for name in ("old", "mine"):
        (tmp_path / f"case_gpu_bench_{name}").mkdir()
    sweeps.note_latest(tmp_path, "mine")
    (tmp_path / "case_gpu_bench_old" / "report.md").write_text("a report written later")  # ladder.report's
    (tmp_path / "case_gpu_bench_old" / "trials.tsv").write_text("x\n")
    s = settings(f"output_root={tmp_path}", "resume=latest")
    assert resume.resolve(s).sweep == "mine"
    assert (tmp_path / "latest_sweep").stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    out = subprocess.run([sys.executable, "-c", "import os; m = os.umask(0); print(m)"], capture_output=True, text=True)
    return int(out.stdout)


# ---------------------------------------------------------------- end to end


def search(tmp_path: Path, *overrides: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        f"case={CASE}",
        "device=cpu",
        f"output_root={tmp_path}/out",
        *overrides,
    ]
    return subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], timeout_s: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout_s)
    return out


def rows(tmp_path: Path, name: str) -> list[tuple[str, ...]]:
    trials = read_tsv(sweep_dir(tmp_path, name) / "trials.tsv")
    return [(t["num_envs"], t["status"], t["emulate_gpu_mem_gb"], t.get("reused_from", "")) for t in trials]


def test_a_resume_at_another_card_refuses_and_one_that_sets_nothing_resumes_as_started(tmp_path: Path) -> None:
    # the case's agent as shipped: the resume below gives `case=` alone, which sets every key of the case (a leaf
    # override such as LIGHT_PROXY, left off, would then be a difference)
    shipped = [o for o in FAST if o != LIGHT_PROXY]
    first = finish(search(tmp_path, *shipped, "ladder.rungs=[128]", "sweep=mix", "workload.emulate_gpu_mem_gb=0.8"))
    assert rows(tmp_path, "mix") == [("128", "ok", "0.8", "")], first

    other = search(tmp_path, *shipped, "ladder.rungs=[128]", "sweep=mix", "workload.emulate_gpu_mem_gb=0.6")
    out = finish(other)
    assert other.returncode == ExitCode.BAD_SETTINGS, out
    assert "workload.emulate_gpu_mem_gb" in out and "0.8" in out and "0.6" in out, out
    assert "settings_change=accept" in out and "sweep=<another name>" in out and "Traceback" not in out, out
    assert "largest stable rung" not in out and rows(tmp_path, "mix") == [("128", "ok", "0.8", "")]

    silent = search(tmp_path, "sweep=mix")  # case and device given as they were; the rest taken back
    out = finish(silent)
    assert silent.returncode == 0, out
    assert "emulated card: 0.8 GB" in out and "ladder [128]" in out and "profiles [default]" in out, out
    assert rows(tmp_path, "mix") == [("128", "ok", "0.8", "")]  # nothing launched again

    # its dry run plans as the change would leave the sweep: e128 to launch afresh, not "already run"
    dry = search(tmp_path, "sweep=mix", "workload.emulate_gpu_mem_gb=0.6", "settings_change=accept", "dry_run=true")
    out = finish(dry)
    assert dry.returncode == 0 and "default_e128_probe_2" in out and "already run in this sweep" not in out, out
    assert "settings changed (settings_change=accept): 1 trial(s) recorded under the sweep's old settings" in out
    assert rows(tmp_path, "mix") == [("128", "ok", "0.8", "")]  # and changes nothing
    accepted = search(tmp_path, "sweep=mix", "workload.emulate_gpu_mem_gb=0.6", "settings_change=accept")
    out = finish(accepted)
    assert "emulated card: 0.6 GB" in out and "largest stable rung at e128" not in out, out
    # the trial at 0.8 no longer counts: e128 ran afresh at 0.6 (and ran out of memory there)
    assert rows(tmp_path, "mix") == [("128", "oom_or_nccl", "0.6", "")], out
    assert (sweep_dir(tmp_path, "mix") / "trials" / CASE / "default_e128_probe_1" / "progress.jsonl").is_file()
    assert (sweep_dir(tmp_path, "mix") / "trials" / CASE / "default_e128_probe_2").is_dir()


def test_a_change_is_not_accepted_while_another_process_runs_the_sweep(tmp_path: Path) -> None:
    """Accepted under a running sweep, the change would set aside the trial it measures and take its answers (at
    its card) under the new settings: refused, with what to do, and nothing of the running sweep touched."""
    running = search(tmp_path, *FAST, "ladder.rungs=[64]", "sweep=busy", "measure.window_s=600")
    try:
        progress = sweep_dir(tmp_path, "busy") / "trials" / CASE / "default_e64_probe_1" / "progress.jsonl"
        wait_for(lambda: progress.exists() and b'"iter"' in progress.read_bytes(), timeout_s=240)
        accept = search(tmp_path, "sweep=busy", "workload.emulate_gpu_mem_gb=0.8", "settings_change=accept")
        refused = finish(accept)
        assert accept.returncode == ExitCode.BAD_SETTINGS, refused
        assert "is being run by another process (pid" in refused and "once that process has finished" in refused
        assert "no longer count" not in refused, refused
        assert running.poll() is None and rows(tmp_path, "busy") == []  # still measuring its one trial
    finally:
        running.send_signal(signal.SIGTERM)
        finish(running, timeout_s=60)
    assert rows(tmp_path, "busy") == [("64", "interrupted", "0.6", "")]  # at the card it was started with


def test_the_command_printed_after_an_interrupt_resumes_exactly(tmp_path: Path) -> None:
    first = (
        "profile=[default]",
        "ladder.rungs=[256,64]",
        "workload.emulate_gpu_mem_gb=0.7",
        "reuse=false",
        "measure.window_s=600",
        "measure.warmup_iters=2",
        "measure.stable_tol=0.5",
    )
    proc = search(tmp_path, *first)  # no sweep=: named by the time, as a user's first sweep is
    wait_for(lambda: list((tmp_path / "out").glob("case_gpu_bench_*")), timeout_s=120)
    (folder,) = (tmp_path / "out").glob("case_gpu_bench_*")
    name = folder.name.removeprefix("case_gpu_bench_")
    progress = folder / "trials" / CASE / "default_e64_probe_1" / "progress.jsonl"
    wait_for(lambda: progress.exists() and b'"iter"' in progress.read_bytes(), timeout_s=240)
    proc.send_signal(signal.SIGINT)
    for _ in range(2):  # an impatient user presses Ctrl-C again while the trial is stopped and recorded
        time.sleep(0.3)  # not a wait for a condition: two presses at once would reach the process as one signal
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    out = finish(proc, timeout_s=60)
    assert proc.returncode == ExitCode.INTERRUPTED and "Traceback" not in out, out
    assert [(t["num_envs"], t["status"]) for t in read_tsv(folder / "trials.tsv")] == [
        ("256", "oom_or_nccl"),
        ("64", "interrupted"),
    ], out
    printed = out.split("resume with `", 1)[1].split("`", 1)[0]
    argv = shlex.split(printed)
    # a name like 20261201_025549 is the integer 20261201025549 to Hydra: it must still name this sweep
    assert argv[:3] == ["python", "-m", "ladder.search"] and f"sweep={name}" in argv, printed
    assert not any(a.startswith(("profile", "ladder.", "workload", "reuse", "measure")) for a in argv[3:]), printed
    # the command as printed (shown, not run: its window is the 600 s it was started with) is the sweep as started
    again = subprocess.Popen(
        [sys.executable, *argv[1:], "dry_run=true"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out2 = finish(again)
    assert again.returncode == 0, out2
    assert "2 trial(s) the walk could launch (1 profile(s) x 2 rung(s)" in out2 and "hiutil" not in out2, out2
    assert out2.count("--emulate-mem-mb 717") == 2, out2
    assert "default e256" in out2 and "[not launched: already run in this sweep (oom_or_nccl)]" in out2, out2
    assert "reused from" not in out2  # reuse=false came back too
    assert [p.name for p in (tmp_path / "out").glob("case_gpu_bench_*")] == [folder.name]  # no other sweep made


def test_reuse_takes_only_what_still_holds_and_each_sweep_folder_stands_alone(tmp_path: Path) -> None:
    # a capped sweep's out-of-memory failure is not a failure without the cap
    capped = finish(search(tmp_path, *FAST, "ladder.rungs=[256]", "sweep=cap", "workload.host_mem_limit_gb=0.5"))
    assert rows(tmp_path, "cap") == [("256", "oom_or_nccl", "0.6", "")], capped
    assert read_tsv(sweep_dir(tmp_path, "cap") / "trials.tsv")[0]["host_mem_limit_gb"] == "0.5"
    uncapped = finish(search(tmp_path, *FAST, "ladder.rungs=[256]", "sweep=nocap"))
    assert "reused" not in uncapped and rows(tmp_path, "nocap")[0][3] == "", uncapped
    assert read_tsv(sweep_dir(tmp_path, "nocap") / "trials.tsv")[0]["host_mem_limit_gb"] == ""

    # figures under another window are not reused; under the same, they are, with their own copy of the evidence
    finish(search(tmp_path, *FAST, "ladder.rungs=[64]", "sweep=w3"))
    assert rows(tmp_path, "w3") == [("64", "ok", "0.6", "")]
    dry = finish(search(tmp_path, *FAST, "ladder.rungs=[64]", "sweep=dry", "dry_run=true"))
    assert "[not launched: reused from w3#0 (ok)]" in dry and "worst case 0.0 min" in dry, dry
    dry4 = finish(search(tmp_path, *FAST, "ladder.rungs=[64]", "sweep=dry", "dry_run=true", "measure.window_s=4"))
    assert "not launched" not in dry4 and "worst case 0.0 min" not in dry4, dry4
    assert not sweep_dir(tmp_path, "dry").exists()
    w4 = finish(search(tmp_path, *FAST, "ladder.rungs=[64]", "sweep=w4", "measure.window_s=4"))
    assert rows(tmp_path, "w4") == [("64", "ok", "0.6", "")], w4
    # what the earlier sweeps' windows measured of the machine's step noise carries, as the new sweep's first pool
    (measured,) = read_tsv(sweep_dir(tmp_path, "w4") / "trials.tsv")
    assert "step noise: windows of this case in earlier sweeps on this host" in w4, w4
    assert float(measured["noise_carried_df"]) > 0, measured
    again = finish(search(tmp_path, *FAST, "ladder.rungs=[64]", "sweep=w3b"))
    assert rows(tmp_path, "w3b") == [("64", "ok", "0.6", "w3#0")], again
    (copy,) = read_tsv(sweep_dir(tmp_path, "w3b") / "trials.tsv")
    assert copy["trial_dir"] == f"trials/{CASE}/default_e64_probe_1"
    shutil.rmtree(sweep_dir(tmp_path, "w3"))
    kept = sweep_dir(tmp_path, "w3b") / copy["trial_dir"]
    assert (kept / "progress.jsonl").is_file() and (kept / "stdout.log").read_text()


# ---------------------------------------------------------------- the dry run's reuse (pure)
