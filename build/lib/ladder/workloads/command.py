"""The command workload: any trainer, from an argv template. Pure planning.

The template is a list of strings with placeholders: the walked knob (`{num_envs}`, `{update_interval}`, ...),
`{trial_dir}`, `{nproc}`, `{port}`, `{python}`, `{device}`, `{case}`, `{variant}` and `{agent_config}` (the
case's agent config with the profile applied, written into the trial folder). Hydra-style overrides are plain
strings: `worker.multitask.num_envs={num_envs}` (seed 004's trainer). A literal brace is written twice (`{{`).
With the `torchrun` launcher the template is what follows torchrun's own options (a script and its arguments,
or `-m module ...`); with `direct` it is the whole command. Progress: a regex over the trial's stdout, or a
JSON-lines file the trainer writes.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import yaml

from ladder.config import Case, Profile
from ladder.errors import ConfigError
from ladder.progress import compile_pattern
from ladder.workloads.builtin import Placement, torchrun
from ladder.workloads.profiles import apply_profile
from ladder.workloads.spec import STDOUT_FILE, Launcher, ProgressKind, TrialSpec

# `iter 12 ... samples 3072` (or `iteration=12`, `samples: 3072`); ladder/progress.py lists the groups a regex may use
DEFAULT_REGEX = r"\biter(?:ation)?[\s=:]+(?P<iter>\d+)(?:.*?\bsamples[\s=:]+(?P<samples>[\d.eE+]+))?"
FIXED_PLACEHOLDERS = ("trial_dir", "nproc", "port", "python", "device", "case", "variant", "agent_config")
PROGRESS_DEFAULTS = {ProgressKind.REGEX: STDOUT_FILE, ProgressKind.JSONL: "progress.jsonl"}


@dataclass(frozen=True)
class CommandConf:
    """How to run an arbitrary trainer (the `workload.command*` settings)."""

    argv: tuple[str, ...]  # the template, one string per argument
    launcher: Launcher = Launcher.DIRECT  # torchrun: ladder starts torchrun, the template is its program
    progress: ProgressKind = ProgressKind.REGEX  # regex (over progress_file, stdout by default) or jsonl
    progress_regex: str = DEFAULT_REGEX  # a regex with named groups (iter, samples, t, step_time, ...) or a preset
    progress_file: str = ""  # relative to the trial folder; "" = stdout.log (regex) or progress.jsonl (jsonl)
    cwd: str = ""  # the folder the trainer starts in; "" = ladder's own


def plan_command(
    case: Case,
    profile: Profile,
    rung: int,
    knob: str,
    conf: CommandConf,
    place: Placement,
    trial_dir: str,
    extra_env: dict[str, str],
) -> TrialSpec:
    check_command(conf, knob)
    values = placeholders(case, profile, rung, knob, place, trial_dir)
    body = tuple(arg.format_map(values) for arg in conf.argv)
    prefix = torchrun(place, trial_dir) if conf.launcher is Launcher.TORCHRUN else ()
    agent = apply_profile(case.agent, profile.agent_patch)
    return TrialSpec(
        argv=prefix + body,
        env={**extra_env, "PYTHONUNBUFFERED": "1"},
        files={"agent.yaml": yaml.safe_dump(agent, sort_keys=False)} if agent else {},
        progress_file=conf.progress_file or PROGRESS_DEFAULTS[conf.progress],
        nproc=place.nproc,
        info=_info(conf, knob, place),
        launcher=conf.launcher,
        progress_kind=conf.progress,
        progress_regex=conf.progress_regex if conf.progress is ProgressKind.REGEX else "",
        cwd=conf.cwd,
    )


def _info(conf: CommandConf, knob: str, place: Placement) -> dict[str, str]:
    return {
        "workload": "command",
        "knob": knob,
        "launcher": str(conf.launcher),
        "device": place.device,
        "nproc": str(place.nproc),
        "port": str(place.port),
    }


def placeholders(
    case: Case, profile: Profile, rung: int, knob: str, place: Placement, trial_dir: str
) -> dict[str, str]:
    return {
        knob: str(rung),
        "trial_dir": trial_dir,
        "nproc": str(place.nproc),
        "port": str(place.port),
        "python": place.python,
        "device": place.device,
        "case": case.name,
        "variant": profile.name,
        "agent_config": f"{trial_dir}/agent.yaml",
    }


def check_command(conf: CommandConf, knob: str) -> None:
    """Reject a template that cannot be filled, or that never uses the knob (every rung would be one command)."""
    if not conf.argv:
        raise ConfigError("workload command has no argv template", "set workload.command=[prog,arg,...]")
    if conf.progress not in PROGRESS_DEFAULTS:
        raise ConfigError(f"command progress '{conf.progress}' is not supported", "use regex or jsonl")
    if conf.progress is ProgressKind.REGEX:
        compile_pattern(conf.progress_regex)
    known = (knob, *FIXED_PLACEHOLDERS)
    used = {name for arg in conf.argv for name in _fields(arg)}
    if unknown := sorted(used - set(known)):
        raise ConfigError(f"argv template uses unknown placeholder(s) {unknown}",
                          f"use {', '.join('{' + k + '}' for k in known)}; write a literal brace twice")  # fmt: skip
    if knob not in used:
        raise ConfigError(f"argv template never uses {{{knob}}}: every rung would run the same command",
                          f"put {{{knob}}} where the trainer takes it, e.g. trainer.{knob}={{{knob}}}")  # fmt: skip


def _fields(arg: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(arg) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"argv template entry {arg!r} is malformed: {exc}", "write a literal brace twice") from None
