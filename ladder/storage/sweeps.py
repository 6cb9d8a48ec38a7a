"""The sweep folders under an output root: which sweep was started or resumed last (`latest_sweep`, the one
`resume=latest` reads), and the other sweeps beside one, whose journals hold trials an earlier sweep ran."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from ladder.core.paths import SweepPaths, latest_file, sweep_of


def note_latest(output_root: Path, sweep: str) -> None:
    """Name `sweep` as the one started or resumed last (temp file, then rename: a reader sees one name or none;
    created with the umask's mode, like every file others read)."""
    output_root.mkdir(parents=True, exist_ok=True)
    target = latest_file(output_root)
    tmp = output_root / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w") as fh:
            fh.write(sweep + "\n")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def latest(output_root: Path) -> str | None:
    """The sweep `note_latest` named last, if its folder is still there."""
    try:
        name = latest_file(output_root).read_text().strip()
    except OSError:
        return None
    return name if name and SweepPaths.of(output_root, name).sweep_dir.is_dir() else None


def names(output_root: Path) -> list[str]:
    """Every sweep under `output_root`, by name."""
    if not output_root.is_dir():
        return []
    return sorted(s for d in output_root.iterdir() if d.is_dir() and (s := sweep_of(d.name)) is not None)


def with_journals(output_root: Path, but: str = "") -> Iterator[SweepPaths]:
    """The sweeps under `output_root` that keep their own journal, less the one named `but`."""
    for name in names(output_root):
        paths = SweepPaths.of(output_root, name)
        if name != but and paths.journal.is_file():
            yield paths
