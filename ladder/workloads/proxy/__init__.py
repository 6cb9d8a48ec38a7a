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

The package follows the trainer's parts: `agent` (the agent YAML), `device` (ranks, devices, the memory cap),
`buffers` (env, nets, buffers), `trainer` (rollout and update), `faults` (fault injection) and `loop` (command
line, progress lines, the training loop); `python -m ladder.workloads.proxy` runs `loop.main`.
"""

from __future__ import annotations

from ladder.workloads.proxy.agent import AgentSpec, OptimSpec, load_agent, read_yaml, roles_for, scaled_widths
from ladder.workloads.proxy.buffers import Dims
from ladder.workloads.proxy.loop import main, parse_args
from ladder.workloads.proxy.trainer import Trainer

__all__ = [
    "AgentSpec",
    "Dims",
    "OptimSpec",
    "Trainer",
    "load_agent",
    "main",
    "parse_args",
    "read_yaml",
    "roles_for",
    "scaled_widths",
]
