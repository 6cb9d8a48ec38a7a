"""One sweep, one set of settings; reuse only what still holds (issue 17, items 1-3 and 9).

The record and its comparison are pure (`ladder.settings.recorded`); end to end, `python -m ladder.search` launches real
torchrun trials (2 CPU ranks, gloo) under the emulated card, in the journal file and in a real PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ladder.core.errors import ExitCode
from ladder.core.paths import SweepPaths
from ladder.core.spec import TrialSpec
from ladder.settings import recorded as sweepsettings
from ladder.settings.argv import known_cases
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import Settings, SettingsChange, register, settings_from
from ladder.storage import studies, sweeps
from ladder.storage.tsv import read_tsv
from ladder.sweep import dryrun, resume
from tests.helpers import wait_for

register()
CASE = "amp_pi_plus"
FAST = ["profile=[default]", "measure.window_s=3", "measure.warmup_iters=2", "measure.stable_tol=0.5"]


def settings(*overrides: str, given: tuple[str, ...] | None = None) -> Settings:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return settings_from(compose("config", overrides=list(overrides)), known_cases(), given)


def keys(*overrides: str) -> tuple[str, ...]:
    return tuple(o.split("=", 1)[0] for o in overrides)


# ---------------------------------------------------------------- the record (pure)


def test_the_record_holds_what_changes_a_trial_and_no_password_or_place() -> None:
    s = settings("storage=postgresql://u:s3cret@db/x", "workload.host_mem_limit_gb=0.5", "sweep=a")
    rec = sweepsettings.record(s)
    for key in (
        "case.name",
        "case.agent",
        "ladder.rungs",
        "ladder.knob",
        "profile",
        "profile.hiutil",
        "workload.emulate_gpu_mem_gb",
        "workload.host_mem_limit_gb",
        "workload.progress_regex",
        "measure.window_s",
        "measure.stable_tol",
        "device",
        "objective",
        "nccl_env",
        "reuse",
    ):
        assert key in rec, key
    assert rec["workload.host_mem_limit_gb"] == 0.5 and rec["profile"] == ["default", "hiutil"]
    text = repr(rec)
    assert "s3cret" not in text and "storage" not in text and "output_root" not in text and "'sweep'" not in text
    assert "workload.lease_dir" not in rec  # where a trial waits for devices changes no outcome


def test_a_resume_that_sets_nothing_takes_every_recorded_setting_back() -> None:
    first = (
        "profile=[default]",
        "ladder.rungs=[256,64]",
        "workload.emulate_gpu_mem_gb=0.7",
        "reuse=false",
        "device=cpu",
        "measure.window_s=3",
    )
    recorded = sweepsettings.record(settings(*first))
    resumed = settings("sweep=x", given=keys("sweep=x"))
    assert sweepsettings.differences(recorded, sweepsettings.record(resumed), resumed.given) == []
    back = sweepsettings.adopt(resumed, recorded, resumed.given)
    assert sweepsettings.record(back) == recorded
    assert ([p.name for p in back.profiles], back.rungs, back.workload.emulate_gpu_mem_gb, back.reuse) == (
        ["default"],
        (256, 64),
        0.7,
        False,
    )
    assert back.measure.window_s == 3 and back.device.value == "cpu"


def test_a_resume_that_sets_another_outcome_value_is_a_difference_side_by_side() -> None:
    recorded = sweepsettings.record(settings("workload.emulate_gpu_mem_gb=0.8", "profile=[default]"))
    now = ("workload.emulate_gpu_mem_gb=0.6", "profile=[default,hiutil]", "reuse=false", "ladder.rungs=[4096]")
    s = settings(*now, given=keys(*now))
    diffs = sweepsettings.differences(recorded, sweepsettings.record(s), s.given)
    assert [d[0] for d in diffs] == ["ladder.rungs", "profile", "workload.emulate_gpu_mem_gb"]
    text = sweepsettings.format_differences("mix", CASE, diffs)
    assert "  setting" in text and "recorded" in text and "now" in text
    line = next(ln for ln in text.splitlines() if "emulate_gpu_mem_gb" in ln)
    assert line.split() == ["workload.emulate_gpu_mem_gb", "0.8", "0.6"]
    # a carried setting given again (reuse) is no difference: it only changes how the sweep walks
    assert sweepsettings.adopt(s, recorded, s.given).reuse is False


def test_the_same_value_given_again_is_no_difference_and_without_given_every_value_counts() -> None:
    recorded = sweepsettings.record(settings("workload.emulate_gpu_mem_gb=0.8"))
    same = settings("workload.emulate_gpu_mem_gb=0.8", given=("workload.emulate_gpu_mem_gb",))
    assert sweepsettings.differences(recorded, sweepsettings.record(same), same.given) == []
    unknown = settings()  # programmatic callers: nothing is known to be silent, so nothing is taken back
    assert [d[0] for d in sweepsettings.differences(recorded, sweepsettings.record(unknown), None)] == [
        "workload.emulate_gpu_mem_gb"
    ]


def test_a_setting_the_record_predates_is_no_difference() -> None:
    recorded = sweepsettings.record(settings())
    del recorded["measure.window_s"]
    s = settings("measure.window_s=9", given=("measure.window_s",))
    assert sweepsettings.differences(recorded, sweepsettings.record(s), s.given) == []


# ---------------------------------------------------------------- the record in storage (journal and PostgreSQL)


@pytest.mark.parametrize("backend", ["journal", "postgresql"])
def test_the_record_refuses_or_comes_back_from_either_storage(tmp_path: Path, backend: str, request) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    sweep_dir = tmp_path / "case_gpu_bench_s"
    first = settings("workload.emulate_gpu_mem_gb=0.8", "profile=[default]")
    study = studies.open_study(studies.open_storage(url, sweep_dir), CASE, "s")
    studies.save_settings(study, sweepsettings.record(first))
    loc = (f"storage={url}",) if url else ()
    again = settings("workload.emulate_gpu_mem_gb=0.6", *loc, given=("workload.emulate_gpu_mem_gb", *keys(*loc)))
    with pytest.raises(sweepsettings.SettingsChanged) as err:
        resume.recorded_for(again, SweepPaths("s", sweep_dir))
    assert "settings_change=accept" in str(err.value) and "sweep=<another name>" in str(err.value)
    if url:
        assert "s3cret" not in str(err.value)
    silent = settings(*loc, given=keys(*loc))
    back = resume.recorded_for(silent, SweepPaths("s", sweep_dir))
    assert back.workload.emulate_gpu_mem_gb == 0.8 and [p.name for p in back.profiles] == ["default"]
    accepted = dataclasses.replace(again, settings_change=SettingsChange.ACCEPT)
    assert resume.recorded_for(accepted, SweepPaths("s", sweep_dir)).workload.emulate_gpu_mem_gb == 0.6


def test_a_sweep_not_started_yet_is_left_alone_and_nothing_is_created(tmp_path: Path) -> None:
    s = settings(given=())
    assert resume.recorded_for(s, SweepPaths("new", tmp_path / "case_gpu_bench_new")) == s
    assert not (tmp_path / "case_gpu_bench_new").exists()


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


def sweep_dir(tmp_path: Path, name: str) -> Path:
    return tmp_path / "out" / f"case_gpu_bench_{name}"


def rows(tmp_path: Path, name: str) -> list[tuple[str, ...]]:
    trials = read_tsv(sweep_dir(tmp_path, name) / "trials.tsv")
    return [(t["num_envs"], t["status"], t["emulate_gpu_mem_gb"], t.get("reused_from", "")) for t in trials]


def test_a_resume_at_another_card_refuses_and_one_that_sets_nothing_resumes_as_started(tmp_path: Path) -> None:
    first = finish(search(tmp_path, *FAST, "ladder.rungs=[128]", "sweep=mix", "workload.emulate_gpu_mem_gb=0.8"))
    assert rows(tmp_path, "mix") == [("128", "ok", "0.8", "")], first

    other = search(tmp_path, *FAST, "ladder.rungs=[128]", "sweep=mix", "workload.emulate_gpu_mem_gb=0.6")
    out = finish(other)
    assert other.returncode == ExitCode.BAD_SETTINGS, out
    assert "workload.emulate_gpu_mem_gb" in out and "0.8" in out and "0.6" in out, out
    assert "settings_change=accept" in out and "sweep=<another name>" in out and "Traceback" not in out, out
    assert "largest stable rung" not in out and rows(tmp_path, "mix") == [("128", "ok", "0.8", "")]

    silent = search(tmp_path, "sweep=mix")  # case and device given as they were; the rest taken back
    out = finish(silent)
    assert silent.returncode == 0, out
    assert "emulated card: 0.8 GB" in out and "ladder [128]" in out and "profiles ['default']" in out, out
    assert rows(tmp_path, "mix") == [("128", "ok", "0.8", "")]  # nothing launched again

    accepted = search(tmp_path, "sweep=mix", "workload.emulate_gpu_mem_gb=0.6", "settings_change=accept")
    out = finish(accepted)
    assert "emulated card: 0.6 GB" in out and "largest stable rung at e128" not in out, out
    # the trial at 0.8 no longer counts: e128 ran afresh at 0.6 (and ran out of memory there)
    assert rows(tmp_path, "mix") == [("128", "oom_or_nccl", "0.6", "")], out
    assert (sweep_dir(tmp_path, "mix") / "trials" / CASE / "default_e128_probe_1" / "progress.jsonl").is_file()
    assert (sweep_dir(tmp_path, "mix") / "trials" / CASE / "default_e128_probe_2").is_dir()


def test_the_command_printed_after_an_interrupt_resumes_exactly(tmp_path: Path) -> None:
    first = (
        "profile=[default]",
        "ladder.rungs=[256,64]",
        "workload.emulate_gpu_mem_gb=0.7",
        "reuse=false",
        "measure.window_s=600",
        "measure.warmup_iters=2",
        "measure.stable_tol=0.5",
        "sweep=ctrlc",
    )
    proc = search(tmp_path, *first)
    progress = sweep_dir(tmp_path, "ctrlc") / "trials" / CASE / "default_e64_probe_1" / "progress.jsonl"
    wait_for(lambda: progress.exists() and b'"iter"' in progress.read_bytes(), timeout_s=240)
    proc.send_signal(signal.SIGINT)
    out = finish(proc, timeout_s=60)
    assert proc.returncode == ExitCode.INTERRUPTED, out
    printed = out.split("resume with `", 1)[1].split("`", 1)[0]
    argv = shlex.split(printed)
    assert argv[:3] == ["python", "-m", "ladder.search"] and "sweep=ctrlc" in argv, printed
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
    again = finish(search(tmp_path, *FAST, "ladder.rungs=[64]", "sweep=w3b"))
    assert rows(tmp_path, "w3b") == [("64", "ok", "0.6", "w3#0")], again
    (copy,) = read_tsv(sweep_dir(tmp_path, "w3b") / "trials.tsv")
    assert copy["trial_dir"] == f"trials/{CASE}/default_e64_probe_1"
    shutil.rmtree(sweep_dir(tmp_path, "w3"))
    kept = sweep_dir(tmp_path, "w3b") / copy["trial_dir"]
    assert (kept / "progress.jsonl").is_file() and (kept / "stdout.log").read_text()


# ---------------------------------------------------------------- the dry run's reuse (pure)


def test_the_estimate_counts_only_what_would_launch() -> None:
    full = dryrun.estimate(8, 2, fail_s=10.0, fit_s=40.0)
    assert dryrun.estimate_left([8, 8], 10.0, 40.0) == full
    assert dryrun.estimate_left([0, 0], 10.0, 40.0).worst_s == 0.0
    one = dryrun.estimate_left([0, 3], 10.0, 40.0)
    assert 0 < one.worst_s < full.worst_s and one.expected_s <= one.worst_s
    assert "worst case 0.0 min, expected 0.0 min" in dryrun.format_estimate(dryrun.estimate_left([0], 10.0, 40.0))


def test_a_trial_that_would_not_launch_is_marked() -> None:
    spec = TrialSpec(argv=("train",), env={})
    planned = [
        dryrun.Planned("default", 256, "/t/a", spec, "reused from old#0 (oom_or_nccl)"),
        dryrun.Planned("default", 64, "/t/b", spec),
    ]
    text = dryrun.format_dry_run(CASE, "num_envs", planned)
    assert "1 of them answered without a launch" in text
    (marked,) = [ln for ln in text.splitlines() if "not launched" in ln]
    assert marked.startswith("== default e256") and "reused from old#0 (oom_or_nccl)" in marked
