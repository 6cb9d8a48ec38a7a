"""Where a sweep on another card starts: the rung its memory model predicts for the card, then the rung above it.
Pure: a card's answer and the ladder in, the first launches and a one-line reason (for the dry run) out.

Where the prediction holds, those two launches settle the largest fit (one fits, the one above does not); where
it does not, the walk goes on as it would have. A prediction orders launches: it never replaces one and never
changes a pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ladder.core.memory.cards import Answer, Basis


@dataclass(frozen=True)
class Opening:
    """The rungs to launch first, in order (empty: the walk as without history), and why."""

    rungs: tuple[int, ...]
    why: str


def opening(found: Answer | None, rungs: Sequence[int]) -> Opening:
    """The first launches on the card `found` answers for: its rung and the rung above it; the top rung alone where
    even it is predicted to fit; the bottom rung alone where even it is predicted not to (one failure there says
    none fits). None, or an unreliable answer: no opening."""
    ladder = sorted(rungs, reverse=True)
    if found is None:
        return Opening((), "no memory model for this card: the walk starts as without history")
    if found.basis is Basis.UNRELIABLE:
        return Opening((), f"the memory model is unreliable ({found.reason}): the walk starts as without history")
    card = f"{found.card_gb:g} GB"
    if found.rung is None:
        return Opening((ladder[-1],), f"even {ladder[-1]} is predicted not to fit {card}: it goes first")
    if found.rung not in ladder:
        return Opening((), f"the predicted {found.rung} is not on this ladder: the walk starts as without history")
    i = ladder.index(found.rung)
    if i == 0:
        return Opening((found.rung,), f"{found.rung}, the top rung, is predicted to fit {card} ({found.basis})")
    above = ladder[i - 1]
    why = f"{found.rung} is predicted to fit {card} ({found.basis}: {found.reason}), then {above}, the rung above"
    return Opening((found.rung, above), why)
