"""`dry_run=true`: every trial the walk could launch, shown exactly (argv, env, generated files), the settings that
shape every trial (caps, measure settings, the inherited environment that matters, reuse), the rungs memory history
puts first, and what it may cost.

`show` plans each profile × rung with the real planner (`ladder.workloads.planner.plan`), each with what already
answers for it (a trial this sweep has, or one an earlier sweep ran that it would reuse): those are not launched,
and the estimate counts only the others. The estimate takes its durations from the recorded history of the same case
and workload on this device where there is one (the medians of its fitting, failing and cut trials), from defaults
elsewhere, and says which. Nothing is launched and nothing is written; `show` only reads storages, the rest is pure.

A generated file is shown in full the first time its text appears and referred back
to after that (a profile's agent.yaml is the same on every rung).
"""

from __future__ import annotations

import os
import shlex
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from optuna.storages import BaseStorage

from ladder.core import ballast, placement
from ladder.core.paths import SweepPaths
from ladder.core.records import Phase, Status, TrialRecord, rung_label
from ladder.core.spec import Kind, TrialSpec
from ladder.core.walk import Decision
from ladder.runner import launch
from ladder.runner.machine import Machine, emulation, with_trainer
from ladder.settings.config import GROWS_WITH_ENVS, MeasureConf, Settings
from ladder.storage import reuse, studies
from ladder.sweep import prior
from ladder.sweep.context import Run, plan, workload_of
from ladder.sweep.events import Unwatched
from ladder.sweep.identity import changed_away, fresh_trial_dir, would_reuse

INDENT = "    "


@dataclass(frozen=True)
class Planned:
    """One trial the walk could launch."""

    profile: str
    rung: int  # the knob's value
    trial_dir: str
    spec: TrialSpec
    known: str = ""  # what answers for it without a launch ("reused from <sweep>#<n> (ok)"); "" = it would launch


def every_trial(profiles: Sequence[str], rungs: Sequence[int]) -> list[tuple[str, int]]:
    """Every (profile, rung) the walk could reach, in the order it would try them."""
    return [(profile, rung) for profile in profiles for rung in rungs]


def format_dry_run(case: str, knob: str, planned: Sequence[Planned]) -> str:
    profiles = list(dict.fromkeys(p.profile for p in planned))
    rungs = len(planned) // max(1, len(profiles))
    known = sum(1 for p in planned if p.known)
    head = (
        f"dry run: case {case}, {len(planned)} trial(s) the walk could launch ({len(profiles)} profile(s) x "
        f"{rungs} rung(s) of {knob}); nothing is launched"
    )
    if known:
        head += f"\n{known} of them answered without a launch (reused or already run): marked below"
    seen: dict[str, str] = {}
    blocks = [format_trial(p, knob, seen) for p in planned]
    return "\n".join([head, *blocks]) + "\n"


def format_trial(p: Planned, knob: str, seen: dict[str, str]) -> str:
    """One trial; `seen` maps file texts already shown to where (updated)."""
    label = f"{p.profile} {rung_label(knob, p.rung)}"
    spec = p.spec
    lines = [
        f"== {label}  ({p.trial_dir})" + (f"  [not launched: {p.known}]" if p.known else ""),
        f"launcher: {spec.launcher}  ranks: {spec.nproc}  progress: {spec.progress_kind} from {spec.progress_file}"
        + (f" (regex {spec.progress_regex})" if spec.progress_regex else ""),  # as written: no doubled backslashes
        f"cwd: {spec.cwd or '.'}",
        f"argv: {shlex.join(spec.argv)}",
        "env: " + (" ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(spec.env.items())) or "(none)"),
    ]
    for name, text in spec.files.items():
        lines += _file_lines(name, text, label, seen)
    return "\n".join(lines)


def _file_lines(name: str, text: str, label: str, seen: dict[str, str]) -> list[str]:
    key = f"{name}\0{text}"
    if key in seen:
        return [f"file {name}: same as {seen[key]}"]
    seen[key] = label
    return [f"file {name} ({len(text.encode())} bytes):", *(INDENT + line for line in text.splitlines())]


@dataclass(frozen=True)
class Estimate:
    """Trial-seconds the sweep may take: each failing launch costs `fail_s` (start-up until its first evidence),
    each fitting one `fit_s` (start-up, warm-up, window), a descent step cut short `cut_s`."""

    worst_s: float  # every profile walks every rung down to the last, which fits (with a descent: every rung fits)
    expected_s: float  # the first profile's fit halfway down; each later profile seeded there (one fit, one
    #                    failure); with a descent, one step cut short per profile
    fail_s: float
    fit_s: float
    cut_s: float = 0.0


def estimate(n_rungs: int, n_profiles: int, fail_s: float, fit_s: float, cut_s: float | None = None) -> Estimate:
    """`cut_s` given: the objective is measured below the largest fit too (samples/s)."""
    if cut_s is None:
        worst = n_profiles * ((n_rungs - 1) * fail_s + fit_s)
        descent = 0.0
    else:
        worst = n_profiles * n_rungs * fit_s
        descent = n_profiles * cut_s
    first = (n_rungs - 1) / 2 * fail_s + fit_s
    expected = first + (n_profiles - 1) * (fit_s + fail_s) + descent
    return Estimate(worst, min(expected, worst), fail_s, fit_s, cut_s or 0.0)


def estimate_left(left: Sequence[int], fail_s: float, fit_s: float, cut_s: float | None = None) -> Estimate:
    """`estimate` over what is left to launch: `left` holds, per profile, its rungs that nothing answers for yet
    (reused or already run); a profile with none left costs nothing."""
    walking = [n for n in left if n]
    if not walking:
        return Estimate(0.0, 0.0, fail_s, fit_s, cut_s or 0.0)
    return estimate(max(walking), len(walking), fail_s, fit_s, cut_s)


def format_estimate(e: Estimate) -> str:
    cut = f", a descent step cut short ~{e.cut_s:.0f} s" if e.cut_s else ""
    return (
        f"estimate: worst case {e.worst_s / 60:.1f} min, expected {e.expected_s / 60:.1f} min of trials "
        f"(a failing launch ~{e.fail_s:.0f} s, a fitting one ~{e.fit_s:.0f} s{cut})"
    )


# ---------------------------------------------------------------- what shapes every trial (pure)

CUT_SAVES = 0.75  # default estimate: the share of the window a descent step cut short does not run
STARTUP_GUESS_S = 10.0  # default estimate: launch to first evidence (torchrun ~3-4 s, imports, env creation)
MIMICKIT_STARTUP_GUESS_S = 25.0  # MimicKit's env and agent build (~24 s on CPU with warp's kernels cached)
WARMUP_GUESS_S = 15.0  # default estimate: warm-up until the window opens
# Inherited variables that change what a trial runs or how fast: the interpreter and its imports, threads, devices,
# the collective libraries, allocators. Everything else a trial inherits is left out of the dry run.
ENV_NAMES = frozenset(
    {
        "PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "MIMICKIT_ROOT",
        "HYDRA_FULL_ERROR",
    }
)
ENV_PREFIXES = (
    "CUDA_",
    "NCCL_",
    "TORCH_",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "GLOO_",
    "NVIDIA_",
    "KMP_",
    "MASTER_",
    "WANDB_",
)


CODE_KEYS = (("ladder", "workload_version"), ("trainer", "trainer_version"))  # (as shown, the machine's key)


def settings_lines(
    settings: Settings,
    nproc: int,
    device: str,
    card_gb: float | None,
    environ: Mapping[str, str],
    planned_env: Mapping[str, str],
    describe: Mapping[str, str] | None = None,
) -> list[str]:
    """The settings that shape every trial, beyond each trial's own argv, env and files; with the machine's
    `describe`, the code versions reuse holds an earlier trial to (ladder's own, and the trainer's where it has one)."""
    w, reused = settings.workload, "on" if settings.reuse else "off (reuse=false: every trial launches)"
    versions = [f"{name} {v}" for name, key in CODE_KEYS if (v := (describe or {}).get(key))]
    if settings.reuse and versions:
        reused += f", from trials of the same code only ({', '.join(versions)})"
    return [
        "every trial runs under:",
        f"{INDENT}ranks: {nproc} on {device}"
        + (f", {w.gpus_per_trial} leased device(s) per trial" if w.gpus_per_trial else ""),
        f"{INDENT}caps: {_caps(w.host_mem_limit_gb, w.emulate_gpu_mem_gb, card_gb, emulation(settings, device))}",
        f"{INDENT}measure: {_measure(settings.measure)}",
        f"{INDENT}walk: objective {settings.objective}, strategy {settings.tuning.strategy}"
        + (f", confirm the pick for {settings.confirm_s:g} s" if settings.confirm_s else ", no confirmation run"),
        f"{INDENT}placement: {placement.plan_words(settings.placement, nproc, device)}",
        f"{INDENT}reuse of earlier sweeps' trials: {reused}",
        f"{INDENT}earlier sweeps' step noise of the case on this host: "
        + (f"pooled, at most {settings.noise_carry_h:g} h old" if settings.noise_carry_h else "off (noise_carry_h)"),
        f"{INDENT}inherited environment that matters: {_inherited(environ, planned_env)}",
    ]


def first_lines(history: bool, found: Sequence[str]) -> list[str]:
    """Which rungs memory history puts first on this card, per profile, and why (`ladder.sweep.prior`)."""
    if not history:
        return ["first launches: the walk's own (history=false: no prediction orders them)"]
    if not found:
        return ["first launches: the walk's own (no memory model of this case on other cards yet)"]
    return ["first launches, from memory history (history=false: the walk's own):", *(INDENT + f for f in found)]


def _caps(host_gb: float | None, card_setting: float | None, card_gb: float | None, mode: ballast.Mode) -> str:
    host = (
        f"memory cgroup {host_gb:g} GB for the whole trial (the kernel OOM-kills past it)"
        if host_gb
        else "no memory cgroup (workload.host_mem_limit_gb=null)"
    )
    if card_gb and mode is ballast.Mode.BALLAST:
        card = (
            f"emulated card {card_gb:g} GB per GPU ({round(card_gb * 1024)} MiB): a ballast holds the rest of each "
            "of a trial's GPUs while it runs"
        )
    elif card_gb:
        card = f"emulated card {card_gb:g} GB per rank ({round(card_gb * 1024)} MiB)"
    elif card_setting:
        card = (
            f"no emulated card (workload.emulate_gpu_mem_gb={card_setting:g} applies on a GPU, or to the built-in "
            "proxy on CPU)"
        )
    else:
        card = "no emulated card"
    return f"{host}; {card}"


def _measure(m: MeasureConf) -> str:
    gate = f"warm-up from iteration {m.warmup_iters} until {m.stable_k} step times agree within {m.stable_tol:.0%}"
    gate += f" (data time under {m.data_time_max_s:g} s)" if m.data_time_max_s is not None else ""
    repeats = f"; {m.repeats} repeats (spread over {m.max_repeat_spread:.0%}: unstable)" if m.repeats > 1 else ""
    return (
        f"{gate}, at most {m.warmup_timeout_s:g} s; window {m.window_s:g} s of at least {m.min_window_iters} "
        f"progress points (95% interval over {m.max_ci_frac:.0%} of samples/s: unstable"
        f"{', window extended once where more steps can narrow it' if m.extend_unstable else ''}); "
        "stop on no progress for "
        f"{m.stall_timeout_s:g} s ({m.startup_timeout_s:g} s before the first), a trial at "
        f"{m.trial_timeout_s:g} s (up to {m.budget_s:g} s for a slow but steady trainer); "
        f"sampled at {m.sample_hz:g} Hz{repeats}"
    )


def _inherited(environ: Mapping[str, str], planned: Mapping[str, str]) -> str:
    """The variables a trial inherits that matter (`ENV_NAMES`, `ENV_PREFIXES`), less those the trial sets itself."""
    names = sorted(k for k in environ if (k in ENV_NAMES or k.startswith(ENV_PREFIXES)) and k not in planned)
    over = sorted(k for k in environ if k in planned and environ[k] != planned[k])
    shown = " ".join(f"{k}={shlex.quote(environ[k])}" for k in names) or "(none)"
    return shown + (f"; set by ladder over the inherited value: {', '.join(over)}" if over else "")


# ---------------------------------------------------------------- the estimate's basis (pure)


@dataclass(frozen=True)
class Durations:
    """What one trial may take, and where each figure came from."""

    fail_s: float
    fit_s: float
    cut_s: float | None  # None: no descent (the objective grows with the knob)
    basis: str


def default_durations(m: MeasureConf, descends: bool, workload: str = "") -> Durations:
    """What a trial may take with no history: a start-up guess (MimicKit's build is longer), a warm-up guess within
    `measure.warmup_timeout_s`, and the window."""
    startup = MIMICKIT_STARTUP_GUESS_S if workload == Kind.MIMICKIT else STARTUP_GUESS_S
    fit_s = startup + min(m.warmup_timeout_s, WARMUP_GUESS_S) + m.window_s
    cut_s = fit_s - m.window_s * CUT_SAVES if descends else None
    basis = f"defaults: no recorded trial of this case and workload here (a start-up guessed at {startup:g} s)"
    return Durations(startup, fit_s, cut_s, basis)


def from_history(
    records: Sequence[TrialRecord], defaults: Durations, where: str, window_s: float | None = None
) -> Durations:
    """The medians of the recorded fitting, failing and cut-short probes (reused copies not counted twice), each
    in place of its default where there is one; the basis names what was used. Given the window this sweep sets
    (`window_s`), a recorded fit counts for what it spent outside its window plus that window: history run at
    another `measure.window_s` says little of a fit's length, and much of its start-up."""
    own = [r for r in records if r.phase is Phase.PROBE and not r.info.get("reused_from") and _seconds(r) is not None]
    fits = [_fit_s(r, window_s) for r in own if r.status is Status.OK and not r.figures.get("cut")]
    fails = [_seconds(r) for r in own if r.status in (Status.OOM_OR_NCCL, Status.TIMEOUT)]
    cuts = [_seconds(r) for r in own if r.status is Status.OK and r.figures.get("cut")]
    if not (fits or fails or cuts):
        return defaults
    fit_s, fail_s = _median(fits, defaults.fit_s), _median(fails, defaults.fail_s)
    cut_s = None if defaults.cut_s is None else _median(cuts, defaults.cut_s)
    used = [
        f"{len(xs)} {name}"
        for xs, name in ((fits, "fitting"), (fails, "failing"), (cuts, "cut-short"))
        if xs and (name != "cut-short" or cut_s is not None)
    ]
    rest = [name for xs, name in ((fits, "fitting"), (fails, "failing")) if not xs]
    basis = f"history: medians of {', '.join(used)} recorded trial(s) of {where}"
    if fits and window_s is not None:
        basis += f" (a fit: its time outside its window, plus measure.window_s={window_s:g})"
    return Durations(fail_s, fit_s, cut_s, basis + (f"; defaults for {' and '.join(rest)}" if rest else ""))


def _seconds(record: TrialRecord) -> float | None:
    try:
        return float(record.info.get("duration_s", ""))
    except ValueError:
        return None


def _fit_s(record: TrialRecord, window_s: float | None) -> float | None:
    """A recorded fit's length, its measured window put at `window_s` where given and measured."""
    took, measured = _seconds(record), record.figures.get("window_s")
    if took is None or window_s is None or measured is None:
        return took
    return max(0.0, took - measured) + window_s


def _median(values: Sequence[float | None], default: float) -> float:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else default


# ---------------------------------------------------------------- the dry run (reads storages, launches nothing)


def show(
    settings: Settings,
    paths: SweepPaths,
    machine: Machine,
    card_gb: float | None,
    environ: Mapping[str, str] = os.environ,
) -> str:
    """Every trial the walk could launch, exactly as it would be launched, what shapes every trial, and what the
    sweep may cost. `card_gb`: the emulated card where the workload applies it (None elsewhere)."""
    storage = _existing_storage(settings, paths)
    work = workload_of(settings)
    ctx = Run(settings, paths, with_trainer(machine, work), work, None, storage, Unwatched())
    known = would_reuse(ctx)
    mine = _this_sweep(storage, settings.case.name, paths.sweep)
    answered = {  # where the trial of this sweep that answers for each rung ran
        (r.profile, r.num_envs): r.info.get("trial_dir", "") for r in mine if r.status is not Status.INTERRUPTED
    }
    port = launch.free_port()  # free now, so a command copied from here runs as shown; each launch takes its own
    planned = [
        Planned(profile, rung, str(trial_dir), plan(ctx, Decision(profile, rung, ""), trial_dir, port), note)
        for profile, rung in every_trial([p.name for p in settings.profiles], settings.rungs)
        for note in [known.get((profile, rung), "")]
        for trial_dir in [_folder(settings, paths, profile, rung, answered.get((profile, rung)) if note else None)]
    ]
    kind = planned[0].spec.info.get("workload", "") if planned else ""
    history = reuse.earlier_records(storage, settings.case.name, paths.sweep, Path(settings.output_root))
    history += mine
    same = [r for r in history if r.info.get("workload") == kind and r.info.get("device") == machine.device]
    defaults = default_durations(settings.measure, settings.objective not in GROWS_WITH_ENVS, kind)
    where = f"case {settings.case.name}, workload {kind or '?'}, on {machine.device}"
    took = from_history(same, defaults, where, settings.measure.window_s)
    profiles = dict.fromkeys(p.profile for p in planned)
    left = [sum(1 for p in planned if p.profile == v and not p.known) for v in profiles]
    cost = estimate_left(left, took.fail_s, took.fit_s, took.cut_s)
    env = planned[0].spec.env if planned else {}
    shaping = settings_lines(settings, machine.nproc, machine.device, card_gb, environ, env, ctx.machine.describe)
    shaping += first_lines(settings.history, prior.lines(prior.openings(ctx), settings.knob))
    aside = changed_away(ctx)
    change = (
        f"settings changed (settings_change=accept): {len(aside)} trial(s) recorded under the sweep's old settings "
        "would no longer count, and their rungs run afresh\n"
        if aside
        else ""
    )
    return (
        change
        + format_dry_run(settings.case.name, settings.knob, planned)
        + "\n".join(shaping)
        + "\n"
        + format_estimate(cost)
        + f"\nestimate basis: {took.basis}\n"
    )


def _folder(settings: Settings, paths: SweepPaths, profile: str, rung: int, answered: str | None) -> Path:
    """The trial's folder: where the trial of this sweep that answers for it ran (`answered`, relative to the sweep
    folder: not always the first, where an earlier launch of it was interrupted), else the first one free, where it
    would launch or a reused trial would be copied (a trial set aside keeps its own)."""
    if answered:
        return (paths.sweep_dir / answered).absolute()
    return fresh_trial_dir(paths, settings.case.name, profile, rung, Phase.PROBE, settings.knob).absolute()


def _existing_storage(settings: Settings, paths: SweepPaths) -> BaseStorage | None:
    """The sweep's storage where it exists already (a dry run creates nothing)."""
    if settings.storage:
        return studies.open_storage(settings.storage, paths.sweep_dir, settings.storage_wait_s)
    return studies.open_storage(None, paths.sweep_dir) if paths.journal.is_file() else None


def _this_sweep(storage: BaseStorage | None, case: str, sweep: str) -> list[TrialRecord]:
    study = studies.load_study(storage, studies.study_name(case, sweep)) if storage is not None else None
    return studies.records(study) if study is not None else []
