"""Profiles as patches on a MimicKit agent config. Pure.

A profile tunes settings an agent already has: each leaf of the patch is set only where the agent config
has that key, so `hiutil`'s `disc_net` deepens an AMP discriminator and adds none to a PPO agent.
"""

from __future__ import annotations

import copy
from typing import Any


def apply_profile(agent: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A patched copy of `agent`; the input is left unchanged."""
    out = copy.deepcopy(agent)
    _merge_existing(out, patch)
    return out


def _merge_existing(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if key not in target:
            continue
        if isinstance(value, dict) and isinstance(target[key], dict):
            _merge_existing(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def skipped_leaves(agent: dict[str, Any], patch: dict[str, Any], prefix: str = "") -> list[str]:
    """The patch's leaves that `apply_profile` leaves out because the agent config lacks them (dotted paths)."""
    skipped = []
    for key, value in patch.items():
        path = f"{prefix}{key}"
        if key not in agent:
            skipped.append(path)
        elif isinstance(value, dict) and isinstance(agent[key], dict):
            skipped += skipped_leaves(agent[key], value, f"{path}.")
    return skipped
