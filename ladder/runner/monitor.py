"""A trial's samplers behind one small protocol (`Sampler`: util and memory per device, `Sample`s), run on a
background thread (`Monitor`) and written to samples.csv. The samplers: `ladder.runner.nvml` (the GPUs) and
`ladder.runner.host` (CPU% and PSS per rank), which `ladder.runner.nvml.sampler_for` picks for a trial."""

from __future__ import annotations

import csv
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ladder.core.records import Sample, Source

log = logging.getLogger(__name__)

MIB = 1024 * 1024
SLOW_S = 1.0  # process lists, tree walks and GPM once a second: they cost ms, not µs (measured)


class Sampler(Protocol):
    source: Source

    def sample(self, now: float) -> list[Sample]: ...

    def close(self) -> None: ...


class JointSampler:
    """NVML for the figures, with the host's CPU/RSS recorded alongside (at ~1 Hz)."""

    def __init__(self, primary: Sampler, *others: Sampler) -> None:
        self.source = primary.source
        self._all = (primary, *others)

    def sample(self, now: float) -> list[Sample]:
        return [s for sampler in self._all for s in sampler.sample(now)]

    def close(self) -> None:
        for sampler in self._all:
            sampler.close()


class Monitor:
    """Runs a sampler on a background thread from start() to stop(); keeps every sample. `cpu_s` is the CPU
    time the sampling thread itself used (known after stop): the measurement's own cost."""

    def __init__(self, sampler: Sampler, hz: float, clock: Callable[[], float] = time.time) -> None:
        self.sampler = sampler
        self.samples: list[Sample] = []
        self.cpu_s = 0.0
        self._period = 1.0 / hz
        self._clock = clock
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ladder-monitor", daemon=True)

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._done.set()
        self._thread.join()
        return list(self.samples)

    def _run(self) -> None:
        failures = 0
        try:
            while not self._done.is_set():
                try:
                    self.samples.extend(self.sampler.sample(self._clock()))
                except Exception as exc:  # a sampler failure must not kill the trial; it shows in the log
                    failures += 1
                    log.log(
                        logging.WARNING if failures == 1 else logging.DEBUG,
                        "sampler %s failed: %s",
                        self.sampler.source,
                        exc,
                    )
                self._done.wait(self._period)
        finally:
            self.sampler.close()
            self.cpu_s = time.thread_time()


SAMPLE_COLUMNS = ("t", "index", "util", "mem_mb", "source", "proc_mem_mb", "sm_util", "energy_mj", "power_w")


def write_samples(samples: list[Sample], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(SAMPLE_COLUMNS)
        writer.writerows(_row(s) for s in samples)


def _row(s: Sample) -> tuple[str, ...]:
    def opt(v: float | None) -> str:
        return "" if v is None else f"{v:.1f}"

    return (
        f"{s.t:.3f}",
        str(s.index),
        f"{s.util:.1f}",
        f"{s.mem_mb:.1f}",
        str(s.source),
        opt(s.proc_mem_mb),
        opt(s.sm_util),
        opt(s.energy_mj),
        opt(s.power_w),
    )
