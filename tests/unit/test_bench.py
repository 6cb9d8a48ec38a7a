"""The whole bench's pure parts: its order (one case of each robot first), the likeness of cases and the model one
borrows from another, the plan table, the lines that say where a bench stands, and `case=all` on the command line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ladder.core import bench
from ladder.core.bench import Done, Member, PlanRow
from ladder.core.memory import cards
from ladder.core.memory.model import Observation, fit
from ladder.core.memory.similar import CaseFacts, borrow, likeness, nearest, scaled
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.storage import history
from ladder.sweep import bench as sweep_bench

LADDER = [4096, 2048, 1024, 512, 256, 128, 64]
NETS = "actor_net=fc_2layers_1024units"


def facts(name: str, robot: str = "humanoid", method: str = "amp", per_env: float = 1000.0, **kw: str) -> CaseFacts:
    return CaseFacts(name, robot, kw.get("engine", "proxy"), method, kw.get("nets", NETS), per_env)


# ---------------------------------------------------------------- the order


def test_the_order_runs_one_case_of_each_robot_first_then_each_method_then_the_rest_and_the_skipped_last() -> None:
    members = [
        Member("amp_humanoid", "humanoid", "amp"),
        Member("add_humanoid", "humanoid", "add"),
        Member("amp_location_humanoid", "humanoid", "amp"),
        Member("amp_g1", "g1", "amp"),
        Member("add_g1", "g1", "add"),
        Member("smp_humanoid", "humanoid", "smp", skip="SMP's prior model files are missing"),
    ]
    got = [m.name for m in bench.order(members)]
    assert got == ["add_g1", "add_humanoid", "amp_g1", "amp_humanoid", "amp_location_humanoid", "smp_humanoid"]


def test_the_order_of_a_bench_of_one_robot_is_by_method_then_name() -> None:
    members = [Member(n, "pi_plus", n.split("_")[0]) for n in ("deepmimic_pi_plus_ppo", "amp_pi_plus", "add_pi_plus")]
    assert [m.name for m in bench.order(members)] == ["add_pi_plus", "amp_pi_plus", "deepmimic_pi_plus_ppo"]


# ---------------------------------------------------------------- likeness and the borrowed model


@pytest.mark.parametrize(
    ("other", "alike"),
    [
        (facts("b", robot="g1"), False),
        (facts("b", engine="newton"), False),
        (facts("b"), True),
    ],
    ids=["another robot", "another engine", "same family"],
)
def test_cases_of_another_robot_or_engine_say_nothing_of_each_other(other: CaseFacts, alike: bool) -> None:
    assert (likeness(facts("a"), other) is not None) is alike


def test_the_nearest_case_shares_the_method_then_the_nets_then_the_size_per_env() -> None:
    target = facts("t", method="amp", per_env=1000)
    same_method = facts("m", method="amp", per_env=1500)
    same_size = facts("s", method="add", per_env=1000)
    other_nets = facts("n", method="amp", per_env=1000, nets="actor_net=fc_3layers_1024units")
    assert nearest(target, [same_size, same_method]) == same_method
    assert nearest(target, [other_nets, same_method]) == same_method  # nets count, a size 1.5x apart counts less
    assert nearest(target, [facts("x", robot="g1")]) is None  # the first of its family goes cold


def test_a_borrowed_model_scales_the_part_per_env_and_keeps_the_fixed_part() -> None:
    donor = fit([Observation(k, 8192.0, (500.0 + 2.0 * k,)) for k in (256, 512, 1024)])
    (line,) = scaled(donor, 1.5).lines  # the target holds 1.5x the donor's floats per env
    assert line.fixed_mb == pytest.approx(500.0, rel=0.01)
    assert line.per_unit_mb == pytest.approx(3.0, rel=0.01)


def test_a_borrowed_model_orders_the_rung_its_scaled_line_predicts_for_the_card() -> None:
    donor = fit([Observation(k, 8192.0, (500.0 + 2.0 * k,)) for k in (256, 512, 1024)])
    target = facts("t", per_env=2000.0)
    lent = borrow(target, {"d": (facts("d", per_env=1000.0), donor)})
    assert lent is not None and lent.donor == "d" and lent.ratio == pytest.approx(2.0)
    found = cards.predict(lent.model, LADDER, 4.0, 0.05)  # 500 + 4 MiB per env: 512 fits 3.9 GB, 1024 does not
    assert found.rung == 512
    assert "from d's memory model" in lent.why and "x2.00" in lent.why


def test_no_model_is_borrowed_for_the_first_case_of_a_family() -> None:
    donor = fit([Observation(k, 8192.0, (500.0 + 2.0 * k,)) for k in (256, 512)])
    assert borrow(facts("t"), {"d": (facts("d", robot="g1"), donor)}) is None


# ---------------------------------------------------------------- the plan and where a bench stands


def test_the_plan_is_one_table_with_a_total_and_the_skipped_cases_below_it() -> None:
    rows = [
        PlanRow("add_g1", ("default", "hiutil"), "4096", 14, 120.0),
        PlanRow("amp_g1", ("default", "hiutil"), "1024,2048", 12, 60.0, earlier_s=300.0),
        PlanRow("smp_humanoid", (), "", 0, 0.0, skip="SMP's prior model files are missing"),
    ]
    text = bench.plan_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == [
        "#",
        "case",
        "profiles",
        "first",
        "rungs",
        "could",
        "launch",
        "expected",
        "earlier",
        "bench",
    ]
    assert lines[1].split() == ["1", "add_g1", "default,hiutil", "4096", "14", "2.0", "min", "-"]
    assert lines[2].split()[:4] == ["2", "amp_g1", "default,hiutil", "1024,2048"]
    assert lines[3].split() == ["total:", "2", "case(s)", "26", "3.0", "min", "5.0", "min", "(1", "case(s))"]
    assert lines[4] == "skipped smp_humanoid: SMP's prior model files are missing"


def test_what_is_left_takes_an_earlier_bench_time_else_the_mean_of_the_cases_done() -> None:
    done = [Done("a", "default e512 (ok)", 3, 60.0), Done("b", "default e256 (ok)", 2, 120.0)]
    assert bench.left_s(done, ["c", "d"], {"d": 30.0}) == pytest.approx(90.0 + 30.0)
    assert bench.left_s([], ["c"], {}) is None


def test_the_line_of_a_running_bench_says_which_case_of_how_many_its_phase_and_the_time() -> None:
    done = [Done("a", "default e512 (ok)", 3, 60.0)]
    line = bench.where_line(2, 5, "b", "starting", done, 60.0, 240.0)
    assert line == "bench: case 2/5 b: starting; 1 done, 1.0 min spent, ~4.0 min left"
    assert bench.done_lines(done) == ["bench:   a: default e512 (ok) (3 launch(es), 1.0 min)"]


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize(
    ("given", "asked"),
    [
        (["case=all"], True),
        (["case=all:g1", "device=cpu"], True),
        (["-m", "case=amp_g1,add_g1"], False),
        (["case=amp_g1"], False),
    ],
    ids=["all", "a robot", "a multirun", "one case"],
)
def test_case_all_asks_for_the_bench(given: list[str], asked: bool) -> None:
    assert sweep_bench.asked(given) is asked


def test_case_all_names_every_case_a_robot_or_a_glob() -> None:
    robots = {"add_g1": "g1", "amp_g1": "g1", "amp_humanoid": "humanoid"}
    assert sweep_bench.matching(robots, "case=all") == ["add_g1", "amp_g1", "amp_humanoid"]
    assert sweep_bench.matching(robots, "case=all:g1") == ["add_g1", "amp_g1"]
    assert sweep_bench.matching(robots, "case=all:amp_*") == ["amp_g1", "amp_humanoid"]


def test_the_bench_runs_as_a_multirun_of_its_cases_in_order_into_one_sweep(tmp_path: Path) -> None:
    from ladder.core.paths import SweepPaths

    found = sweep_bench.Bench(
        SweepPaths.of(tmp_path, "b1"),
        (Member("add_g1", "g1", "add"), Member("amp_g1", "g1", "amp"), Member("x", "g1", "smp", skip="why")),
        {},
    )
    given = ["case=all:g1", "sweep=b1", "device=cpu", "hydra/launcher=joblib"]
    assert sweep_bench.multirun_argv(given, found) == [
        "-m",
        "device=cpu",
        "hydra/launcher=joblib",
        "case=add_g1,amp_g1",
        "sweep=b1",
    ]


def test_the_facts_of_a_case_come_from_its_config_file() -> None:
    amp, add = (
        sweep_bench.facts_from_file("amp_humanoid", "proxy"),
        sweep_bench.facts_from_file("add_humanoid", "proxy"),
    )
    assert amp is not None and add is not None
    assert (amp.robot, amp.method, add.method) == ("humanoid", "amp", "add")
    assert amp.per_env > add.per_env  # AMP's ten steps of discriminator observations per env against ADD's one


def test_one_point_from_each_of_two_cases_of_a_family_makes_a_line_for_a_third() -> None:
    """A walk that stops at its first fit leaves one point per case: alone it makes no line of its own, pooled (each
    case scaled to the target) it does; one point alone gets the slope the target's floats per env give."""
    one = fit([Observation(512, 4096.0, (500.0 + 2.0 * 512,)), Observation(2048, 4096.0, (), fits=False)])
    two = fit([Observation(512, 4096.0, (500.0 + 4.0 * 512,))])  # twice the floats per env: as the target at 1024
    assert one.unreliable and two.unreliable  # too few points, each
    lent = borrow(
        facts("t", per_env=1000.0), {"a": (facts("a", per_env=1000.0), one), "b": (facts("b", per_env=2000.0), two)}
    )
    assert lent is not None and not lent.model.unreliable
    assert lent.model.peak(1024)[0] == pytest.approx(500.0 + 2.0 * 1024, rel=0.01)
    assert "a, b" in lent.why
    alone = borrow(facts("t", per_env=1000.0), {"a": (facts("a", per_env=1000.0), one)})
    assert alone is not None and "one fit, at the slope its floats per env give" in alone.why  # one point alone:
    (ln,) = alone.model.lines  # a line through it at the slope the configuration gives
    assert ln.per_unit_mb == pytest.approx(1000 * 4 / 2**20) and ln.predict(512) == pytest.approx(1524.0)


def test_the_methods_with_a_discriminator_are_the_proxys() -> None:
    from ladder.workloads.proxy.agent import DISC_METHODS  # the proxy imports torch: here, not at collection

    assert sweep_bench.DISC_METHODS == DISC_METHODS


# ---------------------------------------------------------------- a case's opening from its family's stored trials


def stored(case: str, method: str, status: Status, num_envs: int, used: float = 0.0) -> TrialRecord:
    info = {"sweep": "b", "device": "cpu", "workload": "proxy", "host": "h", "nproc": "1", "knob": "num_envs"}
    info["emulate_gpu_mem_gb"] = "0.6"
    figures = {"cap_mb": 614.4, "cap_used_mb": used} if used else {}
    reason = Reason.NONE if status is Status.OK else Reason.HOST_OOM
    return TrialRecord(case, method, "default", num_envs, Phase.PROBE, status, reason, "", figures, info, num_envs)


def test_a_case_opens_where_the_models_of_its_family_measured_before_it_put_its_largest_fit() -> None:
    """Two humanoid cases measured (one fit each, at the same rung, the rung above failed): the third's opening is
    the rung its nearest case's fit predicts at its own floats per env, then the one above; a g1 case, of another
    family, borrows nothing."""
    from ladder.sweep import borrow

    records = [
        stored("add_humanoid", "add", Status.OOM_OR_NCCL, 4096),
        stored("add_humanoid", "add", Status.OK, 2048, used=540.0),
        stored("deepmimic_humanoid_awr", "deepmimic", Status.OOM_OR_NCCL, 4096),
        stored("deepmimic_humanoid_awr", "deepmimic", Status.OK, 2048, used=400.0),
    ]
    models = history.models(records)
    target = sweep_bench.settings_for("vault_humanoid", ["profile=[default]"])
    caps = [(dataclasses.replace(g, case="vault_humanoid"), 614.4) for g in history.groups(records[1])]
    found = borrow.opening_from_kin(target, models, caps)
    assert found is not None and found.rungs == (2048, 4096), found
    assert found.why.startswith("from deepmimic_humanoid_awr's memory model (same robot humanoid, same nets)")
    assert "one fit, at the slope its floats per env give" in found.why  # both fits at 2048: no line of their own
    other = sweep_bench.settings_for("add_g1", ["profile=[default]"])
    assert (
        borrow.opening_from_kin(other, models, [(dataclasses.replace(g, case="add_g1"), 614.4) for g, _ in caps])
        is None
    )
    assert borrow.fill(None, other, models, []) is None
