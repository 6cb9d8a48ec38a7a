"""Run one trial: launch, watch (progress, window, stall, time limit), stop, classify, measure.

The watch loop is a handful of named checks on each tick; a trial always ends with its whole process group
dead and reaped, Ctrl-C included (then it is recorded `interrupted` and the interrupt goes on up).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ladder.core import paths, pick, stats, warmup
from ladder.core.records import (
    HEALTHY_STOPS,
    Confidence,
    Ending,
    Objective,
    Point,
    Reason,
    Sample,
    Status,
    StopCause,
    Verdict,
)
from ladder.core.spec import TrialSpec
from ladder.failures import diverged, files, patterns, rules
from ladder.runner import launch, procs, suspend
from ladder.runner.cgroup import Usage
from ladder.runner.evidence import Evidence
from ladder.runner.monitor import Monitor, Sampler, write_samples
from ladder.settings.config import MeasureConf
from ladder.workloads.progress import Follow, reader_for

log = logging.getLogger(__name__)

TICK_S = 0.1
SHORT_FRAC = 0.25  # an insurance probe's short window, as a share of measure.window_s
# Stops after which nothing of the trial needs an orderly end: its figures (a window measured to its end, or cut)
# or its failure evidence are on disk already. The group is killed at once; SIGTERM would cost torchrun's own
# shutdown (0.85 s, measured), and up to `kill_grace_s` for a trainer that lingers at it.
KILL_AT_ONCE = frozenset({StopCause.OUT_OF_MEMORY, StopCause.WINDOW_DONE, StopCause.DIVERGED})
LOG_TAIL_BYTES = 256 * 1024
MIB = 1024 * 1024
# An extension ends (or is not made) once the steps so far project its interval wider than this many times
# `max_ci_frac` at its end: at 1, once it is more likely to end wide than narrow. Running on for an interval that
# ends wide anyway costs up to a whole `window_s`, and a second launch after it where `recheck_unstable` is on; giving
# up on one that would have narrowed costs an `unstable` figure (that second launch, where it is on)
FUTILE_MARGIN = 1.0
SHOWN_LINES = 3  # lines of the trainer's own output a "no progress matched" verdict shows
# ladder's own SIGTERM, echoed back by torchrun or the trainer: never the trainer's evidence
OWN_SIGNAL = re.compile(r"SignalException|got signal: 15\b|Received Signals\.SIGTERM|signal SIGTERM|Terminated$")


@dataclass
class Watch:
    """What the loop has seen so far."""

    launch_t: float  # unix time of launch
    last_progress_mono: float
    points: list[Point] = field(default_factory=list)
    window: stats.Window | None = None
    stopped_by: StopCause = StopCause.NONE
    beat: float | None = None  # samples/s this trial must beat to matter; below it, its window closes early
    noise: stats.Noise | None = None  # the case's pooled step noise the cut and the interval judge on (`run`)
    early: warmup.Warmup | None = None  # the case's first-step gains: a cut before the window opens (`_early_beaten`)
    predicted: warmup.Prediction | None = None  # ... which it was, on this prediction of its window
    cut: bool = False  # the window closed early: the trial measured clearly less than `beat`
    open_step_s: float | None = None  # ... decided on the step in progress, which had run this long (no point yet)
    short_s: float | None = None  # an insurance probe: past this much window, a rate below `beat` ends it
    short: bool = False  # ... and it did
    extended: bool = False  # the window was extended once: its samples/s interval was wider than max_ci_frac
    futile: bool = False  # ... or was not, or its extension ended early: its steps could not narrow it (`_futile`)
    unsettled: str = ""  # why the closed window cannot stand for a fit yet (memory still rising, no update in it)
    held: bool = False  # the window ran past window_s, held open while its memory was unsettled
    overtime: bool = False  # it ran past trial_timeout_s, printing steadily, its window due within budget_s
    due_s: float | None = None  # when its window could close, seconds from launch at its pace (at the last look)
    pauses: tuple[int, float] = (0, 0.0)  # `suspend.PAUSES` (count, total) at launch: the pauses before it
    paused_s: float = 0.0  # how long the sweep and this trial were suspended together (Ctrl-Z): out of every limit
    since_t: float = 0.0  # the window opens on points from here on: after the last pause, measured afresh
    restarted: bool = False  # a pause came while its window was open: the window started again after it
    per_iteration: bool = True  # each progress point is a whole iteration (`TrialSpec.progress_per_iteration`)
    cadence_s: float = 0.0  # the window length cadence and settling are judged on (`run`'s `cadence_s`)
    tail: str = ""  # the progress file's tail when ladder decided to stop it (before its own SIGTERM is echoed)
    samples: Callable[[], list[Sample]] = list  # the monitor's samples so far (is the trainer visibly busy?)

    def fresh(self) -> list[Point]:
        """The points since the last pause (all of them where there was none): its pace and its window's."""
        return [p for p in self.points if p.t >= self.since_t] if self.since_t else self.points


@dataclass(frozen=True)
class Tick:
    """What a live view shows of the running trial."""

    elapsed_s: float
    phase: str  # "warm-up", "window", "stopping"
    iteration: int
    window_frac: float  # 0..1 of the window measured so far
    latest: tuple[Sample, ...]  # the newest sample of each device
    waiting: str = ""  # why a window whose time is up is still open: points it lacks, held for a fit, extended


OnTick = Callable[[Tick], None]


@dataclass(frozen=True)
class Result:
    verdict: Verdict
    figures: dict[str, float]
    exit_code: int
    duration_s: float
    leftovers: int  # processes of the trial found alive after the stop (and then killed)
    source: str = ""  # nvml or host: what the figures were sampled from
    stopped_by: StopCause = StopCause.NONE  # why ladder stopped it (NONE: it ended by itself)
    known: dict[str, object] = field(default_factory=dict)  # what its folder does not show (`files.known`)


def run(
    spec: TrialSpec,
    trial_dir: Path,
    trial_id: str,
    measure: MeasureConf,
    make_sampler: Callable[[int], Sampler],
    mem_limit_bytes: int | None = None,
    on_tick: OnTick | None = None,
    beat: float | None = None,
    short: bool = False,
    card_mb: float | None = None,
    cadence_s: float | None = None,
    noise: stats.Noise | None = None,
    early: warmup.Warmup | None = None,
) -> Result:
    """Launch, watch, stop and measure one trial. With `beat` (samples/s), the window closes as soon as the
    rate's measured interval lies wholly below it: the trial cannot matter, and its figures say `cut`. A `short`
    one (insurance the evidence says is unlikely to pay, `policy.rising`) closes after `SHORT_FRAC` of its window
    once its rate is below `beat`, its interval notwithstanding, or sooner once its steady steps are clearly below it
    (`_short_lost`; figures `cut` and `short`). `card_mb`: the GPU's
    memory, where the trial runs on a real card (its peak must stay clear of it). `cadence_s`: the window length
    a trainer's cadence is learnt and its memory judged settled on (`stats.outlived_peak`), where it is not this
    trial's own (a confirmation's long window judges on the probes' one). `noise`: the case's step noise pooled over
    its earlier windows on this machine (`stats.pooled_noise`); with it the cut judges a trial's first steps by that
    spread instead of theirs alone, at a stricter quantile (`stats.Noise.half`). A whole window's interval, whether
    it is wide enough to extend and the one its figures say, pools that noise (where the window is no noisier) and
    the spread of the steady steps that opened it, at 95% (`_noise`, `_judged_on`): a window of three or four steps
    says little of its own spread. `early`: the
    case's first-step gains (`warmup.pooled`); with them a clear loser is cut on its settled first steps before its
    window opens (`_early_beaten`), its figures the window they predict (`early_steps`)."""
    running = launch.start(spec, trial_dir, trial_id, mem_limit_bytes)
    short_s = measure.window_s * SHORT_FRAC if short and beat is not None else None
    watch = Watch(
        launch_t=time.time(),
        last_progress_mono=running.started_mono,
        beat=beat,
        noise=noise,
        early=early,
        short_s=short_s,
        per_iteration=spec.progress_per_iteration,
        cadence_s=cadence_s or measure.window_s,
        pauses=(suspend.PAUSES.count, suspend.PAUSES.total_s),
    )
    monitor = Monitor(make_sampler(running.proc.pid), measure.sample_hz).start()
    watch.samples = lambda: monitor.samples
    progress = reader_for(
        str(spec.progress_kind.value),
        trial_dir / spec.progress_file,
        spec.progress_regex,
        spec.progress_samples_per_iter,
    )
    evidence = Evidence(trial_dir)
    try:
        _watch(
            running,
            watch,
            progress,
            measure,
            evidence,
            lambda: on_tick and on_tick(_tick(watch, monitor, running, measure.min_window_iters)),
        )
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (see search.py): the result says `interrupted`
        watch.stopped_by = StopCause.INTERRUPTED
    finally:  # any other exception still stops and reaps the group before it goes on up
        result = _finish(running, watch, progress, monitor, trial_dir, measure, card_mb)
        _write_result(trial_dir, result)
    if result.verdict.status is Status.ERROR and patterns.NO_SPACE.search(result.verdict.evidence):
        # the disk was full, not the configuration broken: not recorded, so that it runs again once there is room
        raise OSError(errno.ENOSPC, f"the trainer ran out of disk space: {result.verdict.evidence}", str(trial_dir))
    return result


def _watch(
    running: launch.Running,
    watch: Watch,
    progress: Follow,
    measure: MeasureConf,
    evidence: Evidence,
    tick: Callable[[], object],
) -> None:
    while running.proc.poll() is None:
        _after_pause(watch)
        _take_progress(watch, progress)
        started_mono = running.started_mono + watch.paused_s  # a pause is not the trial's time
        watch.stopped_by = (
            _stop_reason(watch, measure, started_mono) or _out_of_memory(evidence, running) or _diverged(evidence)
        )
        if watch.stopped_by:
            watch.tail = _tail(progress.path)
            return
        tick()
        with contextlib.suppress(subprocess.TimeoutExpired):  # back at once where the trial ends meanwhile
            running.proc.wait(TICK_S)


def _after_pause(watch: Watch) -> None:
    """After the sweep was suspended with this trial (`ladder.runner.suspend`): the pause counts toward no limit,
    and the window, open or not, is measured afresh on the points after it (a window across a pause would measure
    the pause)."""
    count, total = suspend.PAUSES.count - watch.pauses[0], suspend.PAUSES.total_s - watch.pauses[1]
    if total <= watch.paused_s or not count:
        return
    watch.last_progress_mono += total - watch.paused_s
    watch.paused_s, watch.since_t = total, suspend.PAUSES.last_end_t
    if watch.window is not None:
        watch.window, watch.restarted, watch.extended, watch.unsettled = None, True, False, ""
        watch.futile = False


def _tick(watch: Watch, monitor: Monitor, running: launch.Running, min_points: int = 0) -> Tick:
    now = time.time()
    window = watch.window
    frac = 0.0 if window is None else min(1.0, max(0.0, (now - window.start_t) / (window.end_t - window.start_t)))
    latest = {s.index: s for s in monitor.samples[-32:] if s.source == monitor.sampler.source}
    return Tick(
        elapsed_s=time.monotonic() - running.started_mono,
        phase="warm-up" if window is None else "window",
        iteration=watch.points[-1].iter if watch.points else 0,
        window_frac=frac,
        latest=tuple(latest[i] for i in sorted(latest)),
        waiting=_waiting(watch, min_points) if window is not None and frac >= 1.0 else "",
    )


def _waiting(watch: Watch, min_points: int) -> str:
    """Why a window whose time is up is still open, in a few words for the live view."""
    assert watch.window is not None
    if (have := stats.window_points(watch.window, watch.points)) < min_points:
        return f"{have}/{min_points} points"
    if watch.unsettled:
        return "held for a fit: " + watch.unsettled
    return "extended: its interval is wide" if watch.extended else ""


def _take_progress(watch: Watch, progress: Follow) -> None:
    new = progress.read_new()
    if new:
        watch.points.extend(new)
        watch.last_progress_mono = time.monotonic()


def _stop_reason(watch: Watch, measure: MeasureConf, started_mono: float) -> StopCause:
    now_mono = time.monotonic()
    if watch.window is None:
        rule = stats.Rule(measure.warmup_iters, measure.stable_k, measure.stable_tol, measure.data_time_max_s)
        watch.window = stats.open_window(watch.fresh(), time.time(), measure.window_s, rule, measure.warmup_timeout_s)
    if watch.window is not None and _window_done(watch, measure):
        return StopCause.WINDOW_DONE
    beat = watch.beat
    if watch.window is None and beat is not None and _early_beaten(watch, beat, measure):
        return StopCause.WINDOW_DONE
    if watch.window is not None and beat is not None and (_beaten(watch, beat, measure) or _short_lost(watch, measure)):
        return StopCause.WINDOW_DONE
    silent_s = now_mono - watch.last_progress_mono
    if watch.points and silent_s > stats.stall_limit_s(watch.fresh(), measure.stall_timeout_s):
        return StopCause.STALLED
    if now_mono - started_mono > measure.trial_timeout_s:
        if (watch.extended or watch.unsettled) and watch.window is not None:  # out of time: the window it had stands
            watch.window = replace(watch.window, end_t=watch.points[-1].t)
            return StopCause.WINDOW_DONE
        if _within_budget(watch, measure, now_mono - started_mono):
            watch.overtime = True
            return StopCause.NONE
        return StopCause.TRIAL_TIMEOUT
    # before the first progress line: a slow first update is not a hang while the trainer visibly works
    if not watch.points and silent_s > max(measure.stall_timeout_s, measure.startup_timeout_s):
        busy = stats.busy(watch.samples(), time.time() - measure.stall_timeout_s)
        return StopCause.NONE if busy else StopCause.STALLED
    return StopCause.NONE


def _within_budget(watch: Watch, measure: MeasureConf, elapsed_s: float) -> bool:
    """Past `trial_timeout_s`: a trainer that prints steadily runs on while, at its pace so far, its window can
    close within `budget_s` of its launch (`watch.due_s` keeps that projection for the verdict)."""
    plan = stats.Plan(
        measure.warmup_iters, measure.stable_k, measure.warmup_timeout_s, measure.window_s, measure.min_window_iters
    )
    due = stats.close_by(watch.fresh(), watch.window, time.time(), plan)
    watch.due_s = None if due is None else due - watch.launch_t - watch.paused_s
    return watch.due_s is not None and elapsed_s <= measure.budget_s and watch.due_s <= measure.budget_s


def _window_done(watch: Watch, measure: MeasureConf) -> bool:
    """The window holds `min_window_iters` points and `window_s` has passed, and the trial's memory has outlived its
    peak (`stats.outlived_peak`: no new peak for a while, an update inside the window where progress comes in
    bursts); once, a rate whose interval is wider than `max_ci_frac` extends it by another `window_s`
    (`measure.extend_unstable`), and the extension ends at the first point where the interval over the whole
    window is no wider than that (`_narrow_enough`): it runs for the steps the interval lacked, not always a
    whole second window. Nor for steps that cannot narrow it (`_futile`): a window whose steps, going on as they
    have until the extension's end, would still leave it wider than that (`FUTILE_MARGIN`) is not extended, or its
    extension ends there; its rate stands `unstable` (`window_futile` 1), as it would have at the end."""
    assert watch.window is not None
    closed = stats.close_window(watch.window, watch.points, measure.min_window_iters)
    if closed is None and watch.extended:
        closed = _narrow_enough(watch, measure) or _futile(watch, measure)
    if closed is None:
        return False
    watch.unsettled = stats.outlived_peak(watch.samples(), watch.fresh(), closed, watch.cadence_s, watch.per_iteration)
    if watch.unsettled:  # it goes on, taking each new point, until its memory outlives its peak (or its budget ends)
        watch.held = True
        return False
    wide = (stats.window_ci_frac(watch.points, closed, _noise(watch, closed, measure)) or 0.0) > measure.max_ci_frac
    if wide and measure.extend_unstable and not watch.extended:
        extended = replace(watch.window, end_t=closed.end_t + measure.window_s)
        if not _hopeless(watch, closed, extended.end_t, measure):
            watch.window, watch.extended = extended, True
            return False
    watch.window = closed
    return True


def _futile(watch: Watch, measure: MeasureConf) -> stats.Window | None:
    """An extended window, closed at its newest point once its steps so far say the rest of the extension cannot
    bring its interval within `max_ci_frac` (`_hopeless`); None while it still may."""
    assert watch.window is not None
    now = _so_far(watch, measure)
    return now if now is not None and _hopeless(watch, now, watch.window.end_t, measure) else None


def _so_far(watch: Watch, measure: MeasureConf) -> stats.Window | None:
    """The open window up to its newest point, once it holds `min_window_iters` points (None before)."""
    assert watch.window is not None
    if not watch.points:
        return None
    now = replace(watch.window, end_t=watch.points[-1].t)
    return now if stats.window_points(now, watch.points) >= max(1, measure.min_window_iters) else None


def _hopeless(watch: Watch, window: stats.Window, until_t: float, measure: MeasureConf) -> bool:
    """Running `window` on to `until_t` would, at its steps' pace and spread so far, leave its interval wider than
    `FUTILE_MARGIN` times `max_ci_frac` (`stats.projected_ci_frac`); then `watch.futile` says so."""
    projected = stats.projected_ci_frac(watch.points, window, until_t, _noise(watch, window, measure))
    watch.futile = projected is not None and projected > FUTILE_MARGIN * measure.max_ci_frac
    return watch.futile


def _narrow_enough(watch: Watch, measure: MeasureConf) -> stats.Window | None:
    """An extended window, closed at its newest point once the samples/s interval over all of it is within
    `max_ci_frac` (None while it is wider)."""
    now = _so_far(watch, measure)
    ci = None if now is None else stats.window_ci_frac(watch.points, now, _noise(watch, now, measure))
    return now if ci is not None and ci <= measure.max_ci_frac else None


def _out_of_memory(evidence: Evidence, running: launch.Running) -> StopCause:
    """A rank ran out of memory: stop the trial at this first evidence (its verdict is read from the same files)."""
    oom_kills = running.cgroup.oom_kills() if running.cgroup else 0
    return StopCause.OUT_OF_MEMORY if evidence.check(oom_kills) is not None else StopCause.NONE


def _diverged(evidence: Evidence) -> StopCause:
    """A rank printed its training gone NaN or infinite (read with the memory evidence): stop the trial at that line."""
    return StopCause.DIVERGED if evidence.diverged else StopCause.NONE


def _beaten(watch: Watch, beat: float, measure: MeasureConf) -> bool:
    """The steady steps so far say the window would end below `beat` (`stats.final_upper`: the rate's top, narrowed
    as the window runs out, since only its steps still to come can move it); then the window ends here.
    They are the window's and the `stable_k` that opened it (`stats.stable_since`): a clear loser is cut as its
    window opens, and its figures are those steps'. The interval is the steps' own, or with the case's pooled step
    noise (`watch.noise`) the pooled one: a few steps of a trial say little of their own spread."""
    assert watch.window is not None
    since = stats.stable_since(watch.fresh(), watch.window, measure.stable_k)
    upper = stats.final_upper(
        watch.points, since, watch.window.end_t, pick.noise_of(Objective.SAMPLES_PER_S), watch.noise
    )
    if upper is None or upper >= beat:
        upper = _open_step_upper(watch, since, measure)
        if upper is None or upper >= beat:
            return False
        watch.open_step_s = round(time.time() - watch.points[-1].t, 2)
    watch.window, watch.cut = replace(watch.window, start_t=since, end_t=watch.points[-1].t), True
    return True


def _early_beaten(watch: Watch, beat: float, measure: MeasureConf) -> bool:
    """Before its window opens: the window its settled first steps predict (`warmup.Warmup.predict`) would end
    below `beat` even at its top, as a tie would reach it (`warmup.Prediction.reach`); then it is cut there, its
    figures the prediction's. Only steps the case's whole windows showed steady count, so a trainer still warming up
    runs on to its window, where `_beaten` judges it on its own steps."""
    if watch.early is None or not watch.points:
        return False
    first = warmup.steps(watch.fresh(), first=not watch.since_t)
    predicted = watch.early.predict(first)
    if predicted is None:
        return False
    pace_s = sum(step.seconds for step, _ in first) / len(first)
    band = pick.noise_of(Objective.SAMPLES_PER_S)
    if predicted.reach(band, measure.window_s / pace_s, watch.early.noise) >= beat:
        return False
    watch.window = stats.Window(predicted.start_t, watch.points[-1].t, gated=True)
    watch.cut, watch.predicted = True, predicted
    return True


def _open_step_upper(watch: Watch, since: float, measure: MeasureConf) -> float | None:
    """The rate's top with the step in progress counted as ending now (`stats.open_step_upper`): a trial whose
    next step is already too slow for it to matter is cut without waiting for that step. Where points come in
    bursts, the pause in progress is the update, which the rate counts once it ends as well. Not once the silence is
    long enough to be a stall: a hang is a stall, not a loser's window."""
    if not watch.points:
        return None
    now = time.time()
    if now - watch.points[-1].t > stats.stall_limit_s(watch.fresh(), measure.stall_timeout_s):
        return None
    return stats.open_step_upper(watch.points, since, now, watch.noise)


def _short_lost(watch: Watch, measure: MeasureConf, min_points: int = 3) -> bool:
    """An insurance probe's short window has closed (`short_s`, and at least `min_points` points) with a rate below
    `beat`, or its steps so far are already `stats.SHORT_Z` standard errors below it (`stats.rate_top`): its window
    ends there. Like the cut (`_beaten`), it counts from the steady steps that opened the window
    (`stats.stable_since`): they are as steady as the window's own, so a probe whose warm-up already spans its short
    window, or whose first steady steps lie clearly below `beat`, is judged as its window opens."""
    if watch.short_s is None or watch.window is None or watch.beat is None:
        return False
    since = stats.stable_since(watch.fresh(), watch.window, measure.stable_k)
    top = stats.rate_top(watch.points, since, stats.SHORT_Z, watch.noise)
    if top is not None and top < watch.beat:
        watch.window = replace(watch.window, start_t=since, end_t=watch.points[-1].t)
        watch.cut = watch.short = True
        return True
    short = stats.close_window(
        replace(watch.window, start_t=since, end_t=since + watch.short_s), watch.points, min_points
    )
    if short is None:
        return False
    rate = stats.figures([], watch.points, short, watch.launch_t).get("samples_per_s")
    if rate is None or rate >= watch.beat:
        watch.short_s = None  # it may win: the rest of its window decides, under the usual cut
        return False
    watch.window, watch.cut, watch.short = short, True, True
    return True


def _finish(
    running: launch.Running,
    watch: Watch,
    progress: Follow,
    monitor: Monitor,
    trial_dir: Path,
    measure: MeasureConf,
    card_mb: float | None = None,
) -> Result:
    # A window measured to its end (or a stop at a line of diverged training): the trial was healthy when ladder
    # stopped it, and what its processes print as they are killed (a worker's broken pipe to its dead parent) is no
    # evidence: the logs count as far as they were.
    upto = files.sizes(trial_dir) if watch.stopped_by in HEALTHY_STOPS else None
    code = launch.stop(running, 0.0 if watch.stopped_by in KILL_AT_ONCE else measure.kill_grace_s)
    samples: list[Sample] = monitor.stop()
    _take_progress(watch, progress)
    left = procs.kill_trial(running.trial_id, cgroups=())
    for pid in left:
        log.warning("trial %s left process %d alive after the stop; killed it", running.trial_id, pid)
    write_samples(samples, trial_dir / paths.SAMPLES)
    ending = _ending(trial_dir, code, watch.stopped_by, running, upto)
    window = watch.window if watch.stopped_by is StopCause.WINDOW_DONE else None
    figures = stats.figures(samples, watch.points, window, watch.launch_t, *_judged_on(watch, window, measure))
    figures = _early_figures(figures, watch)
    verdict = _settled(
        _with_last_progress(rules.classify(ending), watch.tail, progress), watch, measure, progress, trial_dir
    )
    verdict = _with_cgroup_oom(verdict, running, watch.stopped_by)
    figures |= cap_figures(progress.path) | cgroup_figures(running.cgroup_usage)
    verdict = _confident_fit(verdict, figures, watch.unsettled, measure, card_mb)
    verdict = _unread_before(_learned(verdict, ending, progress.path), watch)
    figures |= {"sampler_cpu_s": round(monitor.cpu_s, 3)}
    if watch.cut:
        figures["cut"] = 1.0
    if watch.open_step_s is not None:
        figures["cut_open_step_s"] = watch.open_step_s
    if watch.short:
        figures["short"] = 1.0
    if watch.held:
        figures["window_held"] = 1.0
    if watch.overtime:  # a slow but steady trainer, run past trial_timeout_s within its budget
        figures["overtime"] = 1.0
    if watch.paused_s:  # suspended with the sweep: out of its limits; a window it interrupted started again
        figures |= {"paused_s": round(watch.paused_s, 2), "window_restarted": float(watch.restarted)}
    figures |= _interval_verdict(figures, measure, watch.extended) | ({"window_futile": 1.0} if watch.futile else {})
    duration = round(time.monotonic() - running.started_mono, 2)
    known = files.known(trial_dir, ending, upto)
    return Result(verdict, figures, code, duration, len(left), stats.source_of(samples), watch.stopped_by, known)


def _judged_on(
    watch: Watch, window: stats.Window | None, measure: MeasureConf
) -> tuple[stats.Noise | None, float | None]:
    """The interval a trial's samples/s figures say: the one it was judged on. A cut's, the case's pooled step noise
    at the cut's quantile (`stats.CUT_Z`); a window measured whole, the noise `_noise` pools at the two-sided 95%
    one, as its extension was decided (`_window_done`); an insurance probe's, its own steps' (`_short_lost` ends it
    on its own top)."""
    if watch.short or window is None:
        return None, None
    if watch.cut:
        return watch.noise, None
    pooled = _noise(watch, window, measure)
    return pooled, (stats.Z95 if pooled is not None else None)


def _noise(watch: Watch, window: stats.Window, measure: MeasureConf) -> stats.Noise | None:
    """The step noise a whole window's interval pools (`stats.whole_window_noise`): the case's (`watch.noise`), where
    the window's steps are no noisier, and that of the steady steps that opened it, so that a case's first window,
    with no pool yet, still counts more than its own few steps' spread."""
    return stats.whole_window_noise(watch.fresh(), window, watch.noise, measure.stable_k)


def _learned(verdict: Verdict, ending: Ending, progress_file: Path) -> Verdict:
    """A fit whose trainer printed its training gone NaN or infinite (`ladder.failures.diverged`) is `diverged`:
    its memory fits, but it is no setting to train with. (A trial stopped at such a line in its logs is `diverged`
    already, by `rules.classify`; this finds one in a progress file of its own too, read once the trial is over.)"""
    if verdict.status is not Status.OK:
        return verdict
    own = progress_file.name == paths.STDOUT or progress_file.suffix == ".log"  # read with the logs already
    texts = [ending.log_text, *ending.rank_logs.values(), "" if own else _tail(progress_file)]
    return diverged.verdict(texts) or verdict


def _unread_before(verdict: Verdict, watch: Watch) -> Verdict:
    """A trial that went NaN before ladder read any progress line of it is `diverged`, but its progress setting may
    be wrong as well (a regex that matches nothing reads no line, and would be `no_progress_match` without the NaN):
    its evidence says so, so that the fix of one does not hide the other."""
    if verdict.status is not Status.DIVERGED or watch.points:
        return verdict
    return replace(
        verdict,
        evidence=f"{verdict.evidence} (and no progress line was read before it: if the trainer printed any, "
        "workload.progress / workload.progress_regex does not match it)",
    )


def _early_figures(figures: dict[str, float], watch: Watch) -> dict[str, float]:
    """A trial cut before its window opened: its samples/s the window its first steps predicted (the one or two
    steps between its points say nothing of the step noise, which the case's pool is not fed). A window measured
    whole: the gain of each of its first steps (`warmup.gains`), which later trials of the case predict from."""
    if watch.predicted is not None:
        kept = {k: v for k, v in figures.items() if k not in ("step_sd_frac", "step_df", "noise_pooled_df")}
        return kept | watch.predicted.figures()
    whole = watch.stopped_by is StopCause.WINDOW_DONE and not (watch.cut or watch.short)
    if whole and "samples_per_s" in figures and not figures.get("rate_reported"):
        return figures | warmup.gains(watch.fresh(), not watch.since_t, figures["samples_per_s"])
    return figures


def _confident_fit(
    verdict: Verdict, figures: dict[str, float], unsettled: str, measure: MeasureConf, card_mb: float | None
) -> Verdict:
    """A survivor is a fit only if its window outlived its memory peak and the peak stayed clear of its cap; else it
    is weak `oom_or_nccl` evidence (`near_cap`, `memory_rising`): the walk runs the rung once more, and a second such
    outcome steps down. Its figures stay, but no pick is made from them."""
    if verdict.status is not Status.OK:
        return verdict
    if unsettled:
        return Verdict(
            Status.OOM_OR_NCCL,
            Reason.MEMORY_RISING,
            f"survived its budget (measure.trial_timeout_s={measure.trial_timeout_s:g} s), but {unsettled}",
            Confidence.LOW,
            "no whole cycle was measured: its memory may still reach its cap",
        )
    if near := stats.near_cap(figures, card_mb, measure.cap_headroom_frac):
        return Verdict(
            Status.OOM_OR_NCCL,
            Reason.NEAR_CAP,
            f"survived at {near}",
            Confidence.LOW,
            "a fit this near its cap is not a confident one (measure.cap_headroom_frac)",
        )
    return verdict


def cap_figures(progress_file: Path) -> dict[str, float]:
    """The emulated card (`cap_mb`) and the most of it the trainer used (`cap_used_mb`, max over ranks), where
    the trainer reports them in its JSON lines (the proxy does); the memory model compares the two."""
    cap, used = 0.0, 0.0
    for line in _tail(progress_file).splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        cap = float(rec.get("cap_mb") or cap) if isinstance(rec, dict) else cap
        ranks = rec.get("cap_used_mb") if isinstance(rec, dict) else None
        used = max([used, *(float(u) for u in ranks)]) if isinstance(ranks, list) and ranks else used
    return {"cap_mb": cap, "cap_used_mb": round(used, 1)} if cap and used else {}


def cgroup_figures(usage: Usage | None) -> dict[str, float]:
    """The memory a host cap limits: the cgroup's peak (every process of the trial together, page cache included),
    and the cap itself where one was set (`workload.host_mem_limit_gb`)."""
    if usage is None or not usage.peak_bytes:
        return {}
    limit = {"cgroup_limit_mb": round(usage.limit_bytes / MIB, 1)} if usage.limit_bytes else {}
    return {"cgroup_peak_mb": round(usage.peak_bytes / MIB, 1)} | limit


def _with_cgroup_oom(verdict: Verdict, running: launch.Running, stopped_by: StopCause) -> Verdict:
    """The kernel killed a process of the trial for the cgroup's cap: that is the cause, whatever the parent did
    after (an EOFError from its dead worker, an exit code 1, a hang). Only a stop by the user keeps its verdict."""
    usage = running.cgroup_usage
    if usage is None or usage.oom_kills <= 0 or stopped_by is StopCause.INTERRUPTED:
        return verdict
    name = running.cgroup.path.name if running.cgroup is not None else "?"
    found = f"memory cgroup {name} counted {usage.oom_kills} OOM kill(s) (peak {usage.peak_bytes / MIB:.0f} MiB)"
    also = "" if verdict.evidence.startswith("memory cgroup") or not verdict.evidence else f"; {verdict.evidence}"
    return Verdict(patterns.status_of(Reason.HOST_OOM), Reason.HOST_OOM, found + also)


def _with_last_progress(verdict: Verdict, tail: str, progress: Follow) -> Verdict:
    """A stalled trial's evidence: the last progress line it wrote before it went silent (the last one its regex
    matches, for a regex over a log; never ladder's own SIGTERM echoed back: the tail is the one read when ladder
    decided to stop it)."""
    if verdict.reason is not Reason.STALLED:
        return verdict
    pattern = getattr(progress.parser, "pattern", None)
    lines = [line for line in _own_lines(tail) if not isinstance(pattern, re.Pattern) or pattern.search(line)]
    return replace(verdict, evidence=f"{verdict.evidence}; last progress: {lines[-1] if lines else '(none)'}")


def _settled(verdict: Verdict, watch: Watch, measure: MeasureConf, progress: Follow, trial_dir: Path) -> Verdict:
    """What only the watch knows: a trainer that printed but never a line the reader matched is a setting to fix
    (error, never a step-down); one that survived without enough window points is `unmeasured`, not `ok`."""
    survived = verdict.status is Status.OK or verdict.reason in (Reason.STALLED, Reason.TRIAL_TIMEOUT)
    if not watch.points and survived:
        printed = _own_lines(_tail(trial_dir / paths.STDOUT))
        if printed or verdict.status is Status.OK:
            shown = " | ".join(line[:200] for line in printed[-SHOWN_LINES:]) or "(nothing)"
            return Verdict(
                Status.ERROR,
                Reason.NO_PROGRESS_MATCH,
                f"no line matched {_reader(progress)}: fix the progress setting (workload.progress_regex or "
                f"a preset, workload.progress_file); its last lines: {shown}",
            )
        return verdict
    done = watch.stopped_by is StopCause.WINDOW_DONE
    if verdict.status is Status.OK and not done or verdict.reason is Reason.TRIAL_TIMEOUT and watch.points:
        held = stats.window_points(watch.window, watch.points) if watch.window is not None else 0
        return Verdict(
            Status.UNMEASURED,
            Reason.FEW_POINTS,
            f"survived, but its window held {held} progress point(s) of the {measure.min_window_iters} "
            f"needed: no figures; {_budget_advice(watch, measure)}",
        )
    return verdict


def _budget_advice(watch: Watch, measure: MeasureConf) -> str:
    """What would measure a trainer that ran out of time: at its pace, the budget its window needs."""
    pace = stats.pace_s(watch.fresh())
    if watch.due_s is None or pace is None:
        return (
            f"try a longer measure.budget_s (now {measure.budget_s:g} s; measure.trial_timeout_s "
            f"{measure.trial_timeout_s:g} s) or a trainer setting that prints progress more often"
        )
    need = max(measure.trial_timeout_s, math.ceil(watch.due_s * 1.1 / 60) * 60)  # a tenth more, in whole minutes
    return (
        f"at its pace ({pace:.3g} s per progress point) its window would close about {watch.due_s:.0f} s after "
        f"launch: measure.budget_s={need:g} would measure it (now {measure.budget_s:g} s), or a trainer setting "
        f"that prints progress more often"
    )


def _interval_verdict(figures: dict[str, float], measure: MeasureConf, extended: bool) -> dict[str, float]:
    """Every measured rate says whether its interval is narrow enough (`unstable` 1: wider than max_ci_frac; the
    sweep replaces `unstable` with the verdict over every repeat of its configuration, `window_unstable` stays this
    window's own, `pick.window_wide`)."""
    frac = stats.ci_frac(figures)
    if frac is None:
        return {}
    wide = float(frac > measure.max_ci_frac)
    out = {"ci_frac": round(frac, 4) if frac != float("inf") else 1e9, "unstable": wide, "window_unstable": wide}
    return out | ({"window_extended": 1.0} if extended else {})


def _reader(progress: Follow) -> str:
    pattern = getattr(progress.parser, "pattern", None)
    what = f"the regex {pattern.pattern!r}" if isinstance(pattern, re.Pattern) else type(progress.parser).__name__
    return f"{what} in {progress.path.name}"


def _own_lines(text: str) -> list[str]:
    """The non-blank lines of a log tail, less ladder's own stop echoed back."""
    return [s for line in text.splitlines() if (s := line.strip()) and not OWN_SIGNAL.search(s)]


def _ending(
    trial_dir: Path, code: int, stopped_by: StopCause, running: launch.Running, upto: dict[Path, int] | None
) -> Ending:
    """What the folder holds (the log, torchrun's per-rank logs and error files: read as `ladder.failures` reads any
    trial folder, as far as `upto`), and what only the running trial knows: why ladder stopped it, the cgroup's OOM
    kills."""
    found = files.load_ending(trial_dir, code, upto)
    oom_kills = running.cgroup_usage.oom_kills if running.cgroup_usage is not None else 0  # read before its removal
    return replace(found, stopped_by=stopped_by, oom_kills=oom_kills)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _write_result(trial_dir: Path, result: Result) -> None:
    (trial_dir / paths.EXIT_CODE).write_text(f"{result.exit_code}\n")
    recorded = rules.as_json(result.verdict) | result.known
    (trial_dir / paths.VERDICT).write_text(json.dumps(recorded, indent=1) + "\n")
