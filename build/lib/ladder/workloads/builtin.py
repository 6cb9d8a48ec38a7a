"""The built-in workload: the proxy trainer (`ladder.workloads.proxy`) under torchrun. Pure planning."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from ladder.config import Case, Profile, WorkloadConf
from ladder.workloads.profiles import apply_profile
from ladder.workloads.spec import Launcher, ProgressKind, TrialSpec

# The proxy's --method follows the algorithm the agent config runs (its agent_name), so a case whose method
# names its task rather than its algorithm (vault: a PPO agent on a static-objects env) gets the right nets.
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
    argv = torchrun(place, trial_dir) + ("-m", "ladder.workloads.proxy") + trainer
    env = {**extra_env, "PYTHONUNBUFFERED": "1"}
    if place.device == "cpu":
        env["OMP_NUM_THREADS"] = "1"  # one core per rank, as torchrun would pick for several ranks
    return TrialSpec(
        argv=argv,
        env=env,
        files={"agent.yaml": yaml.safe_dump(agent, sort_keys=False)},
        nproc=place.nproc,
        info=_info(workload, place),
        launcher=Launcher.TORCHRUN,
        progress_kind=ProgressKind.JSONL,
    )


def proxy_method(case: Case) -> str:
    """The proxy's --method: the agent's algorithm where the agent config names one, else the case's method."""
    return AGENT_METHODS.get(str(case.agent.get("agent_name", "")).upper(), case.method)


def torchrun(place: Placement, trial_dir: str) -> tuple[str, ...]:
    """torchrun's own arguments, up to the program it starts (per-rank logs and error files under ranks/)."""
    return (
        place.python, "-m", "torch.distributed.run",
        "--nnodes", "1",
        "--nproc-per-node", str(place.nproc),
        "--master-addr", "127.0.0.1",
        "--master-port", str(place.port),
        "--log-dir", f"{trial_dir}/ranks",
        "--redirects", "3",
        "--tee", "3",
    )  # fmt: skip


def _proxy_args(
    case: Case, num_envs: int, workload: WorkloadConf, place: Placement, trial_dir: str, max_seconds: float
) -> tuple[str, ...]:
    shape = case.proxy
    cap_mb = round(workload.emulate_gpu_mem_gb * 1024) if workload.emulate_gpu_mem_gb else 0
    return (
        "--agent-config", f"{trial_dir}/agent.yaml",
        "--method", proxy_method(case),
        "--num-envs", str(num_envs),
        "--obs-dim", str(shape.obs_dim),
        "--act-dim", str(shape.act_dim),
        "--disc-obs-dim", str(shape.disc_obs_dim),
        "--sim-state-dim", str(shape.sim_state_dim),
        "--width-factor", str(workload.width_factor),
        "--max-iters", "0",
        "--max-seconds", str(round(max_seconds)),
        "--progress", f"{trial_dir}/progress.jsonl",
        "--device", place.device,
        "--emulate-mem-mb", str(cap_mb),
        "--collective-timeout-s", str(round(workload.collective_timeout_s)),
    )  # fmt: skip


def _info(workload: WorkloadConf, place: Placement) -> dict[str, str]:
    return {
        "workload": "proxy",
        "device": place.device,
        "nproc": str(place.nproc),
        "port": str(place.port),
        "width_factor": str(workload.width_factor),
        "emulate_gpu_mem_gb": str(workload.emulate_gpu_mem_gb or ""),
    }
