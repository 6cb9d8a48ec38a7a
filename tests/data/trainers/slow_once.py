"""A trainer whose largest num_envs is the right pick (a smaller one runs 10% slower), except that the largest one's
first run lands in a slow stretch of a shared machine: its steps come unevenly, one in two three times as long, so
that its window is wide and its mean half the rate. Its later runs, and every smaller num_envs, run steadily. It
prints JSON progress lines (the same samples per step at every num_envs). Which run it is, it learns from a marker
file in MARKER_DIR (one per num_envs).

    python slow_once.py NUM_ENVS PROGRESS_FILE MARKER_DIR [LARGEST]
"""

import json
import random
import sys
import time
from pathlib import Path

num_envs, progress, marker = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]) / f"ran_e{sys.argv[1]}"
largest = int(sys.argv[4]) if len(sys.argv) > 4 else 32
first = not marker.exists()
marker.touch()
rng = random.Random(0)
with open(progress, "a") as out:
    for i in range(1, 100000):
        if num_envs < largest:
            time.sleep(0.05 * 1.1)
        else:
            time.sleep(rng.choice((0.05, 0.15)) if first else 0.05)
        out.write(json.dumps({"t": time.time(), "iter": i, "samples": 2048 * i}) + "\n")
        out.flush()
