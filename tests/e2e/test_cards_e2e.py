"""Every card's answer, end to end: a sweep on one card writes cards.tsv and prints a line per card; a sweep of the
same case on another card, in the same output_root, starts from the memory model's prediction (the predicted rung,
then the one above) and launches fewer trials than the same sweep with `history=false`, for the same pick. The
built-in proxy under emulated cards, and stable-baselines3 PPO under memory cgroups."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ladder.storage.tsv import read_tsv
from ladder.sweep.cards import CARDS_TSV
from ladder.ui.report.build import write_report
from tests.helpers import DATA, LIGHT_PROXY, QUICK_WINDOW, memory_cgroups, need_module

LADDER = "ladder.rungs=[2048,1024,512,256,128,64]"
FAST = [
    "profile=[default]",
    *QUICK_WINDOW,
    "workload.nproc=1",
    LIGHT_PROXY,
]
# the proxy's memory (1 rank, steps_per_iter=8): ~355 MiB + 2.08 MiB per env under its emulated card
FIRST_GB, OTHER_GB = 2.0, 0.8  # 512 fits the first (and 256, measured below it), 128 the other


def search(root: Path, name: str, *overrides: str) -> str:
    argv = [sys.executable, "-m", "ladder.search", "case=amp_pi_plus", "device=cpu", f"output_root={root}"]
    done = subprocess.run([*argv, f"sweep={name}", *overrides], cwd=root.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def launched(root: Path, name: str) -> list[dict[str, str]]:
    return [t for t in read_tsv(root / f"case_gpu_bench_{name}" / "trials.tsv") if not t.get("reused_from")]


def pick(root: Path, name: str) -> str:
    (best,) = read_tsv(root / f"case_gpu_bench_{name}" / "best_by_case.tsv")
    return best["num_envs"]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One sweep on the first card (samples/s: it measures below its largest fit, two points), then the other card
    with history, its dry run, and the other card without history (reuse=false: neither copies the other's)."""
    root = tmp_path_factory.mktemp("cards") / "train"
    root.mkdir()
    card = "workload.emulate_gpu_mem_gb"
    out = {
        "first": search(
            root, "first", *FAST, LADDER, "objective=samples_per_s", f"{card}={FIRST_GB}", "cards=[0.8,2,8]"
        )
    }
    other = [*FAST, LADDER, f"{card}={OTHER_GB}", "reuse=false", f"cards=[{OTHER_GB},{FIRST_GB}]"]
    out["dry"] = search(root, "dry", *other, "dry_run=true")
    out["warm"] = search(root, "warm", *other)
    out["cold"] = search(root, "cold", *other, "history=false")
    return root, out


def test_the_sweeps_end_writes_cards_tsv_and_prints_a_line_per_card(proxy: tuple[Path, dict[str, str]]) -> None:
    root, out = proxy
    rows = read_tsv(root / "case_gpu_bench_first" / CARDS_TSV)
    by_card = {r["card_gb"]: r for r in rows}
    assert set(by_card) == {"0.8", "2", "8"}, rows
    assert (by_card["2"]["num_envs"], by_card["2"]["basis"]) == ("512", "measured")
    assert (by_card["0.8"]["num_envs"], by_card["0.8"]["basis"]) == ("128", "predicted")
    assert by_card["8"]["basis"] == "beyond the ladder" and by_card["8"]["cap"] == "emulated card"
    said = out["first"].split(f"cards ({root / 'case_gpu_bench_first' / CARDS_TSV}):")[1].splitlines()[1:4]
    assert [line.split()[2] for line in said] == ["0.8", "2", "8"], out["first"]


def test_a_sweep_on_another_card_starts_from_the_prediction(proxy: tuple[Path, dict[str, str]]) -> None:
    root, out = proxy
    warm, cold = launched(root, "warm"), launched(root, "cold")
    assert [t["num_envs"] for t in warm] == ["128", "256"], out["warm"]  # the predicted rung, then the one above
    assert warm[0]["why"].startswith("history: 128 is predicted to fit 0.8 GB"), warm[0]["why"]
    assert [t["num_envs"] for t in cold] == ["2048", "1024", "512", "256", "128"], out["cold"]
    assert pick(root, "warm") == pick(root, "cold") == "128"
    assert len(warm) <= 0.6 * len(cold)
    rows = {r["card_gb"]: r for r in read_tsv(root / "case_gpu_bench_warm" / CARDS_TSV)}
    assert (rows["0.8"]["num_envs"], rows["0.8"]["basis"]) == ("128", "verified")  # measured, as predicted


def test_the_dry_run_says_which_rungs_the_prediction_puts_first(proxy: tuple[Path, dict[str, str]]) -> None:
    _, out = proxy
    assert "first launches, from memory history (history=false: the walk's own):" in out["dry"], out["dry"]
    assert "    default: e128 then e256 (128 is predicted to fit 0.8 GB" in out["dry"]


def test_the_report_shows_the_cards_table_and_links_its_chart(proxy: tuple[Path, dict[str, str]]) -> None:
    need_module("matplotlib", 'pip install -e ".[report]"')
    root, _ = proxy
    sweep_dir = root / "case_gpu_bench_first"
    (sweep_dir / CARDS_TSV).unlink()  # an older sweep folder: the report writes it too
    text = write_report(sweep_dir).read_text()
    assert (sweep_dir / CARDS_TSV).is_file()
    assert "## Every card" in text and "| amp_pi_plus | default | emulated card | 2 | 512 | measured |" in text
    assert "![cards_amp_pi_plus_default](plots/cards_amp_pi_plus_default.png)" in text
    assert (sweep_dir / "plots" / "cards_amp_pi_plus_default.png").is_file()


SB3 = DATA / "trainers" / "sb3_ppo.py"
SB3_QUICK = [
    "profile=[default]",
    "measure.window_s=2",
    "measure.warmup_iters=2",
    "measure.stable_k=2",
    "measure.stable_tol=1.0",
    "measure.warmup_timeout_s=8",
    "measure.extend_unstable=false",
    "workload.kind=command",
    f"workload.command=['{{python}}',{SB3},--n-envs,'{{num_envs}}',--grab-mb-per-env,48]",
    "workload.progress=regex",
    "workload.progress_regex=sb3",
    "workload.emulate_gpu_mem_gb=null",
]


def test_sb3_under_memory_cgroups_starts_a_smaller_cgroup_at_the_predicted_rung(tmp_path: Path) -> None:
    """48 MiB per env held from the first update, ~230 MiB besides (the cgroup's peak): under 1.5 GB, 16 envs fit
    and 8 are measured below; under 0.9 GB the model puts 8 first and 16 above it, which settles it."""
    need_module("stable_baselines3", "pip install stable-baselines3 (the test extra)")
    if not memory_cgroups():
        pytest.skip("no memory cgroup can be made here (root and a writable memory controller)")
    root = tmp_path / "train"
    root.mkdir()
    cgroup = "workload.host_mem_limit_gb"
    search(root, "big", *SB3_QUICK, "ladder.rungs=[16,8,4]", "objective=samples_per_s", f"{cgroup}=1.5")
    out = search(root, "small", *SB3_QUICK, "ladder.rungs=[32,16,8,4]", f"{cgroup}=0.9", "cards=[0.9]")
    trials = launched(root, "small")
    assert [(t["num_envs"], t["status"]) for t in trials] == [("8", "ok"), ("16", "oom_or_nccl")], out
    assert trials[0]["why"].startswith("history: 8 is predicted to fit 0.9 GB"), trials[0]["why"]
    assert pick(root, "small") == "8"  # a cold walk: 32 and 16 killed, then 8
    (row,) = read_tsv(root / "case_gpu_bench_small" / CARDS_TSV)
    assert (row["card_gb"], row["num_envs"], row["basis"], row["cap"]) == ("0.9", "8", "verified", "memory cgroup")
