"""The proxy's whole bench with and without history: how many launches cases that learn from each other save.

For each robot family, one `python -m ladder.search case=all:<robot>` (the family's cases in one sweep, in the
bench's order) on an emulated card that puts the family's largest fits mid-ladder, once with `history=true` (a
case's first launches from the memory model of the cases of its family measured before it) and once with
`history=false` (every case cold), each mode in an output root of its own (no mode learns from the other). Real
proxy trials on CPU: one rank, short windows, the light agent (`steps_per_iter=8`).

Printed: per case and profile, the pick (the largest fit) with and without history, the launches and the
trial-seconds of each, and the totals; the last line `launch_ratio=<with/without> same_pick=<k>/<n>`.

    python scripts/bench_bench.py [--robots pi_plus,go2,g1] [--profiles default,hiutil] [--window-s 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ladder.core.paths import SweepPaths
from ladder.core.records import Status, TrialRecord
from ladder.storage import studies

# the emulated card (GB per rank) that puts each family's largest fits mid-ladder under the light agent
CARDS_GB = {
    "pi_plus": 0.6,
    "go2": 0.3,
    "g1": 0.45,
    "smpl": 0.45,
    "humanoid": 0.3,
    "humanoid_sword_shield": 0.3,
}
LIGHT = ["device=cpu", "workload.nproc=1", "case.agent.steps_per_iter=8", "measure.warmup_iters=2"]
MODES = ("history", "cold")


@dataclass(frozen=True)
class Cell:
    """One case and profile of one mode's bench."""

    pick: int | None  # the largest fit (None: nothing fitted)
    launches: int
    seconds: float


def run_family(robot: str, mode: str, root: Path, profiles: Sequence[str], window_s: float) -> float:
    """One family's bench in one mode; its wall seconds."""
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        f"case=all:{robot}",
        f"sweep={robot}",
        f"output_root={root / mode}",
        f"hydra.sweep.dir={root / 'multirun' / mode / robot}",
        f"profile=[{','.join(profiles)}]",
        f"workload.emulate_gpu_mem_gb={CARDS_GB.get(robot, 0.6)}",
        f"measure.window_s={window_s:g}",
        "measure.stable_tol=0.5",
        f"history={'true' if mode == 'history' else 'false'}",
        *LIGHT,
    ]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode not in (0,):
        print(f"{robot} {mode}: exit {done.returncode}\n{done.stderr[-2000:]}", file=sys.stderr)
    return time.monotonic() - start


def cells(root: Path, robot: str) -> dict[tuple[str, str], Cell]:
    """Per (case, profile): the largest fit, the launches (reused copies not counted) and their seconds."""
    paths = SweepPaths.of(root, robot)
    if not paths.journal.is_file():
        return {}
    records = studies.sweep_records(studies.open_storage(None, paths.sweep_dir), robot)
    out = {}
    for key in sorted({(r.case, r.profile) for r in records}):
        mine = [r for r in records if (r.case, r.profile) == key and not r.info.get("reused_from")]
        fits = [r.num_envs for r in mine if r.status is Status.OK]
        out[key] = Cell(max(fits) if fits else None, len(mine), sum(_seconds(r) for r in mine))
    return out


def _seconds(record: TrialRecord) -> float:
    try:
        return float(record.info.get("duration_s", "") or 0.0)
    except ValueError:
        return 0.0


def table(found: dict[str, dict[tuple[str, str], Cell]]) -> list[str]:
    """The per-case lines, the totals and the last line."""
    keys = sorted(set(found["history"]) | set(found["cold"]))
    head = f"{'case':38} {'profile':8} {'pick h':>7} {'pick c':>7} {'same':>4} {'launch h':>8} {'launch c':>8}"
    lines = [head + f" {'s h':>7} {'s c':>7}"]
    same = 0
    for key in keys:
        h, c = found["history"].get(key), found["cold"].get(key)
        alike = h is not None and c is not None and h.pick == c.pick
        same += alike
        lines.append(
            f"{key[0]:38} {key[1]:8} {_pick(h):>7} {_pick(c):>7} {'yes' if alike else 'NO':>4} "
            f"{_n(h, 'launches'):>8} {_n(c, 'launches'):>8} {_n(h, 'seconds'):>7} {_n(c, 'seconds'):>7}"
        )
    total = {m: sum(x.launches for x in found[m].values()) for m in MODES}
    secs = {m: sum(x.seconds for x in found[m].values()) for m in MODES}
    lines.append(
        f"{'total':38} {'':8} {'':>7} {'':>7} {same:>4} {total['history']:>8} {total['cold']:>8} "
        f"{secs['history']:>7.0f} {secs['cold']:>7.0f}"
    )
    ratio = total["history"] / total["cold"] if total["cold"] else float("nan")
    lines.append(f"launch_ratio={ratio:.2f} same_pick={same}/{len(keys)}")
    return lines


def _pick(cell: Cell | None) -> str:
    return "-" if cell is None else ("none" if cell.pick is None else f"e{cell.pick}")


def _n(cell: Cell | None, field: str) -> str:
    if cell is None:
        return "-"
    value = getattr(cell, field)
    return f"{value:.0f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", default=",".join(CARDS_GB), help="the families to bench, comma-separated")
    parser.add_argument("--profiles", default="default,hiutil")
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the sweeps under this folder")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_bench_"))
    robots, profiles = args.robots.split(","), args.profiles.split(",")
    found: dict[str, dict[tuple[str, str], Cell]] = {m: {} for m in MODES}
    for robot in robots:
        for mode in MODES:
            wall = run_family(robot, mode, root, profiles, args.window_s)
            found[mode].update(cells(root / mode, robot))
            print(f"# {robot} {mode}: {wall:.0f} s wall, card {CARDS_GB.get(robot, 0.6)} GB", flush=True)
    print("\n".join(table(found)))
    print(f"# sweeps under {root}")


if __name__ == "__main__":
    main()
