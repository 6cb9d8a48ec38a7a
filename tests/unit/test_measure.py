"""A fit needs a measurement (`trial.run` on small real programs): the window waits for its points, a trainer that
prints too rarely is `unmeasured`, one whose lines never match is a setting to fix, and a slow first update that
visibly works is no hang."""

from __future__ import annotations

import time

from ladder.core.records import Point
from ladder.core.stats import Window
from ladder.runner import trial
from ladder.settings.config import MeasureConf


def conf(**kw: float) -> MeasureConf:
    base = {
        "warmup_iters": 1,
        "stable_k": 2,
        "stable_tol": 5.0,
        "warmup_timeout_s": 60.0,
        "window_s": 1.0,
        "min_window_iters": 4,
        "startup_timeout_s": 60.0,
        "stall_timeout_s": 60.0,
        "trial_timeout_s": 60.0,
        "kill_grace_s": 2.0,
        "sample_hz": 5.0,
    }
    return MeasureConf(**{**base, **kw})  # type: ignore[arg-type]


def test_out_of_trial_time_while_extended_keeps_the_window_it_had() -> None:
    """A window extended for its wide interval, then the trial's time runs out: it closes at its last point (the
    figures say `unstable`), where a window that never held its points leaves the trial unmeasured."""
    pts = [Point(1000.0 + i, i, 100.0 * i) for i in range(1, 8)]
    now = time.monotonic()
    extended = trial.Watch(
        launch_t=990.0,
        last_progress_mono=now,
        points=list(pts),
        extended=True,
        window=Window(1001.0, 1012.0, gated=True),
    )
    assert trial._stop_reason(extended, conf(trial_timeout_s=1.0), started_mono=now - 5.0) == "window_done"
    assert extended.window == Window(1001.0, 1007.0, gated=True)
    short = trial.Watch(launch_t=990.0, last_progress_mono=now, points=list(pts), window=Window(1001.0, 1012.0, True))
    assert trial._stop_reason(short, conf(trial_timeout_s=1.0), started_mono=now - 5.0) == "trial_timeout"
