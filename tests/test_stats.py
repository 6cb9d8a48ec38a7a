"""The window rule and the figures, on recorded series."""

from __future__ import annotations

import pytest

from ladder.monitor import Sample
from ladder.progress import Point, parse_line
from ladder.stats import Window, figures, open_window, stable_start, window_closed

RULE = (3, 3, 0.2)


def points(step_times: list[float], t0: float = 100.0, per_iter: float = 640.0) -> list[Point]:
    out, t = [], t0
    for i, step in enumerate(step_times, start=1):
        t += step
        out.append(Point(t=t, iter=i, samples=per_iter * i, step_time_s=step))
    return out


def test_window_waits_for_warmup_and_a_stable_step_time() -> None:
    pts = points([3.0, 1.5, 1.0, 0.65, 0.5, 0.5, 0.5, 0.5])
    assert stable_start(pts, *RULE) == pts[6].t  # iters 5-7 agree within 20%; earlier ones do not
    assert stable_start(pts[:6], *RULE) is None


def test_window_opens_ungated_at_the_timeout() -> None:
    pts = points([1.0, 3.0, 1.0, 3.0])
    assert open_window(pts, launch_t=100.0, now=105.0, window_s=10, rule=RULE, timeout_s=30) is None
    window = open_window(pts, launch_t=100.0, now=131.0, window_s=10, rule=RULE, timeout_s=30)
    assert window == Window(131.0, 141.0, gated=False)


def test_window_closes_when_progress_passes_its_end() -> None:
    pts = points([0.5] * 10)
    window = Window(pts[2].t, pts[2].t + 2.0, gated=True)
    assert not window_closed(window, pts[:6])
    assert window_closed(window, pts[:7])


def test_figures_over_the_window_only() -> None:
    pts = points([1.0] * 10)  # t = 101..110, 640 samples per iteration
    window = Window(104.0, 108.0, gated=True)
    samples = [Sample(float(t), i, util=(90.0 if 104 <= t <= 108 else 0.0) - 20 * i, mem_mb=500.0 + t)
               for t in range(100, 111) for i in (0, 1)]  # fmt: skip
    f = figures(samples, pts, window, launch_t=100.0)
    assert f["avg_util0"] == 90.0 and f["avg_util1"] == 70.0 and f["min_avg_util"] == 70.0
    assert f["p50_util"] == 80.0 and f["n_samples"] == 5.0
    assert f["max_mem0"] == 610 and f["max_mem1"] == 610  # peak over the whole trial, not only the window
    assert f["samples_per_s"] == pytest.approx(640.0) and f["window_start_s"] == 4.0 and f["gated"] == 1.0


def test_failed_trial_has_memory_but_no_rate() -> None:
    samples = [Sample(1.0, 0, 12.0, 300.0), Sample(1.1, 0, 14.0, 900.0)]
    f = figures(samples, [], None, launch_t=0.0)
    assert f["max_mem0"] == 900 and "samples_per_s" not in f and f["min_avg_util"] == 13.0


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"t": 1.5, "iter": 2, "samples": 128, "step_time_s": 0.5, "peak_mem_mb": [1, 2]}', Point(1.5, 2, 128.0, 0.5, (1.0, 2.0))),
        ('{"t": 1.5, "iter": 2, "iter_time": 0.7}', Point(1.5, 2, 0.0, 0.7)),
        ('{"event": "start", "t": 1.0}', None),
        ("not json", None),
        ('{"t": 1.5, "iter": 3, "samp', None),
    ],
    ids=["proxy", "metrics-jsonl", "start-event", "garbage", "partial"],
)
def test_parse_line(line: str, expected: Point | None) -> None:
    assert parse_line(line) == expected
