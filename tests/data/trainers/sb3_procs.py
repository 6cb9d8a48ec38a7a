"""A tiny stable-baselines3 PPO on CartPole over `--procs` cores (tests drive it through ladder's command workload,
`--procs {nproc}`): one process with one env loop and one torch thread for `--procs 1`; for more, the envs step in
their own processes (SubprocVecEnv) and torch uses as many threads. The placement test measures it as one job over
two cores against two one-core jobs side by side."""

from __future__ import annotations

import argparse
import os

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-envs", type=int, required=True)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--n-steps", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(args.procs)
    os.environ.setdefault("SB3_LOGDIR", ".")  # SB3's logger folder: the trial's own, not /tmp/SB3-<date>
    vec = SubprocVecEnv if args.procs > 1 else DummyVecEnv
    env = make_vec_env("CartPole-v1", n_envs=args.n_envs, seed=0, vec_env_cls=vec)
    batch = min(64, args.n_steps * args.n_envs)
    model = PPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=batch, n_epochs=1, verbose=1, device="cpu", seed=0)
    model.learn(10**9, log_interval=1)


if __name__ == "__main__":
    main()
