"""TSV rows and columns, the best pick per case, the merge rule, and the writers (atomic, under a file lock).

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

The writers and `code_version` are the only effects here. A write is a temp file in the same folder renamed over
the target, under a `filelock` lock beside it (`<name>.lock`), and the merge reads the file inside the lock, so
concurrent sweeps, and hosts sharing a filesystem whose locks work across hosts (NFSv4, Lustre with flock), never
lose each other's rows.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TypeVar

from filelock import FileLock

from ladder.records import Status, TrialRecord

SEED_HEAD = ("case", "method", "variant", "num_envs", "status", "min_avg_util")
BEST_TAIL = (  # knob: what num_envs holds the value of (the seed's head stays as it was)
    "knob",
    "samples_per_s", "samples_per_s_lo", "samples_per_s_hi", "p50_util", "active_s", "idle_s", "avg_active_util",
    "step_time_p50", "data_time_p50", "window_s", "gated", "n_samples", "unstable", "repeat_spread", "repeats",
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
REPEAT_FIGURES = ("repeats", "unstable", "repeat_spread", "ci_frac")  # about all repeats of a configuration
Records = Sequence[TrialRecord] | Callable[[], Sequence[TrialRecord]]
T = TypeVar("T")


def objective_value(record: TrialRecord, objective: str) -> float | None:
    return record.figures.get(objective) if record.status is Status.OK else None


def best(records: Sequence[TrialRecord], objective: str) -> TrialRecord | None:
    """The case's best ok trial by `objective` (`pick`'s rule), repeats taken as their median (`median_repeats`)."""
    scored = [(v, r.figures.get(f"{objective}_hi"), r.num_envs, r) for r in median_repeats(records, objective)
              if (v := objective_value(r, objective)) is not None]  # fmt: skip
    return pick(scored)


def median_repeats(records: Sequence[TrialRecord], objective: str) -> list[TrialRecord]:
    """A configuration measured several times (`measure.repeats`: same profile, rung and phase, each ok) as one
    record: its median repeat by `objective` (the lower middle one for an even count), so that the best of n
    repeats never stands for the configuration, carrying the repeat verdict over all of them (`REPEAT_FIGURES`, from
    the last repeat, which saw them all). Every other record stays; the order of first appearance is kept."""
    groups: dict[tuple[str, int, str], list[TrialRecord]] = {}
    slots: list[TrialRecord | tuple[str, int, str]] = []
    for record in records:
        if objective_value(record, objective) is None:
            slots.append(record)
            continue
        key = (record.variant, record.num_envs, str(record.phase))
        if key not in groups:
            groups[key] = []
            slots.append(key)
        groups[key].append(record)
    return [slot if isinstance(slot, TrialRecord) else _median_of(groups[slot], objective) for slot in slots]


def _median_of(repeats: list[TrialRecord], objective: str) -> TrialRecord:
    if len(repeats) == 1:
        return repeats[0]
    ranked = sorted(repeats, key=lambda r: (objective_value(r, objective), r.number))
    median, last = ranked[(len(ranked) - 1) // 2], max(repeats, key=lambda r: r.number)
    verdict = {k: v for k, v in last.figures.items() if k in REPEAT_FIGURES}
    return replace(median, figures={**median.figures, **verdict})


def pick(scored: Sequence[tuple[float, float | None, int, T]]) -> T | None:
    """The best of (value, top of its measured interval or None, num_envs, item): the highest value; ties go to
    the larger num_envs, and a larger num_envs whose interval reaches the best value is a tie too."""
    if not scored:
        return None
    value, _, envs, top = max(scored, key=lambda x: (x[0], x[2]))
    tied = [(n, v, item) for v, hi, n, item in scored if n > envs and (hi if hi is not None else v) >= value]
    return max(tied, key=lambda x: (x[0], x[1]))[2] if tied else top


def to_beat(value: float, hi: float | None, envs: int, rung: int) -> float:
    """What a trial at `rung` must reach (the top of its interval) to become the pick over the best so far
    (`value`, `hi`, `envs`): its value, for as many envs or more; for fewer, the top of its interval, since the
    best would tie back. Below this, by `pick`'s rule, it cannot become the pick, whatever comes later."""
    return max(value, hi if hi is not None else value) if rung < envs else value


def best_row(record: TrialRecord, n_trials: int) -> dict[str, str]:
    row = trial_row(record)
    row["trials"] = str(n_trials)
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
    mem = sorted((k for k in keys if k.startswith("max_mem") and k[7:].isdigit()), key=lambda k: int(k[7:]))
    util = sorted((k for k in keys if k.startswith("avg_util") and k[8:].isdigit()), key=lambda k: int(k[8:]))
    middle = sorted(keys - set(head) - set(tail) - set(mem) - set(util)) if rest else []
    return [*head, *mem, *util, *middle, *tail]


def to_tsv(rows: Sequence[dict[str, str]], cols: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(cols), delimiter="\t", lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, _fill(c)) for c in cols})
    return buf.getvalue()


def read_tsv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


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


def write_best(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """Merge `rows` into the shared best_by_case.tsv without losing anyone else's rows."""
    with FileLock(str(path) + ".lock"):
        merged = merge_rows(read_tsv(path), rows)
        atomic_write(path, to_tsv(merged, columns(merged, SEED_HEAD, BEST_TAIL, rest=False)))


def write_trials(path: Path, records: Records) -> None:
    """Rewrite trials.tsv. Pass a loader (e.g. `lambda: store.sweep_records(storage, sweep)`) rather than a list
    when several processes share the file: it is called inside the lock, so the last writer has the newest rows."""
    with FileLock(str(path) + ".lock"):
        rows = [trial_row(r) for r in (records() if callable(records) else records)]
        atomic_write(path, to_tsv(rows, columns(rows, TRIAL_HEAD, TRIAL_TAIL)))


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def code_version(where: Path, package: str = "ladder") -> str:
    """The workload's code version: the commit of the git checkout holding `where` (12 hex digits, `-dirty` when
    tracked files differ from it), else the installed version of `package`, else "" (an effect: runs git)."""
    try:
        out = subprocess.run(["git", "-C", str(where), "describe", "--always", "--dirty", "--abbrev=12", "--exclude=*"],
                             capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return _package_version(package)


def _package_version(package: str) -> str:
    try:
        return f"{package}=={metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return ""


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
    return "0" if column.startswith("max_mem") else ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
