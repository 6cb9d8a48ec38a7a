"""Failure classification on real output: the labelled samples, lines captured here, and the root-cause traps.

Data (tests/data): `failure_logs.jsonl` is a copy of shared/failure_logs/sample.jsonl (38 excerpts from public issue
threads, labelled). shared/failure_logs/more.jsonl (96) is split by repository, fixed before any pattern was written:
a row is held out when int(sha256("ladder-holdout-1:" + its lower-cased repository), 16) % 100 < 30.
`failure_logs_more_dev.jsonl` (67) was used to write patterns; `failure_logs_more_heldout.jsonl` (29) to measure
(`python -m ladder.failures --eval`): 17/19 unambiguous at the first look; the two misses showed families missing
(torch's "Some NCCL operations have failed", Vulkan's ERROR_OUT_OF_DEVICE_MEMORY without its prefix), added from
public lines, so later figures on it are no longer unseen. `failure_logs/heldout.jsonl` (81, 66 unambiguous) was
gathered afterwards from 80 other repositories' threads and labelled before its first look (failure_logs/README.md
has that table: 60/66 unambiguous right); its misses' families were then added, so it too is development now.
`failure_logs/heldout_b.jsonl` (46, 39 unambiguous, 46 more repositories) was gathered and labelled after that, and
looked at once (36/39); its misses' families were added in turn. `failure_logs/heldout_c.jsonl` (33, 30 unambiguous,
33 more repositories) likewise after that: 29/30 at its first look; `failure_logs/heldout_d.jsonl` (52, 40
unambiguous, 49 more repositories, mostly RL and GPU-simulation stacks) likewise: 39/40 at its first look.
`captured/*.log` are real outputs of small torch programs
run on this CPU machine (torch 2.13), trimmed of unrelated lines but never edited; captured/README.md says how each
was made. `PUBLIC` below quotes lines from public issue threads for the patterns that neither of those shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.unit.test_failures import (
    _MUJOCO_ALLOC,
    _PHYSX_700,
    _RAY_WORKER_DIED,
    DISPUTED_HELDOUT,
    NCCL_CASCADE,
    OOM_LINE,
    captured,
)

# --- the table on every labelled sample ---


# --- captured and public lines ---


# --- the root-cause traps ---


# --- classify() on whole endings ---


# --- the CLI ---


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ladder.failures", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)


def test_cli_on_a_trial_folder(tmp_path: Path) -> None:
    trial = tmp_path / "trial 7 (num_envs=4096)"
    attempt = trial / "torchrun_logs" / "bf82d1a3-75a2-4633-868a-8fcfa968c731_a8xirirf" / "attempt_0"
    (attempt / "0").mkdir(parents=True)
    (attempt / "0" / "error.json").write_text(captured("gloo_peer_closed.error.json"))
    (trial / "stdout.log").write_text("step 1 reward 0.1\nstep 2 reward 0.2\n")
    (trial / "exit_code.txt").write_text("1\n")
    result = run_cli(str(trial))
    assert (result.returncode, result.stderr) == (0, "")
    out = json.loads(result.stdout)
    assert (out["status"], out["reason"]) == ("oom_or_nccl", "peer_lost")
    assert "Connection closed by peer" in out["evidence"]


def test_cli_reads_torchrun_rank_logs_and_exit_code_file(tmp_path: Path) -> None:
    rank1 = tmp_path / "logs" / "run_x" / "attempt_0" / "1"
    rank1.mkdir(parents=True)
    (rank1 / "stderr.log").write_text(f"{OOM_LINE}\n")
    (tmp_path / "stdout.log").write_text(NCCL_CASCADE)
    (tmp_path / "exit_code.txt").write_text("1")
    out = json.loads(run_cli(str(tmp_path)).stdout)
    assert out["reason"] == "cuda_oom"


def test_cli_on_a_log_file_with_exit_code(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_text("")
    result = run_cli(str(log), "--exit-code", "-9")
    out = json.loads(result.stdout)
    assert (out["status"], out["reason"], out["evidence"]) == ("oom_or_nccl", "host_oom", "exit code -9 (SIGKILL)")
    assert (out["confidence"], out["source"]) == ("low", "classified")


@pytest.mark.parametrize(
    ("content", "named"),
    [(b"", "is empty"), (b"  \n\n", "is empty"), (b"\x7fELF\x02\x01\x01\0\0\0", "binary data")],
    ids=["empty", "blank", "binary"],
)
def test_cli_refuses_a_file_that_holds_no_log(tmp_path: Path, content: bytes, named: str) -> None:
    """An empty file (with no exit code beside it) or a binary one has no line to judge: judged anyway it read as a
    plain error, said with high confidence."""
    path = tmp_path / "trainer.out"
    path.write_bytes(content)
    result = run_cli(str(path))
    assert (result.returncode, result.stdout) == (2, "")
    assert named in result.stderr and str(path) in result.stderr and "trial folder" in result.stderr


def test_cli_on_a_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "no such trial"
    result = run_cli(str(missing))
    assert (result.returncode, result.stdout) == (2, "")
    assert str(missing) in result.stderr


def test_cli_on_a_sweep_folder_lists_its_trials_instead_of_a_verdict(tmp_path: Path) -> None:
    sweep = tmp_path / "case_gpu_bench_20261201_025549"
    trials = [sweep / "trials" / "amp_pi_plus" / f"default_e{n}_probe_1" for n in (256, 128)]
    for trial in trials:
        (trial / "ranks" / "0").mkdir(parents=True)
        (trial / "stdout.log").write_text(f"{OOM_LINE}\n")
        (trial / "ranks" / "0" / "stdout.log").write_text("a rank's own log\n")
    (sweep / "journal.log").write_text('{"op_code": 0, "worker_id": "x"}\n')  # Optuna's: not a trainer's log
    for given in (sweep, tmp_path):
        result = run_cli(str(given))
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert f"{given} is not a trial folder: it holds 2 trial folder(s)" in result.stderr
        assert all(str(t) in result.stderr for t in trials) and "ranks" not in result.stderr
    assert json.loads(run_cli(str(trials[0])).stdout)["reason"] == "cuda_oom"  # each of them, as before


def test_cli_on_a_folder_with_a_broken_exit_code_file(tmp_path: Path) -> None:
    (tmp_path / "exit_code.txt").write_text("killed\n")
    result = run_cli(str(tmp_path))
    assert (result.returncode, result.stdout) == (2, "")
    assert "exit_code.txt" in result.stderr and "'killed'" in result.stderr


# --- the development part of shared/failure_logs/more.jsonl (issue 19) ---


# --- confidence ---


# --- a launcher that returns 0 after its program died of an exception ---


# --- the pure part stays pure ---


# --- python -m ladder.failures --eval ---


def test_cli_eval_prints_the_accuracy_table_and_the_misses(tmp_path: Path) -> None:
    rows = [
        {"id": "oom", "label": "cuda_oom", "ambiguous": False, "exit_code": 1, "text": OOM_LINE},
        {"id": "clear-error", "label": "other_error", "ambiguous": False, "exit_code": None, "text": OOM_LINE},
        {"id": "port", "label": "port_in_use", "ambiguous": True, "exit_code": None, "text": "all fine"},
    ]
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_cli("--eval", str(corpus))
    assert (result.returncode, result.stderr) == (0, "")
    assert "| all | 3 | 1 / 3 (33%) | 1 / 3 (33%) | 1 |" in result.stdout
    assert "| unambiguous | 2 | 1 / 2 (50%) | 1 / 2 (50%) | 1 |" in result.stdout
    assert "- clear-error: label other_error, got oom_or_nccl/cuda_oom  FALSE STEP-DOWN" in result.stdout
    assert "- port: label port_in_use, got error/error  (ambiguous)" in result.stdout
    assert "- oom:" not in result.stdout


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('{"id": "x", "label": "cuda", "text": "t"}', "label 'cuda' is not one of"),
        ('{"id": "x", "label": "cuda_oom"}', "'text' must be a string"),
        ('{"id": "x", "label": "cuda_oom", "text": "t", "exit_code": "-9"}', "'exit_code' must be an integer"),
        ("{not json", "not JSON"),
    ],
)
def test_cli_eval_names_the_bad_line(tmp_path: Path, line: str, named: str) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"id": "ok", "label": "nccl", "text": "t"}\n' + line + "\n")
    result = run_cli("--eval", str(corpus))
    assert (result.returncode, result.stdout) == (2, "")
    assert f"{corpus}:2" in result.stderr and named in result.stderr and "fix:" in result.stderr


# --- python -m ladder.failures <trial folder> reports the trial's own verdict ---


def ok_trial_killed_by_ladder(folder: Path) -> Path:
    """A trial whose window ran to its end: ladder killed it (-9) and recorded `ok` (trial.py's verdict.json)."""
    folder.mkdir()
    (folder / "stdout.log").write_text("global_step=4096 sps=812\nglobal_step=8192 sps=820\n")
    (folder / "exit_code.txt").write_text("-9\n")
    verdict = {"status": "ok", "reason": "", "evidence": "window done, no failure line"}
    (folder / "verdict.json").write_text(json.dumps(verdict, indent=1) + "\n")
    return folder


def test_cli_reports_the_trials_recorded_verdict_not_ladders_own_kill(tmp_path: Path) -> None:
    trial = ok_trial_killed_by_ladder(tmp_path / "trial 3")
    result = run_cli(str(trial))
    assert (result.returncode, result.stderr) == (0, "")
    out = json.loads(result.stdout)
    assert (out["status"], out["reason"], out["source"]) == ("ok", "", "verdict.json")
    # a record that kept no more than the verdict (written before trials kept their stop): the files as they stand,
    # where ladder's own SIGKILL reads as the host's OOM killer's, said with low confidence
    again = json.loads(run_cli(str(trial), "--reclassify").stdout)
    assert (again["status"], again["reason"], again["source"]) == ("oom_or_nccl", "host_oom", "classified")
    assert again["confidence"] == "low"


def test_cli_reclassifies_a_trial_as_it_read_itself_from_what_its_record_kept(tmp_path: Path) -> None:
    """A trial's verdict.json keeps why ladder stopped it and how far its logs counted: a window that ran to its end
    and was killed (-9, and its worker's dying words written after) reads `ok` again, not a host OOM; a trial stopped
    at its time limit reads `timeout`; a bare log's reading is unchanged."""
    trial = ok_trial_killed_by_ladder(tmp_path / "done")
    counted = (trial / "stdout.log").stat().st_size
    with (trial / "stdout.log").open("a") as log:
        log.write("Traceback (most recent call last):\nBrokenPipeError: [Errno 32] Broken pipe\n")
    verdict = json.loads((trial / "verdict.json").read_text())
    kept = verdict | {"stopped_by": "window_done", "read_upto": {"stdout.log": counted}}
    (trial / "verdict.json").write_text(json.dumps(kept))
    shown = json.loads(run_cli(str(trial)).stdout)
    assert shown["stopped_by"] == "window_done" and "read_upto" not in shown
    again = json.loads(run_cli(str(trial), "--reclassify").stdout)
    assert (again["status"], again["reason"], again["source"]) == ("ok", "", "classified")
    (trial / "verdict.json").write_text(json.dumps(verdict | {"stopped_by": "trial_timeout"}))
    late = json.loads(run_cli(str(trial), "--reclassify").stdout)
    assert (late["status"], late["reason"]) == ("timeout", "trial_timeout")
    (trial / "verdict.json").write_text(json.dumps(kept | {"stopped_by": "no such stop", "read_upto": [1]}))
    odd = json.loads(run_cli(str(trial), "--reclassify").stdout)  # what it cannot read is read as the files stand
    assert (odd["status"], odd["reason"], odd["confidence"]) == ("oom_or_nccl", "host_oom", "low")


def test_cli_names_an_unreadable_recorded_verdict(tmp_path: Path) -> None:
    trial = ok_trial_killed_by_ladder(tmp_path / "trial 4")
    (trial / "verdict.json").write_text('{"status": "ok", "reas')
    result = run_cli(str(trial))
    assert (result.returncode, result.stdout) == (2, "")
    assert "verdict.json is unreadable" in result.stderr and "--reclassify" in result.stderr


# --- failure_logs/heldout.jsonl: 81 excerpts from 80 repositories the shared data does not hold, labelled before the
# classifier saw them (failure_logs/README.md has the first look; after it, its misses' families became rows) ---


DISPUTED_HELDOUT |= {
    "mimickit-16-found-lost-aggregate-pairs-nan": (
        "a capacity overflow is stepped down (with low confidence, so the rung runs again first); that NaN states "
        "asked for it shows only in the thread"
    ),
    "simplerl-reason-25-ray-actor-died-eof": _RAY_WORKER_DIED,
    "rlinf-622-ray-worker-died-suspected-segv": _RAY_WORKER_DIED,
}


DISPUTED_HELDOUT |= {
    "open-duck-playground-15-cusolver-internal-error": (
        "cuSolver's internal error names no memory; XLA's preallocation behind it shows only in other threads"
    ),
}


DISPUTED_HELDOUT |= {
    "rsl-rl-96-nan-losses-then-found-lost-pairs": (
        "a capacity overflow is stepped down (with low confidence, so the rung runs again first); the NaN losses "
        "before it are training output, not a failure line"
    ),
    "mppi-isaac-64-anymal-found-lost-pairs-then-illegal-access": (
        "the excerpt ends in the middle of PhysX's message ('The appli'), before any capacity or memory word"
    ),
    "asap-35-isaacgym-hoi-4000-envs-physx-700": _PHYSX_700,
    "depRL-11-mujoco-could-not-allocate-memory": _MUJOCO_ALLOC,
    "cpo-pytorch-5-mujoco-loadxml-could-not-allocate": _MUJOCO_ALLOC,
    "ksim-gym-44-xla-cusolver-internal": (
        "cuSolver's internal error names no memory; XLA's preallocation behind it shows only in other threads"
    ),
}
