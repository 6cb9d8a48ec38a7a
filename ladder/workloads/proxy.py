"""The built-in proxy workload: a stand-in for a MimicKit PPO-style trainer, run under torchrun or alone.

It mirrors what shapes a ``num_envs`` sweep in MimicKit (``learning/ppo_agent.py``, ``amp_agent.py``,
``ase_agent.py``): per-env simulator state (memory grows with ``num_envs``), rollouts of
``steps_per_iter × num_envs`` into an experience buffer, TD(lambda) returns, minibatches of
``batch_size × num_envs``, a PPO clipped actor loss and a critic regression, and for amp/add/vault/ase a
discriminator with an up-front replay buffer (plus an encoder for ase). Nets and optimizers come from the
agent YAML; gradients are averaged across ranks. There is no physics and no motion data: the tensors are
real work and real memory, not learning. ``--emulate-mem-mb`` caps the rank's memory so that allocations
genuinely fail, as on a smaller device. Rank 0 appends JSON lines to ``--progress``.

Fault injection, for ladder's own tests and benchmark only (``--fault KIND --fault-rank R --fault-iter I``): at the
start of iteration I, rank R fails for real while the other ranks go on and block in their next collective:
``oom`` allocates ever larger tensors until the allocator fails under ``--emulate-mem-mb``, ``hang`` blocks forever
outside any collective, ``keyerror`` looks up a key the agent config lacks, ``exit`` ends the rank with code 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
import yaml
from torch import Tensor, nn
from torch.distributed.elastic.multiprocessing.errors import record

from ladder.errors import ConfigError

log = logging.getLogger(__name__)

NET_WIDTHS: dict[str, tuple[int, ...]] = {
    "fc_2layers_1024units": (1024, 1024),
    "fc_3layers_1024units": (1024, 1024, 512),
}
METHODS = ("amp", "add", "ase", "vault", "deepmimic", "ppo", "awr", "lcp", "smp")
DISC_METHODS = frozenset({"amp", "add", "ase", "vault"})
MIN_WIDTH = 8  # units per layer, whatever the width factor
DYN_DIM_MAX = 256  # the "physics" integrates this slice of each env's state; the rest is carried along
SUBSTEPS = 8  # physics substeps per env step (tuned: ~0.2-1 s per iteration at 64 envs, 2 ranks, 2 cores)
EPISODE_STEPS = 300  # env steps before an env resets
DEMO_ROWS = 4096  # rows of the fixed random "motion data" the discriminator learns to call real
FAULTS = ("oom", "hang", "keyerror", "exit")  # --fault kinds (tests and benchmark only)
FAULT_MISSING_KEY = "ladder_fault_injection_missing_key"  # what --fault keyerror looks up in the agent config
FAULT_FIRST_ALLOC_FLOATS = 1 << 20  # --fault oom starts at 4 MiB and doubles until the allocator fails


@dataclass(frozen=True)
class OptimSpec:
    """One ``*_optimizer`` block of the agent YAML."""

    kind: str  # "SGD" or "Adam"
    lr: float
    weight_decay: float


@dataclass(frozen=True)
class AgentSpec:
    """The keys of a MimicKit agent YAML that shape work and memory; roles are actor, critic, disc, enc."""

    nets: dict[str, tuple[int, ...]]  # role -> hidden widths, already scaled by --width-factor
    optims: dict[str, OptimSpec]  # role -> optimizer
    epochs: dict[str, int]  # role -> passes over the rollout per iteration
    batch_sizes: dict[str, int]  # role -> minibatch size in multiples of num_envs
    steps_per_iter: int
    discount: float
    td_lambda: float
    ppo_clip_ratio: float
    adv_clip: float  # normalized advantages are clipped to ±this
    action_std: float  # fixed Gaussian policy std
    disc_buffer_size: int  # replay rows (0 without a discriminator)
    disc_grad_penalty: float
    latent_dim: int  # ase skill latent (0 otherwise)


@dataclass(frozen=True)
class Dims:
    """Tensor sizes that come from the command line, not the agent YAML."""

    num_envs: int
    obs: int
    act: int
    disc_obs: int
    sim_state: int


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def _above_zero(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not above 0")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ladder.workloads.proxy", description=__doc__.splitlines()[0])
    p.add_argument("--agent-config", type=Path, required=True, help="MimicKit agent YAML")
    p.add_argument("--method", choices=METHODS, default="ppo")
    p.add_argument("--num-envs", type=_at_least_one, default=64)
    p.add_argument("--obs-dim", type=_at_least_one, default=180)
    p.add_argument("--act-dim", type=_at_least_one, default=22)
    p.add_argument("--disc-obs-dim", type=_at_least_one, default=450)
    p.add_argument("--sim-state-dim", type=_at_least_one, default=4096, help="floats of simulator state per env")
    p.add_argument("--width-factor", type=_above_zero, default=1.0, help="scales every hidden layer")
    p.add_argument("--max-iters", type=int, default=0, help="0 = until killed")
    p.add_argument("--max-seconds", type=float, default=0.0, help="training-loop seconds; 0 = no limit")
    p.add_argument("--progress", type=Path, default=None, help="JSON lines, appended by rank 0")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--emulate-mem-mb", type=int, default=0, help="cap each rank's memory (MiB); 0 = off")
    p.add_argument("--collective-timeout-s", type=float, default=0.0, help="process-group timeout; 0 = torch's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fault", choices=FAULTS, default=None, help="TESTING ONLY: make one rank fail (module doc)")
    p.add_argument("--fault-rank", type=int, default=0, help="the rank that fails (--fault)")
    p.add_argument("--fault-iter", type=_at_least_one, default=1, help="the iteration at whose start it fails")
    args = p.parse_args(argv)
    if args.fault == "oom" and args.emulate_mem_mb <= 0:
        p.error("--fault oom needs --emulate-mem-mb: without a cap it would exhaust the whole machine")
    return args


# ---- agent config -------------------------------------------------------------------------------


def roles_for(method: str) -> tuple[str, ...]:
    if method == "ase":
        return ("actor", "critic", "disc", "enc")
    return ("actor", "critic", "disc") if method in DISC_METHODS else ("actor", "critic")


def scaled_widths(net_name: str, factor: float) -> tuple[int, ...]:
    if net_name not in NET_WIDTHS:
        raise ConfigError(f"unknown net {net_name!r}", f"use one of the known nets: {', '.join(NET_WIDTHS)}")
    return tuple(max(MIN_WIDTH, round(w * factor)) for w in NET_WIDTHS[net_name])


def _key(cfg: dict[str, Any], key: str, where: Path) -> Any:
    if key not in cfg:
        raise ConfigError(f"{where} has no {key!r}", "use a MimicKit agent YAML that matches --method")
    return cfg[key]


def _positive(cfg: dict[str, Any], key: str, where: Path) -> int:
    value = int(_key(cfg, key, where))
    if value < 1:
        raise ConfigError(f"{where}: {key} is {value}", f"set {key} to 1 or more")
    return value


def _optim(cfg: dict[str, Any], role: str, where: Path) -> OptimSpec:
    block = _key(cfg, f"{role}_optimizer", where)
    kind = str(block.get("type", "SGD"))
    if kind not in ("SGD", "Adam"):
        raise ConfigError(f"{where}: {role}_optimizer.type {kind!r} is not supported", "use SGD or Adam")
    return OptimSpec(kind, float(block["learning_rate"]), float(block.get("weight_decay", 0.0)))


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        cfg = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read agent config {path}: {e}", "pass a MimicKit agent YAML") from e
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path} is not a YAML mapping", "pass a MimicKit agent YAML")
    return cfg


def load_agent(path: Path, method: str, width_factor: float) -> AgentSpec:
    cfg = read_yaml(path)
    model, roles = _key(cfg, "model", path), roles_for(method)
    return AgentSpec(
        nets={r: scaled_widths(str(_key(model, f"{r}_net", path)), width_factor) for r in roles},
        optims={r: _optim(cfg, r, path) for r in roles},
        epochs={r: _positive(cfg, f"{r}_epochs", path) for r in roles},
        batch_sizes={r: _positive(cfg, f"{r}_batch_size", path) for r in roles},
        steps_per_iter=_positive(cfg, "steps_per_iter", path),
        discount=float(_key(cfg, "discount", path)),
        td_lambda=float(_key(cfg, "td_lambda", path)),
        ppo_clip_ratio=float(cfg.get("ppo_clip_ratio", 0.2)),  # awr configs have none
        adv_clip=float(cfg.get("norm_adv_clip", 4.0)),
        action_std=float(model.get("action_std", 0.05)),
        disc_buffer_size=_positive(cfg, "disc_buffer_size", path) if "disc" in roles else 0,
        disc_grad_penalty=float(cfg.get("disc_grad_penalty", 0.0)),
        latent_dim=int(_key(model, "latent_dim", path)) if "enc" in roles else 0,
    )


# ---- ranks, devices, memory ---------------------------------------------------------------------


@dataclass(frozen=True)
class Comm:
    """This rank's place in the job; collectives are no-ops for a single process."""

    rank: int
    world_size: int
    device: torch.device

    def average_grads(self, params: Sequence[nn.Parameter]) -> None:
        if self.world_size == 1:
            return
        grads = [p.grad for p in params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world_size
        for g, chunk in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            g.copy_(chunk.view_as(g))

    def gather(self, value: float) -> list[float]:
        if self.world_size == 1:
            return [value]
        parts = [torch.zeros(1, device=self.device) for _ in range(self.world_size)]
        dist.all_gather(parts, torch.tensor([value], device=self.device))
        return [float(t.item()) for t in parts]


def init_comm(device_kind: str, timeout_s: float) -> Comm:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}") if device_kind == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if "WORLD_SIZE" in os.environ:  # started by torchrun: MASTER_ADDR/PORT are set
        timeout = timedelta(seconds=timeout_s) if timeout_s > 0 else None
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timeout)
    return Comm(int(os.environ.get("RANK", "0")), world_size, device)


def proc_status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def cap_memory(mb: int, device: torch.device) -> int | None:
    """Emulate a smaller device: allocations past ``mb`` MiB more than now fail in the real allocator.
    Returns this process's size (KiB) at that moment, which `cap_used_mb` counts from; None without a cap."""
    if mb <= 0:
        return None
    base_kib = proc_status_kib("VmData")
    if device.type == "cuda":
        total_mb = torch.cuda.get_device_properties(device).total_memory / 2**20
        torch.cuda.set_per_process_memory_fraction(min(1.0, mb / total_mb), device)
        return base_kib
    soft = proc_status_kib("VmData") * 1024 + mb * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    return base_kib


def preload_lazy_imports() -> None:
    """Import now what torch imports on first use (the optimizers' first param group pulls in torch._dynamo and
    sympy): under the CPU cap a late import can fail on Python's own allocations (`SystemError: error return
    without exception set`, or ENOMEM), which a card's smaller memory never causes. The cap is for tensors."""
    import torch._dynamo  # noqa: F401


def outside_cap(load: Callable[[], object], base_kib: int) -> int:
    """Run `load` (imports) with the CPU cap lifted, then cap again that much higher: what an import keeps is
    Python's, not the card's. Returns the base `cap_used_mb` counts from, moved by as much.

    The trainer builds its env's buffers under the cap first and imports after them (as MimicKit creates its envs
    before its agent): a rung that does not fit fails before the 0.8 s import (2 idle cores), not after it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
    before = proc_status_kib("VmData")
    try:
        load()
    finally:
        grown_kib = max(0, proc_status_kib("VmData") - before)
        again = soft if soft == resource.RLIM_INFINITY else soft + grown_kib * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (again if hard == resource.RLIM_INFINITY else min(again, hard), hard))
    return base_kib + grown_kib


def cap_used_mb(device: torch.device, base_kib: int) -> float:
    """Use of what the emulated cap limits, in MiB: the caching allocator's peak reservation on CUDA; on CPU the
    data segment's growth since the cap was set, as of now (the caller keeps the maximum; transients inside an
    iteration escape it, so it never overstates: a memory model built on it can skip no rung that fits)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_reserved(device) / 2**20
    return (proc_status_kib("VmData") - base_kib) / 1024


def peak_mem_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return proc_status_kib("VmHWM") / 1024


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- environment, nets, buffers -----------------------------------------------------------------


class VecEnv:
    """``num_envs`` parallel envs; each carries ``sim_state`` floats, as a physics engine does per env."""

    def __init__(self, dims: Dims, device: torch.device) -> None:
        self.state = torch.zeros(dims.num_envs, dims.sim_state, device=device)
        d = min(DYN_DIM_MAX, dims.sim_state)
        self.dyn = torch.randn(d, d, device=device) / math.sqrt(d)
        self.act_in = torch.randn(dims.act, d, device=device) / math.sqrt(dims.act)
        self.obs_out = torch.randn(d, dims.obs, device=device) / math.sqrt(d)
        self.disc_out = torch.randn(d, dims.disc_obs, device=device) / math.sqrt(d)
        self.timer = torch.randint(0, EPISODE_STEPS, (dims.num_envs,), device=device)
        self.state[:, :d].normal_(0.0, 0.1)

    @property
    def body(self) -> Tensor:
        return self.state[:, : self.dyn.shape[0]]

    def observe(self) -> Tensor:
        return torch.tanh(self.body @ self.obs_out)

    def disc_observe(self) -> Tensor:
        return self.body @ self.disc_out

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Advance every env one step; returns (reward, done)."""
        body, drive = self.body, actions.clamp(-1.0, 1.0) @ self.act_in
        for _ in range(SUBSTEPS):
            body = torch.tanh(body @ self.dyn + drive)
        reward = torch.exp(-body.square().mean(1))
        self.timer += 1
        done = self.timer >= EPISODE_STEPS
        self.timer.masked_fill_(done, 0)
        body = torch.where(done[:, None], 0.1 * torch.randn_like(body), body)  # reset finished envs
        self.state[:, : body.shape[1]] = body
        self.state[:, body.shape[1] :].mul_(0.99).add_(body.mean(1, keepdim=True), alpha=0.01)
        return reward, done.float()


def mlp(in_dim: int, widths: Sequence[int], out_dim: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for w in widths:
        layers += [nn.Linear(in_dim, w), nn.ReLU()]
        in_dim = w
    return nn.Sequential(*layers, nn.Linear(in_dim, out_dim))


def make_optimizer(spec: OptimSpec, params: Iterator[nn.Parameter]) -> torch.optim.Optimizer:
    if spec.kind == "Adam":
        return torch.optim.Adam(params, lr=spec.lr, weight_decay=spec.weight_decay)
    return torch.optim.SGD(params, lr=spec.lr, weight_decay=spec.weight_decay)


@dataclass
class Rollout:
    """The experience buffer, ``steps_per_iter × num_envs`` of everything (MimicKit's ExperienceBuffer)."""

    obs: Tensor
    actions: Tensor
    logp: Tensor
    rewards: Tensor
    values: Tensor
    dones: Tensor
    returns: Tensor
    advantages: Tensor
    disc_obs: Tensor  # empty without a discriminator
    latents: Tensor  # empty unless ase

    @classmethod
    def allocate(cls, steps: int, dims: Dims, spec: AgentSpec, device: torch.device) -> Rollout:
        def z(*shape: int) -> Tensor:
            return torch.zeros(steps, dims.num_envs, *shape, device=device)

        disc_dim = dims.disc_obs if "disc" in spec.nets else 0
        obs, actions = z(dims.obs + spec.latent_dim), z(dims.act)
        logp, rewards, values, dones, returns, advantages = (z() for _ in range(6))
        return cls(obs, actions, logp, rewards, values, dones, returns, advantages, z(disc_dim), z(spec.latent_dim))


class Replay:
    """The discriminator's replay buffer of past agent observations, allocated in full up front."""

    def __init__(self, rows: int, dim: int, device: torch.device) -> None:
        self.rows = torch.zeros(rows, dim, device=device)
        self.count = 0
        self.head = 0

    def add(self, batch: Tensor) -> None:
        batch = batch[-self.rows.shape[0] :]
        idx = (self.head + torch.arange(batch.shape[0], device=batch.device)) % self.rows.shape[0]
        self.rows[idx] = batch
        self.head = int((self.head + batch.shape[0]) % self.rows.shape[0])
        self.count = min(self.count + batch.shape[0], self.rows.shape[0])

    def sample(self, n: int) -> Tensor:
        return self.rows[torch.randint(0, max(1, self.count), (n,), device=self.rows.device)]


def gaussian_logp(mean: Tensor, actions: Tensor, std: float) -> Tensor:
    return (-0.5 * ((actions - mean) / std).square() - math.log(std * math.sqrt(2 * math.pi))).sum(-1)


def fill_td_lambda(buf: Rollout, last_values: Tensor, discount: float, lam: float) -> None:
    """GAE / TD(lambda): write advantages and returns into the buffer."""
    running = torch.zeros_like(last_values)
    for t in reversed(range(buf.rewards.shape[0])):
        next_values = last_values if t == buf.rewards.shape[0] - 1 else buf.values[t + 1]
        live = 1.0 - buf.dones[t]
        delta = buf.rewards[t] + discount * live * next_values - buf.values[t]
        running = delta + discount * lam * live * running
        buf.advantages[t] = running
    torch.add(buf.advantages, buf.values, out=buf.returns)


def minibatches(total: int, size: int, device: torch.device) -> Iterator[Tensor]:
    size = min(size, total)
    perm = torch.randperm(total, device=device)
    for start in range(0, total - size + 1, size):
        yield perm[start : start + size]


# ---- the trainer --------------------------------------------------------------------------------


class Trainer:
    """Owns env, nets, optimizers and buffers; one ``rollout`` plus one ``update`` is an iteration."""

    def __init__(self, spec: AgentSpec, dims: Dims, comm: Comm, seed: int, cap_base_kib: int | None = None) -> None:
        self.spec, self.dims, self.comm, dev = spec, dims, comm, comm.device
        self.cap_base_kib = cap_base_kib  # the data segment when the emulated cap was set (None: no cap)
        self.cap_used_mb = 0.0  # the most of the cap seen in use, at the end of a rollout or an update
        torch.manual_seed(seed + comm.rank)  # envs differ per rank ...
        self.env = VecEnv(dims, dev)  # biggest per-env allocations first: an over-cap rung fails here
        self.buf = Rollout.allocate(spec.steps_per_iter, dims, spec, dev)
        self.replay = Replay(spec.disc_buffer_size, dims.disc_obs, dev) if "disc" in spec.nets else None
        self.demo = torch.randn(DEMO_ROWS, dims.disc_obs, device=dev)
        self.norm_adv = torch.zeros(self.buf.rewards.numel(), device=dev)  # normalized advantages, per update
        self.latents = F.normalize(torch.randn(dims.num_envs, spec.latent_dim, device=dev), dim=-1)
        if cap_base_kib is not None and dev.type == "cpu":  # CUDA's cap limits the caching allocator alone
            self.cap_base_kib = outside_cap(preload_lazy_imports, cap_base_kib)
        torch.manual_seed(seed)  # ... nets start identical on every rank
        self.nets = nn.ModuleDict({r: self._net(r) for r in spec.nets}).to(dev)
        self.optims = {r: make_optimizer(spec.optims[r], self.nets[r].parameters()) for r in spec.nets}
        for p in self.nets.parameters():
            p.grad = torch.zeros_like(p)  # grads now; Adam's moments appear at the first step of iteration 1

    def _net(self, role: str) -> nn.Sequential:
        policy_in, d = self.dims.obs + self.spec.latent_dim, self.dims
        in_dim = {"actor": policy_in, "critic": policy_in, "disc": d.disc_obs, "enc": d.disc_obs}[role]
        out_dim = {"actor": d.act, "critic": 1, "disc": 1, "enc": self.spec.latent_dim}[role]
        return mlp(in_dim, self.spec.nets[role], out_dim)

    def widths(self) -> dict[str, list[int]]:
        return {r: list(w) for r, w in self.spec.nets.items()}

    @torch.no_grad()
    def rollout(self) -> None:
        for t in range(self.spec.steps_per_iter):
            self._act(t)
        last_values = self.nets["critic"](self._policy_input()).squeeze(-1)
        if self.replay is not None:
            self._add_disc_rewards(self.replay)
        fill_td_lambda(self.buf, last_values, self.spec.discount, self.spec.td_lambda)

    def _policy_input(self) -> Tensor:
        return torch.cat([self.env.observe(), self.latents], dim=-1)

    def _act(self, t: int) -> None:
        buf, obs = self.buf, self._policy_input()
        mean = self.nets["actor"](obs)
        actions = mean + self.spec.action_std * torch.randn_like(mean)
        buf.obs[t], buf.actions[t], buf.latents[t] = obs, actions, self.latents
        buf.logp[t] = gaussian_logp(mean, actions, self.spec.action_std)
        buf.values[t] = self.nets["critic"](obs).squeeze(-1)
        if self.replay is not None:
            buf.disc_obs[t] = self.env.disc_observe()
        buf.rewards[t], buf.dones[t] = self.env.step(actions)
        fresh = F.normalize(torch.randn_like(self.latents), dim=-1)
        self.latents = torch.where(buf.dones[t, :, None] > 0, fresh, self.latents)  # new skill per episode

    def _add_disc_rewards(self, replay: Replay) -> None:
        """AMP's style reward -log(1 - D(s)) over the whole buffer, then the rollout joins the replay."""
        flat = self.buf.disc_obs.flatten(0, 1)
        prob = torch.sigmoid(self.nets["disc"](flat)).view_as(self.buf.rewards)
        self.buf.rewards.add_(-torch.log((1.0 - prob).clamp_min(1e-4)))
        replay.add(flat)

    def update(self) -> None:
        adv = self.buf.advantages.flatten()
        self.norm_adv = ((adv - adv.mean()) / (adv.std() + 1e-5)).clamp(-self.spec.adv_clip, self.spec.adv_clip)
        losses = {
            "actor": self._actor_loss,
            "critic": self._critic_loss,
            "disc": self._disc_loss,
            "enc": self._enc_loss,
        }
        for role in self.spec.nets:
            for _ in range(self.spec.epochs[role]):
                self._epoch(role, losses[role])

    def _epoch(self, role: str, loss_fn: Callable[[Tensor], Tensor]) -> None:
        total = self.buf.rewards.numel()
        size = self.spec.batch_sizes[role] * self.dims.num_envs
        for idx in minibatches(total, size, self.comm.device):
            self.optims[role].zero_grad(set_to_none=False)
            loss_fn(idx).backward()
            self.comm.average_grads(list(self.nets[role].parameters()))
            self.optims[role].step()

    def _actor_loss(self, idx: Tensor) -> Tensor:
        obs, actions = self.buf.obs.flatten(0, 1)[idx], self.buf.actions.flatten(0, 1)[idx]
        mean = self.nets["actor"](obs)
        ratio = torch.exp(gaussian_logp(mean, actions, self.spec.action_std) - self.buf.logp.flatten()[idx])
        adv, clip = self.norm_adv[idx], self.spec.ppo_clip_ratio
        surrogate = torch.minimum(ratio * adv, ratio.clamp(1.0 - clip, 1.0 + clip) * adv)
        return -surrogate.mean() + F.relu(mean.abs() - 1.0).square().sum(-1).mean()

    def _critic_loss(self, idx: Tensor) -> Tensor:
        values = self.nets["critic"](self.buf.obs.flatten(0, 1)[idx]).squeeze(-1)
        return F.mse_loss(values, self.buf.returns.flatten()[idx])

    def _disc_loss(self, idx: Tensor) -> Tensor:
        assert self.replay is not None
        disc, n = self.nets["disc"], idx.shape[0]
        agent = torch.cat([self.buf.disc_obs.flatten(0, 1)[idx], self.replay.sample(n)])
        demo = self.demo[torch.randint(0, DEMO_ROWS, (n,), device=idx.device)].requires_grad_(True)
        demo_logits, agent_logits = disc(demo), disc(agent)
        loss = F.binary_cross_entropy_with_logits(demo_logits, torch.ones_like(demo_logits))
        loss = loss + F.binary_cross_entropy_with_logits(agent_logits, torch.zeros_like(agent_logits))
        (grad,) = torch.autograd.grad(demo_logits.sum(), demo, create_graph=True)
        return loss + self.spec.disc_grad_penalty * grad.square().sum(-1).mean()

    def _enc_loss(self, idx: Tensor) -> Tensor:
        encoded = F.normalize(self.nets["enc"](self.buf.disc_obs.flatten(0, 1)[idx]), dim=-1)
        return -(encoded * self.buf.latents.flatten(0, 1)[idx]).sum(-1).mean()


# ---- progress and the loop ----------------------------------------------------------------------


class Progress:
    """Rank 0's JSON-lines heartbeat; other ranks write nothing."""

    def __init__(self, path: Path | None, enabled: bool) -> None:
        self._file: IO[str] | None = path.open("a") if path is not None and enabled else None

    def write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def start_record(trainer: Trainer, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "event": "start", "t": time.time(), "world_size": trainer.comm.world_size,
        "device": str(trainer.comm.device), "nets": trainer.widths(), "num_envs": args.num_envs,
        "method": args.method, "params": sum(p.numel() for p in trainer.nets.parameters()),
        "emulate_mem_mb": args.emulate_mem_mb, "cap_mb": args.emulate_mem_mb or None, "width_factor": args.width_factor,
    }  # fmt: skip


def iteration(trainer: Trainer, it: int, loop_start: float) -> dict[str, Any]:
    """Run one iteration and return its progress record (every rank joins the peak-memory gather)."""
    dev, started = trainer.comm.device, time.monotonic()
    trainer.rollout()
    sync(dev)
    rolled, used = time.monotonic(), _cap_used(trainer)
    trainer.update()
    sync(dev)
    ended, world, n = time.monotonic(), trainer.comm.world_size, trainer.dims.num_envs
    base, trainer.cap_used_mb = trainer.cap_base_kib, max(trainer.cap_used_mb, used, _cap_used(trainer))
    return {
        "t": time.time(), "iter": it, "samples": n * trainer.spec.steps_per_iter * world * it,
        "wall_s": ended - loop_start, "step_time_s": ended - started, "rollout_time_s": rolled - started,
        "update_time_s": ended - rolled, "peak_mem_mb": trainer.comm.gather(peak_mem_mb(dev)),
        "cap_used_mb": None if base is None else trainer.comm.gather(trainer.cap_used_mb),
        "num_envs": n, "world_size": world,
    }  # fmt: skip


def _cap_used(trainer: Trainer) -> float:
    base = trainer.cap_base_kib
    return 0.0 if base is None else cap_used_mb(trainer.comm.device, base)


def should_stop(it: int, wall_s: float, args: argparse.Namespace, comm: Comm) -> bool:
    """Stop when any rank hits a limit, so no rank is left alone in a collective."""
    done = (args.max_iters > 0 and it >= args.max_iters) or (0 < args.max_seconds <= wall_s)
    return max(comm.gather(float(done))) > 0


# ---- fault injection (ladder's tests and benchmark only) ----------------------------------------


def check_fault(args: argparse.Namespace, world_size: int) -> None:
    """A fault aimed at a rank that does not exist would never fire: refuse it, as a bad command line."""
    if args.fault is not None and not 0 <= args.fault_rank < world_size:
        sys.stderr.write(f"ladder.workloads.proxy: --fault-rank {args.fault_rank} is not a rank of {world_size}\n")
        raise SystemExit(2)


def maybe_fault(args: argparse.Namespace, rank: int, it: int, device: torch.device) -> None:
    if args.fault is None or (rank, it) != (args.fault_rank, args.fault_iter):
        return
    log.warning("injecting fault %s at iteration %d on rank %d (t=%.3f)", args.fault, it, rank, time.time())
    FAULT_ACTIONS[args.fault](args, device)


def exhaust_memory(args: argparse.Namespace, device: torch.device) -> None:
    """Hold ever larger, filled tensors until the real allocator fails under the emulated cap (never returns)."""
    held, floats = [], FAULT_FIRST_ALLOC_FLOATS
    while True:
        held.append(torch.ones(floats, device=device))
        floats *= 2


def hang(args: argparse.Namespace, device: torch.device) -> None:
    """Stop taking part in collectives and block forever; the other ranks wait in their next all-reduce."""
    threading.Event().wait()


def missing_key(args: argparse.Namespace, device: torch.device) -> None:
    """A real KeyError from the agent config dict, as a trainer reading a key its config lacks raises."""
    log.info("agent config value: %s", read_yaml(args.agent_config)[FAULT_MISSING_KEY])


def exit_at_once(args: argparse.Namespace, device: torch.device) -> None:
    """The rank vanishes with code 1 and no traceback, as a crash in native code does."""
    os._exit(1)


FAULT_ACTIONS: dict[str, Callable[[argparse.Namespace, torch.device], None]] = {
    "oom": exhaust_memory, "hang": hang, "keyerror": missing_key, "exit": exit_at_once,
}  # fmt: skip


def train(trainer: Trainer, args: argparse.Namespace, progress: Progress) -> None:
    loop_start, it = time.monotonic(), 0
    while True:
        it += 1
        maybe_fault(args, trainer.comm.rank, it, trainer.comm.device)
        record_ = iteration(trainer, it, loop_start)
        progress.write(record_)
        if should_stop(it, record_["wall_s"], args, trainer.comm):
            return


def load_agent_or_exit(args: argparse.Namespace) -> AgentSpec:
    """A broken agent config exits 2, as a bad command line does: no rung would ever run it."""
    try:
        return load_agent(args.agent_config, args.method, args.width_factor)
    except ConfigError as e:
        sys.stderr.write(f"ladder.workloads.proxy: config error: {e}\n")
        raise SystemExit(2) from e


@record
def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(argv)
    spec = load_agent_or_exit(args)
    dims = Dims(args.num_envs, args.obs_dim, args.act_dim, args.disc_obs_dim, args.sim_state_dim)
    comm = init_comm(args.device, args.collective_timeout_s)
    check_fault(args, comm.world_size)
    trainer = Trainer(spec, dims, comm, args.seed, cap_base_kib=cap_memory(args.emulate_mem_mb, comm.device))
    progress, start = Progress(args.progress, comm.rank == 0), start_record(trainer, args)
    progress.write(start)
    if comm.rank == 0:
        log.info("proxy started: %s", json.dumps(start))
    try:
        train(trainer, args, progress)
    finally:
        progress.close()
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
