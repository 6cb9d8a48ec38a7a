"""Every card's answer from one card's trials, measured: a case swept on one card (samples/s, so that it measures
below its largest fit too: two points at least), its memory model's prediction for the other cards, then each
other card swept three times from a copy of that output root: with history, with `history=false` (the first
card's failures still reused) and from the top (`history=false reuse=false`).

    python scripts/bench_cards.py --case amp_pi_plus --cards 2,0.8,4 --window-s 3
    python scripts/bench_cards.py --case amp_humanoid --cards 4,2,8

Prints per (case, profile, card) the predicted rung and its basis, each sweep's largest fit for the profile, the
launches and the trial time with and without history, and the totals: how many cells the prediction got right (the
issue's "Done when": at least 90%), and the launches with history as a share of those without.
The built-in proxy under emulated cards (`workload.emulate_gpu_mem_gb`), on CPU unless `--device cuda`
(`--set workload.emulate_by=ballast`: a ballast holds the rest of the GPU); `--root` keeps the sweeps.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ladder.storage.tsv import read_tsv
from ladder.sweep import cards

DEFAULT_LADDER = "4096,2048,1024,512,256,128,64"
TOP = ["history=false", "reuse=false"]  # a walk from the top of the ladder, as before any sweep of the case


@dataclass(frozen=True)
class Swept:
    """One sweep: its picks per profile, the trials it launched (not reused) per profile, their seconds, its wall."""

    picks: dict[str, str]
    launches: dict[str, list[str]]
    trial_s: dict[str, float]
    wall_s: float


def search(root: Path, name: str, common: Sequence[str], *extra: str) -> Swept:
    argv = [sys.executable, "-m", "ladder.search", f"output_root={root}", f"sweep={name}", *common, *extra]
    start = time.monotonic()
    done = subprocess.run(argv, cwd=root.parent, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        raise SystemExit(f"bench_cards: the sweep {name} failed ({done.returncode})")
    every = read_tsv(root / f"case_gpu_bench_{name}" / "trials.tsv")
    launches: dict[str, list[str]] = {}
    took: dict[str, float] = {}
    for t in (t for t in every if not t.get("reused_from")):
        launches.setdefault(t["variant"], []).append(f"{t['num_envs']}{'' if t['status'] == 'ok' else '!'}")
        took[t["variant"]] = took.get(t["variant"], 0.0) + float(t.get("duration_s") or 0)
    return Swept(largest_fits(every), launches, took, wall)


def largest_fits(trials: Sequence[dict[str, str]]) -> dict[str, str]:
    """Each profile's largest fit (its largest `ok` rung, reused ones included): what the prediction is of, and
    what each profile's walk settles (best_by_case.tsv keeps one row per case, the objective's pick among them)."""
    fits: dict[str, int] = {}
    for t in trials:
        if t["status"] == "ok" and t.get("phase", "probe") == "probe":
            fits[t["variant"]] = max(fits.get(t["variant"], 0), int(t["num_envs"]))
    return {profile: str(rung) for profile, rung in fits.items()}


def predicted(sweep_dir: Path, cards_gb: Sequence[float]) -> dict[tuple[str, float], tuple[str, str]]:
    """(profile, card) -> (the predicted rung, its basis), from the first sweep's memory model (emulated card)."""
    table = cards.for_sweep(sweep_dir, cards_gb)
    out = {}
    for group, answers in table.answers.items():
        if group.cap == "emulated card":
            for a in answers:
                out[(group.profile, a.card_gb)] = (str(a.rung) if a.rung is not None else "-", str(a.basis))
    return out


def bench_case(case: str, cards_gb: Sequence[float], common: Sequence[str], where: Path) -> list[dict[str, str]]:
    first, others = cards_gb[0], cards_gb[1:]
    base = where / case / "base" / "train"
    base.mkdir(parents=True)
    card = "workload.emulate_gpu_mem_gb"
    search(base, "first", common, f"case={case}", "objective=samples_per_s", f"{card}={first}")
    guess = predicted(base / "case_gpu_bench_first", others)
    rows = []
    for gb in others:
        runs = {}
        # with history; without it (the first card's failures still reused); from the top (nothing reused)
        for mode, extra in (("warm", ["history=true"]), ("cold", ["history=false"]), ("top", TOP)):
            root = where / case / f"{mode}_{gb:g}" / "train"
            shutil.copytree(base, root)  # each sweep sees the first card's trials only
            runs[mode] = search(root, f"{mode}_{gb:g}", common, f"case={case}", f"{card}={gb}", *extra)
        for profile in sorted(runs["cold"].picks.keys() | runs["warm"].picks.keys() | runs["cold"].launches.keys()):
            rung, basis = guess.get((profile, gb), ("-", "no model"))
            warm, cold, top = runs["warm"], runs["cold"], runs["top"]
            rows.append(
                {
                    "case": case,
                    "profile": profile,
                    "card_gb": f"{gb:g}",
                    "predicted": rung,
                    "basis": basis,
                    "pick": cold.picks.get(profile, "-"),
                    "pick_history": warm.picks.get(profile, "-"),
                    "launches": str(len(cold.launches.get(profile, []))),
                    "launches_history": str(len(warm.launches.get(profile, []))),
                    "launches_top": str(len(top.launches.get(profile, []))),
                    "trial_s": f"{cold.trial_s.get(profile, 0):.0f}",
                    "trial_s_history": f"{warm.trial_s.get(profile, 0):.0f}",
                    "walk": " ".join(cold.launches.get(profile, [])),
                    "walk_history": " ".join(warm.launches.get(profile, [])),
                }
            )
    return rows


def show(rows: Sequence[dict[str, str]]) -> str:
    cols = list(rows[0]) if rows else []
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(r[c].ljust(width[c]) for c in cols) for r in rows]
    right = sum(1 for r in rows if r["predicted"] == r["pick"])
    same = sum(1 for r in rows if r["pick"] == r["pick_history"])
    cold = sum(int(r["launches"]) for r in rows)
    warm = sum(int(r["launches_history"]) for r in rows)
    top = sum(int(r["launches_top"]) for r in rows)
    cold_s = sum(float(r["trial_s"]) for r in rows)
    warm_s = sum(float(r["trial_s_history"]) for r in rows)
    lines += [
        "",
        f"predicted = the pick without history: {right} of {len(rows)} cells ({right / max(len(rows), 1):.0%})",
        f"the same pick with and without history: {same} of {len(rows)}",
        f"launches: {warm} with history, {cold} without ({warm / max(cold, 1):.0%}); "
        f"trial time {warm_s:.0f} s with, {cold_s:.0f} s without ({warm_s / max(cold_s, 1):.0%})",
        f"launches from the top (history=false reuse=false): {top}; with history {warm / max(top, 1):.0%} of them",
        "(a walk: each launch's rung, ! where it failed)",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", help="a case (repeat it for several); default amp_pi_plus")
    ap.add_argument("--cards", default="2,0.8,4", help="GB: the first is swept, the others predicted and swept")
    ap.add_argument("--window-s", type=float, default=3.0, help="each trial's window (measure.window_s)")
    ap.add_argument("--ladder", default=DEFAULT_LADDER, help="the rungs, highest first (default: the default ladder)")
    ap.add_argument("--profiles", default="default", help="the profiles, comma-separated")
    ap.add_argument("--root", type=Path, help="keep the sweeps here (default: a temporary folder, removed)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (scripts/gpu_check.sh: under the ballast)")
    ap.add_argument("--set", action="append", default=[], help="one more override for every sweep (repeat it)")
    args = ap.parse_args(argv)
    cards_gb = [float(c) for c in args.cards.split(",")]
    common = [
        f"device={args.device}",
        f"profile=[{args.profiles}]",
        f"ladder.rungs=[{args.ladder}]",
        f"measure.window_s={args.window_s:g}",
        "measure.warmup_iters=2",
        "measure.stable_tol=0.5",
        "measure.min_window_iters=2",
        "measure.extend_unstable=false",
        "measure.stable_k=1",
        "workload.nproc=1",
        "case.agent.steps_per_iter=8",
        f"cards=[{','.join(f'{c:g}' for c in cards_gb)}]",
        *args.set,
    ]
    where = args.root or Path(tempfile.mkdtemp(prefix="bench_cards_"))
    try:
        rows = [row for case in args.case or ["amp_pi_plus"] for row in bench_case(case, cards_gb, common, where)]
    finally:
        if args.root is None:
            shutil.rmtree(where, ignore_errors=True)
    print(show(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
