"""What the configuration offers: the options of each config group under conf/ (cases, profiles, ladders), and the
user's own (a folder given with `--config-dir`/`-cd` or `hydra.searchpath`, holding e.g. `case/<name>.yaml`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent / "conf"  # inside the package, so any install ships it
INLINE_CASE = "_command"  # conf/case/_command.yaml: the case of `case=<any name>` with workload.kind=command


def known(group: str, user_dirs: Iterable[str | Path] = ()) -> tuple[str, ...]:
    """The options of a config group, from conf/<group>/*.yaml and <user dir>/<group>/*.yaml ("_" names hidden)."""
    dirs = [CONF_DIR, *(Path(d) for d in user_dirs)]
    return tuple(sorted({p.stem for d in dirs for p in (d / group).glob("*.yaml") if not p.stem.startswith("_")}))


def user_dirs(argv: Sequence[str]) -> tuple[str, ...]:
    """The user's config folders named on a command line: `--config-dir X`, `--config-dir=X`, `-cd X`, and the
    `file://` entries of `hydra.searchpath=[...]` (the `pkg://` ones are packages, not folders)."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith("--config-dir="):
            found.append(arg.partition("=")[2])
        elif arg.lstrip("+").startswith("hydra.searchpath="):
            entries = arg.partition("=")[2].strip("[]").split(",")
            found += [e.strip().strip("'\"").removeprefix("file://") for e in entries if "://" not in e or
                      e.strip().strip("'\"").startswith("file://")]  # fmt: skip
    return tuple(found)


def inline_case(argv: Sequence[str], user: Iterable[str | Path] = ()) -> list[str]:
    """`case=<any name>` with `workload.kind=command` on the command line: a case of that name with no MimicKit
    fields (`case=_command case.name=<name>`), unless a case of that name exists."""
    out = list(argv)
    if "workload.kind=command" not in out:
        return out
    for i, arg in enumerate(out):
        key, sep, name = arg.partition("=")
        if key == "case" and sep and name and not any(c in name for c in ",[]*()") and name not in known("case", user):
            return [*out[:i], f"case={INLINE_CASE}", f"case.name={name}", *out[i + 1 :]]
    return out


def env_overrides(argv: Sequence[str]) -> list[str]:
    """`workload.env.NAME=value` as Hydra takes a new key of a dict (`++workload.env.NAME=value`: add or set)."""
    return [f"++{a}" if a.startswith("workload.env.") else a for a in argv]
