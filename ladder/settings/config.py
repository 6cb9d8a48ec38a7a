"""The configuration the code reads: `settings_from(cfg)` validates the composed config once into frozen `Settings`.

`Settings` holds the schema's own objects, validated (`ladder.settings.schema`, `ladder.settings.validate`), and
only what is derived from them: the rungs, the profiles in order, the decision table's `Thresholds` and the walk's
`Tuning`. Nothing below this module sees a DictConfig.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ladder.core import pick
from ladder.core.caseclass import Thresholds
from ladder.core.errors import ConfigError
from ladder.core.placement import Mode as PlacementMode
from ladder.core.records import Objective
from ladder.core.walk.tuning import Tuning
from ladder.settings import validate
from ladder.settings.schema import (
    CaseConf,
    Device,
    LadderConf,
    MeasureConf,
    PreflightConf,
    ProxyShape,
    SettingsChange,
    SweepConf,
    WorkloadConf,
    register,
)

__all__ = [
    "GROWS_WITH_ENVS",
    "CaseConf",
    "Device",
    "MeasureConf",
    "PreflightConf",
    "Profile",
    "ProxyShape",
    "Settings",
    "SettingsChange",
    "SweepConf",
    "WorkloadConf",
    "register",
    "settings_from",
    "tuning_of",
]

GROUPS = ("case", "ladder", "profile", "workload", "measure", "preflight", "decide")  # SweepConf's nested fields
SWEEP_KEYS = frozenset(f.name for f in fields(SweepConf))
WALK_KEYS = tuple(f.name for f in fields(Tuning) if f.name in SWEEP_KEYS)  # the config's walk settings
# objectives that do not fall as num_envs grows (util); any other is measured below the largest fit too
GROWS_WITH_ENVS = frozenset({Objective.MIN_AVG_UTIL})


@dataclass(frozen=True)
class Profile:
    """A profile as the walk takes it: its name and the patch it sets on the agent config."""

    name: str
    agent_patch: dict[str, Any]


@dataclass(frozen=True)
class Settings:
    """The validated settings: the root's own keys by their names (no defaults here: they are the schema's), each
    group the schema's object with its choices as enums, and what is derived from them."""

    case: CaseConf
    rungs: tuple[int, ...]  # the ladder's, strictly descending
    ladder_name: str
    knob: str
    profiles: tuple[Profile, ...]
    workload: WorkloadConf
    measure: MeasureConf
    preflight: PreflightConf
    decide: Thresholds  # validated: 0 < low_mem_frac < vram_frac <= 1, 0 <= low_util <= compute_util <= 100
    tuning: Tuning  # the walk's settings (WALK_KEYS) and what the objective implies, built once
    dry_run: bool
    confirm_s: float
    objective: Objective
    reuse: bool
    noise_carry_h: float | None
    placement: PlacementMode  # when the placement phase runs (`ladder.core.placement`)
    history: bool  # a sweep on another card starts from the memory model's prediction (`ladder.sweep.prior`)
    cards: list[float]  # GB: the cards cards.tsv answers for (`ladder.sweep.cards`)
    device: Device
    sweep: str | None
    output_root: str
    storage: str | None
    storage_wait_s: float
    resume: str | None
    heartbeat_s: float
    stale_after_s: float
    nccl_env: dict[str, str]
    settings_change: SettingsChange
    given: tuple[str, ...] | None = None  # the keys set on the command line; None = unknown (all count as given)


# the root's own keys Settings holds as they are (the walk's go into its Tuning)
ROOT_KEYS = tuple(f.name for f in fields(Settings) if f.name in SWEEP_KEYS and f.name not in GROUPS)


def settings_from(cfg: DictConfig, known_cases: tuple[str, ...] = (), given: tuple[str, ...] | None = None) -> Settings:
    """Validate the composed config and freeze it; `given`: the keys the command line set (see `Settings.given`).
    Every default is SweepConf's (and its groups'): a key the config lacks takes the schema's value."""
    raw = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    assert isinstance(raw, dict)
    root: SweepConf = validate.typed(SweepConf, {str(k): v for k, v in raw.items() if k not in GROUPS})
    workload = validate.workload(raw.get("workload") or {})
    ladder: LadderConf = validate.typed(LadderConf, raw.get("ladder") or {})
    case = validate.case(raw.get("case"), known_cases, workload.kind)
    rungs = validate.rungs(ladder.rungs, str(ladder.name))
    profiles = _profiles(raw.get("profile") or {})
    measure = validate.measure(raw.get("measure") or {})
    preflight = validate.preflight(raw.get("preflight") or {})
    decide = validate.decide(raw.get("decide") or {})
    root = validate.top(root)
    return Settings(
        case=case,
        rungs=rungs,
        ladder_name=str(ladder.name),
        knob=str(ladder.knob),
        profiles=profiles,
        workload=workload,
        measure=measure,
        preflight=preflight,
        decide=decide,
        tuning=tuning_of(root.objective, {k: getattr(root, k) for k in WALK_KEYS}),
        given=given,
        **{k: getattr(root, k) for k in ROOT_KEYS},
    )


def tuning_of(objective: Objective, walk: Mapping[str, Any]) -> Tuning:
    """The walk's `Tuning`: its settings (`walk`, by the config's names) and what `objective` implies."""
    return Tuning(
        **walk,
        descend=objective not in GROWS_WITH_ENVS,
        throughput=objective is Objective.SAMPLES_PER_S,
        noise=pick.noise_of(objective),
    )


def _profiles(raw: dict[str, Any]) -> tuple[Profile, ...]:
    if not raw:
        raise ConfigError("no profile selected", "add profile=[default,hiutil] (or one of them)")
    return tuple(
        Profile(name=str(p.get("name", key)), agent_patch=dict(p.get("agent") or {})) for key, p in raw.items()
    )
