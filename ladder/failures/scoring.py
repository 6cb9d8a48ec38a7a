"""How right the classifier is on a labelled corpus (pure: rows in, a table out).

A corpus is JSON lines in the corpus format (tests/data/failure_logs/README.md): `id`, `label` (`cuda_oom`,
`host_oom`, `nccl`, `other_error`, `port_in_use`), `ambiguous`, `exit_code` (or null) and `text`. A row is right
in status when the verdict's status is the label's, right in reason when the verdict's reason is in the label's
family. A false step-down is the worst mistake: a verdict that walks the ladder down (`oom_or_nccl`, `timeout`)
on a log whose true status is `error` (a broken configuration fails the same way at every rung).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ladder.core.records import Reason, Status, Verdict
from ladder.failures.rules import classify_text

COMMUNICATION = frozenset({Reason.NCCL_ERROR, Reason.NCCL_TIMEOUT, Reason.PEER_LOST})
FAMILIES: dict[str, frozenset[Reason]] = {
    "cuda_oom": frozenset({Reason.CUDA_OOM}),
    "host_oom": frozenset({Reason.HOST_OOM}),
    "nccl": COMMUNICATION,
    "other_error": frozenset({Reason.ERROR, Reason.OVERSIZED_ALLOC}),
    "port_in_use": frozenset({Reason.PORT_IN_USE}),
}
LABEL_STATUS: dict[str, Status] = {
    "cuda_oom": Status.OOM_OR_NCCL,
    "host_oom": Status.OOM_OR_NCCL,
    "nccl": Status.OOM_OR_NCCL,
    "other_error": Status.ERROR,
    "port_in_use": Status.RETRY,
}
STEP_DOWN = frozenset({Status.OOM_OR_NCCL, Status.TIMEOUT})


@dataclass(frozen=True)
class Scored:
    """One labelled row and the classifier's verdict on it."""

    id: str
    label: str
    ambiguous: bool
    verdict: Verdict

    @property
    def status_right(self) -> bool:
        return self.verdict.status is LABEL_STATUS[self.label]

    @property
    def reason_right(self) -> bool:
        return self.verdict.reason in FAMILIES[self.label]

    @property
    def false_step_down(self) -> bool:
        return LABEL_STATUS[self.label] is Status.ERROR and self.verdict.status in STEP_DOWN


def check_row(row: Mapping[str, object], where: str) -> None:
    """A clear error for a row the format does not allow."""
    label, text = row.get("label"), row.get("text")
    if label not in LABEL_STATUS:
        raise ValueError(f"{where}: label {label!r} is not one of {', '.join(LABEL_STATUS)}")
    if not isinstance(text, str):
        raise ValueError(f"{where}: 'text' must be a string (the log excerpt)")
    code = row.get("exit_code")
    if code is not None and not isinstance(code, int):
        raise ValueError(f"{where}: 'exit_code' must be an integer or null, not {code!r}")


def score(
    rows: Iterable[Mapping[str, object]], classify: Callable[[str, int | None], Verdict] = classify_text
) -> list[Scored]:
    """Each row classified from its text and exit code (rows must pass `check_row`)."""
    out = []
    for n, row in enumerate(rows):
        code = row.get("exit_code")
        verdict = classify(str(row["text"]), code if isinstance(code, int) else None)
        out.append(Scored(str(row.get("id", f"row {n + 1}")), str(row["label"]), bool(row.get("ambiguous")), verdict))
    return out


def table(scored: list[Scored]) -> str:
    """The accuracy table (all rows, unambiguous rows), then every miss with its verdict and evidence."""
    lines = ["| rows | n | right status | right reason | false step-downs |", "|---|---|---|---|---|"]
    for name, part in (("all", scored), ("unambiguous", [s for s in scored if not s.ambiguous])):
        n = len(part)
        status, reason = sum(s.status_right for s in part), sum(s.reason_right for s in part)
        lines.append(
            f"| {name} | {n} | {status} / {n} ({_pct(status, n)}) | {reason} / {n} ({_pct(reason, n)}) "
            f"| {sum(s.false_step_down for s in part)} |"
        )
    misses = [s for s in scored if not (s.status_right and s.reason_right)]
    lines.append(f"\nmisses ({len(misses)}):" if misses else "\nmisses: none")
    for s in misses:
        flags = ("  FALSE STEP-DOWN" if s.false_step_down else "") + ("  (ambiguous)" if s.ambiguous else "")
        lines.append(f"- {s.id}: label {s.label}, got {s.verdict.status}/{s.verdict.reason}{flags}")
        lines.append(f"    evidence: {s.verdict.evidence[:160]}")
    return "\n".join(lines)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"
