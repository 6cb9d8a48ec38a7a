"""The bench summary the routine wrote by hand, made from rows: classes, method averages, the decision table."""

from __future__ import annotations

import pytest

from ladder.ui.report import bench

pytestmark = pytest.mark.unit


def row(case: str, method: str, cls: str, util: str, mems: tuple[str, str], **more: str) -> dict[str, str]:
    return {
        "case": case,
        "method": method,
        "variant": more.pop("variant", "hiutil"),
        "num_envs": more.pop("num_envs", "40"),
        "status": more.pop("status", "ok"),
        "min_avg_util": util,
        "max_mem0": mems[0],
        "max_mem1": mems[1],
        "class": cls,
        "gpu_name": "NVIDIA GeForce RTX 4090",
        "gpu_mem_total": "24564",
        **more,
    }


BEST = [
    row("add_pi_plus", "add", "VRAM-bound mixed", "45.35", ("24037", "24093")),
    row("amp_pi_plus", "amp", "VRAM-bound mixed", "51.54", ("24052", "24115"), num_envs="38"),
    row("ase_humanoid", "ase", "compute-heavy", "66.92", ("4826", "5480"), num_envs="1024"),
    row("add_go2", "add", "throughput/env-bound", "27.44", ("3873", "7412"), variant="default", num_envs="4096"),
    row("smp_humanoid", "smp", "broken configuration", "", ("", ""), status="error", num_envs=""),
]
TRIALS = [
    {"case": "amp_pi_plus", "variant": "default", "num_envs": "256", "status": "oom_or_nccl", "reason": "cuda_oom",
     "evidence": "torch.OutOfMemoryError: CUDA out of memory", "duration_s": "30"},
    {"case": "amp_pi_plus", "variant": "hiutil", "num_envs": "38", "status": "ok", "duration_s": "90"},
    {"case": "smp_humanoid", "variant": "default", "num_envs": "4096", "status": "error", "reason": "other_error",
     "evidence": "FileNotFoundError: prior model", "duration_s": "10"},
]  # fmt: skip


def test_cases_stand_under_their_class_with_the_routines_columns() -> None:
    text = bench.summary_md("case_gpu_bench_x", BEST, TRIALS, grid_launches=110)
    vram = text[text.index("### VRAM-bound mixed (2)") : text.index("### compute-heavy")]
    assert "| case | configuration | min_avg_util | max_mem0/max_mem1 |" in vram
    assert vram.index("`amp_pi_plus`") < vram.index("`add_pi_plus`")  # higher util first
    assert "| `amp_pi_plus` | `hiutil e38` | 51.54 | 24052 / 24115 MiB |" in vram
    assert "### throughput/env-bound (1)" in text and "`default e4096`" in text
    assert "launches: 3, against 110 for the grid" in text


def test_method_averages_are_over_the_stable_picks() -> None:
    text = bench.summary_md("x", BEST, TRIALS)
    methods = text[text.index("## Per method") : text.index("## Quick decision table")]
    assert "| `add` | 2 | 36.40 | 15752.5 MiB |" in methods  # (45.35 + 27.44) / 2; (24093 + 7412) / 2
    assert methods.index("`ase`") < methods.index("`amp`") < methods.index("`add`")  # by util, highest first
    assert "smp" not in methods  # a broken case has no figures to average


def test_the_decision_table_names_the_cases_behind_each_row_and_failures_their_reason() -> None:
    text = bench.summary_md("x", BEST, TRIALS)
    table = text[text.index("## Quick decision table") : text.index("## Failures")]
    fired = {line.split("|")[2].strip(): line.split("|")[4].strip() for line in table.splitlines()[4:] if line}
    assert fired["VRAM-bound mixed"] == "`add_pi_plus`, `amp_pi_plus`"
    assert fired["throughput/env-bound"] == "`add_go2`"
    assert fired["balanced"] == "-"
    assert fired["broken configuration"] == "`smp_humanoid`"
    failures = text[text.index("## Failures") :]
    assert "| `smp_humanoid` | default | 4096 | error | other_error | FileNotFoundError: prior model |" in failures
    assert "cuda_oom" in failures


def test_the_chart_places_each_pick_by_its_memory_share_of_the_card_it_was_classed_on() -> None:
    emulated = row("amp_emulated", "amp", "balanced", "80", ("682", "682"), cap_used_mb="500", cap_mb="1000")
    cpu = row("x", "amp", "unclassified", "80", ("682", "682"), gpu_name="cpu")
    found = {p.case: p for p in bench.points([BEST[1], emulated, cpu, BEST[4]])}
    assert found["amp_emulated"].mem_frac == pytest.approx(0.5)  # the emulated card, not the host's RSS
    assert found["amp_pi_plus"].mem_frac == pytest.approx(24115 / 24564)  # the larger device against the GPU
    assert set(found) == {"amp_emulated", "amp_pi_plus"}  # the CPU row has no card, the broken one no util
    assert bench.is_bench(BEST) and not bench.is_bench(BEST[:1])
