"""A tiny stable-baselines3 DQN on CartPole, `--n-envs` as the knob. DQN keeps training when its loss goes NaN (no
distribution checks its values), and prints `| loss | nan |` in sb3's own table: what a trainer that diverged looks
like. `--diverge-above N` gives it an absurd learning rate above N envs (a learning rate scaled up with the batch, as
the linear scaling rule does, past where it trains), so the larger rungs diverge while their memory fits."""

from __future__ import annotations

import argparse
import os

import torch
from stable_baselines3 import DQN
from stable_baselines3.common.env_util import make_vec_env


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-envs", type=int, required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--diverge-above", type=int, default=0, help="above this many envs, a learning rate of 1e30")
    ap.add_argument("--total", type=int, default=10**9)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core per trial: the tests share a small machine
    os.environ.setdefault("SB3_LOGDIR", ".")
    lr = 1e30 if args.diverge_above and args.n_envs > args.diverge_above else args.lr
    env = make_vec_env("CartPole-v1", n_envs=args.n_envs, seed=0)
    model = DQN("MlpPolicy", env, learning_rate=lr, learning_starts=64, verbose=1, device="cpu", seed=0)
    model.learn(args.total, log_interval=4)


if __name__ == "__main__":
    main()
