"""A trainer as fast at every num_envs (a plateau: the largest is the right pick), except that a smaller num_envs'
first run lands in a calm moment of a shared machine and runs 15% faster; its later runs run 10% slower. It prints
JSON progress lines (the same samples per step at every num_envs). Which run it is, it learns from a marker file in
MARKER_DIR (one per num_envs).

    python lucky_once.py NUM_ENVS PROGRESS_FILE MARKER_DIR [LARGEST]
"""

import json
import sys
import time
from pathlib import Path

num_envs, progress, marker = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]) / f"ran_e{sys.argv[1]}"
largest = int(sys.argv[4]) if len(sys.argv) > 4 else 32
first = not marker.exists()
marker.touch()
# steps of 0.1 s: a busy machine adds a few ms to each sleep, which would eat more of a shorter step's 15%
pace = 0.1 if num_envs >= largest else 0.1 / 1.15 if first else 0.1 / 0.9
with open(progress, "a") as out:
    for i in range(1, 100000):
        time.sleep(pace)
        out.write(json.dumps({"t": time.time(), "iter": i, "samples": 2048 * i}) + "\n")
        out.flush()
