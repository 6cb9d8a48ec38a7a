"""The summary names the warm starter a sweep's ranks were forked from once per process: a multirun's jobs share it."""

from __future__ import annotations

from ladder.runner import warm
from ladder.search import starter_lines


def test_a_starter_is_named_by_the_first_job_that_used_it_only() -> None:
    shared, other = warm.Starter(None, "/tmp/ladder-warm-a", 1.5), warm.Starter(None, "/tmp/ladder-warm-b", 2.0)
    told: set[str] = set()
    first = starter_lines([shared], told)
    assert len(first) == 1 and first[0].startswith("warm starter: shared (") and "/tmp/ladder-warm-a" in first[0]
    assert starter_lines([shared], told) == []  # the multirun's next job: said already
    later = starter_lines([shared, other], told)  # a new one (the first ended, a job started its own) is named
    assert len(later) == 1 and "/tmp/ladder-warm-b" in later[0]
