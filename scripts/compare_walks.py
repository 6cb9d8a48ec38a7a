"""Two sweeps' walks side by side: each probe's (profile, rung, status) in order, and the pick; exit 1 if they differ.

    python scripts/compare_walks.py OUT/case_gpu_bench_gpu_demo OUT/case_gpu_bench_gpu_ballast

scripts/gpu_check.sh uses it to check that a card emulated by a ballast walks the demo as torch's memory fraction does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ladder.storage.tsv import read_tsv


def walk(sweep: Path) -> list[tuple[str, str, str]]:
    return [(r["variant"], r["num_envs"], r["status"]) for r in read_tsv(sweep / "trials.tsv") if r["phase"] == "probe"]


def pick(sweep: Path) -> list[tuple[str, str]]:
    best = sweep / "best_by_case.tsv"
    return [(r["variant"], r["num_envs"]) for r in read_tsv(best)] if best.exists() else []


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = (Path(p) for p in argv)
    for sweep in (a, b):
        print(f"{sweep.name}: walk {walk(sweep)}, pick {pick(sweep)}")
    same = walk(a) == walk(b) and pick(a) == pick(b)
    print("the same walk and pick" if same else "THE WALKS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
