"""A journal with unreadable lines made whole again (`python -m ladder.repair <sweep folder>` is the command).

Every readable record is kept; unreadable lines (and a readable record glued after a torn fragment is recovered
from its line) are set aside. Optuna numbers studies and trials by the order of their create records, so a lost
create would shift every later id onto the wrong trial: a lost line's op code is read from its fragment where it
shows (Optuna writes `op_code` first), else inferred (a later record naming a trial no kept create explains), and
the records of a lost trial are set aside too, later ids renumbered. The walk then runs the lost trials again.

The original journal is kept as `journal.log.before-repair-<stamp>`, the set-aside lines as
`journal.log.set-aside-<stamp>` (one JSON line each: the line number and its text); the new journal is written to
a temporary file, replayed by Optuna, and only then renamed over the old one, under the journal's lock.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ladder.core.errors import StorageError
from ladder.core.paths import JOURNAL
from ladder.storage.journal import SafeJournal, readable, side_file

CREATE_STUDY, CREATE_TRIAL = 0, 4
STUDY_OPS, TRIAL_OPS = (1, 2, 3, 4), (5, 6, 7, 8, 9)  # ops naming a study_id / a trial_id
OP_CODE = re.compile(rb'\{\s*"op_code"\s*:\s*(\d+)')


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, in the journal as found
    text: bytes
    record: dict[str, Any] | None  # None: unreadable
    op: int | None  # the op code, where readable or shown by the fragment


@dataclass
class Plan:
    kept: list[dict[str, Any]] = field(default_factory=list)
    set_aside: list[tuple[int, str, str]] = field(default_factory=list)  # (line, why, text)


# ---------------------------------------------------------------- pure


def parse(lines: Sequence[bytes]) -> list[Line]:
    """Each journal line as a record, or as an unreadable fragment plus the record glued after it, if any."""
    out: list[Line] = []
    for number, text in enumerate(lines, start=1):
        if readable(text):
            record = json.loads(text)
            out.append(Line(number, text, record, record.get("op_code")))
            continue
        cut, glued = _glued(text)
        fragment = text[:cut]
        found = OP_CODE.match(fragment)
        out.append(Line(number, fragment, None, int(found.group(1)) if found else None))
        if glued is not None:
            out.append(Line(number, text[cut:], glued, glued.get("op_code")))
    return out


def plan(lines: Sequence[Line]) -> Plan:
    """The records to keep (ids renumbered past lost creates) and the lines set aside, with why."""
    lost_creates = _lost_creates(lines)
    study_map = _study_map(lines)
    result, trial_map = Plan(), _id_map(lines, lost_creates, study_map)
    for line in lines:
        if line.record is None:
            result.set_aside.append((line.number, "unreadable", line.text.decode("utf-8", "backslashreplace")))
            continue
        renumbered = _renumber(line.record, trial_map, study_map)
        if renumbered is None:
            result.set_aside.append(
                (
                    line.number,
                    "refers to a trial or study whose create record was lost",
                    line.text.decode("utf-8", "backslashreplace"),
                )
            )
        else:
            result.kept.append(renumbered)
    return result


def _glued(text: bytes) -> tuple[int, dict[str, Any] | None]:
    """Where a whole record starts inside an unreadable line (a torn write, then the next append glued on)."""
    for found in OP_CODE.finditer(text, 1):
        tail = text[found.start() :]
        if readable(tail if tail.endswith(b"\n") else tail + b"\n"):
            return found.start(), json.loads(tail)
    return len(text), None


def _lost_creates(lines: Sequence[Line]) -> set[int]:
    """Indices (into `lines`) of the unreadable lines that were trial creates: those whose fragment says so, and,
    earliest first, as many unknown ones as the later records need to name only trials that exist."""
    known = {i for i, ln in enumerate(lines) if ln.record is None and ln.op == CREATE_TRIAL}
    unknown = [i for i, ln in enumerate(lines) if ln.record is None and ln.op is None]
    while (short := _first_unexplained(lines, known)) is not None:
        before = [i for i in unknown if i < short and i not in known]
        if not before:
            break  # nothing can explain it: that record is set aside (it names no trial)
        known.add(before[-1])
    return known


def _first_unexplained(lines: Sequence[Line], creates: set[int]) -> int | None:
    made = 0
    for i, line in enumerate(lines):
        if i in creates or (line.record is not None and line.op == CREATE_TRIAL):
            made += 1
        elif line.record is not None and line.op in TRIAL_OPS and int(line.record.get("trial_id", -1)) >= made:
            return i
    return None


def _id_map(lines: Sequence[Line], lost: set[int], studies: dict[int, int | None]) -> dict[int, int | None]:
    """Old trial id -> new id (None: its create was lost, or its study's). A record never names a trial created
    after it (creates are appended before anything about them), so one map serves every line."""
    mapping: dict[int, int | None] = {}
    new = 0
    for i, line in enumerate(lines):
        if i in lost:
            mapping[len(mapping)] = None
        elif line.record is not None and line.op == CREATE_TRIAL:
            if studies.get(int(line.record.get("study_id", -1))) is None:
                mapping[len(mapping)] = None
            else:
                mapping[len(mapping)], new = new, new + 1
    return mapping


def _study_map(lines: Sequence[Line]) -> dict[int, int | None]:
    """Old study id -> new (None: its create was lost, as its fragment shows). A create of a name already made
    takes no id (Optuna ignores it)."""
    names: set[str] = set()
    mapping: dict[int, int | None] = {}
    new = 0
    for line in lines:
        if line.record is None and line.op == CREATE_STUDY:
            mapping[len(mapping)] = None
        elif line.record is not None and line.op == CREATE_STUDY and line.record.get("study_name") not in names:
            names.add(str(line.record.get("study_name")))
            mapping[len(mapping)], new = new, new + 1
    return mapping


def _renumber(
    record: dict[str, Any], trials: dict[int, int | None], studies: dict[int, int | None]
) -> dict[str, Any] | None:
    out = dict(record)
    for key, ops, ids in (("trial_id", TRIAL_OPS, trials), ("study_id", STUDY_OPS, studies)):
        if record.get("op_code") in ops:
            new = ids.get(int(record.get(key, -1)))
            if new is None:
                return None
            out[key] = new
    return out


# ---------------------------------------------------------------- effects


def repair(folder: Path) -> tuple[int, int, Path | None, list[str]]:
    """Repair `folder`'s journal in place; returns (records kept, lines set aside, the set-aside file or None, the
    trials whose outcome went with the lines set aside: `<study> #<number>`, each no longer counted, its rung run
    again when the sweep resumes)."""
    path = folder / JOURNAL if folder.is_dir() else folder
    if not path.is_file():
        raise StorageError(f"no journal at {path}", "give a sweep folder that holds journal.log")
    found = path.read_bytes().splitlines(keepends=True)
    _is_journal(path, parse(found), len(found))  # before the lock, whose file would be left beside a wrong one
    with SafeJournal(str(path)).lock:
        lines = path.read_bytes().splitlines(keepends=True)
        result = plan(parse(lines))
        if not result.set_aside:
            return len(result.kept), 0, None, []
        open_trials = _replace(path, result)
        aside = side_file(path, "set-aside")
        aside.write_text("".join(json.dumps({"line": n, "why": w, "text": t}) + "\n" for n, w, t in result.set_aside))
    return len(result.kept), len(result.set_aside), aside, open_trials


def _is_journal(path: Path, lines: Sequence[Line], count: int) -> None:
    """Refuse a file that is not a journal (a trials.tsv, a README given by mistake): a journal's lines are, but for
    a few torn ones, records with an op code, and a repair would set every other line aside and empty the file."""
    records = sum(1 for ln in lines if ln.record is not None and isinstance(ln.op, int))
    if count and records * 2 <= count:
        raise StorageError(
            f"{path} is not an Optuna journal: {records} of its {count} line(s) are journal records; nothing was "
            "changed",
            "give a sweep folder that holds journal.log, or that journal.log",
        )


def _replace(path: Path, result: Plan) -> list[str]:
    shutil.copy2(path, side_file(path, "before-repair"))
    tmp = path.with_name(f".{path.name}.repair")
    tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in result.kept))
    open_trials = _replays(tmp)
    tmp.replace(path)
    return open_trials


def _replays(path: Path) -> list[str]:
    """Optuna replays the journal and lists every study's trials, or the repair is refused; returns the trials it
    holds whose outcome went with the lines set aside (`<study> #<number>`: `_lost`)."""
    import optuna

    storage = optuna.storages.JournalStorage(SafeJournal(str(path)))
    lost = []
    for study in storage.get_all_studies():
        trials = storage.get_all_trials(storage.get_study_id_from_name(study.study_name), deepcopy=False)
        lost += [f"{study.study_name} #{t.number}" for t in trials if _lost(t)]
    return lost


def _lost(trial: Any) -> bool:
    """A trial the sweep will not count as it stood: its state change set aside (it reads as still running), or
    the record of its outcome (`status`, which `studies.records` needs; a withdrawn claim never had one)."""
    import optuna

    if trial.state is optuna.trial.TrialState.RUNNING:
        return True
    return "status" not in trial.user_attrs and "withdrawn" not in trial.user_attrs
