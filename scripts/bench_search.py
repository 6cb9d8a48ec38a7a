"""How much trial time the search costs: exhaustive grid, plain walk, ladder and the oracle, side by side.

Real proxy trials (2 gloo ranks under torchrun, CPU) on the amp_pi_plus case, both profiles, the pi_plus ladder,
objective samples/s, under several emulated caps chosen so that the largest fitting rung differs: none, low,
middle, high, the top. By default the caps are derived from what the rungs used in a first pass (`--caps auto`).

1. With `--caps auto`, every (profile, rung) is first measured once without a cap (the pass "without a cap"
   still sets one far above any rung, so the trainer reports what it used), and the caps are set from that.
2. Each scenario runs the exhaustive grid for real at its cap: every rung of every profile, in one pass. (Cells
   are not borrowed from another pass: on this 2-core machine one rung's samples/s moved by up to 30% between
   passes, default e128 measured 4660 to 6452, so a grid mixing passes compared runs from different moments.)
3. ladder runs for real: `python -m ladder.search` at the scenario's cap (its own trials, cuts and all); its cost
   is the sum of its trials' durations, and its pick is looked up in the grid.
4. The plain walk (the manual routine: from the top, one rung at a time, stop at the first fit) is replayed on
   the grid, and the oracle runs only each profile's winning rung (the grid's best by samples/s, a larger rung
   winning a tie within the measured interval), each for its whole window: one warm-up and one window per case
   and profile. ladder may spend less than that on a profile that loses (it stops a trial once it clearly cannot
   become the case's pick), so the total also shows the stricter oracle that runs the case's winner alone, priced
   at one warm-up and one window (`ratio_vs_strict`; where the grid's run of that cell extended its window, the
   extension is taken off, and the cells as they ran are printed beside it).

A scenario's pick is "same" when ladder picks the grid's best (profile, rung), or one whose samples/s (as the grid
measured it) lies within the grid best's measured 95% interval. Measured how: one window's interval speaks of the
steps inside that window only, while on this machine the same configuration moves more than that from one run to
the next (the bench prints both). A configuration that fits in several scenarios is measured once in each, an
independent run (the cap does not change what a fitting run computes), so the verdict takes every run of it in
this bench: its mean, and the 95% interval of that mean from the run-to-run spread pooled over all configurations
run more than once (relative to their means; Student t with the pooled degrees of freedom). The grid's best is
taken on those figures too, by the same rule. The single-pass verdict (one window against one window, the grid's
best by its one pass; the oracle's rungs are chosen so) is printed beside it.

With `--compare`, ladder also runs each scenario with `descent_short=false` (every step below the largest fit
measured in full, as before the short insurance probe), so both walks are measured against the same grid.

    python scripts/bench_search.py [--window-s 30] [--caps auto|0.354,0.473,0.533,0.681,1.339] [--compare]

The proxy's ranks start as a sweep starts them (`workload.proxy_start=warm` by default: forked from a starter that
has torch imported, `ladder.runner.warm`). The starter's own start is in no trial's duration, so every search is
charged it once per cap: ladder's run its own (the `warm starter:` line it prints), and every search priced from the
grid's cells (grid, walk, oracle, strict oracle, floor) the grid's starter's.

The floor (`floor`) is what no search held to ladder's evidence can spend less than, priced from the grid's own
cells: the strict oracle's window, the rungs either side of the winner (it is the largest fit, or the best of those
above it; the rung below is no faster), and one launch of every other profile up to its window's opening or its second
progress point, whichever came first (the first moment a cut can fire: the cut before the window rests on a trial's
first two steps); with nothing fitting, the bottom rung failing for each profile. Where the floor itself is
above a target ratio to the strict oracle, no search order meets that target on these trials; `ratio_vs_floor`
is what ladder's own order costs above it. The floor takes each other profile's cheapest fitting rung, which only a
search that assumed something across profiles would know to launch; the floor at the seed (`seeded_vs_strict`)
launches it where ladder does, at the winner's rung, walked down from there to its first fit: what ladder's own
order of launches costs at the least, every launch ended at its first moment.

`--keep DIR` keeps every trial's folder (the grid's cells, ladder's sweeps with their `trials.tsv`) under DIR,
for reading why a trial ran as long as it did; without it they go with the bench's temporary folder.

Last line: `ratio_vs_oracle=<x> ratio_vs_walk=<y> same_pick=<k>/<n> same_pick_one_pass=<j>/<n> ratio_vs_floor=<f>
floor_vs_strict=<g> seeded_vs_strict=<h> ratio_vs_strict=<z>` (and the same for `descent_short=false` on the line
before it, with `--compare`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from hydra import compose, initialize_config_dir

from ladder.core import pick, walk, warmup
from ladder.core.errors import ExitCode
from ladder.core.measure.tdist import t975
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.runner import launch, trial, warm
from ladder.runner.host import HostSampler
from ladder.settings.config import Settings, register, settings_from
from ladder.storage.tsv import read_tsv
from ladder.workloads.builtin import Placement, plan_proxy

NO_CAP_GB = 64.0
CONF = str(Path(__file__).resolve().parent.parent / "conf")
OBJECTIVE = "samples_per_s"
AUTO_RUNGS = (128, 64, 38)  # the middle scenarios: caps just above what default used at these rungs
FIT_SLACK = 1.10  # a middle scenario's cap: this much above the rung's measured use
NONE_FRAC, TOP_FRAC = 0.85, 1.5  # none fits: below the bottom rung's use; all fit: above the top's

Key = tuple[str, int]


@dataclass(frozen=True)
class Cell:
    status: Status
    duration_s: float
    value: float | None  # samples/s
    hi: float | None  # the top of its measured 95% interval
    lo: float | None
    cap_used_mb: float | None
    window_s: float | None  # the span its window measured (ok only)
    window_start_s: float | None = None  # launch to its window's opening (ok only)
    early_s: float | None = None  # launch to its `warmup.MIN_STEPS`-th point (ok only): the cut before the window


def overrides(window_s: float) -> list[str]:
    return [
        "case=amp_pi_plus",
        "device=cpu",
        f"measure.window_s={window_s}",
        "measure.warmup_iters=3",
        f"objective={OBJECTIVE}",
    ]


def settings(window_s: float) -> Settings:
    register()
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return settings_from(compose(config_name="config", overrides=overrides(window_s)))


def run_cell(s: Settings, profile: str, rung: int, cap_gb: float | None, root: Path) -> Cell:
    workload = replace(s.workload, emulate_gpu_mem_gb=cap_gb or NO_CAP_GB)
    prof = next(p for p in s.profiles if p.name == profile)
    trial_dir = root / "cells" / f"{profile}_e{rung}_cap{cap_gb}_{uuid.uuid4().hex[:6]}"
    place = Placement("cpu", 2, launch.free_port(), sys.executable)
    spec = plan_proxy(s.case, prof, rung, workload, place, str(trial_dir), s.measure.trial_timeout_s, s.nccl_env)
    result = trial.run(trial.TrialRequest(spec, trial_dir, uuid.uuid4().hex[:12], s.measure), HostSampler)
    if result.verdict.status is Status.INTERRUPTED:  # Ctrl-C reached the trial (it took it as its end): stop the bench
        raise KeyboardInterrupt
    f, ok = result.figures, result.verdict.status is Status.OK
    cell = Cell(
        result.verdict.status,
        result.duration_s,
        f.get(OBJECTIVE) if ok else None,
        f.get(f"{OBJECTIVE}_hi") if ok else None,
        f.get(f"{OBJECTIVE}_lo") if ok else None,
        f.get("cap_used_mb"),
        f.get("window_s") if ok else None,
        f.get("window_start_s") if ok else None,
        _early_point_s(trial_dir, f.get("first_step_s")) if ok else None,
    )
    print(
        f"  {profile:<7} e{rung:<4} cap={cap_gb} {cell.status!s:<12} {cell.duration_s:6.1f} s  "
        f"samples/s={cell.value}  cap_used_mb={cell.cap_used_mb}"
        + (f"  ({result.verdict.reason}: {result.verdict.evidence[:80]})" if not ok else ""),
        flush=True,
    )
    return cell


def _early_point_s(trial_dir: Path, first_step_s: float | None) -> float | None:
    """Launch to the trial's `warmup.MIN_STEPS`-th progress point, the first moment the cut before the window
    (`stop.cut.early_beaten`) can fire: its first point (`first_step_s`), the proxy reporting that point's own step
    as the first step, and the time to the later point from its progress file."""
    progress = trial_dir / "progress.jsonl"
    if first_step_s is None or not progress.exists():
        return None
    times = [row["t"] for row in map(json.loads, progress.read_text().splitlines()) if "iter" in row]
    if len(times) < warmup.MIN_STEPS:
        return None
    return float(first_step_s + times[warmup.MIN_STEPS - 1] - times[0])


def auto_caps(s: Settings, fits: dict[Key, Cell]) -> list[float]:
    """Caps (GB per rank) for none, three middle rungs and all, from what the first pass measured."""
    used = {k: c.cap_used_mb for k, c in fits.items() if c.cap_used_mb}
    bottom, top = s.rungs[-1], s.rungs[0]
    none = min(used[(p.name, bottom)] for p in s.profiles) * NONE_FRAC
    every = max(used[(p.name, top)] for p in s.profiles) * TOP_FRAC
    middle = [used[("default", r)] * FIT_SLACK for r in AUTO_RUNGS]
    return [round(mb / 1024, 3) for mb in (none, *middle, every)]


def scenario_table(s: Settings, cap: float, root: Path) -> dict[Key, Cell]:
    """The exhaustive grid at `cap`: every rung of every profile, run for real."""
    return {(p.name, rung): run_cell(s, p.name, rung, cap, root) for p in s.profiles for rung in s.rungs}


def replay_walk(s: Settings, table: dict[Key, Cell]) -> tuple[float, list[Key]]:
    """The manual routine on the grid: trial-seconds, and where each profile ends."""
    history: list[walk.Attempt] = []
    profiles = [p.name for p in s.profiles]
    tuning = walk.Tuning(walk.Strategy.PLAIN)
    spent = 0.0
    while (d := walk.next_trial(s.rungs, profiles, history, tuning)) is not None:
        cell = table[(d.profile, d.rung)]
        history.append(walk.Attempt(d.profile, d.rung, cell.status))
        spent += cell.duration_s
    ends = [(p, walk.standing(s.rungs, p, history, tuning)) for p in profiles]
    return spent, [(p, w.rung) for p, w in ends if w.outcome is walk.Outcome.FOUND and w.rung is not None]


class Ladder(NamedTuple):
    """What ladder did at one cap."""

    seconds: float  # the sum of its trials' durations
    pick: Key | None
    trials: int
    outside: list[float]  # per fitting (ok) trial: its duration less its measured window (start-up, warm-up, stop)
    phases: list[tuple[float, float, float, float]]  # per fitting trial: first step, window start, window, duration
    starter_s: float = 0.0  # its warm starter's start, paid once (in `seconds`)


def run_ladder(window_s: float, cap: float, root: Path, extra: tuple[str, ...] = ()) -> Ladder:
    """ladder itself at this cap (with `extra` settings)."""
    out = root / ("ladder" + "".join(f"_{e.replace('=', '_')}" for e in extra))
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        *overrides(window_s),
        f"workload.emulate_gpu_mem_gb={cap}",
        f"output_root={out}",
        f"sweep=cap{cap}",
        "reuse=false",
        *extra,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    lines = [
        ln
        for ln in done.stdout.splitlines()
        if ln.startswith("amp_pi_plus ") or re.search(r"(insurance|spent) |^warm starter", ln)
    ]
    starter = re.search(r"^warm starter: ready in ([\d.]+) s", done.stdout, re.MULTILINE)
    label = "ladder" + (f" ({' '.join(extra)})" if extra else "")
    print("\n".join(f"  {label}: {ln.strip()}" for ln in lines), flush=True)
    if done.returncode not in (ExitCode.PICK_FOUND, ExitCode.NO_RUNG_FITS):  # a cap where nothing fits exits 3
        raise SystemExit(f"ladder failed at cap {cap}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    rows = read_tsv(out / f"case_gpu_bench_cap{cap}" / "trials.tsv")
    best = read_tsv(out / f"case_gpu_bench_cap{cap}" / "best_by_case.tsv")
    pick = (best[0]["variant"], int(best[0]["num_envs"])) if best and best[0]["status"] == "ok" else None
    outside = [
        float(r["duration_s"]) - float(r["window_s"])
        for r in rows
        if r["status"] == "ok" and r.get("window_s") and r.get("duration_s")
    ]
    phases = [
        (float(r["first_step_s"]), float(r["window_start_s"]), float(r["window_s"]), float(r["duration_s"]))
        for r in rows
        if r["status"] == "ok" and all(r.get(k) for k in ("first_step_s", "window_start_s", "window_s", "duration_s"))
    ]
    starter_s = float(starter.group(1)) if starter else 0.0
    return Ladder(sum(float(r["duration_s"]) for r in rows) + starter_s, pick, len(rows), outside, phases, starter_s)


def winner(table: dict[Key, Cell], keys: list[Key]) -> Key | None:
    """The best by samples/s, by ladder's own rule (`pick.best`: a larger rung whose interval reaches it ties)."""
    best = pick.best([_record(k, table[k]) for k in keys], OBJECTIVE)
    return (best.profile, best.num_envs) if best is not None else None


def _record(key: Key, cell: Cell) -> TrialRecord:
    figures = {OBJECTIVE: cell.value, f"{OBJECTIVE}_hi": cell.hi}
    return TrialRecord(
        "amp_pi_plus",
        "amp",
        key[0],
        key[1],
        Phase.PROBE,
        cell.status,
        Reason.NONE,
        "",
        {k: v for k, v in figures.items() if v is not None},
        {},
    )


class Pooled(NamedTuple):
    """A configuration's samples/s over every run of it in this bench: mean and the 95% interval of the mean."""

    mean: float
    lo: float
    hi: float
    runs: int


def pooled(tables: list[dict[Key, Cell]]) -> tuple[dict[Key, Pooled], float]:
    """Every configuration that fitted somewhere, with the interval of its mean from the run-to-run spread pooled
    over all configurations run more than once (relative to their means; Student t with the pooled degrees of
    freedom), and that spread. No configuration run twice: no interval to pool, an empty result."""
    values: dict[Key, list[float]] = {}
    for table in tables:
        for key, cell in table.items():
            if cell.value is not None:
                values.setdefault(key, []).append(cell.value)
    means = {key: statistics.fmean(vs) for key, vs in values.items()}
    df = sum(len(vs) - 1 for vs in values.values())
    if df == 0:
        return {}, 0.0
    spread = math.sqrt(sum((v / means[key] - 1) ** 2 for key, vs in values.items() for v in vs) / df)
    out = {}
    for key, vs in values.items():
        half = t975(df) * spread * means[key] / math.sqrt(len(vs))
        out[key] = Pooled(means[key], means[key] - half, means[key] + half, len(vs))
    return out, spread


def same_pick(table: dict[Key, Cell], grid: Key | None, ours: Key | None) -> bool:
    """Ours is the grid's best, or its samples/s (as `table` has it) lies within the best's 95% interval."""
    if grid is None or ours is None or ours == grid:
        return grid == ours
    value, best = table[ours].value, table[grid]
    return value is not None and best.lo is not None and best.hi is not None and best.lo <= value <= best.hi


def with_every_run(table: dict[Key, Cell], pool: dict[Key, Pooled]) -> dict[Key, Cell]:
    """The scenario's grid with each fitting configuration's figures taken over every run of it (`pooled`)."""
    return {
        key: replace(c, value=pool[key].mean, lo=pool[key].lo, hi=pool[key].hi) if c.status is Status.OK else c
        for key, c in table.items()
    }


def window_half_width(tables: list[dict[Key, Cell]]) -> float:
    """The median half-width of one window's 95% interval, relative to its value."""
    within = [
        (c.hi - c.lo) / 2 / c.value
        for t in tables
        for c in t.values()
        if c.value and c.hi is not None and c.lo is not None and math.isfinite(c.hi - c.lo)
    ]
    return statistics.median(within or [0.0])


class Row(NamedTuple):
    """One cap's trial-seconds and picks (`summarize`)."""

    grid_s: float
    walk_s: float
    ladder_s: float
    oracle_s: float
    same: bool  # ladder's pick is the grid's, one pass against one pass
    alone_s: float  # the strict oracle: the winner's one warm-up and one window
    grid_pick: Key | None
    ladder_pick: Key | None
    alone_run_s: float  # the winner's cell as the grid ran it
    floor_s: float
    seeded_s: float  # the floor with each other profile launched at the winner's rung, as ladder seeds it


def summarize(
    s: Settings, cap: float, table: dict[Key, Cell], ladder: Ladder, label: str = "ladder", start_s: float = 0.0
) -> Row:
    """One cap's figures. `start_s`: the warm starter's start (where the grid's ranks were forked from one), which
    every search priced from the grid's cells pays once, as ladder's own run paid its own."""
    profiles = [p.name for p in s.profiles]
    grid_s = sum(c.duration_s for c in table.values()) + start_s
    walk_s = replay_walk(s, table)[0] + start_s
    winners = [w for p in profiles if (w := winner(table, [(p, r) for r in s.rungs])) is not None]
    oracle_s = sum(table[w].duration_s for w in winners) + start_s
    grid_pick = winner(table, list(table))
    alone_run_s = (table[grid_pick].duration_s if grid_pick is not None else 0.0) + start_s
    alone_s = (one_window(table[grid_pick], s.measure.window_s) if grid_pick is not None else 0.0) + start_s
    floor_s = floor(list(s.rungs), profiles, table, grid_pick, s.measure.window_s) + start_s
    seeded_s = floor(list(s.rungs), profiles, table, grid_pick, s.measure.window_s, seeded=True) + start_s
    ladder_s, ladder_pick, n = ladder.seconds, ladder.pick, ladder.trials
    same = same_pick(table, grid_pick, ladder_pick)
    print(
        f"cap {cap} GB: grid {grid_s:.0f} s, walk {walk_s:.0f} s, {label} {ladder_s:.0f} s ({n} trials), "
        f"oracle {oracle_s:.0f} s (runs {winners}); {label}/oracle {ladder_s / max(oracle_s, 1e-9):.2f}, "
        f"{label}/walk {ladder_s / max(walk_s, 1e-9):.2f}, floor {floor_s:.0f} s (at the seed {seeded_s:.0f} s); "
        f"grid pick {grid_pick}, "
        f"{label} pick {ladder_pick}"
        f"{'' if same else '  (DIFFERENT in one pass)'}",
        flush=True,
    )
    return Row(
        grid_s, walk_s, ladder_s, oracle_s, same, alone_s, grid_pick, ladder_pick, alone_run_s, floor_s, seeded_s
    )


def floor(
    rungs: list[int],
    profiles: list[str],
    table: dict[Key, Cell],
    grid_pick: Key | None,
    window_s: float,
    seeded: bool = False,
) -> float:
    """The least a search held to ladder's evidence could spend at this cap, priced from the grid's own cells: a
    lower bound, not a plan. With a winner: its one warm-up and one window (the strict oracle), the rung above it
    (proof that the pick is the largest fit, or the best of the rungs that fit above it) and the rung below it (the
    insurance: samples/s may fall with num_envs), and one launch of every other profile (nothing is assumed
    across profiles); with no winner, the bottom rung failing for every profile (memory grows with num_envs, so
    that failure rules out the rungs above it). A failing launch costs what its cell took; a fitting one that
    is not the pick costs its launch to the opening of its window or to its second progress point, whichever came
    first: the first moment a cut can fire (the cut before the window rests on two first steps, `warmup.MIN_STEPS`),
    however clearly it loses. `seeded`: each other profile is launched where ladder seeds it, at the winner's rung,
    and walked down from there to its first fit (`_seeded`), not at its cheapest fitting rung: the least ladder's
    own order of launches could spend."""
    if grid_pick is None:
        return sum(table[(p, rungs[-1])].duration_s for p in profiles)
    pick_profile, pick_rung = grid_pick
    i = rungs.index(pick_rung)
    near = [rungs[j] for j in (i - 1, i + 1) if 0 <= j < len(rungs)]
    spent = one_window(table[grid_pick], window_s) + sum(_proof(table[(pick_profile, r)]) for r in near)
    for p in profiles:
        if p == pick_profile:
            continue
        fitting = [table[(p, r)] for r in rungs if table[(p, r)].status is Status.OK]
        if seeded:
            spent += _seeded([table[(p, r)] for r in rungs[i:]])
        else:
            spent += min(map(_proof, fitting)) if fitting else table[(p, rungs[-1])].duration_s
    return spent


def _seeded(cells: list[Cell]) -> float:
    """A profile launched at the first of `cells` (the winner's rung) and walked down: each failure whole, and the
    first fit as `_proof` prices it (a loser is cut there at the earliest)."""
    spent = 0.0
    for cell in cells:
        spent += _proof(cell)
        if cell.status is Status.OK:
            break
    return spent


def _proof(cell: Cell) -> float:
    """What a launch costs at the least where it is not the pick: a failing one its whole run (start-up to its
    failure), a fitting one its launch to its window's opening or, where that came later, to its second point
    (`Cell.early_s`: the cut before the window can fire there)."""
    if cell.status is Status.OK:
        found = [t for t in (cell.window_start_s, cell.early_s) if t is not None]
        return min(found) if found else cell.duration_s
    return cell.duration_s


def one_window(cell: Cell, window_s: float) -> float:
    """A fitting cell priced as the strict oracle is defined: one warm-up and one window. Where the grid's run of it
    measured longer (its window extended once for a wide interval, or held open while its memory settled), the
    time past one window is taken off."""
    over = (cell.window_s or 0.0) - window_s
    return cell.duration_s - over if over > 0 else cell.duration_s


def pooled_verdicts(caps: list[float], tables: list[dict[Key, Cell]], rows: list[Row], label: str = "ladder") -> int:
    """Each scenario judged on every run of each configuration in this bench: the grid's best by those figures
    (ladder's rule, as `winner`), and ladder's pick against it (`same_pick`); how many are the same."""
    pool, spread = pooled(tables)
    if not pool:  # one scenario: no configuration ran twice, nothing to pool
        print(f"{label}, every run: no configuration ran in two scenarios; the one-pass verdict stands")
        return sum(1 for r in rows if r.same)
    print(
        f"one configuration from run to run: spread {spread:.1%} (sd/mean, pooled over those run in several "
        f"scenarios); one window's 95% interval: median half-width {window_half_width(tables):.1%}"
    )
    same = 0
    for cap, table, row in zip(caps, tables, rows, strict=True):
        every = with_every_run(table, pool)
        grid, ours = winner(every, list(every)), row.ladder_pick
        ok = same_pick(every, grid, ours)
        same += ok
        print(
            f"cap {cap} GB, every run: grid pick {_shown(grid, pool)}, {label} pick {_shown(ours, pool)}"
            f"{'' if ok else '  (DIFFERENT)'}"
        )
    return same


def _shown(key: Key | None, pool: dict[Key, Pooled]) -> str:
    if key is None:
        return "none"
    if key not in pool:
        return f"{key} (failed in the grid)"
    p = pool[key]
    return f"{key} ({p.mean:.0f} over {p.runs} run{'s' if p.runs > 1 else ''}, 95% {p.lo:.0f}-{p.hi:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window-s", type=float, default=30.0, help="see 'The window' above")
    parser.add_argument("--caps", default="auto", help="auto, or emulated GB per rank, one per scenario")
    parser.add_argument("--compare", action="store_true", help="also run ladder with descent_short=false")
    parser.add_argument("--keep", metavar="DIR", help="keep every trial's folder under DIR (see above)")
    args = parser.parse_args()
    s = settings(args.window_s)
    launch.become_subreaper()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # heard even when started in the background
    for sig in (signal.SIGTERM, signal.SIGHUP):  # stops the bench as Ctrl-C does: its running trial is stopped first
        signal.signal(sig, signal.default_int_handler)
    profiles = {"ladder": ()} | ({"ladder(descent_short=false)": ("descent_short=false",)} if args.compare else {})
    with tempfile.TemporaryDirectory(prefix="ladder-bench-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if args.caps == "auto":
            print("pass without a cap, to set the caps from what each rung used")
            caps = auto_caps(s, {(p.name, r): run_cell(s, p.name, r, None, root) for p in s.profiles for r in s.rungs})
        else:
            caps = [float(c) for c in args.caps.split(",")]
        rows: dict[str, list[Row]] = {v: [] for v in profiles}
        runs: dict[str, list[Ladder]] = {v: [] for v in profiles}
        tables: list[dict[Key, Cell]] = []
        for cap in caps:
            print(f"scenario: cap {cap} GB per rank", flush=True)
            tables.append(scenario_table(s, cap, root))
            # the grid's ranks forked from it: paid once a search
            start_s = sum(st.ready_s for st in warm.STARTERS.started())
            for label, extra in profiles.items():
                runs[label].append(run_ladder(args.window_s, cap, root, extra))
                rows[label].append(summarize(s, cap, tables[-1], runs[label][-1], label, start_s))
    report(caps, tables, rows, runs)


def report(
    caps: list[float], tables: list[dict[Key, Cell]], rows: dict[str, list[Row]], runs: dict[str, list[Ladder]]
) -> None:
    """The bench's totals, where a trial's time goes, the pick verdicts, and one last line per variant (`rows` and
    `runs` by variant label, each with one entry per cap: `summarize`'s row and what ladder did)."""
    profiles = list(rows)
    fitting = [c for t in tables for c in t.values() if c.status is Status.OK and c.window_s is not None]
    first = rows["ladder"]
    grid, walk, oracle = (sum(r.grid_s for r in first), sum(r.walk_s for r in first), sum(r.oracle_s for r in first))
    print(
        f"total: grid {grid:.0f} s, walk {walk:.0f} s, oracle {oracle:.0f} s, "
        + ", ".join(f"{label} {sum(r.ladder_s for r in rows[label]):.0f} s" for label in profiles)
    )
    alone, alone_run, least, seeded = (
        sum(r.alone_s for r in first),
        sum(r.alone_run_s for r in first),
        sum(r.floor_s for r in first),
        sum(r.seeded_s for r in first),
    )
    print(
        f"grid/oracle {grid / oracle:.2f}, walk/oracle {walk / oracle:.2f}, "
        f"median fitting trial {statistics.median([c.duration_s for c in fitting] or [0.0]):.1f} s"
    )
    outside = [c.duration_s - c.window_s for c in fitting if c.window_s is not None]
    span = statistics.median([c.window_s for c in fitting if c.window_s is not None] or [1.0])
    _outside("grid", outside, span)
    for label in profiles:
        _outside(label, [o for run in runs[label] for o in run.outside], span)
        _phases(label, [p for run in runs[label] for p in run.phases])
    lines = []
    for label in profiles:
        one_pass = sum(1 for r in rows[label] if r.same)
        print(f"{label}, single pass, one window against one window: same_pick={one_pass}/{len(caps)}")
        same = pooled_verdicts(caps, tables, rows[label], label)
        spent = sum(r.ladder_s for r in rows[label])
        print(
            f"stricter oracle, the case's winner alone, one warm-up and one window: {alone:.0f} s, {label}/that "
            f"{spent / alone:.2f} (as the grid ran those cells, extended windows included: {alone_run:.0f} s, "
            f"{label}/that {spent / alone_run:.2f})"
        )
        print(
            f"floor, the least a search held to {label}'s evidence could spend (priced from the grid's cells: the "
            f"winner's window, the rungs either side of it, one launch of each other profile, each to its failure "
            f"or its second point or window's opening, whichever came first): {least:.0f} s, that/strict "
            f"{least / alone:.2f}, {label}/that {spent / least:.2f}"
        )
        print(
            f"floor at the seed, each other profile launched at the winner's rung (where {label} seeds it) and walked "
            f"down to its first fit: {seeded:.0f} s, that/strict {seeded / alone:.2f}, {label}/that "
            f"{spent / seeded:.2f}"
        )
        tail = f"ratio_vs_oracle={spent / oracle:.3f} ratio_vs_walk={spent / walk:.3f} "
        picks = f"same_pick={same}/{len(caps)} same_pick_one_pass={one_pass}/{len(caps)}"
        lines.append(
            f"{label}: {tail}{picks} ratio_vs_floor={spent / least:.3f} floor_vs_strict={least / alone:.3f} "
            f"seeded_vs_strict={seeded / alone:.3f} ratio_vs_strict={spent / alone:.3f}"
        )
    print("\n".join(lines[::-1]))


def _phases(label: str, phases: list[tuple[float, float, float, float]]) -> None:
    """Where a fitting trial's time goes, medians: launch to the first step (launcher, imports, the trainer's build,
    its first iteration), the first step to the window (warm-up), the window, and after it (stop, verdict)."""
    # a trial judged on its first steps (`warmup.Warmup`: its rate predicted before any window) has its window from
    # its first step's start, before its first point: it has no warm-up phase, and is counted apart
    windowed = [(f, w, span, d) for f, w, span, d in phases if w >= f]
    early = len(phases) - len(windowed)
    apart = f"; {early} more judged on their first steps, before any window" if early else ""
    if not windowed:
        print(f"a fitting trial, {label}: none measured in a window{apart}")
        return
    med = [
        statistics.median(x) for x in zip(*[(f, w - f, span, d - w - span) for f, w, span, d in windowed], strict=True)
    ]
    print(
        f"a fitting trial, {label} (medians over {len(windowed)}): launch to first step {med[0]:.1f} s, warm-up "
        f"{med[1]:.1f} s, window {med[2]:.1f} s, after the window {med[3]:.1f} s{apart}"
    )


def _outside(label: str, seconds: list[float], span: float) -> None:
    """Seconds outside the window (start-up, warm-up, stop) per fitting trial: median and mean."""
    if not seconds:
        print(f"outside the window, {label}: no fitting trial")
        return
    med = statistics.median(seconds)
    print(
        f"outside the window (start-up, warm-up, stop) per fitting trial, {label}: median {med:.1f} s, mean "
        f"{statistics.fmean(seconds):.1f} s over {len(seconds)} trials, against a {span:.1f} s window "
        f"({med / span:.2f} of it)"
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted: the running trial was stopped, nothing was printed for the scenario in progress")
        sys.exit(130)
