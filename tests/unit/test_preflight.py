"""Pre- and post-flight: busy GPUs by policy (wait, refuse, ignore), memory back at baseline, no leftovers.

There is no GPU here, so NVML is a stand-in (`StandInNvml`): a small stateful model of GPUs whose processes end
after a given number of readings, answering the three NVML calls `preflight.read_gpus` makes. Time is a clock
the gate's own `sleep` advances, so waiting is driven by the test, never slept through. Post-flight runs on
real processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from ladder.core.errors import ConfigError, LaunchError
from ladder.runner import launch, preflight
from ladder.runner.preflight import Busy, Clearance, GpuProcess, GpuState, Policy, Preflight, Rules

MIB = 1024 * 1024
NO_SUCH_PID = 4194304 + 17  # above Linux's largest pid_max: no process here can have it
OTHER_PID = NO_SUCH_PID + 1
RULES = Rules(mem_slack_mb=256.0, timeout_s=60.0, poll_s=2.0)


# ---- the stand-in NVML and clock


@dataclass
class Gpu:
    used_mb: float
    total_mb: float = 81559.0
    procs: dict[int, float | None] = field(default_factory=dict)  # pid -> MiB (None: the driver does not say)
    ends_after: dict[int, int] = field(default_factory=dict)  # pid -> process-list readings before it exits
    freed_late_mb: float = 0.0  # memory the driver still holds for one reading after the last process ended


class StandInNvml:
    """NVML's three calls over scripted GPUs; a process exits (and frees its memory) after its readings."""

    def __init__(self, gpus: dict[int, Gpu]) -> None:
        self.gpus = gpus

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Gpu:  # noqa: N802
        return self.gpus[index]

    def nvmlDeviceGetMemoryInfo(self, gpu: Gpu) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(used=int(gpu.used_mb * MIB), total=int(gpu.total_mb * MIB))

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: Gpu) -> list[SimpleNamespace]:  # noqa: N802
        listed = [
            SimpleNamespace(pid=pid, usedGpuMemory=None if mb is None else int(mb * MIB))
            for pid, mb in gpu.procs.items()
        ]
        self._advance(gpu)
        return listed

    @staticmethod
    def _advance(gpu: Gpu) -> None:
        if gpu.freed_late_mb and not gpu.procs:
            gpu.used_mb, gpu.freed_late_mb = gpu.used_mb - gpu.freed_late_mb, 0.0
        for pid in [p for p, n in gpu.ends_after.items() if n <= 1]:
            gpu.used_mb -= gpu.procs.pop(pid) or 0.0
            del gpu.ends_after[pid]
        gpu.ends_after = {p: n - 1 for p, n in gpu.ends_after.items()}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def gate(nvml: StandInNvml, policy: Policy, clock: Clock, own_pids: tuple[int, ...] = ()) -> Preflight:
    rules = Rules(policy, RULES.mem_slack_mb, RULES.timeout_s, RULES.poll_s)
    return Preflight(lambda indices: preflight.read_gpus(nvml, indices), rules, own_pids, clock, clock.sleep)


def gpu_state(index: int, used_mb: float, *pids: int) -> GpuState:
    return GpuState(index, used_mb, 81559.0, tuple(GpuProcess(pid, 1000.0, "python") for pid in pids))


# ---- the pure core


@pytest.mark.parametrize(
    ("snapshot", "own", "expected"),
    [
        ([gpu_state(0, 600.0)], (), Clearance()),
        ([gpu_state(0, 700.0)], (), Clearance()),  # within the slack
        ([gpu_state(0, 1600.0, 7)], (7,), Clearance()),  # our own process and its memory
        (
            [gpu_state(0, 2600.0, 7), gpu_state(1, 500.0)],
            (),
            Clearance((Busy(0, (GpuProcess(7, 1000.0, "python"),), 2600.0, 500.0, 1844.0),)),
        ),
        ([gpu_state(1, 3500.0)], (), Clearance((Busy(1, (), 3500.0, 500.0, 2744.0),))),  # unlisted holder
        ([gpu_state(2, 9000.0)], (), Clearance()),  # no baseline known yet for GPU 2: only processes count
    ],
    ids=["idle", "within-slack", "own-process", "foreign-process", "memory-over-baseline", "no-baseline-yet"],
)
def test_clearance(snapshot: list[GpuState], own: tuple[int, ...], expected: Clearance) -> None:
    assert preflight.clearance(snapshot, {0: 500.0, 1: 500.0}, 256.0, own) == expected


def test_baseline_is_the_lowest_reading_without_processes() -> None:
    baseline = preflight.lower_baseline({}, [gpu_state(0, 900.0), gpu_state(1, 5000.0, 7)])
    assert baseline == {0: 900.0}
    baseline = preflight.lower_baseline(baseline, [gpu_state(0, 450.0), gpu_state(1, 300.0)])
    assert baseline == {0: 450.0, 1: 300.0}
    assert preflight.lower_baseline(baseline, [gpu_state(0, 2000.0)]) == baseline


def test_unknown_policy_names_the_options() -> None:
    with pytest.raises(ConfigError, match="wait, refuse, ignore"):
        preflight.parse_policy("sometimes")
    assert preflight.parse_policy("refuse") is Policy.REFUSE


# ---- reading NVML


def test_read_gpus_through_nvml_calls() -> None:
    nvml = StandInNvml({0: Gpu(used_mb=3000.0, procs={os.getpid(): 2500.0, NO_SUCH_PID: None}), 1: Gpu(400.0)})
    (first,) = preflight.read_gpus(nvml, [0])
    assert (first.index, first.used_mb, first.total_mb) == (0, 3000.0, 81559.0)
    mine, unseen = first.processes
    assert (mine.pid, mine.used_mb) == (os.getpid(), 2500.0) and mine.name.startswith("python")
    assert unseen == GpuProcess(NO_SUCH_PID, None, "?")


def test_no_driver_fails_fast_in_load_nvml() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        preflight.load_nvml()
    except pynvml.NVMLError:
        return  # this machine: no driver
    pytest.skip("an NVIDIA driver is present here")


# ---- the gate, by policy


def test_refuse_names_the_pids_and_the_fix() -> None:
    nvml = StandInNvml({0: Gpu(used_mb=500.0), 1: Gpu(used_mb=4500.0, procs={NO_SUCH_PID: 4000.0})})
    with pytest.raises(LaunchError) as caught:
        gate(nvml, Policy.REFUSE, Clock()).before_launch([0, 1])
    message = str(caught.value)
    assert f"GPU 1: compute process(es) {NO_SUCH_PID} (?, 4000 MiB)" in message
    assert f"kill {NO_SUCH_PID}" in message and "policy wait" in message and "policy ignore" in message
    assert "GPU 0" not in message


def test_wait_returns_once_the_foreign_process_has_ended() -> None:
    nvml = StandInNvml(
        {
            0: Gpu(
                used_mb=500.0, procs={NO_SUCH_PID: 3000.0, OTHER_PID: 1000.0}, ends_after={NO_SUCH_PID: 2, OTHER_PID: 3}
            )
        }
    )
    nvml.gpus[0].used_mb += 4000.0
    clock = Clock()
    preflight_gate = gate(nvml, Policy.WAIT, clock)
    assert preflight_gate.before_launch([0]).clear
    assert clock.now == 3 * RULES.poll_s
    assert nvml.gpus[0].procs == {}


def test_wait_also_waits_for_memory_to_come_back_to_baseline() -> None:
    nvml = StandInNvml({0: Gpu(used_mb=500.0)})
    clock = Clock()
    preflight_gate = gate(nvml, Policy.WAIT, clock)
    assert preflight_gate.before_launch([0]).clear and preflight_gate.baseline == {0: 500.0}
    nvml.gpus[0].used_mb, nvml.gpus[0].freed_late_mb = 2500.0, 2000.0  # a trial ended; the driver frees late
    assert preflight_gate.before_launch([0]).clear
    assert clock.now == RULES.poll_s


def test_wait_refuses_after_its_timeout() -> None:
    nvml = StandInNvml({0: Gpu(used_mb=4500.0, procs={NO_SUCH_PID: 4000.0})})
    clock = Clock()
    with pytest.raises(LaunchError, match=f"after waiting 60 s: GPU 0: compute process.*{NO_SUCH_PID}"):
        gate(nvml, Policy.WAIT, clock).before_launch([0])
    assert clock.now == RULES.timeout_s


def test_ignore_launches_on_a_busy_gpu() -> None:
    nvml = StandInNvml({0: Gpu(used_mb=4500.0, procs={NO_SUCH_PID: 4000.0})})
    clock = Clock()
    decision = gate(nvml, Policy.IGNORE, clock).before_launch([0])
    assert decision.pids == (NO_SUCH_PID,) and clock.now == 0.0


def test_own_processes_do_not_block() -> None:
    nvml = StandInNvml({0: Gpu(used_mb=4500.0, procs={OTHER_PID: 4000.0})})
    assert gate(nvml, Policy.REFUSE, Clock(), own_pids=(OTHER_PID,)).before_launch([0]).clear


# ---- post-flight, on real processes


@pytest.fixture(scope="module", autouse=True)
def subreaper() -> None:
    launch.become_subreaper()


def test_a_wait_names_who_holds_the_gpu_and_what_the_policy_will_do_at_once_and_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Never a silent wait: the first reading names the foreign process (pid, name, memory) and when the policy
    refuses; the line comes again every REMIND_S while it waits, and once more when the GPU is clear."""
    ends = int(preflight.REMIND_S / RULES.poll_s) + 2  # clear a little after the first reminder
    nvml = StandInNvml({0: Gpu(used_mb=4500.0, procs={NO_SUCH_PID: 4000.0}, ends_after={NO_SUCH_PID: ends})})
    caplog.set_level("WARNING", logger="ladder.runner.preflight")
    assert gate(nvml, Policy.WAIT, Clock()).before_launch([0]).clear
    lines = [r.getMessage() for r in caplog.records]
    first = lines[0]
    assert f"GPU 0: compute process(es) {NO_SUCH_PID} (?, 4000 MiB)" in first
    assert "preflight.policy=wait" in first and f"refuses in {RULES.timeout_s:.0f} s" in first
    assert sum(line.startswith("waiting for busy GPU(s)") for line in lines) == 2  # at once, and after REMIND_S
    assert lines[-1].startswith("GPU(s) clear after")
