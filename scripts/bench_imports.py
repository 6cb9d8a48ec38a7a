"""What ladder's own starts cost in CPU: the imports of the orchestrator (`python -m ladder.search`) and of the warm
starter (`ladder.runner.warm.PRELOAD`, what every proxy rank imports first), each beside what it would cost with the
import it avoids: SQLAlchemy, which only a database storage needs (`ladder.storage.studies`), and torch._dynamo,
which torch.optim's first param group would pull in (the proxy steps its own optimizers:
`ladder.workloads.proxy.buffers.Optimizer`). Each is a fresh interpreter; the sets alternate, so all see the same
load; the CPU (user + system) of each is the child's own, from `getrusage`.

    python scripts/bench_imports.py [--n 7]

Last line: `orchestrator_cpu_s=<a> with_sqlalchemy_cpu_s=<b> starter_cpu_s=<c> with_dynamo_cpu_s=<d>
starter_ratio=<d/c> orchestrator_ratio=<b/a>` (medians).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys

from ladder.runner.warm import PRELOAD

SETS = {
    "orchestrator": ["ladder.search"],
    "with_sqlalchemy": ["sqlalchemy.exc", "ladder.search"],
    "starter": list(PRELOAD),
    "with_dynamo": ["torch", "torch._dynamo", *PRELOAD[1:]],
}


def cpu_of(modules: list[str]) -> float:
    """CPU seconds of a fresh interpreter that imports `modules` and exits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", f"import {', '.join(modules)}"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=7, help="runs of each set")
    args = parser.parse_args()
    runs: dict[str, list[float]] = {name: [] for name in SETS}
    for _ in range(args.n):
        for name, modules in SETS.items():
            runs[name].append(cpu_of(modules))
    median = {name: statistics.median(values) for name, values in runs.items()}
    for name, modules in SETS.items():
        print(f"{name:>16}: {median[name]:5.2f} s CPU (median of {args.n}; {', '.join(modules)})")
    print(
        " ".join(f"{name}_cpu_s={median[name]:.2f}" for name in SETS)
        + f" starter_ratio={median['with_dynamo'] / median['starter']:.2f}"
        + f" orchestrator_ratio={median['with_sqlalchemy'] / median['orchestrator']:.2f}"
    )


if __name__ == "__main__":
    main()
