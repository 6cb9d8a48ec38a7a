"""The placement answer (ladder/core/placement.py): one job over N devices against N one-device jobs side by side,
on plain records; and where it lands (the case's row, its action, the merge rule)."""

from __future__ import annotations

import pytest

from ladder.core import outcome, placement, rows
from ladder.core.records import Phase, Status, TrialRecord

OK, OOM, ERR, INT, RETRY = Status.OK, Status.OOM_OR_NCCL, Status.ERROR, Status.INTERRUPTED, Status.RETRY


def pick(sps: float = 1000.0, half: float = 20.0) -> TrialRecord:
    figures = {"samples_per_s": sps, "samples_per_s_lo": sps - half, "samples_per_s_hi": sps + half}
    figures |= {"min_avg_util": 30.0, "avg_util0": 30.0, "avg_util1": 31.0, "max_mem0": 900.0, "max_mem1": 910.0}
    info = {"finished_at": "2026-01-01T00:00:00+00:00", "gpu_name": "cpu", "n_gpus": "2", "knob": "num_envs"}
    return TrialRecord("c", "amp", "default", 64, Phase.PROBE, OK, "", "", figures, info, number=1)


def twin(
    number: int,
    rung: int,
    i: int,
    status: Status,
    sps: float | None = None,
    *,
    set_id: str = "a",
    stopped: str = "",
    half: float = 20.0,
) -> TrialRecord:
    figures = {"samples_per_s": sps, "samples_per_s_lo": sps - half, "samples_per_s_hi": sps + half} if sps else {}
    figures |= {"avg_util0": 50.0, "max_mem0": 700.0} if sps else {}
    info = {placement.OF: placement.key_of(pick()), placement.SET: set_id, placement.TWIN: str(i), placement.TWINS: "2"}
    info |= {placement.STOPPED: stopped} if stopped else {}
    return TrialRecord("c", "amp", "default", rung, Phase.PLACEMENT, status, "", "out of memory", figures, info, number)


def both(sps: float, rung: int = 64, first: int = 2, set_id: str = "a", half: float = 20.0) -> list[TrialRecord]:
    return [twin(first + i, rung, i, OK, sps, set_id=set_id, half=half) for i in range(2)]


RUNGS = (128, 64, 32, 16)


@pytest.mark.parametrize(
    ("done", "expected"),
    [
        ([], 64),
        (both(600.0), None),
        ([twin(2, 64, 0, OOM), twin(3, 64, 1, INT, stopped="2")], 32),
        ([twin(2, 16, 0, OOM), twin(3, 16, 1, INT, stopped="2")], None),
        ([twin(2, 64, 0, INT), twin(3, 64, 1, INT)], 64),
        ([twin(2, 64, 0, RETRY), twin(3, 64, 1, INT, stopped="2")], 64),
        ([twin(2, 64, 0, ERR), twin(3, 64, 1, INT, stopped="2")], None),
    ],
    ids=[
        "first-at-the-picks-rung",
        "measured",
        "oom-steps-down",
        "nothing-lower",
        "interrupted-again",
        "retry",
        "error-stops",
    ],
)
def test_the_next_rung_starts_at_the_pick_and_steps_down_as_the_walk_does(
    done: list[TrialRecord], expected: int | None
) -> None:
    sets = placement.sets([pick(), *done], pick())
    start = done[0].num_envs if done else 64
    assert placement.next_rung(sets, start, RUNGS) == expected


@pytest.mark.parametrize(
    ("each", "winner"),
    [(600.0, placement.Winner.PER_DEVICE), (505.0, placement.Winner.TIE), (400.0, placement.Winner.ONE_JOB)],
    ids=["side-by-side-wins", "within-the-noise", "one-job-wins"],
)
def test_the_winner_must_beat_the_other_beyond_its_interval_and_the_run_to_run_spread(
    each: float, winner: placement.Winner
) -> None:
    found = placement.answer(pick(), placement.sets([pick(), *both(each)], pick()))
    assert found is not None and found.winner is winner
    assert found.per_device is not None and found.per_device.value == pytest.approx(2 * each)
    assert found.per_device.hi - 2 * each == pytest.approx(20.0 * 2**0.5)  # halves added in quadrature
    assert "95% intervals" in found.note and "run-to-run" in found.note and "samples/day" in found.note


def test_a_step_down_failure_gives_the_one_job_until_a_lower_rung_fits_and_an_interrupted_set_no_answer() -> None:
    failed = [twin(2, 64, 0, OOM), twin(3, 64, 1, INT, stopped="2")]
    found = placement.answer(pick(), placement.sets([pick(), *failed], pick()))
    assert found is not None and found.winner is placement.Winner.ONE_JOB and found.per_device is None
    assert "oom_or_nccl at 64" in found.note
    later = [*failed, *both(600.0, rung=32, first=4, set_id="b")]
    found = placement.answer(pick(), placement.sets([pick(), *later], pick()))
    assert found is not None and found.winner is placement.Winner.PER_DEVICE and found.rung == 32
    stopped = [twin(2, 64, 0, INT), twin(3, 64, 1, INT)]
    assert placement.answer(pick(), placement.sets([pick(), *stopped], pick())) is None


def test_the_case_row_gains_the_columns_and_its_action_names_the_measured_winner() -> None:
    row = outcome.case_outcome([pick(), *both(600.0)], "samples_per_s").row
    assert row is not None
    assert row["placement"] == "per_device" and row["num_envs"] == "64"  # the pick stays the pick
    assert row["machine_sps_one_job"] == "1000.0" and row["machine_sps_per_device"] == "1200.0"
    assert row["placement_gain"] == "0.200" and row["placement_rung"] == "64"
    assert "measured: 2 one-device jobs side by side beat one job over 2 devices by 20%" in row["action"]
    assert row["action"].startswith("no class on CPU")  # another class's action is kept, the measurement after it
    bare = outcome.case_outcome([pick()], "samples_per_s").row
    assert bare is not None and "placement" not in bare
    thrpt = placement.with_answer(
        {"action": "run two single-GPU trials side by side instead of one dual-GPU trial"},
        placement.answer(pick(), placement.sets([pick(), *both(400.0)], pick())),
        throughput=True,
    )
    assert thrpt["action"].startswith("measured: one job over 2 devices beats 2 one-device jobs")


def test_the_merge_rule_prefers_the_same_pick_with_its_placement_over_an_older_file_without() -> None:
    measured = outcome.case_outcome([pick(), *both(600.0)], "samples_per_s").row
    older = outcome.case_outcome([pick()], "samples_per_s").row
    assert measured is not None and older is not None
    assert rows.merge_rows([measured], [older]) == rows.merge_rows([older], [measured]) == [measured]
    text = rows.to_tsv([measured], rows.columns([measured], rows.SEED_HEAD, rows.BEST_TAIL))
    assert "\tplacement\t" in text.splitlines()[0]


@pytest.mark.parametrize(
    ("mode", "n", "device", "words"),
    [
        (placement.Mode.AUTO, 2, "cpu", "off on CPU"),
        (placement.Mode.AUTO, 2, "cuda", "throughput-bound"),
        (placement.Mode.MEASURE, 2, "cpu", "placement=measure"),
        (placement.Mode.OFF, 2, "cuda", "placement=off"),
        (placement.Mode.MEASURE, 1, "cuda", "one device a trial"),
    ],
    ids=["auto-cpu", "auto-gpu", "measure", "off", "one-device"],
)
def test_the_dry_run_says_whether_the_placement_is_measured(
    mode: placement.Mode, n: int, device: str, words: str
) -> None:
    assert words in placement.plan_words(mode, n, device)


def test_the_note_says_how_much_of_the_windows_ran_together() -> None:
    spans = [{"window_start_s": 3.0, "window_s": 10.0}, {"window_start_s": 5.0, "window_s": 10.0}]
    pair = [
        TrialRecord(
            t.case,
            t.method,
            t.profile,
            t.num_envs,
            t.phase,
            t.status,
            t.reason,
            t.evidence,
            t.figures | span,
            t.info,
            t.number,
        )
        for t, span in zip(both(600.0), spans, strict=True)
    ]
    (done,) = placement.sets([pick(), *pair], pick())
    assert placement.overlap(done) == pytest.approx(0.8)
    found = placement.answer(pick(), [done])
    assert found is not None and "ran together for 80% of the longest" in found.note


def test_the_bench_summary_lists_the_cases_where_one_job_per_device_wins_first() -> None:
    from ladder.ui.report import bench

    wins = outcome.case_outcome([pick(), *both(600.0)], "samples_per_s").row
    loses = outcome.case_outcome([pick(), *both(400.0)], "samples_per_s").row
    assert wins is not None and loses is not None
    text = bench.summary_md("s", [loses | {"case": "b"}, wins | {"case": "a"}], [])
    section = text.split("## Placement, measured")[1]
    assert section.index("| a | per_device | 1000.0 | 1200.0 | +20% |") < section.index("| b | one_job |")
    assert "## Placement" not in bench.summary_md("s", [outcome.case_outcome([pick()], "samples_per_s").row or {}], [])
