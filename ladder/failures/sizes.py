"""Allocation sizes: what a failed allocation asked for, against the capacity its line states (pure: text in, a bool).

A shortage asks for a little more than is free; a request many times larger than the whole device (or host) is a size
bug (a wrong shape, a corrupted count, an extension built for another GPU) that fails the same way at every rung, so
`ladder.failures.rules` makes its memory line an `error` (`Reason.OVERSIZED_ALLOC`) instead of a step down.
"""

from __future__ import annotations

import re

# Real shortages ask for at most a few times the card (a batch that needs 3x what fits); a size bug asks for orders
# of magnitude more. Where the line states no capacity, only a request no device of its kind holds is a bug.
TIMES_CAPACITY = 8.0
GPU_BOUND_BYTES = 2**40  # 1 TiB: more than any one GPU holds (the largest hold under 300 GB)
HOST_BOUND_BYTES = 2**46  # 64 TiB: more than any one host holds

_UNIT = r"([KMGTPE]?i?B\b|[KMGTPE](?![A-Za-z])|bytes\b)"
_SIZE = r"(\d+(?:\.\d*)?)\s*" + _UNIT
# torch's "Tried to allocate", XLA's "trying to allocate", TF's "failed to allocate", numpy's "Unable to allocate"
_REQUEST = re.compile(r"(?i)\b(?:tried|trying|attempting|unable|failed) to allocate (?:more than )?" + _SIZE)
# torch's "(GPU 0; 8.00 GiB total capacity;" (older) and "GPU 0 has a total capacity of 79.19 GiB" (one release
# spells it "capacty")
_CAPACITY = re.compile(r"(?i)" + _SIZE + r" total capacity|\btotal capac(?:i)?ty of " + _SIZE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


def oversized(text: str, on_gpu: bool) -> bool:
    """Whether the allocation `text` reports asked for many times what its device (`on_gpu`) or host can hold."""
    request = _bytes(_REQUEST.search(text))
    if request is None:
        return False
    capacity = _bytes(_CAPACITY.search(text))
    if capacity:
        return request >= TIMES_CAPACITY * capacity
    return request >= (GPU_BOUND_BYTES if on_gpu else HOST_BOUND_BYTES)


def _bytes(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    number, unit = (group for group in match.groups() if group is not None)
    prefix = "" if unit.lower() == "bytes" else unit[0].upper() if unit[0].upper() in _POWERS else ""
    return float(number) * float(1024 ** _POWERS[prefix])
