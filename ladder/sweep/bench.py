"""The whole bench as one command: `python -m ladder.search case=all` becomes the multirun of every case that can
run here, in the bench's order, into one sweep (`sweep=<name>` resumes it, every finished case reused). What
cannot run is skipped with one line each. The plan (`bench.tsv` in the sweep folder) tells each case's job where
it stands, and the job says so on the terminal and in `bench.log`.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir

from ladder.core import bench
from ladder.core.errors import ConfigError
from ladder.core.memory.similar import CaseFacts
from ladder.core.paths import SweepPaths, sweep_name
from ladder.core.spec import Kind
from ladder.settings import argv as argvs
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import Settings, register, settings_from
from ladder.storage import sweeps, tsv
from ladder.workloads import planner
from ladder.workloads.mimickit import args_file_value, missing_files

log = logging.getLogger(__name__)

ALL = "all"  # `case=all`: the bench
PLAN_TSV = "bench.tsv"  # the bench's cases in order, with why any is skipped
LOG = "bench.log"  # where the bench stood at each case's start and end, one plain line each
ENGINE_MODULES = {"newton": "newton", "isaac_gym": "isaacgym", "isaac_lab": "isaaclab"}  # engine file -> module
# the methods whose agent has a discriminator (the proxy's `agent.DISC_METHODS`; importing the proxy imports torch)
DISC_METHODS = frozenset({"amp", "add", "ase", "vault"})
ROLLOUT_EXTRA = 6  # floats per env and step besides obs and actions: logp, reward, value, done, return, advantage


def asked(given: Sequence[str]) -> bool:
    """The command line asks for the bench: `case=all`, `case=all:<robot>` (that robot's cases) or
    `case=all:<glob>` (the cases whose names match)."""
    return _asked(given) is not None


def _asked(given: Sequence[str]) -> str | None:
    """The `case=all[:<glob>]` override of a command line, or None."""
    found = [a for a in argvs.overrides_of(list(given)) if a == f"case={ALL}" or a.startswith(f"case={ALL}:")]
    return found[-1] if found else None


def matching(robots: Mapping[str, str], asked_for: str) -> list[str]:
    """The cases `case=all[:<robot or glob>]` names, of `robots` (case -> its robot)."""
    pattern = asked_for.partition(":")[2] or "*"
    if pattern in robots.values():
        return [n for n, robot in robots.items() if robot == pattern]
    return [n for n in robots if fnmatch.fnmatchcase(n, pattern)]


@dataclass(frozen=True)
class Bench:
    """The bench a command line asks for: its sweep, its cases (in order, the skipped last) and their settings."""

    paths: SweepPaths
    members: tuple[bench.Member, ...]
    settings: Mapping[str, Settings]  # of the cases that run
    dry_run: bool = False  # `dry_run=true`: the plan, nothing launched

    @property
    def runs(self) -> list[str]:
        return [m.name for m in self.members if not m.skip]


def build(given: Sequence[str], user: tuple[str, ...] = (), environ: Mapping[str, str] = os.environ) -> Bench:
    """Every case's settings under the command line's overrides, which can run here, and the bench's order."""
    asked_for = _asked(given) or f"case={ALL}"
    rest = [a for a in argvs.overrides_of(list(given)) if a != asked_for and not a.startswith("hydra")]
    robots = {n: f.robot if (f := facts_from_file(n, "", user)) else "" for n in argvs.known_cases(user)}
    names = matching(robots, asked_for)
    if not names:
        raise ConfigError(f"{asked_for} names no case", f"the cases: {', '.join(argvs.known_cases(user))}")
    composed = {name: settings_for(name, rest, user) for name in names}
    members = bench.order(
        [bench.Member(n, s.case.robot, s.case.method, unrunnable(s, environ)) for n, s in composed.items()]
    )
    first = next(iter(composed.values()))
    runs = {m.name: composed[m.name] for m in members if not m.skip}
    return Bench(_paths(first), tuple(members), runs, first.dry_run)


def settings_for(case: str, overrides: Sequence[str], user: tuple[str, ...] = ()) -> Settings:
    """The case's settings as `python -m ladder.search case=<case> <overrides>` would compose them."""
    register()  # the schema conf/config.yaml names (idempotent: `ladder.search` registers it at import)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*overrides, f"case={case}"])
    keys = tuple(o.split("=", 1)[0].lstrip("+~") for o in overrides) + ("case",)
    return settings_from(cfg, argvs.known_cases(user), keys)


def _paths(settings: Settings) -> SweepPaths:
    """The bench's sweep: the one named, the latest (`resume=latest`), else a new one named by the time."""
    root = Path(settings.output_root)
    name = settings.sweep or (sweeps.latest(root) if settings.resume == "latest" else None)
    return SweepPaths.of(root, name or sweep_name(datetime.now(timezone.utc)))


def unrunnable(s: Settings, environ: Mapping[str, str]) -> str:
    """Why a case cannot run here ("" where it can): a MimicKit folder without its files, SMP's prior model
    missing, an engine not installed. The proxy runs every case."""
    got = planner.resolve(planner.parse_kind(s.workload.kind), s.workload.mimickit_root, environ)
    if got.kind is not Kind.MIMICKIT:
        return ""
    root = Path(got.mimickit_root)
    conf = planner.build(s.workload, s.knob, {**environ, planner.ROOT_VAR: str(root)})[0].mimickit
    if conf is not None and (lacks := missing_files(conf, s.case)):
        return f"the MimicKit folder lacks {', '.join(lacks)}"
    priors = [str(s.case.agent[k]) for k in ("smp_prior_cfg", "smp_prior_model") if s.case.agent.get(k)]
    if gone := [p for p in priors if not (root / p).is_file()]:
        return f"SMP's prior model files are missing: {', '.join(str(root / p) for p in gone)}"
    engine = engine_of(s, root)
    module = next((m for key, m in ENGINE_MODULES.items() if key in engine), "")
    if module and not s.workload.mimickit_python and importlib.util.find_spec(module) is None:
        return f"the engine {engine} needs the Python module {module}, which is not installed"
    return ""


def engine_of(s: Settings, root: Path | None = None) -> str:
    """The engine a case runs on: the proxy's own, or MimicKit's engine config (the setting, else the args file's)."""
    if s.workload.engine_config or root is None:
        return Path(s.workload.engine_config).stem or ("proxy" if root is None else "")
    args = root / s.case.args_file
    return Path(args_file_value(args.read_text(), "engine_config")).stem if args.is_file() else ""


def facts(
    name: str, robot: str, method: str, agent: Mapping[str, Any], proxy: Mapping[str, Any], engine: str
) -> CaseFacts:
    """What a case's configuration says of its memory (`conf/case/<name>.yaml`): the floats one env holds, the
    simulator state and one iteration of experience (the proxy's buffers, which mirror MimicKit's)."""
    steps = int(agent.get("steps_per_iter", 32))
    disc = int(proxy.get("disc_obs_dim", 0)) if method in DISC_METHODS else 0
    step = int(proxy.get("obs_dim", 0)) + int(proxy.get("act_dim", 0)) + disc + ROLLOUT_EXTRA
    per_env = float(proxy.get("sim_state_dim", 0)) + steps * step
    model = agent.get("model") or {}
    nets = ",".join(f"{k}={v}" for k, v in sorted(model.items()) if k.endswith("_net"))
    fixed = float(agent.get("disc_buffer_size", 0)) * disc  # the discriminator's replay buffer, allocated up front
    return CaseFacts(name, robot, engine, method, nets, per_env, fixed)


def facts_of(s: Settings) -> CaseFacts:
    proxy = {k: getattr(s.case.proxy, k) for k in ("obs_dim", "act_dim", "disc_obs_dim", "sim_state_dim")}
    return facts(s.case.name, s.case.robot, s.case.method, s.case.agent, proxy, _engine(s))


def facts_from_file(
    name: str, engine: str, user: Sequence[str] = (), patch: Mapping[str, Any] | None = None
) -> CaseFacts | None:
    """A case's facts from its config file (the built-in one, or a user folder's), with `patch` on its agent (what
    the command line set for every case of the bench); None where there is none."""
    raw = case_file(name, user)
    if raw is None:
        return None
    agent = {**(raw.get("agent") or {}), **(patch or {})}
    return facts(name, raw.get("robot", ""), raw.get("method", ""), agent, raw.get("proxy") or {}, engine)


def case_file(name: str, user: Sequence[str] = ()) -> dict[str, Any] | None:
    """A case's config file as written, or None."""
    for folder in (*(Path(d) for d in user), CONF_DIR):
        path = folder / "case" / f"{name}.yaml"
        if path.is_file():
            return yaml.safe_load(path.read_text()) or {}
    return None


def agent_patch(s: Settings, user: Sequence[str] = ()) -> dict[str, Any]:
    """The agent's top-level keys the command line set (where this case's value is not its file's): the bench's
    other cases got them too (`case.agent.steps_per_iter=8`)."""
    written = (case_file(s.case.name, user) or {}).get("agent") or {}
    return {k: v for k, v in s.case.agent.items() if not isinstance(v, dict) and written.get(k, v) != v}


def _engine(s: Settings) -> str:
    got = planner.resolve(planner.parse_kind(s.workload.kind), s.workload.mimickit_root, os.environ)
    return engine_of(s, Path(got.mimickit_root) if got.kind is Kind.MIMICKIT else None)


# ---------------------------------------------------------------- the command line and the plan file


def multirun_argv(given: Sequence[str], b: Bench) -> list[str]:
    """The command line Hydra runs: a multirun of the bench's cases in order, into its one sweep."""
    asked_for = _asked(given)
    keep = [a for a in given if a not in ("-m", "--multirun", asked_for) and not a.startswith(("sweep=", "resume="))]
    return ["-m", *keep, f"case={','.join(b.runs)}", f"sweep={b.paths.sweep}"]


def write_plan(b: Bench) -> None:
    """`bench.tsv`: the cases in order, with their robot, method and why any is skipped (temp file, then rename)."""
    b.paths.sweep_dir.mkdir(parents=True, exist_ok=True)
    head = "order\tcase\trobot\tmethod\tskip\n"
    rows = "".join(f"{i}\t{m.name}\t{m.robot}\t{m.method}\t{m.skip}\n" for i, m in enumerate(b.members, 1))
    tsv.atomic_write(b.paths.sweep_dir / PLAN_TSV, head + rows)


def start_lines(b: Bench) -> list[str]:
    """What the bench says before its first case: how many, where, the skipped ones, how to resume."""
    where = f"sweep {b.paths.sweep} ({b.paths.sweep_dir})"
    ran = f"in this order: {', '.join(b.runs)}" if b.runs else "none of them can run here"
    lines = [f"bench: {len(b.runs)} case(s) into {where}, {ran}"]
    lines += [f"bench: skipped {m.name}: {m.skip}" for m in b.members if m.skip]
    lines.append(f"bench: the same command with sweep={b.paths.sweep} resumes it, every finished case reused")
    return lines


# ---------------------------------------------------------------- where a running bench stands (a job's lines)


def job_lines(paths: SweepPaths, case: str, ending: bool) -> list[str]:
    """Where the bench stands as one of its cases starts or ends; [] outside a bench. Each line goes to the log (on
    the terminal, and in the job's log under Hydra) and to `bench.log`; the bench's last case ends with every case
    done and its pick."""
    plan = tsv.read_tsv(paths.sweep_dir / PLAN_TSV)
    order = [r["case"] for r in plan if not r.get("skip")]
    if case not in order:
        return []
    done = done_cases(paths, order)
    finished = {d.case for d in done}
    spent = sum(_seconds(t) for t in _trials(paths) if not t.get("reused_from"))
    left = bench.left_s(done, [c for c in order if c not in finished], {})
    phase = "done" if ending else ("finished before: its trials are reused" if case in finished else "starting")
    lines = [bench.where_line(order.index(case) + 1, len(order), case, phase, done, spent, left)]
    if ending:
        lines += bench.done_lines(done if case == order[-1] else [d for d in done if d.case == case])
    _append(paths.sweep_dir / LOG, lines)
    for line in lines:
        log.info(line)
    return lines


def done_cases(paths: SweepPaths, order: Sequence[str]) -> list[bench.Done]:
    """The bench's cases with a row in this sweep's `best_by_case.tsv`, in the bench's order."""
    best = {r["case"]: r for r in tsv.read_tsv(paths.best_tsv) if r.get("sweep") == paths.sweep}
    trials = _trials(paths)
    out = []
    for case in (c for c in order if c in best):
        row, mine = best[case], [t for t in trials if t["case"] == case]
        pick = f"{row.get('variant', '')} e{row.get('num_envs', '')} ({row.get('status', '')})"
        launched = [t for t in mine if not t.get("reused_from")]
        out.append(bench.Done(case, pick, len(launched), sum(_seconds(t) for t in launched)))
    return out


def _trials(paths: SweepPaths) -> list[dict[str, str]]:
    return [r for r in tsv.read_tsv(paths.trials_tsv) if r.get("sweep") == paths.sweep]


def _seconds(row: Mapping[str, str]) -> float:
    try:
        return float(row.get("duration_s") or 0.0)
    except ValueError:
        return 0.0


def _append(path: Path, lines: Sequence[str]) -> None:
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with path.open("a") as fh:
        fh.writelines(f"{stamp} {line}\n" for line in lines)
