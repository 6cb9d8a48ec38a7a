"""The MimicKit workload: a case's trial is MimicKit's own `mimickit/run.py`. Pure planning.

    python mimickit/run.py --arg_file args/<case>_args.txt --mode train --num_envs N
        --devices cuda:0 cuda:1 --visualize false --logger txt --out_dir <trial folder> --max_samples S
        --agent_config <trial folder>/agent.yaml --master_port P [--engine_config data/engines/newton_engine.yaml]
        [--env_config <trial folder>/env.yaml]

MimicKit reads the command line first and the args file after it, keeping the first value of every key
(`util/arg_parser.py`), so these flags override the file's. It starts its own ranks, one process per
`--devices` entry (`run.py`), so the launcher is `direct`; `--master_port` is ladder's free port instead of
MimicKit's random one in 6000-7000. The program starts in the MimicKit folder (the args files name
`data/...` relative to it), so the trial folder must be absolute. The agent config is the case's embedded copy
with the profile applied. Progress: rank 0 prints a `| Iteration | N |` table after every iteration; log.txt
gets a row only every `iters_per_output` (100-200) iterations, too rarely for a measurement window, so the
stdout table is the default (`learning/base_agent.py`, `util/logger.py`).

The env config is the args file's unless `workload.env_patch` is set: then the case's env config (the file its
args file names with `--env_config`) is read from the MimicKit folder when the trial is planned, patched, and
handed to MimicKit as `<trial folder>/env.yaml`, a file of the trial like agent.yaml (so the reuse identity, a
hash of the trial's files, sees the patch). The checkout's own files are never written. This is the one effect
here: `read_env_config` reads two small files, and only with a patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import yaml

from ladder.core import paths
from ladder.core.errors import ConfigError, LadderError
from ladder.core.spec import Launcher, ProgressKind, TrialSpec
from ladder.settings.config import CaseConf, Profile
from ladder.workloads.builtin import Placement
from ladder.workloads.profiles import apply_profile, skipped_leaves

RUN_PY = "mimickit/run.py"
ENV_FILE = "env.yaml"  # the patched env config, in the trial folder
LOG_TXT = "log.txt"  # MimicKit's txt logger file in --out_dir
NUM_ENVS = "num_envs"
PROGRESS_FILES = {ProgressKind.MIMICKIT_STDOUT: paths.STDOUT, ProgressKind.MIMICKIT_LOG: LOG_TXT}


@dataclass(frozen=True)
class MimicKitConf:
    """How to run MimicKit (the `workload.mimickit_*` settings)."""

    root: str  # the MimicKit checkout: holds mimickit/run.py, args/ and data/
    python: str = ""  # interpreter with MimicKit's dependencies; "" = the placement's (ladder's own)
    engine_config: str = ""  # e.g. data/engines/newton_engine.yaml (Newton); "" = the args file's
    max_iters: int = 2000  # --max_samples = this many iterations of samples: MimicKit stops itself by then
    num_envs: int = 0  # --num_envs while the ladder walks another knob; must be set then
    progress: ProgressKind = ProgressKind.MIMICKIT_STDOUT  # or MIMICKIT_LOG (log.txt, every iters_per_output)
    env_patch: Mapping[str, Any] = field(default_factory=dict)  # keys set on the case's env config; {} = as shipped


def plan_mimickit(
    case: CaseConf,
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
    files = {paths.AGENT: yaml.safe_dump(agent, sort_keys=False)}
    added: list[str] = []
    if conf.env_patch:
        base = read_env_config(conf.root, case.args_file)
        files[ENV_FILE] = yaml.safe_dump(patch_env(base, conf.env_patch), sort_keys=False)
        added = sorted(set(conf.env_patch) - set(base))
    return TrialSpec(
        argv=mimickit_argv(case, num_envs, agent, conf, place, trial_dir),
        env={**extra_env, "PYTHONUNBUFFERED": "1"},
        files=files,
        progress_file=PROGRESS_FILES.get(conf.progress, paths.STDOUT),
        nproc=place.nproc,
        info=_info(case, profile, knob, conf, place) | ({"env_added": ",".join(added)} if added else {}),
        launcher=Launcher.DIRECT,
        progress_kind=conf.progress if conf.progress in PROGRESS_FILES else ProgressKind.MIMICKIT_STDOUT,
        progress_per_iteration=True,  # MimicKit's table and log come once an iteration
        cwd=conf.root,
    )


def mimickit_argv(
    case: CaseConf, num_envs: int, agent: dict[str, Any], conf: MimicKitConf, place: Placement, trial_dir: str
) -> tuple[str, ...]:
    argv = (
        conf.python or place.python,
        RUN_PY,
        "--arg_file",
        case.args_file,
        "--mode",
        "train",
        "--num_envs",
        str(num_envs),
        "--devices",
        *place.devices(),
        "--visualize",
        "false",
        "--logger",
        "txt",
        "--out_dir",
        trial_dir,
        "--max_samples",
        str(max_samples(agent, num_envs, place.nproc, conf.max_iters)),
        "--agent_config",
        f"{trial_dir}/{paths.AGENT}",
        "--master_port",
        str(place.port),
    )
    argv += ("--engine_config", conf.engine_config) if conf.engine_config else ()
    return argv + (("--env_config", f"{trial_dir}/{ENV_FILE}") if conf.env_patch else ())


def patch_env(env: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """The env config with the patch's keys set (a nested mapping merges into a mapping; anything else replaces);
    keys the config lacks are added (MimicKit's envs read many keys with a default). The input is left unchanged."""
    out = dict(env)
    for key, value in patch.items():
        old = out.get(key)
        out[key] = patch_env(old, value) if isinstance(value, Mapping) and isinstance(old, Mapping) else value
    return out


def args_file_value(text: str, key: str) -> str:
    """The first value of `--key` in a MimicKit args file, as `util/arg_parser.py` reads it (whitespace-split
    lines, `#` comment lines skipped, the first occurrence wins); "" where the key is absent or has no value."""
    words = [w for line in text.splitlines() if line and not line.startswith("#") for w in line.split()]
    for i, word in enumerate(words):
        if word == f"--{key}":
            return words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else ""
    return ""


def check_root(root: str) -> None:
    """Refuse a MimicKit folder that is not there or holds no `mimickit/run.py` (reads the file system), before
    the sweep writes anything: its first trial would end in a traceback from the launch."""
    fix = f"set workload.mimickit_root=/path/to/MimicKit (the checkout that holds {RUN_PY}), or export MIMICKIT_ROOT"
    if not Path(root).is_dir():
        raise ConfigError(f"workload.mimickit_root {root!r} is not a folder", fix)
    if not (Path(root) / RUN_PY).is_file():
        raise ConfigError(f"workload.mimickit_root {root!r} holds no {RUN_PY}: is it a MimicKit checkout?", fix)


def read_env_config(root: str, args_file: str) -> dict[str, Any]:
    """The case's env config as MimicKit would load it: the file its args file names, relative to the MimicKit
    folder (reads the file system)."""
    args_path = Path(root) / args_file
    if not args_path.is_file():
        raise ConfigError(
            f"workload.env_patch is set, but the args file {args_path} is not there",
            "set workload.mimickit_root to a MimicKit checkout that has it",
        )
    rel = args_file_value(args_path.read_text(), "env_config")
    if not rel:
        raise ConfigError(
            f"workload.env_patch is set, but {args_path} names no --env_config to patch",
            "name --env_config data/envs/<env>.yaml in the args file, or drop env_patch",
        )
    env_path = Path(root) / rel
    try:
        env = yaml.safe_load(env_path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"workload.env_patch is set, but the env config {env_path} (named by {args_path}) cannot be read: {exc}",
            "fix the file or the args file's --env_config",
        ) from exc
    if not isinstance(env, dict):
        raise ConfigError(f"the env config {env_path} is not a mapping of keys", "fix the file")
    return env


def max_samples(agent: dict[str, Any], num_envs: int, nproc: int, iters: int) -> int:
    """MimicKit counts samples over all ranks: steps_per_iter × num_envs per rank per iteration."""
    return iters * int(agent.get("steps_per_iter", 32)) * num_envs * nproc


def knob_agent(agent: dict[str, Any], knob: str, value: int) -> dict[str, Any]:
    """The agent config with the walked knob set, when the knob is an agent key rather than num_envs."""
    return agent if knob == NUM_ENVS else {**agent, knob: value}


def _check(case: CaseConf, knob: str, conf: MimicKitConf, trial_dir: str) -> None:
    if not conf.root:
        raise ConfigError("workload mimickit has no MimicKit folder", "set workload.mimickit_root or MIMICKIT_ROOT")
    if not case.args_file or not case.agent:
        raise ConfigError(
            f"case '{case.name}' has no MimicKit args file or agent config",
            "use a case from scripts/gen_cases.py, or workload.kind=proxy",
        )
    if not PurePath(trial_dir).is_absolute():
        raise LadderError(
            f"trial folder {trial_dir!r} is relative, but MimicKit starts in {conf.root!r}",
            "pass the absolute trial folder (Path.absolute())",
        )
    _check_knob(case, knob, conf)


def _check_knob(case: CaseConf, knob: str, conf: MimicKitConf) -> None:
    if knob == NUM_ENVS:
        return
    if knob not in case.agent:
        keys = ", ".join(sorted(k for k, v in case.agent.items() if isinstance(v, int) and not isinstance(v, bool)))
        raise ConfigError(f"MimicKit cannot walk knob '{knob}'", f"walk num_envs or an agent key: {keys}")
    if conf.num_envs <= 0:
        raise ConfigError(f"the ladder walks '{knob}' but no num_envs is fixed", "set workload.mimickit_num_envs")


def _info(case: CaseConf, profile: Profile, knob: str, conf: MimicKitConf, place: Placement) -> dict[str, str]:
    return {
        "workload": "mimickit",
        "device": place.device,
        "nproc": str(place.nproc),
        "port": str(place.port),
        "knob": knob,
        "mimickit_root": conf.root,
        "engine_config": conf.engine_config,
        "env_patch": ",".join(f"{k}={v}" for k, v in conf.env_patch.items()),
        "profile_skipped": ",".join(skipped_leaves(case.agent, profile.agent_patch)),
    }


def missing_files(conf: MimicKitConf, case: CaseConf) -> list[str]:
    """What the MimicKit folder lacks for this case (reads the file system: call it once, at the start)."""
    root = Path(conf.root)
    wanted = [RUN_PY, case.args_file, *([conf.engine_config] if conf.engine_config else [])]
    return [str(root / rel) for rel in wanted if rel and not (root / rel).is_file()]
