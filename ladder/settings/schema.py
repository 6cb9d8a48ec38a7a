"""The schema: the dataclasses Hydra composes the config into, each field typed and commented once.

Every setting's default is written here (the walk's are `Tuning`'s, the decision table's `Thresholds`'); the
validated settings (`ladder.settings.config.Settings`) hold these same objects. A choice (`Choice[E]`) is composed
as its string, so `--help` and `--cfg job` show the word a command gives; validation makes it the enum member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from ladder.core.caseclass import Thresholds
from ladder.core.placement import Mode as PlacementMode
from ladder.core.records import Objective, PreflightPolicy, Word
from ladder.core.spec import EmulateBy, Kind, Launcher, ProgressKind
from ladder.core.walk.tuning import Strategy, Tuning

E = TypeVar("E")
if TYPE_CHECKING:
    from typing import Annotated

    Choice = Annotated[E, "choice"]  # to the type checker: the enum itself
else:

    class Choice:
        """A choice field: Hydra composes it as a string (its enum's value); validation makes it the member."""

        def __class_getitem__(cls, kind: Any) -> type:
            return str


class SettingsChange(Word):
    """What a resume does when its command line sets outcome settings other than the sweep recorded."""

    REFUSE = "refuse"  # stop before anything launches, naming the differences
    ACCEPT = "accept"  # record the change; the rungs it affects start afresh


class Device(Word):
    AUTO = "auto"  # cuda when a GPU is visible, else cpu
    CPU = "cpu"
    CUDA = "cuda"


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
    # auto (mimickit when a MimicKit folder is set, else proxy), proxy, mimickit or command
    kind: Choice[Kind] = Kind.AUTO
    width_factor: float = 0.125  # the proxy's nets are narrowed by this factor (1.0 = MimicKit's sizes)
    nproc: int = 0  # ranks per trial; 0 = one per visible GPU, or 2 on CPU
    emulate_gpu_mem_gb: float | None = None  # emulate a smaller card of this size per GPU (rank); null = off
    # auto (the proxy's own cap; a ballast for any other trainer on a GPU), ballast, fraction
    emulate_by: Choice[EmulateBy] = EmulateBy.AUTO
    host_mem_limit_gb: float | None = None  # memory cgroup limit for the whole trial; null = no limit
    collective_timeout_s: float = 60.0  # process-group timeout handed to the trainer
    mimickit_root: str = ""  # MimicKit checkout; "" = $MIMICKIT_ROOT
    mimickit_python: str = ""  # interpreter with MimicKit's dependencies; "" = ladder's own
    engine_config: str = ""  # e.g. data/engines/newton_engine.yaml; "" = the args file's engine
    env_patch: dict[str, Any] = field(default_factory=dict)  # mimickit: keys set on the case's env config (trial copy)
    mimickit_max_iters: int = 2000  # MimicKit's --max_samples in iterations: a bound; ladder stops trials sooner
    mimickit_num_envs: int = 0  # --num_envs while the ladder walks another knob
    command: list[str] = field(default_factory=list)  # kind command: the argv template ({num_envs}, {trial_dir}...)
    launcher: Choice[Launcher] = Launcher.DIRECT  # kind command: direct or torchrun
    single_rank: str = "direct"  # a one-rank torchrun trial: direct (torchrun's variables, no agent) or torchrun
    proxy_ranks: str = "direct"  # several ranks of the proxy: direct (ladder's rank launcher, no agent) or torchrun
    proxy_start: str = "warm"  # the proxy's ranks: warm (forked from one interpreter with torch imported) or cold
    pin_ranks: bool = True  # the proxy's direct ranks: each on its own share of the trial's CPUs
    # "" = the kind's own; mimickit: mimickit_stdout|mimickit_log; command: regex|jsonl
    progress: Choice[ProgressKind | Literal[""]] = ""
    progress_regex: str = ""  # kind command with regex progress: the pattern or a preset; "" = the default
    progress_file: str = ""  # kind command: relative to the trial folder; "" = stdout.log or progress.jsonl
    # kind command: the samples one progress point stands for, a number or a template ("{num_envs}": a counter of
    # vector steps); "" = the trainer's own count
    samples_per_point: str = ""
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

    policy: Choice[PreflightPolicy] = PreflightPolicy.WAIT  # wait (poll; refuse after timeout_s), refuse, or ignore
    mem_slack_mb: float = 512.0  # used memory may sit this far above the GPU's baseline
    timeout_s: float = 600.0  # policy wait: refuse when still busy after this long
    poll_s: float = 2.0  # policy wait: seconds between NVML readings


CARDS_GB = (8.0, 12.0, 16.0, 24.0, 40.0, 48.0, 80.0)  # `cards`: laptop, 3060/4070, 4080/V100, 4090/A10, A100, L40, H100


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
    objective: Choice[Objective] = Objective.MIN_AVG_UTIL  # min_avg_util (the first figure column) or samples_per_s
    # the walk's settings (but reuse): each default is ladder.core.walk.tuning.Tuning's, which says more
    # model: seeds later profiles, jumps on a memory fit; walk: one rung at a time
    strategy: Choice[Strategy] = Tuning.strategy
    # the memory fit jumps only to rungs leaving this fraction of the card free
    mem_headroom_frac: float = Tuning.mem_headroom_frac
    # ... and skips a rung only when it predicts it over the card by this much
    mem_margin_frac: float = Tuning.mem_margin_frac
    reuse: bool = True  # trials of earlier sweeps with the same configuration on the same hardware are not rerun
    descent_gain_max: float | None = Tuning.descent_gain_max  # samples/s: fewer envs beat more by at most this factor
    descent_short: bool = Tuning.descent_short  # samples/s: descent is a short probe unless fewer envs ran as fast
    descent_idle_util: float | None = Tuning.descent_idle_util  # samples/s: no descent below a best this idle (util %)
    # the step noise of this case's windows in earlier sweeps on this host (same trainer, hardware and code), finished
    # within this many hours, fills the case's pool where this sweep's own windows are still few: a first window's
    # interval need not rest on its own 2-4 steps; null or 0 = this sweep's windows only
    noise_carry_h: float | None = 2.0
    # after the walk: the pick as one job over its N devices against N one-device jobs side by side (phase
    # placement): measure, off, or auto (where the pick is throughput-bound, on GPUs)
    placement: Choice[PlacementMode] = PlacementMode.AUTO
    # a sweep on another card starts each profile at the rung the memory model of the case's earlier trials predicts
    # for it, then the rung above (it orders launches, never picks); false: a cold walk, from the top
    history: bool = True
    cards: list[float] = field(default_factory=lambda: list(CARDS_GB))  # GB: the cards cards.tsv answers for
    device: Choice[Device] = Device.AUTO  # auto (cuda when a GPU is visible, else cpu), cpu or cuda
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
    settings_change: Choice[SettingsChange] = SettingsChange.REFUSE


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
    elif isinstance(value, ListConfig):  # `cards=[8,12,16]`: as it is typed
        text = "[" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    else:
        text = str(value)
    return f"{key.rsplit('.', 1)[-1]}={text}".ljust(HELP_COLUMN - 1) + " "
