"""The built-in workload: the proxy trainer (`ladder.workloads.proxy`) and how a torchrun workload's ranks start.
Pure planning.

How the ranks start (`ranks`): a single rank, by default (`workload.single_rank=direct`), is started directly with
the environment torchrun's agent would give it (`ladder.core.torchenv`), which saves the agent's start-up (seconds a
launch: `scripts/bench_launch.py`). Several ranks of the proxy, by default (`workload.proxy_ranks=direct`), are
started by ladder's own rank launcher (`ladder.runner.ranks`) with the same variables, each rank's logs and error
file where torchrun's `--log-dir` puts them; several ranks of any other trainer run under torchrun. Without the
agent each rank 0 hosts the rendezvous store itself (`TORCHELASTIC_USE_AGENT_STORE=False`; the proxy's other ranks
wait for it to listen, `proxy.device.await_store`), and the evidence is read the same way; each rank runs on its
own share of the trial's CPUs (`workload.pin_ranks`). The proxy's ranks, by default (`workload.proxy_start=warm`),
are forked from an interpreter that has torch imported already (`ladder.runner.warm`): what a cold rank spends in
imports is paid once a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from ladder.core import ballast, paths, torchenv
from ladder.core.errors import ConfigError
from ladder.core.spec import EmulateBy, Launcher, ProgressKind, TrialSpec
from ladder.settings.config import CaseConf, Profile, WorkloadConf
from ladder.workloads.profiles import apply_profile

# The proxy's --method follows the algorithm the agent config runs (its agent_name), so a case whose method
# names its task rather than its algorithm (vault: a PPO agent on a static-objects env) gets the right nets.
START_WAYS = ("direct", "torchrun")  # workload.single_rank (one rank) and workload.proxy_ranks (the proxy's several)
PROXY_STARTS = ("warm", "cold")  # workload.proxy_start: the proxy's ranks forked from ladder.runner.warm, or not
PROXY = "ladder.workloads.proxy"
WARM = "ladder.runner.warm"
AGENT_METHODS = {"AMP": "amp", "ADD": "add", "ASE": "ase", "PPO": "ppo", "AWR": "awr", "LCP": "lcp", "SMP": "smp"}


@dataclass(frozen=True)
class Placement:
    """Where a trial runs: decided by the caller from the machine it found."""

    device: str  # cpu or cuda
    nproc: int  # ranks, one per GPU (or CPU slot)
    port: int  # the rendezvous port
    python: str  # the interpreter that runs torchrun and the trainer
    # CUDA indices as the trial's processes see them (after any CUDA_VISIBLE_DEVICES); () = 0 .. nproc-1
    gpus: tuple[int, ...] = ()
    single_rank: str = "direct"  # one rank: direct (started with torchrun's variables, no agent) or torchrun
    proxy_ranks: str = "direct"  # several ranks of the proxy: direct (ladder.runner.ranks, no agent) or torchrun
    proxy_start: str = "warm"  # the proxy's ranks: warm (forked from ladder.runner.warm's starter) or cold
    pin_ranks: bool = True  # the proxy's direct ranks each on their own share of the CPUs (`ladder.runner.ranks`)

    def devices(self) -> tuple[str, ...]:
        """One device name per rank: cuda:<i>, or cpu."""
        if self.device != "cuda":
            return ("cpu",) * self.nproc
        return tuple(f"cuda:{i}" for i in (self.gpus or range(self.nproc)))


def plan_proxy(
    case: CaseConf,
    profile: Profile,
    num_envs: int,
    workload: WorkloadConf,
    place: Placement,
    trial_dir: str,
    max_seconds: float,
    extra_env: dict[str, str],
) -> TrialSpec:
    agent = apply_profile(case.agent, profile.agent_patch)
    trainer = _proxy_args(case, num_envs, workload, place, trial_dir, max_seconds)
    prefix, rank_vars, launcher = ranks(place, trial_dir, own=True)
    if place.proxy_start not in PROXY_STARTS:
        raise ConfigError(
            f"unknown workload.proxy_start '{place.proxy_start}'", f"use one of: {', '.join(PROXY_STARTS)}"
        )
    warm = place.proxy_start == "warm"
    argv = prefix + (("-m", WARM, PROXY) if warm else ("-m", PROXY)) + trainer
    env = {**rank_vars, **extra_env, "PYTHONUNBUFFERED": "1"}
    if place.device == "cpu":
        env["OMP_NUM_THREADS"] = "1"  # one core per rank, as torchrun would pick for several ranks
    return TrialSpec(
        argv=argv,
        env=env,
        files={paths.AGENT: yaml.safe_dump(agent, sort_keys=False)},
        nproc=place.nproc,
        info={**_info(workload, place), "launcher": str(launcher)},
        launcher=launcher,
        progress_kind=ProgressKind.JSONL,
        progress_per_iteration=True,  # the proxy writes a line once an iteration, after its update
        warm_python=place.python if warm else "",
    )


def proxy_method(case: CaseConf) -> str:
    """The proxy's --method: the agent's algorithm where the agent config names one, else the case's method."""
    return AGENT_METHODS.get(str(case.agent.get("agent_name", "")).upper(), case.method)


def ranks(place: Placement, trial_dir: str, own: bool = False) -> tuple[tuple[str, ...], dict[str, str], Launcher]:
    """How a torchrun workload's ranks start: the argv up to the program (torchrun's, ladder's rank launcher's, or
    the interpreter alone), the variables ladder sets for it (torchrun's contract when ladder starts the one rank
    itself), the launcher. `own`: the program is ladder's proxy, whose several ranks ladder may start itself."""
    for name, value in (("single_rank", place.single_rank), ("proxy_ranks", place.proxy_ranks)):
        if value not in START_WAYS:
            raise ConfigError(f"unknown workload.{name} '{value}'", f"use one of: {', '.join(START_WAYS)}")
    if place.nproc == 1 and place.single_rank == "direct":
        return (place.python,), rank_env(place, trial_dir), Launcher.DIRECT
    if place.nproc > 1 and own and place.proxy_ranks == "direct":
        return rank_launcher(place, trial_dir), {}, Launcher.DIRECT
    return torchrun(place, trial_dir), {}, Launcher.TORCHRUN


def rank_env(place: Placement, trial_dir: str) -> dict[str, str]:
    """What torchrun (static rendezvous, one node, `--log-dir {trial_dir}/ranks`) sets for local rank 0 of one."""
    return torchenv.rank_env(0, 1, place.port, f"{trial_dir}/{paths.RANKS}")


def rank_launcher(place: Placement, trial_dir: str) -> tuple[str, ...]:
    """ladder's rank launcher, up to the program it starts once per rank (the interpreter, as torchrun would)."""
    return (
        place.python,
        "-m",
        "ladder.runner.ranks",
        "--nproc",
        str(place.nproc),
        "--port",
        str(place.port),
        "--log-dir",
        f"{trial_dir}/{paths.RANKS}",
        *(("--pin",) if place.pin_ranks else ()),
        "--",
        place.python,
    )


def torchrun(place: Placement, trial_dir: str) -> tuple[str, ...]:
    """torchrun's own arguments, up to the program it starts (per-rank logs and error files under ranks/)."""
    return (
        place.python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(place.nproc),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(place.port),
        "--log-dir",
        f"{trial_dir}/ranks",
        "--redirects",
        "3",
        "--tee",
        "3",
    )


def _proxy_args(
    case: CaseConf, num_envs: int, workload: WorkloadConf, place: Placement, trial_dir: str, max_seconds: float
) -> tuple[str, ...]:
    shape = case.proxy
    gb = workload.emulate_gpu_mem_gb
    own = ballast.mode(gb, True, place.device, EmulateBy(workload.emulate_by)) is ballast.Mode.OWN  # or a ballast
    cap_mb = round(gb * 1024) if own and gb else 0
    return (
        "--agent-config",
        f"{trial_dir}/agent.yaml",
        "--method",
        proxy_method(case),
        "--num-envs",
        str(num_envs),
        "--obs-dim",
        str(shape.obs_dim),
        "--act-dim",
        str(shape.act_dim),
        "--disc-obs-dim",
        str(shape.disc_obs_dim),
        "--sim-state-dim",
        str(shape.sim_state_dim),
        "--width-factor",
        str(workload.width_factor),
        "--max-iters",
        "0",
        "--max-seconds",
        str(round(max_seconds)),
        "--progress",
        f"{trial_dir}/progress.jsonl",
        "--device",
        place.device,
        "--emulate-mem-mb",
        str(cap_mb),
        "--collective-timeout-s",
        str(round(workload.collective_timeout_s)),
    )


def _info(workload: WorkloadConf, place: Placement) -> dict[str, str]:
    return {
        "workload": "proxy",
        "device": place.device,
        "nproc": str(place.nproc),
        "port": str(place.port),
        "width_factor": str(workload.width_factor),
        "emulate_gpu_mem_gb": str(workload.emulate_gpu_mem_gb or ""),
    }
