"""The ballast: how much of a real GPU to hold so that a trainer meets a smaller card's out-of-memory (pure).

A card of `card_mb` has, at rest, what its driver reserves in use and the rest free. On a larger GPU, ladder's holder
process (`ladder.runner.ballast`) takes the difference, so that what a trainer finds free is what it would find on
the smaller card: `free_after = card_mb - reserved_mb`, where `reserved_mb` is what the GPU used before the holder
started (the driver's own share, which the smaller card has too). The holder's own CUDA context is part of what it
holds. The figures a trial records are net of what the holder held on each device (`net_mb`), the ballast beside
them (`ballast_mb`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from ladder.core.errors import ConfigError
from ladder.core.spec import EmulateBy

GRANULE_MB = 2.0  # the CUDA allocator's granularity: a ballast within this of its aim is on target
SLACK_MB = 64.0  # what a holder may miss its aim by (allocator rounding, the driver's own bookkeeping)


class Mode(Enum):
    """What emulates the card in a trial."""

    NONE = "none"  # no card emulated
    OWN = "own"  # the built-in proxy caps its own allocations
    BALLAST = "ballast"  # ladder's holder process takes the rest of each GPU


def mode(gb: float | None, proxy: bool, device: str, emulate_by: EmulateBy) -> Mode:
    """How `workload.emulate_gpu_mem_gb` is applied to a trial of this workload on this device. On CPU only the
    proxy emulates a card (its data segment; a memory cgroup is the host's cap for any trainer); on a GPU, any
    trainer gets the ballast, the proxy its own cap unless `emulate_by=ballast` (the cross-check of the two)."""
    if not gb:
        return Mode.NONE
    if emulate_by is EmulateBy.FRACTION and not proxy:
        raise ConfigError(
            "workload.emulate_by=fraction is the built-in proxy's own cap, and this workload is another trainer",
            "set workload.emulate_by=auto (a ballast on a GPU holds the rest of each card for any trainer)",
        )
    if device != "cuda":
        return Mode.OWN if proxy else Mode.NONE
    if proxy and emulate_by is not EmulateBy.BALLAST:
        return Mode.OWN
    return Mode.BALLAST


@dataclass(frozen=True)
class Device:
    """One GPU as the holder reads it before holding anything (MiB)."""

    index: int  # NVML's index (PCI bus order), as the trial's leases and samples number it
    total_mb: float
    used_mb: float


def refusal(device: Device, card_mb: float) -> str:
    """Why the holder cannot make `device` look like a `card_mb` card ("" when it can): the card is not smaller
    than the GPU. (Memory someone else holds is the preflight's to find, before the holder starts.)"""
    if card_mb < device.total_mb:
        return ""
    return (
        f"GPU {device.index} has {device.total_mb:.0f} MiB, not more than the emulated card's {card_mb:.0f} MiB: "
        f"lower workload.emulate_gpu_mem_gb below {device.total_mb / 1024:.1f} or set it to null"
    )


def aim_free_mb(device: Device, card_mb: float) -> float:
    """What the GPU should have free once the holder holds its share: the card's size less what the driver
    already uses on it at rest."""
    return max(0.0, card_mb - device.used_mb)


def hold_mb(free_now_mb: float, device: Device, card_mb: float) -> float:
    """What the holder allocates, its CUDA context already made (`free_now_mb`: free memory then): the rest
    above its aim, rounded down to whole allocator granules; 0 where nothing is to be held."""
    extra = free_now_mb - aim_free_mb(device, card_mb)
    return max(0.0, (extra // GRANULE_MB) * GRANULE_MB)


def off_target(device: Device, card_mb: float, free_after_mb: float) -> str:
    """Why a holder that has allocated did not make the card ("" when it did): more free than the card would have
    (it could not take enough), or less (its own CUDA context alone left less than the card: a card this close
    to the GPU's size cannot be emulated on it)."""
    aim = aim_free_mb(device, card_mb)
    if abs(free_after_mb - aim) <= SLACK_MB:
        return ""
    fix = "the holder could not take enough" if free_after_mb > aim else "lower workload.emulate_gpu_mem_gb"
    return (
        f"GPU {device.index}: {free_after_mb:.0f} MiB free with the ballast held, aimed at {aim:.0f} MiB "
        f"(a {card_mb:.0f} MiB card): {fix}"
    )


def net_mb(used_mb: float, ballast_mb: float) -> float:
    """A device's used memory as the trainer's card would show it: less what the holder held on it."""
    return max(0.0, used_mb - ballast_mb)


def figures(held: Mapping[int, float], card_mb: float) -> dict[str, float]:
    """What a trial records of its ballast beside its figures: the emulated card, and the most held on any of
    its GPUs (all its GPUs are held to the same card)."""
    if not held:
        return {}
    return {"ballast_mb": round(max(held.values()), 1), "ballast_card_mb": round(card_mb, 1)}
