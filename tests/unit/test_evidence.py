"""A trial that ran out of memory is stopped at its first evidence (real files; a real process for the trial)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ladder.core.records import Confidence, Ending, Reason, Status
from ladder.failures import files, rules
from ladder.runner.evidence import Evidence

OOM = (
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.64 GiB of which 1.02 GiB is free.\n"
)
NCCL = "[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n"


def rank_log(trial_dir: Path, rank: int) -> Path:
    path = trial_dir / "ranks" / "none_x" / "attempt_0" / str(rank) / "stderr.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return path


def append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def test_a_memory_line_in_a_rank_log_is_evidence_once_whole(tmp_path: Path) -> None:
    evidence, log = Evidence(tmp_path, every_s=0.0), rank_log(tmp_path, 1)
    append(log, "iteration 1\n")
    assert evidence.check() is None
    append(log, OOM[:60])  # the line is still being written
    assert evidence.check() is None
    append(log, OOM[60:])
    verdict = evidence.check()
    assert verdict is not None and verdict.status is Status.OOM_OR_NCCL and verdict.reason is Reason.CUDA_OOM
    assert "Tried to allocate 2.00 GiB" in verdict.evidence


def test_a_communication_error_is_left_to_run_its_course(tmp_path: Path) -> None:
    """Another rank's death may be its cause: only memory ends the question for the rung at once."""
    evidence = Evidence(tmp_path, every_s=0.0)
    append(rank_log(tmp_path, 0), NCCL)
    assert evidence.check() is None


# Real lines (shared/failure_logs, dev part): weak memory evidence that a run may survive or disprove.
PHYSX_OVERFLOW = (
    "[Error] [omni.physx.plugin] PhysX error: Patch buffer overflow detected, please increase its size "
    "to at least 167788 in the scene desc!\n"
)
BFC_WARNING = (
    "2024-10-25 20:48:40.388632: W external/xla/xla/tsl/framework/bfc_allocator.cc:291] Allocator "
    "(GPU_0_bfc) ran out of memory trying to allocate 26.32GiB with freed_by_count=0. The caller indicates "
    "that this is not a failure, but this may mean that there could be performance gains if more memory "
    "were available.\n"
)


@pytest.mark.parametrize("line", [PHYSX_OVERFLOW, BFC_WARNING], ids=["physx-buffer-overflow", "xla-allocator-warning"])
def test_weak_memory_evidence_lets_the_trial_run_on(tmp_path: Path, line: str) -> None:
    evidence = Evidence(tmp_path, every_s=0.0)
    append(tmp_path / "stdout.log", "step 3\n" + line)
    assert evidence.check() is None
    append(tmp_path / "stdout.log", OOM)  # then proof: stopped at once
    verdict = evidence.check()
    assert verdict is not None and verdict.reason is Reason.CUDA_OOM and "Tried to allocate" in verdict.evidence


def test_an_allocator_warning_in_a_run_that_ended_well_is_not_a_failure() -> None:
    window_done = rules.classify(Ending(exit_code=-9, log_text="step 3\n" + BFC_WARNING, stopped_by="window_done"))
    assert window_done.status is Status.OK
    crashed = rules.classify(Ending(exit_code=1, log_text="step 3\n" + BFC_WARNING))
    assert (crashed.reason, crashed.confidence) == (Reason.CUDA_OOM, Confidence.LOW)
    overflow = rules.classify(Ending(exit_code=-9, log_text=PHYSX_OVERFLOW, stopped_by="window_done"))
    assert (overflow.reason, overflow.confidence) == (Reason.CUDA_OOM, Confidence.LOW)  # the simulator went on


def test_an_error_file_naming_memory_is_evidence(tmp_path: Path) -> None:
    evidence = Evidence(tmp_path, every_s=0.0)
    rank_log(tmp_path, 1)
    error = {
        "message": {
            "message": "RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. "
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 536870912 bytes",
            "extraInfo": {"py_callstack": "", "timestamp": "1795664711"},
        }
    }
    (tmp_path / "ranks" / "none_x" / "attempt_0" / "1" / "error.json").write_text(json.dumps(error))
    verdict = evidence.check()
    assert verdict is not None and verdict.reason is Reason.HOST_OOM


def test_a_program_that_starts_its_own_ranks_is_watched_through_its_log(tmp_path: Path) -> None:
    evidence = Evidence(tmp_path, every_s=0.0)
    append(tmp_path / "stdout.log", "step 3\n" + OOM)
    verdict = evidence.check()
    assert verdict is not None and verdict.reason is Reason.CUDA_OOM


def test_a_trial_stopped_after_its_window_is_judged_on_its_logs_as_they_were_at_the_stop(tmp_path: Path) -> None:
    """What a healthy trial's processes print as ladder kills them (a worker's broken pipe to its dead parent, a
    rank's error file) is no evidence: the logs count as far as they were when ladder decided to stop it."""
    stdout = tmp_path / "stdout.log"
    stdout.write_text("Rank-0: policy_step=30, reward_env_0=15.0\nRank-0: policy_step=60, reward_env_0=15.0\n")
    upto = files.sizes(tmp_path)
    with stdout.open("a") as fh:  # written after the stop decision, as the group is killed
        fh.write("Traceback (most recent call last):\nBrokenPipeError: [Errno 32] Broken pipe\n")
    rank = tmp_path / "ranks" / "run" / "attempt_0" / "1"
    rank.mkdir(parents=True)
    (rank / "stderr.log").write_text("RuntimeError: Connection reset by peer\n")

    before = replace(files.load_ending(tmp_path, -9, upto), stopped_by="window_done")
    assert "Broken pipe" not in before.log_text and before.rank_logs == {}
    assert rules.classify(before).status is Status.OK
    everything = replace(files.load_ending(tmp_path, -9), stopped_by="window_done")  # read whole, as before
    assert "Broken pipe" in everything.log_text and rules.classify(everything).status is not Status.OK


NAN_ROW = "| train/loss | nan |\n"  # sb3's table row, as its DQN prints a loss gone NaN


def test_a_line_of_diverged_training_is_noted_once_whole_and_the_first_one_kept(tmp_path: Path) -> None:
    evidence, log = Evidence(tmp_path, every_s=0.0), rank_log(tmp_path, 0)
    append(log, "| train/loss | 0.25 |\n| rollout/ep_rew_mean | nan |\n")  # no episode ended yet: no divergence
    assert evidence.check() is None and evidence.diverged == ""
    append(log, NAN_ROW[:12])  # the line is still being written
    assert evidence.check() is None and evidence.diverged == ""
    append(log, NAN_ROW[12:] + "| train/loss | inf |\n")
    assert evidence.check() is None  # no memory verdict: the trial's watch stops it as `diverged`
    assert evidence.diverged == NAN_ROW.strip()


def test_a_trial_stopped_at_its_diverged_line_is_diverged_whatever_the_kill_left(tmp_path: Path) -> None:
    """Stopped by ladder at the line: the kill's exit code and what the dying ranks print are no evidence; a memory
    failure printed before the line still names the cause."""
    killed = "Traceback (most recent call last):\nBrokenPipeError: [Errno 32] Broken pipe\n"
    stopped = rules.classify(Ending(exit_code=-9, log_text="step 3\n" + NAN_ROW, stopped_by="diverged"))
    assert stopped.status is Status.DIVERGED and NAN_ROW.strip() in stopped.evidence
    log = rank_log(tmp_path, 0)
    append(log, "step 3\n" + NAN_ROW)
    upto = files.sizes(tmp_path)
    append(log, killed)
    after = rules.classify(replace(files.load_ending(tmp_path, -9, upto), stopped_by="diverged"))
    assert after.status is Status.DIVERGED and "Broken pipe" not in after.evidence
    memory = rules.classify(Ending(exit_code=-9, log_text=OOM + NAN_ROW, stopped_by="diverged"))
    assert memory.status is Status.OOM_OR_NCCL and memory.reason is Reason.CUDA_OOM
