"""Collecting the suite imports no trainer. Every xdist worker collects every test file (four workers in the README's
command), so whatever a test file imports at its top, itself or through the modules it imports, is paid once per
worker whichever worker runs its tests: torch costs 2-3 CPU-s, sheeprl brings Lightning and torchmetrics (seconds
more). The tests that need one import it inside themselves, and a test file whose trainer may be missing skips with
`tests.helpers.need_module` (which finds it without importing it), not `pytest.importorskip` at its top.

Read from the sources (nothing is imported): each module's top-level statements (an `if TYPE_CHECKING:` block
aside), followed through ladder's modules and the tests' own.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import REPO

HEAVY = ("torch", "lightning", "sheeprl", "stable_baselines3", "rsl_rl", "matplotlib", "warp", "newton", "mujoco")
OURS = ("ladder", "tests")


def source(module: str) -> Path | None:
    """The file of one of our modules (a package's `__init__.py`), or None."""
    base = REPO.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _top(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run when the module is imported, into `if`/`try`/`with` blocks (not functions)."""
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _top(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(node, (ast.If, ast.Try, ast.With)) and inner:
                yield from _top(inner if field != "handlers" else [s for h in inner for s in h.body])


@functools.cache
def top_imports(path: Path, module: str) -> frozenset[str]:
    """The modules `path` imports when it is imported (a `from a import b` counts `a` and, where it is a module,
    `a.b`; importing `a.b` imports the package `a` first), and `importorskip`'s argument where it is called there."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _top(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names if source(f"{base}.{alias.name}")}
        for call in ast.walk(node) if isinstance(node, ast.Expr | ast.Assign) else ():
            if isinstance(call, ast.Call) and ast.unparse(call.func).endswith("importorskip") and call.args:
                found.add(str(ast.literal_eval(call.args[0])))
    return frozenset(found)


def heavy_chain(module: str, seen: set[str] | None = None) -> list[str] | None:
    """The import chain from `module` to a heavy one, or None."""
    seen = set() if seen is None else seen
    seen.add(module)
    path = source(module)
    if path is None:
        return None
    for name in sorted(top_imports(path, module) | set(_packages(module)[:-1])):
        if name.split(".")[0] in HEAVY:
            return [module, name]
        for step in _packages(name):
            if step.split(".")[0] in OURS and step not in seen and (chain := heavy_chain(step, seen)):
                return [module, *chain]
    return None


def _packages(name: str) -> list[str]:
    """`a.b.c` -> a, a.b, a.b.c: what importing it runs, in order."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


TEST_FILES = sorted(p for p in (REPO / "tests").rglob("*.py") if p.name.startswith(("test_", "conftest")))


@pytest.mark.parametrize("path", TEST_FILES, ids=[str(p.relative_to(REPO / "tests")) for p in TEST_FILES])
def test_collecting_a_test_file_imports_no_trainer(path: Path) -> None:
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    chain = heavy_chain(module)
    assert chain is None, f"collecting {path.name} imports {' -> '.join(chain or [])}: import it inside the tests"


def test_the_check_sees_a_heavy_import_through_our_modules() -> None:
    # the proxy's agent module imports torch at its top: a test file importing it from there is caught
    assert heavy_chain("ladder.workloads.proxy.agent") is not None
    assert heavy_chain("ladder.core.measure.usage") is None
