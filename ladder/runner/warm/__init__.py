"""The warm starter: the proxy's ranks forked from an interpreter that has torch imported already, so that a sweep
pays torch's import once rather than at every rank's start. `starter` is the orchestrator's side (`Starters`),
`server` the starter process, `client` a rank's stand-in, `protocol` what the three agree on; a rank forked warm
runs, ends, is stopped and is measured as the same rank started cold (docs/trials.md)."""

from ladder.runner.warm.client import main, stands_in
from ladder.runner.warm.protocol import CGROUP_VAR, IDENTITY, LINKS_VAR, MODULE, SHARED_VAR, SOCKET_VAR
from ladder.runner.warm.server import PRELOAD
from ladder.runner.warm.starter import STARTERS, Starter, Starters, start

__all__ = [
    "CGROUP_VAR",
    "IDENTITY",
    "LINKS_VAR",
    "MODULE",
    "PRELOAD",
    "SHARED_VAR",
    "SOCKET_VAR",
    "STARTERS",
    "Starter",
    "Starters",
    "main",
    "stands_in",
    "start",
]
