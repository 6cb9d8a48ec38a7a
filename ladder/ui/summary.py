"""What a sweep prints: one line per trial (`trial_line`), and at its end each profile's walk, what the insurance
cost, where the case's launch time went (`spent`), the errors, the `best:` line with the case's class and action,
each card's largest fit (cards.tsv), and where the TSVs are (`print_summary`)."""

from __future__ import annotations

from collections.abc import Sequence

from ladder.core import figkeys, pick
from ladder.core.errors import ExitCode
from ladder.core.measure import hostmem
from ladder.core.outcome import exit_code, failed_at_bottom
from ladder.core.paths import SweepPaths
from ladder.core.records import Objective, Phase, Status, TrialRecord, rung_label
from ladder.core.walk import STEP_DOWN, Outcome, Standing, Step, insurance
from ladder.runner.machine import Machine
from ladder.settings.config import Settings
from ladder.settings.credentials import redact
from ladder.sweep.cards import CARDS_TSV
from ladder.sweep.loop import Summary


def trial_line(r: TrialRecord, pooled: bool = False) -> str:
    """One trial as the console shows it; `pooled`: it stands for all windows of its configuration (the case's best,
    a median of its repeats), not for its own launch."""
    f = r.figures
    mems = "/".join(str(round(v)) for v in figkeys.values(f, figkeys.MAX_MEM)) or "-"
    util = f"{f['min_avg_util']:.1f}" if "min_avg_util" in f else "-"
    sps = f"{f['samples_per_s']:.0f}" if "samples_per_s" in f and r.status is Status.OK else "-"
    if f.get("short"):  # an insurance probe ended by its short window (`stop.cut.short_lost`), not by the cut
        sps += " (cut, short probe)"
    elif f.get("cut") and "early_steps" in f:  # cut before its window opened: the window its first steps predict
        sps += f" (cut, predicted from {f['early_steps']:.0f} first step{'s' if f['early_steps'] > 1 else ''})"
    elif f.get("cut"):  # cut on a step still running: how long that step had run without a point
        sps += f" (cut, a step open {f['cut_open_step_s']:.1f} s)" if "cut_open_step_s" in f else " (cut)"
    rung = rung_label(r.info.get("knob", "num_envs"), r.num_envs)
    copy = r.info.get("why") or f"reused from {r.info['reused_from']}" if r.info.get("reused_from") else ""
    took = copy or f"{r.info.get('duration_s', '?')} s"  # a copy says where from (a carried failure: why it holds)
    if r.phase is Phase.PLACEMENT:  # one of the one-device jobs run side by side (placement=measure)
        took = f"side by side {int(r.info.get('twin', '0')) + 1}/{r.info.get('twins', '?')}, {took}"
    noise = " unstable" if f.get("unstable") and r.status is Status.OK else ""  # its interval is wider than allowed
    if (windows := f.get("repeats", 1.0)) > 1:  # a configuration launched again: which of its windows this is
        which = f"median of {windows:.0f} windows" if pooled else f"window {windows:.0f}"
        if pooled and (wide := f.get(pick.WIDE_WINDOWS, 0.0)) and wide < windows:  # set aside (`pick.median_repeats`)
            kept = windows - wide
            which = f"{'median of ' if kept > 1 else ''}{kept:.0f} of {windows:.0f} windows ({wide:.0f} wide set aside)"
        noise = f" {which}{noise}"
    label = hostmem.label(f, r.info.get("source", ""))  # the cgroup's peak (shown by `capped`), PSS, or NVML's
    shown = "" if label == "cgroup" else f" {label}={mems:>11} MiB"
    per_joule = f" samples/J={f['samples_per_joule']:.4g}" if "samples_per_joule" in f else ""  # a GPU's window
    return (
        f"{r.case:<14} {r.profile:<8} {rung:<6} {r.status!s:<12} {r.reason!s:<13} util={util:>6}{capped(f)}"
        f"{shown}  samples/s={sps:>7}{per_joule}{noise}  ({took})"
    )


def capped(f: dict[str, float]) -> str:
    """The memory a cap limits, where there is one, shown before any other memory figure: the emulated card's use
    of its size (or, held by a ballast, its size and the ballast: the memory figures are net of it), the memory
    cgroup's peak of its limit (`workload.host_mem_limit_gb`)."""
    card = f" cap={f['cap_used_mb']:.0f}/{f['cap_mb']:.0f} MiB" if f.get("cap_used_mb") and f.get("cap_mb") else ""
    if not card and f.get("ballast_card_mb"):
        card = f" card={f['ballast_card_mb']:.0f} MiB (ballast {f.get('ballast_mb', 0.0):.0f} MiB held)"
    host = f" cgroup={f['cgroup_peak_mb']:.0f}/{f['cgroup_limit_mb']:.0f} MiB" if f.get("cgroup_limit_mb") else ""
    return card + host


# what each launch had to prove, in the order `spent` says them
SPENT = (
    "the pick's window",
    "failing probes",
    "cut once out of reach",
    "insurance",
    "other fits, whole window",
    "errors",
    "unmeasured",
    "diverged",
    "interrupted",
    "placement, side by side",  # placement=measure: the pick's profile as one-device jobs
    "other",
)
BY_STATUS = {  # a launch that neither fit nor failed by memory, by what it ended as
    Status.ERROR: SPENT[5],
    Status.UNMEASURED: SPENT[6],
    Status.DIVERGED: SPENT[7],
    Status.INTERRUPTED: SPENT[8],
}


def purpose(r: TrialRecord, best: TrialRecord | None) -> str:
    """What a launch was for, by what it had to prove: the pick (its window, and its recheck or confirmation), a rung
    that does not fit (a failing probe: start-up and the trainer's time to fail), a losing rung or profile (stopped
    once it could not win), the insurance below a largest fit, another fit measured to its window's end, or what
    the launch ended as (an error, unmeasured, diverged, interrupted; else "other")."""
    step = r.info.get("step", "")
    if r.phase is Phase.PLACEMENT:
        return SPENT[9]
    if best is not None and r.profile == best.profile and r.num_envs == best.num_envs and r.status is Status.OK:
        return SPENT[0]
    if step == Step.DESCENT:
        return SPENT[3]
    if r.status in STEP_DOWN:
        return SPENT[1]
    if r.status is Status.OK:
        return SPENT[2] if r.figures.get("cut") else SPENT[4]
    return BY_STATUS.get(r.status, SPENT[-1])


def _launches(n: int) -> str:
    return f"{n} launch" if n == 1 else f"{n} launches"


def spent(records: Sequence[TrialRecord], best: TrialRecord | None) -> str:
    """Where the case's launch time went, by what each launch had to prove (`purpose`); trials reused from an
    earlier sweep cost nothing and are left out. "" when nothing ran."""
    seconds: dict[str, list[float]] = {}
    for r in records:
        if not r.info.get("reused_from"):
            seconds.setdefault(purpose(r, best), []).append(float(r.info.get("duration_s") or 0))
    if not seconds:
        return ""
    parts = [
        f"{what} {sum(seconds[what]):.1f} s ({_launches(len(seconds[what]))})" for what in SPENT if what in seconds
    ]
    return f"spent {sum(map(sum, seconds.values())):.1f} s: " + ", ".join(parts)


def no_pick_line(case: str, records: Sequence[TrialRecord]) -> str:
    """The summary's `best:` line when no trial has figures: a rung that survived unmeasured is no "nothing fits"
    (it fits; it needs a measurement), and the line says what to try."""
    survived = [r for r in records if r.status is Status.UNMEASURED]
    if not survived:
        return f"best: none of the rungs fits for {case}"
    top = max(survived, key=lambda r: (r.num_envs, r.number))
    rung = rung_label(top.info.get("knob", "num_envs"), top.num_envs)
    return f"best: none measured for {case}: {top.profile} {rung} survived but is unmeasured ({top.evidence})"


STOPPED = (Outcome.ERROR, Outcome.UNRELATED)  # walks that stopped on something a lower rung cannot fix


def walk_state(w: Standing, knob: str) -> str:
    """One profile's walk as the summary says it."""
    at = f" at {rung_label(knob, w.rung)}" if w.rung else ""
    if w.outcome is Outcome.FOUND:
        return f"largest stable rung{at}"
    if w.outcome is Outcome.UNRELATED:
        return f"not {knob}: it failed{at}, the lowest rung, as above it, and no failure named memory"
    return f"{w.outcome.value}{at}"


def broken_line(summary: Summary, knob: str = "num_envs") -> str:
    """The `best:` line of a case without a pick whose walk stopped on something no lower rung fixes (of `knob`)."""
    errors = [w.profile for w in summary.walks if w.outcome is Outcome.ERROR]
    if not errors and (same := [w.profile for w in summary.walks if w.outcome is Outcome.UNRELATED]):
        return (
            f"best: none for {summary.case}: {', '.join(same)} failed at the lowest rung as above it, and no failure "
            f"named memory: {knob} is not the cause (a rank that fails as it starts, the collective's or the "
            f"network's settings: see the evidence above); fix that, stepping {knob} down will not help"
        )
    return (
        f"best: none for {summary.case}: a broken configuration stopped {', '.join(errors) or 'the walk'} (fix it, "
        f"see the error above; stepping {knob} down will not help)"
    )


def sweep_code(summary: Summary) -> ExitCode:
    """The exit code of a finished sweep (`ladder.core.outcome.exit_code`)."""
    broken = any(w.outcome in STOPPED for w in summary.walks)
    return exit_code(summary.best, summary.records, broken)


def print_summary(
    summary: Summary, paths: SweepPaths, knob: str, objective: Objective = Objective.MIN_AVG_UTIL
) -> None:
    print()
    for w in summary.walks:
        state = walk_state(w, knob)
        skipped = "".join(f"\n    skipped {rung_label(knob, r)}: {why}" for r, why in w.skipped)
        print(f"  {summary.case} {w.profile}: {state}{skipped}")
    if insured := insurance(
        [(r.info.get("step", ""), float(r.info.get("duration_s") or 0), r.figures) for r in summary.records]
    ):
        print(f"  {summary.case} {insured}")
    if cost := spent(summary.records, summary.best):
        print(f"  {summary.case} {cost}")
    for r in summary.records:
        if r.status in (Status.ERROR, Status.DIVERGED) or failed_at_bottom(r):
            where = paths.sweep_dir / r.info.get("trial_dir", "")
            what = f"{r.status} ({r.reason}) at the lowest rung" if failed_at_bottom(r) else str(r.status)
            print(f"  {what} in {r.profile} {rung_label(knob, r.num_envs)}: {r.evidence}\n    see {where}")
    code = sweep_code(summary)
    if summary.best is not None:
        print("best: " + trial_line(summary.best, pooled=True))
    elif code is ExitCode.BROKEN_CONFIG:
        print(broken_line(summary, knob))
    elif any(r.status is Status.UNMEASURED for r in summary.records):
        print(no_pick_line(summary.case, summary.records))
    elif fits := [w.profile for w in summary.walks if w.outcome is Outcome.FOUND]:
        print(
            f"best: none measured for {summary.case}: {', '.join(fits)} fit, but no trial that fits gave a figure "
            f"for the objective ({objective}); see its trial folders"
        )
    elif diverged := [w.profile for w in summary.walks if w.outcome is Outcome.DIVERGED]:
        print(
            f"best: none for {summary.case}: every rung that fits {', '.join(diverged)} trained to NaN or inf "
            "(diverged, above): no env count fixes that; fix the profile's learning settings"
        )
    else:
        print(f"best: none of the rungs fits for {summary.case}")
    row = summary.best_row or {}
    if row.get("tie"):
        print(f"tie: {row['tie']}")
    if row.get("class"):
        print(f"class: {row['class']} -> {row.get('action', '')}")
    if row.get("placement"):  # placement=measure: one job over N devices, or N one-device jobs side by side
        print(f"placement: {row['placement']} -> {row.get('placement_note', '')}")
    if summary.best is not None and summary.best.figures.get("window_held"):
        print(
            f"note: the pick's window ran {summary.best.figures.get('window_s', 0):.0f} s, past its set length "
            "(measure.window_s, or confirm_s), held open until it could stand for a fit: a whole update in it, its "
            "memory no longer rising (and, for lines only counted whose update never showed, its measure.budget_s)"
        )
    if summary.best is not None and summary.best.figures.get("window_futile"):
        print(
            f"note: the pick's samples/s interval is {summary.best.figures.get('ci_frac', 0):.0%} of it, over "
            "measure.max_ci_frac; its window was not extended: its steps varied so much that a window twice as long "
            "would still have left it wide (a longer measure.window_s, or measure.recheck_unstable=true for a second "
            "launch)"
        )
    windows = summary.best.figures.get("repeats", 1.0) if summary.best is not None else 0.0
    if summary.best is not None and 0 < (aside := summary.best.figures.get(pick.WIDE_WINDOWS, 0.0)) < windows:
        print(
            f"note: {aside:.0f} of the pick's {windows:.0f} windows ran whole and stayed wide (over "
            "measure.max_ci_frac: a slow stretch of the machine, or uneven steps) and were set aside; its figure and "
            "verdict are the narrow ones'"
        )
    if code is ExitCode.BROKEN_CONFIG and summary.best is not None:
        print("note: a profile stopped on a broken configuration; the pick is among the others (fix it and resume)")
    if summary.resumed:
        print(f"({summary.resumed} finished trial(s) reused from sweep storage, not run again)")
    if summary.cards:  # the largest fit on other cards, from the memory model (`cards` setting)
        print(f"cards ({paths.sweep_dir / CARDS_TSV}):")
        for line in summary.cards:
            print(f"  {line}")
    print(f"best_by_case.tsv: {paths.best_tsv}")
    print(f"trials.tsv:       {paths.trials_tsv}")
    print(f"plots, report.md: python -m ladder.report {paths.sweep_dir}")


def banner(settings: Settings, paths: SweepPaths, machine: Machine, cap: float | None) -> str:
    """The sweep's first line: what it walks, on what, where (`cap`: the emulated card, where one applies)."""
    return (
        f"sweep {paths.sweep}: case {settings.case.name}, ladder {list(settings.rungs)}, "
        f"profiles [{', '.join(p.name for p in settings.profiles)}], {machine.nproc} x {machine.device}"
        + (f", emulated card: {cap} GB per rank" if cap else "")
        + (f", storage {redact(settings.storage)}" if settings.storage else "")
    )
