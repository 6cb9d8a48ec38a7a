"""The whole bench: every case of a trainer in one sweep. The order it runs in (one case of each robot first, so
that every family is measured early), its plan as one table, and the lines that say where it stands. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Member:
    """A case of the bench: its robot and method, and why it cannot run here ("" where it can)."""

    name: str
    robot: str
    method: str
    skip: str = ""


def order(members: Sequence[Member]) -> list[Member]:
    """The bench's order: the first case of each robot, then the first of each robot and method not yet run, then
    the rest (each pass by name); cases that cannot run last. A family's later cases then start from its model."""
    runnable = sorted((m for m in members if not m.skip), key=lambda m: m.name)
    out: list[Member] = []
    for key in (lambda m: (m.robot,), lambda m: (m.robot, m.method), lambda m: (m.name,)):
        seen = {key(m) for m in out}
        for m in runnable:
            if key(m) not in seen and m not in out:
                out.append(m)
                seen.add(key(m))
    return out + sorted((m for m in members if m.skip), key=lambda m: m.name)


@dataclass(frozen=True)
class PlanRow:
    """One case's line of the bench plan."""

    case: str
    profiles: tuple[str, ...]
    first: str  # the first rungs and why (a borrowed model's, or the walk's own start)
    could_launch: int  # the trials the walk could launch (every profile x rung nothing answers for yet)
    expected_s: float  # the dry run's expected trial-seconds
    earlier_s: float | None = None  # what an earlier bench's trials of this case took (None: none ran it)
    skip: str = ""


def plan_table(rows: Sequence[PlanRow]) -> str:
    """The bench plan, one line per case and a total: what a dry run of the bench prints."""
    head = ("#", "case", "profiles", "first rungs", "could launch", "expected", "earlier bench")
    body = [
        (
            str(i),
            r.case,
            ",".join(r.profiles),
            r.first,
            str(r.could_launch),
            _minutes(r.expected_s),
            _minutes(r.earlier_s),
        )
        for i, r in enumerate((r for r in rows if not r.skip), 1)
    ]
    runs = [r for r in rows if not r.skip]
    earlier = [r.earlier_s for r in runs if r.earlier_s is not None]
    total = (
        "",
        f"total: {len(runs)} case(s)",
        "",
        "",
        str(sum(r.could_launch for r in runs)),
        _minutes(sum(r.expected_s for r in runs)),
        f"{_minutes(sum(earlier))} ({len(earlier)} case(s))" if earlier else "-",
    )
    lines = _columns([head, *body, total])
    return "\n".join([*lines, *(f"skipped {r.case}: {r.skip}" for r in rows if r.skip)]) + "\n"


def _columns(table: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]


def _minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


@dataclass(frozen=True)
class Done:
    """A case the bench has finished: its pick (as the summary writes it), launches and trial-seconds."""

    case: str
    pick: str
    launches: int
    seconds: float


def left_s(done: Sequence[Done], remaining: Sequence[str], earlier: dict[str, float]) -> float | None:
    """What the cases left may take: each one's earlier bench time where there is one, else the mean of the cases
    done; None before any case is done or known."""
    mean = sum(d.seconds for d in done) / len(done) if done else None
    parts = [earlier.get(case, mean) for case in remaining]
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def where_line(
    position: int, total: int, case: str, phase: str, done: Sequence[Done], spent_s: float, left: float | None
) -> str:
    """Where the bench stands, in one line for a terminal and a log."""
    ahead = "unknown" if left is None else f"~{left / 60:.1f} min"
    return (
        f"bench: case {position}/{total} {case}: {phase}; {len(done)} done, {spent_s / 60:.1f} min spent, {ahead} left"
    )


def done_lines(done: Sequence[Done]) -> list[str]:
    """The cases done, each with its pick, launches and time."""
    return [f"bench:   {d.case}: {d.pick} ({d.launches} launch(es), {d.seconds / 60:.1f} min)" for d in done]
