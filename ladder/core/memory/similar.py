"""A case's memory model borrowed from the case most like it: same robot and engine, then the same method and agent
nets, scaled by the memory per env their configurations say they need. Pure: case facts and models in, a model and
the reason out.

A case with no trials of its own starts a bench from its family's measurements, with the donor's interval refitted
at the scaled rungs. Like any prediction, it only orders launches and never changes a pick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ladder.core.memory.model import Line, Model, Observation, contradicting, fit

FLOAT_MB = 4 / 2**20  # a float32 in MiB
SAME_METHOD, SAME_NETS = 2.0, 1.0  # what a shared method and shared agent nets add to a likeness


@dataclass(frozen=True)
class CaseFacts:
    """What a case's configuration says of its memory: robot, engine, method, agent nets, the floats one env holds
    (simulator state plus one iteration of experience) and those held whatever the envs (a discriminator's replay
    buffer), from `conf/case/*.yaml`."""

    name: str
    robot: str
    engine: str
    method: str
    nets: str  # the agent's net names, joined
    per_env: float
    fixed: float = 0.0  # floats held whatever the knob


@dataclass(frozen=True)
class Borrowed:
    """A model borrowed from `donor`, its knob scaled by `ratio` (the target's floats per env over the donor's)."""

    donor: str
    ratio: float
    model: Model
    why: str


def likeness(target: CaseFacts, other: CaseFacts) -> float | None:
    """How alike two cases' memory is: None across robots or engines (their memory says nothing of each other),
    else more for the same method and nets, less the further their floats per env are apart."""
    if target.name == other.name or (target.robot, target.engine) != (other.robot, other.engine):
        return None
    if target.per_env <= 0 or other.per_env <= 0:
        return None
    apart = max(target.per_env, other.per_env) / min(target.per_env, other.per_env) - 1.0
    return SAME_METHOD * (target.method == other.method) + SAME_NETS * (target.nets == other.nets) - apart


def nearest(target: CaseFacts, measured: Sequence[CaseFacts]) -> CaseFacts | None:
    """The measured case most like `target` (the first by name on a tie), or None: the first of its family."""
    scored = [(s, c) for c in sorted(measured, key=lambda c: c.name) if (s := likeness(target, c)) is not None]
    return max(scored, key=lambda sc: sc[0])[1] if scored else None


def scaled(model: Model, ratio: float, shift_mb: float = 0.0) -> Model:
    """The donor's observations as the target would have made them, refitted: the target's rung k holds what the
    donor's rung k x `ratio` held, plus `shift_mb` (what the target holds whatever the knob, less the donor's). A
    donor's point at rung d stands at d / `ratio`, `shift_mb` higher; a failure there needed more than its cap plus
    `shift_mb`."""
    obs = [
        Observation(
            max(1, round(o.knob / ratio)),
            o.cap_mb + (0.0 if o.fits else shift_mb),
            tuple(p + shift_mb for p in o.peaks_mb),
            o.fits,
            o.label,
        )
        for o in model.observations
    ]
    return fit(obs, model.advice)


def _scaled_to(target: CaseFacts, donor: CaseFacts, model: Model) -> Model:
    return scaled(model, target.per_env / donor.per_env, (target.fixed - donor.fixed) * FLOAT_MB)


def lends(model: Model) -> bool:
    """A case's model can lend its observations: trusted, or short of points only (a walk that stopped at its
    first fit leaves one), not one whose line the points contradict or whose allocator takes the card."""
    return not model.advice and (not model.unreliable or not model.lines)


def borrow(target: CaseFacts, measured: Mapping[str, tuple[CaseFacts, Model]]) -> Borrowed | None:
    """The model of the measured case most like `target`, scaled to it; where that one alone cannot be trusted
    (a walk that stopped at its first fit leaves one point), the observations of every case of the family, each
    scaled to `target`, in one fit; where those cannot make a line either (the family's fits at one rung), a line
    through the largest fit of the nearest case that has one, at the slope `target`'s floats per env give
    (`assumed`). None where no case of its family (robot and engine) has been measured."""
    family = sorted(
        ((s, f.name) for f, m in measured.values() if lends(m) and (s := likeness(target, f)) is not None),
        key=lambda sn: (-sn[0], sn[1]),
    )
    if not family:
        return None
    donor = measured[family[0][1]][0]
    ratio = target.per_env / donor.per_env
    alone = _scaled_to(target, donor, measured[donor.name][1])
    if not alone.unreliable:
        return Borrowed(donor.name, ratio, alone, _why(target, donor, ratio))
    names = [n for _, n in family]
    pooled = fit([o for n in names for o in _scaled_to(target, measured[n][0], measured[n][1]).observations])
    if len(names) > 1 and not pooled.unreliable:
        why = (
            f"from the memory models of {', '.join(names)} (robot {target.robot}), each scaled by its floats per env "
            "and shifted by what it holds whatever the envs"
        )
        return Borrowed(",".join(names), ratio, pooled, why)
    for name in names:  # the nearest case with a fit
        kin = measured[name][0]
        line = assumed(_scaled_to(target, kin, measured[name][1]), target.per_env * FLOAT_MB)
        if line is not None:
            why = f"{_why(target, kin, target.per_env / kin.per_env)}; one fit, at the slope its floats per env give"
            return Borrowed(name, target.per_env / kin.per_env, line, why)
    return Borrowed(donor.name, ratio, alone, _why(target, donor, ratio))


def assumed(model: Model, per_env_mb: float) -> Model | None:
    """A line through the largest fit of `model` on each device at `per_env_mb` MiB per unit of the knob: what one
    point says once the configuration gives the slope (its interval the model's floor). None without a fit."""
    fits = [o for o in model.observations if o.fits and o.peaks_mb]
    if not fits or per_env_mb <= 0:
        return None
    top = max(fits, key=lambda o: o.knob)
    lines = tuple(
        Line(d, p - per_env_mb * top.knob, per_env_mb, 0.0, 2, top.knob, 1.0) for d, p in enumerate(top.peaks_mb)
    )
    return Model(lines, model.observations)


def _why(target: CaseFacts, donor: CaseFacts, ratio: float) -> str:
    same = [w for w, alike in (("method", target.method == donor.method), ("nets", target.nets == donor.nets)) if alike]
    return (
        f"from {donor.name}'s memory model (same robot {target.robot}"
        + (f", same {' and '.join(same)}" if same else "")
        + f"), scaled x{ratio:.2f} by the floats per env ({target.per_env:.0f} against {donor.per_env:.0f})"
        + (
            f", {(target.fixed - donor.fixed) * FLOAT_MB:+.0f} MiB held whatever the envs"
            if target.fixed != donor.fixed
            else ""
        )
    )


def from_sibling(model: Model, siblings: Mapping[str, Model]) -> Model | None:
    """A profile's model of one point from another profile of the same case, cap and machine (`siblings`: profile
    -> its model): the first trusted sibling whose line predicts that point within its interval on every device (the
    profile does not change memory, as `hiutil`'s learning settings need not), its lines with this profile's
    observations. None where the model has lines already, holds no single fit, or no sibling's line agrees: a
    profile that changes memory keeps its own `too few points`."""
    if model.lines or model.advice:
        return None
    fits = [o for o in model.observations if o.fits and o.peaks_mb]
    if len({o.knob for o in fits}) != 1:
        return None
    for name, other in sorted(siblings.items()):
        if other.unreliable or not other.lines or not all(_agrees(other, o) for o in fits):
            continue
        borrowed = Model(
            other.lines, model.observations, borrowed=f"{name}'s line, which its {fits[0].knob} agrees with"
        )
        if contradicting(borrowed) is None:
            return borrowed
    return None


def _agrees(model: Model, obs: Observation) -> bool:
    """Every device's peak at the observation's rung within the model's interval there."""
    by_device = {ln.device: ln for ln in model.lines}
    return all(
        d in by_device and abs(by_device[d].predict(obs.knob) - peak) <= by_device[d].half_width(obs.knob)
        for d, peak in enumerate(obs.peaks_mb)
    )
