"""TSV rows and columns: a trial's row, the best row per case (which trial counts: `ladder.core.pick`), and the
merge rule. Pure: the files themselves are `ladder.storage.tsv`'s.

`best_by_case.tsv` keeps its original leading columns (`case method variant num_envs status min_avg_util max_mem0
max_mem1 ...`) so one-liners written for it read it unchanged; `trials.tsv` has one row per trial. Each best row
carries its provenance: `gpu_name gpu_mem_total n_gpus driver torch host workload_version sweep finished_at`.

Merge rule (`merge_rows`, used by every write of best_by_case.tsv and by `python -m ladder.merge`): rows are keyed
by case and hardware, `(case, gpu_name, gpu_mem_total, n_gpus)`, so one case measured on different cards (or on a
different number of them, or under another emulated card size) keeps one row per hardware. Among rows with the
same key the winner is the greatest by, in order:

1. status `ok` over any other status (a row that found a stable rung is never replaced by one that did not);
2. phase `confirm` over `probe` (a confirmed pick over a probed one);
3. the newer `finished_at` (UTC ISO-8601; a missing or unreadable one is the oldest);
4. the larger `num_envs`;
5. a measured `placement` over none (the same pick, before and after its placement phase; a file written before
   the placement columns reads as none);
6. the row's full text (its sorted (column, value) pairs), so that even exact ties are decided the same way.

The rule is a total order on rows, so a merge does not depend on the order of its inputs or on which machine runs
it: merging A into B gives what merging B into A gives, and merging the same file twice changes nothing.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone

from ladder.core import figkeys, placement
from ladder.core.records import Status, TrialRecord

SEED_HEAD = ("case", "method", "variant", "num_envs", "status", "min_avg_util")
BEST_TAIL = (  # knob: what num_envs holds the value of (the leading columns stay as they were)
    "knob",
    "util_spread",
    "objective",  # the figure the pick maximised (objective=): the report explains the pick on it
    "tie",  # the noise of min_avg_util; the pick's tie within the noise and what broke it
    "samples_per_s",
    "samples_per_s_lo",
    "samples_per_s_hi",
    "samples_per_joule",  # a GPU's window: its samples over its GPUs' joules (blank on CPU)
    "samples_per_joule_lo",
    "samples_per_joule_hi",
    "energy_j",
    "avg_power_w",
    "energy_counter",  # 1: the joules are NVML's energy counter's; 0: its power readings integrated
    "p50_util",
    "active_s",
    "idle_s",
    "avg_active_util",
    "step_time_p50",
    "data_time_p50",
    "window_s",
    "gated",
    "n_samples",
    "unstable",
    "repeat_spread",
    "repeats",
    "cgroup_peak_mb",
    "cgroup_limit_mb",  # the memory a host_mem_limit_gb cap limits (the trial's cgroup), and the cap
    "cap_used_mb",
    "cap_mb",
    "class",
    "action",
    *placement.COLUMNS,  # one_job, per_device or tie, and its figures: the pick against one-device jobs side by side
    "reason",
    "evidence",
    "gpu_name",
    "gpu_mem_total",
    "n_gpus",
    "driver",
    "torch",
    "source",
    "workload",
    "workload_version",
    "width_factor",
    "emulate_gpu_mem_gb",
    "phase",
    "trials",
    "sweep",
    "host",
    "finished_at",
    "trial_dir",
)
TRIAL_HEAD = ("number", "case", "method", "variant", "num_envs", "knob", "phase", "status", "reason")
TRIAL_TAIL = (
    "evidence",
    "trial_dir",
    "started_at",
    "finished_at",
    "duration_s",
    "device",
    "nproc",
    "source",
    "width_factor",
    "emulate_gpu_mem_gb",
    "port",
    "host",
    "sweep",
)
MERGE_KEY = ("case", "gpu_name", "gpu_mem_total", "n_gpus")  # rows for one case on different hardware coexist


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
        "variant": record.profile,
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
    """Head, per-device columns in index order (max_memN first, as the file always had them), then the tail;
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


def merge_rows(existing: Sequence[dict[str, str]], incoming: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """One row per (case, hardware), the winner by the module's merge rule; order: by case, then hardware.
    Which argument a row comes in does not matter."""
    merged: dict[tuple[str, ...], dict[str, str]] = {}
    for row in [*existing, *incoming]:
        key = _key(row)
        if key not in merged or rank(row) > rank(merged[key]):
            merged[key] = row
    return [merged[k] for k in sorted(merged)]


def rank(row: dict[str, str]) -> tuple[bool, bool, float, int, bool, tuple[tuple[str, str], ...]]:
    """The merge rule as a sort key: the greater row wins (see the module docstring)."""
    return (
        row.get("status") == "ok",
        row.get("phase") == "confirm",
        _when(row.get("finished_at", "")),
        _int(row.get("num_envs", "")),
        bool(row.get("placement")),
        tuple(sorted(row.items())),
    )


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
    """max_memN of a row measured on fewer devices is 0, so a reader's max(float(...)) still reads it."""
    return "0" if figkeys.index_of(column, figkeys.MAX_MEM) is not None else ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
