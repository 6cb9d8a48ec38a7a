"""A trainer whose first run is noisy and whose later runs are steady, as when a neighbour's job shares the machine
for a while: it prints JSON progress lines, the first run's alternately 0.01 s and 0.19 s apart, a later run's
0.1 s apart. Which run it is, it learns from a marker file in MARKER_DIR (one per num_envs).

    python noisy_once.py NUM_ENVS PROGRESS_FILE MARKER_DIR
"""

import json
import sys
import time
from pathlib import Path

num_envs, progress, marker = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3]) / f"ran_e{sys.argv[1]}"
first = not marker.exists()
marker.touch()
pauses = (0.01, 0.19) if first else (0.1, 0.1)  # the same pace on average
with open(progress, "a") as out:
    for i in range(1, 100000):
        time.sleep(pauses[i % 2])
        out.write(json.dumps({"t": time.time(), "iter": i, "samples": 64 * num_envs * i}) + "\n")
        out.flush()
