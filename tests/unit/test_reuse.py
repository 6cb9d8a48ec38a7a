"""Which trials of earlier sweeps answer for this sweep's: `reuse.pick` and `reuse.identity` (pure).

End to end (a second sweep that launches nothing, another cap that launches again): tests/e2e/test_sweep_e2e.py.
"""

from __future__ import annotations

import dataclasses
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.core.spec import Launcher, ProgressKind, TrialSpec
from ladder.settings.config import MeasureConf, WorkloadConf
from ladder.storage import reuse

H100 = {
    "device": "cuda",
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_mem_total": "81559",
    "n_gpus": "2",
    "driver": "580.159.04",
    "torch": "2.13.0",
    "workload_version": "abc123",
    "host": "node1",
    "conditions": "c0",
}


def rec(
    profile: str,
    rung: int,
    status: Status,
    *,
    config: str = "cfg",
    when: str = "2026-11-26T01:00:00+00:00",
    phase: Phase = Phase.PROBE,
    **info: str,
) -> TrialRecord:
    reason = {Status.OK: Reason.NONE, Status.OOM_OR_NCCL: Reason.CUDA_OOM}.get(status, Reason.ERROR)
    return TrialRecord(
        "amp_humanoid",
        "amp",
        profile,
        rung,
        phase,
        status,
        reason,
        "",
        {"samples_per_s": 1.0},
        {**H100, "config_sha": config, "finished_at": when, "sweep": "old", **info},
    )


def wanted(*keys: tuple[str, int], config: str = "cfg", **machine: str) -> dict[tuple[str, int], str]:
    return {k: reuse.identity("amp_humanoid", config, {**H100, **machine}) for k in keys}


def test_the_same_trial_on_the_same_hardware_is_reused() -> None:
    earlier = [rec("default", 4096, Status.OOM_OR_NCCL), rec("default", 2048, Status.OK)]
    got = reuse.pick(earlier, wanted(("default", 4096), ("default", 2048)), have=set())
    assert [(r.num_envs, r.status) for r in got] == [(4096, Status.OOM_OR_NCCL), (2048, Status.OK)]


def test_other_hardware_code_or_configuration_is_not() -> None:
    earlier = [rec("default", 2048, Status.OK)]
    assert reuse.pick(earlier, wanted(("default", 2048), gpu_name="NVIDIA H200"), set()) == []
    assert reuse.pick(earlier, wanted(("default", 2048), workload_version="def456"), set()) == []
    assert reuse.pick(earlier, wanted(("default", 2048), config="other"), set()) == []
    assert reuse.pick(earlier, wanted(("hiutil", 2048)), set()) == []  # another profile


def test_the_host_matters_on_a_cpu_only() -> None:
    cpu = {"device": "cpu", "host": "node1"}
    earlier = [rec("default", 64, Status.OK, **cpu)]
    assert reuse.pick(earlier, wanted(("default", 64), **cpu), set()) != []
    assert reuse.pick(earlier, wanted(("default", 64), device="cpu", host="node2"), set()) == []
    assert reuse.pick([rec("default", 64, Status.OK)], wanted(("default", 64), host="node2"), set()) != []  # GPU


def test_only_facts_that_hold_later_are_reused() -> None:
    keys = wanted(("default", 2048))
    for status in (Status.ERROR, Status.TIMEOUT, Status.RETRY, Status.INTERRUPTED):
        assert reuse.pick([rec("default", 2048, status)], keys, set()) == [], status
    assert reuse.pick([rec("default", 2048, Status.OK, phase=Phase.CONFIRM)], keys, set()) == []
    (failed,) = reuse.pick([rec("default", 2048, Status.OOM_OR_NCCL, phase=Phase.CONFIRM)], keys, set())
    assert failed.status is Status.OOM_OR_NCCL
    copy = reuse.as_reused(rec("default", 2048, Status.OK), "mid", "")
    assert reuse.pick([copy], keys, set()) == []  # a copy is never reused again: its original is


def test_a_failure_beats_a_success_then_the_newest_wins_and_what_ran_here_stays() -> None:
    keys = wanted(("default", 2048))
    ok_new = rec("default", 2048, Status.OK, when="2026-11-26T03:00:00+00:00")
    oom_old = rec("default", 2048, Status.OOM_OR_NCCL, when="2026-11-26T01:00:00+00:00")
    assert [r.status for r in reuse.pick([ok_new, oom_old], keys, set())] == [Status.OOM_OR_NCCL]
    ok_old = rec("default", 2048, Status.OK, when="2026-11-26T02:00:00+00:00")
    assert reuse.pick([ok_old, ok_new], keys, set())[0] is ok_new
    assert reuse.pick([ok_new], keys, have={("default", 2048)}) == []


def test_the_copy_says_where_it_came_from_and_joins_this_sweep() -> None:
    original = rec("default", 2048, Status.OK, trial_dir="trials/amp_humanoid/default_e2048_probe_1")
    copy = reuse.as_reused(original, "new", "trials/amp_humanoid/default_e2048_probe_2")
    assert copy.info["trial_dir"] == "trials/amp_humanoid/default_e2048_probe_2"  # this sweep's own folder
    assert (copy.info["sweep"], copy.info["reused_from"], copy.figures) == ("new", "old#0", original.figures)
    assert copy.info["why"] == "reused from old#0"


def test_the_fingerprint_follows_argv_env_and_files() -> None:
    spec = TrialSpec(argv=("python", "-m", "x", "--num-envs", "64"), env={"A": "1"}, files={"agent.yaml": "a: 1"})
    same = TrialSpec(argv=spec.argv, env={"A": "1"}, files={"agent.yaml": "a: 1"}, info={"ignored": "yes"})
    assert reuse.fingerprint(spec) == reuse.fingerprint(same)
    for other in (
        TrialSpec(argv=spec.argv, env={"A": "2"}, files=spec.files),
        TrialSpec(argv=spec.argv, env=spec.env, files={"agent.yaml": "a: 2"}),
        TrialSpec(argv=(*spec.argv[:-1], "128"), env=spec.env, files=spec.files),
    ):
        assert reuse.fingerprint(other) != reuse.fingerprint(spec)


def test_the_fingerprint_follows_how_progress_is_read() -> None:
    spec = TrialSpec(argv=("train",), env={}, progress_kind=ProgressKind.REGEX, progress_regex=r"it (?P<iter>\d+)")
    for other in (
        dataclasses.replace(spec, progress_regex=r"step (?P<iter>\d+)"),
        dataclasses.replace(spec, progress_file="log.txt"),
        dataclasses.replace(spec, progress_kind=ProgressKind.JSONL),
        dataclasses.replace(spec, launcher=Launcher.DIRECT),
    ):
        assert reuse.fingerprint(other) != reuse.fingerprint(spec)


def conditions(**change: object) -> str:
    workload = dataclasses.replace(WorkloadConf(), **{k: v for k, v in change.items() if hasattr(WorkloadConf, k)})
    measure = dataclasses.replace(MeasureConf(), **{k: v for k, v in change.items() if hasattr(MeasureConf, k)})
    return reuse.conditions(workload, measure)["conditions"]


@pytest.mark.parametrize(
    "change",
    [
        {"host_mem_limit_gb": 0.5},
        {"emulate_gpu_mem_gb": 0.6},
        {"window_s": 30.0},
        {"warmup_iters": 5},
        {"stable_tol": 0.5},
        {"sample_hz": 5.0},
        {"repeats": 3},
        {"stall_timeout_s": 30.0},
    ],
    ids=["cgroup_cap", "card_cap", "window", "warmup", "rule", "sampling", "repeats", "stall"],
)
def test_a_trial_under_another_cap_or_measure_rule_is_not_reused(change: dict[str, object]) -> None:
    assert conditions(**change) != conditions()
    earlier = [
        rec("default", 2048, Status.OOM_OR_NCCL, conditions=conditions(**change)),
        rec("default", 1024, Status.OK, conditions=conditions(**change)),
    ]
    keys = wanted(("default", 2048), ("default", 1024), conditions=conditions())
    assert reuse.pick(earlier, keys, set()) == []
    same = wanted(("default", 2048), ("default", 1024), conditions=conditions(**change))
    assert [r.num_envs for r in reuse.pick(earlier, same, set())] == [2048, 1024]


def test_how_long_a_stop_may_take_changes_nothing() -> None:
    assert conditions(kill_grace_s=1.0) == conditions()


def test_a_trial_recorded_before_its_conditions_is_never_reused() -> None:
    old = rec("default", 2048, Status.OOM_OR_NCCL)
    del old.info["conditions"]
    assert reuse.pick([old], wanted(("default", 2048), conditions=conditions()), set()) == []
    assert reuse.pick([old], wanted(("default", 2048), conditions=""), set()) == []


def test_the_caps_are_recorded_as_columns() -> None:
    got = reuse.conditions(dataclasses.replace(WorkloadConf(), host_mem_limit_gb=0.5), MeasureConf())
    assert (got["host_mem_limit_gb"], got["emulate_gpu_mem_gb"]) == ("0.5", "")


def test_copied_evidence_stands_alone_and_is_whole_or_absent(tmp_path: Path) -> None:
    source = tmp_path / "old" / "trial"
    (source / "sub").mkdir(parents=True)
    (source / "stdout.log").write_text("out")
    (source / "sub" / "rank0.json").write_text("{}")
    dest = tmp_path / "new" / "trials" / "c" / "default_e64_probe_1"
    assert reuse.copy_evidence(source, dest)
    shutil.rmtree(tmp_path / "old")
    assert (dest / "stdout.log").read_text() == "out" and (dest / "sub" / "rank0.json").is_file()
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]  # no temporary folder left
    assert not reuse.copy_evidence(tmp_path / "gone", tmp_path / "new" / "x")
    assert not (tmp_path / "new" / "x").exists()


# ---- a memory failure under a larger emulated card carries to a smaller one (`reuse.carried`)


def shapes(*keys: tuple[str, int], bare: str = "bare", **machine: str) -> dict[tuple[str, int], str]:
    return {k: reuse.shape("amp_humanoid", bare, {**H100, "host_mem_limit_gb": "", **machine}) for k in keys}


def under(card: str, status: Status = Status.OOM_OR_NCCL, rung: int = 4096, **info: str) -> TrialRecord:
    return rec(
        "default", rung, status, **{"shape_sha": "bare", "emulate_gpu_mem_gb": card, "host_mem_limit_gb": "", **info}
    )


def test_a_memory_failure_under_a_larger_card_carries_to_a_smaller_one_only() -> None:
    keys = shapes(("default", 4096))
    (got,) = reuse.carried([under("40")], keys, 24.0, set())
    assert (got.num_envs, got.status) == (4096, Status.OOM_OR_NCCL)
    assert reuse.carried([under("40")], keys, 40.0, set()) != []  # the same card: it needed more than that
    assert reuse.carried([under("16")], keys, 24.0, set()) == []  # a smaller card says nothing of ours
    assert reuse.carried([under("40")], keys, 24.0, {("default", 4096)}) == []  # what ran here stays
    assert reuse.carried([under("")], keys, 24.0, set()) == []  # no emulated card: nothing to compare


def test_only_a_sure_memory_failure_of_the_same_shape_carries() -> None:
    keys = shapes(("default", 4096))
    assert reuse.carried([under("40", Status.OK)], keys, 24.0, set()) == []
    assert reuse.carried([under("40", confidence="low")], keys, 24.0, set()) == []  # weak evidence
    nccl = dataclasses.replace(under("40"), reason=Reason.NCCL_TIMEOUT)
    assert reuse.carried([nccl], keys, 24.0, set()) == []  # not memory: the rung may run under ours
    copy = reuse.as_reused(under("40"), "mid", "")
    assert reuse.carried([copy], keys, 24.0, set()) == []  # a copy: its original carries
    assert reuse.carried([under("40", shape_sha="")], keys, 24.0, set()) == []  # recorded before shapes were
    assert reuse.carried([under("40")], shapes(("default", 4096), bare="other"), 24.0, set()) == []
    assert reuse.carried([under("40")], shapes(("default", 4096), torch="2.14.0"), 24.0, set()) == []
    assert reuse.carried([under("40")], shapes(("default", 4096), host_mem_limit_gb="8"), 24.0, set()) == []
    assert reuse.carried([under("40")], shapes(("default", 4096), gpu_mem_total="24576"), 24.0, set()) != []  # ours
    assert reuse.carried([under("40")], shapes(("hiutil", 4096)), 24.0, set()) == []  # another profile


def test_the_closest_card_answers_and_the_copy_says_why() -> None:
    keys = shapes(("default", 4096), ("default", 2048))
    old = under("80", when="2026-11-26T05:00:00+00:00")
    near = under("40", when="2026-11-26T01:00:00+00:00")
    small = under("40", rung=2048)
    got = reuse.carried([old, near, small], keys, 24.0, set())
    assert got == [near, small]  # highest rung first, each from the smallest larger card
    why = reuse.carried_why(near, 24.0)
    assert why == "ran out of memory under a larger card (40 GB, old#0): it cannot fit under 24 GB"
    copy = reuse.as_reused(near, "new", "", why)
    assert (copy.status, copy.info["why"], copy.info["emulate_gpu_mem_gb"]) == (Status.OOM_OR_NCCL, why, "40")


def noisy(when: str, sd: float = 0.03, **info: str) -> TrialRecord:
    r = rec("default", 64, Status.OK, when=when, **info)
    return dataclasses.replace(r, figures={"samples_per_s": 1.0, "step_sd_frac": sd, "step_df": 3.0})


def test_earlier_windows_of_the_same_source_and_recent_enough_lend_their_step_noise_newest_first() -> None:
    """`noise_windows`: the case's whole windows on the same trainer, hardware, code and host (any profile, rung,
    card or measure rule), finished within the hours asked, newest first; never a copy, a failure, a window
    without its step noise, or one this sweep has as a copy already."""
    now = datetime(2026, 11, 26, 3, 0, tzinfo=timezone.utc)
    mine = reuse.noise_source("amp_humanoid", {**H100, "gpu_mem_total": "24000", "conditions": "other"})
    new, old = noisy("2026-11-26T02:30:00+00:00", 0.02), noisy("2026-11-26T01:30:00+00:00", 0.04, sweep="older")
    other_rung = dataclasses.replace(noisy("2026-11-26T02:00:00+00:00"), profile="hiutil", num_envs=8)
    assert reuse.noise_windows([old, new, other_rung], mine, now, 2.0) == [new.figures, other_rung.figures, old.figures]
    assert reuse.noise_windows([old, new], mine, now, 1.0) == [new.figures]  # 1.5 h ago: too old
    assert reuse.noise_windows([old, new], mine, now, None) == reuse.noise_windows([new], mine, now, 0) == []
    elsewhere = [
        noisy("2026-11-26T02:30:00+00:00", host="node2"),
        noisy("2026-11-26T02:30:00+00:00", workload_version="def456"),
        noisy("2026-11-26T02:30:00+00:00", gpu_name="NVIDIA A100"),
        dataclasses.replace(new, case="other_case"),
        dataclasses.replace(new, status=Status.OOM_OR_NCCL),
        dataclasses.replace(new, figures={"samples_per_s": 1.0}),
        reuse.as_reused(new, "mid", ""),
        noisy("2026-11-26T03:30:00+00:00"),  # finished after now: not a window before this sweep's
        noisy("not a time"),
    ]
    assert reuse.noise_windows(elsewhere, mine, now, 2.0) == []
    copied_here = reuse.as_reused(new, "this", "")
    assert reuse.noise_windows([new, old], mine, now, 2.0, have=[copied_here]) == [old.figures]
