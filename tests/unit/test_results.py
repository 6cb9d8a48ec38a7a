"""TSV columns, the best pick, merging, and the seed's own reader."""

from __future__ import annotations

import itertools
import random
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from ladder.core.pick import best, median_repeats, objective_value, pick, to_beat
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.core.rows import SEED_HEAD, best_row, columns, merge_rows
from ladder.core.walk import attempts
from ladder.storage.tsv import read_tsv, write_best, write_trials

# Seed 001, "Fast Commands" A, verbatim: the user's own reader of the newest sweep's best_by_case.tsv.
SEED_ONE_LINER = textwrap.dedent(
    """
    import csv,glob,os
    root=sorted(glob.glob('output/train/case_gpu_bench_*'))[-1]
    path=os.path.join(root,'best_by_case.tsv')
    rows=list(csv.DictReader(open(path),delimiter='\\t'))
    ok=[r for r in rows if r.get('status')=='ok']
    for r in sorted(ok,key=lambda x:float(x.get('min_avg_util',0))):
        mem=max(float(r.get('max_mem0',0)),float(r.get('max_mem1',0)))
        print(r['case'],r['method'],'util',r['min_avg_util'],'max_mem',int(mem),'variant',r['variant'],'e',r['num_envs'])
    """
)


def rec(
    profile: str, num_envs: int, status: Status, util: float | None = None, n_dev: int = 2, **info: str
) -> TrialRecord:
    figures: dict[str, float] = {f"max_mem{i}": 1000.0 + i for i in range(n_dev)}
    if util is not None:
        figures.update({"min_avg_util": util, "samples_per_s": 100.0 * num_envs / 64})
    return TrialRecord(
        "amp_pi_plus",
        "amp",
        profile,
        num_envs,
        Phase.PROBE,
        status,
        Reason.NONE if status is Status.OK else Reason.HOST_OOM,
        "",
        figures,
        {"gpu_name": "cpu", "n_gpus": str(n_dev), **info},
    )


def test_best_by_objective_ties_to_larger_num_envs() -> None:
    records = [
        rec("default", 64, Status.OK, 50.0),
        rec("hiutil", 48, Status.OK, 50.0),
        rec("hiutil", 128, Status.OOM_OR_NCCL),
    ]
    by_util, by_throughput = best(records, "min_avg_util"), best(records, "samples_per_s")
    assert by_util is not None and by_util.num_envs == 64
    assert by_throughput is not None and by_throughput.num_envs == 64
    higher = best([rec("default", 64, Status.OK, 40.0), rec("hiutil", 48, Status.OK, 55.0)], "min_avg_util")
    assert higher is not None and higher.profile == "hiutil"
    assert best([rec("hiutil", 128, Status.OOM_OR_NCCL)], "min_avg_util") is None


def test_repeats_count_as_their_median_and_carry_the_verdict_over_all_of_them() -> None:
    """With `measure.repeats=3`, the best of three never stands for a configuration: e64's lucky 5400 loses to
    e128's steadier median, and the row is e128's middle repeat with the verdict the last repeat gave."""

    def repeat(envs: int, value: float, number: int, **verdict: float) -> TrialRecord:
        r = rec("default", envs, Status.OK, 50.0)
        return replace(r, figures={**r.figures, "samples_per_s": value, **verdict}, number=number)

    records = [
        repeat(64, 5000, 1, repeats=1),
        repeat(64, 5400, 2, repeats=2),
        repeat(64, 5200, 3, repeats=3),
        repeat(128, 5380, 4, repeats=1),
        repeat(128, 5300, 5, repeats=2),
        repeat(128, 5350, 6, repeats=3, unstable=1.0, repeat_spread=0.015),
        rec("default", 256, Status.OOM_OR_NCCL),
    ]
    top = best(records, "samples_per_s")
    assert top is not None and (top.num_envs, top.number, top.figures["samples_per_s"]) == (128, 6, 5350)
    assert (top.figures["repeats"], top.figures["unstable"]) == (3, 1.0)
    assert [(r.num_envs, r.number) for r in median_repeats(records, "samples_per_s")] == [(64, 3), (128, 6), (256, 0)]
    even = median_repeats(records[:2], "samples_per_s")[0]  # two repeats: the lower one, with the second's verdict
    assert (even.figures["samples_per_s"], even.figures["repeats"]) == (5000, 2)


def test_a_wide_whole_window_counts_only_where_no_repeat_of_it_was_narrow() -> None:
    """A slow stretch of the machine spreads a window's steps and drags its mean down: where the same configuration
    measured a narrow window too, the wide one does not count. A cut window counts however wide (its whole interval
    was below what it had to reach), and where every window was wide the lower one stands, as before."""

    def window(envs: int, value: float, number: int, **figures: float) -> TrialRecord:
        r = rec("default", envs, Status.OK, 50.0)
        return replace(r, figures={**r.figures, "samples_per_s": value, **figures}, number=number)

    slow = window(48, 1582, 1, repeats=1, unstable=1.0, window_unstable=1.0)
    calm = window(48, 2170, 2, repeats=2, unstable=1.0, window_unstable=0.0)
    (merged,) = median_repeats([slow, calm], "samples_per_s")
    assert (merged.number, merged.figures["repeats"], merged.figures["unstable"]) == (2, 2, 1.0)
    assert attempts([slow, calm], "samples_per_s")[0].wide == 1
    cut = window(48, 1700, 3, repeats=3, window_unstable=1.0, cut=1.0)
    assert median_repeats([calm, cut], "samples_per_s")[0].number == 3  # the cut one is evidence: the lower stands
    both = window(48, 1900, 2, repeats=2, window_unstable=1.0)
    (lower,) = median_repeats([slow, both], "samples_per_s")
    assert lower.number == 1 and attempts([slow, both], "samples_per_s")[0].wide == 2
    (alone,) = attempts([slow], "samples_per_s")
    assert (alone.repeats, alone.wide) == (1, 1)
    assert attempts([window(48, 1582, 1, repeats=1, unstable=1.0)], "samples_per_s")[0].wide == 1  # older records


def test_a_trial_below_what_it_must_beat_never_becomes_the_pick_whatever_comes_after() -> None:
    """`to_beat` is what lets a trial stop early: one whose interval's top stays below it changes no pick, now or
    after any later trial (random rates and intervals over a few rungs, in every arrival order)."""
    rng = random.Random(8)
    rungs = (32, 48, 64, 128, 256)
    for _ in range(2000):
        items = [
            (v, v + rng.uniform(0, 300), rng.choice(rungs), i)
            for i, v in enumerate(rng.uniform(1000, 2000) for _ in range(rng.randint(1, 5)))
        ]
        cut_at = rng.randrange(1, len(items) + 1)  # the trial that arrives then is the candidate
        before, candidate, later = items[: cut_at - 1], items[cut_at - 1], items[cut_at:]
        top = pick(before)
        if top is None:
            continue
        v, hi, envs, _ = before[top]
        if candidate[1] < to_beat(v, hi, envs, candidate[2]):
            everything = [*before, candidate, *later]
            assert pick(everything) != candidate[3]
            assert pick([*before, *later]) == pick(everything)


def test_columns_keep_the_seed_head_and_mem_order() -> None:
    rows = [best_row(rec("default", 64, Status.OK, 50.0, n_dev=11), 3)]
    cols = columns(rows, SEED_HEAD, ("reason", "trials"), rest=False)
    assert cols[:6] == list(SEED_HEAD)
    assert cols[6:17] == [f"max_mem{i}" for i in range(11)]
    assert cols[17:] == ["reason", "trials"]  # only what the tail names: no stray keys


def test_merge_replaces_same_case_and_hardware_keeps_others() -> None:
    cpu = {"gpu_name": "cpu", "n_gpus": "2"}
    old = [
        {"case": "a", **cpu, "num_envs": "64", "finished_at": "2026-01-01T00:00:00+00:00"},
        {"case": "b", **cpu, "num_envs": "32"},
    ]
    new = [
        {"case": "a", **cpu, "num_envs": "48", "finished_at": "2026-01-02T00:00:00+00:00"},
        {"case": "a", "gpu_name": "H100", "n_gpus": "1", "num_envs": "256"},
    ]
    merged = [(r["case"], r["gpu_name"], r["num_envs"]) for r in merge_rows(old, new)]
    assert merged == [("a", "H100", "256"), ("a", "cpu", "48"), ("b", "cpu", "32")]


def hw(status: str = "ok", at: str = "2026-01-01T00:00:00+00:00", e: str = "64", **more: str) -> dict[str, str]:
    return {
        "case": "a",
        "gpu_name": "NVIDIA GeForce RTX 4090",
        "gpu_mem_total": "24564",
        "n_gpus": "2",
        "status": status,
        "finished_at": at,
        "num_envs": e,
        "phase": "probe",
        **more,
    }


@pytest.mark.parametrize(
    ("rows", "winner"),
    [
        ([hw(status="oom_or_nccl", at="2026-03-01T00:00:00+00:00", e="1"), hw(status="ok", e="2")], "2"),
        ([hw(e="1", phase="confirm"), hw(e="2", at="2026-03-01T00:00:00+00:00")], "1"),
        ([hw(e="1", at="2026-01-01T10:00:00+02:00"), hw(e="2", at="2026-01-01T09:00:00Z")], "2"),
        ([hw(e="1", at=""), hw(e="2", at="not a time"), hw(e="3", at="2025-12-31T23:59:59")], "3"),
        ([hw(e="48"), hw(e="40")], "48"),
        ([hw(host="b"), hw(host="a")], "64"),
    ],
    ids=[
        "ok-beats-non-ok",
        "confirm-beats-probe",
        "newer-finished-at-in-utc",
        "unreadable-time-is-oldest",
        "larger-num-envs",
        "full-tie-by-row-text",
    ],
)
def test_merge_rule_picks_the_same_winner_in_every_input_order(rows: list[dict[str, str]], winner: str) -> None:
    outcomes = set()
    for order in itertools.permutations(rows):
        for cut in range(len(order) + 1):
            merged = merge_rows(order[:cut], order[cut:])
            assert len(merged) == 1
            outcomes.add(tuple(sorted(merged[0].items())))
    assert len(outcomes) == 1
    assert merge_rows(rows, [])[0]["num_envs"] == winner


def test_rows_of_one_case_on_different_hardware_coexist() -> None:
    rows = [hw(), hw(gpu_name="NVIDIA H100 80GB HBM3", gpu_mem_total="81559"), hw(n_gpus="1"), hw(gpu_mem_total="614")]
    assert len(merge_rows(rows, rows)) == 4


def test_best_row_carries_its_provenance(tmp_path: Path) -> None:
    info = {
        "gpu_name": "cpu",
        "gpu_mem_total": "614",
        "n_gpus": "2",
        "driver": "",
        "torch": "2.13.0+cpu",
        "host": "vm",
        "workload_version": "6527917abcde",
        "sweep": "s1",
        "finished_at": "2026-01-01T00:00:00+00:00",
    }
    write_best(tmp_path / "best_by_case.tsv", [best_row(rec("default", 64, Status.OK, 50.0), 3) | info])
    row = read_tsv(tmp_path / "best_by_case.tsv")[0]
    assert {k: row[k] for k in info} == info
    assert row["trials"] == "3"


def test_trials_tsv_one_row_per_trial(tmp_path: Path) -> None:
    records = [rec("default", 256, Status.OOM_OR_NCCL), rec("default", 128, Status.OK, 33.0)]
    write_trials(tmp_path / "trials.tsv", records)
    rows = read_tsv(tmp_path / "trials.tsv")
    got = [(r["num_envs"], r["status"], r["reason"]) for r in rows]
    assert got == [("256", "oom_or_nccl", "host_oom"), ("128", "ok", "")]
    assert rows[1]["min_avg_util"] == "33" and rows[0]["min_avg_util"] == ""


def test_an_unmeasured_trial_never_becomes_the_pick_by_figures() -> None:
    """It survived (status `unmeasured`) but has no window figures that count: a smaller measured rung is the
    pick, and with nothing measured there is no pick."""
    survived = replace(rec("default", 128, Status.UNMEASURED, 80.0), reason=Reason.FEW_POINTS)
    measured = rec("default", 64, Status.OK, 50.0)
    for objective in ("min_avg_util", "samples_per_s"):
        assert objective_value(survived, objective) is None
        got = best([survived, measured], objective)
        assert got is not None and got.num_envs == 64
        assert best([survived], objective) is None
