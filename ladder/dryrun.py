"""`dry_run=true`: every trial the walk could launch, shown exactly (argv, env, generated files). Pure formatting.

The caller plans each profile × rung with the real planner (`ladder.workloads.planner.plan`) and hands the specs
here, each with what already answers for it (a trial this sweep has, or one an earlier sweep ran that it would
reuse): those are not launched, and the estimate counts only the others. Nothing is launched.

A generated file is shown in full the first time its text appears and referred back
to after that (a profile's agent.yaml is the same on every rung).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ladder.workloads.spec import TrialSpec

INDENT = "    "


@dataclass(frozen=True)
class Planned:
    """One trial the walk could launch."""

    variant: str  # the profile
    rung: int  # the knob's value
    trial_dir: str
    spec: TrialSpec
    known: str = ""  # what answers for it without a launch ("reused from <sweep>#<n> (ok)"); "" = it would launch


def every_trial(profiles: Sequence[str], rungs: Sequence[int]) -> list[tuple[str, int]]:
    """Every (profile, rung) the walk could reach, in the order it would try them."""
    return [(profile, rung) for profile in profiles for rung in rungs]


def format_dry_run(case: str, knob: str, planned: Sequence[Planned]) -> str:
    profiles = list(dict.fromkeys(p.variant for p in planned))
    rungs = len(planned) // max(1, len(profiles))
    known = sum(1 for p in planned if p.known)
    head = (f"dry run: case {case}, {len(planned)} trial(s) the walk could launch ({len(profiles)} profile(s) x "
            f"{rungs} rung(s) of {knob}); nothing is launched")  # fmt: skip
    if known:
        head += f"\n{known} of them answered without a launch (reused or already run): marked below"
    seen: dict[str, str] = {}
    blocks = [format_trial(p, knob, seen) for p in planned]
    return "\n".join([head, *blocks]) + "\n"


def rung_label(knob: str, rung: int) -> str:
    return f"e{rung}" if knob == "num_envs" else f"{knob}={rung}"


def format_trial(p: Planned, knob: str, seen: dict[str, str]) -> str:
    """One trial; `seen` maps file texts already shown to where (updated)."""
    label = f"{p.variant} {rung_label(knob, p.rung)}"
    spec = p.spec
    lines = [
        f"== {label}  ({p.trial_dir})" + (f"  [not launched: {p.known}]" if p.known else ""),
        f"launcher: {spec.launcher}  ranks: {spec.nproc}  progress: {spec.progress_kind} from {spec.progress_file}"
        + (f" (regex {spec.progress_regex!r})" if spec.progress_regex else ""),
        f"cwd: {spec.cwd or '.'}",
        f"argv: {shlex.join(spec.argv)}",
        "env: " + (" ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(spec.env.items())) or "(none)"),
    ]
    for name, text in spec.files.items():
        lines += _file_lines(name, text, label, seen)
    return "\n".join(lines)


def _file_lines(name: str, text: str, label: str, seen: dict[str, str]) -> list[str]:
    key = f"{name}\0{text}"
    if key in seen:
        return [f"file {name}: same as {seen[key]}"]
    seen[key] = label
    return [f"file {name} ({len(text.encode())} bytes):", *(INDENT + line for line in text.splitlines())]


@dataclass(frozen=True)
class Estimate:
    """Trial-seconds the sweep may take: each failing launch costs `fail_s` (start-up until its first evidence),
    each fitting one `fit_s` (start-up, warm-up, window), a descent step cut short `cut_s`."""

    worst_s: float  # every profile walks every rung down to the last, which fits (with a descent: every rung fits)
    expected_s: float  # the first profile's fit halfway down; each later profile seeded there (one fit, one
    #                    failure); with a descent, one step cut short per profile
    fail_s: float
    fit_s: float
    cut_s: float = 0.0


def estimate(n_rungs: int, n_profiles: int, fail_s: float, fit_s: float, cut_s: float | None = None) -> Estimate:
    """`cut_s` given: the objective is measured below the largest fit too (samples/s)."""
    if cut_s is None:
        worst = n_profiles * ((n_rungs - 1) * fail_s + fit_s)
        descent = 0.0
    else:
        worst = n_profiles * n_rungs * fit_s
        descent = n_profiles * cut_s
    first = (n_rungs - 1) / 2 * fail_s + fit_s
    expected = first + (n_profiles - 1) * (fit_s + fail_s) + descent
    return Estimate(worst, min(expected, worst), fail_s, fit_s, cut_s or 0.0)


def estimate_left(left: Sequence[int], fail_s: float, fit_s: float, cut_s: float | None = None) -> Estimate:
    """`estimate` over what is left to launch: `left` holds, per profile, its rungs that nothing answers for yet
    (reused or already run); a profile with none left costs nothing."""
    walking = [n for n in left if n]
    if not walking:
        return Estimate(0.0, 0.0, fail_s, fit_s, cut_s or 0.0)
    return estimate(max(walking), len(walking), fail_s, fit_s, cut_s)


def format_estimate(e: Estimate) -> str:
    cut = f", a descent step cut short ~{e.cut_s:.0f} s" if e.cut_s else ""
    return (f"estimate: worst case {e.worst_s / 60:.1f} min, expected {e.expected_s / 60:.1f} min of trials "
            f"(a failing launch ~{e.fail_s:.0f} s, a fitting one ~{e.fit_s:.0f} s{cut})")  # fmt: skip
