"""A fit proven by what ladder observed: a pause of a loaded machine is no update (the trainer's own CPU clock tells
them apart), and where the reader only counts lines and no update has shown, the fit is `cycle unseen`, never `ok`.
Scripted points and host samples: a CPU trainer's rollout steps, the stalls a busy machine adds, its updates."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from ladder.core.measure.cadence import cycle_pause_s, pauses
from ladder.core.measure.clock import cpu_clock
from ladder.core.measure.peak import CYCLE_UNSEEN, is_cycle_unseen, outlived_peak
from ladder.core.measure.window import Window
from ladder.core.records import Confidence, Ending, Point, Reason, Sample, Source, Status, StopCause
from ladder.core.stop import Course, Observation, Stage, Terms
from ladder.core.stop.limits import timed_out
from ladder.failures import refine
from tests.unit.test_measure import conf

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Gap:
    wall_s: float  # how long the silence before the next point lasted
    cores: float  # how much of a core the trainer used through it


STEP = Gap(0.6, 0.6)  # a rollout step on a busy machine: 0.36 CPU-s over 0.6 s
STALL = Gap(2.4, 0.15)  # the machine starved it: four times as long, no more work
UPDATE = Gap(2.4, 1.0)  # its update: as long, a whole core all through it


def trace(gaps: list[Gap], t0: float = 100.0, per_point: float = 4096.0) -> tuple[list[Point], list[Sample]]:
    """Points one a step after each gap, and the host samples (10 Hz) of the trainer's CPU through them."""
    points, samples, t = [Point(t0, 1, per_point)], [], t0
    for i, gap in enumerate(gaps, start=2):
        ticks = max(1, round(gap.wall_s * 10))
        samples += [Sample(t + k * gap.wall_s / ticks, 0, 100.0 * gap.cores, 300.0, Source.HOST) for k in range(ticks)]
        t += gap.wall_s
        points.append(Point(t, i, per_point * i))
    return points, samples + [Sample(t, 0, 50.0, 300.0, Source.HOST)]


def test_a_stall_of_a_loaded_machine_that_recurs_is_no_cadence_on_the_trainers_cpu_clock() -> None:
    """Twice a busy machine stalls the trainer mid-rollout for four steps' time: on the wall clock that recurs like
    an update; on its own CPU clock it cost no more than a step, so no cadence is seen and a window holding a stall
    is no fit."""
    pts, samples = trace([STEP] * 10 + [STALL] + [STEP] * 10 + [STALL] + [STEP] * 10)
    assert cycle_pause_s(pts) == pytest.approx(2.4)  # what the wall clock alone reads: a cadence
    assert cycle_pause_s(pts, cpu_clock(samples)) is None and pauses(pts, cpu_clock(samples)) == []
    window = Window(pts[18].t, pts[-1].t, gated=True)
    assert outlived_peak([], pts, window, 1.0, per_iteration=False, numbered=False) == ""  # before: ok
    assert is_cycle_unseen(outlived_peak(samples, pts, window, 1.0, per_iteration=False, numbered=False))


def test_an_update_the_trainer_works_through_is_its_cadence() -> None:
    """The same silences, the trainer computing all through them (its update): a pause that recurs, and a window
    that holds one is a fit; one that closed inside a rollout is not."""
    pts, samples = trace([STEP] * 10 + [UPDATE] + [STEP] * 10 + [UPDATE] + [STEP] * 10)
    clock = cpu_clock(samples)
    assert cycle_pause_s(pts, clock) == pytest.approx(2.4)
    spanning = Window(pts[18].t, pts[-1].t, gated=True)
    assert outlived_peak(samples, pts, spanning, 1.0, per_iteration=False, numbered=False) == ""
    inside = Window(pts[23].t, pts[-1].t, gated=True)
    assert "no update yet" in outlived_peak(samples, pts, inside, 1.0, per_iteration=False, numbered=False)


def test_a_stall_beside_updates_is_not_taken_for_one() -> None:
    """Updates recur, and a stall comes in the rollout after the last one: a window that holds only the stall holds
    no update."""
    pts, samples = trace([STEP] * 8 + [UPDATE] + [STEP] * 8 + [UPDATE] + [STEP] * 4 + [STALL] + [STEP] * 4)
    window = Window(pts[19].t, pts[-1].t, gated=True)
    assert "no update yet" in outlived_peak(samples, pts, window, 1.0, per_iteration=False, numbered=False)
    assert outlived_peak([], pts, window, 1.0, per_iteration=False, numbered=False) == ""  # the wall clock's reading


def test_counted_lines_that_come_evenly_never_stand_without_a_cycle_however_long() -> None:
    """A regex with no iter group (CleanRL's `global_step=` lines): a minute of even lines may still be one
    rollout. The fit is `cycle unseen`, where numbered iterations stand after three windows of them."""
    pts, samples = trace([STEP] * 100)
    window = Window(pts[80].t, pts[-1].t, gated=True)
    why = outlived_peak(samples, pts, window, 1.0, per_iteration=False, numbered=False)
    assert why.startswith(CYCLE_UNSEEN) and "60 s of progress" in why and "no iter group" in why
    assert outlived_peak(samples, pts, window, 1.0, per_iteration=False, numbered=True) == ""
    assert outlived_peak(samples, pts, window, 1.0, per_iteration=True, numbered=False) == ""


def test_a_trainer_that_mostly_waits_or_runs_on_a_gpu_is_judged_on_the_wall_clock() -> None:
    """A trainer asleep between its lines (its CPU says nothing of its work), and one sampled by NVML (its update
    may leave the host idle): their pauses are the wall clock's, as before."""
    idle, samples = trace([Gap(0.6, 0.01)] * 10 + [Gap(2.4, 0.01)] + [Gap(0.6, 0.01)] * 10 + [Gap(2.4, 0.01)])
    assert cycle_pause_s(idle, cpu_clock(samples)) == pytest.approx(2.4)
    gpu = [Sample(s.t, s.index, s.util, s.mem_mb, Source.NVML) for s in samples]
    assert cpu_clock(gpu) is None and cpu_clock([]) is None


def test_the_cpu_clock_sums_the_ranks_and_holds_outside_its_samples() -> None:
    samples = [Sample(float(t), rank, 100.0 * (rank + 1), 1.0, Source.HOST) for t in range(5) for rank in (0, 1)]
    clock = cpu_clock(samples)
    assert clock is not None
    assert clock.spent(0.0, 4.0) == pytest.approx(12.0)  # one core and two cores, four seconds
    assert clock.spent(1.5, 2.5) == pytest.approx(3.0) and clock.at(-5.0) == 0.0 and clock.at(99.0) == 12.0


def held(unsettled: str) -> Course:
    return Course(
        Terms(conf(trial_timeout_s=10.0, budget_s=30.0), 0.0),
        Stage.HELD,
        window=Window(1.0, 5.0, True),
        unsettled=unsettled,
    )


def look(elapsed_s: float) -> Observation:
    return Observation([Point(1.0, 1, 1.0), Point(9.0, 2, 2.0)], [], now_t=elapsed_s, elapsed_s=elapsed_s, silent_s=0.1)


def test_a_window_held_for_a_cycle_unseen_runs_on_within_its_budget_then_stands_as_weak_evidence() -> None:
    """Past its trial limit, a window held because no update was seen runs on while its budget lasts (the update may
    yet come); a window held for memory still rising stands at the limit, as before."""
    unseen = held(f"{CYCLE_UNSEEN}: no pause it worked through has recurred")
    assert timed_out(unseen, look(20.0)).cause is StopCause.NONE
    assert timed_out(unseen, look(31.0)).cause is StopCause.WINDOW_DONE
    assert timed_out(held("its memory was still rising"), look(20.0)).cause is StopCause.WINDOW_DONE


def test_a_survivor_whose_cycle_was_unseen_ran_its_budget_and_is_a_fit_of_low_confidence() -> None:
    """No step-down for a trainer whose updates never show: it ran its whole budget without failing, so it fits, by
    time alone, and says so; near its cap it is weak evidence all the same."""
    ending = Ending(0, "", stopped_by=StopCause.WINDOW_DONE)
    seen = refine.Seen(
        stopped_by=StopCause.WINDOW_DONE,
        points=90,
        window_points=40,
        unsettled=f"{CYCLE_UNSEEN}: no pause it worked through has recurred in its 95 s of progress",
    )
    verdict = refine.verdict(ending, seen, {"samples_per_s": 1e4}, conf(budget_s=540.0))
    assert (verdict.status, verdict.reason, verdict.confidence) == (Status.OK, Reason.CYCLE_UNSEEN, Confidence.LOW)
    assert "cycle unseen" in verdict.evidence and "95 s of progress" in verdict.evidence
    assert "measure.budget_s=540" in verdict.evidence and "iter group" in verdict.basis
    seen_near = replace(seen, card_mb=100.0)
    near = refine.verdict(ending, seen_near, {"samples_per_s": 1e4, "max_mem0": 99.5}, conf(budget_s=540.0))
    assert (near.status, near.reason) == (Status.OOM_OR_NCCL, Reason.NEAR_CAP)


def test_a_probe_cut_early_while_its_memory_rose_says_when_its_window_closed_not_that_its_budget_ran_out() -> None:
    ending = Ending(0, "", stopped_by=StopCause.WINDOW_DONE)
    rising = "its memory was still rising in the last 6.1 s of the window"
    cut = refine.Seen(stopped_by=StopCause.WINDOW_DONE, points=20, window_points=8, unsettled=rising, ran_s=9.8)
    verdict = refine.verdict(ending, cut, {"samples_per_s": 1e4}, conf(trial_timeout_s=180.0))
    assert (verdict.status, verdict.reason) == (Status.OOM_OR_NCCL, Reason.MEMORY_RISING)
    assert verdict.evidence.startswith("its window closed after 10 s, but its memory was still rising")
    late = replace(cut, ran_s=181.0)
    assert refine.verdict(ending, late, {}, conf(trial_timeout_s=180.0)).evidence.startswith("survived its budget")
