"""The environment, the nets and the buffers: what grows with ``num_envs`` and what the update reads."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ladder.workloads.proxy.agent import AgentSpec, OptimSpec

DYN_DIM_MAX = 256  # the "physics" integrates this slice of each env's state; the rest is carried along
SUBSTEPS = 8  # physics substeps per env step (tuned: ~0.2-1 s per iteration at 64 envs, 2 ranks, 2 cores)
EPISODE_STEPS = 300  # env steps before an env resets


@dataclass(frozen=True)
class Dims:
    """Tensor sizes that come from the command line, not the agent YAML."""

    num_envs: int
    obs: int
    act: int
    disc_obs: int
    sim_state: int


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


class Optimizer:
    """MimicKit's SGD or Adam: the update `torch.optim.SGD` (no momentum) or `torch.optim.Adam` makes on a CPU,
    tensor by tensor, with the same state (Adam's two moments, made at its first step) and the same temporaries
    (on a GPU torch.optim batches the tensors, `foreach`, with larger transients; the proxy keeps this form there).
    Not torch.optim itself: an optimizer's first param group imports torch._dynamo (and sympy), 2 s of CPU at the
    start of every cold rank and 40% of the warm starter's (`ladder.runner.warm`), none of it the trainer's work."""

    BETAS = (0.9, 0.999)  # torch.optim.Adam's defaults, which MimicKit keeps
    EPS = 1e-8

    def __init__(self, spec: OptimSpec, params: Iterator[nn.Parameter]) -> None:
        self.spec, self.params = spec, list(params)
        self.moments: list[tuple[Tensor, Tensor]] = []  # Adam's, per parameter, from its first step
        self.steps = 0

    def zero_grad(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        if self.spec.kind == "Adam" and not self.moments:
            self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            grad = p.grad if self.spec.weight_decay == 0 else p.grad.add(p, alpha=self.spec.weight_decay)
            if self.spec.kind != "Adam":
                p.add_(grad, alpha=-self.spec.lr)
                continue
            (b1, b2), (avg, avg_sq) = self.BETAS, self.moments[i]
            avg.lerp_(grad, 1 - b1)
            avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denom = (avg_sq.sqrt() / math.sqrt(1 - b2**self.steps)).add_(self.EPS)
            p.addcdiv_(avg, denom, value=-self.spec.lr / (1 - b1**self.steps))


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
