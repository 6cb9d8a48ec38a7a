"""A sweep's settings record: one sweep, one set of settings.

When a sweep starts, its outcome settings (`OUTCOME_SETTINGS`) and walk settings (`CARRIED_SETTINGS`) are recorded
with each case's study. A resume takes them back for every key its command line does not set (`adopt`); an outcome
key set to another value is a difference (`differences`), refused unless settings_change=accept. No password is ever
recorded. Pure: reading the record from a storage is `ladder.sweep.resume`'s.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ladder.core.errors import ConfigError
from ladder.core.placement import Mode as PlacementMode
from ladder.core.records import Objective
from ladder.core.walk.tuning import Strategy
from ladder.settings import validate
from ladder.settings.config import WALK_KEYS, CaseConf, Device, MeasureConf, Profile, ProxyShape, Settings, tuning_of

# Each entry names a setting by its command-line key (a group covers its leaves: `workload` is every workload.* key).
# Outcome: changes what a trial means; a resume that gives another value is refused (or, with
# settings_change=accept, the change is recorded and the rungs it affects start afresh).
OUTCOME_SETTINGS = ("case", "ladder", "profile", "workload", "measure", "device", "objective", "confirm_s", "nccl_env")
NOT_OUTCOME = ("workload.lease_dir", "workload.lease_timeout_s", "measure.kill_grace_s")  # where and how long to wait
# Carried: how the sweep walks; a resume that does not give it takes the recorded value, one that does wins
CARRIED_SETTINGS = ("reuse", *WALK_KEYS, "noise_carry_h", "history", "cards", "placement")

Record = dict[str, Any]  # command-line key (dotted) -> its value, as JSON has it


class SettingsChanged(ConfigError):
    """A resume set outcome settings other than those its sweep recorded."""


def record(s: Settings) -> Record:
    """The sweep's settings as recorded: every outcome and carried setting, by command-line key."""
    flat: dict[str, Any] = {
        "case.name": s.case.name,
        "case.method": s.case.method,
        "case.robot": s.case.robot,
        "case.args_file": s.case.args_file,
        "case.agent": s.case.agent,
        "case.proxy": dataclasses.asdict(s.case.proxy),
        "ladder.name": s.ladder_name,
        "ladder.rungs": list(s.rungs),
        "ladder.knob": s.knob,
        "profile": [p.name for p in s.profiles],
        **{f"profile.{p.name}": p.agent_patch for p in s.profiles},
        **{f"workload.{k}": v for k, v in dataclasses.asdict(s.workload).items()},
        **{f"measure.{k}": v for k, v in dataclasses.asdict(s.measure).items()},
        "device": s.device.value,
        "objective": s.objective,
        "confirm_s": s.confirm_s,
        "nccl_env": dict(s.nccl_env),
        **{k: getattr(s.tuning if k in WALK_KEYS else s, k) for k in CARRIED_SETTINGS},
    }
    roots = OUTCOME_SETTINGS + CARRIED_SETTINGS
    kept = {k: v for k, v in flat.items() if _under(k, roots) and not _under(k, NOT_OUTCOME)}
    copied: dict[str, Any] = json.loads(json.dumps(kept, default=str))
    return copied


Diff = tuple[str, Any, Any]  # (key, recorded, now)


def differences(recorded: Mapping[str, Any], now: Mapping[str, Any], given: Sequence[str] | None) -> list[Diff]:
    """(key, recorded, now) for each outcome setting the command line sets to another value than recorded. A key
    one side lacks (a setting newer than the record, or gone since) is no difference."""
    return [
        (k, recorded[k], v)
        for k, v in now.items()
        if k in recorded and _under(k, OUTCOME_SETTINGS) and is_given(k, given) and recorded[k] != v
    ]


def adopt(s: Settings, recorded: Mapping[str, Any], given: Sequence[str] | None) -> Settings:
    """The settings with every recorded value the command line does not set taken back."""
    now = record(s)
    merged = {k: (recorded[k] if k in recorded and not is_given(k, given) else v) for k, v in now.items()}
    if not is_given("profile", given):
        merged.update({k: v for k, v in recorded.items() if k.startswith("profile.")})
    return _settings(s, merged)


def format_differences(sweep: str, case: str, diffs: Sequence[Diff]) -> str:
    """The differences side by side, a setting that holds a mapping (`case.agent`, a profile's patch) shown by the
    leaves that differ (`case.agent.steps_per_iter`), not as two whole mappings."""
    leaves = [leaf for k, a, b in diffs for leaf in _leaves(k, a, b)]
    rows = [("setting", "recorded", "now"), *((k, _show(a), _show(b)) for k, a, b in leaves)]
    widths = [max(len(r[i]) for r in rows) for i in (0, 1)]
    table = "\n".join(f"  {k:<{widths[0]}}  {a:<{widths[1]}}  {b}" for k, a, b in rows)
    return f"sweep {sweep} (case {case}) was started with other settings than these:\n{table}"


def changed(sweep: str, case: str, diffs: Sequence[Diff], given: Sequence[str] | None = None) -> SettingsChanged:
    """The refusal, with its fix. A difference the command line makes only through a group it gives whole (`case=`
    sets every key of the case, an agent leaf given at the start among them) is named with its recorded value, to
    give again: leaving the leaf off is not enough while its group is given."""
    again = [
        f"{k}={_show(a)}"
        for key, recorded_value, now in diffs
        for k, a, _ in _leaves(key, recorded_value, now)
        if a != ABSENT and given is not None and not _named(k, given)
    ]
    fix = (
        f"run these settings as a new sweep (sweep=<another name>), or record the change in sweep "
        f"{sweep} with settings_change=accept: the rungs it changes start afresh (their earlier "
        "trials no longer count); leave them off the command line to resume as it was"
    )
    if again:
        fix += f" (a group given whole sets every key under it: give {' '.join(again)} again)"
    return SettingsChanged(format_differences(sweep, case, diffs), fix)


def _named(key: str, given: Sequence[str]) -> bool:
    """The command line names `key` itself, or a leaf inside it; not merely a group above it."""
    return any(g == key or g.startswith(key + ".") for g in given)


ABSENT = "(not set)"  # a leaf one side of a difference lacks


def _leaves(key: str, recorded: Any, now: Any) -> list[Diff]:
    """(dotted key, recorded, now) for each leaf that differs, where both sides are mappings; else the pair itself."""
    if not (isinstance(recorded, Mapping) and isinstance(now, Mapping)):
        return [(key, recorded, now)]
    return [
        leaf
        for k in dict.fromkeys([*recorded, *now])
        if recorded.get(k, ABSENT) != now.get(k, ABSENT)
        for leaf in _leaves(f"{key}.{k}", recorded.get(k, ABSENT), now.get(k, ABSENT))
    ]


def _under(key: str, roots: Sequence[str]) -> bool:
    return any(key == r or key.startswith(r + ".") for r in roots)


def is_given(key: str, given: Sequence[str] | None) -> bool:
    """The command line sets `key`: itself, a group above it (`workload`), or a leaf inside it (`case.agent.x`)."""
    return given is None or any(key == g or key.startswith(g + ".") or g.startswith(key + ".") for g in given)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _settings(s: Settings, m: Mapping[str, Any]) -> Settings:
    case = CaseConf(
        m["case.name"],
        m["case.method"],
        m["case.robot"],
        m["case.args_file"],
        dict(m["case.agent"]),
        ProxyShape(**m["case.proxy"]),
    )
    profiles = tuple(Profile(n, dict(m.get(f"profile.{n}") or {})) for n in m["profile"])
    objective = Objective(m["objective"])
    workload = {
        f.name: m.get(f"workload.{f.name}", getattr(s.workload, f.name)) for f in dataclasses.fields(s.workload)
    }
    return dataclasses.replace(
        s,
        case=case,
        ladder_name=m["ladder.name"],
        rungs=tuple(m["ladder.rungs"]),
        knob=m["ladder.knob"],
        profiles=profiles,
        workload=validate.workload(workload),  # its choices back to enums
        measure=_conf(MeasureConf, s.measure, m, "measure"),
        device=Device(m["device"]),
        objective=objective,
        confirm_s=float(m["confirm_s"]),
        nccl_env=dict(m["nccl_env"]),
        tuning=tuning_of(objective, {k: m[k] for k in WALK_KEYS} | {"strategy": Strategy(m["strategy"])}),
        **{k: m[k] for k in CARRIED_SETTINGS if k not in (*WALK_KEYS, "placement")},
        placement=PlacementMode(m["placement"]),
    )


def _conf(kind: Any, current: Any, m: Mapping[str, Any], group: str) -> Any:
    return kind(**{f.name: m.get(f"{group}.{f.name}", getattr(current, f.name)) for f in dataclasses.fields(kind)})
