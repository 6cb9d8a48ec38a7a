"""The memory model kept across sweeps: lines per device, bounds, intervals, every card's answer and basis, each
cause of `unreliable`, the first launches on another card, and the reading of stored trials into observations."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ladder.core.memory import cards, first, model
from ladder.core.memory.cards import Answer, Basis
from ladder.core.memory.model import Observation, fit
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.storage import history
from ladder.storage.tsv import read_tsv
from ladder.sweep import cards as sweep_cards
from ladder.ui.report.cards import draw_cards

LADDER = [4096, 2048, 1024, 512, 256, 128, 64]
GB = 1024.0


def line(fixed: float, per_env: float, *knobs: int, cap: float = 8 * GB, noise: tuple[float, ...] = ()) -> list:
    """Fits of one device on a line (MiB), with optional noise per point."""
    extra = noise or (0.0,) * len(knobs)
    return [Observation(k, cap, (fixed + per_env * k + e,)) for k, e in zip(knobs, extra, strict=True)]


def oom(knob: int, cap: float = 8 * GB) -> Observation:
    return Observation(knob, cap, (), fits=False, label=f"s#{knob}")


# ---------------------------------------------------------------- the fit


def test_points_on_a_line_give_its_fixed_part_and_part_per_env() -> None:
    m = fit(line(1000, 2.0, 128, 256, 512))
    (ln,) = m.lines
    assert m.unreliable == ""
    assert ln.fixed_mb == pytest.approx(1000) and ln.per_unit_mb == pytest.approx(2.0)
    assert ln.resid_sd_mb == pytest.approx(0.0, abs=1e-9)
    assert m.peak(1024)[0] == pytest.approx(3048)


def test_two_points_have_no_residual_and_the_floor_interval() -> None:
    m = fit(line(1000, 2.0, 128, 512))
    peak, half, _ = m.peak(2048)
    assert peak == pytest.approx(5096)
    assert half == pytest.approx(model.FLOOR_FRAC * 5096)


def test_the_interval_is_students_t_on_the_residuals_and_widens_away_from_the_points() -> None:
    m = fit(line(1000, 2.0, 128, 256, 512, 1024, noise=(10, -10, -10, 10)))
    (ln,) = m.lines
    assert ln.n == 4 and ln.resid_sd_mb > 0
    near, far = ln.half_width(512), ln.half_width(4096)
    assert far > near
    spread = (1 + 1 / 4 + (4096 - ln.mean_knob) ** 2 / ln.sxx) ** 0.5
    assert far == pytest.approx(max(model.t975(2) * ln.resid_sd_mb * spread, model.FLOOR_FRAC * ln.predict(4096)))


def test_student_t_table_and_its_tail() -> None:
    assert model.t975(1) == pytest.approx(12.706)
    assert model.t975(10) == pytest.approx(2.228)
    assert model.t975(30) == pytest.approx(2.042, abs=0.002)


def test_each_device_has_its_own_line_and_the_largest_decides() -> None:
    obs = [Observation(k, 8 * GB, (1500 + 2.0 * k, 1000 + 1.5 * k)) for k in (128, 256, 512)]
    m = fit(obs)
    assert [ln.device for ln in m.lines] == [0, 1]
    assert m.lines[0].fixed_mb == pytest.approx(1500) and m.lines[1].per_unit_mb == pytest.approx(1.5)
    peak, _, device = m.peak(1024)
    assert (device, peak) == (0, pytest.approx(3548))


def test_a_failure_above_the_line_is_a_consistent_bound() -> None:
    m = fit([*line(1000, 2.0, 128, 256, 512), oom(4096)])  # 4096 needs 9192 MiB > 8192: consistent
    assert m.unreliable == "" and m.bounds == (oom(4096),)


# ---------------------------------------------------------------- each cause of unreliable


@pytest.mark.parametrize(
    ("obs", "why"),
    [
        pytest.param(line(1000, 2.0, 256), "too few points: 1 rung(s)", id="one-rung"),
        pytest.param(line(1000, 2.0, 256, 256), "too few points: 1 rung(s)", id="one-rung-twice"),
        pytest.param([oom(512), oom(256)], "too few points: 0 rung(s)", id="only-failures"),
        pytest.param(line(1000, 2.0, 480, 512), "points too close: rungs 480..512", id="too-close"),
        pytest.param(
            [Observation(k, 8 * GB, (p,)) for k, p in ((128, 1000), (256, 1100), (512, 4000), (1024, 4100))],
            "a step in memory",
            id="step",
        ),
        pytest.param(line(3000, -1.0, 128, 512), "memory falls as the knob grows", id="falling"),
        pytest.param([*line(1000, 2.0, 128, 256, 512), oom(1024)], "a failure contradicts the line", id="bound"),
        pytest.param(
            [Observation(256, 8 * GB, (6000,)), Observation(256, 16 * GB, (12000,)), *line(0, 1, 64, 128)],
            "allocator takes what the card offers: 256 used 6000 of 8192 MiB and 12000 of 16384",
            id="allocator",
        ),
    ],
)
def test_unreliable_says_why(obs: list[Observation], why: str) -> None:
    m = fit(obs)
    assert why in m.unreliable
    assert cards.predict(m, LADDER, 24, 0.05) == Answer(24, None, Basis.UNRELIABLE, m.unreliable)


def test_jax_preallocation_is_unreliable_and_names_the_setting() -> None:
    m = fit(line(1000, 2.0, 128, 256, 512), advice=history._jax_advice())
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in m.unreliable and m.lines == ()


def test_the_same_rung_on_two_cards_with_the_same_peak_is_no_allocator_sign() -> None:
    same = [Observation(256, 8 * GB, (1512,)), Observation(256, 16 * GB, (1520,)), *line(1000, 2.0, 128, 512)]
    assert fit(same).unreliable == ""


# ---------------------------------------------------------------- every card's answer


def test_prediction_is_the_largest_rung_under_the_headroom() -> None:
    m = fit(line(1000, 2.0, 128, 256, 512, cap=24 * GB))  # peak = 1000 + 2 n MiB
    (a8,) = cards.answers(m, LADDER, [8], 0.05)  # 0.95 * 8192 = 7782: 2048 needs 5096, 4096 needs 9192
    assert (a8.rung, a8.basis, a8.peak_mb, a8.device) == (2048, Basis.PREDICTED, pytest.approx(5096), 0)
    assert "4096 at 9192" in a8.reason
    (a4,) = cards.answers(m, LADDER, [4], 0.05)  # 3891 allowed: 1024 needs 3048
    assert a4.rung == 1024
    (tight,) = cards.answers(m, LADDER, [5], 0.40)  # 3072 allowed: 1024 needs 3048 still
    assert tight.rung == 1024
    (tighter,) = cards.answers(m, LADDER, [5], 0.41)
    assert tighter.rung == 512


def test_beyond_the_ladder_both_ways() -> None:
    m = fit(line(1000, 2.0, 128, 256, 512, cap=4 * GB))
    top = cards.predict(m, LADDER, 80, 0.05)
    assert (top.rung, top.basis) == (4096, Basis.BEYOND) and "even the top rung fits" in top.reason
    bottom = cards.predict(m, LADDER, 1, 0.05)
    assert (bottom.rung, bottom.basis) == (None, Basis.BEYOND) and "even the bottom rung does not fit" in bottom.reason


def test_a_failure_on_a_card_this_large_rules_its_rung_and_those_above_out() -> None:
    fits = line(1000, 6.5, 128, 256, 512, cap=16 * GB, noise=(30, -60, 30))  # 1024: 7656 MiB, a wide interval
    m = fit([*fits, oom(1024, cap=8 * GB)])
    peak, half, _ = m.peak(1024)
    assert m.unreliable == "" and peak < 0.95 * 8 * GB < 8 * GB < peak + half  # the bound is within the interval
    assert cards.predict(m, LADDER, 8, 0.05).rung == 512  # the line alone says 1024 fits; its failure says not
    assert cards.predict(fit(fits), LADDER, 8, 0.05).rung == 1024


def test_measured_on_this_card_and_verified_when_the_other_cards_agree() -> None:
    other = line(1000, 2.0, 128, 256, cap=24 * GB)
    here = [Observation(2048, 8 * GB, (5100,)), oom(4096)]
    (a,) = cards.answers(fit(other + here), LADDER, [8], 0.05)
    assert (a.rung, a.basis) == (2048, Basis.VERIFIED)
    disagreeing = [Observation(1024, 8 * GB, (3050,)), oom(2048)]  # the line said 2048 fits: measured, not verified
    (b,) = cards.answers(fit(other + disagreeing, ""), LADDER, [8], 0.05)
    assert (b.rung, b.basis, b.reason) == (1024, Basis.MEASURED, "1024 fitted on this card and 2048 did not")


def test_measured_needs_the_rung_above_failed_or_the_top() -> None:
    only_fit = [Observation(512, 8 * GB, (2024,)), Observation(128, 8 * GB, (1256,))]
    (a,) = cards.answers(fit(only_fit), LADDER, [8], 0.05)
    assert a.basis is Basis.PREDICTED  # 1024 was never tried there: the model answers
    top = [Observation(4096, 80 * GB, (9192,))]
    (b,) = cards.answers(fit(top), LADDER, [80], 0.05)
    assert (b.rung, b.basis, b.reason) == (4096, Basis.MEASURED, "the top rung fitted on this card")


def test_rows_and_console_lines() -> None:
    m = fit(line(1000, 2.0, 128, 256, 512, cap=24 * GB))
    found = cards.answers(m, LADDER, [8, 80], 0.05)
    r8, r80 = cards.rows("amp_pi_plus", "default", found)
    assert list(r8)[:5] == ["case", "profile", "card_gb", "num_envs", "basis"]
    assert (r8["card_gb"], r8["num_envs"], r8["basis"], r8["peak_mb"]) == ("8", "2048", "predicted", "5096")
    assert float(r8["peak_lo_mb"]) < 5096 < float(r8["peak_hi_mb"])
    assert r80["basis"] == "beyond the ladder"
    assert cards.rows("c", "p", found, knob="batch")[0]["knob"] == "batch"
    lines = cards.console_lines("amp_pi_plus", "default", found)
    assert len(lines) == 2 and "8 GB" in lines[0] and "e2048" in lines[0] and "predicted" in lines[0]


# ---------------------------------------------------------------- the first launches


@pytest.mark.parametrize(
    ("found", "rungs", "why"),
    [
        pytest.param(Answer(8, 2048, Basis.PREDICTED, "r"), (2048, 4096), "2048 is predicted to fit 8 GB", id="mid"),
        pytest.param(Answer(80, 4096, Basis.BEYOND, "r"), (4096,), "the top rung", id="top"),
        pytest.param(Answer(1, None, Basis.BEYOND, "r"), (64,), "even 64 is predicted not to fit", id="bottom"),
        pytest.param(Answer(8, None, Basis.UNRELIABLE, "too few"), (), "unreliable (too few)", id="unreliable"),
        pytest.param(None, (), "no memory model", id="none"),
        pytest.param(Answer(8, 100, Basis.PREDICTED, "r"), (), "not on this ladder", id="off-ladder"),
    ],
)
def test_opening(found: Answer | None, rungs: tuple[int, ...], why: str) -> None:
    got = first.opening(found, LADDER)
    assert got.rungs == rungs and why in got.why


# ---------------------------------------------------------------- stored trials as observations


def record(status: Status, num_envs: int, figures: dict, reason: Reason = Reason.NONE, **info: str) -> TrialRecord:
    base = {"sweep": "s", "device": "cpu", "workload": "proxy", "host": "h", "nproc": "1", "knob": "num_envs"}
    return TrialRecord(
        "amp_pi_plus", "amp", "default", num_envs, Phase.PROBE, status, reason, "", figures, base | info, 3
    )


def only(rec: TrialRecord, notes: history.Notes | None = None) -> Observation | None:
    """The trial's one observation (None where it has none)."""
    found = history.observations(rec, notes or history.Notes())
    assert len(found) <= 1
    return found[0][1] if found else None


def test_the_proxys_emulated_card_the_cgroup_and_the_gpu() -> None:
    proxy = record(Status.OK, 64, {"cap_mb": 614.0, "cap_used_mb": 487.5, "max_mem0": 673.0}, emulate_gpu_mem_gb="0.6")
    assert only(proxy) == Observation(64, 614.0, (487.5,), True, "s#3")
    per_rank = only(proxy, history.Notes((490.0, 450.0)))
    assert per_rank is not None and per_rank.peaks_mb == (490.0, 450.0)
    failed = record(Status.OOM_OR_NCCL, 256, {"max_mem0": 673.0}, Reason.HOST_OOM, emulate_gpu_mem_gb="0.6")
    assert only(failed) == Observation(256, 614, (), False, "s#3")
    (group,) = history.groups(proxy)
    assert group.cap == history.Cap.EMULATED and history.groups(failed) == [group]

    sb3 = {"workload": "command", "host_mem_limit_gb": "2"}
    cg = record(Status.OK, 8, {"cgroup_peak_mb": 900.0, "cgroup_limit_mb": 2048.0, "max_mem0": 700.0}, **sb3)
    assert only(cg) == Observation(8, 2048.0, (900.0,), True, "s#3")
    assert history.groups(cg) == history.groups(record(Status.OK, 8, {}, workload="command", host_mem_limit_gb="4"))

    gpu = {"device": "cuda", "source": "nvml", "gpu_mem_total": "24564", "workload": "command"}
    g = record(Status.OK, 512, {"max_mem0": 9000.0, "max_mem1": 8000.0}, **gpu)
    assert only(g) == Observation(512, 24564.0, (9000.0, 8000.0), True, "s#3")


def test_under_two_caps_a_fit_counts_for_both_and_a_failure_for_the_one_it_names() -> None:
    caps = {"emulate_gpu_mem_gb": "0.6", "host_mem_limit_gb": "1.0"}
    both = record(Status.OK, 64, {"cap_mb": 614.0, "cap_used_mb": 487.0, "cgroup_peak_mb": 507.2}, **caps)
    found = history.observations(both)
    assert [(g.cap, o.cap_mb, o.peaks_mb) for g, o in found] == [
        (history.Cap.EMULATED, 614.0, (487.0,)),
        (history.Cap.CGROUP, 1024.0, (507.2,)),
    ]
    card = record(Status.OOM_OR_NCCL, 128, {"cgroup_peak_mb": 635.1}, Reason.HOST_OOM, **caps)
    assert [(g.cap, o.cap_mb) for g, o in history.observations(card)] == [(history.Cap.EMULATED, 614)]
    killed = record(Status.OOM_OR_NCCL, 256, {"cgroup_limit_mb": 1024.0}, Reason.HOST_OOM, **caps)
    killed = replace(killed, evidence="memory cgroup t1 counted 1 OOM kill(s) (peak 1024 MiB)")
    assert [(g.cap, o.cap_mb) for g, o in history.observations(killed)] == [(history.Cap.CGROUP, 1024.0)]


def test_what_is_no_observation() -> None:
    card = {"emulate_gpu_mem_gb": "0.6"}
    assert only(record(Status.OK, 64, {"max_mem0": 600.0})) is None  # host RSS, no cap
    assert only(record(Status.ERROR, 64, {}, Reason.ERROR, **card)) is None
    assert only(record(Status.OOM_OR_NCCL, 64, {}, Reason.NCCL_ERROR, **card)) is None
    weak = record(Status.OOM_OR_NCCL, 64, {}, Reason.CUDA_OOM, confidence="low", **card)
    assert only(weak) is None
    copy = record(Status.OK, 64, {"cap_mb": 614.0, "cap_used_mb": 487.5}, reused_from="t#1", **card)
    assert only(copy) is None
    twin = replace(record(Status.OK, 64, {"cap_mb": 614.0, "cap_used_mb": 487.5}, **card), phase=Phase.PLACEMENT)
    assert only(twin) is None


def test_models_group_by_machine_and_profile() -> None:
    card = {"emulate_gpu_mem_gb": "0.6"}
    here = [record(Status.OK, k, {"cap_mb": 614.0, "cap_used_mb": 100 + k}, **card) for k in (64, 128)]
    there = [record(Status.OK, 64, {"cap_mb": 614.0, "cap_used_mb": 164.0}, host="other", **card)]
    found = history.models(here + there)
    assert len(found) == 2
    assert sorted(len(m.observations) for m in found.values()) == [1, 2]


def test_a_profile_of_one_point_takes_a_siblings_line_only_where_the_line_predicts_that_point() -> None:
    """hiutil's walk, seeded at default's pick, leaves one fit: where default's line predicts its peak there, the
    profile does not change memory and the line answers for it too, saying whose it is; where it does not (the
    profile holds more per env), hiutil keeps its `too few points`."""
    card = {"emulate_gpu_mem_gb": "0.6"}
    default = [record(Status.OK, k, {"cap_mb": 614.0, "cap_used_mb": 100.0 + k}, **card) for k in (64, 128)]
    same = replace(record(Status.OK, 64, {"cap_mb": 614.0, "cap_used_mb": 164.5}, **card), profile="hiutil")
    found = {g.profile: m for g, m in history.models([*default, same]).items()}
    assert found["hiutil"].lines == found["default"].lines and not found["hiutil"].unreliable
    (a,) = cards.answers(found["hiutil"], LADDER, [0.3], 0.02)
    assert (a.rung, a.basis) == (128, Basis.PREDICTED) and "default's line, which its 64 agrees with" in a.reason
    more = replace(record(Status.OK, 64, {"cap_mb": 614.0, "cap_used_mb": 300.0}, **card), profile="hiutil")
    found = {g.profile: m for g, m in history.models([*default, more]).items()}
    assert found["hiutil"].unreliable.startswith("too few points")


def test_a_jax_trainer_that_preallocates() -> None:
    assert history.jax_preallocates("python train_jax.py", {}, "")
    assert history.jax_preallocates("python train.py", {}, "INFO jax._src.xla_bridge: ...")
    assert not history.jax_preallocates("python train_jax.py", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, "")
    assert not history.jax_preallocates("python train.py", {}, "torch")


def test_rank_peaks_from_the_proxys_progress_lines() -> None:
    lines = [json.dumps({"cap_used_mb": [400.0, 300.0]}), "not json", json.dumps({"cap_used_mb": [380.0, 350.0]})]
    assert history.rank_peaks(lines) == (400.0, 350.0)
    assert history.rank_peaks([json.dumps({"iter": 1})]) == ()


def test_a_failure_on_a_larger_card_settles_the_rung_above_a_fit_here() -> None:
    obs = [Observation(128, 8 * GB, (1256,)), Observation(512, 16 * GB, (2024,)), oom(256, cap=16 * GB)]
    (a,) = cards.answers(fit(obs), LADDER, [8], 0.05)
    assert (a.rung, a.basis) == (128, Basis.MEASURED)  # 256 ran out under 16 GB: it cannot fit 8 GB either


# ---------------------------------------------------------------- the sweep's table, its file and its chart


def emulated(sweep: str, status: Status, num_envs: int, card_gb: float, used: float = 0.0) -> TrialRecord:
    figures = {"cap_mb": card_gb * 1024, "cap_used_mb": used} if used else {}
    reason = Reason.NONE if status is Status.OK else Reason.HOST_OOM
    return record(status, num_envs, figures, reason, emulate_gpu_mem_gb=f"{card_gb:g}", sweep=sweep)


def stored_trials() -> list[TrialRecord]:
    """Two sweeps of the proxy's memory line (355 + 2.08 MiB per env) under 0.8 and 1.2 GB cards."""
    return [
        emulated("a", Status.OOM_OR_NCCL, 256, 0.8),
        emulated("a", Status.OK, 128, 0.8, 620.0),
        emulated("b", Status.OOM_OR_NCCL, 512, 1.2),
        emulated("b", Status.OK, 256, 1.2, 886.0),
    ]


def test_the_sweeps_table_answers_for_its_groups_with_its_ladder_and_headroom(tmp_path: Path) -> None:
    settings = {"amp_pi_plus": {"ladder.rungs": [512, 256, 128, 64, 32], "mem_headroom_frac": 0.05}}
    table = sweep_cards.table("b", stored_trials(), settings, [0.6, 1.2])
    assert [(r["card_gb"], r["num_envs"], r["basis"], r["cap"]) for r in table.rows] == [
        ("0.6", "64", "predicted", "emulated card"),
        ("1.2", "256", "measured", "emulated card"),
    ]
    assert len(table.lines) == 2
    assert sweep_cards.table("other", stored_trials(), settings, [0.6]).rows == []  # no trial of that sweep
    sweep_cards.write(tmp_path / "cards.tsv", table.rows)
    assert read_tsv(tmp_path / "cards.tsv") == table.rows
    (png,) = draw_cards(table, tmp_path / "plots")
    assert png.name == "cards_amp_pi_plus_default.png" and png.stat().st_size > 0


def test_on_a_gpu_under_a_host_cgroup_a_cuda_oom_bounds_the_gpu() -> None:
    info = {
        "device": "cuda",
        "source": "nvml",
        "gpu_mem_total": "24564",
        "workload": "command",
        "host_mem_limit_gb": "8",
    }
    fits = record(Status.OK, 512, {"max_mem0": 9000.0, "cgroup_peak_mb": 3000.0, "cgroup_limit_mb": 8192.0}, **info)
    assert [g.cap for g, _ in history.observations(fits)] == [history.Cap.CGROUP, history.Cap.GPU]
    cuda = record(Status.OOM_OR_NCCL, 4096, {}, Reason.CUDA_OOM, **info)
    assert [(g.cap, o.cap_mb) for g, o in history.observations(cuda)] == [(history.Cap.GPU, 24564.0)]


def test_a_prediction_whose_interval_crosses_the_headroom_says_it_may_be_one_rung_off() -> None:
    m = fit(line(1000, 2.0, 128, 256, 512, cap=24 * GB))  # 2048: 5096 ± 102 MiB
    high = cards.predict(m, LADDER, 5.05, 0.0)  # 5171 allowed: 5096 + 102 is past it
    assert high.rung == 2048 and "may be one rung too high" in high.reason
    low = cards.predict(m, LADDER, 8.8, 0.0)  # 9011 allowed: 4096 at 9192 - 184 is under it
    assert low.rung == 2048 and "4096 may fit too" in low.reason
    clear = cards.predict(m, LADDER, 7, 0.0)
    assert "may" not in clear.reason
