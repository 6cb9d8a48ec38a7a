"""A trainer that reports its use of an emulated card in JSON lines, as ladder's proxy does: `cap_used_mb` grows
with num_envs (`--mib-per-env` each) against a card of `--cap-mb`. A rung whose use comes within a few percent of
the card survives, but is no confident fit.

    python near_cap.py NUM_ENVS PROGRESS_FILE [--cap-mb 640] [--mib-per-env 10]
"""

import argparse
import json
import time

parser = argparse.ArgumentParser()
parser.add_argument("num_envs", type=int)
parser.add_argument("progress")
parser.add_argument("--cap-mb", type=float, default=640.0)
parser.add_argument("--mib-per-env", type=float, default=10.0)
args = parser.parse_args()

used = args.mib_per_env * args.num_envs
with open(args.progress, "a") as out:
    for i in range(1, 100000):
        time.sleep(0.05)
        rec = {
            "t": time.time(),
            "iter": i,
            "samples": 32 * args.num_envs * i,
            "cap_mb": args.cap_mb,
            "cap_used_mb": [used],
        }
        out.write(json.dumps(rec) + "\n")
        out.flush()
