"""What a person sees while a sweep runs: a live rich display on a terminal, plain lines anywhere else.

Both views take the same events (sweep started, trial started, tick, trial finished). The live one redraws the
ladder so far (rungs × profiles: each cell its outcome and the objective's figure, named; a rung the walk ruled out,
`skipped` with why), the running trial (phase, elapsed, window progress, latest util and memory per device) and what
comes next on either outcome, asked of the walk itself (`walk.next_trial` with the running trial as if it had
fitted, then as if it had failed); finished trials are also printed as the plain line, so the scrollback keeps them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ladder.core import pick
from ladder.core.records import Phase, Reason, Source, Status, TrialRecord, rung_label
from ladder.core.walk import Attempt, Outcome, Standing, Tuning, attempts, next_trial, standing
from ladder.runner.trial import Tick
from ladder.sweep.events import View
from ladder.ui.summary import trial_line

STYLE = {
    Status.OK: "green",
    Status.OOM_OR_NCCL: "red",
    Status.TIMEOUT: "yellow",
    Status.ERROR: "bold red",
    Status.INTERRUPTED: "magenta",
    Status.RETRY: "yellow",
    Status.UNMEASURED: "cyan",
    Status.DIVERGED: "bold yellow",
}
DEFAULT_TUNING = Tuning()  # the walk's defaults (frozen): a view told nothing else asks the walk with these
SHORT = {
    Status.OK: "ok",
    Status.OOM_OR_NCCL: "oom/nccl",
    Status.TIMEOUT: "timeout",
    Status.ERROR: "ERROR",
    Status.INTERRUPTED: "interrupted",
    Status.RETRY: "retry",
    Status.UNMEASURED: "unmeasured",
    Status.DIVERGED: "diverged",
}


def found_line(records: Sequence[TrialRecord]) -> str:
    """The line above the trials a sweep had recorded before this process started (`View.found`). An interrupted
    trial whose rung has finished since (run again by an earlier resume) is history, not a rung to run again; one
    after its rung's answer (a second launch of it, cut short) runs again."""
    interrupted = [r for r in records if r.status is Status.INTERRUPTED]
    last: dict[tuple[str, int], int] = {}  # each rung's last finished trial
    for r in records:
        if r.status is not Status.INTERRUPTED:
            last[(r.profile, r.num_envs)] = max(r.number, last.get((r.profile, r.num_envs), r.number))
    again = sum(1 for r in interrupted if last.get((r.profile, r.num_envs), -1) < r.number)
    done, before = len(records) - len(interrupted), len(interrupted) - again
    parts = (
        [f"{done} finished, not run again"] * bool(done)
        + [f"{again} interrupted, to run again"] * bool(again)
        + [f"{before} interrupted before, run again since"] * bool(before)
    )
    return f"found in sweep storage: {len(records)} trial(s) this sweep recorded before ({'; '.join(parts)})"


class PlainView:
    """One line per event that matters; for CI logs, SLURM output and pipes."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)

    def sweep_started(
        self,
        banner: str,
        case: str,
        rungs: Sequence[int],
        profiles: Sequence[str],
        knob: str = "num_envs",
        tuning: Tuning = DEFAULT_TUNING,
        objective: str = "min_avg_util",
    ) -> None:
        self.console.print(banner, markup=False, soft_wrap=True)

    def found(self, records: Sequence[TrialRecord]) -> None:
        self.console.print(found_line(records), markup=False, soft_wrap=True)
        for record in records:
            self.trial_finished(record)

    def trial_started(self, profile: str, rung: int) -> None:
        pass

    def tick(self, tick: Tick) -> None:
        pass

    def trial_finished(self, record: TrialRecord) -> None:
        self.console.print(trial_line(record), markup=False, soft_wrap=True)

    def close(self) -> None:
        pass


@dataclass
class Board:
    """The state the live view draws."""

    case: str = ""
    rungs: tuple[int, ...] = ()
    profiles: tuple[str, ...] = ()
    cells: dict[tuple[str, int], TrialRecord] = field(default_factory=dict)
    running: tuple[str, int] | None = None
    tick: Tick | None = None
    knob: str = "num_envs"  # what the rungs set: their labels say it (e64, or update_interval=10)
    tuning: Tuning = DEFAULT_TUNING  # how the sweep walks: what "next" is asked of
    objective: str = "min_avg_util"  # what picks: the figure a cell shows
    records: list[TrialRecord] = field(default_factory=list)  # every finished trial, in order (retries included)

    def walks(self) -> dict[str, Standing]:
        attempts = _attempts(self.records, self.objective)
        return {p: standing(self.rungs, p, attempts, self.tuning) for p in self.profiles}


def _attempts(records: Sequence[TrialRecord], objective: str) -> list[Attempt]:
    return attempts(records, objective)


def render(board: Board) -> RenderableType:
    walks, leader = board.walks(), _leader(board)
    lines = (_legend(board, walks, leader), _skipped_line(board, walks), _running_line(board), _next_line(board))
    return Group(_ladder_table(board, walks, leader), *(line for line in lines if line.plain))  # no blank lines


PICK_MARK = "*"  # the cell of the pick so far (`pick.best` of the probes measured)
REUSED_MARK = "(reused)"


def _ladder_table(board: Board, walks: dict[str, Standing], leader: TrialRecord | None) -> Table:
    """A rung a row, from the top down, a profile a column: a ladder of eight rungs fits 80 columns this way
    (a rung a column cut its cells to `oom/n…` there)."""
    table = Table(title=f"{board.case}: the ladder so far", title_justify="left", expand=False)
    table.add_column(board.knob, justify="right", no_wrap=True)
    for profile in board.profiles:
        table.add_column(profile, justify="center")
    for rung in board.rungs:
        label = rung_label(board.knob, rung)
        table.add_row(label, *(_cell(board, walks[profile], rung, leader) for profile in board.profiles))
    return table


def _leader(board: Board) -> TrialRecord | None:
    """The pick so far: the case's pick among the probes measured until now (the summary's, once the sweep ends)."""
    return pick.best([r for r in board.records if r.phase is Phase.PROBE], board.objective)


def _cell(board: Board, walk: Standing, rung: int, leader: TrialRecord | None = None) -> Text:
    """A trial's outcome and figure (`*` on the pick so far, `(reused)` where an earlier sweep ran it); a rung ruled
    out, `skipped` and why; one the walk ended without, `not run` (why: under the table); `·` where the walk has
    not come yet."""
    if board.running == (walk.profile, rung):
        return Text("running", style="bold cyan")
    record = board.cells.get((walk.profile, rung))
    if record is not None:
        lead = leader is not None and (leader.profile, leader.num_envs) == (record.profile, record.num_envs)
        mark = f"{PICK_MARK} " if lead else ""
        reused = f" {REUSED_MARK}" if record.info.get("reused_from") else ""
        text = mark + SHORT[record.status] + _figure(record, board.objective) + reused
        return Text(text, style=STYLE[record.status] + (" bold" if mark else ""))
    if why := dict(walk.skipped).get(rung):
        return Text(f"skipped ({_short(why)})", style="dim yellow")
    if walk.outcome is not Outcome.PENDING:
        return Text("not run", style="dim")
    return Text("·", style="dim")


def _legend(board: Board, walks: dict[str, Standing], leader: TrialRecord | None) -> Text:
    """What the marks in the table say, and why each walk that ended left rungs unrun (once a line, not in every
    cell: at 80 columns a cell's reason wrapped the table tall)."""
    parts = [f"{PICK_MARK} the pick so far"] if leader is not None else []
    if any(r.info.get("reused_from") for r in board.cells.values()):
        parts.append(f"{REUSED_MARK} run by an earlier sweep")
    for profile, walk in walks.items():
        unrun = [r for r in board.rungs if (profile, r) not in board.cells and not dict(walk.skipped).get(r)]
        if walk.outcome is not Outcome.PENDING and unrun and board.running not in {(profile, r) for r in unrun}:
            parts.append(f"{profile} not run: {_not_needed(walk, unrun[0], board.knob).removeprefix('not run: ')}")
    return Text("; ".join(parts), style="dim")


def _figure(record: TrialRecord, objective: str) -> str:
    """The figure that picks, named: `util 47%` (min avg util over the window), `1627 samples/s`."""
    f = record.figures
    if record.status is not Status.OK:
        return ""
    if objective == "samples_per_s" and "samples_per_s" in f:
        return f" {f['samples_per_s']:.0f} samples/s" + (" (cut)" if f.get("cut") else "")
    if objective == "samples_per_joule" and "samples_per_joule" in f:
        return f" {f['samples_per_joule']:.3g} samples/J"
    return f" util {f['min_avg_util']:.0f}%" if "min_avg_util" in f else ""


def _short(why: str) -> str:
    """A skip reason short enough for a cell (the whole of it is listed under the table)."""
    return why if len(why) <= 32 else why[:31] + "…"


def _not_needed(walk: Standing, rung: int, knob: str) -> str:
    if walk.outcome is Outcome.FOUND and walk.rung is not None and rung < walk.rung:
        return f"not run: it fits at {rung_label(knob, walk.rung)}, the rest below need no launch"
    if walk.outcome is Outcome.ERROR:
        return "not run: profile stopped"
    if walk.outcome is Outcome.UNRELATED:
        return "not run: not num_envs"
    return "not run: the walk ended"


def _skipped_line(board: Board, walks: dict[str, Standing]) -> Text:
    whys = [
        f"{p} {rung_label(board.knob, r)}: {why}"
        for p, w in walks.items()
        for r, why in w.skipped
        if (p, r) not in board.cells
    ]
    return Text("skipped: " + "; ".join(whys), style="dim yellow") if whys else Text("")


def _running_line(board: Board) -> Text:
    if board.running is None or board.tick is None:
        return Text("")
    t, (profile, rung) = board.tick, board.running
    phase = f"window {t.window_frac:.0%}" if t.phase == "window" else t.phase
    if t.waiting:  # its time is up, but it is still open: say what for
        phase += f" ({t.waiting})"
    devices = (
        "  ".join(
            f"[{s.index}] {s.util:.0f}% {'pss ' if s.source == Source.HOST else ''}{s.mem_mb:.0f} MiB" for s in t.latest
        )
        or "no samples yet"
    )
    label = rung_label(board.knob, rung)
    return Text(f"running {profile} {label}: {phase}, iter {t.iteration}, {t.elapsed_s:.0f} s   {devices}")


def _next_line(board: Board) -> Text:
    """What the walk launches after the running trial, on either outcome, asked of the walk itself. Where the walk
    measures below the largest fit, what follows a fit depends on its figure: both cases are named (beating the
    profile's best so far, or not). A fit's memory point is unknown until it ends, so a memory-fit jump
    it would allow is not foreseen. What follows a failure may depend on its evidence: one that names no memory (a
    collective's error, a hang) can send the walk to the ladder's lowest rung (`policy`'s bottom check), so where the
    two differ both are named too."""
    if board.running is None:
        return Text("")
    profile, rung = board.running
    ok = [(r.profile, v) for r in board.records if r.status is Status.OK and (v := r.figures.get(board.objective))]
    own = [v for p, v in ok if p == profile]
    level = max(own or [v for _, v in ok] or [1.0])  # no better than the profile's best so far
    level_next = _after(board, Attempt(profile, rung, Status.OK, value=level))
    better = _after(board, Attempt(profile, rung, Status.OK, value=4 * max([level, *(v for _, v in ok)])))
    on_ok = level_next if better == level_next else f"{better} if it beats {profile}'s best so far, else {level_next}"
    on_fail = _after(board, Attempt(profile, rung, Status.OOM_OR_NCCL, reason=Reason.CUDA_OOM))
    no_memory = _after(board, Attempt(profile, rung, Status.OOM_OR_NCCL, reason=Reason.NCCL_ERROR))
    if no_memory != on_fail:
        on_fail = f"{on_fail} if its evidence names memory, else {no_memory}"
    return Text(f"next: on ok, {on_ok}; on oom/nccl or timeout, {on_fail}", style="dim")


def _after(board: Board, outcome: Attempt) -> str:
    attempts = [*_attempts(board.records, board.objective), outcome]
    decision = next_trial(board.rungs, board.profiles, attempts, board.tuning)
    if decision is None:
        return "the sweep ends"
    done = f"{outcome.profile} is done; " if decision.profile != outcome.profile else ""
    return f"{done}{decision.profile} {rung_label(board.knob, decision.rung)} ({decision.why})"


class LiveView:
    """A rich Live display, redrawn on every event."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.board = Board()
        self.live = Live(render(self.board), console=self.console, refresh_per_second=4, transient=False)
        self._restore: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []

    def sweep_started(
        self,
        banner: str,
        case: str,
        rungs: Sequence[int],
        profiles: Sequence[str],
        knob: str = "num_envs",
        tuning: Tuning = DEFAULT_TUNING,
        objective: str = "min_avg_util",
    ) -> None:
        self.console.print(banner, markup=False)
        self.board = Board(case, tuple(rungs), tuple(profiles), knob=knob, tuning=tuning, objective=objective)
        self.live.start()
        self._restore = _route_logging(sys.stderr)  # Live's proxy: log lines print above the display
        self._draw()

    def found(self, records: Sequence[TrialRecord]) -> None:
        self.console.print(found_line(records), markup=False)
        for record in records:
            self.trial_finished(record)

    def trial_started(self, profile: str, rung: int) -> None:
        self.board.running, self.board.tick = (profile, rung), None
        self._draw()

    def tick(self, tick: Tick) -> None:
        self.board.tick = tick
        self._draw()

    def trial_finished(self, record: TrialRecord) -> None:
        if record.phase is not Phase.PLACEMENT:  # a one-device job side by side is not the rung's own cell
            self.board.cells[(record.profile, record.num_envs)] = record
        self.board.records.append(record)
        self.board.running = None
        self.console.print(trial_line(record), markup=False, soft_wrap=True)  # the terminal wraps it, not rich
        self._draw()

    def close(self) -> None:
        _route_logging_back(self._restore)
        self._restore = []
        self.live.stop()

    def _draw(self) -> None:
        self.live.update(render(self.board))


def _route_logging(stream: TextIO) -> list[tuple[logging.StreamHandler[TextIO], TextIO]]:
    """Point the root logger's console handlers at `stream`; returns what to restore."""
    moved = []
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler and handler.stream in (sys.__stderr__, sys.__stdout__):
            moved.append((handler, handler.stream))
            handler.setStream(stream)
    return moved


def _route_logging_back(moved: list[tuple[logging.StreamHandler[TextIO], TextIO]]) -> None:
    for handler, original in moved:
        handler.setStream(original)


def make_view(console: Console | None = None) -> View:
    console = console or Console()
    return LiveView(console) if console.is_terminal else PlainView(console)
