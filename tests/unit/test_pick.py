"""The pick rules (ladder/pick.py), one table per rule, on plain records; and the util noise they read."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ladder.core import pick, walk
from ladder.core.caseclass import HIUTIL_TRIED
from ladder.core.measure.tdist import t975
from ladder.core.measure.usage import figures, util_spread
from ladder.core.paths import SweepPaths
from ladder.core.pick import Candidate
from ladder.core.records import Phase, Reason, Sample, Source, Status, TrialRecord
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import register, settings_from
from ladder.storage import studies
from ladder.storage.tsv import read_tsv
from ladder.sweep import loop
from ladder.sweep.context import Run

OK, OOM, ERR, TIMEOUT, INT = Status.OK, Status.OOM_OR_NCCL, Status.ERROR, Status.TIMEOUT, Status.INTERRUPTED
PROBE, CONFIRM = Phase.PROBE, Phase.CONFIRM


def rec(
    profile: str, envs: int, status: Status = OK, number: int = 0, phase: Phase = PROBE, **figs: float
) -> TrialRecord:
    return TrialRecord("amp_pi_plus", "amp", profile, envs, phase, status, Reason.NONE, "", dict(figs), {}, number)


def c(value: float, envs: int, name: str, hi: float | None = None, other: float | None = None) -> Candidate[str]:
    return Candidate(value, envs, name, hi, other)


# ---------------------------------------------------------------- the pick rule


@pytest.mark.parametrize(
    ("cands", "item", "tied", "by"),
    [
        ([], None, (), ""),
        ([c(50, 64, "a"), c(40, 64, "b")], "a", (), ""),
        # the case: util 47.1 vs 46.9 within the noise, samples/s 34% apart: samples/s decides
        (
            [c(47.1, 64, "hiutil", 50.2, 800.0), c(46.9, 64, "default", 49.7, 1212.0)],
            "default",
            ("hiutil",),
            "samples_per_s",
        ),
        # the same values, measured steadily: no tie, the higher value stands
        ([c(47.1, 64, "hiutil", 47.2, 800.0), c(46.9, 64, "default", 47.0, 1212.0)], "hiutil", (), ""),
        # the best's own interval alone makes no tie: the other's must reach it (the walk's cut relies on that)
        ([c(47.1, 64, "hiutil", 60.0, 800.0), c(46.9, 64, "default", other=1212.0)], "hiutil", (), ""),
        # a tie where one lacks the other figure: the value decides
        ([c(47.1, 64, "hiutil", 50.2, None), c(46.9, 64, "default", 49.7, 1212.0)], "hiutil", ("default",), "value"),
        # ties go to more envs before the other figure (the ladder's aim: the largest stable num_envs)
        ([c(50, 64, "e64", 52, 900.0), c(49, 128, "e128", 51, 100.0)], "e128", ("e64",), "num_envs"),
        ([c(50, 128, "e128", 52, 100.0), c(49, 64, "e64", 51, 900.0)], "e128", ("e64",), "num_envs"),
        # an equal value is always a tie; more envs wins it
        ([c(50, 48, "e48"), c(50, 64, "e64")], "e64", ("e48",), "num_envs"),
        # the walk's old rule is kept: a larger rung whose interval top reaches the best is a tie
        ([c(100, 64, "e64"), c(90, 128, "e128", hi=101)], "e128", ("e64",), "num_envs"),
        ([c(100, 64, "e64"), c(90, 128, "e128", hi=99)], "e64", (), ""),
        # an infinite interval (one step measured) ties with anything
        ([c(100, 64, "e64", 101, 10.0), c(50, 64, "x", math.inf, 20.0)], "x", ("e64",), "samples_per_s"),
    ],
    ids=[
        "none",
        "clear",
        "issue-tie",
        "steady-no-tie",
        "only-the-best-has-an-interval",
        "no-other-figure",
        "envs-first-up",
        "envs-first-down",
        "equal-value",
        "walk-rule-tie",
        "walk-rule-no-tie",
        "unbounded",
    ],
)
def test_choose(cands: list[Candidate[str]], item: str | None, tied: tuple[str, ...], by: str) -> None:
    choice = pick.choose(cands, "samples_per_s")
    got = (choice.item, choice.tied, choice.by) if choice else (None, (), "")
    assert got == (item, tied, by)


@pytest.mark.parametrize("seed", range(20))
def test_choose_does_not_depend_on_the_order_of_its_candidates(seed: int) -> None:
    rng = random.Random(seed)
    cands = [
        c(v, rng.choice([32, 64, 128]), f"x{i}", v + rng.choice([0, 2, 5]), float(rng.randrange(3)))
        for i, v in enumerate(rng.choice([40, 45, 46, 50]) for _ in range(6))
    ]
    figures = {x.item: (x.value, x.envs, x.hi, x.other) for x in cands}  # candidates alike in all are one
    first = pick.choose(cands)
    assert first is not None
    for _ in range(5):
        rng.shuffle(cands)
        again = pick.choose(cands)
        assert again is not None and figures[again.item] == figures[first.item]
        assert sorted(figures[t] for t in again.tied) == sorted(figures[t] for t in first.tied)


@pytest.mark.parametrize(
    ("value", "hi", "envs", "rung", "expected"),
    [
        (100.0, 110.0, 64, 32, 110.0),
        (100.0, 110.0, 64, 64, 100.0),
        (100.0, 110.0, 64, 128, 100.0),
        (100.0, None, 64, 32, 100.0),
    ],
    ids=["fewer-envs-must-pass-the-interval", "same-envs", "more-envs", "no-interval"],
)
def test_to_beat(value: float, hi: float | None, envs: int, rung: int, expected: float) -> None:
    assert pick.to_beat(value, hi, envs, rung) == expected


@pytest.mark.parametrize(
    ("value", "hi", "envs", "rung", "expected"),
    [
        (100.0, 101.0, 64, 32, 105.0),
        (100.0, 110.0, 64, 32, 110.0),
        (105.0, 106.0, 64, 64, 100.0),
        (105.0, 106.0, 64, 128, 100.0),
    ],
    ids=["fewer-envs-the-noise-above-a-narrow-interval", "fewer-envs-a-wider-interval", "same-envs", "more-envs"],
)
def test_to_beat_with_run_to_run_noise(value: float, hi: float, envs: int, rung: int, expected: float) -> None:
    assert pick.to_beat(value, hi, envs, rung, noise=0.05) == pytest.approx(expected)


def rate(profile: str, envs: int, value: float, half: float, number: int = 0) -> TrialRecord:
    """An ok samples/s record with a measured 95% interval of +-`half` (a fraction)."""
    return rec(
        profile,
        envs,
        OK,
        number,
        samples_per_s=value,
        samples_per_s_lo=value * (1 - half),
        samples_per_s_hi=value * (1 + half),
    )


@pytest.mark.parametrize(
    ("lower", "half", "winner"),
    [(3286.0, 0.02, 64), (3187.0 * 1.049, 0.0, 64), (3187.0 * 1.06, 0.02, 48), (3187.0 * 1.06, 0.08, 64)],
    ids=["within-the-noise", "just-within", "beyond-it-and-the-interval", "beyond-it-not-the-interval"],
)
def test_a_lower_rung_must_be_faster_by_more_than_the_run_to_run_noise(lower: float, half: float, winner: int) -> None:
    """A bench run on the 2-core machine: e48's one window measured 3,286 samples/s against e64's 3,187 (3.1%),
    above e64's narrow interval, though over every run e48 averaged 2,750 and e64 3,203. Two launches of one
    configuration differ by more than one window's interval, so a difference within `RUN_TO_RUN` (5%) is a tie."""
    records = [rate("default", 64, 3187.0, half, 1), rate("default", 48, lower, 0.02, 2)]
    choice = pick.choose_best(records, "samples_per_s")
    assert choice is not None and choice.item.num_envs == winner
    assert bool(choice.tied) is (winner == 64)


def test_the_walk_sees_the_same_band_as_the_pick() -> None:
    facts = walk.attempts([rate("default", 64, 1000.0, 0.01, 1), rate("default", 48, 1000.0, 0.09, 2)], "samples_per_s")
    assert [f.value_hi for f in facts] == [pytest.approx(1050.0), pytest.approx(1090.0)]
    util = walk.attempts([rec("default", 64, OK, 1, min_avg_util=50.0, min_avg_util_hi=50.5)], "min_avg_util")
    assert util[0].value_hi == 50.5  # util's noise is its spread over the devices: no run-to-run band


def test_a_trial_below_what_it_must_beat_never_becomes_the_pick() -> None:
    """`to_beat` holds under the run-to-run band: a new trial whose measured interval's top is below what it was
    told to beat (so the walk may cut it short) is never the pick once it joins the records (1000 random cases)."""
    rng = random.Random(5)
    for _ in range(1000):
        records = [
            rate(
                rng.choice("dh"), rng.choice([32, 48, 64, 128]), rng.uniform(900, 1100), rng.choice([0.0, 0.02, 0.1]), i
            )
            for i in range(rng.randint(1, 4))
        ]
        top = pick.best(records, "samples_per_s")
        assert top is not None
        value, hi = top.figures["samples_per_s"], walk.attempts([top], "samples_per_s")[0].value_hi
        rung = rng.choice([32, 48, 64, 128])
        beat = pick.to_beat(value, hi, top.num_envs, rung, pick.noise_of("samples_per_s"))
        new_hi = beat * rng.uniform(0.8, 0.999)
        new = rec("x", rung, OK, 99, samples_per_s=new_hi * rng.uniform(0.9, 1.0), samples_per_s_hi=new_hi)
        assert pick.best([*records, new], "samples_per_s") is not new, (records, new)


def test_pick_on_the_walks_tuples_is_the_same_rule() -> None:
    assert pick.pick([]) is None
    assert pick.pick([(100.0, None, 64, "e64"), (90.0, 101.0, 128, "e128")]) == "e128"
    assert pick.pick([(100.0, None, 64, "e64"), (90.0, 99.0, 128, "e128")]) == "e64"


# ---------------------------------------------------------------- over records


@pytest.mark.parametrize(
    ("objective", "figs", "expected"),
    [
        ("samples_per_s", {"samples_per_s": 100.0, "samples_per_s_lo": 90.0, "samples_per_s_hi": 110.0}, (90.0, 110.0)),
        ("samples_per_s", {"samples_per_s": 100.0}, (None, None)),
        ("min_avg_util", {"min_avg_util": 47.0, "util_spread": 2.5}, (44.5, 49.5)),
        ("min_avg_util", {"min_avg_util": 47.0}, (None, None)),
    ],
    ids=["rate-interval", "rate-without", "util-spread", "util-without"],
)
def test_interval(objective: str, figs: dict[str, float], expected: tuple[float | None, float | None]) -> None:
    assert pick.interval(rec("default", 64, **figs), objective) == expected


def test_choose_best_breaks_a_util_tie_by_samples_per_s_and_says_so() -> None:
    """Issue 16's loaded 2-core machine: hiutil e64 47.1 vs default e64 46.9 in util, 34% slower in samples/s."""
    hiutil = rec("hiutil", 64, min_avg_util=47.1, util_spread=3.1, samples_per_s=800.0)
    default = rec("default", 64, min_avg_util=46.9, util_spread=2.8, samples_per_s=1212.0)
    choice = pick.choose_best([hiutil, default, rec("default", 128, OOM)], "min_avg_util")
    assert choice is not None and (choice.item, choice.tied, choice.by) == (default, (hiutil,), "samples_per_s")
    steady = [replace(r, figures={**r.figures, "util_spread": 0.05}) for r in (hiutil, default)]
    assert pick.best(steady, "min_avg_util") == steady[0]  # measured steadily, 0.2 points is a real difference


def test_choose_best_breaks_a_samples_per_s_tie_by_util() -> None:
    fast = rec("default", 64, samples_per_s=1000.0, samples_per_s_lo=900.0, samples_per_s_hi=1100.0, min_avg_util=40)
    busy = rec("hiutil", 64, samples_per_s=990.0, samples_per_s_lo=890.0, samples_per_s_hi=1090.0, min_avg_util=55)
    choice = pick.choose_best([fast, busy], "samples_per_s")
    assert choice is not None and (choice.item, choice.by) == (busy, "min_avg_util")


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([], []),
        ([rec("d", 64, number=1), rec("d", 64, OK, 2, CONFIRM)], [1]),
        ([rec("d", 64, number=1), rec("d", 64, OOM, 2, CONFIRM)], []),
        ([rec("d", 64, number=1), rec("d", 32, number=2), rec("d", 64, OOM, 3, CONFIRM)], [2]),
        ([rec("d", 64, number=1), rec("h", 64, number=2), rec("d", 64, OOM, 3, CONFIRM)], [2]),
    ],
    ids=["none", "confirm-passed", "confirm-failed", "other-rung-stays", "other-profile-stays"],
)
def test_usable(records: list[TrialRecord], expected: list[int]) -> None:
    assert [r.number for r in pick.usable(records)] == expected


def _ok(profile: str, envs: int, util: float, number: int, phase: Phase = PROBE) -> TrialRecord:
    return rec(profile, envs, OK, number, phase, min_avg_util=util)


@pytest.mark.parametrize(
    ("records", "to_confirm", "confirmed"),
    [
        ([], None, None),
        ([_ok("d", 64, 50, 1)], 1, None),
        ([_ok("d", 64, 50, 1), _ok("d", 64, 48, 2, CONFIRM)], None, 2),
        ([_ok("d", 64, 50, 1), _ok("d", 64, 48, 2, CONFIRM), _ok("d", 64, 49, 3, CONFIRM)], None, 3),
        ([_ok("d", 64, 50, 1), _ok("d", 32, 40, 2), rec("d", 64, OOM, 3, CONFIRM)], 2, None),
        (
            [_ok("d", 64, 50, 1), _ok("d", 32, 40, 2), rec("d", 64, OOM, 3, CONFIRM), _ok("d", 32, 41, 4, CONFIRM)],
            None,
            4,
        ),
        ([rec("d", 64, OOM, 1)], None, None),
    ],
    ids=["none", "to-run", "passed", "last-of-two", "failed-steps-down", "lower-passed", "no-pick"],
)
def test_to_confirm_and_confirmed(records: list[TrialRecord], to_confirm: int | None, confirmed: int | None) -> None:
    due, passed = pick.to_confirm(records, "min_avg_util"), pick.confirmed(records, "min_avg_util")
    assert (due.number if due else None, passed.number if passed else None) == (to_confirm, confirmed)


def _rate(profile: str, envs: int, rate: float, number: int, unstable: float, **more: float) -> TrialRecord:
    return rec(profile, envs, OK, number, samples_per_s=rate, unstable=unstable, **more)


@pytest.mark.parametrize(
    ("records", "due"),
    [
        ([], None),
        ([_rate("d", 64, 1000, 1, 0)], None),  # stable: it counts as it is
        ([_rate("d", 64, 1000, 1, 1)], 1),  # unstable, measured once: a second window
        ([_rate("d", 64, 1000, 1, 1), _rate("d", 64, 990, 2, 1, repeats=2)], None),  # measured twice: it stands
        ([_rate("d", 64, 1000, 1, 1), _rate("d", 32, 600, 2, 1)], 1),  # only the pick is checked again
        ([_rate("d", 64, 1000, 1, 0), _rate("h", 64, 900, 2, 1)], None),  # an unstable loser is not
        ([rec("d", 64, OOM, 1)], None),
    ],
    ids=["none", "stable", "unstable-once", "unstable-twice", "pick-only", "loser", "no-pick"],
)
def test_an_unstable_pick_measured_once_is_due_a_second_window(records: list[TrialRecord], due: int | None) -> None:
    again = pick.to_recheck(records, "samples_per_s")
    assert (again.number if again else None) == due


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([], None),
        ([rec("d", 256, OOM, 1), rec("d", 128, OOM, 2)], 2),
        ([rec("d", 128, OOM, 1), rec("d", 128, TIMEOUT, 2)], 2),
        ([rec("d", 256, OOM, 1), rec("h", 128, ERR, 2)], 1),  # an error says nothing about the rung
        ([rec("d", 256, ERR, 1), rec("h", 256, ERR, 2)], 2),  # only errors: the latest, for a row without a rung
        ([rec("d", 64, INT, 1)], None),
        ([rec("d", 64, INT, 1), rec("d", 256, ERR, 2)], 2),
    ],
    ids=[
        "none",
        "lowest",
        "latest-at-the-lowest",
        "error-never-with-others",
        "only-errors",
        "interrupted-never",
        "interrupted-and-error",
    ],
)
def test_fallback(records: list[TrialRecord], expected: int | None) -> None:
    row = pick.fallback(records)
    assert (row.number if row else None) == expected


def test_attempts_are_probes_and_failed_confirmations_with_repeats_as_their_median() -> None:
    records = [
        rec("d", 64, OK, 1, samples_per_s=100.0, samples_per_s_hi=110.0),
        rec("d", 64, OK, 2, samples_per_s=300.0),
        rec("d", 64, OK, 3, samples_per_s=200.0, repeats=3.0),  # the loop counts the windows on the last one
        rec("d", 128, OOM, 4),
        rec("d", 64, OK, 5, CONFIRM, samples_per_s=1.0),
        rec("h", 64, OOM, 6, CONFIRM),
    ]
    facts = walk.attempts(records, "samples_per_s")
    assert [(f.profile, f.rung, f.status, f.value) for f in facts] == [
        ("d", 64, OK, 200.0),
        ("d", 128, OOM, None),
        ("h", 64, OOM, None),
    ]
    assert [f.repeats for f in facts] == [3, 1, 1]  # the walk knows a median of three windows from one window


@pytest.mark.parametrize(
    ("figs", "info", "expected"),
    [
        ({"cap_used_mb": 300.0, "cap_mb": 600.0, "max_mem0": 900.0}, {}, 0.5),
        ({"cap_mb": 600.0}, {}, None),
        ({"max_mem0": 4000.0, "max_mem1": 6000.0}, {"source": "nvml", "gpu_mem_total": "24000"}, 0.25),
        ({"max_mem0": 4000.0}, {"source": "host", "gpu_mem_total": "24000"}, None),
        ({"max_mem0": 4000.0}, {"source": "nvml", "gpu_mem_total": "24000", "emulate_gpu_mem_gb": "8"}, None),
        (  # net of a ballast, against the card it emulates (recorded as the card)
            {"max_mem0": 2048.0, "ballast_mb": 77000.0, "ballast_card_mb": 4096.0},
            {"source": "nvml", "gpu_mem_total": "4096", "emulate_gpu_mem_gb": "4"},
            0.5,
        ),
    ],
    ids=["emulated-card", "emulated-without-use", "nvml", "host-rss", "nvml-under-emulation", "nvml-net-of-ballast"],
)
def test_mem_frac(figs: dict[str, float], info: dict[str, str], expected: float | None) -> None:
    assert pick.mem_frac(replace(rec("d", 64, **figs), info=info)) == expected


@pytest.mark.parametrize(
    ("figs", "info", "expected"),
    [
        ({"avg_util0": 14.6, "avg_util1": 38.0}, {"source": "nvml"}, 38.0),  # the busiest GPU
        ({"avg_util0": 98.0}, {"source": "host"}, None),  # a rank's CPU share is not a GPU's busy time
        ({}, {"source": "nvml"}, None),
    ],
    ids=["nvml", "host", "unmeasured"],
)
def test_gpu_util_is_the_busiest_gpus_where_nvml_measured_it(
    figs: dict[str, float], info: dict[str, str], expected: float | None
) -> None:
    record = replace(rec("d", 64, **figs), info=info)
    assert pick.gpu_util(record) == expected
    assert walk.attempts([record], "samples_per_s")[0].util == expected  # what the walk is told


# ---------------------------------------------------------------- the util noise


def test_util_spread_is_the_interval_of_the_lowest_devices_per_second_means() -> None:
    low = [40.0, 50.0, 45.0, 55.0, 35.0]  # device 1, one sample a second
    samples = [Sample(float(t), 0, 90.0, 100.0, Source.HOST) for t in range(5)]
    samples += [Sample(float(t) + 0.5, 1, u, 100.0, Source.HOST) for t, u in enumerate(low)]
    expected = t975(4) * statistics.stdev(low) / math.sqrt(5)
    assert util_spread(samples) == pytest.approx(expected)
    assert figures(samples, [], None, 0.0)["util_spread"] == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(
    ("utils", "expected"),
    [([], None), ([50.0], None), ([50.0, 50.0, 50.0], 0.0)],
    ids=["no-samples", "one-second", "steady"],
)
def test_util_spread_edges(utils: list[float], expected: float | None) -> None:
    assert util_spread([Sample(float(t), 0, u, 1.0, Source.HOST) for t, u in enumerate(utils)]) == expected


def test_a_noisier_window_has_a_wider_util_spread() -> None:
    steady = [Sample(float(t), 0, 50.0 + (t % 2), 1.0) for t in range(30)]
    noisy = [Sample(float(t), 0, 50.0 + 10 * (t % 2), 1.0) for t in range(30)]
    spread_steady, spread_noisy = util_spread(steady), util_spread(noisy)
    assert spread_steady is not None and spread_noisy is not None and spread_noisy > spread_steady


# ---------------------------------------------------------------- the sweep's conclusion


def test_the_sweep_writes_a_tie_its_break_and_advice_that_agrees_with_the_pick(tmp_path: Path) -> None:
    """Issue 16's loaded machine, as stored trials: the sweep's conclusion picks default e64 by samples/s, says it
    was a tie, and does not tell a pick that beat hiutil to try hiutil."""
    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        s = settings_from(compose(config_name="config", overrides=["case=amp_pi_plus", f"output_root={tmp_path}"]))
    paths = SweepPaths("tie", tmp_path / "case_gpu_bench_tie")
    storage = studies.open_storage(None, paths.sweep_dir)
    study = studies.open_study(storage, s.case.name, paths.sweep)
    card = {"gpu_name": "NVIDIA GeForce RTX 4090", "gpu_mem_total": "24564", "n_gpus": "2", "source": "nvml"}
    for profile, util, spread, rate in (("hiutil", 47.1, 3.1, 800.0), ("default", 46.9, 2.8, 1212.0)):
        figs = {"min_avg_util": util, "util_spread": spread, "samples_per_s": rate, "max_mem0": 4000.0}
        record = replace(rec(profile, 64, **figs), info=card)
        studies.add_finished(study, record, ("default", "hiutil"), util)
    ctx = Run(s, paths, None, None, study, storage, None)  # type: ignore[arg-type]
    summary = loop._conclude(ctx, 0)
    assert summary.best is not None and summary.best.profile == "default"
    (row,) = read_tsv(paths.best_tsv)
    assert (row["variant"], row["num_envs"], row["util_spread"]) == ("default", "64", "2.8")
    assert row["tie"] == "tied on min_avg_util with hiutil e64 (within the measured noise); broken by samples_per_s"
    assert (row["class"], row["action"]) == ("balanced", HIUTIL_TRIED)


# ---------------------------------------------------------------- weak evidence reaches the walk


@pytest.mark.parametrize(
    ("status", "confidence", "confirmed"),
    [(OOM, "low", False), (OOM, "high", True), (OOM, None, True), (TIMEOUT, "low", True), (OK, "low", True)],
    ids=["weak-oom", "proved-oom", "recorded-before-confidence", "timeout-never-weak", "ok"],
)
def test_a_low_confidence_step_down_reaches_the_walk_unconfirmed(
    status: Status, confidence: str | None, confirmed: bool
) -> None:
    record = rec("default", 256, status)
    if confidence is not None:
        record.info["confidence"] = confidence
    (fact,) = walk.attempts([record], "min_avg_util")
    assert fact.confirmed is confirmed
