"""The built-in workload: the proxy trainer (`ladder.workloads.proxy`) under torchrun. Pure planning.

How the ranks start (`ranks`): torchrun for several ranks; a single rank, by default (`workload.single_rank=direct`),
is started directly with the environment torchrun's agent would give it (`rank_env`: torch 2.13's
`LocalElasticAgent._start_workers` and its log specs), which saves the agent's start-up (~3 s a launch, measured).
The rank hosts the rendezvous store itself (`TORCHELASTIC_USE_AGENT_STORE=False`), and its error file lands where
torchrun's `--log-dir` would put it (`ranks/<run id>_direct/attempt_0/0/error.json`), so the evidence is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from ladder.core import ballast, paths
from ladder.core.errors import ConfigError
from ladder.core.spec import EmulateBy, Launcher, ProgressKind, TrialSpec
from ladder.settings.config import Case, Profile, WorkloadConf
from ladder.workloads.profiles import apply_profile

# The proxy's --method follows the algorithm the agent config runs (its agent_name), so a case whose method
# names its task rather than its algorithm (vault: a PPO agent on a static-objects env) gets the right nets.
SINGLE_RANK = ("direct", "torchrun")  # workload.single_rank: how a one-rank trial starts
RUN_ID = "none"  # torchrun's --rdzv-id default (static rendezvous), in TORCHELASTIC_RUN_ID and the log folder's name
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

    def devices(self) -> tuple[str, ...]:
        """One device name per rank: cuda:<i>, or cpu."""
        if self.device != "cuda":
            return ("cpu",) * self.nproc
        return tuple(f"cuda:{i}" for i in (self.gpus or range(self.nproc)))


def plan_proxy(
    case: Case,
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
    prefix, rank_vars, launcher = ranks(place, trial_dir)
    argv = prefix + ("-m", "ladder.workloads.proxy") + trainer
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
    )


def proxy_method(case: Case) -> str:
    """The proxy's --method: the agent's algorithm where the agent config names one, else the case's method."""
    return AGENT_METHODS.get(str(case.agent.get("agent_name", "")).upper(), case.method)


def ranks(place: Placement, trial_dir: str) -> tuple[tuple[str, ...], dict[str, str], Launcher]:
    """How a torchrun workload's ranks start: the argv up to the program (torchrun's, or the interpreter alone),
    the variables ladder sets for it (torchrun's contract when ladder starts the one rank itself), the launcher."""
    if place.single_rank not in SINGLE_RANK:
        raise ConfigError(
            f"unknown workload.single_rank '{place.single_rank}'", f"use one of: {', '.join(SINGLE_RANK)}"
        )
    if place.nproc == 1 and place.single_rank == "direct":
        return (place.python,), rank_env(place, trial_dir), Launcher.DIRECT
    return torchrun(place, trial_dir), {}, Launcher.TORCHRUN


def rank_env(place: Placement, trial_dir: str) -> dict[str, str]:
    """What torchrun (static rendezvous, one node, `--log-dir {trial_dir}/ranks`) sets for local rank 0 of one. The
    agent's store does not exist, so rank 0 hosts it (`TORCHELASTIC_USE_AGENT_STORE=False`). NCCL's async error
    handling is on as torchrun turns it on (a `nccl_env` value, set after these, wins)."""
    return {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "GROUP_RANK": "0",
        "ROLE_RANK": "0",
        "ROLE_NAME": "default",
        "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(place.port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": RUN_ID,
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",  # the agent's own, inherited by its workers
        "TORCHELASTIC_ERROR_FILE": f"{trial_dir}/ranks/{RUN_ID}_direct/attempt_0/0/error.json",
    }


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
    case: Case, num_envs: int, workload: WorkloadConf, place: Placement, trial_dir: str, max_seconds: float
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
