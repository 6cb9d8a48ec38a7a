"""A case's first launches from the cases most like it, where its own history holds no model: the memory model of
a measured case of the same robot and engine, on the same machine and trainer code (its model's group differs only
in the case), nearest in method, nets and floats per env, scaled to this case (`core.memory.similar`). Its answer
for the card becomes an opening as the case's own model's would (`core.memory.first.opening`): the second source of
`ladder.sweep.prior`. The first case of a family has none: it starts as the walk would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ladder.core.memory.cards import predict
from ladder.core.memory.first import Opening, opening
from ladder.core.memory.model import Model
from ladder.core.memory.similar import Borrowed, CaseFacts, borrow
from ladder.settings.config import Settings
from ladder.storage import history
from ladder.sweep import bench


def opening_from_kin(
    settings: Settings,
    models: Mapping[history.Group, Model],
    caps: Sequence[tuple[history.Group, float]],
    user: Sequence[str] = (),
) -> Opening | None:
    """The opening a borrowed model orders under the caps a trial of this case runs under (group, size in MiB): the
    lowest where several caps lend one; None where no case of the family has a trusted model under any of them."""
    target, patch = bench.facts_of(settings), bench.agent_patch(settings, user)
    found = []
    for group, mb in caps:
        lent = borrow(target, kin(models, group, target.engine, user, patch))
        if lent is not None:
            found.append(_opening(lent, settings, mb / 1024))
    usable = [o for o in found if o.rungs]
    return min(usable, key=lambda o: o.rungs[0]) if usable else (found[0] if found else None)


def _opening(lent: Borrowed, settings: Settings, card_gb: float) -> Opening:
    first = opening(predict(lent.model, settings.rungs, card_gb, settings.tuning.mem_headroom_frac), settings.rungs)
    return Opening(first.rungs, f"{lent.why}: {first.why}")


def kin(
    models: Mapping[history.Group, Model],
    group: history.Group,
    engine: str,
    user: Sequence[str] = (),
    patch: Mapping[str, Any] | None = None,
) -> dict[str, tuple[CaseFacts, Model]]:
    """The other cases' models in `group` but for the case (same profile, cap and machine), with their facts from
    their config files (`patch`: what the command line set on every case's agent)."""
    out: dict[str, tuple[CaseFacts, Model]] = {}
    for g, model in models.items():
        same = (g.profile, g.cap, g.machine) == (group.profile, group.cap, group.machine)
        if not same or g.case == group.case:
            continue
        facts = bench.facts_from_file(g.case, engine, user, patch)
        if facts is not None:
            out[g.case] = (facts, model)
    return out


def fill(
    own: Opening | None,
    settings: Settings,
    models: Mapping[history.Group, Model],
    caps: Sequence[tuple[history.Group, float]],
) -> Opening | None:
    """The case's own opening where it orders rungs, else the one its kin's models order, else whichever says why
    the walk starts cold (the case's own first)."""
    if own is not None and own.rungs:
        return own
    lent = opening_from_kin(settings, models, caps)
    if lent is not None and lent.rungs:
        return lent
    return own or lent
