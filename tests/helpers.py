"""Small things the tests share."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

import psutil

# A window for trainers that print a point every few milliseconds: 0.3 s and 4 points, opened by a loose stable rule
SHORT_WINDOW = (
    "measure.window_s=0.3",
    "measure.min_window_iters=4",
    "measure.warmup_iters=1",
    "measure.stable_k=2",
    "measure.stable_tol=5",
)

# The built-in proxy's iteration lightened as a user lightens MimicKit's, through the case's agent settings: 8 env
# steps per iteration instead of the 32 shipped. The rollout (each env's 2 MiB of simulator state touched every step)
# is most of the proxy's iteration on CPU, and warm-up and `min_window_iters` count iterations: a fitting rung's trial
# takes about half as long, and the rungs that fit or fail are the same (the rollout buffer is a small part of a rung's
# memory). For the tests about the sweep, not about the proxy's own figures.
LIGHT_PROXY = "case.agent.steps_per_iter=8"
# A short window that stands on few steady points: for the tests about which rungs a sweep launches and what it
# records, not about its figures.
QUICK_WINDOW = [
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "measure.min_window_iters=2",
    "measure.extend_unstable=false",
    "measure.stable_k=1",
    "measure.warmup_timeout_s=150",
]


def live(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """The processes among `procs` still running: neither ended and unreaped (a zombie) nor gone meanwhile (one
    may end between being listed and being looked at)."""
    out = []
    for proc in procs:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_for(predicate: Callable[[], object], timeout_s: float = 120.0, every_s: float = 0.05) -> None:
    """Poll a condition until it holds; fail the test if it does not within `timeout_s` (an upper bound only)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(every_s)


def need_module(name: str, reason: str = "") -> None:
    """Skip the calling test (or, at a module's top, the module) where `name` is not installed, without importing
    it: the trainers the tests start import it in their own processes, and an import here is paid by every worker
    that collects the file (sheeprl brings Lightning and torchmetrics: seconds each time)."""
    import pytest

    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if not found:
        pytest.skip(
            reason or f"{name} is not installed (the test extra: pip install -e '.[test]')", allow_module_level=True
        )


def memory_cgroups() -> bool:
    """Can a memory cgroup be made here (root, a writable controller)?"""
    import os

    from ladder.runner.cgroup import MemCgroup

    probe = MemCgroup.create(f"ladder-probe-{os.getpid()}", None)
    if probe is None:
        return False
    probe.remove()
    return True


def need_memory_cgroups() -> None:
    """Skip the calling test where no memory cgroup can be made here (not root, no writable controller)."""
    import pytest

    if not memory_cgroups():
        pytest.skip("no writable memory cgroup on this machine: a trial is tracked by its process tree alone")


REPO = Path(__file__).resolve().parents[1]  # the repository's root
DATA = REPO / "tests" / "data"  # real captured outputs, trainers and configs the tests read
RECIPES = REPO / "docs" / "recipes.md"  # every recipe, as a user copies it


def load_script(name: str) -> ModuleType:
    """`scripts/<name>.py`, loaded as the module `name` (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def recipe(title: str, where: Path = RECIPES) -> tuple[str, list[str]]:
    """The script ("" where it has none) and the `ladder.search` overrides of the recipe `title` in `where` (its
    python and bash blocks, before the next recipe or section)."""
    text = re.split(r"\n\*\*Recipe: |\n## ", where.read_text().split(f"**Recipe: {title}**", 1)[1])[0]
    script = re.search(r"```python\n(.*?)```", text, re.S)
    command = re.search(r"```bash\n(.*?)```", text, re.S)
    assert command, f"the recipe {title!r} in {where.name} has a bash block"
    argv = shlex.split(command.group(1).replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "ladder.search"]
    return (script.group(1) if script else ""), argv[3:]
