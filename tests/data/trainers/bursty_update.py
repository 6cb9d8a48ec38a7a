"""A trainer shaped like CleanRL's PPO: a line per vectorised env step during its rollout (`global_step=N`), then its
update in silence. The rollout holds little memory; the update holds `num_envs` MiB more (its minibatches and
gradients), so under a memory cap a rung can run its whole rollout and die at its first update.

    python bursty_update.py NUM_ENVS [--steps 40] [--step-s 0.02] [--update-s 0.6] [--update-mib-per-env 1]
                            [--stall-s 0] [--busy] [--lines 1]

`--stall-s`: one silence that long halfway through the first rollout, as a loaded machine stalls a trainer.
`--busy`: each step and the update spend their seconds as CPU time (as a real trainer computes: on a loaded machine
they take longer), not asleep. `--lines`: the line is printed this many times a step (CleanRL prints it for every env
whose episode ended in that step).
"""

import argparse
import time

parser = argparse.ArgumentParser()
parser.add_argument("num_envs", type=int)
parser.add_argument("--steps", type=int, default=40)  # env steps per rollout
parser.add_argument("--step-s", type=float, default=0.02)
parser.add_argument("--update-s", type=float, default=0.6)
parser.add_argument("--update-mib-per-env", type=float, default=1.0)
parser.add_argument("--stall-s", type=float, default=0.0)
parser.add_argument("--busy", action="store_true")
parser.add_argument("--lines", type=int, default=1)
args = parser.parse_args()


def spend(seconds: float) -> None:
    """Seconds of CPU time where `--busy` (longer on a loaded machine), else asleep."""
    if not args.busy:
        time.sleep(seconds)
        return
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(i * i for i in range(2000))


rollout = bytearray(args.steps * args.num_envs * 64)  # observations, written as the envs step
global_step = 0
while True:
    for step in range(args.steps):
        rollout[step * args.num_envs * 64 : (step + 1) * args.num_envs * 64] = b"\x01" * (args.num_envs * 64)
        global_step += args.num_envs
        print(f"global_step={global_step}\n" * args.lines, end="", flush=True)
        spend(args.step_s)
        if global_step == args.num_envs * (args.steps // 2):
            time.sleep(args.stall_s)
    update = bytearray(int(args.update_mib_per_env * args.num_envs * 2**20))  # zeroed: every page touched
    for i in range(0, len(update), 4096):
        update[i] = 1
    spend(args.update_s)
    del update
