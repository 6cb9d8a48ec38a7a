"""What the configuration offers: the options of each config group under conf/ (cases, profiles, ladders), and the
user's own (a folder given with `--config-dir`/`-cd` or `hydra.searchpath`, holding e.g. `case/<name>.yaml`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # inside the package, so any install ships it
INLINE_CASE = "_command"  # conf/case/_command.yaml: the case of `case=<any name>` with workload.kind=command


def known(group: str, user_dirs: Iterable[str | Path] = ()) -> tuple[str, ...]:
    """The options of a config group, from conf/<group>/*.yaml and <user dir>/<group>/*.yaml ("_" names hidden)."""
    dirs = [CONF_DIR, *(Path(d) for d in user_dirs)]
    return tuple(sorted({p.stem for d in dirs for p in (d / group).glob("*.yaml") if not p.stem.startswith("_")}))
