"""A tiny stable-baselines3 PPO on CartPole, `--n-envs` as the knob (tests drive it through ladder's command
workload). Options make it print rarely (`--log-interval`) or allocate memory at its first update (`--grab-mb-per-env`,
so a memory cap kills the larger rungs in their first update, as a real trainer's rollout buffer would)."""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env


class Grab(BaseCallback):
    """At the end of the first rollout (the first update starts there), hold `mb` MiB, touched page by page."""

    def __init__(self, mb: float) -> None:
        super().__init__()
        self.mb = mb
        self.held: list[np.ndarray] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.mb and not self.held:
            self.held.append(np.ones(int(self.mb * 2**20), dtype=np.uint8))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-envs", type=int, required=True)
    ap.add_argument("--n-steps", type=int, default=32)
    ap.add_argument("--total", type=int, default=10**9)
    ap.add_argument("--log-interval", type=int, default=1)
    ap.add_argument("--grab-mb-per-env", type=float, default=0.0)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core per trial: the tests share a small machine
    os.environ.setdefault("SB3_LOGDIR", ".")  # SB3's logger folder: the trial's own, not /tmp/SB3-<date>
    env = make_vec_env("CartPole-v1", n_envs=args.n_envs, seed=0)
    batch = min(64, args.n_steps * args.n_envs)
    model = PPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=batch, n_epochs=1, verbose=1, device="cpu", seed=0)
    model.learn(args.total, callback=Grab(args.grab_mb_per_env * args.n_envs), log_interval=args.log_interval)


if __name__ == "__main__":
    main()
