"""TSV columns, the best pick, merging, and the seed's own reader."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ladder.records import Phase, Reason, Status, TrialRecord
from ladder.results import SEED_HEAD, best, best_row, columns, merge_rows, read_tsv, write_best, write_trials

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


def rec(variant: str, num_envs: int, status: Status, util: float | None = None, n_dev: int = 2, **info: str) -> TrialRecord:
    figures: dict[str, float] = {f"max_mem{i}": 1000.0 + i for i in range(n_dev)}
    if util is not None:
        figures.update({"min_avg_util": util, "samples_per_s": 100.0 * num_envs / 64})
    return TrialRecord("amp_pi_plus", "amp", variant, num_envs, Phase.PROBE, status,
                       Reason.NONE if status is Status.OK else Reason.HOST_OOM, "", figures,
                       {"gpu_name": "cpu", "n_gpus": str(n_dev), **info})  # fmt: skip


def test_best_by_objective_ties_to_larger_num_envs() -> None:
    records = [rec("default", 64, Status.OK, 50.0), rec("hiutil", 48, Status.OK, 50.0), rec("hiutil", 128, Status.OOM_OR_NCCL)]
    assert best(records, "min_avg_util").num_envs == 64
    assert best(records, "samples_per_s").num_envs == 64
    assert best([rec("default", 64, Status.OK, 40.0), rec("hiutil", 48, Status.OK, 55.0)], "min_avg_util").variant == "hiutil"
    assert best([rec("hiutil", 128, Status.OOM_OR_NCCL)], "min_avg_util") is None


def test_columns_keep_the_seed_head_and_mem_order() -> None:
    rows = [best_row(rec("default", 64, Status.OK, 50.0, n_dev=11), 3)]
    cols = columns(rows, SEED_HEAD, ("reason", "trials"), rest=False)
    assert cols[:6] == list(SEED_HEAD)
    assert cols[6:17] == [f"max_mem{i}" for i in range(11)]
    assert cols[17:] == ["reason", "trials"]  # only what the tail names: no stray keys


def test_merge_replaces_same_case_and_hardware_keeps_others() -> None:
    old = [{"case": "a", "gpu_name": "cpu", "n_gpus": "2", "num_envs": "64"},
           {"case": "b", "gpu_name": "cpu", "n_gpus": "2", "num_envs": "32"}]  # fmt: skip
    new = [{"case": "a", "gpu_name": "cpu", "n_gpus": "2", "num_envs": "48"},
           {"case": "a", "gpu_name": "H100", "n_gpus": "1", "num_envs": "256"}]  # fmt: skip
    merged = merge_rows(old, new)
    assert [(r["case"], r["gpu_name"], r["num_envs"]) for r in merged] == [("a", "H100", "256"), ("a", "cpu", "48"), ("b", "cpu", "32")]


def test_written_tsv_is_read_by_the_seed_one_liner(tmp_path: Path) -> None:
    sweep = tmp_path / "output" / "train" / "case_gpu_bench_20260101_000000"
    write_best(sweep / "best_by_case.tsv", [best_row(rec("hiutil", 38, Status.OK, 51.54), 5)])
    write_best(sweep / "best_by_case.tsv", [best_row(rec("default", 8, Status.OK, 20.0, n_dev=1) , 2) | {"case": "x"}])
    out = subprocess.run([sys.executable, "-c", SEED_ONE_LINER], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "x amp util 20 max_mem 1000 variant default e 8",
        "amp_pi_plus amp util 51.54 max_mem 1001 variant hiutil e 38",
    ]


def test_trials_tsv_one_row_per_trial(tmp_path: Path) -> None:
    records = [rec("default", 256, Status.OOM_OR_NCCL), rec("default", 128, Status.OK, 33.0)]
    write_trials(tmp_path / "trials.tsv", records)
    rows = read_tsv(tmp_path / "trials.tsv")
    assert [(r["num_envs"], r["status"], r["reason"]) for r in rows] == [("256", "oom_or_nccl", "host_oom"), ("128", "ok", "")]
    assert rows[1]["min_avg_util"] == "33" and rows[0]["min_avg_util"] == ""
