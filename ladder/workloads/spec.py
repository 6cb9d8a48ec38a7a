"""A trial spec: everything needed to launch one trial, computed before anything runs (shown by dry runs)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TrialSpec:
    argv: tuple[str, ...]  # the program and its arguments: never a shell string
    env: dict[str, str]  # variables ladder sets on top of the inherited environment (written to env.txt)
    files: dict[str, str] = field(default_factory=dict)  # name -> text, written into the trial folder first
    progress_file: str = "progress.jsonl"  # where the trainer reports progress, relative to the trial folder
    nproc: int = 1  # ranks (processes that each own one device)
    info: dict[str, str] = field(default_factory=dict)  # settings recorded with the trial
