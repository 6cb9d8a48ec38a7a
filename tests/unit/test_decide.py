"""The decision table on the seeds' own figures, and the seed's Fast Command A on a TSV that ladder wrote."""

from __future__ import annotations

import pytest

from ladder.core.caseclass import (
    ACTIONS,
    HIUTIL_PICKED,
    HIUTIL_TRIED,
    CaseClass,
    Thresholds,
    classify,
    classify_row,
    validate,
)
from ladder.core.errors import ConfigError

RTX_4090_MIB = 24564  # NVML's memory.total for a 24 GB RTX 4090 (the seeds' card)
H100_MIB = 81559

# Seed 000's best rows: (case, variant e, min_avg_util, max_mem0, max_mem1, the seed's class).
SEED_ROWS = [
    ("add_pi_plus", 40, 45.35, 24037, 24093, CaseClass.VRAM_BOUND),
    ("amp_pi_plus", 38, 51.54, 24052, 24115, CaseClass.VRAM_BOUND),
    ("deepmimic_pi_plus_ppo", 40, 52.03, 23802, 24110, CaseClass.VRAM_BOUND),
    ("ase_humanoid", 1024, 66.92, 4826, 5480, CaseClass.COMPUTE_HEAVY),
    ("ase_humanoid_sword_shield", 1024, 66.00, 5566, 6265, CaseClass.COMPUTE_HEAVY),
    ("amp_smpl", 1024, 65.77, 6684, 7276, CaseClass.COMPUTE_HEAVY),
    ("add_go2", 4096, 27.44, 3873, 7412, CaseClass.THROUGHPUT),
    ("deepmimic_go2_ppo", 4096, 24.96, 2980, 3807, CaseClass.THROUGHPUT),
    ("vault_g1", 4096, 33.46, 2538, 3785, CaseClass.THROUGHPUT),
]
# Seed 000 gives the balanced group's util per case and its memory as a range (~2.6-7.3 GB): both ends.
BALANCED = [("amp_humanoid", 59.45, 7300), ("deepmimic_humanoid_ppo", 49.75, 2600), ("vault_humanoid", 50.89, 4000)]


@pytest.mark.parametrize(
    ("util", "mem", "expected"),
    [(51.5, 24052, CaseClass.VRAM_BOUND), (66.9, 4826, CaseClass.COMPUTE_HEAVY), (25.0, 2980, CaseClass.THROUGHPUT)],
    ids=["amp_pi_plus", "ase_humanoid", "deepmimic_go2"],
)
def test_issue_figures(util: float, mem: int, expected: CaseClass) -> None:
    assert classify(util, mem, RTX_4090_MIB) == (expected, ACTIONS[expected])


@pytest.mark.parametrize(("case", "e", "util", "mem0", "mem1", "expected"), SEED_ROWS, ids=[r[0] for r in SEED_ROWS])
def test_every_seed_row_gets_the_seed_class(
    case: str, e: int, util: float, mem0: int, mem1: int, expected: CaseClass
) -> None:
    assert classify(util, max(mem0, mem1), RTX_4090_MIB)[0] is expected


@pytest.mark.parametrize(("case", "util", "mem"), BALANCED, ids=[b[0] for b in BALANCED])
def test_seed_balanced_group(case: str, util: float, mem: int) -> None:
    assert classify(util, mem, RTX_4090_MIB) == (CaseClass.BALANCED, "try the hiutil profile")


def test_thresholds_are_relative_to_the_card() -> None:
    assert classify(51.5, 24052, H100_MIB)[0] is CaseClass.BALANCED  # 29% of an H100 is not a full card
    assert classify(40.0, 24052, H100_MIB)[0] is CaseClass.THROUGHPUT
    assert classify(51.5, 78000, H100_MIB)[0] is CaseClass.VRAM_BOUND


def test_thresholds_are_configurable() -> None:
    strict = Thresholds(vram_frac=0.99, compute_util=70.0)
    assert classify(51.54, 24115, RTX_4090_MIB, strict)[0] is CaseClass.BALANCED  # 98.2% < 99%
    assert classify(66.92, 5480, RTX_4090_MIB, strict)[0] is CaseClass.BALANCED


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [(Thresholds(vram_frac=0.2), "low_mem_frac < vram_frac"), (Thresholds(low_util=70.0), "low_util <= compute_util")],
    ids=["vram-below-low-mem", "low-util-above-compute"],
)
def test_bad_thresholds_are_named(thresholds: Thresholds, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate(thresholds)


def row(status: str = "ok", util: str = "51.54", mem0: str = "24052", mem1: str = "24115", card: str = "24564") -> dict:
    return {
        "case": "amp_pi_plus",
        "method": "amp",
        "variant": "hiutil",
        "num_envs": "38",
        "status": status,
        "min_avg_util": util,
        "max_mem0": mem0,
        "max_mem1": mem1,
        "gpu_mem_total": card,
    }


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, CaseClass.VRAM_BOUND),
        ({"status": "oom_or_nccl"}, CaseClass.UNSTABLE),
        ({"card": ""}, CaseClass.UNCLASSIFIED),
        ({"util": ""}, CaseClass.UNCLASSIFIED),
        ({"mem1": "0", "mem0": "2980", "util": "24.96"}, CaseClass.THROUGHPUT),
    ],
    ids=["seed-row", "failed-row", "no-card", "no-util", "one-gpu-filled-with-zero"],
)
def test_tsv_rows(values: dict[str, str], expected: CaseClass) -> None:
    assert classify_row(row(**values))[0] is expected


def test_an_emulated_card_is_judged_by_what_its_cap_limits() -> None:
    """On CPU max_memN is RSS (libraries included): 882 MiB on a 614 MiB card would read as full."""
    row = {
        "status": "ok",
        "min_avg_util": "84.3",
        "max_mem0": "882",
        "gpu_mem_total": "614",
        "cap_used_mb": "565",
        "cap_mb": "614",
    }
    assert classify_row(row)[0] is CaseClass.COMPUTE_HEAVY
    assert classify_row({k: v for k, v in row.items() if not k.startswith("cap_")})[0] is CaseClass.VRAM_BOUND


def broken_row() -> dict[str, str]:
    """A case whose only trials were `error`s, as results.best_row writes it: no num_envs, no figures."""
    return {
        "case": "amp_pi_plus",
        "method": "amp",
        "variant": "default",
        "num_envs": "",
        "status": "error",
        "reason": "error",
        "evidence": "FileNotFoundError: [Errno 2] No such file or directory: 'trainr.py'",
        "trial_dir": "trials/amp_pi_plus/default_e256_probe_1",
        "gpu_mem_total": "24564",
    }


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, CaseClass.BROKEN),
        ({"evidence": ""}, CaseClass.BROKEN),
        ({"status": "oom_or_nccl", "num_envs": "256"}, CaseClass.UNSTABLE),
        ({"status": "timeout", "num_envs": "256"}, CaseClass.UNSTABLE),
    ],
    ids=["error", "error-without-evidence", "oom", "timeout"],
)
def test_a_broken_configuration_is_told_to_fix_it_never_to_step_down(values: dict, expected: CaseClass) -> None:
    r = broken_row() | values
    cls, action = classify_row(r)
    assert cls is expected
    if cls is CaseClass.BROKEN:
        assert action.startswith("fix the configuration") and ACTIONS[CaseClass.UNSTABLE] not in action
        assert r["trial_dir"] in action and (r["evidence"] or "fix the configuration (") in action
    else:
        assert action == ACTIONS[CaseClass.UNSTABLE]


def test_a_diverged_row_is_told_to_fix_its_learning_settings_not_to_step_down() -> None:
    """Every rung that fits trained to NaN: the summary says no env count fixes that, and the action agrees."""
    cls, action = classify_row(broken_row() | {"status": "diverged", "num_envs": "64"})
    assert cls is CaseClass.UNSTABLE and "learning settings" in action
    assert action != ACTIONS[CaseClass.UNSTABLE] and "step num_envs down" not in action


BALANCED_ROW = {"status": "ok", "min_avg_util": "50.9", "max_mem0": "4000", "gpu_mem_total": "24564"}


@pytest.mark.parametrize(
    ("profile", "tried", "action"),
    [
        ("default", (), ACTIONS[CaseClass.BALANCED]),
        ("default", ("default",), ACTIONS[CaseClass.BALANCED]),
        ("default", ("default", "hiutil"), HIUTIL_TRIED),
        ("default", ("default", "hiutil40"), HIUTIL_TRIED),
        ("hiutil", ("default", "hiutil"), HIUTIL_PICKED),
        ("hiutil", (), HIUTIL_PICKED),
        ("hiutil40", ("hiutil40",), HIUTIL_PICKED),
    ],
    ids=[
        "default-alone",
        "default-only-measured",
        "hiutil-lost",
        "hiutil40-lost",
        "hiutil-picked",
        "hiutil-picked-untold",
        "hiutil40-picked",
    ],
)
def test_the_balanced_action_agrees_with_the_pick(profile: str, tried: tuple[str, ...], action: str) -> None:
    cls, got = classify_row(BALANCED_ROW | {"variant": profile}, Thresholds(), tried)
    assert (cls, got) == (CaseClass.BALANCED, action)
    assert "try the hiutil profile" not in got or not profile.startswith("hiutil")


@pytest.mark.parametrize("profile", ["default", "hiutil"])
@pytest.mark.parametrize(
    "values",
    [
        {},
        {"unstable": "1"},
        {"min_avg_util": "20", "max_mem0": "1000"},
        {"min_avg_util": "70"},
        {"max_mem0": "24500"},
        {"gpu_mem_total": ""},
        {"cap_used_mb": "600", "cap_mb": "614"},
    ],
    ids=["balanced", "flagged-unstable", "throughput", "compute", "vram", "unclassified", "emulated-full"],
)
def test_an_ok_pick_is_never_told_to_step_down(values: dict[str, str], profile: str) -> None:
    cls, action = classify_row(BALANCED_ROW | {"variant": profile} | values, Thresholds(), ("default", "hiutil"))
    assert cls not in (CaseClass.UNSTABLE, CaseClass.BROKEN)
    assert "step num_envs down" not in action and "fix the configuration" not in action
