"""Readers of a trainer's progress: iterations, samples and step times as the trainer reports them.

`JsonlProgress` follows a JSON-lines file as it grows (the proxy's, or any trainer writing `iter`/`samples`),
keeping a partial last line for the next read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Point:
    t: float  # unix time the trainer wrote it
    iter: int
    samples: float  # cumulative env steps, all ranks
    step_time_s: float | None = None
    peak_mem_mb: tuple[float, ...] = ()  # per rank, where the trainer reports it


class JsonlProgress:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[Point]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return [p for p in (parse_line(line) for line in lines) if p is not None]


def parse_line(line: bytes | str) -> Point | None:
    """One progress record, or None for anything else (start events, blank or broken lines)."""
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or "iter" not in rec or "t" not in rec:
        return None
    step = rec.get("step_time_s", rec.get("iter_time"))
    return Point(
        t=float(rec["t"]),
        iter=int(rec["iter"]),
        samples=float(rec.get("samples", 0)),
        step_time_s=None if step is None else float(step),
        peak_mem_mb=tuple(float(m) for m in rec.get("peak_mem_mb", ()) or ()),
    )
