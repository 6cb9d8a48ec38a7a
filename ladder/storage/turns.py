"""Who may launch now: turn-taking between the processes that run one case's walk (its Optuna study).

A case's walk is one, however many processes run it (the same command started twice, hosts on one storage server):
each next decision depends on the outcome of the trial before it. So a process

1. waits for its turn (`wait`): while a live owner runs a trial of the case, it waits for that trial's outcome (a
   dead owner's trial is marked interrupted on the way, so the wait never outlives the process waited on), then
   loads the case's records once: the snapshot it decides from;
2. claims its decision (`claim`): the trial is begun (RUNNING, with its owner, in one write), and if an older trial
   of a live owner is running too (another process decided at the same moment, or while this one waited for its
   devices), it withdraws its own and gets nothing: the older trial runs, and this process decides again from its
   outcome;
3. withdraws a trial it began but will not launch (`withdraw`): no record shows it, and nothing waits on it.

`now` is `wait` without waiting, for a process that has waited for something else (its devices) since it decided.
The storage primitives (trials begun, liveness of their owners, records rebuilt) are `ladder.storage.studies`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from optuna.trial import FrozenTrial

from ladder.core.records import TrialRecord
from ladder.storage import heartbeat as hb
from ladder.storage import studies

log = logging.getLogger(__name__)

POLL_S = 1.0  # how often a process waiting for another's trial of the same case looks again


@dataclass(frozen=True)
class Turns:
    """The turn-taking of one process on one case's study."""

    study: studies.CaseStudy
    stale_after_s: float = hb.STALE_AFTER_S  # a trial of another host is abandoned once its heartbeat is this old
    poll_s: float = POLL_S
    end: Callable[[studies.Abandoned], None] | None = None  # ends what is left of a dead owner's trial (the sweep's)

    def wait(self, landed: Callable[[list[TrialRecord]], None] | None = None) -> list[TrialRecord]:
        """Wait until no live owner runs a trial of the case; the case's records then, loaded once. `landed` is
        given the case's records each time a trial waited on ends while another is running (an owner that runs
        trials back to back leaves no moment free of them: without it, nothing of its would show until its end)."""
        told: set[int] = set()
        while running := self.running():
            if landed is not None and told - {t.number for t in running}:
                landed(studies.records(self.study))
                told &= {t.number for t in running}
            for t in (t for t in running if t.number not in told):
                told.add(t.number)
                log.info(
                    "%s: trial %d (%s e%s) is running in %s; waiting for its outcome before deciding",
                    self.study.study_name,
                    t.number,
                    t.params.get("variant"),
                    t.params.get("num_envs"),
                    owner_words(t.user_attrs),
                )
            time.sleep(self.poll_s)
            studies.mark_abandoned(self.study, self.stale_after_s, self.end)
        return studies.records(self.study)

    def now(self) -> list[TrialRecord] | None:
        """Without waiting: the case's records if no live owner runs a trial of it now; None if one does."""
        return None if self.running() else studies.records(self.study)

    def claim(
        self, profile: str, num_envs: int, profiles: tuple[str, ...], attrs: dict[str, Any]
    ) -> studies.Claim | None:
        """Begin the decided trial (see `studies.begin` for `attrs`); None, and no trace, when an older trial of a
        live owner is running too: that one came first."""
        trial = studies.begin(self.study, profile, num_envs, profiles, attrs)
        if any(t.number < trial.number for t in self.running()):
            self.withdraw(trial)
            return None
        return trial

    def withdraw(self, trial: studies.Claim) -> None:
        """End a trial that was begun but never launched, with no outcome."""
        studies.withdraw(self.study, trial)

    def running(self) -> list[FrozenTrial]:
        """The case's RUNNING trials whose owner may be alive (this process's own included)."""
        return studies.live_running(self.study, self.stale_after_s)


def owner_words(attrs: Mapping[str, Any]) -> str:
    host, pid = attrs.get("owner_host"), attrs.get("owner_pid")
    return f"another process (pid {pid} on {host})" if host and pid else "another process"
