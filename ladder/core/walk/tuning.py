"""How the walk moves: its settings (`Tuning`) and the strategies a sweep may name (`Strategy`).

Each walk setting's default is written here once: the sweep's schema (`ladder.settings.config`) takes its defaults
from `Tuning`, and a sweep builds its `Tuning` from its validated settings (`ladder.sweep.context.tuning`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.core.records import Word


class Strategy(Word):
    """How the walk picks among the rungs left (`strategy=`): the value is the word a config gives."""

    PLAIN = "walk"  # the highest rung left, one rung at a time (the config word stays `walk`)
    MODEL = "model"  # seeds later profiles from earlier picks, jumps on a memory line, may descend


@dataclass(frozen=True)
class Tuning:
    """The sweep's walk settings (same names as its config keys), and what its objective implies (`descend`,
    `throughput`, `noise`: here as for the default objective, min_avg_util, which grows with num_envs)."""

    strategy: Strategy = Strategy.MODEL
    mem_headroom_frac: float = 0.05  # jump only to rungs the memory line predicts to leave this fraction free
    mem_margin_frac: float = 0.10  # skip a rung only when the line predicts it over the card by more than this
    # samples/s: a lower rung is taken to beat the one above by at most this factor, so a profile whose best even this
    # many times over stays below the case's best is not measured lower; None = always measure lower. 1.3: the
    # largest such gain on record is 1.22
    descent_gain_max: float | None = 1.3
    descent_short: bool = True  # a descent step is a short probe unless a measured pair had fewer envs as fast
    # with descent_short: a best whose GPUs NVML saw busy under this util (%), clear of the card, is not descended
    # (neither memory nor GPU time near a limit); 45 = the decision table's "low util"; None = off
    descent_idle_util: float | None = 45.0
    descend: bool = False  # measure below the largest fit while fewer envs do better (objective samples/s)
    throughput: bool = False  # the objective is samples/s: at most proportional to num_envs (an upper bound)
    noise: float = 0.0  # the objective's run-to-run noise as the pick allows it (`pick.RUN_TO_RUN`), for `beat`


DEFAULT = Tuning()  # every default: how a caller told nothing else walks
