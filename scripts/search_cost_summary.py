"""What each sweep of `scripts/bench_search_gpu.sh` cost, side by side: trial-seconds per sweep, ladder ÷ the plain
walk at each card, and where a trial's time went (failing probes, launch to first step, outside the window).

    python scripts/search_cost_summary.py OUT/out

Sweeps are named `g<card>_<variant>` (variant: model, model_off, walk); each one's trials.tsv is read as written.
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def _median(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} s (n={len(values)}, {min(values):.2f}-{max(values):.2f})"


def main(root: Path) -> int:
    cost: dict[str, dict[str, float]] = defaultdict(dict)
    picks: dict[str, dict[str, str]] = defaultdict(dict)
    fails, starts, outside = [], [], []
    for path in sorted(root.glob("*/trials.tsv")):
        sweep = path.parent.name.removeprefix("case_gpu_bench_").removeprefix("g")
        card, _, variant = sweep.partition("_")
        rows = list(csv.DictReader(path.open(), delimiter="\t"))
        cost[card][variant] = sum(float(r["duration_s"]) for r in rows)
        ok = [r for r in rows if r["status"] == "ok"]
        best = max(ok, key=lambda r: float(r["samples_per_s"]), default=None)
        picks[card][variant] = f"{best['variant']} e{best['num_envs']}" if best else "none"
        print(f"{sweep}: {len(rows)} trials, {cost[card][variant]:.1f} s")
        for r in rows:
            d = float(r["duration_s"])
            print(
                f"  {r['variant']:<7} e{r['num_envs']:<5} {r['status']:<12} {d:6.2f} s  first step "
                f"{r.get('first_step_s') or '-':>5}  window {r.get('window_s') or '-':>5}  samples/s "
                f"{r.get('samples_per_s') or '-':>8}  util {r.get('avg_util0') or '-':>5}  | {r.get('why', '')[:70]}"
            )
            if r["status"] != "ok":
                fails.append(d)
            elif r.get("first_step_s"):
                starts.append(float(r["first_step_s"]))
                if not r.get("cut") and r.get("window_s"):
                    outside.append(d - float(r["window_s"]))
    print()
    print("card  variant     trial-s  ÷ walk  best measured")
    for card in sorted(cost, key=float):
        walk = cost[card].get("walk")
        for variant, spent in sorted(cost[card].items()):
            ratio = f"{spent / walk:.2f}" if walk else "-"
            print(f"{card:<5} {variant:<10} {spent:8.1f}  {ratio:>6}  {picks[card][variant]}")
    print(f"failing probe, launch to verdict: median {_median(fails)}")
    print(f"fitting trial, launch to first step: median {_median(starts)}")
    print(f"fitting trial with a whole window, seconds outside it: median {_median(outside)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
