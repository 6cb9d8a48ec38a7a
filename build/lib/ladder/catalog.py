"""What the configuration offers: the options of each config group under conf/ (cases, profiles, ladders)."""

from __future__ import annotations

from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent / "conf"  # inside the package, so any install ships it


def known(group: str) -> tuple[str, ...]:
    """The options of a config group, from conf/<group>/*.yaml."""
    return tuple(sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")))
