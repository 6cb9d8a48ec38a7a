"""`python -m ladder.search case=<name> [key=value ...]`: the Hydra entry point.

Composes conf/ into typed settings, finds the machine (GPUs through NVML, else CPU ranks), runs the sweep,
and prints one line per trial and the case's best row. Ctrl-C or SIGTERM stops the running trial's whole
process group, records it `interrupted`, and exits non-zero; the same command with `sweep=<name>` resumes.
The exit code says how the sweep ended (`ExitCode`; README "Exit codes"); a multirun exits with its worst job's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import re
import shlex
import signal
import sys
from collections.abc import MutableMapping
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import ConfigCompositionException, HydraException, OverrideParseException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import InterpolationKeyError

from ladder import dryrun, launch, procs, store, sweepsettings
from ladder.catalog import CONF_DIR, INLINE_CASE, env_overrides, inline_case, known, user_dirs
from ladder.config import Settings, register, settings_from
from ladder.dryrun import rung_label
from ladder.errors import ConfigError, ExitCode, LadderError
from ladder.machine import emulated_card_gb, find_machine
from ladder.policy import Outcome, insurance
from ladder.records import Objective, Status
from ladder.sweep import Machine, Paths, Summary, run
from ladder.sweep import _tuning as walk_tuning
from ladder.view import make_view, no_pick_line, trial_line

log = logging.getLogger(__name__)

UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)  # a place ladder may not write (a missing one: unwritable_root)
DEFAULT_OUTPUT_ROOT = "output/train"  # conf/config.yaml's: a resume command names output_root only where it differs


def known_cases(user: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The built-in cases and those of the user's config folders (`--config-dir`, `hydra.searchpath`)."""
    return known("case", user)


def check_choices(overrides: list[str], user: tuple[str, ...] = ()) -> list[str]:
    """Unknown group options on the command line, each with the known ones (Hydra's own message lists none
    for a list like profile=[a,b]). Sweeps (`case=a,b`) are checked option by option; globs are Hydra's."""
    problems = []
    try:
        parsed = OverridesParser.create().parse_overrides(_overrides_only(overrides))
    except HydraException:
        return []  # a syntax error: quoting_problems says where
    for override in parsed:
        group = override.key_or_group
        if group not in ("case", "profile", "ladder", "measure") or override.value_type is None:
            continue
        for choice in _choices(override):
            if choice not in known(group, user) and (group, choice) != ("case", INLINE_CASE):
                problems.append(f"unknown {group} '{choice}'; known: {', '.join(known(group, user))}")
    return problems


# Hydra's own flags that take the next argument as their value (`--cfg job`, `--config-dir X`, ...)
HYDRA_FLAGS_WITH_VALUE = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn", "--cfg", "-c",
                          "--package", "-p", "--experimental-rerun", "--shell-completion", "-sc")  # fmt: skip
HYDRA_INFO_TOPICS = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def quoting_problems(argv: list[str]) -> list[str]:
    """Overrides Hydra cannot parse, each with Hydra's reason and the quoted form that parses (a list element or a
    value holding `=`, `{`, a space, ... must be double-quoted, the whole override single-quoted for the shell)."""
    problems = []
    for arg in _overrides_only(argv):
        try:
            OverridesParser.create().parse_overrides([arg])
        except HydraException as exc:
            reason = str(exc).splitlines()[0]
            problems.append(f"cannot read {arg!r}: {reason}\n  write it as: {_quoted(arg)}")
    return problems


def _quoted(arg: str) -> str:
    key, _, value = arg.partition("=")
    if value.startswith("[") and value.endswith("]"):
        items = [v.strip().strip('"') for v in value[1:-1].split(",")]
        plain = [v if v.replace("_", "").replace(".", "").replace("-", "").isalnum() else f'"{v}"' for v in items]
        return f"'{key}=[{','.join(plain)}]'" + (f"  (or '{key[:-7]}cmd=\"{' '.join(items)}\"')"
                                                 if key.endswith(".command") else "")  # fmt: skip
    return f"'{key}=\"{value.strip(chr(34))}\"'"


def interpolation_problem(exc: InterpolationKeyError, argv: list[str]) -> ConfigError:
    """A `${x}` meant for a child Hydra app (the trainer) that ladder's own Hydra tried to resolve: the override as
    it must be written (`\\${{x}}`: the backslash keeps ladder's Hydra off it, the doubled braces keep ladder's own
    placeholders off it; the trainer gets `${x}`)."""
    fixed = [_escaped(a) for a in _overrides_only(argv) if _UNESCAPED.search(a)]
    shown = "  ".join(shlex.quote(a) for a in fixed) or "write each ${x} as \\${{x}}"
    return ConfigError(f"{exc}: ladder's own config resolves every ${{...}} in an override, and has no such key",
                       f"for an interpolation your trainer resolves, escape it: {shown}")  # fmt: skip


_UNESCAPED = re.compile(r"(?<!\\)\$\{([^{}]*)\}")


def _escaped(arg: str) -> str:
    return _UNESCAPED.sub(lambda m: "\\${{" + m.group(1) + "}}", arg)


def _overrides_only(argv: list[str]) -> list[str]:
    """The overrides of a command line, less Hydra's own flags (`-m`, `--config-dir X`, `-cd X`, `--help`...)."""
    out, before = [], ""
    for arg in argv:
        flag_value = before in HYDRA_FLAGS_WITH_VALUE or (before in ("--info", "-i") and arg in HYDRA_INFO_TOPICS)
        if not flag_value and not arg.startswith("-"):
            out.append(arg)
        before = "" if flag_value else arg
    return out


def _choices(override: Override) -> list[str]:
    if override.value_type is ValueType.GLOB_CHOICE_SWEEP:
        return []
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    return [str(c) for v in values for c in (v if isinstance(v, list) else [v])]


# the order in which a multirun's codes win, worst first: a sweep cut short or a bug says more than any answer; a
# job that could not start, or a broken configuration, must be fixed before any case's answer can be trusted
WORST_FIRST = (ExitCode.INTERRUPTED, ExitCode.CRASH, ExitCode.BAD_SETTINGS, ExitCode.BROKEN_CONFIG,
               ExitCode.NO_RUNG_FITS, ExitCode.PICK_FOUND)  # fmt: skip
EXIT_FILE = "ladder_exit_code"  # a multirun job's code, in its Hydra job folder, for the multirun's own exit


def outcome(summary: Summary) -> ExitCode:
    """A finished sweep's code: a broken configuration (a profile stopped on `error`) whether or not another
    profile found a pick, since the walk is incomplete until it is fixed; else a pick found; else no rung fits
    (also where rungs fit but none was measured by the objective: there is no answer either)."""
    if any(w.outcome is Outcome.ERROR for w in summary.walks) or any(r.status is Status.ERROR for r in summary.records):
        return ExitCode.BROKEN_CONFIG
    return ExitCode.NO_RUNG_FITS if summary.best is None else ExitCode.PICK_FOUND


def worst(codes: list[int]) -> int:
    """The code a multirun exits with: the worst of its jobs' by `WORST_FIRST` (an unknown code counts as a crash)."""
    rank = {int(c): i for i, c in enumerate(WORST_FIRST)}
    known = [c if c in rank else ExitCode.CRASH for c in codes]
    return min(known, key=lambda c: rank[c], default=ExitCode.PICK_FOUND)


def print_summary(summary: Summary, paths: Paths, knob: str, objective: Objective = Objective.MIN_AVG_UTIL) -> None:
    print()
    for w in summary.walks:
        at = f" at {rung_label(knob, w.rung)}" if w.rung else ""
        state = f"largest stable rung{at}" if w.outcome is Outcome.FOUND else f"{w.outcome.value}{at}"
        skipped = "".join(f"\n    skipped {rung_label(knob, r)}: {why}" for r, why in w.skipped)
        print(f"  {summary.case} {w.profile}: {state}{skipped}")
    if insured := insurance([(r.info.get("why", ""), float(r.info.get("duration_s") or 0), r.figures)
                             for r in summary.records]):  # fmt: skip
        print(f"  {summary.case} {insured}")
    for r in summary.records:
        if r.status is Status.ERROR:
            where = paths.sweep_dir / r.info.get("trial_dir", "")
            print(f"  error in {r.variant} {rung_label(knob, r.num_envs)}: {r.evidence}\n    see {where}")
    code = outcome(summary)
    if summary.best is not None:
        print("best: " + trial_line(summary.best))
    elif code is ExitCode.BROKEN_CONFIG:
        broken = ", ".join(w.profile for w in summary.walks if w.outcome is Outcome.ERROR) or "the walk"
        print(f"best: none for {summary.case}: a broken configuration stopped {broken} (fix it, see the error above; "
              f"stepping num_envs down will not help)")  # fmt: skip
    elif any(r.status is Status.UNMEASURED for r in summary.records):
        print(no_pick_line(summary.case, summary.records))
    elif fits := [w.profile for w in summary.walks if w.outcome is Outcome.FOUND]:
        print(f"best: none measured for {summary.case}: {', '.join(fits)} fit, but no trial that fits gave a figure "
              f"for the objective ({objective}); see its trial folders")  # fmt: skip
    else:
        print(f"best: none of the rungs fits for {summary.case}")
    row = summary.best_row or {}
    if row.get("tie"):
        print(f"tie: {row['tie']}")
    if row.get("class"):
        print(f"class: {row['class']} -> {row.get('action', '')}")
    if code is ExitCode.BROKEN_CONFIG and summary.best is not None:
        print("note: a profile stopped on a broken configuration; the pick is among the others (fix it and resume)")
    if summary.resumed:
        print(f"({summary.resumed} finished trial(s) reused from sweep storage, not run again)")
    print(f"best_by_case.tsv: {paths.best_tsv}")
    print(f"trials.tsv:       {paths.trials_tsv}")


def banner(settings: Settings, paths: Paths, machine: Machine) -> str:
    cap = emulated_card_gb(settings)
    return (
        f"sweep {paths.sweep}: case {settings.case.name}, ladder {list(settings.rungs)}, "
        f"profiles {[p.name for p in settings.profiles]}, {machine.nproc} x {machine.device}"
        + (f", emulated card: {cap} GB per rank" if cap else "")
        + (f", storage {store.redact(settings.storage)}" if settings.storage else "")
    )


def _one_sweep_per_multirun(settings: Settings) -> Settings:
    """Jobs of one `-m` run share one sweep (named by the multirun's folder) unless `sweep=` names one."""
    if settings.sweep is None and HydraConfig.initialized() and HydraConfig.get().mode is RunMode.MULTIRUN:
        return dataclasses.replace(settings, sweep=Path(HydraConfig.get().sweep.dir).name)
    return settings


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def dry_run(settings: Settings, paths: Paths, machine: Machine) -> str:
    """Every trial the walk could launch, exactly as it would be launched, and what the sweep may cost."""
    return dryrun.show(settings, paths, machine, emulated_card_gb(settings))


def resolve_resume(settings: Settings) -> Settings:
    """`resume=latest` (with no sweep named): the sweep `ladder.search` started or resumed last under output_root
    (where no run has named one yet, the sweep whose storage or TSVs changed last)."""
    if settings.resume != "latest" or settings.sweep:
        return settings
    root = Path(settings.output_root)
    latest = sweepsettings.latest(root) or store.latest_sweep(root)
    if latest is None:
        raise ConfigError(f"resume=latest: no sweep folder under {settings.output_root}",
                          "start one without resume=latest, or set output_root")  # fmt: skip
    return dataclasses.replace(settings, sweep=latest)


def execute(settings: Settings) -> int:
    settings = resolve_resume(settings)
    paths = Paths.for_settings(settings, datetime.now(timezone.utc))
    settings = sweepsettings.recorded_for(settings, paths.sweep, paths.sweep_dir)  # refuses other outcome settings
    machine = find_machine(settings)
    if settings.dry_run:
        print(dry_run(settings, paths, machine), end="")
        return 0
    sweepsettings.note_latest(Path(settings.output_root), paths.sweep)
    launch.become_subreaper()
    procs.remove_stale()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal stops the sweep as cleanly as Ctrl-C
        signal.signal(sig, _raise_interrupt)
    view = make_view()
    view.sweep_started(banner(settings, paths, machine), settings.case.name, settings.rungs,
                       [p.name for p in settings.profiles], settings.knob, walk_tuning(settings),
                       settings.objective)  # fmt: skip
    try:
        summary = run(settings, paths, machine, view)
    except KeyboardInterrupt:
        view.close()
        resume = resume_command(settings, paths)
        print(f"interrupted: nothing of this sweep is left running (a trial cut short is recorded `interrupted` and "
              f"runs again); resume with `{resume}`", file=sys.stderr)  # fmt: skip
        return ExitCode.INTERRUPTED
    except BaseException:
        view.close()
        raise
    view.close()
    print_summary(summary, paths, settings.knob, settings.objective)
    return outcome(summary)


def resume_command(settings: Settings, paths: Paths) -> str:
    """The command that resumes this sweep as it was: its settings are recorded, so where it lives is enough."""
    where = [f"case={settings.case.name}", f"sweep={paths.sweep}"]
    if settings.output_root != DEFAULT_OUTPUT_ROOT:
        where.append(f"output_root={settings.output_root}")
    if settings.storage:
        where.append(f"storage={store.redact(settings.storage)}")
    return shlex.join(["python", "-m", "ladder.search", *where])


def given_keys() -> tuple[str, ...] | None:
    """The keys this run's command line sets (`profile`, `workload.emulate_gpu_mem_gb`, ...); None outside Hydra."""
    if not HydraConfig.initialized():
        return None
    return tuple(o.split("=", 1)[0].lstrip("+~") for o in HydraConfig.get().overrides.task)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> int:
    """One case. A single run exits with its code; a multirun's job returns it (`ExitCodes` gathers them), unless
    it was interrupted, which stops the multirun at once."""
    try:
        code = execute(_one_sweep_per_multirun(settings_from(cfg, known_cases(_user_conf_dirs()), given_keys())))
    except LadderError as exc:
        print(f"ladder: {exc}", file=sys.stderr)
        code = ExitCode.BAD_SETTINGS
    except InterpolationKeyError as exc:  # a `${x}` meant for the trainer
        print(f"ladder: {interpolation_problem(exc, sys.argv[1:])}", file=sys.stderr)
        code = ExitCode.BAD_SETTINGS
    except OSError as exc:
        if exc.errno not in UNWRITABLE or not exc.filename:
            raise
        print(f"ladder: cannot write {exc.filename} ({exc.strerror}); fix: make it writable, or set "
              "output_root=<a folder you can write>", file=sys.stderr)  # fmt: skip
        code = ExitCode.BAD_SETTINGS
    multirun = HydraConfig.initialized() and HydraConfig.get().mode is RunMode.MULTIRUN
    if code and (not multirun or code == ExitCode.INTERRUPTED):
        sys.exit(code)
    return int(code)


class ExitCodes(Callback):
    """Hydra callback (conf/config.yaml `hydra.callbacks`): each multirun job's code goes to its job folder, and
    the multirun exits with the worst of them (`worst`), once every job has ended."""

    codes: list[int] = []  # filled in the launching process at the multirun's end

    def on_multirun_start(self, config: DictConfig, **kwargs: object) -> None:
        for old in Path(config.hydra.sweep.dir).glob(f"**/{EXIT_FILE}"):  # a folder reused from an earlier multirun
            old.unlink(missing_ok=True)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: object) -> None:
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        completed = job_return.status is JobStatus.COMPLETED
        code = job_return.return_value if completed and isinstance(job_return.return_value, int) else ExitCode.CRASH
        (Path(config.hydra.runtime.output_dir) / EXIT_FILE).write_text(f"{int(code)}\n")

    def on_multirun_end(self, config: DictConfig, **kwargs: object) -> None:
        files = Path(config.hydra.sweep.dir).glob(f"**/{EXIT_FILE}")
        ExitCodes.codes = [int(f.read_text()) for f in files if f.read_text().strip().lstrip("-").isdigit()]


def hide_password(argv: list[str], environ: MutableMapping[str, str]) -> list[str]:
    """`storage=<url with a password>` on the command line becomes the URL without it, the password going to
    `$LADDER_STORAGE_PASSWORD` (`store.PASSWORD_VAR`), so Hydra never holds it: `--cfg job`, `--info` and its error
    messages print the URL as `user@host`."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("+~") == "storage" and "://" in value:
            value, password = store.without_password(value)
            if password is not None:
                environ[store.PASSWORD_VAR] = password
            arg = f"{key}={value}"
        out.append(arg)
    return out


def unwritable_root(overrides: list[str]) -> str:
    """A one-line problem with where the run would write (`output_root`, under which Hydra makes its run folder),
    found before Hydra touches it; "" when it can be written. The check makes the folder and removes what it made."""
    roots = [v for k, _, v in (a.partition("=") for a in overrides) if k.lstrip("+~") == "output_root"]
    root = roots[-1] if roots else str(_default_root())
    if "${" in root or not root:
        return ""  # an interpolation: Hydra resolves it, and says so if it cannot
    made = [p for p in (Path(root), *Path(root).parents) if not p.exists()]  # what the check makes, then removes
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), root)
    except OSError as exc:
        return (f"cannot write under output_root={root} ({exc.strerror or exc}); "
                "fix: set output_root=<a folder you can write>, e.g. output_root=$HOME/ladder-output")  # fmt: skip
    finally:
        for folder in made:  # nothing is left behind by a run that ends before it writes (a bad override, --help)
            with contextlib.suppress(OSError):
                folder.rmdir()
    return ""


def _default_root() -> str:
    from omegaconf import OmegaConf

    from ladder.catalog import CONF_DIR

    return str(OmegaConf.load(CONF_DIR / "config.yaml").get("output_root", ""))


def _user_conf_dirs() -> tuple[str, ...]:
    """The folders of the config search path other than ladder's own (`--config-dir`, `hydra.searchpath`)."""
    if not HydraConfig.initialized():
        return ()
    sources = HydraConfig.get().runtime.config_sources
    return tuple(s.path for s in sources if s.schema == "file" and Path(s.path).resolve() != CONF_DIR)


register()

if __name__ == "__main__":
    given, user = sys.argv[1:], user_dirs(sys.argv[1:])
    if bad := quoting_problems(given) or check_choices(inline_case(given, user), user):
        print("ladder: " + "\n".join(bad), file=sys.stderr)
        sys.exit(ExitCode.BAD_SETTINGS)
    sys.argv[1:] = env_overrides(inline_case(given, user))  # case=<any name>, workload.env.NAME: as Hydra takes them
    sys.argv = [sys.argv[0], *hide_password(sys.argv[1:], os.environ)]
    if problem := unwritable_root(sys.argv[1:]):
        print(f"ladder: {problem}", file=sys.stderr)
        sys.exit(ExitCode.BAD_SETTINGS)
    try:
        main()
    except SystemExit as stop:  # Hydra reported an override that does not compose (a misspelt key, a bad value)
        if stop.code == 1 and isinstance(stop.__context__, (ConfigCompositionException, OverrideParseException)):
            print("ladder: fix the override named above (see `python -m ladder.search --cfg job` for the keys)",
                  file=sys.stderr)  # fmt: skip
            sys.exit(ExitCode.BAD_SETTINGS)
        raise
    # a single run has exited already unless its code was 0; a multirun's codes are on the callback's class, in the
    # module Hydra imported by name (`ladder.search`, not this `__main__`)
    registered = sys.modules.get("ladder.search")
    sys.exit(worst(registered.ExitCodes.codes if registered else []))
