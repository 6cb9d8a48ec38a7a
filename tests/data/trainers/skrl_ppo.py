"""skrl's PPO on a gymnasium vector CartPole, trained by skrl's SequentialTrainer as its examples do: the trainer
draws a tqdm bar over its timesteps, and each timestep is one step of every env at once (a vector step).
`python skrl_ppo.py NUM_ENVS TIMESTEPS` (tests drive it through ladder's command workload)."""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import torch
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.envs.wrappers.torch import wrap_env
from skrl.memories.torch import RandomMemory
from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
from skrl.trainers.torch import SequentialTrainer
from torch import nn


class Policy(CategoricalMixin, Model):
    def __init__(self, observation_space: Any, action_space: Any, device: Any) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        CategoricalMixin.__init__(self, unnormalized_log_prob=True)
        self.net = nn.Sequential(nn.Linear(self.num_observations, 64), nn.Tanh(), nn.Linear(64, self.num_actions))

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
        return self.net(inputs["observations"]), {}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space: Any, action_space: Any, device: Any) -> None:
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        DeterministicMixin.__init__(self)
        self.net = nn.Sequential(nn.Linear(self.num_observations, 64), nn.Tanh(), nn.Linear(64, 1))

    def compute(self, inputs: dict[str, Any], role: str = "") -> tuple[torch.Tensor, dict[str, Any]]:
        return self.net(inputs["observations"]), {}


def main(num_envs: int, timesteps: int) -> None:
    torch.set_num_threads(1)
    env = wrap_env(gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync"))
    models = {
        "policy": Policy(env.observation_space, env.action_space, env.device),
        "value": Value(env.observation_space, env.action_space, env.device),
    }
    cfg = PPO_CFG(rollouts=16, learning_epochs=2, mini_batches=2)
    agent = PPO(
        models=models,
        memory=RandomMemory(memory_size=cfg.rollouts, num_envs=env.num_envs, device=env.device),
        cfg=cfg,
        observation_space=env.observation_space,
        action_space=env.action_space,
        device=env.device,
    )
    SequentialTrainer(env=env, agents=agent, cfg={"timesteps": timesteps, "headless": True}).train()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
