"""Typed configuration: the dataclasses Hydra composes into, and their validation.

Nothing below this module sees a DictConfig: `settings_from(cfg)` turns the composed config into frozen
`Settings` and rejects bad input with a `ConfigError` that names the problem and the fix.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from ladder.core.caseclass import Thresholds, validate
from ladder.core.errors import ConfigError
from ladder.core.policy import Strategy
from ladder.core.records import Objective, PreflightPolicy, Word
from ladder.core.spec import EmulateBy, Kind, Launcher, ProgressKind

OBJECTIVES = tuple(o.value for o in Objective)

# A sweep's settings record (ladder.settings.recorded): recorded when a sweep starts, taken back when it resumes. Each
# entry names a setting by its command-line key (a group covers its leaves: `workload` is every workload.* key).
# Outcome: changes what a trial means; a resume that gives another value is refused (or, with
# settings_change=accept, the change is recorded and the rungs it affects start afresh).
OUTCOME_SETTINGS = ("case", "ladder", "profile", "workload", "measure", "device", "objective", "confirm_s", "nccl_env")
NOT_OUTCOME = ("workload.lease_dir", "workload.lease_timeout_s", "measure.kill_grace_s")  # where and how long to wait
# Carried: how the sweep walks; a resume that does not give it takes the recorded value, one that does wins
CARRIED_SETTINGS = (
    "reuse",
    "strategy",
    "mem_headroom_frac",
    "mem_margin_frac",
    "descent_gain_max",
    "descent_short",
    "descent_idle_util",
    "noise_carry_h",
)


class SettingsChange(Word):
    """What a resume does when its command line sets outcome settings other than the sweep recorded."""

    REFUSE = "refuse"  # stop before anything launches, naming the differences
    ACCEPT = "accept"  # record the change; the rungs it affects start afresh


SETTINGS_CHANGES = tuple(c.value for c in SettingsChange)


E = TypeVar("E", bound=enum.Enum)


class Device(Word):
    AUTO = "auto"  # cuda when a GPU is visible, else cpu
    CPU = "cpu"
    CUDA = "cuda"


# ---------------------------------------------------------------- schema (what Hydra composes into)


@dataclass
class ProxyShape:
    """What the built-in proxy needs to stand in for a case's real trainer."""

    obs_dim: int = 180  # observation size per env
    act_dim: int = 22  # action size per env
    disc_obs_dim: int = 450  # discriminator observation size (amp/add/ase/vault)
    sim_state_dim: int = 4096  # floats of simulator state per env: what makes memory grow with num_envs


@dataclass
class CaseConf:
    """One training case (a MimicKit args file) and what the proxy needs to stand in for it. A case of one's own
    trainer (workload.kind=command) needs only its name."""

    name: str = MISSING  # e.g. amp_pi_plus
    method: str = ""  # amp, add, ase, deepmimic, vault, ...: required by the proxy and MimicKit
    robot: str = ""  # pi_plus, humanoid, g1, ...
    args_file: str = ""  # MimicKit args file, relative to the MimicKit root
    agent: dict[str, Any] = field(default_factory=dict)  # the case's MimicKit agent config, as shipped
    proxy: ProxyShape = field(default_factory=ProxyShape)


@dataclass
class LadderConf:
    """The descending rungs to walk."""

    name: str = MISSING
    rungs: list[int] = MISSING  # strictly descending positive values of the knob
    knob: str = "num_envs"  # what the rungs set: num_envs, or any knob the trainer takes (workload.kind=command)


@dataclass
class ProfileConf:
    """A named patch on the agent config (column `variant`)."""

    name: str = MISSING
    agent: dict[str, Any] = field(default_factory=dict)  # leaves set on the agent config where it has that key


@dataclass
class WorkloadConf:
    kind: str = "auto"  # auto (mimickit when a MimicKit folder is set, else proxy), proxy, mimickit or command
    width_factor: float = 0.125  # the proxy's nets are narrowed by this factor (1.0 = MimicKit's sizes)
    nproc: int = 0  # ranks per trial; 0 = one per visible GPU, or 2 on CPU
    emulate_gpu_mem_gb: float | None = None  # emulate a smaller card of this size per GPU (rank); null = off
    emulate_by: str = "auto"  # auto (the proxy's own cap; a ballast for any other trainer on a GPU), ballast, fraction
    host_mem_limit_gb: float | None = None  # memory cgroup limit for the whole trial; null = no limit
    collective_timeout_s: float = 60.0  # process-group timeout handed to the trainer
    mimickit_root: str = ""  # MimicKit checkout; "" = $MIMICKIT_ROOT
    mimickit_python: str = ""  # interpreter with MimicKit's dependencies; "" = ladder's own
    engine_config: str = ""  # e.g. data/engines/newton_engine.yaml; "" = the args file's engine
    env_patch: dict[str, Any] = field(default_factory=dict)  # mimickit: keys set on the case's env config (trial copy)
    mimickit_max_iters: int = 2000  # MimicKit's --max_samples in iterations: a bound; ladder stops trials sooner
    mimickit_num_envs: int = 0  # --num_envs while the ladder walks another knob
    command: list[str] = field(default_factory=list)  # kind command: the argv template ({num_envs}, {trial_dir}...)
    launcher: str = "direct"  # kind command: direct or torchrun
    single_rank: str = "direct"  # a one-rank torchrun trial: direct (torchrun's variables, no agent) or torchrun
    proxy_ranks: str = "direct"  # several ranks of the proxy: direct (ladder's rank launcher, no agent) or torchrun
    proxy_start: str = "warm"  # the proxy's ranks: warm (forked from one interpreter with torch imported) or cold
    pin_ranks: bool = True  # the proxy's direct ranks: each on its own share of the trial's CPUs
    progress: str = ""  # "" = the kind's own; mimickit: mimickit_stdout|mimickit_log; command: regex|jsonl
    progress_regex: str = ""  # kind command with regex progress: the pattern or a preset; "" = the default
    progress_file: str = ""  # kind command: relative to the trial folder; "" = stdout.log or progress.jsonl
    cwd: str = ""  # kind command: the folder the trainer starts in; "" = {trial_dir}; {launch_dir}: ladder's
    cmd: str = ""  # kind command: the template as one string, split like a shell (shlex), instead of `command`
    env: dict[str, str] = field(default_factory=dict)  # kind command: NAME=value set for the trial (env.txt)
    gpus_per_trial: int = 0  # lease this many GPUs (CPU slots without a GPU) per trial, one rank each; 0 = no lease
    lease_dir: str = ""  # host-local folder of the lease locks; "" = <tmp>/ladder-leases
    lease_timeout_s: float = 3600.0  # a trial waits this long for free devices, then the sweep stops


@dataclass
class MeasureConf:
    warmup_iters: int = 3  # the window opens no earlier than this iteration
    stable_k: int = 3  # ... and once the last k step times agree within stable_tol
    stable_tol: float = 0.25  # relative spread (max-min)/median allowed among those k step times
    data_time_max_s: float | None = None  # ... and each of the last k data times under this (e.g. 0.02)
    warmup_timeout_s: float = 120.0  # open the window anyway (marked ungated) after this long
    window_s: float = 60.0  # length of the measured window (at least: it also waits for min_window_iters points)
    min_window_iters: int = 5  # the window closes only once it holds this many progress points (no fit unmeasured)
    sample_hz: float = 10.0  # sampler rate
    stall_timeout_s: float = 120.0  # no progress for this long: kill the trial, status timeout
    startup_timeout_s: float = 300.0  # ... but before the first progress line, wait this long (env creation)
    trial_timeout_s: float = 900.0  # limit per trial, but for a trainer still printing steadily then (budget_s)
    # ... which runs on while, at its pace so far, its window can close within this many seconds of its launch (a
    # slow trainer is measured, however slow its iterations); past that it is `unmeasured`, saying what budget would do.
    # At or below trial_timeout_s: no trainer runs past trial_timeout_s
    budget_s: float = 2700.0
    kill_grace_s: float = 5.0  # SIGTERM to SIGKILL, for a stop that may need an orderly end (stall, time limit)
    repeats: int = 1  # measure each fitting configuration this many times
    max_repeat_spread: float = 0.05  # repeats differing by more (fraction of mean samples/s): unstable
    max_ci_frac: float = 0.10  # a 95% interval wider than this fraction of samples/s: unstable
    extend_unstable: bool = True  # ... and such a window is first extended once by window_s
    recheck_unstable: bool = True  # a pick still unstable then is launched once more before it counts (its median)
    # a fit's memory peak must stay this share of its cap below it (memory cgroup, emulated card, the GPU's memory);
    # nearer, it survived but is no confident fit: `oom_or_nccl`/`near_cap`, weak evidence (the rung runs once more)
    cap_headroom_frac: float = 0.02


@dataclass
class DecideConf:
    """The decision table's thresholds, relative to the card's memory."""

    vram_frac: float = Thresholds.vram_frac  # peak memory at least this share of the card: VRAM-bound
    compute_util: float = Thresholds.compute_util  # util at least this: compute-heavy
    low_util: float = Thresholds.low_util  # util under this with low memory: throughput/env-bound
    low_mem_frac: float = Thresholds.low_mem_frac  # "low memory": under this share of the card (1/3)


@dataclass
class PreflightConf:
    """Before each launch on GPUs: no foreign compute process, memory back near its idle baseline."""

    policy: str = PreflightPolicy.WAIT.value  # wait (poll; refuse after timeout_s), refuse, or ignore
    mem_slack_mb: float = 512.0  # used memory may sit this far above the GPU's baseline
    timeout_s: float = 600.0  # policy wait: refuse when still busy after this long
    poll_s: float = 2.0  # policy wait: seconds between NVML readings


@dataclass
class SweepConf:
    """The root config."""

    case: CaseConf = MISSING
    ladder: LadderConf = MISSING
    profile: dict[str, ProfileConf] = field(default_factory=dict)
    workload: WorkloadConf = field(default_factory=WorkloadConf)
    measure: MeasureConf = field(default_factory=MeasureConf)
    preflight: PreflightConf = field(default_factory=PreflightConf)
    decide: DecideConf = field(default_factory=DecideConf)
    dry_run: bool = False  # print every trial the walk could launch (argv, env, files) and launch nothing
    confirm_s: float = 0.0  # > 0: the pick runs this long (phase confirm); failing then steps down and confirms again
    objective: str = Objective.MIN_AVG_UTIL.value  # min_avg_util (the first figure column) or samples_per_s
    strategy: str = Strategy.MODEL.value  # model: seeds later profiles, jumps on a memory fit; walk: one rung at a time
    mem_headroom_frac: float = 0.05  # the memory fit jumps only to rungs leaving this fraction of the card free
    mem_margin_frac: float = 0.10  # ... and skips a rung only when it predicts it over the card by this much
    reuse: bool = True  # trials of earlier sweeps with the same configuration on the same hardware are not rerun
    # samples/s: a lower rung is taken to beat the one above by at most this factor, so a profile whose best even
    # this many times over stays below the case's best is not measured lower; null = always measure lower. 1.3: the
    # largest such gain on record is 1.22 (a sweep that peaked at 4096 envs and lost 18% at 8192)
    descent_gain_max: float | None = 1.3
    descent_short: bool = True  # samples/s: descent is a short probe unless fewer envs ran as fast (losers: none)
    # samples/s, with descent_short: a largest fit whose GPUs NVML saw busy under this util (%), clear of the card, is
    # not measured lower (neither memory nor GPU time near a limit); 45 = the table's "low util"; null = off
    descent_idle_util: float | None = 45.0
    # the step noise of this case's windows in earlier sweeps on this host (same trainer, hardware and code), finished
    # within this many hours, fills the case's pool where this sweep's own windows are still few: a first window's
    # interval need not rest on its own 2-4 steps; null or 0 = this sweep's windows only
    noise_carry_h: float | None = 2.0
    device: str = Device.AUTO.value  # auto (cuda when a GPU is visible, else cpu), cpu or cuda
    sweep: str | None = None  # sweep name: resume it when it exists; null = a new one named by the time
    output_root: str = "output/train"  # sweeps live in <output_root>/case_gpu_bench_<sweep>/
    storage: str | None = None  # Optuna storage URL; null = journal file in the sweep folder
    storage_wait_s: float = 300.0  # how long an unreachable storage server is waited for before the sweep stops (6)
    resume: str | None = None  # latest: resume the most recently active sweep under output_root (with no sweep=)
    heartbeat_s: float = 30.0  # a running trial's heartbeat is written this often
    stale_after_s: float = 300.0  # a running trial of another host whose heartbeat is older is taken as abandoned
    nccl_env: dict[str, str] = field(default_factory=dict)  # set for every trial and written to env.txt
    # a resumed sweep given other outcome settings than it recorded: refuse, or accept (record them; the rungs
    # they change start afresh)
    settings_change: str = SettingsChange.REFUSE.value


HELP_COLUMN = 26  # `--help`: a setting's `name=value` and the room before its description


def register() -> None:
    """Register the schema so conf/config.yaml can name it in its defaults list, and the `${setting:...}` resolver
    `--help` shows each setting with (its value as the command typed composes it, not a copy that can go stale)."""
    ConfigStore.instance().store(name="ladder_schema", node=SweepConf)
    OmegaConf.register_new_resolver("setting", shown_setting, replace=True)


def shown_setting(key: str, *, _root_: DictConfig) -> str:
    """`window_s=8` for `measure.window_s`, padded to the help's column (`${setting:measure.window_s}`)."""
    value = OmegaConf.select(_root_, key, throw_on_missing=False)
    if isinstance(value, bool):
        text = str(value).lower()
    elif value is None:
        text = "null"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return f"{key.rsplit('.', 1)[-1]}={text}".ljust(HELP_COLUMN - 1) + " "


# ---------------------------------------------------------------- settings (validated, frozen)


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    robot: str
    args_file: str
    agent: dict[str, Any]
    proxy: ProxyShape


@dataclass(frozen=True)
class Profile:
    name: str
    agent_patch: dict[str, Any]


@dataclass(frozen=True)
class Settings:
    case: Case
    rungs: tuple[int, ...]
    ladder_name: str
    knob: str
    profiles: tuple[Profile, ...]
    workload: WorkloadConf
    measure: MeasureConf
    preflight: PreflightConf  # its policy a PreflightPolicy
    decide: Thresholds  # validated: 0 < low_mem_frac < vram_frac <= 1, 0 <= low_util <= compute_util <= 100
    dry_run: bool
    confirm_s: float
    objective: Objective
    strategy: Strategy
    mem_headroom_frac: float
    mem_margin_frac: float
    reuse: bool
    descent_gain_max: float | None
    device: Device
    sweep: str | None
    output_root: str
    storage: str | None
    storage_wait_s: float
    resume: str | None
    heartbeat_s: float
    stale_after_s: float
    nccl_env: dict[str, str]
    settings_change: SettingsChange = SettingsChange.REFUSE
    given: tuple[str, ...] | None = None  # the keys set on the command line; None = unknown (all count as given)
    descent_short: bool = True  # samples/s: a descent step is a short probe unless a measured pair fell
    descent_idle_util: float | None = 45.0  # samples/s: no descent below a best whose GPUs stayed under this util (%)
    noise_carry_h: float | None = 2.0  # earlier sweeps' step noise of the case on this host, this recent, is pooled


GROUPS = ("case", "ladder", "profile", "workload", "measure", "preflight", "decide")  # SweepConf's nested fields


def settings_from(cfg: DictConfig, known_cases: tuple[str, ...] = (), given: tuple[str, ...] | None = None) -> Settings:
    """Validate the composed config and freeze it; `given`: the keys the command line set (see `Settings.given`).
    Every default is SweepConf's (and its groups'): a key the config lacks takes the schema's value."""
    raw = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    assert isinstance(raw, dict)
    top: SweepConf = _typed(SweepConf, {str(k): v for k, v in raw.items() if k not in GROUPS})
    workload = _workload(raw.get("workload") or {})
    ladder: LadderConf = _typed(LadderConf, raw.get("ladder") or {})
    return Settings(
        case=_case(raw.get("case"), known_cases, workload.kind),
        rungs=validate_rungs(ladder.rungs, str(ladder.name)),
        ladder_name=str(ladder.name),
        knob=str(ladder.knob),
        profiles=_profiles(raw.get("profile") or {}),
        workload=workload,
        measure=_measure(raw.get("measure") or {}),
        preflight=_preflight(raw.get("preflight") or {}),
        decide=_decide(raw.get("decide") or {}),
        dry_run=bool(top.dry_run),
        confirm_s=_non_negative("confirm_s", top.confirm_s),
        objective=validate_objective(str(top.objective)),
        strategy=_enum(Strategy, "strategy", top.strategy),
        mem_headroom_frac=float(top.mem_headroom_frac),
        mem_margin_frac=float(top.mem_margin_frac),
        reuse=bool(top.reuse),
        descent_gain_max=_gain(top.descent_gain_max),
        descent_short=bool(top.descent_short),
        descent_idle_util=_util("descent_idle_util", top.descent_idle_util),
        noise_carry_h=_hours("noise_carry_h", top.noise_carry_h),
        device=_device(str(top.device)),
        sweep=_opt_str(top.sweep),
        output_root=str(top.output_root),
        storage=_opt_str(top.storage),
        storage_wait_s=_positive("storage_wait_s", top.storage_wait_s),
        resume=_resume(top.resume),
        heartbeat_s=_positive("heartbeat_s", top.heartbeat_s),
        stale_after_s=_positive("stale_after_s", top.stale_after_s),
        nccl_env={str(k): str(v) for k, v in (top.nccl_env or {}).items()},
        settings_change=_enum(SettingsChange, "settings_change", top.settings_change),
        given=given,
    )


def validate_rungs(rungs: Any, ladder_name: str) -> tuple[int, ...]:
    fix = "give a strictly descending list of positive integers, e.g. ladder.rungs=[256,128,64]"
    if not isinstance(rungs, (list, tuple)) or not rungs:
        raise ConfigError(f"ladder '{ladder_name}' has no rungs (got {rungs!r})", fix)
    if not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rungs):
        raise ConfigError(f"ladder '{ladder_name}' rungs must be positive integers, got {list(rungs)}", fix)
    if any(a <= b for a, b in zip(rungs, rungs[1:], strict=False)):
        raise ConfigError(f"ladder '{ladder_name}' rungs must be strictly descending, got {list(rungs)}", fix)
    return tuple(rungs)


def validate_objective(objective: str) -> Objective:
    return _enum(Objective, "objective", objective)


def _case(raw: Any, known_cases: tuple[str, ...], kind: str = WorkloadConf.kind) -> Case:
    known = ", ".join(known_cases) or "(none found)"
    if not isinstance(raw, dict) or raw.get("name") in (None, "???"):
        raise ConfigError("no case selected", f"add case=<name>; known cases: {known}")
    if known_cases and raw["name"] not in known_cases and kind != "command":  # a command workload's case: any name
        raise ConfigError(f"unknown case '{raw['name']}'", f"use one of: {known}")
    if not raw.get("method") and kind != "command":
        raise ConfigError(
            f"case '{raw['name']}' has no method, which the {kind} workload needs",
            "set case.method=<amp|add|ase|...>, or run your trainer: workload.kind=command",
        )
    shape = _typed(ProxyShape, raw.get("proxy") or {})
    return Case(
        name=str(raw["name"]),
        method=str(raw.get("method") or ""),
        robot=str(raw.get("robot", "")),
        args_file=str(raw.get("args_file", "")),
        agent=dict(raw.get("agent") or {}),
        proxy=shape,
    )


def _profiles(raw: dict[str, Any]) -> tuple[Profile, ...]:
    if not raw:
        raise ConfigError("no profile selected", "add profile=[default,hiutil] (or one of them)")
    return tuple(
        Profile(name=str(p.get("name", key)), agent_patch=dict(p.get("agent") or {})) for key, p in raw.items()
    )


def _workload(raw: dict[str, Any]) -> WorkloadConf:
    """The workload's choices checked here, before anything launches; which kind `auto` runs, and the progress
    formats each kind reads, are the planner's to resolve (ladder.workloads.planner)."""
    conf: WorkloadConf = _typed(WorkloadConf, raw)
    _enum(Kind, "workload.kind", conf.kind)
    _enum(Launcher, "workload.launcher", conf.launcher)
    _enum(EmulateBy, "workload.emulate_by", conf.emulate_by)
    if conf.progress:
        _enum(ProgressKind, "workload.progress", conf.progress)
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


def _measure(raw: dict[str, Any]) -> MeasureConf:
    measure = _typed(MeasureConf, raw)
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


def _preflight(raw: dict[str, Any]) -> PreflightConf:
    conf: PreflightConf = _typed(PreflightConf, raw)
    policy = _enum(PreflightPolicy, "preflight.policy", conf.policy)
    for name in ("timeout_s", "poll_s"):
        if getattr(conf, name) <= 0:
            raise ConfigError(f"preflight.{name} must be > 0, got {getattr(conf, name)}", f"set preflight.{name}=<s>")
    return dataclasses.replace(conf, policy=policy)


def _decide(raw: dict[str, Any]) -> Thresholds:
    """The decision table's thresholds, each a number, in the order the table needs them."""
    conf: DecideConf = _typed(DecideConf, raw)
    for name in ("vram_frac", "compute_util", "low_util", "low_mem_frac"):
        value = getattr(conf, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            example = f"decide.{name}={getattr(Thresholds, name):.3g}"
            raise ConfigError(f"decide.{name} must be a number, got {value!r}", f"set a number, e.g. {example}")
    return validate(
        Thresholds(float(conf.vram_frac), float(conf.compute_util), float(conf.low_util), float(conf.low_mem_frac))
    )


def _typed(kind: Any, raw: dict[str, Any]) -> Any:
    names = {f.name for f in fields(kind)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} for {kind.__name__}", f"known keys: {', '.join(sorted(names))}")
    return kind(**raw)


def _enum(kind: type[E], key: str, value: Any) -> E:
    """`value` as a member of `kind`, or a ConfigError that lists the valid options."""
    try:
        return kind(value)
    except ValueError:
        options = ", ".join(str(o.value) for o in kind)
        raise ConfigError(f"unknown {key} '{value}'", f"use one of: {options}") from None


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
