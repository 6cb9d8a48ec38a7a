"""A stand-in for MimicKit's `mimickit/run.py` in ladder's tests: the same command line, the same outputs.

Written for ladder (not MimicKit code). It reads arguments the way MimicKit documents them: the command line
first, then `--arg_file`, the first value of a key winning; it checks that the env, agent and engine configs
exist relative to the folder it runs in; then it "trains" until `--max_samples`, counting steps_per_iter ×
num_envs samples per device per iteration, printing the per-iteration table MimicKit's txt logger prints
(`| Iteration | N |`, `| Wall_Time | hours |`, `| Samples | S |`, ...) and writing `<out_dir>/log.txt` rows
(25-character columns, ended by a carriage return) every iters_per_output iterations and at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import yaml


def parse(tokens: list[str]) -> dict[str, list[str]]:
    """`--key v1 v2 --other v` → {key: [v1, v2], other: [v]}; a repeated key keeps its first values."""
    table: dict[str, list[str]] = {}
    key, vals = "", list[str]()
    for tok in [*tokens, "--"]:
        if tok.startswith("--"):
            if key:
                table.setdefault(key, vals)
            key, vals = tok[2:], []
        else:
            vals.append(tok)
    return table


def load(argv: list[str]) -> dict[str, list[str]]:
    table = parse(argv)
    if "arg_file" in table:
        with open(table["arg_file"][0]) as fh:
            tokens = [t for line in fh.read().splitlines() if not line.startswith("#") for t in line.split()]
        for key, vals in parse(tokens).items():
            table.setdefault(key, vals)
    return table


def table_lines(row: dict[str, float]) -> str:
    width = max(len(k) for k in row)
    rule = "-" * (22 + width)
    body = "".join(f"| {k:>{width}} | {v if isinstance(v, int) else f'{v:8.3g}':>15} |\n" for k, v in row.items())
    return f"{rule}\n{body}{rule}\n"


def main(argv: list[str]) -> int:
    args = load(argv)
    for key in ("env_config", "agent_config", "engine_config"):
        if not os.path.isfile(args[key][0]):
            print(f"missing {key}: {args[key][0]}", file=sys.stderr)
            return 1
    devices = args.get("devices", ["cuda:0"])
    if len(devices) > 1:
        print(f"Using master port: {int(args['master_port'][0])}")
    with open(args["agent_config"][0]) as fh:
        agent = yaml.safe_load(fh)
    num_envs, max_samples = int(args["num_envs"][0]), int(args["max_samples"][0])
    out_dir = args["out_dir"][0]
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(args["agent_config"][0], os.path.join(out_dir, "agent_config.yaml"))
    per_iter = int(agent["steps_per_iter"]) * num_envs * len(devices)
    every = int(agent["iters_per_output"])
    start, samples, it = time.time(), 0, 0
    with open(os.path.join(out_dir, "log.txt"), "w") as log:
        while samples < max_samples:
            time.sleep(0.02)
            samples += per_iter
            hours = (time.time() - start) / 3600.0  # MimicKit logs Wall_Time in hours
            row = {"Iteration": it, "Wall_Time": hours, "Samples": samples, "Train_Return": 0.5}
            print(table_lines(row), end="", flush=True)
            if it % every == 0 or samples >= max_samples:
                if log.tell() == 0:
                    log.write("".join(f"{k:<25}" for k in row) + "\r")
                log.write("".join(f"{str(v):<25}" for v in row.values()) + "\r")
                log.flush()
            it += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
