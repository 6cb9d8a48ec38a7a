"""The command workload: any trainer, from an argv template. Pure planning (`command_conf` reads the launch folder).

The template is a list of strings (`workload.command=[...]`) or one string split like a shell would
(`workload.cmd="python train.py --num-envs {num_envs}"`, `shlex.split`, never run through a shell), with
placeholders: the walked knob (`{num_envs}`, `{update_interval}`, ...), `{trial_dir}`, `{launch_dir}` (where ladder
was started), `{nproc}`, `{port}`, `{python}`, `{device}`, `{case}`, `{profile}` (or `{variant}`) and `{agent_config}`
(the case's agent config with the profile applied, written into the trial folder only when the template uses it).
Hydra-style overrides are plain strings: `worker.multitask.num_envs={num_envs}`. A literal brace is
written twice (`{{`). With the `torchrun` launcher the template is what follows torchrun's own options: a script and
its arguments or `-m module ...` (torchrun runs them with ladder's interpreter), or a command as the user runs it
alone, `python train.py ...` (torchrun runs it as written, with `--no-python`); with `direct` it is the whole command.
Progress: a regex over the trial's stdout, or a
JSON-lines file the trainer writes.

Where it runs: `workload.cwd` ("" = `{trial_dir}`, so a trainer's own outputs such as `runs/...` stay in its trial
folder; `{launch_dir}` or any existing folder otherwise). So that `python train.py` keeps working from the trial
folder, a relative argument naming an existing file of the launch folder (`train.py`, `--config=conf/a.yaml`) is
made absolute, and `python -m pkg.module` finds the launch folder's packages through `PYTHONPATH`.

Environment: `workload.env.NAME=value` (placeholders allowed) is set for the trial's processes; the inherited
variables in `INHERITED` that are set when ladder starts are recorded with them (env.txt, and the reuse identity).
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ladder.core import paths
from ladder.core.errors import ConfigError
from ladder.core.spec import Launcher, ProgressKind, TrialSpec
from ladder.settings.config import CaseConf, Profile
from ladder.workloads.builtin import Placement, ranks
from ladder.workloads.profiles import apply_profile
from ladder.workloads.progress import compile_pattern, per_iteration

# `iter 12 ... samples 3072` (or `iteration=12`, `samples: 3072`); ladder/progress.py lists the groups a regex may use
DEFAULT_REGEX = r"\biter(?:ation)?[\s=:]+(?P<iter>\d+)(?:.*?\bsamples[\s=:]+(?P<samples>[\d.eE+]+))?"
FIXED_PLACEHOLDERS = (
    "trial_dir",
    "launch_dir",
    "nproc",
    "port",
    "python",
    "device",
    "case",
    "profile",
    "variant",
    "agent_config",
)
CWD_PLACEHOLDERS = ("trial_dir", "launch_dir")
DEFAULT_CWD = "{trial_dir}"
PROGRESS_DEFAULTS = {ProgressKind.REGEX: paths.STDOUT, ProgressKind.JSONL: paths.PROGRESS}
# Inherited variables that change what a Python trainer imports, links or how many threads it runs: recorded (in
# env.txt and the reuse identity) when set. PATH and the rest are inherited unrecorded: they differ between shells.
INHERITED = (
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)


@dataclass(frozen=True)
class CommandConf:
    """How to run an arbitrary trainer (the `workload.command*` settings)."""

    argv: tuple[str, ...]  # the template, one string per argument
    launcher: Launcher = Launcher.DIRECT  # torchrun: ladder starts torchrun, the template is its program
    progress: ProgressKind = ProgressKind.REGEX  # regex (over progress_file, stdout by default) or jsonl
    progress_regex: str = DEFAULT_REGEX  # a regex with named groups (iter, samples, t, step_time, ...) or a preset
    progress_file: str = ""  # relative to the trial folder; "" = stdout.log (regex) or progress.jsonl (jsonl)
    cwd: str = DEFAULT_CWD  # the folder the trainer starts in: {trial_dir}, {launch_dir} or an existing folder
    env: dict[str, str] = field(default_factory=dict)  # workload.env: set for the trial's processes (placeholders)
    inherited: dict[str, str] = field(default_factory=dict)  # INHERITED variables set when ladder started
    launch_dir: str = ""  # where ladder was started ("" = not known: {launch_dir} is ".")
    samples_per_point: str = ""  # samples one progress point stands for: a number or "{num_envs}"; "" = its count


def split_cmd(command: Sequence[str], cmd: str) -> tuple[str, ...]:
    """The argv template from `workload.command` (a list) or `workload.cmd` (one string, split like a shell)."""
    if command and cmd:
        raise ConfigError(
            "both workload.command and workload.cmd are set",
            'keep one: workload.command=[prog,arg,...] or workload.cmd="prog arg ..."',
        )
    if not cmd:
        return tuple(str(a) for a in command)
    try:
        return tuple(shlex.split(cmd))
    except ValueError as exc:
        raise ConfigError(f"workload.cmd {cmd!r} cannot be split: {exc}", "close every quote in the command") from None


def command_conf(
    argv: Sequence[str],
    launcher: Launcher,
    progress: ProgressKind,
    regex: str,
    progress_file: str,
    cwd: str,
    env: Mapping[str, object],
    environ: Mapping[str, str],
    launch_dir: str,
    samples_per_point: str = "",
) -> CommandConf:
    """The conf with its launch folder and inherited variables captured, and relative files of the launch folder
    made absolute (the trainer starts in its trial folder by default)."""
    anchored = tuple(_anchor(arg, launch_dir) for arg in argv)
    inherited = {k: environ[k] for k in INHERITED if environ.get(k)} | _trainer_venv(anchored, environ)
    inherited = {k: v for k, v in inherited.items() if v}
    if "-m" in anchored and launch_dir:  # python -m pkg: the launch folder's packages, as `python -m` there finds them
        inherited["PYTHONPATH"] = os.pathsep.join(p for p in (launch_dir, inherited.get("PYTHONPATH", "")) if p)
    chosen = cwd or DEFAULT_CWD
    _check_cwd(chosen, launch_dir)
    return CommandConf(
        anchored,
        launcher,
        progress,
        regex,
        progress_file,
        chosen,
        {str(k): str(v) for k, v in env.items()},
        inherited,
        launch_dir,
        str(samples_per_point),
    )


def _trainer_venv(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """`VIRTUAL_ENV` as the trainer runs: where its program is a Python interpreter, the virtual environment that
    interpreter belongs to ("" for one outside any), not the one ladder was started from; nothing otherwise."""
    if not argv or not Path(argv[0]).name.startswith("python"):
        return {}
    found = shutil.which(argv[0], path=environ.get("PATH"))
    if found is None:
        return {}
    for folder in (Path(found).parent.parent, Path(found).resolve().parent.parent):
        if (folder / "pyvenv.cfg").is_file():
            return {"VIRTUAL_ENV": str(folder)}
    return {"VIRTUAL_ENV": ""}


def _anchor(arg: str, launch_dir: str) -> str:
    """`train.py` -> `<launch_dir>/train.py` when that file exists (also the value of `--opt=path`)."""
    if not launch_dir or "{" in arg:
        return arg
    head, sep, value = arg.rpartition("=") if arg.startswith("-") else ("", "", arg)
    if value and not os.path.isabs(value) and os.path.isfile(os.path.join(launch_dir, value)):
        return head + sep + os.path.join(launch_dir, value)
    return arg


def named_files(conf: CommandConf) -> tuple[str, ...]:
    """The existing files the template names, as absolute paths, in order, once each: its script, configs and any
    file an argument (or the value of an `--opt=path` or `key=path` override) gives, relative ones of the launch
    folder already made absolute (`_anchor`). What the trainer runs beyond its command line: its code and its
    settings' files."""
    found: dict[str, None] = {}
    for arg in conf.argv:
        for value in (arg, arg.rpartition("=")[2]):
            if value and "{" not in value and os.path.isabs(value) and os.path.isfile(value):
                found[value] = None
    return tuple(found)


def _check_cwd(cwd: str, launch_dir: str) -> None:
    fix = "set workload.cwd={trial_dir} (the default), {launch_dir}, or an existing folder"
    names = _fields(cwd, "workload.cwd")
    if unknown := sorted(set(names) - set(CWD_PLACEHOLDERS)):
        raise ConfigError(f"workload.cwd {cwd!r} uses placeholder(s) {unknown}", fix)
    if "trial_dir" in names:
        if cwd != "{trial_dir}":
            raise ConfigError(f"workload.cwd {cwd!r}: a folder inside the trial folder does not exist at launch", fix)
        return
    folder = cwd.format(launch_dir=launch_dir or ".")
    if not os.path.isdir(os.path.join(launch_dir, folder)):
        raise ConfigError(f"workload.cwd {cwd!r}: no such folder ({os.path.join(launch_dir, folder)})", fix)


def plan_command(
    case: CaseConf,
    profile: Profile,
    rung: int,
    knob: str,
    conf: CommandConf,
    place: Placement,
    trial_dir: str,
    extra_env: dict[str, str],
) -> TrialSpec:
    check_command(conf, knob)
    values = placeholders(case, profile, rung, knob, place, trial_dir, conf.launch_dir)
    body = tuple(arg.format_map(values) for arg in conf.argv)
    prefix, rank_vars, launcher = (
        _rank_prefix(body, place, trial_dir) if conf.launcher is Launcher.TORCHRUN else ((), {}, conf.launcher)
    )
    env = {k: v.format_map(values) for k, v in conf.env.items()}
    return TrialSpec(
        argv=prefix + body,
        env={**rank_vars, **conf.inherited, **extra_env, "PYTHONUNBUFFERED": "1", **env},
        files=_agent_file(case, profile, conf),
        progress_file=conf.progress_file or PROGRESS_DEFAULTS[conf.progress],
        nproc=place.nproc,
        info={**_info(conf, knob, place), "launcher": str(launcher)},
        launcher=launcher,
        progress_kind=conf.progress,
        progress_regex=conf.progress_regex if conf.progress is ProgressKind.REGEX else "",
        progress_per_iteration=per_iteration(conf.progress, conf.progress_regex),
        progress_samples_per_iter=samples_per_point(conf.samples_per_point, values),
        cwd=conf.cwd.format_map(values),
    )


SAMPLES_PER_POINT_FIX = (
    "set a number, or the knob's placeholder where one point is a step of every env: "
    'workload.samples_per_point="{num_envs}"'
)


def samples_per_point(template: str, values: Mapping[str, str]) -> float | None:
    """The samples one progress point stands for (`workload.samples_per_point`, its placeholder filled): a counter
    of vector steps (a tqdm bar over them) counts one step of all `num_envs` envs at once. None where unset: the
    trainer's own count stands."""
    if not template:
        return None
    text = template.format_map(values)
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not 0 < number < math.inf:
        raise ConfigError(
            f"workload.samples_per_point {template!r} is {text!r}: not a positive number", SAMPLES_PER_POINT_FIX
        )
    return number


def python_program(body: Sequence[str]) -> bool:
    """Whether a torchrun template names a Python program for torchrun's interpreter to run (`train.py ...`,
    `-m pkg.train ...`), rather than a command of its own (`python train.py ...`, `/venv/bin/python ...`, a
    launcher script): torchrun runs the former as `<python> <template>`, the latter only with `--no-python`."""
    return bool(body) and (body[0] == "-m" or body[0].endswith(".py"))


def _rank_prefix(
    body: Sequence[str], place: Placement, trial_dir: str
) -> tuple[tuple[str, ...], dict[str, str], Launcher]:
    """What goes before the template under the torchrun launcher (`ladder.workloads.builtin.ranks`). A template
    that is a command of its own (`python train.py ...`, as a user runs it alone) runs as written: torchrun gets
    `--no-python`, and a one-rank trial started directly gets no interpreter of ladder's before it."""
    prefix, rank_vars, launcher = ranks(place, trial_dir)
    if python_program(body):
        return prefix, rank_vars, launcher
    if launcher is Launcher.TORCHRUN:
        return (*prefix, "--no-python"), rank_vars, launcher
    return (), rank_vars, launcher


def _agent_file(case: CaseConf, profile: Profile, conf: CommandConf) -> dict[str, str]:
    """agent.yaml, for a template that reads it ({agent_config}) only."""
    if "agent_config" not in _used(conf):
        return {}
    agent = apply_profile(case.agent, profile.agent_patch)
    if not agent:
        raise ConfigError(
            f"the command uses {{agent_config}} but case '{case.name}' has no agent config",
            "give the case an `agent:` mapping, or drop {agent_config} from the command",
        )
    return {paths.AGENT: yaml.safe_dump(agent, sort_keys=False)}


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
    case: CaseConf, profile: Profile, rung: int, knob: str, place: Placement, trial_dir: str, launch_dir: str = ""
) -> dict[str, str]:
    return {
        knob: str(rung),
        "trial_dir": trial_dir,
        "launch_dir": launch_dir or ".",
        "nproc": str(place.nproc),
        "port": str(place.port),
        "python": place.python,
        "device": place.device,
        "case": case.name,
        "profile": profile.name,
        "variant": profile.name,
        "agent_config": f"{trial_dir}/agent.yaml",
    }


def single_process(kind: str, launcher: str, command: Sequence[str], cmd: str) -> bool:
    """A command workload that runs one process and tells it no rank count: its real number of ranks is 1."""
    if kind != "command" or launcher != str(Launcher.DIRECT):
        return False
    try:
        argv = split_cmd(command, cmd)
        return "nproc" not in {name for arg in argv for name in _fields(arg)}
    except ConfigError:
        return False  # the sweep says what is wrong with it when it plans


def check_command(conf: CommandConf, knob: str) -> None:
    """Reject a template that cannot be filled, or that never uses the knob (every rung would be one command)."""
    if not conf.argv:
        raise ConfigError(
            "workload command has no argv template",
            'set workload.cmd="prog arg ..." or workload.command=[prog,arg,...]',
        )
    if conf.progress not in PROGRESS_DEFAULTS:
        raise ConfigError(f"command progress '{conf.progress}' is not supported", "use regex or jsonl")
    if conf.progress is ProgressKind.REGEX:
        compile_pattern(conf.progress_regex)
    if conf.samples_per_point:  # filled with a stand-in rung: a template that could never give a number is refused
        if unknown := sorted(set(_fields(conf.samples_per_point, "workload.samples_per_point")) - {knob, "nproc"}):
            raise ConfigError(f"workload.samples_per_point uses placeholder(s) {unknown}", SAMPLES_PER_POINT_FIX)
        samples_per_point(conf.samples_per_point, {knob: "1", "nproc": "1"})
    known = (knob, *FIXED_PLACEHOLDERS)
    used = _used(conf)
    if unknown := sorted(used - set(known)):
        raise ConfigError(
            f"command template uses unknown placeholder(s) {unknown}",
            f"use {', '.join('{' + k + '}' for k in known)}; write a literal brace twice",
        )
    if knob not in used:
        raise ConfigError(
            f"command template never uses {{{knob}}}: every rung would run the same command",
            f"put {{{knob}}} where the trainer takes it, e.g. trainer.{knob}={{{knob}}}",
        )


PROFILE_PLACEHOLDERS = ("agent_config", "profile", "variant")  # where a profile reaches one's own trainer


def reads_profile(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """The template (argv and workload.env's values) hands the trainer its profile: without one of
    `PROFILE_PLACEHOLDERS`, every profile runs the same command."""
    return bool(_names(argv, env) & set(PROFILE_PLACEHOLDERS))


def _used(conf: CommandConf) -> set[str]:
    return _names(conf.argv, conf.env)


def _names(argv: Sequence[str], env: Mapping[str, str]) -> set[str]:
    """Placeholders of the argv template and of workload.env's values."""
    in_env = {name for value in env.values() for name in _fields(value, "workload.env")}
    return {name for arg in argv for name in _fields(arg)} | in_env


def _fields(arg: str, where: str = "argv template") -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(arg) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"{where} entry {arg!r} is malformed: {exc}", "write a literal brace twice") from None
