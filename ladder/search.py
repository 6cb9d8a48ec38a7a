"""`python -m ladder.search case=<name> [key=value ...]`: the Hydra entry point.

Composes conf/ into typed settings, finds the machine (GPUs through NVML, else CPU ranks), runs the sweep,
and prints one line per trial and the case's best row. Ctrl-C, SIGTERM or a launcher's preemption stops the running
trial's whole process group, records it `interrupted`, and exits non-zero (`ladder.runner.signals`); the same command
with `sweep=<name>` resumes, and a requeued job does.
The exit code says how the sweep ended (`ExitCode`; README "Exit codes"); a multirun exits with its worst job's.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import ConfigCompositionException, OverrideParseException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import InterpolationKeyError

from ladder.core.errors import ExitCode, LadderError, disk_full
from ladder.core.outcome import worst
from ladder.runner import procs, signals, suspend, warm
from ladder.runner.machine import emulated_card_gb, find_machine
from ladder.settings import argv
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import Settings, register, settings_from
from ladder.storage import sweeps
from ladder.storage.outage import StorageUnavailable
from ladder.sweep import bench, benchplan, dryrun, loop, resume
from ladder.sweep.context import workload_of
from ladder.ui.summary import banner, print_summary, sweep_code
from ladder.ui.view import make_view
from ladder.workloads import planner

UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)  # a place ladder may not write (a missing one: unwritable_root)
EXIT_FILE = "ladder_exit_code"  # a multirun job's code, in its Hydra job folder, for the multirun's own exit


def execute(settings: Settings) -> int:
    settings = resume.resolve(settings)
    settings, note = planner.distinct_profiles(settings)
    if note:
        print(f"note: {note}", file=sys.stderr)
    paths = resume.paths_for(settings, datetime.now(timezone.utc))
    settings = resume.recorded_for(settings, paths)  # refuses other outcome settings
    machine = find_machine(settings)
    if settings.dry_run:
        print(dryrun.show(settings, paths, machine, emulated_card_gb(settings, machine.device)), end="")
        return 0
    workload = workload_of(settings)  # a command template that cannot be filled stops here, before any file
    sweeps.note_latest(Path(settings.output_root), paths.sweep)
    procs.become_subreaper()
    procs.remove_stale()
    signals.install()  # SIGTERM, a closed terminal, a launcher's preemption: as cleanly as Ctrl-C
    suspend.install()  # Ctrl-Z stops the running trial with the sweep; `fg` continues both
    view = make_view()
    bench.job_lines(paths, settings.case.name, ending=False)  # a case of a bench (`case=all`): which of how many
    view.sweep_started(
        banner(settings, paths, machine, emulated_card_gb(settings, machine.device)),
        settings.case.name,
        settings.rungs,
        [p.name for p in settings.profiles],
        settings.knob,
        settings.tuning,
        settings.objective,
    )
    try:
        summary = loop.run(settings, paths, machine, view, workload)
    except KeyboardInterrupt:
        view.close()
        print(
            f"{signals.described()}: nothing this process started is left running (a trial cut short is recorded "
            f"`interrupted` and runs again); resume with `{resume.command(settings, paths, _user_conf_dirs())}`",
            file=sys.stderr,
        )
        signals.stopped()
        signals.hand_over()  # a requeueing launcher's own handler (submitit's) takes it from here
        return signals.exit_code()
    except OSError as exc:
        view.close()
        if (full := disk_full(exc)) is None:
            raise
        again = resume.command(settings, paths, _user_conf_dirs())
        print(f"ladder: {no_space(full, paths.sweep_dir, again)}", file=sys.stderr)
        return ExitCode.NO_SPACE
    except BaseException:
        view.close()
        raise
    view.close()
    print_summary(summary, paths, settings.knob, settings.objective)
    bench.job_lines(paths, settings.case.name, ending=True)
    for line in starter_lines(warm.STARTERS.started(), _TOLD):
        print(line)
    return sweep_code(summary)


_TOLD: set[str] = set()  # the warm starters (their folders) a job of this process has named in its summary


def starter_lines(starters: Sequence[warm.Starter], told: set[str]) -> list[str]:
    """What a sweep's summary says of the warm starters its ranks were forked from: each once per process, where a
    multirun's jobs share one (`told`, the folders named by an earlier job, is added to)."""
    lines = []
    for starter in starters:
        if starter.folder in told:
            continue
        told.add(starter.folder)
        how = (
            f"ready in {starter.ready_s:.1f} s, once for this process"
            if starter.owned
            else f"shared ({warm.SHARED_VAR}={starter.folder})"
        )
        lines.append(
            f"warm starter: {how} (the proxy's ranks are forked from it; workload.proxy_start=cold: each alone)"
        )
    return lines


NEED_MB = 64.0  # the least space a sweep asks for: a journal line, the TSVs, a trial's logs and samples


def no_space(exc: OSError, sweep_dir: Path, command: str) -> str:
    """What to do when the disk of the sweep folder is full: where, how much is free, how much to free (twice its
    largest trial folder, and `NEED_MB` at least), and the command that resumes."""
    there = next((p for p in (sweep_dir, *sweep_dir.parents) if p.exists()), Path("/"))
    free_mb = shutil.disk_usage(there).free / 2**20
    trials = [d for d in sweep_dir.glob("trials/*/*") if d.is_dir()]
    largest = max((sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in trials), default=0) / 2**20
    what = f" writing {exc.filename}" if exc.filename else ""
    return (
        f"no space left on the disk of {sweep_dir} ({exc.strerror or 'no space left on device'}{what}; "
        f"{free_mb:.0f} MiB free). Nothing recorded is lost, and a trial cut short runs again. Free at least "
        f"{max(NEED_MB, 2 * largest):.0f} MiB there, then resume with `{command}`"
    )


def _one_sweep_per_multirun(settings: Settings) -> Settings:
    """Jobs of one `-m` run share one sweep (named by the multirun's folder) unless `sweep=` names one."""
    if settings.sweep is None and HydraConfig.initialized() and HydraConfig.get().mode is RunMode.MULTIRUN:
        return dataclasses.replace(settings, sweep=Path(HydraConfig.get().sweep.dir).name)
    return settings


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
        code = execute(_one_sweep_per_multirun(settings_from(cfg, argv.known_cases(_user_conf_dirs()), given_keys())))
    except StorageUnavailable as exc:
        print(f"ladder: {exc}", file=sys.stderr)
        code = ExitCode.STORAGE
    except LadderError as exc:
        print(f"ladder: {exc}", file=sys.stderr)
        code = ExitCode.BAD_SETTINGS
    except InterpolationKeyError as exc:  # a `${x}` meant for the trainer
        print(f"ladder: {argv.interpolation_problem(exc, sys.argv[1:])}", file=sys.stderr)
        code = ExitCode.BAD_SETTINGS
    except OSError as exc:
        if exc.errno not in UNWRITABLE or not exc.filename:
            raise
        print(
            f"ladder: cannot write {exc.filename} ({exc.strerror}); fix: make it writable, or set "
            "output_root=<a folder you can write>",
            file=sys.stderr,
        )
        code = ExitCode.BAD_SETTINGS
    multirun = HydraConfig.initialized() and HydraConfig.get().mode is RunMode.MULTIRUN
    if code and (not multirun or code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED)):
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


def _user_conf_dirs() -> tuple[str, ...]:
    """The folders of the config search path other than ladder's own (`--config-dir`, `hydra.searchpath`)."""
    if not HydraConfig.initialized():
        return ()
    sources = HydraConfig.get().runtime.config_sources
    return tuple(s.path for s in sources if s.schema == "file" and Path(s.path).resolve() != CONF_DIR)


def cli() -> None:
    """The command line, checked before Hydra sees it (`ladder.settings.argv`), then the sweep."""
    given, user = sys.argv[1:], argv.user_dirs(sys.argv[1:])
    if "case=?" in given:  # `--help`'s way to list the cases: the built-in ones and those of --config-dir
        print("\n".join(argv.known_cases(user)))
        sys.exit(0)
    if bench.asked(given) and not (argv.quoting_problems(given) or argv.unknown_keys(given)):
        given = _bench(given, user)  # case=all: the multirun of every case that runs here, into one sweep
    if bad := (
        argv.quoting_problems(given)
        or argv.check_choices(argv.inline_case(given, user), user)
        or argv.unknown_keys(given)
    ):
        print("ladder: " + "\n".join(bad), file=sys.stderr)
        sys.exit(ExitCode.BAD_SETTINGS)
    # case=<any name>, workload.env.NAME, sweep=<a name Hydra would read as a number>
    sys.argv[1:] = argv.keep_text(argv.env_overrides(argv.inline_case(given, user)))
    sys.argv = [sys.argv[0], *argv.hide_password(sys.argv[1:], os.environ)]
    if problem := argv.unwritable_root(sys.argv[1:]):
        print(f"ladder: {problem}", file=sys.stderr)
        sys.exit(ExitCode.BAD_SETTINGS)
    try:
        main()
    except SystemExit as stop:  # Hydra reported an override that does not compose (a misspelt key, a bad value)
        if stop.code == 1 and isinstance(stop.__context__, (ConfigCompositionException, OverrideParseException)):
            print(
                "ladder: fix the override named above (see `python -m ladder.search --cfg job` for the keys)",
                file=sys.stderr,
            )
            sys.exit(ExitCode.BAD_SETTINGS)
        raise
    # a single run has exited already unless its code was 0; a multirun's codes are on the callback's class, in the
    # module Hydra imported by name (`ladder.search`, not this `__main__`)
    registered = sys.modules.get("ladder.search")
    sys.exit(worst(registered.ExitCodes.codes if registered else []))


def _bench(given: list[str], user: tuple[str, ...]) -> list[str]:
    """`case=all`: the bench's plan (a dry run prints it and exits), else the multirun Hydra runs."""
    try:
        found = bench.build(given, user)
        if found.dry_run:
            print(benchplan.show(found), end="")
            sys.exit(0)
    except LadderError as exc:
        print(f"ladder: {exc}", file=sys.stderr)
        sys.exit(ExitCode.BAD_SETTINGS)
    for line in bench.start_lines(found):
        print(line, file=sys.stderr)
    if not found.runs:
        sys.exit(ExitCode.BAD_SETTINGS)
    bench.write_plan(found)
    return bench.multirun_argv(given, found)


register()

if __name__ == "__main__":
    cli()
