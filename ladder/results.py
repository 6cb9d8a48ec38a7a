"""TSV rows and columns, the best pick per case, and the writers (atomic, under a file lock).

`best_by_case.tsv` keeps the seed's leading columns (`case method variant num_envs status min_avg_util max_mem0
max_mem1 ...`) so the seed's own one-liners read it unchanged; `trials.tsv` has one row per trial. The writers
are the only effects here: a temp file in the same folder, renamed over the target, under a `filelock` lock.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from filelock import FileLock

from ladder.records import Status, TrialRecord

SEED_HEAD = ("case", "method", "variant", "num_envs", "status", "min_avg_util")
BEST_TAIL = (
    "samples_per_s", "p50_util", "active_frac", "avg_active_util", "step_time_p50", "window_s", "gated", "reason",
    "evidence", "gpu_name", "gpu_mem_total", "n_gpus", "driver", "torch", "source", "workload", "width_factor",
    "emulate_gpu_mem_gb", "phase", "trials", "sweep", "host", "finished_at", "trial_dir",
)  # fmt: skip
TRIAL_HEAD = ("number", "case", "method", "variant", "num_envs", "phase", "status", "reason")
TRIAL_TAIL = (
    "evidence", "trial_dir", "started_at", "finished_at", "duration_s", "device", "nproc", "source",
    "width_factor", "emulate_gpu_mem_gb", "port", "host", "sweep",
)  # fmt: skip
MERGE_KEY = ("case", "gpu_name", "n_gpus")  # rows for one case on different hardware coexist


def objective_value(record: TrialRecord, objective: str) -> float | None:
    return record.figures.get(objective) if record.status is Status.OK else None


def best(records: Sequence[TrialRecord], objective: str) -> TrialRecord | None:
    """The case's best ok trial by `objective`; ties go to the larger num_envs."""
    scored = [(objective_value(r, objective), r.num_envs, r) for r in records]
    ok = [(v, n, r) for v, n, r in scored if v is not None]
    return max(ok, key=lambda x: (x[0], x[1]))[2] if ok else None


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
    """Incoming rows replace existing ones with the same (case, gpu_name, n_gpus); order: by case, then key."""
    merged = {_key(r): r for r in existing}
    merged.update({_key(r): r for r in incoming})
    return [merged[k] for k in sorted(merged)]


def write_best(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """Merge `rows` into the shared best_by_case.tsv without losing anyone else's rows."""
    with FileLock(str(path) + ".lock"):
        merged = merge_rows(read_tsv(path), rows)
        atomic_write(path, to_tsv(merged, columns(merged, SEED_HEAD, BEST_TAIL, rest=False)))


def write_trials(path: Path, records: Sequence[TrialRecord]) -> None:
    rows = [trial_row(r) for r in records]
    with FileLock(str(path) + ".lock"):
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


def _key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(row.get(k, "") for k in MERGE_KEY)


def _fill(column: str) -> str:
    """max_memN of a row measured on fewer devices is 0, so the seed's max(float(...)) still reads it."""
    return "0" if column.startswith("max_mem") else ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]
