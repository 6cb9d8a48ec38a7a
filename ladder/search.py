"""`python -m ladder.search case=<name> [key=value ...]`: the Hydra entry point.

Composes conf/ into typed settings, finds the machine (GPUs through NVML, else CPU ranks), runs the sweep,
and prints one line per trial and the case's best row. Ctrl-C or SIGTERM stops the running trial's whole
process group, records it `interrupted`, and exits non-zero; the same command with `sweep=<name>` resumes.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from types import FrameType

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig

from ladder import cgroup, launch, lease, results, store
from ladder.catalog import CONF_DIR, INLINE_CASE, env_overrides, inline_case, known, user_dirs
from ladder.config import Device, Settings, register, settings_from
from ladder.dryrun import Planned, estimate, every_trial, format_dry_run, format_estimate, rung_label
from ladder.errors import ConfigError, ExitCode, LadderError
from ladder.monitor import NvmlSampler, nvml_gpu_count
from ladder.policy import Decision, Outcome
from ladder.records import Phase, Status
from ladder.sweep import GROWS_WITH_ENVS, Machine, Paths, Run, Summary, plan, run, workload_of
from ladder.view import PlainView, make_view, trial_line
from ladder.workloads.command import single_process

log = logging.getLogger(__name__)

CUT_SAVES = 0.75  # dry-run estimate: the share of the window a descent step cut short does not run
STARTUP_GUESS_S = 10.0  # dry-run estimate: launch to first evidence (torchrun ~3-4 s, imports, env creation)
WARMUP_GUESS_S = 15.0  # dry-run estimate: warm-up until the window opens


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


def _overrides_only(argv: list[str]) -> list[str]:
    """The overrides of a command line, less Hydra's own flags (`-m`, `--config-dir X`, `-cd X`, `--help`...)."""
    out, skip = [], False
    for arg in argv:
        if skip or arg.startswith("-"):
            skip = arg in ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")
            continue
        out.append(arg)
    return out


def _choices(override: Override) -> list[str]:
    if override.value_type is ValueType.GLOB_CHOICE_SWEEP:
        return []
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    return [str(c) for v in values for c in (v if isinstance(v, list) else [v])]


def find_machine(settings: Settings) -> Machine:
    host_gpus = 0 if settings.device is Device.CPU else nvml_gpu_count()
    visible = _visible_gpus(host_gpus)
    if settings.device is Device.CUDA and not visible:
        raise LadderError("device=cuda but no NVIDIA GPU is visible (none in NVML, or CUDA_VISIBLE_DEVICES is empty)",
                          "use device=auto or device=cpu")  # fmt: skip
    device = "cuda" if visible else "cpu"
    per_trial, w = settings.workload.gpus_per_trial, settings.workload
    single = single_process(w.kind, w.launcher, w.command, w.cmd)  # one direct process: one rank
    nproc = per_trial or w.nproc or (1 if single else len(visible) or 2)
    if device == "cuda" and nproc > len(visible):
        raise LadderError(f"{nproc} GPU(s) per trial asked for, but {len(visible)} visible: {list(visible)}",
                          "lower workload.nproc (or workload.gpus_per_trial), or make more GPUs visible")  # fmt: skip
    gpus = visible[:nproc] if device == "cuda" else ()
    describe = {
        "host": socket.gethostname(),
        "n_gpus": str(nproc),
        "torch": _version("torch"),
        "workload_version": results.code_version(Path(__file__).parent),
    }
    describe.update(_gpu_describe(gpus) if device == "cuda" else _cpu_describe(settings))
    pool = (visible if device == "cuda" else tuple(sorted(os.sched_getaffinity(0)))) if per_trial else ()
    # CUDA numbers GPUs fastest first unless told otherwise; NVML (what ladder samples) by PCI bus
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if device == "cuda" else {}
    return Machine(device, gpus, nproc, sys.executable, describe, pool, env)


def _visible_gpus(host_gpus: int) -> tuple[int, ...]:
    """The GPUs this orchestrator may use, by NVML index: those CUDA_VISIBLE_DEVICES names (a scheduler's
    allocation), else all of the host's."""
    if not host_gpus:
        return ()
    visible = lease.visible_pool(os.environ, host_gpus)
    if missing := [i for i in visible if i >= host_gpus]:
        raise LadderError(f"CUDA_VISIBLE_DEVICES names GPU(s) {missing}, but NVML finds {host_gpus}",
                          f"name GPUs 0..{host_gpus - 1}, or unset CUDA_VISIBLE_DEVICES")  # fmt: skip
    return visible


def _gpu_describe(gpus: tuple[int, ...]) -> dict[str, str]:
    sampler = NvmlSampler(list(gpus))
    try:
        return sampler.describe()
    finally:
        sampler.close()


def _cpu_describe(settings: Settings) -> dict[str, str]:
    cap = applied_cap(settings)
    return {"gpu_name": "cpu", "gpu_mem_total": str(round(cap * 1024)) if cap else "", "driver": ""}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def print_summary(summary: Summary, paths: Paths, knob: str) -> None:
    print()
    for w in summary.walks:
        at = f" at {rung_label(knob, w.rung)}" if w.rung else ""
        state = f"largest stable rung{at}" if w.outcome is Outcome.FOUND else f"{w.outcome.value}{at}"
        skipped = "".join(f"\n    skipped {rung_label(knob, r)}: {why}" for r, why in w.skipped)
        print(f"  {summary.case} {w.profile}: {state}{skipped}")
    for r in summary.records:
        if r.status is Status.ERROR:
            where = paths.sweep_dir / r.info.get("trial_dir", "")
            print(f"  error in {r.variant} {rung_label(knob, r.num_envs)}: {r.evidence}\n    see {where}")
    if summary.best is None:
        print(f"best: none of the rungs fits for {summary.case}")
    else:
        print("best: " + trial_line(summary.best))
    row = summary.best_row or {}
    if row.get("class"):
        print(f"class: {row['class']} -> {row.get('action', '')}")
    if summary.resumed:
        print(f"({summary.resumed} finished trial(s) reused from sweep storage, not run again)")
    print(f"best_by_case.tsv: {paths.best_tsv}")
    print(f"trials.tsv:       {paths.trials_tsv}")


def applied_cap(settings: Settings) -> float | None:
    """The emulated card, where the workload applies it (a command workload's trainer never sees it)."""
    return None if settings.workload.kind == "command" else settings.workload.emulate_gpu_mem_gb


def banner(settings: Settings, paths: Paths, machine: Machine) -> str:
    cap = applied_cap(settings)
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
    workload = workload_of(settings)
    ctx = Run(settings, paths, machine, workload, None, None, PlainView())  # type: ignore[arg-type]
    port = launch.free_port()  # free now, so a command copied from here runs as shown; each launch takes its own
    planned = [
        Planned(variant, rung, str(trial_dir), plan(ctx, Decision(variant, rung, ""), trial_dir, port))
        for variant, rung in every_trial([p.name for p in settings.profiles], settings.rungs)
        for trial_dir in [paths.trial_dir(settings.case.name, variant, rung, Phase.PROBE, 1, settings.knob).absolute()]
    ]
    m = settings.measure
    fail_s, fit_s = STARTUP_GUESS_S, STARTUP_GUESS_S + min(m.warmup_timeout_s, WARMUP_GUESS_S) + m.window_s
    cut_s = fit_s - m.window_s * CUT_SAVES if settings.objective not in GROWS_WITH_ENVS else None
    cost = estimate(len(settings.rungs), len(settings.profiles), fail_s, fit_s, cut_s)
    return format_dry_run(settings.case.name, settings.knob, planned) + format_estimate(cost) + "\n"


def resolve_resume(settings: Settings) -> Settings:
    """`resume=latest` (with no sweep named): the most recently active sweep folder under output_root."""
    if settings.resume != "latest" or settings.sweep:
        return settings
    latest = store.latest_sweep(Path(settings.output_root))
    if latest is None:
        raise ConfigError(f"resume=latest: no sweep folder under {settings.output_root}",
                          "start one without resume=latest, or set output_root")  # fmt: skip
    return dataclasses.replace(settings, sweep=latest)


def execute(settings: Settings) -> int:
    settings = resolve_resume(settings)
    paths = Paths.for_settings(settings, datetime.now(timezone.utc))
    machine = find_machine(settings)
    if settings.dry_run:
        print(dry_run(settings, paths, machine), end="")
        return 0
    launch.become_subreaper()
    cgroup.remove_stale()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # a closed terminal stops the sweep as cleanly as Ctrl-C
        signal.signal(sig, _raise_interrupt)
    view = make_view()
    view.sweep_started(banner(settings, paths, machine), settings.case.name, settings.rungs,
                       [p.name for p in settings.profiles], settings.knob)  # fmt: skip
    try:
        summary = run(settings, paths, machine, view)
    except KeyboardInterrupt:
        view.close()
        resume = f"python -m ladder.search case={settings.case.name} sweep={paths.sweep}"
        print(f"interrupted: nothing of this sweep is left running (a trial cut short is recorded `interrupted` and "
              f"runs again); resume with `{resume}`", file=sys.stderr)  # fmt: skip
        return ExitCode.INTERRUPTED
    except BaseException:
        view.close()
        raise
    view.close()
    print_summary(summary, paths, settings.knob)
    return 0


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        code = execute(_one_sweep_per_multirun(settings_from(cfg, known_cases(_user_conf_dirs()))))
    except LadderError as exc:
        print(f"ladder: {exc}", file=sys.stderr)
        code = ExitCode.BAD_SETTINGS
    if code:
        sys.exit(code)


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
    main()
