"""TSV rows and columns, the best row per case (the pick: ladder/pick.py), the merge rule, and the writers
(atomic, under a file lock).

`best_by_case.tsv` keeps the seed's leading columns (`case method variant num_envs status min_avg_util max_mem0
max_mem1 ...`) so the seed's own one-liners read it unchanged; `trials.tsv` has one row per trial. Each best row
carries its provenance: `gpu_name gpu_mem_total n_gpus driver torch host workload_version sweep finished_at`.

Merge rule (`merge_rows`, used by every write of best_by_case.tsv and by `python -m ladder.merge`): rows are keyed
by case and hardware, `(case, gpu_name, gpu_mem_total, n_gpus)`, so one case measured on different cards (or on a
different number of them, or under another emulated card size) keeps one row per hardware. Among rows with the
same key the winner is the greatest by, in order:

1. status `ok` over any other status (a row that found a stable rung is never replaced by one that did not);
2. phase `confirm` over `probe` (a confirmed pick over a probed one);
3. the newer `finished_at` (UTC ISO-8601; a missing or unreadable one is the oldest);
4. the larger `num_envs`;
5. the row's full text (its sorted (column, value) pairs), so that even exact ties are decided the same way.

The rule is a total order on rows, so a merge does not depend on the order of its inputs or on which machine runs
it: merging A into B gives what merging B into A gives, and merging the same file twice changes nothing.

The writers and `code_version` are effects and live in `ladder.outputs` (still reachable here by their names, for
the callers that use them so), so that importing this module imports no lock, thread or subprocess.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ladder import figkeys
from ladder.errors import StorageError
from ladder.pick import REPEAT_FIGURES, best, median_repeats, objective_value, pick, to_beat  # noqa: F401
from ladder.records import Status, TrialRecord

SEED_HEAD = ("case", "method", "variant", "num_envs", "status", "min_avg_util")
BEST_TAIL = (  # knob: what num_envs holds the value of (the seed's head stays as it was)
    "knob",
    "util_spread", "tie",  # the noise of min_avg_util; the pick's tie within the noise and what broke it
    "samples_per_s", "samples_per_s_lo", "samples_per_s_hi", "p50_util", "active_s", "idle_s", "avg_active_util",
    "step_time_p50", "data_time_p50", "window_s", "gated", "n_samples", "unstable", "repeat_spread", "repeats",
    "cgroup_peak_mb", "cgroup_limit_mb",  # the memory a host_mem_limit_gb cap limits (the trial's cgroup), and the cap
    "cap_used_mb", "cap_mb", "class", "action", "reason", "evidence", "gpu_name", "gpu_mem_total", "n_gpus", "driver",
    "torch", "source", "workload", "workload_version", "width_factor", "emulate_gpu_mem_gb", "phase", "trials", "sweep",
    "host", "finished_at", "trial_dir",
)  # fmt: skip
TRIAL_HEAD = ("number", "case", "method", "variant", "num_envs", "knob", "phase", "status", "reason")
TRIAL_TAIL = (
    "evidence", "trial_dir", "started_at", "finished_at", "duration_s", "device", "nproc", "source",
    "width_factor", "emulate_gpu_mem_gb", "port", "host", "sweep",
)  # fmt: skip
MERGE_KEY = ("case", "gpu_name", "gpu_mem_total", "n_gpus")  # rows for one case on different hardware coexist
Records = Sequence[TrialRecord] | Callable[[], Sequence[TrialRecord]]


def best_row(record: TrialRecord, n_trials: int) -> dict[str, str]:
    """The case's row. An `error` trial stands only for a case that has nothing else (`pick.fallback`): its row
    says `error` with the evidence and the trial folder, and carries no `num_envs` and no figures, since the rung
    that broke is no answer (readers that take `num_envs` of non-`ok` rows find it empty)."""
    row = trial_row(record)
    row["trials"] = str(n_trials)
    if record.status is Status.ERROR:
        row = {k: v for k, v in row.items() if k not in record.figures} | {"num_envs": ""}
    return row


def trial_row(record: TrialRecord) -> dict[str, str]:
    row = {
        "number": str(record.number),
        "case": record.case,
        "method": record.method,
        "variant": record.variant,
        "num_envs": str(record.num_envs),
        "knob": record.info.get("knob", "num_envs"),  # the column num_envs holds this knob's value
        "phase": str(record.phase),
        "status": str(record.status),
        "reason": str(record.reason),
        "evidence": _one_line(record.evidence),
    }
    row.update({k: _num(v) for k, v in record.figures.items()})
    row.update({k: v for k, v in record.info.items() if k not in row})
    return row


def columns(rows: Iterable[dict[str, str]], head: Sequence[str], tail: Sequence[str], rest: bool = True) -> list[str]:
    """Head, per-device columns in index order (max_memN first, as the seed has them), then the tail;
    with `rest`, every other key the rows carry goes between, sorted."""
    keys = {k for row in rows for k in row}
    mem, util = figkeys.keys(keys, figkeys.MAX_MEM), figkeys.keys(keys, figkeys.AVG_UTIL)
    middle = sorted(keys - set(head) - set(tail) - set(mem) - set(util)) if rest else []
    return [*head, *mem, *util, *middle, *tail]


def to_tsv(rows: Sequence[dict[str, str]], cols: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(cols), delimiter="\t", lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, _fill(c)) for c in cols})
    return buf.getvalue()


class TsvError(StorageError):
    """A TSV that cannot be read as one: bytes that are not UTF-8, NUL bytes, a row cut short or with extra
    fields, a last line with no newline (a write cut short). Carries the path."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        fix = (f"move it aside; `python -m ladder.merge --best-from-storage {path.parent} {path}` rebuilds a "
               "best_by_case.tsv from the sweeps' storage, `--trials-from-storage` a trials.tsv")  # fmt: skip
        super().__init__(f"{path} is damaged: {what}", fix)


def read_tsv(path: Path) -> list[dict[str, str]]:
    """The rows of a TSV ladder wrote ([] when there is none); `TsvError` when it is damaged."""
    if not path.exists():
        return []
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TsvError(path, f"bytes that are not UTF-8 at offset {exc.start}") from None
    if "\x00" in text:
        raise TsvError(path, f"a NUL byte at line {text.count(chr(10), 0, text.index(chr(0))) + 1}")
    if text and not text.endswith("\n"):
        raise TsvError(path, "its last line has no newline (a write cut short)")
    return _rows(path, text)


def _rows(path: Path, text: str) -> list[dict[str, str]]:
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline=""), delimiter="\t"))
    except csv.Error as exc:
        raise TsvError(path, str(exc)) from None
    for number, row in enumerate(rows, start=2):
        if None in row or None in row.values():
            raise TsvError(path, f"line {number} has {'more' if None in row else 'fewer'} fields than the header")
    return rows


def set_aside(path: Path) -> Path:
    """Rename a damaged file to `<name>.damaged-<UTC stamp>` beside it; returns the new path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    moved = path.with_name(f"{path.name}.damaged-{stamp}")
    os.replace(path, moved)
    return moved


def merge_rows(existing: Sequence[dict[str, str]], incoming: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """One row per (case, hardware), the winner by the module's merge rule; order: by case, then hardware.
    Which argument a row comes in does not matter."""
    merged: dict[tuple[str, ...], dict[str, str]] = {}
    for row in [*existing, *incoming]:
        key = _key(row)
        if key not in merged or rank(row) > rank(merged[key]):
            merged[key] = row
    return [merged[k] for k in sorted(merged)]


def rank(row: dict[str, str]) -> tuple[bool, bool, float, int, tuple[tuple[str, str], ...]]:
    """The merge rule as a sort key: the greater row wins (see the module docstring)."""
    return (row.get("status") == "ok", row.get("phase") == "confirm", _when(row.get("finished_at", "")),
            _int(row.get("num_envs", "")), tuple(sorted(row.items())))  # fmt: skip


def _when(stamp: str) -> float:
    """A finished_at as unix seconds (naive means UTC); -inf when missing or unreadable, so it loses."""
    try:
        moment = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return float("-inf")
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def _key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(row.get(k, "") for k in MERGE_KEY)


def _fill(column: str) -> str:
    """max_memN of a row measured on fewer devices is 0, so the seed's max(float(...)) still reads it."""
    return "0" if figkeys.index_of(column, figkeys.MAX_MEM) is not None else ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


EFFECTS = (
    "write_best",
    "write_trials",
    "atomic_write",
    "code_version",
    "lock_path",
    "remove_stale_temps",
)  # in ladder.outputs


def __getattr__(name: str) -> Any:
    """`results.write_best` and the other effects, imported on first use only (see the module docstring)."""
    if name in EFFECTS:
        from ladder import outputs

        return getattr(outputs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
