#!/usr/bin/env python
"""The manual routine's "Fast Command A" as a script of ours: the latest sweep's best rows, by util, with class and
action.

    python scripts/seed_summary.py [--root output/train | --sweep-dir DIR] [--vram-frac 0.95 ...]

That one-liner prints, for the newest `<root>/case_gpu_bench_*/best_by_case.tsv`, every `ok` row sorted by
`min_avg_util`: case, method, util, peak memory (max over GPUs), variant and num_envs. This prints the same
fields, then the row's class and action from the decision table (ladder/decide.py), then the rows that are not
`ok` (status and reason, class and action: a case whose trials all ended `error` has a row without num_envs whose
action is to fix the configuration, with its evidence and trial folder). It reads the TSV with ladder's own reader.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from ladder.core import figkeys
from ladder.core.caseclass import Thresholds, classify_row, validate
from ladder.core.errors import LadderError
from ladder.storage.tsv import read_tsv


def latest_sweep(root: Path) -> Path | None:
    """The routine's rule: the last `case_gpu_bench_*` folder in name order (names are UTC times or given names)."""
    found = sorted(root.glob("case_gpu_bench_*"))
    return found[-1] if found else None


def peak_mem(row: Mapping[str, str]) -> int:
    mems = [float(v) for v in figkeys.values(row, figkeys.MAX_MEM) if v]
    return int(max(mems, default=0.0))


def ok_line(row: Mapping[str, str], thresholds: Thresholds) -> str:
    cls, action = classify_row(row, thresholds)
    return (
        f"{row['case']} {row['method']} util {row['min_avg_util']} max_mem {peak_mem(row)} "
        f"variant {row['variant']} e {row['num_envs']} class {cls} action {action}"
    )


def other_line(row: Mapping[str, str], thresholds: Thresholds) -> str:
    cls, action = classify_row(row, thresholds)
    return f"{row['case']} {row['method']} status {row['status']} {row.get('reason', '')} class {cls} action {action}"


def summary(rows: list[dict[str, str]], thresholds: Thresholds) -> list[str]:
    ok = sorted((r for r in rows if r.get("status") == "ok"), key=lambda r: float(r.get("min_avg_util") or 0))
    rest = [r for r in rows if r.get("status") != "ok"]
    return [ok_line(r, thresholds) for r in ok] + [other_line(r, thresholds) for r in rest]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path("output/train"), help="where the sweeps live")
    p.add_argument("--sweep-dir", type=Path, default=None, help="one sweep folder (default: the latest under --root)")
    t = Thresholds()
    p.add_argument("--vram-frac", type=float, default=t.vram_frac, help="peak share of the card: VRAM-bound")
    p.add_argument("--compute-util", type=float, default=t.compute_util, help="util (%%) from which compute-heavy")
    p.add_argument("--low-util", type=float, default=t.low_util, help="util (%%) below which, with low memory, ...")
    p.add_argument("--low-mem-frac", type=float, default=t.low_mem_frac, help="... peak share counted as low")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sweep = args.sweep_dir or latest_sweep(args.root)
    if sweep is None or not (sweep / "best_by_case.tsv").is_file():
        print(f"no best_by_case.tsv under {args.sweep_dir or args.root}", file=sys.stderr)
        return 1
    try:
        thresholds = validate(Thresholds(args.vram_frac, args.compute_util, args.low_util, args.low_mem_frac))
    except LadderError as exc:
        print(f"seed_summary: {exc}", file=sys.stderr)
        return 2
    print(f"# {sweep / 'best_by_case.tsv'}")
    print("\n".join(summary(read_tsv(sweep / "best_by_case.tsv"), thresholds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
