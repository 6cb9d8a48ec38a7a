"""Readers of a trainer's progress: time, iteration, samples and, where reported, step and data time.

A pure `Parser` turns the bytes a trainer appended into `Point`s; `Follow` is the one effect: it reads what a file
gained since the last read and feeds it, with the file's modification time (when the newest bytes were written).
Formats: JSON lines (the proxy's `progress.jsonl`; trainers writing a `metrics.jsonl` with `iter`, `data_time`,
`iter_time` like many trainers'), MimicKit's `log.txt` (a row every `iters_per_output` iterations; `Wall_Time` in
hours since training began) and its per-iteration stdout table, and a regex on any log, with presets for the
prints of common trainers (CleanRL, stable-baselines3, rsl_rl / legged_gym / Isaac Lab, rl_games, sheeprl, tqdm
bars, MimicKit's table).
Records without a time of their own get one from the file: those that arrive together are spread evenly, by
iteration, between the previous point and the write. Records whose iteration does not advance are dropped (a
line every rank prints counts once), and so are regex lines that repeat the sample count of the last one.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ladder.core.errors import ConfigError
from ladder.core.records import Point

log = logging.getLogger(__name__)

LINES = re.compile(rb"\r\n|\r|\n")  # MimicKit's log.txt ends its rows with a bare \r
UNIX_2001 = 1e9  # a "time" above this is a timestamp; below it, mmcv-style seconds per iteration


class Parser(Protocol):
    def feed(self, chunk: bytes, now: float, since: float | None = None) -> list[Point]: ...


class Follow:
    """Follows a file as it grows; a partial last line waits in the parser for the next read."""

    def __init__(self, path: Path, parser: Parser) -> None:
        self.path = path
        self.parser = parser
        self._offset = 0
        self._read_t: float | None = None  # when the previous read began: what it gained was written after it

    def read_new(self) -> list[Point]:
        since, self._read_t = self._read_t, time.time()
        try:
            with open(self.path, "rb") as fh:
                stat = os.fstat(fh.fileno())
                if stat.st_size < self._offset:  # rewritten from the start
                    self._offset = 0
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        return self.parser.feed(chunk, stat.st_mtime, since) if chunk else []


# ---------------------------------------------------------------- shared steps


@dataclass(frozen=True)
class Raw:
    """A progress record before it has its time: what the trainer printed."""

    iter: int
    samples: float = 0.0
    t: float | None = None
    step_time_s: float | None = None
    data_time_s: float | None = None
    peak_mem_mb: tuple[float, ...] = ()
    sps: float | None = None


class _Lines:
    def __init__(self) -> None:
        self._partial = b""

    def split(self, chunk: bytes) -> list[str]:
        *lines, self._partial = LINES.split(self._partial + chunk)
        return [line.decode(errors="replace") for line in lines if line.strip()]


class _Timeline:
    """Advancing records → points; those without a time spread between the previous point and `now`, or, where the
    chunk is known to have been written after `since` (the previous read), between that and `now`: lines that came
    after a pause keep the pause before them, not spread over it."""

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None  # (t, iter) of the last point

    def points(self, raws: Sequence[Raw], now: float, since: float | None = None) -> list[Point]:
        raws = self._advancing(raws)
        if not raws:
            return []
        t0, i0 = self._last or (now, raws[0].iter)
        if since is not None and self._last is not None and since <= now:  # one clock: a read, then the write
            t0 = max(t0, since)
        span, iters = max(0.0, now - t0), max(1, raws[-1].iter - i0)
        out = [_point(r, r.t if r.t is not None else t0 + span * max(0, r.iter - i0) / iters) for r in raws]
        self._last = (out[-1].t, out[-1].iter)
        return out

    def _advancing(self, raws: Sequence[Raw]) -> list[Raw]:
        last, out = (self._last[1] if self._last else None), []
        for raw in raws:
            if last is None or raw.iter > last:
                out.append(raw)
                last = raw.iter
        return out


def _point(r: Raw, t: float) -> Point:
    return Point(t, r.iter, r.samples, r.step_time_s, r.peak_mem_mb, r.data_time_s, r.sps)


def _samples(reported: Any, it: int, samples_per_iter: float | None) -> float:
    if reported is not None:
        return float(reported)
    return it * samples_per_iter if samples_per_iter else 0.0


# ---------------------------------------------------------------- JSON lines


def parse_record(line: bytes | str, samples_per_iter: float | None = None) -> Raw | None:
    """One JSON progress record, or None for anything else (start events, blank or broken lines)."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("iter"), (int, float)):
        return None
    when = rec.get("time")
    stamp = rec.get("t", rec.get("timestamp", when if _is_unix(when) else None))
    step = rec.get("step_time_s", rec.get("iter_time", None if _is_unix(when) else when))
    return Raw(
        iter=int(rec["iter"]),
        samples=_samples(rec.get("samples"), int(rec["iter"]), samples_per_iter),
        t=_num(stamp),
        step_time_s=_num(step),
        data_time_s=_num(rec.get("data_time_s", rec.get("data_time"))),
        peak_mem_mb=tuple(float(m) for m in rec.get("peak_mem_mb", ()) or ()),
        sps=_num(rec.get("sps")),
    )


def parse_line(line: bytes | str, now: float | None = None, samples_per_iter: float | None = None) -> Point | None:
    """One JSON progress record as a point; one without a time of its own gets `now` (None without it)."""
    raw = parse_record(line, samples_per_iter)
    if raw is None or (raw.t is None and now is None):
        return None
    return _point(raw, raw.t if raw.t is not None else float(now or 0.0))


def _is_unix(value: Any) -> bool:
    return isinstance(value, (int, float)) and value > UNIX_2001


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class JsonlParser:
    def __init__(self, samples_per_iter: float | None = None) -> None:
        self._lines, self._timeline = _Lines(), _Timeline()
        self._samples_per_iter = samples_per_iter

    def feed(self, chunk: bytes, now: float, since: float | None = None) -> list[Point]:
        raws = [parse_record(line, self._samples_per_iter) for line in self._lines.split(chunk)]
        return self._timeline.points([r for r in raws if r is not None], now, since)


class JsonlProgress(Follow):
    """The proxy's progress.jsonl, or any trainer's JSON lines with `iter` (and `t`, `samples`, ...)."""

    def __init__(self, path: Path, samples_per_iter: float | None = None) -> None:
        super().__init__(path, JsonlParser(samples_per_iter))


# ---------------------------------------------------------------- MimicKit


class MimicKitLogParser:
    """MimicKit's `log.txt` (`util/logger.py`): a header row of keys, then one row of values every
    `iters_per_output` iterations, each column `{:<25}`, rows ended by `\\r`. `Wall_Time` is hours since
    `train_model` began, so a row's time is that start plus its wall time; the start comes from `start_t`, or
    from the first read: the newest row then was written at the file's modification time."""

    def __init__(self, start_t: float | None = None) -> None:
        self._lines, self._timeline = _Lines(), _Timeline()
        self._header: list[str] | None = None
        self._start_t = start_t
        self._prev: tuple[float, int] | None = None  # (wall s, iter) of the previous row

    def feed(self, chunk: bytes, now: float, since: float | None = None) -> list[Point]:
        rows = [row for row in (self._row(line) for line in self._lines.split(chunk)) if row is not None]
        if rows and self._start_t is None:
            self._start_t = now - rows[-1]["Wall_Time"] * 3600.0
        return self._timeline.points([self._raw(row) for row in rows], now, since)

    def _row(self, line: str) -> dict[str, float] | None:
        cells = line.split()
        if self._header is None:
            self._header = cells
            return None
        values = [_float(c) for c in cells]
        if len(cells) != len(self._header) or None in values:
            log.debug("log.txt row does not match its header: %r", line[:200])
            return None
        row = dict(zip(self._header, (v for v in values if v is not None), strict=True))
        return row if {"Iteration", "Wall_Time", "Samples"} <= set(row) else None

    def _raw(self, row: dict[str, float]) -> Raw:
        wall_s, it = row["Wall_Time"] * 3600.0, int(row["Iteration"])
        step = (wall_s - self._prev[0]) / (it - self._prev[1]) if self._prev and it > self._prev[1] else None
        self._prev = (wall_s, it)
        return Raw(it, row["Samples"], (self._start_t or 0.0) + wall_s, step)


MIMICKIT_TABLE = re.compile(r"^\|\s*(?P<key>\w+)\s*\|\s*(?P<value>\S+)\s*\|$")


class MimicKitStdoutParser:
    """MimicKit's `Logger.print_log` table, printed by rank 0 after every iteration (`| Iteration | 12 |`,
    `| Wall_Time | 0.0034 |` at 3 significant digits: too coarse for times, `| Samples | 393216 |`, ...)."""

    def __init__(self) -> None:
        self._lines, self._timeline = _Lines(), _Timeline()
        self._iter: int | None = None

    def feed(self, chunk: bytes, now: float, since: float | None = None) -> list[Point]:
        raws = []
        for line in self._lines.split(chunk):
            m = MIMICKIT_TABLE.match(line.strip())
            if m is not None and m["key"] == "Iteration":
                self._iter = int(_float(m["value"]) or 0)
            elif m is not None and m["key"] == "Samples" and self._iter is not None:
                raws.append(Raw(self._iter, _float(m["value"]) or 0.0))
        return self._timeline.points(raws, now, since)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# ---------------------------------------------------------------- regex


REGEX_GROUPS = ("iter", "samples", "t", "step_time", "data_time", "sps")
_NUM = r"[\d.]+(?:[eE][+-]?\d+)?"


@dataclass(frozen=True)
class Preset:
    """A trainer's progress print as regexes: a line matching `emit` ends a record; lines matching one of `fields`
    (earlier in the same print) give it more groups. Each names the trainer's own printing code it was read from."""

    emit: str
    fields: tuple[str, ...] = ()
    samples_from_iter: bool = False  # the count is of samples (a tqdm bar over env steps): samples = iter
    source: str = ""
    per_iteration: bool = False  # it prints once a whole iteration, update included (no window can fall in a rollout)


# fmt: off
PRESETS = {
    # cleanrl/ppo*.py: `print("SPS:", int(global_step / (time.time() - start_time)))` once an iteration, and
    # `print(f"global_step={global_step}, episodic_return=...")` at episode ends: the latest global step before an
    # SPS line is its count (a lower bound, by less than one batch); without one, SPS (a mean since start) stands
    "cleanrl": Preset(r"\bSPS:\s*(?P<sps>\d+(?:\.\d+)?)", (r"\bglobal_step=(?P<samples>\d+)",),
                      source="vwxyzjn/cleanrl cleanrl/ppo.py", per_iteration=True),
    # stable_baselines3/common/logger.py HumanOutputFormat: `|    total_timesteps      | 4096 |` in `time/`, keys
    # sorted (fps, iterations, time_elapsed, total_timesteps); fps is a mean since learn() began
    "sb3": Preset(r"^\|\s+total_timesteps\s+\|\s*(?P<samples>\d+)\s*\|",
                  (r"^\|\s+fps\s+\|\s*(?P<sps>\d+)\s*\|", r"^\|\s+iterations\s+\|\s*(?P<iter>\d+)\s*\|"),
                  source="stable-baselines3 2.x common/logger.py, on_policy_algorithm.py dump_logs",
                  per_iteration=True),
    # rsl_rl's block per iteration, both generations: 1.x/2.x runners/on_policy_runner.py (legged_gym, Isaac Lab:
    # `Computation: N steps/s (collection: ...)`, `Total timesteps: N`) and 3.x+ utils/logger.py (`Total steps: N`,
    # `Steps per second: N`); every block starts `Learning iteration i/n` and ends `Iteration time: X.XXs`
    "rsl_rl": Preset(rf"^\s*Iteration time:\s*(?P<step_time>{_NUM})s",
                     (r"Learning iteration (?P<iter>\d+)/", r"^\s*Total (?:time)?steps:\s*(?P<samples>\d+)",
                      r"^\s*Computation:\s*(?P<sps>\d+) steps/s", r"^\s*Steps per second:\s*(?P<sps>\d+)"),
                     source="rsl-rl-lib 2.3.0 runners/on_policy_runner.py log(), 5.5.1 utils/logger.py log()",
                     per_iteration=True),
    # rl_games/common/a2c_common.py print_statistics: `fps step: N fps step and policy inference: N fps total: N
    # epoch: E[/M] frames: F[/M]` once an epoch (fps total: this epoch's frames over its time)
    "rl_games": Preset(r"fps total:\s*(?P<sps>\d+)\s+epoch:\s*(?P<iter>\d+)(?:/\d+)?\s+frames:\s*(?P<samples>\d+)",
                       source="rl-games 1.6.5 common/a2c_common.py print_statistics", per_iteration=True),
    # tqdm's bar, redrawn with \r: ` 45%|####5     | 450/1000 [00:12<00:15, 36.52it/s]` or `450it [00:12, 36.52it/s]`
    "tqdm": Preset(r"(?P<iter>\d+)(?:/\d+|it) \[[\d:]+(?:<[\d:?]+)?(?:,\s*(?P<sps>[\d.]+)it/s)?",
                   samples_from_iter=True, source="tqdm 4.x std.py format_meter"),
    # sheeprl's algos (ppo.py, sac.py, dreamer_v3.py, ...): `fabric.print(f"Rank-0: policy_step={policy_step},
    # reward_env_{i}={ep_rew}")` at each episode's end; policy_step counts the env steps of all envs and ranks
    "sheeprl": Preset(r"^Rank-0: policy_step=(?P<samples>\d+), reward_env_\d+=",
                      source="sheeprl 0.8.4 algos/ppo/ppo.py (and every algo's loop)"),
    # MimicKit's util/logger.py Logger.print_log table, printed by rank 0 after every iteration
    "mimickit": Preset(r"^\|\s*Samples\s*\|\s*(?P<samples>[\d.eE+]+)\s*\|",
                       (r"^\|\s*Iteration\s*\|\s*(?P<iter>\d+)\s*\|",),
                       source="xbpeng/MimicKit mimickit/util/logger.py print_log", per_iteration=True),
}
# fmt: on
PRESET_ALIASES = {
    "stable-baselines3": "sb3",
    "stable_baselines3": "sb3",
    "legged_gym": "rsl_rl",
    "isaaclab": "rsl_rl",
    "rl-games": "rl_games",
}


def preset_for(pattern: str) -> Preset:
    """A preset by name (or alias), else a one-line regex of the user's; a ConfigError when it cannot serve."""
    name = PRESET_ALIASES.get(pattern, pattern)
    preset = PRESETS.get(name, Preset(pattern))
    fix = f"use a preset ({', '.join(PRESETS)}) or a regex with named groups among: {', '.join(REGEX_GROUPS)}"
    groups: set[str] = set()
    for regex in (preset.emit, *preset.fields):
        try:
            groups |= set(re.compile(regex).groupindex)
        except re.error as exc:
            raise ConfigError(f"progress pattern '{pattern}' does not compile: {exc}", fix) from None
    unknown = sorted(groups - set(REGEX_GROUPS))
    if not re.compile(preset.emit).groupindex and (near := closest_preset(pattern)):
        raise ConfigError(
            f"progress pattern '{pattern}' is no preset (did you mean '{near}'?) and no regex with named groups", fix
        )
    if unknown or not re.compile(preset.emit).groupindex:
        raise ConfigError(f"progress pattern '{pattern}' has groups {sorted(re.compile(preset.emit).groupindex)}", fix)
    return preset


def closest_preset(pattern: str) -> str:
    """The preset (or alias) a misspelt name most likely meant ("" where none is close)."""
    names = [*PRESETS, *PRESET_ALIASES]
    return next(iter(difflib.get_close_matches(pattern.lower(), names, n=1, cutoff=0.6)), "")


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The regex that ends a record, for a preset name or a regex whose named groups are among REGEX_GROUPS."""
    return re.compile(preset_for(pattern).emit)


class RegexParser:
    """One record per line matching the preset's (or the user's) `emit` regex, with the groups of the lines before
    it that match its `fields`. The iteration is group `iter`, else the count of records; samples are group
    `samples` (a cumulative count, kept from one record to the next: a trainer may print it less often), else
    iteration × `samples_per_iter`. A trainer that prints only a rate gives `sps` (see stats: it then stands for
    samples/s, and the figures say so)."""

    def __init__(self, pattern: str, samples_per_iter: float | None = None) -> None:
        self.preset = preset_for(pattern)
        self.pattern = re.compile(self.preset.emit)
        self._fields = [re.compile(f) for f in self.preset.fields]
        self._lines, self._timeline = _Lines(), _Timeline()
        self._samples_per_iter = samples_per_iter
        self._count = 0
        self._held: dict[str, str] = {}  # groups of the fields lines since the last record
        self._counter: str | None = None  # the sample count of the last record with no iteration of its own

    def feed(self, chunk: bytes, now: float, since: float | None = None) -> list[Point]:
        raws = []
        for line in self._lines.split(chunk):
            for regex in self._fields:
                if (m := regex.search(line)) is not None:
                    self._held.update({k: v for k, v in m.groupdict().items() if v is not None})
            if (m := self.pattern.search(line)) is not None:
                own = {k: v for k, v in m.groupdict().items() if v is not None}
                if not self._repeats(own):
                    raws.append(self._raw(self._held | own))
                self._held = {k: v for k, v in self._held.items() if k == "samples"}
        return self._timeline.points(raws, now, since)

    def _repeats(self, own: dict[str, str]) -> bool:
        """A line with no iteration whose own sample count is the last such line's is the same moment of the trainer
        (CleanRL prints `global_step=N` once for every env whose episode ended in that step): not a new point, since
        its progress is its counter. A count carried from a `fields` line is no such repeat."""
        counter = None if "iter" in own or "iter" in self._held else own.get("samples")
        repeated = counter is not None and counter == self._counter
        self._counter = counter if counter is not None else self._counter
        return repeated

    def _raw(self, groups: dict[str, str]) -> Raw:
        def num(name: str) -> float | None:
            value = groups.get(name)
            return None if value is None else _float(value)

        self._count += 1
        got = num("iter")
        it = int(got) if got is not None else self._count
        reported = float(it) if self.preset.samples_from_iter else num("samples")
        if self._samples_per_iter:  # given, the batch size is exact (a carried count may lag)
            reported = None
        return Raw(
            it,
            _samples(reported, it, self._samples_per_iter),
            num("t"),
            num("step_time"),
            num("data_time"),
            (),
            num("sps"),
        )


# ---------------------------------------------------------------- by kind


KINDS = ("jsonl", "mimickit_log", "mimickit_stdout", "regex")  # the values of workloads.spec.ProgressKind
ALIASES = {"mimickit": "mimickit_log", "stdout": "regex"}


def parser_for(kind: str, pattern: str = "", samples_per_iter: float | None = None) -> Parser:
    """The parser for a progress kind (a string or a str-valued enum)."""
    name = ALIASES.get(str(getattr(kind, "value", kind)), str(getattr(kind, "value", kind)))
    if name == "jsonl":
        return JsonlParser(samples_per_iter)
    if name == "mimickit_log":
        return MimicKitLogParser()
    if name == "mimickit_stdout":
        return MimicKitStdoutParser()
    if name == "regex":
        return RegexParser(pattern or "cleanrl", samples_per_iter)
    raise ConfigError(f"unknown progress kind {kind!r}", f"use one of: {', '.join(KINDS)}")


def per_iteration(kind: str, pattern: str = "") -> bool:
    """Whether each progress point of this format is a whole iteration, update included: MimicKit's table and log,
    and the presets of trainers that print once an iteration. A user's own regex or JSON lines may come from inside
    a rollout: their cadence is learned from the trial (`ladder.core.measure.peak.outlived_peak`)."""
    name = ALIASES.get(str(getattr(kind, "value", kind)), str(getattr(kind, "value", kind)))
    if name in ("mimickit_log", "mimickit_stdout"):
        return True
    return name == "regex" and preset_for(pattern or "cleanrl").per_iteration


def numbered(kind: str, pattern: str = "") -> bool:
    """Whether the trainer numbers its own iterations in what ladder reads: JSON lines (`iter`), MimicKit's table and
    log, a regex or preset with an `iter` group that counts iterations. A regex without one (or one whose count is of
    samples, as a tqdm bar over env steps) only counts lines: an even run of them may be one long rollout."""
    name = ALIASES.get(str(getattr(kind, "value", kind)), str(getattr(kind, "value", kind)))
    if name != "regex":
        return True
    preset = preset_for(pattern or "cleanrl")
    groups = {g for regex in (preset.emit, *preset.fields) for g in re.compile(regex).groupindex}
    return "iter" in groups and not preset.samples_from_iter


def reader_for(kind: str, path: Path, pattern: str = "", samples_per_iter: float | None = None) -> Follow:
    """A reader that follows `path` (progress.jsonl, log.txt, stdout.log, ...) in the given format."""
    return Follow(path, parser_for(kind, pattern, samples_per_iter))


def read_all(path: Path, kind: str = "jsonl", pattern: str = "", samples_per_iter: float | None = None) -> list[Point]:
    """Every point a finished file holds (the times of untimed records then come from its modification time)."""
    return reader_for(kind, path, pattern, samples_per_iter).read_new()
