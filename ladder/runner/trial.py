"""Run one trial: launch it, watch it (read its progress, ask the stop rules of `ladder.core.stop`), stop it,
classify it (`ladder.failures.refine`) and measure it.

A trial always ends with its whole process group dead and reaped, Ctrl-C included (then it is recorded
`interrupted` and the interrupt goes on up).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ladder.core import paths, stop, warmup
from ladder.core.measure import hostmem
from ladder.core.measure.cadence import pace_s
from ladder.core.measure.noise import Noise
from ladder.core.measure.usage import source_of
from ladder.core.measure.window import window_points
from ladder.core.records import HEALTHY_STOPS, Ending, Point, Sample, Status, StopCause, Verdict
from ladder.core.spec import TrialSpec
from ladder.core.stop import record
from ladder.failures import files, patterns, refine, rules
from ladder.runner import launch, procs, suspend
from ladder.runner.cgroup import Usage
from ladder.runner.evidence import Evidence
from ladder.runner.monitor import Monitor, Sampler, write_samples
from ladder.settings.config import MeasureConf
from ladder.workloads.progress import Follow, numbered, reader_for

log = logging.getLogger(__name__)

TICK_S = 0.1
SHORT_FRAC = 0.25  # an insurance probe's short window, as a share of measure.window_s
# Stops after which nothing of the trial needs an orderly end: its figures (a window measured to its end, or cut)
# or its failure evidence are on disk already. The group is killed at once; SIGTERM would cost torchrun's own
# shutdown (0.85 s, measured), and up to `kill_grace_s` for a trainer that lingers at it.
KILL_AT_ONCE = frozenset({StopCause.OUT_OF_MEMORY, StopCause.WINDOW_DONE, StopCause.DIVERGED})
LOG_TAIL_BYTES = 256 * 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class TrialRequest:
    """What one trial needs (torch elastic's `WorkerSpec` is the model): built once, by the sweep or a test."""

    spec: TrialSpec
    trial_dir: Path
    trial_id: str  # every process of the trial carries it (`ladder.runner.procs`)
    measure: MeasureConf
    mem_limit_bytes: int | None = None  # the memory cgroup's cap (None: none)
    beat: float | None = None  # samples/s it must beat to matter: below it, its window closes early (`cut`)
    short: bool = False  # an insurance probe: its window closes after SHORT_FRAC of it, once below `beat`
    card_mb: float | None = None  # the GPU's memory, where it runs on a real card: its peak must stay clear of it
    cadence_s: float | None = None  # the window its cadence and memory are judged on, where not its own
    noise: Noise | None = None  # the case's step noise pooled over earlier windows (`noise.pooled_noise`)
    early: warmup.Warmup | None = None  # the case's first-step gains (`warmup.pooled`): a cut before its window

    def course(self, launch_t: float) -> stop.Course:
        """The course its watch starts from: what it is judged against, nothing seen yet."""
        m = self.measure
        terms = stop.Terms(
            m,
            launch_t,
            self.beat,
            self.noise,
            self.early,
            self.cadence_s or m.window_s,
            self.spec.progress_per_iteration,
            numbered(str(self.spec.progress_kind.value), self.spec.progress_regex),
        )
        return stop.Course(terms, short_s=m.window_s * SHORT_FRAC if self.short and self.beat is not None else None)


@dataclass
class Watch:
    """What the loop has read so far, and the course the stop rules made of it."""

    course: stop.Course
    last_progress_mono: float
    points: list[Point] = field(default_factory=list)
    pauses: tuple[int, float] = (0, 0.0)  # `suspend.PAUSES` (count, total) at launch: the pauses before it
    paused_s: float = 0.0  # how long the sweep and this trial were suspended together (Ctrl-Z): out of every limit
    since_t: float = 0.0  # the window opens on points from here on: after the last pause, measured afresh
    tail: str = ""  # the progress file's tail when ladder decided to stop it (before its own SIGTERM is echoed)

    def look(self, samples: list[Sample], started_mono: float) -> stop.Observation:
        """What the rules see now: a pause is not the trial's time."""
        now_mono = time.monotonic()
        return stop.Observation(
            self.points,
            samples,
            time.time(),
            elapsed_s=now_mono - (started_mono + self.paused_s),
            silent_s=now_mono - self.last_progress_mono,
            paused_s=self.paused_s,
            since_t=self.since_t,
        )


@dataclass(frozen=True)
class Tick:
    """What a live view shows of the running trial."""

    elapsed_s: float
    phase: str  # `stop.Stage.shown`: "warm-up", "window", "stopping"
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


def run(request: TrialRequest, make_sampler: Callable[[int], Sampler], on_tick: OnTick | None = None) -> Result:
    """Launch, watch, stop and measure one trial (`make_sampler`: the sampler of its processes, by the launched
    pid; `on_tick`: the live view). A trainer that ran out of disk space raises OSError(ENOSPC) once recorded, so
    that it is not taken for a broken configuration."""
    spec, trial_dir, measure = request.spec, request.trial_dir, request.measure
    running = launch.start(spec, trial_dir, request.trial_id, request.mem_limit_bytes)
    pauses = (suspend.PAUSES.count, suspend.PAUSES.total_s)
    watch = Watch(request.course(time.time()), running.started_mono, pauses=pauses)
    monitor = Monitor(make_sampler(running.proc.pid), measure.sample_hz).start()
    progress = reader_for(
        str(spec.progress_kind.value),
        trial_dir / spec.progress_file,
        spec.progress_regex,
        spec.progress_samples_per_iter,
    )
    try:
        tick = lambda: on_tick and on_tick(_tick(watch, monitor, running, measure.min_window_iters))  # noqa: E731
        _watch(running, watch, progress, monitor, Evidence(trial_dir), tick)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (see search.py): the result says `interrupted`
        watch.course = watch.course.stopped(StopCause.INTERRUPTED)
    finally:  # any other exception still stops and reaps the group before it goes on up
        result = _finish(running, watch, progress, monitor, request)
        _write_result(trial_dir, result)
    if result.verdict.status is Status.ERROR and patterns.NO_SPACE.search(result.verdict.evidence):
        # the disk was full, not the configuration broken: not recorded, so that it runs again once there is room
        raise OSError(errno.ENOSPC, f"the trainer ran out of disk space: {result.verdict.evidence}", str(trial_dir))
    return result


def _watch(
    running: launch.Running,
    watch: Watch,
    progress: Follow,
    monitor: Monitor,
    evidence: Evidence,
    tick: Callable[[], object],
) -> None:
    """Each tick: take the pause and the new points into account, ask the rules, stop at the first cause."""
    while running.proc.poll() is None:
        _after_pause(watch)
        _take_progress(watch, progress)
        watch.course = stop.decide(watch.course, watch.look(monitor.samples, running.started_mono))
        if not watch.course.cause and (cause := _out_of_memory(evidence, running) or _diverged(evidence)):
            watch.course = watch.course.stopped(cause)
        if watch.course.cause:
            watch.tail = _tail(progress.path)
            return
        tick()
        with contextlib.suppress(subprocess.TimeoutExpired):  # back at once where the trial ends meanwhile
            running.proc.wait(TICK_S)


def _after_pause(watch: Watch) -> None:
    """After the sweep was suspended with this trial (`ladder.runner.suspend`): the pause counts toward no limit,
    and the window, open or not, is measured afresh on the points after it (`stop.paused`)."""
    count, total = suspend.PAUSES.count - watch.pauses[0], suspend.PAUSES.total_s - watch.pauses[1]
    if total <= watch.paused_s or not count:
        return
    watch.last_progress_mono += total - watch.paused_s
    watch.paused_s, watch.since_t = total, suspend.PAUSES.last_end_t
    watch.course = stop.paused(watch.course)


def _tick(watch: Watch, monitor: Monitor, running: launch.Running, min_points: int = 0) -> Tick:
    now = time.time()
    window = watch.course.window
    frac = 0.0 if window is None else min(1.0, max(0.0, (now - window.start_t) / (window.end_t - window.start_t)))
    latest = {s.index: s for s in monitor.samples[-32:] if s.source == monitor.sampler.source}
    return Tick(
        elapsed_s=time.monotonic() - running.started_mono,
        phase=watch.course.stage.shown,
        iteration=watch.points[-1].iter if watch.points else 0,
        window_frac=frac,
        latest=tuple(latest[i] for i in sorted(latest)),
        waiting=_waiting(watch.course, watch.points, min_points) if window is not None and frac >= 1.0 else "",
    )


def _waiting(course: stop.Course, points: list[Point], min_points: int) -> str:
    """Why a window whose time is up is still open, in a few words for the live view."""
    assert course.window is not None
    if (have := window_points(course.window, points)) < min_points:
        return f"{have}/{min_points} points"
    if course.stage is stop.Stage.HELD:
        return "held for a fit: " + course.unsettled
    return "extended: its interval is wide" if course.stage is stop.Stage.EXTENDED else ""


def _take_progress(watch: Watch, progress: Follow) -> None:
    new = progress.read_new()
    if new:
        watch.points.extend(new)
        watch.last_progress_mono = time.monotonic()


def _out_of_memory(evidence: Evidence, running: launch.Running) -> StopCause:
    """A rank ran out of memory: stop the trial at this first evidence (its verdict is read from the same files)."""
    oom_kills = running.cgroup.oom_kills() if running.cgroup else 0
    return StopCause.OUT_OF_MEMORY if evidence.check(oom_kills) is not None else StopCause.NONE


def _diverged(evidence: Evidence) -> StopCause:
    """A rank printed its training gone NaN or infinite (read with the memory evidence): stop the trial at that line."""
    return StopCause.DIVERGED if evidence.diverged else StopCause.NONE


def _finish(running: launch.Running, watch: Watch, progress: Follow, monitor: Monitor, request: TrialRequest) -> Result:
    # A window measured to its end (or a stop at a line of diverged training): the trial was healthy when ladder
    # stopped it, and what its processes print as they are killed (a worker's broken pipe to its dead parent) is no
    # evidence: the logs count as far as they were.
    trial_dir, measure, stopped_by = request.trial_dir, request.measure, watch.course.cause
    upto = files.sizes(trial_dir) if stopped_by in HEALTHY_STOPS else None
    code = launch.stop(running, 0.0 if stopped_by in KILL_AT_ONCE else measure.kill_grace_s)
    samples: list[Sample] = monitor.stop()
    _take_progress(watch, progress)
    left = procs.kill_trial(running.trial_id, cgroups=())
    for pid in left:
        log.warning("trial %s left process %d alive after the stop; killed it", running.trial_id, pid)
    write_samples(samples, trial_dir / paths.SAMPLES)
    ending = _ending(trial_dir, code, stopped_by, running, upto)
    last = watch.look(samples, running.started_mono)
    figures = record.measured(samples, last, watch.course)
    figures |= cap_figures(progress.path) | cgroup_figures(running.cgroup_usage)
    figures = hostmem.as_capped(figures, source_of(samples))  # memory as the cap counts it
    verdict = refine.verdict(ending, _seen(watch, last, progress, running, request), figures, measure)
    figures |= {"sampler_cpu_s": round(monitor.cpu_s, 3)}
    figures |= record.marked(figures, watch.course, watch.paused_s)
    duration = round(time.monotonic() - running.started_mono, 2)
    known = files.known(trial_dir, ending, upto)
    return Result(verdict, figures, code, duration, len(left), source_of(samples), stopped_by, known)


def _seen(
    watch: Watch, last: stop.Observation, progress: Follow, running: launch.Running, request: TrialRequest
) -> refine.Seen:
    """What the watch saw that the trial's folder does not show, for its verdict."""
    course, usage, pattern = watch.course, running.cgroup_usage, getattr(progress.parser, "pattern", None)
    return refine.Seen(
        stopped_by=course.cause,
        points=len(watch.points),
        window_points=window_points(course.window, watch.points) if course.window is not None else 0,
        tail=watch.tail,
        pattern=pattern if isinstance(pattern, re.Pattern) else None,
        reader=_reader(progress),
        printed=_tail(request.trial_dir / paths.STDOUT),
        progress_text="" if refine.read_with_logs(progress.path) else _tail(progress.path),
        pace_s=pace_s(last.fresh),
        due_s=course.due_s,
        unsettled=course.unsettled,
        oom_kills=usage.oom_kills if usage is not None else 0,
        peak_bytes=usage.peak_bytes if usage is not None else 0,
        cgroup=running.cgroup.path.name if running.cgroup is not None else "?",
        card_mb=request.card_mb,
        ran_s=last.elapsed_s,
        window_end_s=course.window.end_t - course.terms.launch_t if course.window is not None else None,
    )


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
    the page cache still charged at the end (`cgroup_file_mb`), and the cap itself where one was set
    (`workload.host_mem_limit_gb`)."""
    if usage is None or not usage.peak_bytes:
        return {}
    limit = {"cgroup_limit_mb": round(usage.limit_bytes / MIB, 1)} if usage.limit_bytes else {}
    cache = {"cgroup_file_mb": round(usage.file_bytes / MIB, 1)} if usage.file_bytes else {}
    return {"cgroup_peak_mb": round(usage.peak_bytes / MIB, 1)} | limit | cache


def _reader(progress: Follow) -> str:
    pattern = getattr(progress.parser, "pattern", None)
    what = f"the regex {pattern.pattern!r}" if isinstance(pattern, re.Pattern) else type(progress.parser).__name__
    return f"{what} in {progress.path.name}"


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
