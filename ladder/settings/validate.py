"""Validation: the composed config's values checked, each bad one a `ConfigError` naming the key and the fix.

Each check takes a group as Hydra composed it (a plain dict) and returns the schema's own object with its choices
made enum members, so what the code reads is the schema, validated. Pure: no files, no environment.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import fields
from typing import Any, TypeVar

from ladder.core import caseclass
from ladder.core.caseclass import Thresholds
from ladder.core.errors import ConfigError
from ladder.core.placement import Mode as PlacementMode
from ladder.core.records import Objective, PreflightPolicy
from ladder.core.spec import EmulateBy, Kind, Launcher, ProgressKind
from ladder.core.walk.tuning import Strategy
from ladder.settings.schema import (
    CaseConf,
    DecideConf,
    Device,
    MeasureConf,
    PreflightConf,
    ProxyShape,
    SettingsChange,
    SweepConf,
    WorkloadConf,
)

E = TypeVar("E", bound=enum.Enum)


def typed(kind: Any, raw: dict[str, Any]) -> Any:
    """`raw` as a `kind` (a schema dataclass), or a ConfigError naming the keys it does not know."""
    names = {f.name for f in fields(kind)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} for {kind.__name__}", f"known keys: {', '.join(sorted(names))}")
    return kind(**raw)


def choice(kind: type[E], key: str, value: Any) -> E:
    """`value` as a member of `kind`, or a ConfigError that lists the valid options."""
    try:
        return kind(value)
    except ValueError:
        options = ", ".join(str(o.value) for o in kind)
        raise ConfigError(f"unknown {key} '{value}'", f"use one of: {options}") from None


def top(conf: SweepConf) -> SweepConf:
    """The root's own settings checked and typed, its choices enums (the groups are checked by their own checks)."""
    return dataclasses.replace(
        conf,
        dry_run=bool(conf.dry_run),
        confirm_s=_non_negative("confirm_s", conf.confirm_s),
        objective=choice(Objective, "objective", str(conf.objective)),
        strategy=choice(Strategy, "strategy", conf.strategy),
        mem_headroom_frac=float(conf.mem_headroom_frac),
        mem_margin_frac=float(conf.mem_margin_frac),
        reuse=bool(conf.reuse),
        descent_gain_max=_gain(conf.descent_gain_max),
        descent_short=bool(conf.descent_short),
        descent_idle_util=_util("descent_idle_util", conf.descent_idle_util),
        noise_carry_h=_hours("noise_carry_h", conf.noise_carry_h),
        placement=choice(PlacementMode, "placement", conf.placement),
        history=bool(conf.history),
        cards=_cards(conf.cards),
        device=_device(str(conf.device)),
        sweep=_opt_str(conf.sweep),
        output_root=str(conf.output_root),
        storage=_opt_str(conf.storage),
        storage_wait_s=_positive("storage_wait_s", conf.storage_wait_s),
        resume=_resume(conf.resume),
        heartbeat_s=_positive("heartbeat_s", conf.heartbeat_s),
        stale_after_s=_positive("stale_after_s", conf.stale_after_s),
        nccl_env={str(k): str(v) for k, v in (conf.nccl_env or {}).items()},
        settings_change=choice(SettingsChange, "settings_change", conf.settings_change),
    )


def _cards(values: Any) -> list[float]:
    """`cards`: card sizes in GB, each positive (an empty list: no cards.tsv rows)."""
    fix = "give card sizes in GB, e.g. cards=[8,16,24,80]"
    if not isinstance(values, (list, tuple)):
        raise ConfigError(f"cards must be a list of GB, got {values!r}", fix)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
        raise ConfigError(f"cards must be positive sizes in GB, got {list(values)}", fix)
    return [float(v) for v in values]


def rungs(values: Any, ladder_name: str) -> tuple[int, ...]:
    fix = "give a strictly descending list of positive integers, e.g. ladder.rungs=[256,128,64]"
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(f"ladder '{ladder_name}' has no rungs (got {values!r})", fix)
    if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in values):
        raise ConfigError(f"ladder '{ladder_name}' rungs must be positive integers, got {list(values)}", fix)
    if any(a <= b for a, b in zip(values, values[1:], strict=False)):
        raise ConfigError(f"ladder '{ladder_name}' rungs must be strictly descending, got {list(values)}", fix)
    return tuple(values)


def case(raw: Any, known_cases: tuple[str, ...], kind: Kind = WorkloadConf.kind) -> CaseConf:
    known = ", ".join(known_cases) or "(none found)"
    if not isinstance(raw, dict) or raw.get("name") in (None, "???"):
        raise ConfigError("no case selected", f"add case=<name>; known cases: {known}")
    if known_cases and raw["name"] not in known_cases and kind != Kind.COMMAND:  # a command workload's case: any name
        raise ConfigError(f"unknown case '{raw['name']}'", f"use one of: {known}")
    if not raw.get("method") and kind != Kind.COMMAND:
        raise ConfigError(
            f"case '{raw['name']}' has no method, which the {kind} workload needs",
            "set case.method=<amp|add|ase|...>, or run your trainer: workload.kind=command",
        )
    return CaseConf(
        name=str(raw["name"]),
        method=str(raw.get("method") or ""),
        robot=str(raw.get("robot", "")),
        args_file=str(raw.get("args_file", "")),
        agent=dict(raw.get("agent") or {}),
        proxy=typed(ProxyShape, raw.get("proxy") or {}),
    )


def workload(raw: dict[str, Any]) -> WorkloadConf:
    """The workload's choices checked here, before anything launches; which kind `auto` runs, and the progress
    formats each kind reads, are the planner's to resolve (ladder.workloads.planner)."""
    conf: WorkloadConf = typed(WorkloadConf, raw)
    conf = dataclasses.replace(
        conf,
        kind=choice(Kind, "workload.kind", conf.kind),
        launcher=choice(Launcher, "workload.launcher", conf.launcher),
        emulate_by=choice(EmulateBy, "workload.emulate_by", conf.emulate_by),
        progress=choice(ProgressKind, "workload.progress", conf.progress) if conf.progress else "",
    )
    for name, fix in (
        ("emulate_gpu_mem_gb", "set workload.emulate_gpu_mem_gb=<GB per rank>, or null for no emulated card"),
        ("host_mem_limit_gb", "set workload.host_mem_limit_gb=<GB for the whole trial>, or null for no limit"),
    ):
        if (value := getattr(conf, name)) is not None and value <= 0:
            raise ConfigError(f"workload.{name} must be > 0 or null, got {value}", fix)
    for name, fix in (
        ("width_factor", "set workload.width_factor=0.125 (1.0: MimicKit's sizes)"),
        ("collective_timeout_s", "set workload.collective_timeout_s=<seconds>"),
        ("lease_timeout_s", "set workload.lease_timeout_s=<seconds>"),
        ("mimickit_max_iters", "set workload.mimickit_max_iters=2000"),
    ):
        if getattr(conf, name) <= 0:
            raise ConfigError(f"workload.{name} must be > 0, got {getattr(conf, name)}", fix)
    for name, fix in (
        ("nproc", "set workload.nproc=<ranks per trial>, or 0: one per visible GPU (2 on CPU)"),
        ("gpus_per_trial", "set workload.gpus_per_trial=<GPUs per trial>, or 0: no lease"),
        ("mimickit_num_envs", "set workload.mimickit_num_envs=<envs>, or 0: the ladder's own"),
    ):
        if getattr(conf, name) < 0:
            raise ConfigError(f"workload.{name} must be >= 0, got {getattr(conf, name)}", fix)
    return conf


def measure(raw: dict[str, Any]) -> MeasureConf:
    measure: MeasureConf = typed(MeasureConf, raw)
    if measure.repeats < 1:
        raise ConfigError(f"measure.repeats must be >= 1, got {measure.repeats}", "set measure.repeats=1 (or more)")
    if measure.min_window_iters < 2:
        raise ConfigError(
            f"measure.min_window_iters must be >= 2 (a rate needs two points), got {measure.min_window_iters}",
            "set measure.min_window_iters=5",
        )
    for name, fix in (
        ("max_ci_frac", "set measure.max_ci_frac=0.10 (a fraction of samples/s)"),
        ("max_repeat_spread", "set measure.max_repeat_spread=0.05 (a fraction of mean samples/s)"),
        ("stable_tol", "set measure.stable_tol=0.25 (a relative spread of step times)"),
    ):
        if getattr(measure, name) <= 0:
            raise ConfigError(f"measure.{name} must be > 0, got {getattr(measure, name)}", fix)
    if not 0 <= measure.cap_headroom_frac < 1:
        raise ConfigError(
            f"measure.cap_headroom_frac must be a fraction in [0, 1), got {measure.cap_headroom_frac}",
            "set measure.cap_headroom_frac=0.02",
        )
    if measure.warmup_iters < 0 or measure.stable_k < 1 or measure.kill_grace_s < 0:
        raise ConfigError(
            f"measure.warmup_iters >= 0, measure.stable_k >= 1 and measure.kill_grace_s >= 0, got "
            f"{measure.warmup_iters}, {measure.stable_k} and {measure.kill_grace_s}",
            "set measure.warmup_iters=3 measure.stable_k=3 measure.kill_grace_s=5",
        )
    for name in (
        "window_s",
        "sample_hz",
        "stall_timeout_s",
        "startup_timeout_s",
        "trial_timeout_s",
        "budget_s",
        "warmup_timeout_s",
    ):
        if getattr(measure, name) <= 0:
            raise ConfigError(
                f"measure.{name} must be > 0, got {getattr(measure, name)}", f"set measure.{name}=<seconds>"
            )
    return measure


def preflight(raw: dict[str, Any]) -> PreflightConf:
    conf: PreflightConf = typed(PreflightConf, raw)
    policy = choice(PreflightPolicy, "preflight.policy", conf.policy)
    for name in ("timeout_s", "poll_s"):
        if getattr(conf, name) <= 0:
            raise ConfigError(f"preflight.{name} must be > 0, got {getattr(conf, name)}", f"set preflight.{name}=<s>")
    return dataclasses.replace(conf, policy=policy)


def decide(raw: dict[str, Any]) -> Thresholds:
    """The decision table's thresholds, each a number, in the order the table needs them."""
    conf: DecideConf = typed(DecideConf, raw)
    for name in ("vram_frac", "compute_util", "low_util", "low_mem_frac"):
        value = getattr(conf, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            example = f"decide.{name}={getattr(Thresholds, name):.3g}"
            raise ConfigError(f"decide.{name} must be a number, got {value!r}", f"set a number, e.g. {example}")
    return caseclass.validate(
        Thresholds(float(conf.vram_frac), float(conf.compute_util), float(conf.low_util), float(conf.low_mem_frac))
    )


def _device(value: str) -> Device:
    try:
        return Device(value)
    except ValueError:
        raise ConfigError(f"unknown device '{value}'", "use device=auto, device=cpu or device=cuda") from None


def _resume(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if value != "latest":
        raise ConfigError(f"unknown resume '{value}'", "use resume=latest, or sweep=<name> to resume a named sweep")
    return "latest"


def _non_negative(key: str, value: Any) -> float:
    if float(value) < 0:
        raise ConfigError(f"{key} must be >= 0, got {value}", f"set {key}=<seconds> (0: off)")
    return float(value)


def _gain(value: Any) -> float | None:
    if value is None:
        return None
    if float(value) < 1:
        raise ConfigError(
            f"descent_gain_max must be >= 1 or null, got {value}",
            "set descent_gain_max=1.3 (a factor), or null to always measure lower",
        )
    return float(value)


def _util(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if not 0 <= float(value) <= 100:
        raise ConfigError(
            f"{key} must be a util between 0 and 100 (%) or null, got {value}",
            f"set {key}=45 (the decision table's low util), or null: always measure lower",
        )
    return float(value)


def _hours(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if float(value) < 0:
        raise ConfigError(
            f"{key} must be >= 0 hours or null, got {value}",
            f"set {key}=2 (hours), or null: this sweep's own windows only",
        )
    return float(value)


def _positive(key: str, value: Any) -> float:
    if float(value) <= 0:
        raise ConfigError(f"{key} must be > 0, got {value}", f"set {key}=<seconds>")
    return float(value)


def _opt_str(value: Any) -> str | None:
    return None if value in (None, "") else str(value)
