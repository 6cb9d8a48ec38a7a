"""The MimicKit workload: a case's trial is MimicKit's own `mimickit/run.py`. Pure planning.

    python mimickit/run.py --arg_file args/<case>_args.txt --mode train --num_envs N
        --devices cuda:0 cuda:1 --visualize false --logger txt --out_dir <trial folder> --max_samples S
        --agent_config <trial folder>/agent.yaml --master_port P [--engine_config data/engines/newton_engine.yaml]

MimicKit reads the command line first and the args file after it, keeping the first value of every key
(`util/arg_parser.py`), so these flags override the file's. It starts its own ranks, one process per
`--devices` entry (`run.py`), so the launcher is `direct`; `--master_port` is ladder's free port instead of
MimicKit's random one in 6000-7000. The program starts in the MimicKit folder (the args files name
`data/...` relative to it), so the trial folder must be absolute. The agent config is the case's embedded copy
with the profile applied. Progress: rank 0 prints a `| Iteration | N |` table after every iteration; log.txt
gets a row only every `iters_per_output` (100-200) iterations, too rarely for a measurement window, so the
stdout table is the default (`learning/base_agent.py`, `util/logger.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import yaml

from ladder.config import Case, Profile
from ladder.errors import ConfigError, LadderError
from ladder.workloads.builtin import Placement
from ladder.workloads.profiles import apply_profile, skipped_leaves
from ladder.workloads.spec import STDOUT_FILE, Launcher, ProgressKind, TrialSpec

RUN_PY = "mimickit/run.py"
LOG_TXT = "log.txt"  # MimicKit's txt logger file in --out_dir
NUM_ENVS = "num_envs"
PROGRESS_FILES = {ProgressKind.MIMICKIT_STDOUT: STDOUT_FILE, ProgressKind.MIMICKIT_LOG: LOG_TXT}


@dataclass(frozen=True)
class MimicKitConf:
    """How to run MimicKit (the `workload.mimickit_*` settings)."""

    root: str  # the MimicKit checkout: holds mimickit/run.py, args/ and data/
    python: str = ""  # interpreter with MimicKit's dependencies; "" = the placement's (ladder's own)
    engine_config: str = ""  # e.g. data/engines/newton_engine.yaml (the seeds' Newton); "" = the args file's
    max_iters: int = 2000  # --max_samples = this many iterations of samples: MimicKit stops itself by then
    num_envs: int = 0  # --num_envs while the ladder walks another knob; must be set then
    progress: ProgressKind = ProgressKind.MIMICKIT_STDOUT  # or MIMICKIT_LOG (log.txt, every iters_per_output)


def plan_mimickit(
    case: Case,
    profile: Profile,
    rung: int,
    knob: str,
    conf: MimicKitConf,
    place: Placement,
    trial_dir: str,
    extra_env: dict[str, str],
) -> TrialSpec:
    _check(case, knob, conf, trial_dir)
    agent = knob_agent(apply_profile(case.agent, profile.agent_patch), knob, rung)
    num_envs = rung if knob == NUM_ENVS else conf.num_envs
    return TrialSpec(
        argv=mimickit_argv(case, num_envs, agent, conf, place, trial_dir),
        env={**extra_env, "PYTHONUNBUFFERED": "1"},
        files={"agent.yaml": yaml.safe_dump(agent, sort_keys=False)},
        progress_file=PROGRESS_FILES.get(conf.progress, STDOUT_FILE),
        nproc=place.nproc,
        info=_info(case, profile, knob, conf, place),
        launcher=Launcher.DIRECT,
        progress_kind=conf.progress if conf.progress in PROGRESS_FILES else ProgressKind.MIMICKIT_STDOUT,
        cwd=conf.root,
    )


def mimickit_argv(
    case: Case, num_envs: int, agent: dict[str, Any], conf: MimicKitConf, place: Placement, trial_dir: str
) -> tuple[str, ...]:
    argv = (
        conf.python or place.python, RUN_PY,
        "--arg_file", case.args_file,
        "--mode", "train",
        "--num_envs", str(num_envs),
        "--devices", *place.devices(),
        "--visualize", "false",
        "--logger", "txt",
        "--out_dir", trial_dir,
        "--max_samples", str(max_samples(agent, num_envs, place.nproc, conf.max_iters)),
        "--agent_config", f"{trial_dir}/agent.yaml",
        "--master_port", str(place.port),
    )  # fmt: skip
    return argv + (("--engine_config", conf.engine_config) if conf.engine_config else ())


def max_samples(agent: dict[str, Any], num_envs: int, nproc: int, iters: int) -> int:
    """MimicKit counts samples over all ranks: steps_per_iter × num_envs per rank per iteration."""
    return iters * int(agent.get("steps_per_iter", 32)) * num_envs * nproc


def knob_agent(agent: dict[str, Any], knob: str, value: int) -> dict[str, Any]:
    """The agent config with the walked knob set, when the knob is an agent key rather than num_envs."""
    return agent if knob == NUM_ENVS else {**agent, knob: value}


def _check(case: Case, knob: str, conf: MimicKitConf, trial_dir: str) -> None:
    if not conf.root:
        raise ConfigError("workload mimickit has no MimicKit folder", "set workload.mimickit_root or MIMICKIT_ROOT")
    if not case.args_file or not case.agent:
        raise ConfigError(f"case '{case.name}' has no MimicKit args file or agent config",
                          "use a case from scripts/gen_cases.py, or workload.kind=proxy")  # fmt: skip
    if not PurePath(trial_dir).is_absolute():
        raise LadderError(f"trial folder {trial_dir!r} is relative, but MimicKit starts in {conf.root!r}",
                          "pass the absolute trial folder (Path.absolute())")  # fmt: skip
    _check_knob(case, knob, conf)


def _check_knob(case: Case, knob: str, conf: MimicKitConf) -> None:
    if knob == NUM_ENVS:
        return
    if knob not in case.agent:
        keys = ", ".join(sorted(k for k, v in case.agent.items() if isinstance(v, int) and not isinstance(v, bool)))
        raise ConfigError(f"MimicKit cannot walk knob '{knob}'", f"walk num_envs or an agent key: {keys}")
    if conf.num_envs <= 0:
        raise ConfigError(f"the ladder walks '{knob}' but no num_envs is fixed",
                          "set workload.mimickit_num_envs")  # fmt: skip


def _info(case: Case, profile: Profile, knob: str, conf: MimicKitConf, place: Placement) -> dict[str, str]:
    return {
        "workload": "mimickit",
        "device": place.device,
        "nproc": str(place.nproc),
        "port": str(place.port),
        "knob": knob,
        "mimickit_root": conf.root,
        "engine_config": conf.engine_config,
        "profile_skipped": ",".join(skipped_leaves(case.agent, profile.agent_patch)),
    }


def missing_files(conf: MimicKitConf, case: Case) -> list[str]:
    """What the MimicKit folder lacks for this case (reads the file system: call it once, at the start)."""
    root = Path(conf.root)
    wanted = [RUN_PY, case.args_file, *([conf.engine_config] if conf.engine_config else [])]
    return [str(root / rel) for rel in wanted if rel and not (root / rel).is_file()]
