"""torchrun's contract with its workers, written down: the variables its agent gives local rank `rank` of `world`
on one node (torch 2.13's `LocalElasticAgent._start_workers`, a static rendezvous, `--log-dir <trial>/ranks`).

Where ladder starts the ranks itself (one rank of any torchrun trainer, several of the proxy: see
`ladder.workloads.builtin.ranks`) it gives each rank these. There is no agent, so no agent store: rank 0 hosts the
rendezvous store (`TORCHELASTIC_USE_AGENT_STORE=False`), and each rank's error file lands where torchrun's log dir
would put it, under a run named `<RUN_ID>_direct`, so the evidence is read the same way.
"""

from __future__ import annotations

RUN_ID = "none"  # torchrun's --rdzv-id default (static rendezvous), in TORCHELASTIC_RUN_ID and the log folder's name
DIRECT_RUN = f"{RUN_ID}_direct"  # the log folder of ranks started without the agent
ROLE = "default"  # the agent's role name (ROLE_NAME), and its `--tee` prefix with the local rank: `[default0]:`


def rank_dir(log_dir: str, rank: int) -> str:
    """Where rank `rank`'s logs and error file go: `<log_dir>/none_direct/attempt_0/<rank>`."""
    return f"{log_dir}/{DIRECT_RUN}/attempt_0/{rank}"


def rank_env(rank: int, world: int, port: int, log_dir: str) -> dict[str, str]:
    """The variables torchrun's agent sets for local rank `rank` of `world` (one node, one role), with NCCL's async
    error handling on as torchrun turns it on (a `nccl_env` value, set after these, wins)."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(rank),
        "ROLE_NAME": ROLE,
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "GROUP_WORLD_SIZE": "1",
        "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": RUN_ID,
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",  # the agent's own, inherited by its workers
        "TORCHELASTIC_ERROR_FILE": f"{rank_dir(log_dir, rank)}/error.json",
    }
