"""Per-case util and memory from an nvidia-smi CSV monitor log (the manual routine's "Fast Command B").

The log is what a monitor loop appends: `nvidia-smi --query-gpu=index,utilization.gpu,memory.used,...
--format=csv[,noheader][,nounits]` rows (`0, 45, 23110, 24564`, units such as `45 %` allowed, a header line
naming the columns optional) and a `current_case <name>` line per tick. As in that routine's one-liner, a marker line
counts the latest row of every GPU for its case (readings first, then the marker); with `--marker-first` the rows
after a marker belong to it. Figures come from `ladder.core.measure`, with one tick per "second": `active_s`/`idle_s`
count ticks. (That one-liner, run from a quoted heredoc, matched `\\s` literally and printed nothing.)

    python scripts/nvsmi_aggregate.py /tmp/mk_ultralong_monitor_20260217_134108.log
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from ladder.core.measure.usage import figures
from ladder.core.records import Sample

DEFAULT_COLUMNS = ("index", "utilization.gpu", "memory.used")
NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
MARKER = "current_case "


def _number(text: str | None) -> float | None:
    m = NUMBER.match(text or "")
    return float(m.group(1)) if m else None


class Aggregator:
    """Reads the log line by line; `samples[case]` holds each tick's reading of every GPU as `Sample`s."""

    def __init__(self, marker_first: bool = False) -> None:
        self.samples: dict[str, list[Sample]] = defaultdict(list)
        self._columns: tuple[str, ...] = DEFAULT_COLUMNS
        self._marker_first = marker_first
        self._latest: dict[int, tuple[float, float]] = {}  # GPU -> (util, memory) of its newest row
        self._case = ""
        self._tick = 0

    def feed(self, lines: Iterable[str]) -> Aggregator:
        for line in lines:
            self._line(line.strip())
        return self

    def _line(self, line: str) -> None:
        if line.startswith(MARKER):
            self._marker(line[len(MARKER) :].split()[0] if line[len(MARKER) :].strip() else "")
        elif "utilization.gpu" in line:
            self._columns = tuple(c.split(" [")[0].strip() for c in line.split(","))
        else:
            self._row([f.strip() for f in line.split(",")])

    def _marker(self, case: str) -> None:
        if self._marker_first:
            self._case = case
            return
        if case and self._latest:
            self.samples[case] += [Sample(float(self._tick), i, u, m) for i, (u, m) in sorted(self._latest.items())]
            self._tick += 1

    def _row(self, fields: list[str]) -> None:
        row = dict(zip(self._columns, fields, strict=False))
        index, util = _number(row.get("index")), _number(row.get("utilization.gpu"))
        if index is None or util is None or len(fields) < 2 or not fields[0].isdigit():
            return
        if self._marker_first and int(index) in self._latest:
            self._tick += 1  # a GPU seen again: the next tick has begun
            self._latest.clear()
        self._latest[int(index)] = (util, _number(row.get("memory.used")) or 0.0)
        if self._marker_first and self._case:
            self.samples[self._case].append(Sample(float(self._tick), int(index), util, self._latest[int(index)][1]))

    def table(self) -> list[dict[str, float | str]]:
        """One row per case, in order of first appearance: n ticks, then the window figures."""
        return [
            {"case": case, "n": float(len({s.t for s in ss})), **figures(ss, [], None, 0.0)}
            for case, ss in self.samples.items()
        ]


def to_tsv(rows: list[dict[str, float | str]]) -> str:
    cols: list[str] = []
    for row in rows:
        cols += [k for k in row if k not in cols and k != "n_samples"]
    lines = ["\t".join(cols)]
    for row in rows:
        lines.append("\t".join(_cell(row.get(c, "")) for c in cols))
    return "\n".join(lines) + "\n"


def _cell(value: float | str) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log", type=Path, help="the monitor log (nvidia-smi CSV rows and current_case lines)")
    p.add_argument("--marker-first", action="store_true", help="rows after a marker belong to it")
    args = p.parse_args(argv)
    try:
        text = args.log.read_text(errors="ignore")
    except OSError as exc:
        print(f"nvsmi_aggregate: cannot read {args.log}: {exc}", file=sys.stderr)
        return 2
    rows = Aggregator(args.marker_first).feed(text.splitlines()).table()
    if not rows:
        print(f"nvsmi_aggregate: no GPU rows under a current_case marker in {args.log}", file=sys.stderr)
        return 1
    sys.stdout.write(to_tsv(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
