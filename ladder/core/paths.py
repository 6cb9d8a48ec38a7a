"""Every file of a sweep and of a trial, named once (as submitit's `JobPaths` names a job's). Pure: paths are
computed here, never touched.

```
<output_root>/latest_sweep                      the sweep `ladder.search` started or resumed last
<output_root>/case_gpu_bench_<sweep>/            one sweep (scripts that glob this prefix find it)
    best_by_case.tsv  trials.tsv  journal.log     .reuse.<case>.lock
    trials/<case>/<profile>_e<num_envs>_<phase>_<n>/    one trial (another knob: <profile>_<knob><value>_...)
        cmd.txt env.txt agent.yaml stdout.log ranks/ progress.jsonl samples.csv verdict.json exit_code.txt
```
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

SWEEP_PREFIX = "case_gpu_bench_"  # a sweep's folder is <output_root>/<prefix><sweep>
LATEST_FILE = "latest_sweep"  # under output_root: the name of the sweep ladder.search started or resumed last
JOURNAL = "journal.log"  # the embedded Optuna storage of a sweep
BEST_TSV = "best_by_case.tsv"
TRIALS_TSV = "trials.tsv"
TRIALS_DIR = "trials"

CMD = "cmd.txt"  # the exact argv, as one shell-quoted line
ENV = "env.txt"  # the variables ladder set
AGENT = "agent.yaml"  # the case's agent config with the profile applied
STDOUT = "stdout.log"  # the trial's combined stdout and stderr
PROGRESS = "progress.jsonl"  # JSON progress lines (the built-in proxy's, or a trainer's)
SAMPLES = "samples.csv"  # util and memory per device over time
VERDICT = "verdict.json"  # how it ended, as `python -m ladder.failures` shows it
EXIT_CODE = "exit_code.txt"  # the launcher's exit code
RANKS = "ranks"  # torchrun's --log-dir: <run>/attempt_<n>/<rank>/{stdout,stderr}.log and error.json


def sweep_name(now: datetime) -> str:
    """A new sweep's name when none is given: the UTC time it started."""
    return now.strftime("%Y%m%d_%H%M%S")


def sweep_of(folder_name: str) -> str | None:
    """The sweep a folder under output_root holds (`case_gpu_bench_<sweep>`), None for any other folder."""
    if folder_name.startswith(SWEEP_PREFIX) and len(folder_name) > len(SWEEP_PREFIX):
        return folder_name[len(SWEEP_PREFIX) :]
    return None


def rung_dir(knob: str, rung: int) -> str:
    """A rung in a trial folder's name: `e64` for num_envs (scripts read `e<N>`), `update_interval10`."""
    return f"e{rung}" if knob == "num_envs" else f"{knob}{rung}"


@dataclass(frozen=True)
class TrialPaths:
    """One trial's folder and its files."""

    folder: Path

    def __truediv__(self, name: str) -> Path:
        return self.folder / name

    @property
    def cmd(self) -> Path:
        return self.folder / CMD

    @property
    def env(self) -> Path:
        return self.folder / ENV

    @property
    def stdout(self) -> Path:
        return self.folder / STDOUT

    @property
    def progress(self) -> Path:
        return self.folder / PROGRESS

    @property
    def samples(self) -> Path:
        return self.folder / SAMPLES

    @property
    def verdict(self) -> Path:
        return self.folder / VERDICT

    @property
    def exit_code(self) -> Path:
        return self.folder / EXIT_CODE

    @property
    def ranks(self) -> Path:
        return self.folder / RANKS


@dataclass(frozen=True)
class SweepPaths:
    """One sweep's folder and its files."""

    sweep: str
    sweep_dir: Path

    @staticmethod
    def of(output_root: str | Path, sweep: str) -> SweepPaths:
        return SweepPaths(sweep, Path(output_root) / f"{SWEEP_PREFIX}{sweep}")

    @property
    def output_root(self) -> Path:
        return self.sweep_dir.parent

    @property
    def best_tsv(self) -> Path:
        return self.sweep_dir / BEST_TSV

    @property
    def trials_tsv(self) -> Path:
        return self.sweep_dir / TRIALS_TSV

    @property
    def journal(self) -> Path:
        return self.sweep_dir / JOURNAL

    def reuse_lock(self, case: str) -> Path:
        """Held while trials of earlier sweeps are copied into the case (one process at a time)."""
        return self.sweep_dir / f".reuse.{case}.lock"

    def trial(self, case: str, profile: str, rung: int, phase: str, n: int, knob: str = "num_envs") -> TrialPaths:
        """`trials/<case>/default_e64_probe_1` (num_envs), `trials/<case>/default_update_interval10_probe_1`."""
        return TrialPaths(self.sweep_dir / TRIALS_DIR / case / f"{profile}_{rung_dir(knob, rung)}_{phase}_{n}")

    def relative(self, path: Path) -> str:
        """A path inside the sweep folder as the records keep it (relative, so the folder can move)."""
        return str(path.relative_to(self.sweep_dir))


def latest_file(output_root: str | Path) -> Path:
    return Path(output_root) / LATEST_FILE
