"""How often the early cut (`trial._beaten`) stops a trial whose true rate is at or above what it must beat.

The cut looks again at every new window step: it stops the trial once the top of the samples/s interval
(`stats.ratio_interval`, 95% two-sided, so 2.5% one-sided at one look) falls below the value to beat. Looking
at every step spends that 2.5% again at each look, so the chance of a wrong cut over a whole window is larger.
This simulates it with synthetic steps (equal durations, samples/s per step normal with the given spread, the
window's step count as in a real trial) and prints, for true rates around the value to beat, the share of trials
cut: above 1.00 every cut is a wrong one.

    python scripts/sim_cut.py [--cv 0.08] [--steps 10] [--trials 4000]
"""

from __future__ import annotations

import argparse
import random

from ladder.core.stats import ratio_interval

BEAT = 1000.0


def cut_share(ratio: float, cv: float, steps: int, trials: int, rnd: random.Random) -> float:
    cuts = 0
    for _ in range(trials):
        xs: list[float] = []
        ys: list[float] = []
        for _ in range(steps):
            xs.append(1.0)
            ys.append(BEAT * ratio * max(0.05, rnd.gauss(1.0, cv)))
            if len(xs) >= 2 and ratio_interval(ys, xs)[2] < BEAT:
                cuts += 1
                break
    return cuts / trials


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cv", type=float, default=0.08, help="spread of one step's samples/s (8%%: the proxy on CPU)")
    p.add_argument("--steps", type=int, default=10, help="window steps a full trial has")
    p.add_argument("--trials", type=int, default=4000)
    args = p.parse_args()
    rnd = random.Random(1)
    for ratio in (0.90, 0.95, 1.00, 1.02, 1.05):
        share = cut_share(ratio, args.cv, args.steps, args.trials, rnd)
        print(
            f"true rate {ratio:.2f} x the value to beat: cut in {share:6.1%} of trials"
            + ("  (wrong cuts)" if ratio >= 1 else "")
        )


if __name__ == "__main__":
    main()
