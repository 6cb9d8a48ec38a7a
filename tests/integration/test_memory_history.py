"""The memory model from real sweeps: the built-in proxy swept under two emulated cards, its storage read into
the model (`ladder.storage.history`), a third card predicted, then swept to check the prediction (`cards.tsv`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ladder.core.memory import first
from ladder.core.memory.cards import Basis
from ladder.storage import history, studies
from ladder.storage.tsv import read_tsv
from ladder.sweep import cards
from tests.helpers import LIGHT_PROXY, QUICK_WINDOW, memory_cgroups

RUNGS = [512, 256, 128, 64]
FAST = [
    "profile=[default]",
    *QUICK_WINDOW,
    "workload.nproc=1",
    "strategy=walk",
    f"ladder.rungs=[{','.join(map(str, RUNGS))}]",
    LIGHT_PROXY,
]


def sweep(root: Path, name: str, card_gb: float, cap: str = "workload.emulate_gpu_mem_gb") -> Path:
    """A sweep of the proxy under a card of `card_gb`: its own emulated card, or (`cap`) a memory cgroup."""
    argv = [sys.executable, "-m", "ladder.search", "case=amp_pi_plus", "device=cpu", f"output_root={root}", *FAST]
    argv += [f"sweep={name}", f"{cap}={card_gb}"]
    if cap != "workload.emulate_gpu_mem_gb":
        argv.append("workload.emulate_gpu_mem_gb=null")
    done = subprocess.run(argv, cwd=root.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / f"case_gpu_bench_{name}"


def pick(sweep_dir: Path) -> int:
    (best,) = read_tsv(sweep_dir / "best_by_case.tsv")
    return int(best["num_envs"])


@pytest.fixture(scope="module")
def two_cards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("memory") / "train"
    root.mkdir()
    assert pick(sweep(root, "m08", 0.8)) == 128
    assert pick(sweep(root, "m12", 1.2)) == 256
    return root


def test_stored_trials_make_one_model_with_points_and_bounds(two_cards: Path) -> None:
    records = history.stored(studies.open_storage_at(str(two_cards / "case_gpu_bench_m12")), two_cards)
    (model,) = history.models(records, history.trial_notes(two_cards)).values()
    assert model.unreliable == ""
    assert sorted(o.knob for o in model.observations if o.fits) == [128, 256]
    assert {(b.knob, round(b.cap_mb)) for b in model.bounds} == {(256, 819), (512, 819), (512, 1229)}
    (line,) = model.lines
    assert line.per_unit_mb > 0 and line.fixed_mb > 0


def test_a_third_card_is_predicted_and_a_sweep_on_it_agrees(two_cards: Path) -> None:
    before = cards.for_sweep(two_cards / "case_gpu_bench_m12", [0.6, 0.8, 1.2, 4.0])
    by_card = {row["card_gb"]: row for row in before.rows}
    assert (by_card["0.6"]["basis"], by_card["0.6"]["num_envs"]) == ("predicted", "64")
    assert (by_card["0.8"]["basis"], by_card["0.8"]["num_envs"]) == ("measured", "128")
    assert (by_card["4"]["basis"], by_card["4"]["num_envs"]) == ("beyond the ladder", "512")
    assert read_tsv(two_cards / "case_gpu_bench_m12" / cards.CARDS_TSV) == before.rows
    (answers,) = before.answers.values()
    opening = first.opening(answers[0], RUNGS)
    assert opening.rungs == (64, 128), opening.why

    assert pick(sweep(two_cards, "m06", 0.6)) == 64  # the prediction held
    after = cards.for_sweep(two_cards / "case_gpu_bench_m06", [0.6, 0.8, 1.2])
    assert [(r["card_gb"], r["num_envs"], r["basis"]) for r in after.rows] == [
        ("0.6", "64", str(Basis.VERIFIED)),
        ("0.8", "128", str(Basis.VERIFIED)),
        ("1.2", "256", str(Basis.VERIFIED)),
    ]
    assert len(after.lines) == 3 and "verified" in after.lines[0]


def test_under_memory_cgroups_the_cgroups_own_peak_is_the_point(tmp_path: Path) -> None:
    if not memory_cgroups():
        pytest.skip("no memory cgroup can be made here (root and a writable memory controller)")
    root = tmp_path / "train"
    root.mkdir()
    assert pick(sweep(root, "c08", 0.8, "workload.host_mem_limit_gb")) == 128
    assert pick(sweep(root, "c15", 1.5, "workload.host_mem_limit_gb")) == 512
    table = cards.for_sweep(root / "case_gpu_bench_c15", [1.0])
    ((group, model),) = table.models.items()
    assert group.cap == history.Cap.CGROUP and model.unreliable == ""
    assert all(0 < o.peaks_mb[0] <= o.cap_mb for o in model.observations if o.fits)  # the cgroup's peak, not RSS
    ((row,),) = [table.rows]
    assert (row["card_gb"], row["num_envs"], row["basis"], row["cap"]) == ("1", "256", "predicted", "memory cgroup")
