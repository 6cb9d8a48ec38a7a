"""The command line before Hydra sees it: overrides Hydra cannot parse and unknown group options, each with the
form that works; `case=<any name>` for one's own trainer; `workload.env.NAME=...` as a new key; a storage URL's
password moved off the command line; an `output_root` that cannot be written. Each check returns the problems as
lines (empty: none), so `ladder.search` can print them all and exit before anything is written."""

from __future__ import annotations

import dataclasses
import difflib
import errno
import functools
import os
import re
import shlex
import tempfile
import types
import typing
from collections.abc import Iterable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType
from hydra.errors import HydraException
from omegaconf.errors import InterpolationKeyError

from ladder.core.errors import ConfigError
from ladder.settings.catalog import INLINE_CASE, known
from ladder.settings.config import SweepConf
from ladder.settings.credentials import PASSWORD_VAR, without_password


def known_cases(user: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The built-in cases and those of the user's config folders (`--config-dir`, `hydra.searchpath`)."""
    return known("case", user)


def check_choices(overrides: list[str], user: tuple[str, ...] = ()) -> list[str]:
    """Unknown group options on the command line, each with the known ones (Hydra's own message lists none
    for a list like profile=[a,b]). Sweeps (`case=a,b`) are checked option by option; globs are Hydra's."""
    problems = []
    try:
        parsed = OverridesParser.create().parse_overrides(_overrides_only(overrides))
    except HydraException:
        return []  # a syntax error: quoting_problems says where
    for override in parsed:
        group = override.key_or_group
        if group not in ("case", "profile", "ladder", "measure") or override.value_type is None:
            continue
        for choice in _choices(override):
            if choice not in known(group, user) and (group, choice) != ("case", INLINE_CASE):
                near = difflib.get_close_matches(str(choice), known(group, user), n=2, cutoff=0.6)
                problems.append(
                    f"unknown {group} '{choice}'"
                    + (f" (did you mean {' or '.join(near)}?)" if near else "")
                    + f"; known: {', '.join(known(group, user))}"
                )
                if group == "case" and any(o.lstrip("+~").startswith(("sweep=", "resume=")) for o in overrides):
                    problems[-1] += (
                        "\n  a sweep of your own trainer resumes with workload.kind=command, and with --config-dir "
                        "where its case file is, as the command printed when it stopped gives them"
                    )
    return problems


# Hydra's own flags that take the next argument as their value (`--cfg job`, `--config-dir X`, ...)
HYDRA_FLAGS_WITH_VALUE = (
    "--config-dir",
    "-cd",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--experimental-rerun",
    "--shell-completion",
    "-sc",
)
HYDRA_INFO_TOPICS = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def quoting_problems(argv: list[str]) -> list[str]:
    """Overrides Hydra cannot parse, each with Hydra's reason and the quoted form that parses (a list element or a
    value holding `=`, `{`, a space, ... must be double-quoted, the whole override single-quoted for the shell)."""
    problems = []
    for arg in _overrides_only(argv):
        try:
            OverridesParser.create().parse_overrides([arg])
        except HydraException as exc:
            reason = str(exc).splitlines()[0]
            problems.append(f"cannot read {arg!r}: {reason}\n  write it as: {_quoted(arg)}")
    return problems


def _quoted(arg: str) -> str:
    key, _, value = arg.partition("=")
    if value.startswith("[") and value.endswith("]"):
        items = [v.strip().strip('"') for v in value[1:-1].split(",")]
        plain = [v if v.replace("_", "").replace(".", "").replace("-", "").isalnum() else f'"{v}"' for v in items]
        return f"'{key}=[{','.join(plain)}]'" + (
            f"  (or '{key[:-7]}cmd=\"{' '.join(items)}\"')" if key.endswith(".command") else ""
        )
    return f"'{key}=\"{value.strip(chr(34))}\"'"


def interpolation_problem(exc: InterpolationKeyError, argv: list[str]) -> ConfigError:
    """A `${x}` meant for a child Hydra app (the trainer) that ladder's own Hydra tried to resolve: the override as
    it must be written (`\\${{x}}`: the backslash keeps ladder's Hydra off it, the doubled braces keep ladder's own
    placeholders off it; the trainer gets `${x}`)."""
    fixed = [_escaped(a) for a in _overrides_only(argv) if _UNESCAPED.search(a)]
    shown = "  ".join(shlex.quote(a) for a in fixed) or "write each ${x} as \\${{x}}"
    return ConfigError(
        f"{exc}: ladder's own config resolves every ${{...}} in an override, and has no such key",
        f"for an interpolation your trainer resolves, escape it: {shown}",
    )


_UNESCAPED = re.compile(r"(?<!\\)\$\{([^{}]*)\}")


def _escaped(arg: str) -> str:
    return _UNESCAPED.sub(lambda m: "\\${{" + m.group(1) + "}}", arg)


def overrides_of(argv: Sequence[str]) -> list[str]:
    """The overrides of a command line, less Hydra's own flags (`ladder.sweep.bench` reads `case=all` there)."""
    return _overrides_only(list(argv))


def _overrides_only(argv: list[str]) -> list[str]:
    """The overrides of a command line, less Hydra's own flags (`-m`, `--config-dir X`, `-cd X`, `--help`...)."""
    out, before = [], ""
    for arg in argv:
        flag_value = before in HYDRA_FLAGS_WITH_VALUE or (before in ("--info", "-i") and arg in HYDRA_INFO_TOPICS)
        if not flag_value and not arg.startswith("-"):
            out.append(arg)
        before = "" if flag_value else arg
    return out


def _choices(override: Override) -> list[str]:
    if override.value_type is ValueType.GLOB_CHOICE_SWEEP:
        return []
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    return [str(c) for v in values for c in (v if isinstance(v, list) else [v])]


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
            found += [
                e.strip().strip("'\"").removeprefix("file://")
                for e in entries
                if "://" not in e or e.strip().strip("'\"").startswith("file://")
            ]
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


def keep_text(argv: Sequence[str]) -> list[str]:
    """A value Hydra would read as a number or a boolean, given to a setting that holds text, quoted so that it
    arrives as written: `sweep=20261201_025549` (the name of a sweep ladder made) is the integer 20261201025549 to
    Hydra, `sweep=true` the boolean; either would name another sweep than the user's."""
    overrides = _overrides_only(list(argv))
    return [_as_text(a) if a in overrides else a for a in argv]


def _as_text(arg: str) -> str:
    key, eq, raw = arg.partition("=")
    if not eq or not raw or not _holds_text(key.lstrip("+~")):
        return arg
    try:
        (override,) = OverridesParser.create().parse_overrides([arg])
    except HydraException:
        return arg  # quoting_problems says why
    if override.is_sweep_override() or not isinstance(override.value(), (bool, int, float)):
        return arg  # a string, a list, null: as Hydra reads it
    return f"{key}='{raw}'"


def unknown_keys(argv: Sequence[str]) -> list[str]:
    """Settings the schema has no key for, each with the nearest it has (`measure.windw_s` -> `measure.window_s`);
    Hydra's own message for them offers to add the typo (`+measure.windw_s=...`). Keys under a mapping
    (`case.agent.*`, `workload.env.*`, `nccl_env.*`), `hydra.*` and deletions (`~`) are Hydra's to judge; a key
    added with `+` is checked as any other (Hydra named the schema's class for it, `MeasureConf`, and no fix)."""
    problems = []
    for arg in _overrides_only(list(argv)):
        given, eq, _ = arg.partition("=")
        key = given.lstrip("+")  # an added key must still be one the schema has (`+measure.windw_s` too)
        hydras = key.split(".")[0].split("/")[0] == "hydra" or "/" in key  # Hydra's own, or a config group's path
        if eq and key[:1] != "~" and not hydras and not _known_key(key):
            near = _nearest(key)
            problems.append(
                f"unknown setting '{key}'"
                + (f"; did you mean {' or '.join(near)}?" if near else "")
                + " (python -m ladder.search --help lists them)"
            )
    return problems


def _known_key(key: str) -> bool:
    return _kind_of(key) is not None


def _kind_of(key: str) -> Any:
    """The schema's type at the dotted `key`: SweepConf's fields, its groups', a mapping's values (`profile.<name>`
    is a ProfileConf, `workload.env.<NAME>` a str); `Any` below a leaf or inside a mapping of any values
    (`case.agent.model.x`: Hydra's to judge); None where the schema has no such key."""
    schema: Any = SweepConf
    parts = key.split(".")
    i = 0
    while True:
        hints = _hints(schema)
        if parts[i] not in hints:
            return None
        kind, i = hints[parts[i]], i + 1
        if typing.get_origin(kind) is dict and i < len(parts):  # the mapping's key is any name: its value's type
            kind, i = typing.get_args(kind)[-1], i + 1
        if i >= len(parts):
            return kind
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            return Any
        schema = kind


def _nearest(key: str) -> list[str]:
    """The schema's keys nearest `key`: by the whole key, else by its last part."""
    leaves = _leaf_keys(SweepConf)
    whole = difflib.get_close_matches(key, leaves, n=2, cutoff=0.8)
    last = key.rsplit(".", 1)[-1]
    return whole or [k for k in leaves if difflib.get_close_matches(last, [k.rsplit(".", 1)[-1]], cutoff=0.8)][:3]


@functools.cache
def _leaf_keys(schema: type, prefix: str = "") -> list[str]:
    out = []
    for name, kind in _hints(schema).items():
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            out += _leaf_keys(kind, f"{prefix}{name}.")
        else:
            out.append(f"{prefix}{name}")
    return out


def _holds_text(key: str) -> bool:
    """The setting `key` (dotted, from SweepConf) holds text: a `str` field, or a value of a `dict[str, str]`."""
    kind = _kind_of(key)
    return kind is str or (
        typing.get_origin(kind) in (typing.Union, types.UnionType)
        and [a for a in typing.get_args(kind) if a is not type(None)] == [str]
    )


@functools.cache
def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def env_overrides(argv: Sequence[str]) -> list[str]:
    """`workload.env.NAME=value` as Hydra takes a new key of a dict (`++workload.env.NAME=value`: add or set)."""
    return [f"++{a}" if a.startswith("workload.env.") else a for a in argv]


def hide_password(argv: list[str], environ: MutableMapping[str, str]) -> list[str]:
    """`storage=<url with a password>` on the command line becomes the URL without it, the password going to
    `$LADDER_STORAGE_PASSWORD` (`credentials.PASSWORD_VAR`), so Hydra never holds it: `--cfg job`, `--info` and its
    error messages print the URL as `user@host`."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("+~") == "storage" and "://" in value:
            value, password = without_password(value)
            if password is not None:
                environ[PASSWORD_VAR] = password
            arg = f"{key}={value}"
        out.append(arg)
    return out


def unwritable_root(overrides: list[str]) -> str:
    """A one-line problem with where the run would write (`output_root`, under which Hydra makes its run folder),
    found before Hydra touches it; "" when it can be written. The check makes a folder of its own in the nearest
    folder that exists on the way to `output_root` and removes it: it never makes or removes a folder another sweep
    starting at the same moment may be making and using."""
    roots = [v for k, _, v in (a.partition("=") for a in overrides) if k.lstrip("+~") == "output_root"]
    root = roots[-1] if roots else str(_default_root())
    if "${" in root or not root:
        return ""  # an interpolation: Hydra resolves it, and says so if it cannot
    nearest = next(p for p in (Path(root), *Path(root).parents) if p.exists() or p == p.parent)
    try:
        if not nearest.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(nearest))
        os.rmdir(tempfile.mkdtemp(prefix=".ladder-check-", dir=nearest))
    except OSError as exc:
        return (
            f"cannot write under output_root={root} ({exc.strerror or exc}); "
            "fix: set output_root=<a folder you can write>, e.g. output_root=$HOME/ladder-output"
        )
    return ""


def _default_root() -> str:
    return SweepConf.output_root
