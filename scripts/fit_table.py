"""Real trainers through `python -m ladder.search` with the default measurement (`measure=demo`), side by side: for
each rung, when its first progress came, its cadence, the window chosen, whether the stable rule opened it, its
memory peak against its cap, its verdict, and the pick. Prints a markdown table (docs/recipes.md keeps one) and
the command of each sweep.

    python scripts/fit_table.py OUT [--only NAME ...]

The recipes' scripts are taken from docs/recipes.md as a user copies them; the small trainers of tests/data/trainers
drive stable-baselines3 (PPO holding a rollout's memory at its first update, DQN given a learning rate that diverges).
Each sweep runs in OUT/<name>/ on CPU; a trainer whose package is missing is skipped, and said so.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.helpers import recipe  # noqa: E402  (the recipes' scripts and overrides, as docs/recipes.md writes them)

TRAINERS = REPO / "tests" / "data" / "trainers"


@dataclass(frozen=True)
class Sweep:
    name: str
    package: str  # the import that must be there
    overrides: tuple[str, ...]
    script: str = ""  # a recipe's script, written into the sweep's folder under its own name


def command(path: Path, *args: str) -> str:
    return "workload.command=[" + ",".join(["'{python}'", str(path), *args]) + "]"


def from_recipe(title: str, name: str, package: str, *extra: str) -> Sweep:
    script, overrides = recipe(title)
    return Sweep(name, package, (*overrides, *extra), script)


SWEEPS = (
    Sweep(
        "sb3_ppo_grab",
        "stable_baselines3",
        (
            "case=sb3_ppo",
            "workload.kind=command",
            command(TRAINERS / "sb3_ppo.py", "--n-envs", "'{num_envs}'", "--grab-mb-per-env", "48"),
            "workload.progress_regex=sb3",
            "ladder.rungs=[32,4]",
            "profile=[default]",
            "workload.host_mem_limit_gb=1",
        ),
    ),
    Sweep(
        "sb3_dqn_nan",
        "stable_baselines3",
        (
            "case=sb3_dqn",
            "workload.kind=command",
            command(TRAINERS / "sb3_dqn.py", "--n-envs", "'{num_envs}'", "--diverge-above", "4"),
            "workload.progress_regex=sb3",
            "ladder.rungs=[8,2]",
            "profile=[default]",
        ),
    ),
    from_recipe("torchrun DDP with Lightning", "lightning_ddp2", "lightning", "workload.host_mem_limit_gb=1.5"),
    from_recipe("rsl_rl", "rsl_rl", "rsl_rl", "ladder.rungs=[1024,256]"),
    from_recipe("sheeprl", "sheeprl", "sheeprl", "ladder.rungs=[16,4]"),
)


def run(sweep: Sweep, out: Path) -> tuple[list[dict[str, str]], list[dict[str, str]], str, float]:
    where = out / sweep.name
    where.mkdir(parents=True, exist_ok=True)
    if sweep.script:
        name = re.search(r"# (\S+\.py)", sweep.script)
        assert name is not None, sweep.name
        (where / name.group(1)).write_text(sweep.script)
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        *sweep.overrides,
        "device=cpu",
        f"output_root={where}/out",
        "sweep=t",
        "workload.env.OMP_NUM_THREADS=1",
    ]
    began = time.monotonic()
    subprocess.run(argv, cwd=where, capture_output=True, text=True, timeout=3600)
    took = time.monotonic() - began
    folder = where / "out" / "case_gpu_bench_t"
    mine = (f"output_root={where}/out", "sweep=t")  # where this script keeps it: not part of the command shown
    shown = shlex.join(["python", "-m", "ladder.search", *(a for a in argv[3:] if a not in mine)])
    shown = shown.replace(f"{REPO}/", "")
    return _read(folder / "trials.tsv"), _read(folder / "best_by_case.tsv"), shown, took


def _read(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _s(row: dict[str, str], key: str) -> str:
    return "-" if (text := _f(row, key)) == "-" else f"{text} s"


def _f(row: dict[str, str], key: str, fmt: str = "{:.1f}") -> str:
    value = row.get(key, "")
    try:
        return fmt.format(float(value))
    except ValueError:
        return "-"


def _cadence(row: dict[str, str]) -> str:
    per_s = row.get("iters_per_s", "")
    try:
        return f"{1.0 / float(per_s):.2f} s"
    except (ValueError, ZeroDivisionError):
        return "-"


def _peak(row: dict[str, str]) -> str:
    if row.get("cgroup_limit_mb"):
        return f"{_f(row, 'cgroup_peak_mb', '{:.0f}')}/{_f(row, 'cgroup_limit_mb', '{:.0f}')} MiB (cgroup)"
    return f"{_f(row, 'max_mem0', '{:.0f}')} MiB rss, no cap"


def table(results: list[tuple[Sweep, list[dict[str, str]], list[dict[str, str]], str, float]]) -> str:
    head = (
        "| trainer | rung | first progress | cadence | window (from, length) | gated | peak / cap | verdict | pick |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for sweep, trials, best, _, _ in results:
        pick = next((f"e{b['num_envs']}" for b in best if b.get("status") == "ok" and b.get("num_envs")), "none")
        for row in trials:
            window = f"{_s(row, 'window_start_s')}, {_s(row, 'window_s')}" if row.get("window_s") else "-"
            verdict = row["status"] + (f"/{row['reason']}" if row.get("reason") else "")
            lines.append(
                f"| {sweep.name} | e{row['num_envs']} | {_s(row, 'first_step_s')} | {_cadence(row)} | {window} | "
                f"{row.get('gated') or '-'} | {_peak(row)} | {verdict} | {pick} |"
            )
    return head + "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*", default=None, help="run only these sweeps (by name)")
    args = parser.parse_args()
    results = []
    for sweep in SWEEPS:
        if args.only and sweep.name not in args.only:
            continue
        if importlib.util.find_spec(sweep.package) is None:
            print(f"skipped {sweep.name}: {sweep.package} is not installed", file=sys.stderr)
            continue
        trials, best, shown, took = run(sweep, args.out)
        print(f"{sweep.name}: {len(trials)} trial(s) in {took:.0f} s", file=sys.stderr)
        results.append((sweep, trials, best, shown, took))
    print(table(results))
    for sweep, _, _, shown, took in results:
        print(f"- {sweep.name} ({took:.0f} s): `{shown}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
