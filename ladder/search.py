"""`python -m ladder.search case=<name> [key=value ...]`: the Hydra entry point.

Composes conf/ into typed settings, finds the machine (GPUs through NVML, else CPU ranks), runs the sweep,
and prints one line per trial and the case's best row. Ctrl-C or SIGTERM stops the running trial's whole
process group, records it `interrupted`, and exits non-zero; the same command with `sweep=<name>` resumes.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from types import FrameType

import hydra
from omegaconf import DictConfig

from ladder import cgroup, launch
from ladder.config import Device, Settings, register, settings_from
from ladder.errors import LadderError
from ladder.monitor import NvmlSampler, nvml_gpu_count
from ladder.records import Status
from ladder.sweep import Machine, Paths, Summary, run
from ladder.view import make_view, trial_line

log = logging.getLogger(__name__)

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
EXIT_CONFIG = 2
EXIT_INTERRUPTED = 130


def known(group: str) -> tuple[str, ...]:
    """The options of a config group, from conf/<group>/*.yaml."""
    return tuple(sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")))


def known_cases() -> tuple[str, ...]:
    return known("case")


def check_choices(overrides: list[str]) -> list[str]:
    """Unknown group options on the command line, each with the known ones (Hydra's own message lists none
    for a list like profile=[a,b])."""
    problems = []
    for arg in overrides:
        group, _, value = arg.partition("=")
        group = group.lstrip("+~")
        if group not in ("case", "profile", "ladder", "measure") or not value:
            continue
        for choice in value.strip("[]").split(","):
            if choice and choice not in known(group):
                problems.append(f"unknown {group} '{choice}'; known: {', '.join(known(group))}")
    return problems


def find_machine(settings: Settings) -> Machine:
    gpus = 0 if settings.device is Device.CPU else nvml_gpu_count()
    if settings.device is Device.CUDA and gpus == 0:
        raise LadderError("device=cuda but no NVIDIA GPU is visible through NVML", "use device=auto or device=cpu")
    device = "cuda" if gpus else "cpu"
    nproc = settings.workload.nproc or (gpus or 2)
    describe = {"host": socket.gethostname(), "n_gpus": str(nproc), "torch": _version("torch")}
    describe.update(_gpu_describe(nproc) if device == "cuda" else _cpu_describe(settings))
    return Machine(device, tuple(range(nproc)) if device == "cuda" else (), nproc, sys.executable, describe)


def _gpu_describe(nproc: int) -> dict[str, str]:
    return NvmlSampler(list(range(nproc))).describe()


def _cpu_describe(settings: Settings) -> dict[str, str]:
    cap = settings.workload.emulate_gpu_mem_gb
    return {"gpu_name": "cpu", "gpu_mem_total": str(round(cap * 1024)) if cap else "", "driver": ""}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def print_summary(summary: Summary, paths: Paths) -> None:
    print()
    for w in summary.walks:
        print(f"  {summary.case} {w.profile}: {w.outcome.value}" + (f" at e{w.rung}" if w.rung else ""))
    for r in summary.records:
        if r.status is Status.ERROR:
            where = paths.sweep_dir / r.info.get("trial_dir", "")
            print(f"  error in {r.variant} e{r.num_envs}: {r.evidence}\n    see {where}")
    if summary.best is None:
        print(f"best: none of the rungs fits for {summary.case}")
    else:
        print("best: " + trial_line(summary.best))
    if summary.resumed:
        print(f"({summary.resumed} finished trial(s) reused from sweep storage, not run again)")
    print(f"best_by_case.tsv: {paths.best_tsv}")
    print(f"trials.tsv:       {paths.trials_tsv}")


def banner(settings: Settings, paths: Paths, machine: Machine) -> str:
    cap = settings.workload.emulate_gpu_mem_gb
    return (
        f"sweep {paths.sweep}: case {settings.case.name}, ladder {list(settings.rungs)}, "
        f"profiles {[p.name for p in settings.profiles]}, {machine.nproc} x {machine.device}"
        + (f", emulated card: {cap} GB per rank" if cap else "")
    )


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def execute(settings: Settings) -> int:
    paths = Paths.for_settings(settings, datetime.now(timezone.utc))
    machine = find_machine(settings)
    launch.become_subreaper()
    cgroup.remove_stale()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal stops the sweep as cleanly as Ctrl-C
        signal.signal(sig, _raise_interrupt)
    view = make_view()
    view.sweep_started(banner(settings, paths, machine), settings.case.name, settings.rungs,
                       [p.name for p in settings.profiles])  # fmt: skip
    try:
        summary = run(settings, paths, machine, view)
    except KeyboardInterrupt:
        view.close()
        resume = f"python -m ladder.search case={settings.case.name} sweep={paths.sweep}"
        print(f"interrupted: the running trial was stopped and recorded; resume with `{resume}`", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException:
        view.close()
        raise
    view.close()
    print_summary(summary, paths)
    return 0


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        code = execute(settings_from(cfg, known_cases()))
    except LadderError as exc:
        print(f"ladder: {exc}", file=sys.stderr)
        code = EXIT_CONFIG
    if code:
        sys.exit(code)


register()

if __name__ == "__main__":
    if bad := check_choices(sys.argv[1:]):
        print("ladder: " + "\n".join(bad), file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    main()
