"""The trainer: env, nets, optimizers and buffers; one ``rollout`` plus one ``update`` is an iteration."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ladder.workloads.proxy.agent import AgentSpec
from ladder.workloads.proxy.buffers import (
    Dims,
    Optimizer,
    Replay,
    Rollout,
    VecEnv,
    fill_td_lambda,
    gaussian_logp,
    minibatches,
    mlp,
)
from ladder.workloads.proxy.device import Comm, cap_used_mb

DEMO_ROWS = 4096  # rows of the fixed random "motion data" the discriminator learns to call real


class Trainer:
    """Owns env, nets, optimizers and buffers; one ``rollout`` plus one ``update`` is an iteration."""

    def __init__(self, spec: AgentSpec, dims: Dims, comm: Comm, seed: int, cap_base_kib: int | None = None) -> None:
        self.spec, self.dims, self.comm, dev = spec, dims, comm, comm.device
        self.cap_base_kib = cap_base_kib  # the data segment when the emulated cap was set (None: no cap)
        self.cap_used_mb = 0.0  # the most of the cap seen in use: after a rollout, each update's forward, an update
        torch.manual_seed(seed + comm.rank)  # envs differ per rank ...
        self.env = VecEnv(dims, dev)  # biggest per-env allocations first: an over-cap rung fails here
        self.buf = Rollout.allocate(spec.steps_per_iter, dims, spec, dev)
        self.replay = Replay(spec.disc_buffer_size, dims.disc_obs, dev) if "disc" in spec.nets else None
        self.demo = torch.randn(DEMO_ROWS, dims.disc_obs, device=dev)
        self.norm_adv = torch.zeros(self.buf.rewards.numel(), device=dev)  # normalized advantages, per update
        self.latents = F.normalize(torch.randn(dims.num_envs, spec.latent_dim, device=dev), dim=-1)
        torch.manual_seed(seed)  # ... nets start identical on every rank
        self.nets = nn.ModuleDict({r: self._net(r) for r in spec.nets}).to(dev)
        self.optims = {r: Optimizer(spec.optims[r], self.nets[r].parameters()) for r in spec.nets}
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
            self.optims[role].zero_grad()
            loss = loss_fn(idx)
            self.note_cap_used()  # its activations held: the update's high point, which a later reading misses
            loss.backward()
            self.comm.average_grads(list(self.nets[role].parameters()))
            self.optims[role].step()

    def note_cap_used(self) -> None:
        """Keep the most of the emulated cap in use so far (`cap_used_mb`); nothing without a cap."""
        if self.cap_base_kib is not None:
            self.cap_used_mb = max(self.cap_used_mb, cap_used_mb(self.comm.device, self.cap_base_kib))

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
