"""What a trial's figures say of its course: the window it was measured on and the interval it was judged on, the
marks of its way there (cut, short, held, extended, futile, overtime, restarted), and whether its rate is narrow
enough to stand (`unstable`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ladder.core import warmup
from ladder.core.measure import usage
from ladder.core.measure.noise import Noise
from ladder.core.measure.rates import ci_frac
from ladder.core.measure.tdist import Z95
from ladder.core.measure.window import Window
from ladder.core.records import Sample, StopCause
from ladder.core.stop.course import Course, Limits, Mark, Observation
from ladder.core.stop.window import noise


def measured(samples: Sequence[Sample], obs: Observation, course: Course) -> dict[str, float]:
    """The window's figures (`usage.figures`), on the window only where it was measured to its end or cut."""
    window = course.window if course.cause is StopCause.WINDOW_DONE else None
    figures = usage.figures(samples, obs.points, window, course.terms.launch_t, *judged_on(course, obs, window))
    return early_figures(figures, course, obs)


def judged_on(course: Course, obs: Observation, window: Window | None) -> tuple[Noise | None, float | None]:
    """The interval a trial's samples/s figures say: the one it was judged on. A cut's, the case's pooled step noise
    at the cut's quantile (`noise.CUT_Z`); a window measured whole, the noise `window.noise` pools at the two-sided
    95% one, as its extension was decided; an insurance probe's, its own steps' (`cut.short_lost`)."""
    if Mark.SHORT in course.marks or window is None:
        return None, None
    if Mark.CUT in course.marks:
        return course.terms.noise, None
    pooled = noise(course, obs, window)
    return pooled, (Z95 if pooled is not None else None)


def early_figures(figures: dict[str, float], course: Course, obs: Observation) -> dict[str, float]:
    """A trial cut before its window opened: its samples/s the window its first steps predicted (the one or two
    steps between its points say nothing of the step noise, which the case's pool is not fed). A window measured
    whole: the gain of each of its first steps (`warmup.gains`), which later trials of the case predict from."""
    if course.predicted is not None:
        kept = {k: v for k, v in figures.items() if k not in ("step_sd_frac", "step_df", "noise_pooled_df")}
        return kept | course.predicted.figures()
    whole = course.cause is StopCause.WINDOW_DONE and not course.marks & {Mark.CUT, Mark.SHORT}
    if whole and "samples_per_s" in figures and not figures.get("rate_reported"):
        return figures | warmup.gains(obs.fresh, not obs.since_t, figures["samples_per_s"])
    return figures


def marked(figures: Mapping[str, float], course: Course, paused_s: float) -> dict[str, float]:
    """The figures a course's marks add to `figures` (a pause's as well), and its rate's interval verdict."""
    marks, out = course.marks, {}
    if Mark.CUT in marks:
        out["cut"] = 1.0
    if course.open_step_s is not None:
        out["cut_open_step_s"] = course.open_step_s
    out |= {m.value: 1.0 for m in (Mark.SHORT, Mark.HELD, Mark.OVERTIME) if m in marks}
    if paused_s:  # suspended with the sweep: out of its limits; a window it interrupted started again
        out |= {"paused_s": round(paused_s, 2), Mark.RESTARTED.value: float(Mark.RESTARTED in marks)}
    out |= interval_verdict({**figures, **out}, course.terms.limits, Mark.EXTENDED in marks)
    return out | ({Mark.FUTILE.value: 1.0} if Mark.FUTILE in marks else {})


def interval_verdict(figures: Mapping[str, float], limits: Limits, extended: bool) -> dict[str, float]:
    """Every measured rate says whether its interval is narrow enough (`unstable` 1: wider than max_ci_frac; the
    sweep replaces `unstable` with the verdict over every repeat of its configuration, `window_unstable` stays this
    window's own, `pick.window_wide`)."""
    frac = ci_frac(figures)
    if frac is None:
        return {}
    wide = float(frac > limits.max_ci_frac)
    out = {"ci_frac": round(frac, 4) if frac != float("inf") else 1e9, "unstable": wide, "window_unstable": wide}
    return out | ({Mark.EXTENDED.value: 1.0} if extended else {})
