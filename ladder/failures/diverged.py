"""Learning sanity: the line where a trainer reports its training gone NaN or infinite (a trial that survives but
does not learn is `diverged`: never the pick). Pure: text in, the line out.

Trainers print their losses as `name value` pairs in many shapes: tables (`| Actor_Loss | nan |`, `| value_loss |
nan |`), `name: value` (`Mean value_function loss: nan`), `name=value` (`loss=inf`), JSON (`"loss": NaN`) and
tensors (`loss tensor(nan, ...)`). A loss, an entropy, a KL divergence or an advantage that is NaN or infinite is
diverged training. A return or reward counts only when infinite: many trainers print the mean of no finished
episode yet as NaN. A gradient norm does not count: mixed-precision scalers report an infinite one and skip that
step by design.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ladder.core.records import Reason, Status, Verdict

SHOWN_CHARS = 200  # how much of the line the verdict quotes

_SEP = r"[\"']?\s*(?:[:=|]\s*|\s+)(?:tensor\(|\[)?"  # `: `, `=`, ` | ` or a space; a quote; a tensor, a list


def _named(terms: str) -> str:
    """A printed name with a part that ends in one of `terms`: `Actor_Loss`, `train/value_loss`, `approx_kl`
    (never `workload`: a part must end in the term)."""
    part, joint = r"[A-Za-z0-9]+", r"[_/.\-]"
    return rf"(?<![\w/.\-])(?:{part}{joint})*[A-Za-z0-9]*(?:{terms})(?:{joint}{part})*"


_BAD = re.compile(rf"(?i){_named('loss|losses|entropy|kl|advantages?')}{_SEP}[-+]?(?:nan|inf(?:inity)?)\b")
_INFINITE_RETURN = re.compile(rf"(?i){_named('returns?|rewards?|rew')}{_SEP}[-+]?inf(?:inity)?\b")


def diverged_line(text: str) -> str:
    """The first line of `text` that reports diverged training ("" where none does), as the verdict quotes it."""
    for line in text.splitlines():
        if _BAD.search(line) or _INFINITE_RETURN.search(line):
            return line.strip()[:SHOWN_CHARS]
    return ""


def verdict(texts: Iterable[str]) -> Verdict | None:
    """`diverged`, quoting the first line among `texts` that reports diverged training; None where none does."""
    line = next((found for text in texts if (found := diverged_line(text))), "")
    if not line:
        return None
    return Verdict(Status.DIVERGED, Reason.NONE, f"it fits, but its training went NaN or infinite: {line}")
