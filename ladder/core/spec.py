"""A trial spec: everything needed to launch one trial, computed before anything runs (shown by dry runs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ladder.core import paths
from ladder.core.records import Word


class Kind(Word):
    """Which trainer runs a trial (`workload.kind`)."""

    AUTO = "auto"  # mimickit when a MimicKit folder is configured, else proxy
    PROXY = "proxy"  # the built-in stand-in trainer (ladder.workloads.proxy) under torchrun
    MIMICKIT = "mimickit"  # MimicKit's mimickit/run.py
    COMMAND = "command"  # any trainer, from an argv template


class EmulateBy(Word):
    """How a trial is made to meet a smaller card's memory (`workload.emulate_gpu_mem_gb`)."""

    AUTO = "auto"  # the built-in proxy caps its own allocations; any other trainer on a GPU gets a ballast
    BALLAST = "ballast"  # a holder process takes the rest of each GPU (`ladder.runner.ballast`): any trainer
    FRACTION = "fraction"  # the built-in proxy's own cap (torch's memory fraction; its data segment on CPU)


class Launcher(Word):
    """Who starts the ranks."""

    TORCHRUN = "torchrun"  # ladder's argv starts torchrun, which starts one worker per rank
    DIRECT = "direct"  # the program starts its own ranks (MimicKit spawns one process per --devices entry)


class ProgressKind(Word):
    """How the trainer's progress is read from `TrialSpec.progress_file` (the parsers are in ladder/progress.py)."""

    JSONL = "jsonl"  # one JSON object per line with `t`, `iter`, `samples` (the proxy's progress.jsonl)
    REGEX = "regex"  # each line matched by `progress_regex` (named groups iter, samples, ...; or a preset)
    MIMICKIT_STDOUT = "mimickit_stdout"  # MimicKit's per-iteration `| Iteration | N |` table on stdout
    MIMICKIT_LOG = "mimickit_log"  # MimicKit's log.txt (a row every iters_per_output iterations only)


@dataclass(frozen=True)
class TrialSpec:
    argv: tuple[str, ...]  # the program and its arguments: never a shell string
    env: dict[str, str]  # variables ladder sets on top of the inherited environment (written to env.txt)
    files: dict[str, str] = field(default_factory=dict)  # name -> text, written into the trial folder first
    progress_file: str = paths.PROGRESS  # where the trainer reports progress, relative to the trial folder
    nproc: int = 1  # ranks (processes that each own one device)
    info: dict[str, str] = field(default_factory=dict)  # settings recorded with the trial
    launcher: Launcher = Launcher.TORCHRUN  # who starts the ranks (torchrun error files exist only for torchrun)
    progress_kind: ProgressKind = ProgressKind.JSONL  # the format of progress_file
    progress_regex: str = ""  # the pattern for ProgressKind.REGEX
    progress_samples_per_iter: float | None = None  # for trainers that print only a rate (CleanRL's SPS)
    progress_per_iteration: bool = False  # each progress point is a whole iteration, its update included
    cwd: str = ""  # the folder the program starts in; "" = ladder's own working folder
    warm_python: str = ""  # the interpreter whose warm starter forks the ranks (`ladder.runner.warm`); "" = none
