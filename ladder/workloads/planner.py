"""One entry point for every workload: a trial (case, profile, rung, placement, folder) → its TrialSpec. Pure.

`workload.kind=auto` (the default) runs MimicKit when a MimicKit folder is configured (`workload.mimickit_root`
or the `MIMICKIT_ROOT` variable) and the built-in proxy otherwise; `resolve` says which, in one line for the log.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ladder.core.errors import ConfigError
from ladder.core.spec import Kind, Launcher, ProgressKind, TrialSpec
from ladder.settings.config import CaseConf, Profile, Settings, WorkloadConf
from ladder.workloads.builtin import Placement, plan_proxy
from ladder.workloads.command import (
    DEFAULT_REGEX,
    PROFILE_PLACEHOLDERS,
    CommandConf,
    check_command,
    command_conf,
    plan_command,
    reads_profile,
    split_cmd,
)
from ladder.workloads.mimickit import NUM_ENVS, MimicKitConf, check_root, plan_mimickit

ROOT_VAR = "MIMICKIT_ROOT"
MIMICKIT_PROGRESS = (ProgressKind.MIMICKIT_STDOUT, ProgressKind.MIMICKIT_LOG)
COMMAND_PROGRESS = (ProgressKind.REGEX, ProgressKind.JSONL)
E = TypeVar("E", bound=enum.Enum)


@dataclass(frozen=True)
class Workload:
    """How every trial of a sweep is run (the kind already resolved)."""

    kind: Kind
    proxy: WorkloadConf  # the proxy's settings (width factor, emulated memory, collective timeout)
    knob: str = NUM_ENVS  # what the ladder's rungs set: num_envs, or any knob the trainer takes
    mimickit: MimicKitConf | None = None  # required for kind mimickit
    command: CommandConf | None = None  # required for kind command


@dataclass(frozen=True)
class Resolved:
    kind: Kind
    mimickit_root: str  # "" unless kind is mimickit
    note: str  # one line for the log: what runs and why


def parse_kind(value: str) -> Kind:
    return _choice(Kind, value, "workload.kind")


def _choice(kind: type[E], value: str, key: str, allowed: Sequence[E] = ()) -> E:
    options = list(allowed) or list(kind)
    try:
        chosen = kind(value)
    except ValueError:
        chosen = None
    if chosen is None or chosen not in options:
        raise ConfigError(f"unknown {key} '{value}'", f"use one of: {', '.join(str(o.value) for o in options)}")
    return chosen


def build(inp: WorkloadConf, knob: str, environ: Mapping[str, str]) -> tuple[Workload, str]:
    """The sweep's workload (auto resolved) and the line to log about it, from the validated settings' workload."""
    got = resolve(parse_kind(inp.kind), inp.mimickit_root, environ)
    if inp.env_patch and got.kind is not Kind.MIMICKIT:
        raise ConfigError(
            f"workload.env_patch patches a MimicKit env config, but the workload is {got.kind}",
            "set workload.mimickit_root (or kind=mimickit), or drop workload.env_patch",
        )
    if inp.samples_per_point and got.kind is not Kind.COMMAND:
        raise ConfigError(
            f"workload.samples_per_point scales one's own trainer's progress, but the workload is {got.kind}",
            "set workload.kind=command with its command, or drop workload.samples_per_point",
        )
    mk = _mimickit_conf(inp, got.mimickit_root) if got.kind is Kind.MIMICKIT else None
    if mk is not None:
        check_root(mk.root)  # before the sweep writes anything, as a command's template and folder are
    cmd = _command_conf(inp, environ) if got.kind is Kind.COMMAND else None
    if cmd is not None:
        check_command(cmd, knob)  # before the sweep writes anything: a template that cannot be filled is refused
    return Workload(got.kind, inp, knob, mk, cmd), got.note


def distinct_profiles(settings: Settings) -> tuple[Settings, str]:
    """One's own trainer whose template reads no profile (`command.reads_profile`) runs the first profile only, and
    the line that says so: the others would run the same command, measured again for nothing, and their tie would
    pick among identical runs. A template not given yet (a resume that takes it from the sweep's record) is left
    as it is; the record holds what was run."""
    w = settings.workload
    if w.kind != Kind.COMMAND or len(settings.profiles) < 2 or not (w.command or w.cmd):
        return settings, ""
    if reads_profile(split_cmd(w.command, w.cmd), w.env):
        return settings, ""
    first, *rest = settings.profiles
    note = (
        f"workload command: the template reads no profile ({', '.join('{' + p + '}' for p in PROFILE_PLACEHOLDERS)}):"
        f" {', '.join(p.name for p in rest)} would run the same command as {first.name}; only {first.name} runs "
        "(put {agent_config} or {profile} in the command to compare profiles)"
    )
    return dataclasses.replace(settings, profiles=(first,)), note


def _mimickit_conf(inp: WorkloadConf, root: str) -> MimicKitConf:
    shown = _choice(ProgressKind, inp.progress or MIMICKIT_PROGRESS[0].value, "workload.progress", MIMICKIT_PROGRESS)
    return MimicKitConf(
        root,
        inp.mimickit_python,
        inp.engine_config,
        inp.mimickit_max_iters,
        inp.mimickit_num_envs,
        shown,
        dict(inp.env_patch),
    )


def _command_conf(inp: WorkloadConf, environ: Mapping[str, str]) -> CommandConf:
    shown = _choice(ProgressKind, inp.progress or COMMAND_PROGRESS[0].value, "workload.progress", COMMAND_PROGRESS)
    launcher = _choice(Launcher, inp.launcher, "workload.launcher")
    regex = inp.progress_regex or DEFAULT_REGEX
    argv = split_cmd(inp.command, inp.cmd)
    return command_conf(
        argv, launcher, shown, regex, inp.progress_file, inp.cwd, inp.env, environ, os.getcwd(), inp.samples_per_point
    )


def resolve(kind: Kind, mimickit_root: str, environ: Mapping[str, str]) -> Resolved:
    """The kind that runs, and the MimicKit folder: the setting first, then $MIMICKIT_ROOT."""
    root = mimickit_root or environ.get(ROOT_VAR, "")
    if kind is Kind.MIMICKIT and not root:
        raise ConfigError(
            "workload.kind=mimickit but no MimicKit folder is configured",
            f"set workload.mimickit_root=/path/to/MimicKit or export {ROOT_VAR}",
        )
    if kind is Kind.AUTO and root:
        return Resolved(Kind.MIMICKIT, root, f"workload auto: running MimicKit from {root}")
    if kind is Kind.AUTO:
        note = (
            f"workload auto: no MimicKit folder configured, running the built-in proxy trainer; to run MimicKit "
            f"set workload.mimickit_root=/path/to/MimicKit (or export {ROOT_VAR})"
        )
        return Resolved(Kind.PROXY, "", note)
    if kind is Kind.MIMICKIT:
        return Resolved(kind, root, f"workload mimickit: running MimicKit from {root}")
    return Resolved(kind, "", f"workload {kind}")


def plan(
    workload: Workload,
    case: CaseConf,
    profile: Profile,
    rung: int,
    place: Placement,
    trial_dir: str,
    max_seconds: float,
    extra_env: dict[str, str],
) -> TrialSpec:
    """The trial spec for one rung of one profile, by the workload's kind."""
    if workload.kind is Kind.MIMICKIT and workload.mimickit is not None:
        return plan_mimickit(case, profile, rung, workload.knob, workload.mimickit, place, trial_dir, extra_env)
    if workload.kind is Kind.COMMAND and workload.command is not None:
        return plan_command(case, profile, rung, workload.knob, workload.command, place, trial_dir, extra_env)
    if workload.kind is Kind.PROXY:
        _proxy_knob(workload.knob)
        return plan_proxy(case, profile, rung, workload.proxy, place, trial_dir, max_seconds, extra_env)
    raise ConfigError(
        f"workload kind '{workload.kind}' is not resolved or lacks its settings",
        "resolve auto with planner.resolve; give mimickit/command settings for those kinds",
    )


def _proxy_knob(knob: str) -> None:
    if knob != NUM_ENVS:
        raise ConfigError(
            f"the proxy walks num_envs only, not '{knob}'",
            "walk num_envs, or run the trainer with workload.kind=command",
        )
