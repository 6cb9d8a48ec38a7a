"""How much trial time the search costs: exhaustive grid, plain walk, ladder's policy and the oracle, side by side.

Real proxy trials (2 gloo ranks under torchrun) on the amp_pi_plus case, both profiles, the pi_plus ladder, under
several emulated caps chosen so the largest fitting rung differs (none, a low one, the middle, the top).

Each (profile, rung) that fits is measured once, in a pass without a cap: the work of a trial that fits does not
depend on the cap. Each scenario then runs, for real at its cap, every rung from the top down to the first one
that fits, per profile; the rungs below it fit too (a fitting rung proves every lower one fits), and their
figures and durations come from the uncapped pass. Every strategy is then replayed against the same measured
table: its trial-seconds are the sums of the measured durations of the trials it would launch.

    python scripts/bench_search.py [--window-s 8] [--objective samples_per_s] [--caps 0.45,0.52,0.6,0.75,1.4]

Last line: `ratio_vs_oracle=<x> same_pick=<k>/<n>`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from hydra import compose, initialize_config_dir

from ladder import launch, policy, trial
from ladder.config import Settings, register, settings_from
from ladder.monitor import HostSampler
from ladder.records import Status
from ladder.workloads.builtin import Placement, plan_proxy

NO_CAP_GB = 64.0  # the pass "without a cap" still sets one, far above any rung, so the trainer reports its use
CONF = str(Path(__file__).resolve().parent.parent / "conf")


@dataclass(frozen=True)
class Cell:
    status: Status
    duration_s: float
    objective: float | None
    cap_used_mb: float | None  # the most of the emulated card the trainer used (the memory model's input)
    interval: tuple[float, float] | None  # the objective's measured 95% interval, where it has one (samples/s)


def settings(window_s: float, objective: str) -> Settings:
    register()
    overrides = ["case=amp_pi_plus", f"measure.window_s={window_s}", "measure.warmup_iters=3", f"objective={objective}"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return settings_from(compose(config_name="config", overrides=overrides))


def run_cell(s: Settings, profile: str, rung: int, cap_gb: float | None, root: Path) -> Cell:
    workload = replace(s.workload, emulate_gpu_mem_gb=cap_gb or NO_CAP_GB)
    prof = next(p for p in s.profiles if p.name == profile)
    trial_dir = root / f"{profile}_e{rung}_cap{cap_gb}_{uuid.uuid4().hex[:6]}"
    place = Placement("cpu", 2, launch.free_port(), sys.executable)
    spec = plan_proxy(s.case, prof, rung, workload, place, str(trial_dir), s.measure.trial_timeout_s, s.nccl_env)
    result = trial.run(spec, trial_dir, uuid.uuid4().hex[:12], s.measure, HostSampler)
    value = result.figures.get(s.objective) if result.verdict.status is Status.OK else None
    lo, hi = result.figures.get(f"{s.objective}_lo"), result.figures.get(f"{s.objective}_hi")
    interval = (lo, hi) if value is not None and lo is not None and hi is not None else None
    cell = Cell(result.verdict.status, result.duration_s, value, result.figures.get("cap_used_mb"), interval)
    print(f"  {profile:<7} e{rung:<4} cap={cap_gb} {cell.status!s:<12} {cell.duration_s:6.1f} s  {s.objective}={value}")
    return cell


def scenario_table(
    s: Settings, cap: float, fits: dict[tuple[str, int], Cell], root: Path
) -> dict[tuple[str, int], Cell]:
    """Real runs at `cap` from the top down to the first rung that fits; the fitting pass fills in below it."""
    table: dict[tuple[str, int], Cell] = {}
    for profile in (p.name for p in s.profiles):
        found = False
        for rung in s.rungs:
            if found:
                table[(profile, rung)] = fits[(profile, rung)]
                continue
            table[(profile, rung)] = cell = run_cell(s, profile, rung, cap, root)
            found = cell.status is Status.OK
    return table


def replay(
    s: Settings, table: dict[tuple[str, int], Cell], strategy: policy.Strategy, cap_gb: float
) -> tuple[float, list[tuple[str, int]]]:
    """Trial-seconds of a strategy against the measured table, and the (profile, rung) it ends on per profile."""
    history: list[policy.Attempt] = []
    profiles = [p.name for p in s.profiles]
    tuning = policy.Tuning(strategy)
    spent = 0.0
    while (d := policy.next_trial(s.rungs, profiles, history, tuning)) is not None:
        cell = table[(d.profile, d.rung)]
        frac = cell.cap_used_mb / (cap_gb * 1024) if cell.cap_used_mb and cell.status is Status.OK else None
        history.append(policy.Attempt(d.profile, d.rung, cell.status, frac))
        spent += cell.duration_s
    ends = [(p, policy.walk(s.rungs, p, history, tuning)) for p in profiles]
    return spent, [(p, w.rung) for p, w in ends if w.outcome is policy.Outcome.FOUND and w.rung is not None]


def best_pick(s: Settings, table: dict[tuple[str, int], Cell], cells: list[tuple[str, int]]) -> tuple[str, int] | None:
    scored = [(table[c].objective, c[1], c) for c in cells if table[c].objective is not None]
    return max(scored)[2] if scored else None


def summarize(s: Settings, cap: float, table: dict[tuple[str, int], Cell]) -> tuple[float, float, float, float, bool]:
    profiles = [p.name for p in s.profiles]
    grid_s = sum(c.duration_s for c in table.values())
    walk_s, _ = replay(s, table, policy.Strategy.WALK, cap)
    ladder_s, ladder_ends = replay(s, table, policy.Strategy.MODEL, cap)
    winners = _winners(s, table, profiles)
    oracle_s = sum(table[w].duration_s for w in winners)
    grid_pick = best_pick(s, table, list(table))
    ladder_pick = best_pick(s, table, ladder_ends)
    same = grid_pick == ladder_pick or _within(table, grid_pick, ladder_pick)
    print(f"cap {cap} GB: grid {grid_s:.0f} s, walk {walk_s:.0f} s, ladder {ladder_s:.0f} s, oracle {oracle_s:.0f} s; "
          f"grid pick {grid_pick}, ladder pick {ladder_pick}{'' if same else '  (DIFFERENT)'}")  # fmt: skip
    return grid_s, walk_s, ladder_s, oracle_s, same


def _winners(s: Settings, table: dict[tuple[str, int], Cell], profiles: list[str]) -> list[tuple[str, int]]:
    """Per profile, the largest rung that fits: what the oracle runs, and nothing else."""
    out = []
    for p in profiles:
        fitting = [r for r in s.rungs if table[(p, r)].status is Status.OK]
        out += [(p, fitting[0])] if fitting else []
    return out


def _within(table: dict[tuple[str, int], Cell], grid: tuple[str, int] | None, ours: tuple[str, int] | None) -> bool:
    """Our pick's objective lies within the measured 95% interval of the grid's best (no interval: no tolerance)."""
    if grid is None or ours is None:
        return grid == ours
    ours_value, interval = table[ours].objective, table[grid].interval
    return ours_value is not None and interval is not None and interval[0] <= ours_value <= interval[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window-s", type=float, default=8.0)
    parser.add_argument("--objective", default="samples_per_s",
                        help="samples_per_s has a measured interval; min_avg_util (CPU%% here) has none")  # fmt: skip
    parser.add_argument("--caps", default="0.45,0.52,0.6,0.75,1.4", help="emulated GB per rank, one per scenario")
    args = parser.parse_args()
    s = settings(args.window_s, args.objective)
    launch.become_subreaper()
    caps = [float(c) for c in args.caps.split(",")]
    with tempfile.TemporaryDirectory(prefix="ladder-bench-") as tmp:
        root = Path(tmp)
        print("pass without a cap: every rung fits; its figures and durations serve the rungs below each fit")
        fits = {(p.name, r): run_cell(s, p.name, r, None, root) for p in s.profiles for r in s.rungs}
        rows = []
        for cap in caps:
            print(f"scenario: cap {cap} GB per rank")
            rows.append(summarize(s, cap, scenario_table(s, cap, fits, root)))
    totals = [sum(r[i] for r in rows) for i in range(4)]
    same = sum(1 for r in rows if r[4])
    print(f"total: grid {totals[0]:.0f} s, walk {totals[1]:.0f} s, ladder {totals[2]:.0f} s, oracle {totals[3]:.0f} s")
    print(f"walk/oracle {totals[1] / totals[3]:.2f}, ladder/oracle {totals[2] / totals[3]:.2f}, "
          f"median uncapped trial {statistics.median(c.duration_s for c in fits.values()):.1f} s")  # fmt: skip
    print(f"ratio_vs_oracle={totals[2] / totals[3]:.3f} same_pick={same}/{len(rows)}")


if __name__ == "__main__":
    main()
