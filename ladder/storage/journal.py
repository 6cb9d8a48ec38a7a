"""The sweep's journal file: Optuna's JSON-lines op log, made safe against torn and garbled lines.

Optuna's `JournalFileBackend` reads past a torn last line (a write cut short: no newline at the end) but appends
right after it, gluing the next record onto the fragment; that line, and every read after it, then fails. Here,
before each append (under the journal's own lock), an unreadable tail (a torn last line, or a last line that is
not JSON) is moved aside into `journal.log.torn-<stamp>` next to the journal, with one warning line; the records
before it are untouched (a last record that is whole but for its newline gets the newline back instead). An
unreadable line with readable records after it is not guessed at: reading stops with a
`JournalCorrupt` naming the file, the line and the fix (`python -m ladder.repair <sweep folder>`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Generator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock
from optuna.storages.journal import BaseJournalBackend

from ladder.core.errors import StorageError
from ladder.storage import fault

log = logging.getLogger(__name__)

TAIL_CHUNK = 1 << 16  # how far back from the end a tail check reads at first


class JournalCorrupt(StorageError):
    """A journal line that cannot be read has readable records after it."""

    def __init__(self, path: Path, line: int, text: bytes) -> None:
        self.path, self.line = path, line
        super().__init__(
            f"{path}: line {line} cannot be read ({_excerpt(text)}); the sweep's records after it are "
            "intact but Optuna cannot replay past it",
            f"python -m ladder.repair {path.parent} (keeps every readable record, sets the rest aside "
            "in a side file, and checks that the journal replays)",
        )


class SafeJournal(BaseJournalBackend):
    """Optuna's two-method journal backend over a file: it never appends after an unreadable tail, and it names the
    line it cannot read. Writers hold an OS file lock on the hidden `.journal.log.lock` (`lock`): the kernel releases
    it when its holder dies, so a writer killed mid-append never stalls the next one."""

    def __init__(self, file_path: str) -> None:
        self.path = Path(file_path)
        self.lock = FileLock(str(self.path.with_name(f".{self.path.name}.lock")))
        with open(self.path, "ab"):  # the journal exists from here on, empty where it is new
            pass
        self._offsets: dict[int, int] = {0: 0}  # log number -> where its line starts (the lines read so far)

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        """The records from number `log_number_from` on, up to the file's size when the read began (a line being
        appended meanwhile is read next time). An unreadable last line is left unread (a write cut short: the next
        append sets it aside); an unreadable line with lines after it is a `JournalCorrupt`."""
        number = max(n for n in self._offsets if n <= log_number_from)
        with open(self.path, "rb") as fh:
            size, offset = os.fstat(fh.fileno()).st_size, self._offsets[number]
            fh.seek(offset)
            bad = False
            for line in fh:
                if offset + len(line) > size:
                    break
                if bad:
                    raise first_bad_line(self.path)
                if not readable(line):
                    bad = True
                    continue
                offset, number = offset + len(line), number + 1
                self._offsets[number] = offset
                if number > log_number_from:
                    yield json.loads(line)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        with self.lock:
            set_tail_aside(self.path)
            fault.point("journal.before_append")
            text = "\n".join(json.dumps(entry, separators=(",", ":")) for entry in logs) + "\n"
            with open(self.path, "ab") as fh:
                fh.write(text.encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
            fault.point("journal.after_append")


def readable(line: bytes) -> bool:
    """A complete journal line holding one JSON object."""
    if not line.endswith(b"\n"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def first_bad_line(path: Path) -> JournalCorrupt:
    """The error for the first unreadable line of `path` that has a line after it (1-based)."""
    with open(path, "rb") as fh:
        lines = fh.readlines()
    for number, line in enumerate(lines[:-1], start=1):
        if not readable(line):
            return JournalCorrupt(path, number, line)
    return JournalCorrupt(path, len(lines), lines[-1] if lines else b"")


def set_tail_aside(path: Path) -> Path | None:
    """Move an unreadable last line (torn, or not JSON) into a side file and cut it off the journal; returns the
    side file, or None when the journal ends in a readable line. Call it holding the journal's lock."""
    size = path.stat().st_size if path.exists() else 0
    if not size:
        return None
    start = _last_line_start(path, size)
    with open(path, "rb") as fh:
        fh.seek(start)
        tail = fh.read()
    if readable(tail):
        return None
    if readable(tail + b"\n"):  # the record is whole, only its newline was cut off: keep it
        with open(path, "ab") as fh:
            fh.write(b"\n")
        log.warning("%s: its last record had lost its newline; the newline is restored", path)
        return None
    side = side_file(path, "torn")
    side.write_bytes(tail)
    os.truncate(path, start)
    log.warning(
        "%s ended in an unreadable line (%d bytes, a write cut short); it is set aside in %s and the journal "
        "goes on from the record before it",
        path,
        len(tail),
        side.name,
    )
    return side


def side_file(path: Path, what: str) -> Path:
    """`<journal>.<what>-<UTC stamp>` next to it, never an existing file."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return path.with_name(f"{path.name}.{what}-{stamp}")


def _last_line_start(path: Path, size: int) -> int:
    """The offset where the file's last line begins (after the newline before it; the last newline itself, if
    the file ends in one, belongs to the last line)."""
    with open(path, "rb") as fh:
        back = TAIL_CHUNK
        while True:
            begin = max(0, size - back)
            fh.seek(begin)
            chunk = fh.read(size - begin)
            cut = chunk.rfind(b"\n", 0, len(chunk) - 1)
            if cut >= 0:
                return begin + cut + 1
            if begin == 0:
                return 0
            back *= 4


def _excerpt(text: bytes, limit: int = 60) -> str:
    shown = text.rstrip(b"\n")
    said = shown[:limit].decode("utf-8", "backslashreplace")
    return f"{said!r}" + (f" ... {len(shown)} bytes" if len(shown) > limit else "")
