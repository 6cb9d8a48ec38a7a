"""The decision table: a case's best figures → its class and the action. Pure.

The manual routine's rules were written for a 24 GB card (peak memory > 23 GB, < 8 GB); here memory is a share of the
card's total, so the same table holds on any card. Rules apply in order, first match wins:

| class                | when                                                    | action                          |
|----------------------|---------------------------------------------------------|---------------------------------|
| VRAM-bound mixed     | peak memory ≥ vram_frac of the card (util ~45-55%)      | keep the rung, stability first  |
| compute-heavy        | min_avg_util ≥ compute_util                             | keep it running                 |
| throughput/env-bound | peak memory < low_mem_frac of the card, util < low_util | two single-GPU trials instead   |
| balanced             | anything else                                           | try the hiutil profile (*)      |

A row whose status is `error` is a `broken configuration`: its action is to fix it, with the evidence line and the
trial folder, never to step down (a lower rung fails the same way). Any other row whose status is not `ok` is
`unstable` (frequent OOM/NCCL → step down first; a `diverged` row, whose rung fits and whose training went NaN: fix the
learning settings); a row without util or card memory is `unclassified`.

(*) The action agrees with the pick: a `balanced` pick that is itself a hiutil profile is told to keep it, and one whose
case already measured a hiutil profile (`tried`) is told that it did not beat it, never to try it again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ladder.core import figkeys
from ladder.core.errors import ConfigError
from ladder.core.records import Word


class CaseClass(Word):
    VRAM_BOUND = "VRAM-bound mixed"
    COMPUTE_HEAVY = "compute-heavy"
    BALANCED = "balanced"
    THROUGHPUT = "throughput/env-bound"
    UNSTABLE = "unstable"
    BROKEN = "broken configuration"
    UNCLASSIFIED = "unclassified"


ACTIONS = {
    CaseClass.VRAM_BOUND: "keep the stable rung; do not raise num_envs; stability first",
    CaseClass.COMPUTE_HEAVY: "already near the high-util zone: keep it running",
    CaseClass.BALANCED: "try the hiutil profile",
    CaseClass.THROUGHPUT: "run two single-GPU trials side by side instead of one dual-GPU trial",
    CaseClass.UNSTABLE: "no stable rung: step num_envs down (a lower ladder) before tuning anything else",
    CaseClass.BROKEN: "fix the configuration (stepping num_envs down will not help)",
    CaseClass.UNCLASSIFIED: "card memory or util unknown: measure on a GPU (or set workload.emulate_gpu_mem_gb)",
}
DIVERGED_ACTION = (
    "training went NaN or inf where the rung fits: fix the profile's learning settings (a lower num_envs is no fix)"
)
HIUTIL = "hiutil"  # the profile family the balanced class's action names (hiutil, hiutil40, ...)
HIUTIL_PICKED = "the pick is already a hiutil profile: keep it running"
HIUTIL_TRIED = "the hiutil profile was measured and did not beat this pick: keep it"


@dataclass(frozen=True)
class Thresholds:
    """Where the classes part; memory as a share of the card's total."""

    vram_frac: float = 0.95  # peak ≥ this share: VRAM-bound (seed: > 23 GB of a 24 GB card)
    compute_util: float = 60.0  # min_avg_util (%) ≥ this: compute-heavy (seed: util ≥ 60%)
    low_util: float = 45.0  # min_avg_util (%) < this, with low memory: throughput/env-bound (seed: util < 45%)
    low_mem_frac: float = 1 / 3  # peak < this share counts as low memory (seed: < 8 GB of 24 GB)


DEFAULT = Thresholds()  # the table as set for a 24 GB card


def validate(t: Thresholds) -> Thresholds:
    if not 0 < t.low_mem_frac < t.vram_frac <= 1:
        raise ConfigError(
            f"decision thresholds need 0 < low_mem_frac < vram_frac <= 1, got {t.low_mem_frac}, {t.vram_frac}",
            "e.g. decide.low_mem_frac=0.333 decide.vram_frac=0.95",
        )
    if not 0 <= t.low_util <= t.compute_util <= 100:
        raise ConfigError(
            f"decision thresholds need 0 <= low_util <= compute_util <= 100, got {t.low_util}, {t.compute_util}",
            "e.g. decide.low_util=45 decide.compute_util=60",
        )
    return t


def classify(
    min_avg_util: float, max_mem_mb: float, card_mem_mb: float, thresholds: Thresholds = Thresholds()
) -> tuple[CaseClass, str]:
    """The class and action for a stable pick: util in percent, peak memory (max over GPUs) and card in MiB."""
    cls = _class(min_avg_util, max_mem_mb / card_mem_mb, thresholds) if card_mem_mb > 0 else CaseClass.UNCLASSIFIED
    return cls, ACTIONS[cls]


def _class(util: float, mem_frac: float, t: Thresholds) -> CaseClass:
    if mem_frac >= t.vram_frac:
        return CaseClass.VRAM_BOUND
    if util >= t.compute_util:
        return CaseClass.COMPUTE_HEAVY
    if mem_frac < t.low_mem_frac and util < t.low_util:
        return CaseClass.THROUGHPUT
    return CaseClass.BALANCED


def classify_row(
    row: Mapping[str, str], thresholds: Thresholds = Thresholds(), tried: Collection[str] = ()
) -> tuple[CaseClass, str]:
    """The class and action for a best_by_case.tsv row (its `status`, `min_avg_util`, `max_memN`, `gpu_mem_total`).
    Where the trainer reported its use of an emulated card (`cap_used_mb` of `cap_mb`), that is compared instead:
    the same quantity the cap limits (on CPU, `max_memN` is PSS, libraries included). A CPU run without such an
    emulated card gets no class: the classes read a GPU's memory and util, and CPU figures are neither. `tried`: the
    profiles the case's walk measured, so that a balanced pick is never told to try one it already beat."""
    if row.get("status") == "error":
        return CaseClass.BROKEN, broken_action(row)
    knob = row.get("knob") or "num_envs"
    if row.get("status") == "diverged":  # its rung fits: a lower one is no fix for its training
        return CaseClass.UNSTABLE, in_knob(DIVERGED_ACTION, knob)
    if row.get("status") != "ok":
        return CaseClass.UNSTABLE, in_knob(ACTIONS[CaseClass.UNSTABLE], knob)
    cls, action = _classify_ok(row, thresholds)
    return cls, in_knob(_agreeing(cls, action, row.get("variant", ""), tried), knob)


NOT_NUM_ENVS = (
    "fix what fails at every rung, not num_envs (no failure named memory; the lowest rung failed the same way)"
)


def in_knob(words: str, knob: str) -> str:
    """`words` said of the sweep's knob (`ladder.knob`, the row's `knob`): they name num_envs, the default one."""
    return words if knob == "num_envs" else words.replace("num_envs", knob)


def broken_action(row: Mapping[str, str], fix: str = "fix the configuration") -> str:
    """Fix the configuration (`fix`: or what else to fix, `NOT_NUM_ENVS`): what proved it broken, and where its
    trial's files are; said of the row's knob (the evidence stays as the trial printed it)."""
    evidence, where, knob = row.get("evidence") or "", row.get("trial_dir") or "", row.get("knob") or "num_envs"
    return (
        in_knob(fix, knob)
        + (f": {evidence}" if evidence else "")
        + (f" (see {where})" if where else "")
        + in_knob("; stepping num_envs down will not help", knob)
    )


def _classify_ok(row: Mapping[str, str], thresholds: Thresholds) -> tuple[CaseClass, str]:
    util, card = _float(row.get("min_avg_util")), _float(row.get("gpu_mem_total"))
    used, cap = _float(row.get("cap_used_mb")), _float(row.get("cap_mb"))
    if util is not None and used is not None and cap:
        return classify(util, used, cap, thresholds)
    if row.get("gpu_name") == "cpu":
        return CaseClass.UNCLASSIFIED, "no class on CPU: the classes read a GPU's memory and util; measure on a GPU"
    mems = [m for v in figkeys.values(row, figkeys.MAX_MEM) if (m := _float(v)) is not None]
    if util is None or card is None or not mems:
        return CaseClass.UNCLASSIFIED, ACTIONS[CaseClass.UNCLASSIFIED]
    return classify(util, max(mems), card, thresholds)


def _agreeing(cls: CaseClass, action: str, profile: str, tried: Collection[str]) -> str:
    if cls is not CaseClass.BALANCED:
        return action
    if profile.startswith(HIUTIL):
        return HIUTIL_PICKED
    if any(p.startswith(HIUTIL) for p in tried):
        return HIUTIL_TRIED
    return action


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None
