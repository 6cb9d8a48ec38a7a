#!/usr/bin/env python
"""Generate conf/case/<name>.yaml for every trainable MimicKit case, from a MimicKit folder. Re-runnable.

    python scripts/gen_cases.py [--mimickit DIR] [--out conf/case] [--check]

A case is an args file in DIR/args other than view_motion_* and dof_test_*. Each conf embeds the case's agent
config as shipped (so the proxy and the profiles work without MimicKit), names its method (the case name's
first word, as best_by_case.tsv has it), its robot (from the env's char_file) and, for the pi_plus
robot, the pi_plus ladder; and gives the proxy a shape per robot, derived from MimicKit's observation code:

  char obs   = root height (1, if root_height_obs) + root rot 6 + root vel 3 + root ang vel 3
               + 6 per joint + 1 per DoF (dof vel) + 3 per key body              (envs/char_env.compute_char_obs)
  target obs = per tar_obs_steps entry: root pos (3, or 2 without root_height_obs) + root rot 6
               + 6 per joint + 3 per key body               (deepmimic_env.compute_tar_obs, if enable_tar_obs)
  task obs   = location 2, steering 5, dodgeball 6 per projectile               (envs/task_*_env.py)
  obs_dim    = char + target + task;  act_dim = DoF = len(init_pose) - 6 (root position and rotation)
  disc obs   = per step: target-obs terms + root vel 3 + root ang vel 3 (+ DoF if disc_dof_vel_obs, default on),
               times num_disc_obs_steps                          (amp_env.compute_disc_obs; unused without a disc)

Joints are the non-root bodies: the humanoid's 14 are read from humanoid.xml (15 bodies, 28 hinge DoF); the other
robots' asset files are not in MimicKit's repository, so their joint counts are estimates (ROBOTS). The
simulator state per env (what makes memory grow with num_envs) is 1024 floats per body, except pi_plus:
2 MiB per env (524288 floats), as amp_pi_plus was calibrated, since hand tuning saw the pi_plus cases fill a 24 GB
card at about 40 envs while the others ran 1024-4096 envs in 2.6-7.3 GB. amp_pi_plus keeps its calibrated
shape (the demo's numbers rest on it). `--check` compares instead of writing and exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SKIP_PREFIXES = ("view_motion_", "dof_test_")
KNOWN_METHODS = ("add", "amp", "ase", "deepmimic", "lcp", "smp", "vault")
FLOATS_PER_BODY = 1024  # simulator state per body per env: 4 KiB
PI_PLUS_SIM_STATE = 524288  # 2 MiB per env (see the module docstring)
TASK_OBS = {"task_location": 2, "task_steering": 5}  # task_dodgeball: 6 per projectile
# Args files that name an agent config MimicKit does not ship, and the one that stands in (the trial passes
# its own --agent_config, so the missing file is never read).
AGENT_STAND_INS = {"data/agents/smp_dodgeball_humanoid_agent.yaml": "data/agents/smp_task_humanoid_agent.yaml"}


@dataclass(frozen=True)
class Robot:
    name: str
    joints: int  # non-root bodies (6 floats of joint rotation each in the observations)
    bodies: int
    source: str  # where the counts come from


ROBOTS = {  # by the asset folder of the env's char_file
    "humanoid": Robot("humanoid", 14, 15, "humanoid.xml: 15 bodies, 28 hinge DoF"),
    "sword_shield": Robot("humanoid_sword_shield", 16, 17, "estimate: the humanoid's bodies plus sword and shield"),
    "g1": Robot("g1", 29, 30, "estimate: one body per hinge DoF plus the pelvis"),
    "go2": Robot("go2", 12, 13, "estimate: one body per hinge DoF plus the base"),
    "hightorque_pi_plus": Robot("pi_plus", 22, 23, "estimate: one body per hinge DoF plus the base"),
    "smpl": Robot("smpl", 23, 24, "SMPL's 24 bodies, 3-DoF ball joints (69 DoF)"),
}
CALIBRATED = {  # case -> (obs_dim, act_dim, disc_obs_dim, sim_state_dim) kept as the demo was tuned
    "amp_pi_plus": (180, 22, 450, PI_PLUS_SIM_STATE),
}


@dataclass(frozen=True)
class Shape:
    obs_dim: int
    act_dim: int
    disc_obs_dim: int
    sim_state_dim: int
    notes: tuple[str, str, str, str]  # one comment per value


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    robot: Robot
    args_file: str
    agent_file: str  # the agent config embedded
    agent_text: str
    env_file: str
    env: dict[str, Any]
    stand_in: str  # the missing agent file the embedded one stands in for, or ""


def trainable_args(mimickit: Path) -> list[Path]:
    return sorted(p for p in (mimickit / "args").glob("*_args.txt") if not p.name.startswith(SKIP_PREFIXES))


def read_args(path: Path) -> dict[str, str]:
    """An args file's `--key value` pairs (first value of each key, comments skipped), as MimicKit reads it."""
    tokens = [tok for line in path.read_text().splitlines() if not line.startswith("#") for tok in line.split()]
    out: dict[str, str] = {}
    key = ""
    for tok in tokens:
        if tok.startswith("--") and len(tok) >= 3:
            key = tok[2:]
        elif key and key not in out:
            out[key] = tok
    return out


def load_case(mimickit: Path, args_path: Path) -> Case:
    args = read_args(args_path)
    name = args_path.name.removesuffix("_args.txt")
    env = yaml.safe_load((mimickit / args["env_config"]).read_text())
    agent_file = args["agent_config"]
    stand_in = agent_file if not (mimickit / agent_file).is_file() and agent_file in AGENT_STAND_INS else ""
    embedded = AGENT_STAND_INS[agent_file] if stand_in else agent_file
    return Case(
        name=name,
        method=name.split("_")[0],
        robot=robot_of(env["char_file"]),
        args_file=f"args/{args_path.name}",
        agent_file=embedded,
        agent_text=(mimickit / embedded).read_text(),
        env_file=args["env_config"],
        env=env,
        stand_in=stand_in,
    )


def robot_of(char_file: str) -> Robot:
    folder = Path(char_file).parent.name
    if folder not in ROBOTS:
        raise SystemExit(f"unknown robot asset folder {folder!r} ({char_file}): add it to ROBOTS in {__file__}")
    return ROBOTS[folder]


def proxy_shape(case: Case) -> Shape:
    if case.name in CALIBRATED:
        obs, act, disc, sim = CALIBRATED[case.name]
        derived = derive_shape(case)
        note = f"calibrated for the demo (the formulas give obs {derived.obs_dim}, disc {derived.disc_obs_dim})"
        return Shape(obs, act, disc, sim, (note, f"{act} DoF", "calibrated for the demo", "2 MiB per env: calibrated"))
    return derive_shape(case)


def derive_shape(case: Case) -> Shape:
    env, robot = case.env, case.robot
    dof = len(env["init_pose"]) - 6
    keys = len(env.get("key_bodies", []))
    root_pos = 3 if env.get("root_height_obs", True) else 2
    pose = root_pos + 6 + 6 * robot.joints + 3 * keys  # one step of target obs / disc pose obs
    char = (1 if env.get("root_height_obs", True) else 0) + 12 + 6 * robot.joints + dof + 3 * keys
    tar_steps = len(env.get("tar_obs_steps", [1])) if env.get("enable_tar_obs", False) else 0
    disc_step = pose + 6 + (dof if env.get("disc_dof_vel_obs", True) else 0)
    steps = int(env.get("num_disc_obs_steps", 1))
    sim = PI_PLUS_SIM_STATE if robot.name == "pi_plus" else FLOATS_PER_BODY * robot.bodies
    obs = (char, tar_steps, pose, _task_obs(env))
    act_note = f"DoF: init_pose has {dof + 6} values = 6 root + {dof}"
    notes = (_obs_note(*obs), act_note, _disc_note(case, steps, disc_step), _sim_note(robot))
    return Shape(char + tar_steps * pose + obs[3], dof, steps * disc_step, sim, notes)


def _obs_note(char: int, tar_steps: int, pose: int, task: int) -> str:
    target = f" + target {tar_steps} x {pose}" if tar_steps else ""
    return f"char {char}{target}" + (f" + task {task}" if task else "")


def _disc_note(case: Case, steps: int, per_step: int) -> str:
    return f"{steps} step(s) x {per_step}" + ("" if has_disc(case) else " (unused: the agent has no discriminator)")


def _sim_note(robot: Robot) -> str:
    if robot.name == "pi_plus":
        return "2 MiB per env, as amp_pi_plus"
    return f"{robot.bodies} bodies x {FLOATS_PER_BODY} floats"


def has_disc(case: Case) -> bool:
    agent = yaml.safe_load(case.agent_text)
    return "disc_net" in (agent.get("model") or {})


def _task_obs(env: dict[str, Any]) -> int:
    if env["env_name"] == "task_dodgeball":
        return 6 * int(env.get("num_projectiles", 1))
    return TASK_OBS.get(env["env_name"], 0)


def render(case: Case, source: str) -> str:
    shape = proxy_shape(case)
    return "".join([_header(case, source), _defaults(case), _body(case, shape), _agent(case)])


def _header(case: Case, source: str) -> str:
    env, robot = case.env, case.robot
    lines = [
        f"MimicKit case `{case.name}`: {case.args_file}.",
        "Generated by scripts/gen_cases.py (rerun it rather than edit) from MimicKit's configuration files",
        f"({source}; copies and the license in tests/data/mimickit).",
        f"agent: {case.agent_file} as shipped.",
        f"env: {case.env_file} (env_name {env['env_name']}, {len(env.get('key_bodies', []))} key bodies, "
        f"num_disc_obs_steps {env.get('num_disc_obs_steps', '-')}).",
        f"robot: {robot.name} ({robot.source}).",
    ]
    if case.stand_in:
        lines += [
            f"The args file names {case.stand_in},",
            "which MimicKit does not ship; the agent above stands in "
            "(the MimicKit workload passes its own --agent_config).",
        ]
    return "".join(f"# {line}\n" for line in lines)


def _defaults(case: Case) -> str:
    if case.robot.name != "pi_plus":
        return ""
    return "defaults:\n  - override /ladder@_global_.ladder: pi_plus\n"


def _body(case: Case, shape: Shape) -> str:
    values = (shape.obs_dim, shape.act_dim, shape.disc_obs_dim, shape.sim_state_dim)
    keys = ("obs_dim", "act_dim", "disc_obs_dim", "sim_state_dim")
    proxy = "".join(f"  {f'{k}: {v}':<26}# {n}\n" for k, v, n in zip(keys, values, shape.notes, strict=True))
    head = f"\nname: {case.name}\nmethod: {case.method}\nrobot: {case.robot.name}\nargs_file: {case.args_file}\n"
    return head + "proxy:\n" + proxy


def _agent(case: Case) -> str:
    lines = [line.rstrip() for line in case.agent_text.rstrip().splitlines()]
    return "agent:\n" + "".join(f"  {line}\n" if line else "\n" for line in lines)


def source_of(mimickit: Path) -> str:
    notice = mimickit / "NOTICE.md"
    found = re.search(r"commit ([0-9a-f]{40})", notice.read_text()) if notice.is_file() else None
    return "xbpeng/MimicKit" + (f" at {found.group(1)[:7]}" if found else "") + ", Apache-2.0"


def generate(mimickit: Path) -> dict[str, str]:
    source = source_of(mimickit)
    cases = [load_case(mimickit, p) for p in trainable_args(mimickit)]
    unknown = sorted({c.method for c in cases} - set(KNOWN_METHODS))
    if unknown:
        print(f"note: methods not seen before: {unknown}", file=sys.stderr)
    return {f"{c.name}.yaml": render(c, source) for c in cases}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.environ.get("MIMICKIT_ROOT") or str(ROOT / "tests" / "data" / "mimickit")
    p.add_argument("--mimickit", type=Path, default=Path(default_root), help="MimicKit folder (args/, data/)")
    p.add_argument("--out", type=Path, default=ROOT / "conf" / "case")
    p.add_argument("--check", action="store_true", help="compare with --out instead of writing; exit 1 on a difference")
    args = p.parse_args(argv)
    files = generate(args.mimickit)
    if args.check:
        stale = sorted(n for n, text in files.items() if _current(args.out / n) != text)
        print("\n".join(f"differs: {args.out / n}" for n in stale) or f"{len(files)} case confs up to date")
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text)
    print(f"wrote {len(files)} case confs to {args.out}")
    return 0


def _current(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


if __name__ == "__main__":
    sys.exit(main())
