"""The report: the series behind each plot (data, not pixels), and the files `python -m ladder.report` writes."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from ladder.ui.report import build, charts, page
from ladder.ui.report.charts import Series, TrialFiles

T0 = 1_800_000_000.0  # the launch, unix time
HOST = {
    **{"source": "host", "gpu_name": "cpu", "gpu_mem_total": "614", "n_gpus": "2", "host": "box", "sweep": "s1"},
    "emulate_gpu_mem_gb": "0.6",
}


def trial(
    number: int, profile: str, num_envs: int, status: str, reason: str = "", n: int = 1, **figures: str
) -> dict[str, str]:
    name = f"{profile}_e{num_envs}_probe_{n}"
    return {
        "number": str(number),
        "case": "amp_pi_plus",
        "method": "amp",
        "variant": profile,
        "num_envs": str(num_envs),
        "phase": "probe",
        "status": status,
        "reason": reason,
        "trial_dir": f"trials/amp_pi_plus/{name}",
        **HOST,
        **figures,
    }


# fmt: off
TRIALS = [
    trial(0, "default", 256, "oom_or_nccl", "host_oom", min_avg_util="28", max_mem0="765", max_mem1="760",
          why="top rung"),
    trial(1, "default", 128, "oom_or_nccl", "host_oom", min_avg_util="38.3", max_mem0="842", max_mem1="842"),
    trial(2, "default", 64, "ok", min_avg_util="38.6", max_mem0="807", max_mem1="808", samples_per_s="2178",
          samples_per_s_lo="2100", samples_per_s_hi="2250", window_start_s="10.5", window_end_s="18.5",
          window_s="9.4"),
    trial(3, "hiutil", 64, "interrupted", "interrupted", min_avg_util="5", max_mem0="300", max_mem1="300"),
    trial(4, "hiutil", 64, "ok", n=2, min_avg_util="22.2", max_mem0="806", max_mem1="808", samples_per_s="777",
          samples_per_s_lo="700", samples_per_s_hi="850", window_start_s="30.05", window_s="5.3"),
    trial(5, "hiutil", 32, "error", "error"),  # failed before any sample
]
# fmt: on
BEST = [{**TRIALS[2], "trials": "6"}]


def samples_csv(rows: list[tuple[float, int, float, float]], extra: str = "") -> list[dict[str, str]]:
    return [{"t": f"{T0 + t:.3f}", "index": str(i), "util": str(u), "mem_mb": str(m)} for t, i, u, m in rows]


SAMPLES = samples_csv([(2.0, 0, 0.0, 200.0), (2.0, 1, 0.0, 210.0), (2.5, 0, 50.0, 700.0), (2.5, 1, 40.0, 710.0)])
PROGRESS = [
    json.dumps({"event": "start", "t": T0 + 2.7, "world_size": 2}),
    json.dumps({"t": T0 + 4.3, "iter": 1, "samples": 4096, "step_time_s": 1.6}),
    json.dumps({"t": T0 + 6.5, "iter": 2, "samples": 8192, "step_time_s": 2.2}),
]


def test_case_chart_has_one_line_per_profile_and_marks_failures_at_their_rung() -> None:
    chart = charts.case_chart(TRIALS, "amp_pi_plus", BEST)
    assert chart.util == (
        Series("default", (64.0,), (38.6,)),
        Series("hiutil", (64.0,), (22.2,)),  # the interrupted trial at 64 is left out: it ran again
    )  # a failure's start-up util is no figure beside measured ones: it is a mark at its rung
    assert chart.marks == (
        Series("default failed: host_oom", (128.0, 256.0), (), failed=True),
        Series("hiutil failed: error", (32.0,), (), failed=True),
    )
    assert chart.sps == (
        Series("default", (64.0,), (2178.0,), lo=(2100.0,), hi=(2250.0,)),
        Series("hiutil", (64.0,), (777.0,), lo=(700.0,), hi=(850.0,)),
    )
    assert [(s.label, s.x, s.y) for s in chart.mem] == [
        ("default", (64.0,), (808.0,)),  # the larger of max_mem0 and max_mem1
        ("default failed: host_oom", (128.0, 256.0), (842.0, 765.0)),
        ("hiutil", (64.0,), (808.0,)),
        ("hiutil failed: error", (32.0,), (0.0,)),
    ]
    assert chart.rungs == (256, 128, 64, 32)
    assert (chart.card_mem_mb, chart.card_label) == (614.0, "emulated card (per rank): 614 MiB")
    assert chart.best_util == Series("best: default e64", (64.0,), (38.6,))
    assert chart.best_sps == Series("best: default e64", (64.0,), (2178.0,))
    assert chart.best_mem == Series("best: default e64", (64.0,), (808.0,))
    assert chart.util_label == "CPU util: min over ranks of the mean (% of one core)"
    assert chart.mem_label == "peak PSS or cgroup, max over ranks (MiB)"


def test_case_chart_on_a_gpu_names_the_card_and_draws_no_line_without_its_memory() -> None:
    rows = [{**t, "source": "nvml", "gpu_name": "NVIDIA GeForce RTX 4090", "gpu_mem_total": "24564"} for t in TRIALS]
    chart = charts.case_chart(rows, "amp_pi_plus")
    assert chart.card_label == "NVIDIA GeForce RTX 4090: 24564 MiB"
    assert chart.util_label == "GPU util: min over GPUs of the mean (%)"
    assert chart.best_util is None
    blank = charts.case_chart([{**t, "gpu_mem_total": ""} for t in TRIALS], "amp_pi_plus")
    assert (blank.card_mem_mb, blank.card_label) == (None, "")


def test_trial_chart_puts_samples_and_steps_on_seconds_since_launch_with_the_phases() -> None:
    files = TrialFiles(SAMPLES, PROGRESS, {"status": "ok", "reason": "", "evidence": "window done"}, launched_t=T0)
    chart = charts.trial_chart(TRIALS[2], files)
    assert chart.title == "amp_pi_plus default_e64_probe_1: ok"
    assert chart.util == (Series("rank 0", (2.0, 2.5), (0.0, 50.0)), Series("rank 1", (2.0, 2.5), (0.0, 40.0)))
    assert chart.mem == (Series("rank 0", (2.0, 2.5), (200.0, 700.0)), Series("rank 1", (2.0, 2.5), (210.0, 710.0)))
    assert chart.step == Series("step time", (4.3, 6.5), (1.6, 2.2))
    assert (chart.warmup, chart.window, chart.end_s) == ((0.0, 10.5), (10.5, 18.5), None)
    assert (chart.util_label, chart.mem_label) == ("CPU util per rank (% of one core)", "PSS per rank (MiB)")
    assert (chart.card_mem_mb, chart.caption) == (None, "window done")  # RSS is not what the emulated card caps


def test_without_a_recorded_end_the_window_runs_over_the_rate_span() -> None:
    assert charts.trial_window(TRIALS[4]) == (30.05, 35.35)
    assert charts.trial_window(TRIALS[0]) is None


def test_a_failed_trial_has_no_window_and_ends_at_its_last_sample() -> None:
    verdict = {"status": "oom_or_nccl", "reason": "host_oom", "evidence": "DefaultCPUAllocator: can't allocate"}
    chart = charts.trial_chart(TRIALS[0], TrialFiles(SAMPLES, PROGRESS[:1], verdict, launched_t=T0))
    assert chart.title == "amp_pi_plus default_e256_probe_1: oom_or_nccl (host_oom)"
    assert (chart.warmup, chart.window, chart.end_s) == (None, None, 2.5)
    assert chart.step == Series("step time", (), ())
    assert chart.caption == "DefaultCPUAllocator: can't allocate"


def test_launch_falls_back_to_the_earliest_sample_or_start_event() -> None:
    assert charts.launch_t(TrialFiles(SAMPLES, PROGRESS)) == T0 + 2.0
    assert charts.launch_t(TrialFiles([], PROGRESS)) == T0 + 2.7
    assert charts.launch_t(TrialFiles()) is None


def test_on_a_gpu_the_chart_uses_nvml_samples_and_shows_the_trials_own_memory() -> None:
    rows = [
        {"t": f"{T0 + 1}", "index": "0", "util": "97", "mem_mb": "20000", "source": "nvml", "proc_mem_mb": "19000"},
        {"t": f"{T0 + 1}", "index": "0", "util": "130", "mem_mb": "3000", "source": "host", "proc_mem_mb": ""},
        {"t": f"{T0 + 2}", "index": "0", "util": "98", "mem_mb": "20100", "source": "nvml", "proc_mem_mb": ""},
    ]
    chart = charts.trial_chart({**TRIALS[2], "source": "nvml"}, TrialFiles(rows, [], {}, launched_t=T0))
    assert chart.util == (Series("GPU 0", (1.0, 2.0), (97.0, 98.0)),)
    assert chart.mem == (
        Series("GPU 0", (1.0, 2.0), (20000.0, 20100.0)),
        Series("GPU 0" + charts.PROC_SUFFIX, (1.0,), (19000.0,)),
    )
    assert chart.util_label == "GPU util (%)"


def test_summary_lists_the_best_row_and_every_trial_with_its_plot() -> None:
    text = page.summary_md("s1", BEST, TRIALS)
    lines = text.splitlines()
    assert lines[0] == "# Sweep `s1`"
    assert lines[2] == "6 trial(s), 1 case(s) on box: 2 x cpu (an emulated card of 614 MiB each)."
    assert lines[4].startswith("util %: CPU util: min over ranks") and "it can exceed an emulated card" in lines[4]
    assert "A blank is no measurement" in lines[4]
    assert "| amp_pi_plus | default | e64 | ok | 38.6 | 808 | 2178 |  |  |" in lines
    assert "![amp_pi_plus](plots/amp_pi_plus.png)" in lines
    assert (
        "| 0 | default | e256 | oom_or_nccl | host_oom | 28 | 765 |  |  | top rung | "
        "[png](plots/amp_pi_plus/default_e256_probe_1.png) |" in lines
    )
    assert sum(line.startswith("| ") and "[png]" in line for line in lines) == len(TRIALS)


def test_why_this_pick_says_what_beat_what() -> None:
    why = page.why_pick("amp_pi_plus", BEST, TRIALS)
    assert why.startswith(
        "default e64: 2178 samples/s (95% interval 2100-2250), min avg util 38.6%; picked on min avg util, the "
        "highest samples/s and the highest min avg util measured."
    )
    assert "Above it: e256 failed (host_oom), e128 failed (host_oom)." in why
    assert (
        "hiutil's best, e64: 777 samples/s (95% interval 700-850), min avg util 22.2%; 16.4 points below the pick on "
        "the objective (min avg util); below the pick's interval on samples/s." in why
    )
    cut = {**TRIALS[4], "number": "6", "num_envs": "128", "cut": "1", "samples_per_s": "900"}
    assert charts.case_chart([*TRIALS, cut], "amp_pi_plus").marks[1] == Series(
        "hiutil cut short", (128.0,), (), failed=True
    )
    assert "Cut short once they could not beat the best so far: hiutil e128." in page.why_pick(
        "amp_pi_plus", BEST, [*TRIALS, cut]
    )
    knob = [{**r, "knob": "update_interval"} for r in TRIALS]
    assert page.why_pick("amp_pi_plus", [{**BEST[0], "knob": "update_interval"}], knob).startswith(
        "default update_interval=64:"
    )
    assert page.why_pick("amp_pi_plus", [], TRIALS[:2]) == (
        "No rung fits: default e256 failed (host_oom), default e128 failed (host_oom)."
    )
    assert "unstable" not in why
    rough = page.why_pick("amp_pi_plus", [{**BEST[0], "unstable": "1"}], TRIALS)
    assert rough.endswith(
        " Its samples/s is unstable (95% interval 2100-2250, 7% of it): wider than measure.max_ci_frac, so the "
        "comparisons above rest on a rough figure; measure it again (measure.recheck_unstable=true) or over a "
        "longer measure.window_s before relying on it."
    ), rough


def test_a_rate_without_an_interval_has_no_bar_and_a_tie_says_what_broke_it() -> None:
    """A window of too few points records its interval as 0 to inf: no bar from 0 is drawn, and the paragraph says
    the noise is unknown; a pick tied with a faster one says what broke the tie."""
    open_rows = [
        {**r, "samples_per_s_lo": "0", "samples_per_s_hi": "inf"} if r["status"] == "ok" else r for r in TRIALS
    ]
    pick = {
        **open_rows[4],
        "tie": "tied on samples_per_s with default e64 (within the measured noise); broken by min_avg_util",
    }
    sps = charts.case_chart(open_rows, "amp_pi_plus", [pick]).sps
    assert sps[0] == Series("default", (64.0,), (2178.0,), lo=(2178.0,), hi=(2178.0,), no_interval=(64.0,))
    why = page.why_pick("amp_pi_plus", [pick], open_rows)
    assert why.startswith("hiutil e64: 777 samples/s (no interval), min avg util 22.2%; picked on min avg util. ")
    assert (
        "default's best, e64: 2178 samples/s (no interval), min avg util 38.6%; 16.4 points above the pick on the "
        "objective (min avg util); of unknown noise against the pick (no interval on one side or both) on samples/s."
    ) in why
    assert why.endswith(" Tied on samples_per_s with default e64 (within the measured noise); broken by min_avg_util.")


def test_why_this_pick_compares_on_the_pick_objective_and_says_above_below_or_within() -> None:
    """Under the util objective a faster profile is no rival: it is said to be below on util and above on samples/s
    (its interval clear of the pick's), never "within reach"; under samples/s, overlapping intervals are within
    the noise and clear ones above or below."""
    pick = {**TRIALS[2], "samples_per_s": "923", "samples_per_s_lo": "753", "samples_per_s_hi": "1093"}
    faster = {**TRIALS[4], "samples_per_s": "1316", "samples_per_s_lo": "1228", "samples_per_s_hi": "1405"}
    why = page.why_pick("amp_pi_plus", [{**pick, "objective": "min_avg_util"}], [pick, faster])
    assert "picked on min avg util" in why
    assert "16.4 points below the pick on the objective (min avg util); above the pick's interval on samples/s" in why
    assert "within" not in why
    close = {**faster, "samples_per_s": "1000", "samples_per_s_lo": "900", "samples_per_s_hi": "1100"}
    why = page.why_pick("amp_pi_plus", [{**pick, "objective": "samples_per_s"}], [pick, close])
    assert "picked on samples/s" in why
    assert "within the noise of the pick (the intervals overlap) on the objective (samples/s)" in why
    slow = {**faster, "samples_per_s": "500", "samples_per_s_lo": "450", "samples_per_s_hi": "550"}
    why = page.why_pick("amp_pi_plus", [{**pick, "objective": "samples_per_s"}], [pick, slow])
    assert "below the pick's interval on the objective (samples/s); 16.4 points below the pick on min avg util" in why
    nan = {**TRIALS[0], "status": "diverged", "reason": ""}
    why = page.why_pick("amp_pi_plus", [pick], [nan, pick])
    assert "Above it: e256 fits, but its training went NaN or inf (diverged)." in why


# ---------------------------------------------------------------- files


def write_sweep(root: Path) -> None:
    for name, rows in (("trials.tsv", TRIALS), ("best_by_case.tsv", BEST)):
        cols = list(dict.fromkeys(k for r in rows for k in r))
        with open(root / name, "w", newline="") as fh:
            writer = csv.DictWriter(fh, cols, delimiter="\t", restval="")
            writer.writeheader()
            writer.writerows(rows)
    for row in TRIALS[:3]:
        folder = root / row["trial_dir"]
        folder.mkdir(parents=True)
        with open(folder / "samples.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, ["t", "index", "util", "mem_mb"])
            writer.writeheader()
            writer.writerows(SAMPLES)
        (folder / "progress.jsonl").write_text("\n".join(PROGRESS) + "\n")
        (folder / "verdict.json").write_text(json.dumps({"status": row["status"], "reason": row["reason"]}))
        (folder / "cmd.txt").write_text("python -m torch.distributed.run ...\n")
        os.utime(folder / "cmd.txt", (T0, T0))


def test_write_report_reads_the_folders_and_writes_every_png_and_the_page(tmp_path: Path) -> None:
    write_sweep(tmp_path)
    files = build.read_trial(tmp_path / TRIALS[2]["trial_dir"])
    assert (files.launched_t, len(files.samples), files.verdict["status"]) == (T0, 4, "ok")
    assert build.read_trial(tmp_path / "nowhere") == TrialFiles()  # trials 3-5 have no folder: empty charts
    out = build.write_report(tmp_path)
    assert out == tmp_path / "report.md"
    pngs = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "plots").rglob("*.png"))
    assert pngs == sorted(["plots/amp_pi_plus.png", *(f"plots/{charts.trial_plot_name(r)}" for r in TRIALS)])
    for png in pngs:
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / png).stat().st_size > 10_000
    assert out.read_text() == page.summary_md("s1", BEST, TRIALS)


def test_a_peak_the_sampler_never_saw_is_no_figure_not_zero() -> None:
    """trials.tsv fills max_memN with 0 where a trial has no figure (a probe whose ranks died before they were seen)."""
    assert charts.peak_mem({"max_mem0": "0", "max_mem1": "0"}) is None
    assert charts.peak_mem({"max_mem0": "0", "max_mem1": "700"}) == 700.0
    text = page.summary_md("s1", BEST, [{**TRIALS[0], "max_mem0": "0", "max_mem1": "0"}])
    assert "| 0 | default | e256 | oom_or_nccl | host_oom | 28 |  |" in text, text
