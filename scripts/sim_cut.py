"""How often the early cut (`stop.cut.beaten`) stops a trial whose true rate is at or above what it must beat.

The cut looks again at every new window step: it stops the trial once the top of the samples/s interval
(`rates.ratio_interval`, 95% two-sided, so 2.5% one-sided at one look) falls below the value to beat. Looking
at every step spends that 2.5% again at each look, so the chance of a wrong cut over a whole window is larger.
This simulates it with synthetic steps (equal durations, samples/s per step normal with the given spread, the
window's step count as in a real trial) and prints, for true rates around the value to beat, the share of trials
cut and the steps a cut took: above 1.00 every cut is a wrong one. Both rules side by side: the steps' own interval,
and the one with the case's pooled step noise (`noise.Noise`, estimated on `--pooled-df` degrees of freedom, drawn
afresh for each trial as such an estimate strays: each look at 0.5% one-sided).

    python scripts/sim_cut.py [--cv 0.08] [--steps 10] [--trials 4000] [--pooled-df 6] [--trial-cv 0.16]
    python scripts/sim_cut.py --open-step
    python scripts/sim_cut.py --short [--short-steps 3]
    python scripts/sim_cut.py --predict [--steps 15]
    python scripts/sim_cut.py --early [--looks 2] [--history 1] [--warm 0.0] [--warm-cv 0.0] [--slowing 0.0]
    python scripts/sim_cut.py --coverage [--cv 0.03] [--trial-cv 0.06] [--pooled-df 6] [--settled-steps 3]
                              [--settled-cv 0.03]

`--trial-cv`: the simulated trials' own spread, where it is not the pool's (a configuration noisier than the case's
others). `--open-step`: the spread is in each step's seconds instead, and the cut also counts the step in progress
(`bounds.open_step_upper`), looked at `LOOKS` times while each step runs (the real loop looks every 0.1 s): the share
of trials cut and the seconds a cut took (a step at the value to beat lasts 1 s), with and without it.
`--short`: an insurance probe (`stop.cut.short_lost`): ended once its short window (`--short-steps` steps) closes
with its rate below the value to beat, against that or, from its second step on, once its rate's top at
`bounds.SHORT_Z` standard errors is below it (`bounds.rate_top`): the share of probes ended so (at or above 1.00:
a rung that could have won, missed) and the steps that took.
`--predict`: the cut on where the window would end (`bounds.final_upper`) against the one on the rate's own top
(`bounds.rate_upper`), both with the pooled noise, judged against what the whole window would have said: the share of
trials cut, the steps that took, and the share cut whose whole window would have reached the value to beat.
`--early`: the cut before the window opens (`stop.cut.early_beaten`, `warmup.Warmup.predict`): `--history` trials of
the case measured a whole window (`--steps` steps) and their first steps' gains; a new trial is looked at after each
of its first `--looks` steps (the first reported by the trainer, as the proxy does; 2 where the window opens at the
third point): the share cut and the steps that took. `--warm`: each trial's first step is that much slower (a
fraction of a step) on average, `--warm-cv` its spread from trial to trial (a one-off cost that differs by rung).
`--slowing`: every trial's first steps run that much faster than its window (a share of the window's rate: a
trainer that slows once its first steps are behind it, as the proxy's update does while its buffers fill).
`--coverage`: a whole window's 95% interval (`rates.ratio_interval` at `Z95`), on its own steps against on the
case's pooled step noise where `rates.whole_window_noise` pools it (`stop.record.judged_on`), for windows of 3 to 10
steps: the share whose interval misses the true rate (5% is what a 95% interval promises) and the share wider than
`MAX_CI_FRAC` (such a window is extended, `stop.window.closed`). `--settled-steps`: the steady steps before the window
(the stable rule's `stable_k`) join the pool (`stop.window.noise`); `--pooled-df 0` with it: a case's first window, with
no pool of the case's yet; `--settled-cv` with it: those steps' own spread, where it is not the window's (a machine
that got busy as the window opened).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

from ladder.core import warmup
from ladder.core.measure.bounds import SHORT_Z, final_upper, open_step_upper, rate_top, rate_upper
from ladder.core.measure.noise import Noise
from ladder.core.measure.rates import ratio_interval, whole_window_noise
from ladder.core.measure.repeats import MAX_CI_FRAC
from ladder.core.measure.tdist import Z95
from ladder.core.measure.window import Window
from ladder.core.records import Point

BEAT = 1000.0
BAND = 0.05  # the run-to-run band (`pick.RUN_TO_RUN`) that `final_upper` is given
LOOKS = 20  # looks at the step in progress while it runs (--open-step)


def cut_share(
    ratio: float, cv: float, steps: int, trials: int, rnd: random.Random, noise: Noise | None = None
) -> tuple[float, float]:
    """The share of trials cut, and the mean steps a cut took (0 without cuts)."""
    cuts, at = 0, 0
    for _ in range(trials):
        pool = noise and noise._replace(sd_frac=noise.sd_frac * _chi_ratio(noise.df, rnd))  # an estimate, not the truth
        xs: list[float] = []
        ys: list[float] = []
        for _ in range(steps):
            xs.append(1.0)
            ys.append(BEAT * ratio * max(0.05, rnd.gauss(1.0, cv)))
            if len(xs) >= 2 and ratio_interval(ys, xs, pool)[2] < BEAT:
                cuts, at = cuts + 1, at + len(xs)
                break
    return cuts / trials, at / cuts if cuts else 0.0


def cut_time(
    ratio: float,
    cv: float,
    steps: int,
    trials: int,
    rnd: random.Random,
    noise: Noise | None,
    open_step: bool,
    slow: tuple[int, float] = (0, 1.0),
) -> tuple[float, float]:
    """`cut_share` with the spread in each step's seconds: the share of trials cut, and the mean seconds a cut
    took (a step at the value to beat is 1 s); with `open_step`, the step in progress counts too. `slow`: from
    that step on, each takes that many times longer (a trainer that starts thrashing)."""
    cuts, spent = 0, 0.0
    for _ in range(trials):
        pool = noise and noise._replace(sd_frac=noise.sd_frac * _chi_ratio(noise.df, rnd))
        pts = [Point(t=0.0, iter=0, samples=0.0)]
        for i in range(1, steps + 1):
            seconds = 1.0 / (ratio * max(0.05, rnd.gauss(1.0, cv))) * (slow[1] if slow[0] and i >= slow[0] else 1.0)
            start = pts[-1].t
            if open_step and len(pts) >= 3:
                looks = [start + seconds * k / LOOKS for k in range(1, LOOKS)]
                at = next((t for t in looks if _below(open_step_upper(pts, 0.0, t, pool))), None)
                if at is not None:
                    cuts, spent = cuts + 1, spent + at
                    break
            pts.append(Point(t=start + seconds, iter=i, samples=BEAT * i))
            if len(pts) >= 3 and _below(rate_upper(pts, 0.0, pool)):
                cuts, spent = cuts + 1, spent + pts[-1].t
                break
    return cuts / trials, spent / cuts if cuts else 0.0


def predict_share(
    ratio: float, cv: float, steps: int, trials: int, rnd: random.Random, noise: Noise, predict: bool
) -> tuple[float, float, float]:
    """The cut against what the whole window would say: the share of trials cut, the mean steps a cut took, and
    the share of trials cut whose whole window (`steps` steps) would have ended at or above the value to beat (a
    wrong cut: that window could have made it the pick). With `predict`, the cut on the window's final rate
    (`bounds.final_upper`, the window's end at `steps`) instead of the rate's own top (`bounds.rate_upper`)."""
    cuts, at, wrong = 0, 0, 0
    for _ in range(trials):
        pool = noise._replace(sd_frac=noise.sd_frac * _chi_ratio(noise.df, rnd))
        pts = [Point(t=0.0, iter=0, samples=0.0)]
        for i in range(1, steps + 1):
            pts.append(
                Point(t=float(i), iter=i, samples=pts[-1].samples + BEAT * ratio * max(0.05, rnd.gauss(1.0, cv)))
            )
        final = pts[-1].samples / pts[-1].t
        for n in range(2, steps):
            seen = pts[: n + 1]
            upper = final_upper(seen, 0.0, float(steps), BAND, pool) if predict else rate_upper(seen, 0.0, pool)
            if _below(upper):
                cuts, at, wrong = cuts + 1, at + n, wrong + (final >= BEAT)
                break
    return cuts / trials, at / cuts if cuts else 0.0, wrong / trials


def short_share(
    ratio: float, cv: float, steps: int, trials: int, rnd: random.Random, noise: Noise, early: bool
) -> tuple[float, float]:
    """An insurance probe's short window of `steps` steps: the share of probes it ended (its rate below the value to
    beat when it closes; with `early`, also once `rate_top` at `SHORT_Z` is below it from the second step on), and
    the mean steps an ending took."""
    ends, at = 0, 0
    for _ in range(trials):
        pool = noise._replace(sd_frac=noise.sd_frac * _chi_ratio(noise.df, rnd))
        pts = [Point(t=0.0, iter=0, samples=0.0)]
        for i in range(1, steps + 1):
            pts.append(Point(t=pts[-1].t + 1.0, iter=i, samples=pts[-1].samples + BEAT * ratio * rnd.gauss(1.0, cv)))
            closed = i == steps and pts[-1].samples / pts[-1].t < BEAT
            if closed or (early and i >= 2 and _below(rate_top(pts, 0.0, SHORT_Z, pool))):
                ends, at = ends + 1, at + i
                break
    return ends / trials, at / ends if ends else 0.0


def early_share(
    ratio: float, cv: float, args: argparse.Namespace, rnd: random.Random, noise: Noise
) -> tuple[float, float]:
    """The cut before the window opens: the share of trials at `ratio` times the value to beat that it cuts, and
    the mean steps a cut took; the case's `args.history` whole windows give the gains it predicts with."""
    cuts, at = 0, 0
    for _ in range(args.trials):
        pool = noise._replace(sd_frac=noise.sd_frac * _chi_ratio(noise.df, rnd))
        figures = []
        for _ in range(args.history):
            seen = _first_points(1.0 + args.slowing, cv, args, rnd)
            window = [BEAT * max(0.05, rnd.gauss(1.0, cv)) for _ in range(args.steps)]
            figures.append(warmup.gains(seen, True, sum(window) / len(window)))
        early = warmup.pooled(figures, pool)
        assert early is not None
        points = _first_points(ratio * (1.0 + args.slowing), cv, args, rnd)
        for n in range(1, args.looks + 1):
            first = warmup.steps(points[:n], True)
            predicted = early.predict(first)
            if predicted is not None and predicted.reach(BAND, args.steps, pool) < BEAT:
                cuts, at = cuts + 1, at + n
                break
    return cuts / args.trials, at / cuts if cuts else 0.0


def _first_points(ratio: float, cv: float, args: argparse.Namespace, rnd: random.Random) -> list[Point]:
    """A trial's first `warmup.EARLY_K` points at `ratio` times the value to beat: one second of samples per step,
    the first step slower by a drawn warm-up share (`--warm`, `--warm-cv`), which it reports as its step time."""
    points: list[Point] = []
    for i in range(1, warmup.EARLY_K + 1):
        seconds = 1.0 + (max(0.0, rnd.gauss(args.warm, args.warm_cv)) if i == 1 else 0.0)
        t, samples = (points[-1].t if points else 0.0) + seconds, points[-1].samples if points else 0.0
        step = BEAT * ratio * max(0.05, rnd.gauss(1.0, cv))
        points.append(Point(t=t, iter=i, samples=samples + step, step_time_s=seconds))
    return points


def coverage(
    cv: float,
    steps: int,
    trials: int,
    rnd: random.Random,
    noise: Noise | None,
    settled: int = 0,
    settled_cv: float | None = None,
) -> tuple[float, float]:
    """Whole windows of `steps` steps at the true rate `BEAT`: the share whose 95% interval misses it, and the share
    wider than `MAX_CI_FRAC` of their rate. With `noise`, the interval pools it as a trial's figures do
    (`rates.whole_window_noise`: not for a window noisier than `rates.POOL_GATE` times it), with the spread of
    `settled` steps of the trial's own before its window (`rates.steady_noise`) joined to it, ungated."""
    missed = wide = 0
    for _ in range(trials):
        pool = noise and noise._replace(sd_frac=noise.sd_frac * _chi_ratio(noise.df, rnd))  # an estimate, not the truth
        ys = [BEAT * max(0.05, rnd.gauss(1.0, settled_cv or cv)) for _ in range(settled)]
        ys += [BEAT * max(0.05, rnd.gauss(1.0, cv)) for _ in range(steps)]
        points = [Point(float(i), i, sum(ys[:i])) for i in range(settled + steps + 1)]
        window = Window(float(settled), float(settled + steps), gated=True)
        judged = whole_window_noise(points, window, pool if pool and pool.df else None, settled)
        ys = ys[settled:]
        rate, lo, hi = ratio_interval(ys, [1.0] * steps, judged, Z95 if judged else None)
        missed += not lo <= BEAT <= hi
        wide += (hi - lo) / rate > MAX_CI_FRAC
    return missed / trials, wide / trials


def _below(upper: float | None) -> bool:
    return upper is not None and upper < BEAT


def _chi_ratio(df: float, rnd: random.Random) -> float:
    """sqrt(chi2(df) / df): how far a spread estimated on `df` degrees of freedom strays from the true one."""
    k = max(1, round(df))
    return float((sum(rnd.gauss(0.0, 1.0) ** 2 for _ in range(k)) / k) ** 0.5)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cv", type=float, default=0.08, help="spread of one step's samples/s (8%%: the proxy on CPU)")
    p.add_argument("--steps", type=int, default=10, help="window steps a full trial has")
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--pooled-df", type=float, default=6.0, help="degrees of freedom of the case's pooled noise")
    p.add_argument("--trial-cv", type=float, default=None, help="the trials' own spread (default: --cv)")
    p.add_argument("--open-step", action="store_true", help="spread in seconds; with and without the open step")
    p.add_argument("--short", action="store_true", help="an insurance probe's short window, with and without rate_top")
    p.add_argument("--short-steps", type=int, default=3, help="steps in the short window (--short)")
    p.add_argument("--predict", action="store_true", help="the cut on the window's final rate, against its own top")
    p.add_argument("--early", action="store_true", help="the cut on the first steps, before the window opens")
    p.add_argument("--looks", type=int, default=2, help="first steps looked at before the window opens (--early)")
    p.add_argument("--history", type=int, default=1, help="whole windows the gains come from (--early)")
    p.add_argument("--warm", type=float, default=0.0, help="the first step's extra time, a share of a step (--early)")
    p.add_argument("--warm-cv", type=float, default=0.0, help="its spread from trial to trial (--early)")
    p.add_argument("--slowing", type=float, default=0.0, help="first steps this much faster than the window (--early)")
    p.add_argument("--coverage", action="store_true", help="a whole window's 95%% interval, own against pooled")
    p.add_argument("--settled-steps", type=int, default=0, help="steady steps before the window (--coverage)")
    p.add_argument("--settled-cv", type=float, default=None, help="their spread (default: the trials')")
    args = p.parse_args()
    noise, cv = Noise(args.cv, args.pooled_df), args.trial_cv or args.cv
    if args.coverage:
        for window_steps in (3, 4, 5, 7, 10):
            n, settled = window_steps, (args.settled_steps, args.settled_cv)
            own = coverage(cv, n, args.trials, random.Random(1), None)
            pooled = coverage(cv, n, args.trials, random.Random(1), noise, *settled)
            print(
                f"{window_steps:2d} steps: interval misses the rate in {own[0]:5.1%} of windows on their own steps "
                f"({own[1]:5.1%} wide), {pooled[0]:5.1%} on the pooled noise ({pooled[1]:5.1%} wide)"
            )
        return
    if args.early:
        for ratio in (0.50, 0.60, 0.70, 0.75, 0.80, 0.90, 0.95, 1.00, 1.02):
            share, steps = early_share(ratio, cv, args, random.Random(1), noise)
            wrong = "  (wrong cuts)" if ratio >= 1 else ""
            print(
                f"true rate {ratio:.2f} x the value to beat: cut in {share:6.1%} of trials ({steps:3.1f} steps){wrong}"
            )
        return
    if args.predict:
        for ratio in (0.80, 0.90, 0.95, 0.97, 1.00, 1.02, 1.05):
            rows = [
                predict_share(ratio, cv, args.steps, args.trials, random.Random(1), noise, k) for k in (False, True)
            ]
            print(
                f"true rate {ratio:.2f} x the value to beat: cut in {rows[0][0]:6.1%} of trials ({rows[0][1]:4.1f} "
                f"steps; wrong {rows[0][2]:5.2%}) on the rate's top, {rows[1][0]:6.1%} ({rows[1][1]:4.1f} steps; wrong "
                f"{rows[1][2]:5.2%}) on the final rate's"
            )
        return
    if args.short:
        side_by_side(
            (0.85, 0.90, 0.95, 1.00, 1.02, 1.05, 1.10),
            lambda r, early: short_share(r, cv, args.short_steps, args.trials, random.Random(1), noise, early),
            ": ended in {0:6.1%} of probes at the short window's end ({1:3.1f} steps), {2:6.1%} with rate_top too "
            "({3:3.1f} steps)",
            "missed",
        )
        return
    if args.open_step:
        side_by_side(
            (0.60, 0.75, 0.90, 0.95, 1.00, 1.02, 1.05),
            lambda r, open_step: cut_time(r, cv, args.steps, args.trials, random.Random(1), noise, open_step),
            " (pooled noise): cut in {0:6.1%} of trials on completed steps ({1:4.2f} s), {2:6.1%} counting the open "
            "step ({3:4.2f} s)",
            "wrong cuts",
        )
        for by in (2.0, 4.0, 10.0):
            slow = (5, by)
            done, done_s = cut_time(1.05, cv, args.steps, args.trials, random.Random(1), noise, False, slow)
            both, both_s = cut_time(1.05, cv, args.steps, args.trials, random.Random(1), noise, True, slow)
            print(
                f"1.05 x the value to beat for 4 steps, then {by:.0f} x slower: cut in {done:6.1%} of trials on "
                f"completed steps ({done_s:4.2f} s), {both:6.1%} counting the open step ({both_s:4.2f} s)"
            )
        return
    side_by_side(
        (0.60, 0.75, 0.90, 0.95, 1.00, 1.02, 1.05),
        lambda r, pooled: cut_share(r, cv, args.steps, args.trials, random.Random(1), noise if pooled else None),
        ": cut in {0:6.1%} of trials (own interval, {1:4.1f} steps), {2:6.1%} (pooled noise, {3:4.1f} steps)",
        "wrong cuts",
    )


def side_by_side(
    ratios: tuple[float, ...], run: Callable[[float, bool], tuple[float, float]], said: str, wrong: str
) -> None:
    """One line per true rate (a multiple of the value to beat): `run` without and with the variant, as `said` puts
    their shares and costs after it; `wrong` marks the rates at or above the value to beat."""
    for ratio in ratios:
        share, cost = run(ratio, False)
        other, other_cost = run(ratio, True)
        print(
            f"true rate {ratio:.2f} x the value to beat{said.format(share, cost, other, other_cost)}"
            + (f"  ({wrong})" if ratio >= 1 else "")
        )


if __name__ == "__main__":
    main()
