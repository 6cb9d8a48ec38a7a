"""The floor plan, checked: no import cycle, no import from a lower layer to a higher one, and a pure core.

Every module under `ladder/` is read (its source, not imported), and every import of a ladder module in it counts,
inside functions too. The layers, lowest first, are the folders of `ladder/` (`LAYERS`); a module may import its
own layer and those below. The pure core is also imported in a fresh interpreter, so that what another test
imported first cannot hide what it pulls in.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ladder

ROOT = Path(ladder.__file__).parent
LAYERS = ("core", "failures", "settings", "workloads", "storage", "runner", "sweep", "ui")  # lowest first
ENTRY = "entry"  # ladder/search.py, merge.py, repair.py, report.py: the commands, above everything


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package under `root`, by dotted name."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The ladder modules `path` imports (a `from pkg import mod` names the module, else the package)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
    return {m for m in found if m in known and m != name}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = modules(root)
    return {name: imports(path, name, set(mods)) for name, path in mods.items()}


def layer(module: str) -> int:
    """A module's layer: the rank of its folder under ladder/ (the entry points and the package above them all)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return len(LAYERS)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def upward(edges: dict[str, set[str]]) -> Iterator[str]:
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            if target != "ladder" and layer(target) > layer(module):
                yield f"{module} ({layer_name(module)}) imports {target} ({layer_name(target)})"


def layer_name(module: str) -> str:
    rank = layer(module)
    return LAYERS[rank] if rank < len(LAYERS) else ENTRY


def test_no_module_imports_in_a_circle() -> None:
    assert cycles(graph()) == []


def test_imports_point_down_the_layers() -> None:
    assert list(upward(graph())) == []


def test_no_module_is_left_flat_beside_the_folders_but_the_commands() -> None:
    flat = sorted(p.stem for p in ROOT.glob("*.py") if p.stem != "__init__")
    assert flat == ["merge", "repair", "report", "search"]


def test_the_checks_see_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The two checks fail where they should: on a package laid out the old way round."""
    pkg = tmp_path / "ladder"
    (pkg / "core").mkdir(parents=True)
    (pkg / "sweep").mkdir()
    for path in (pkg / "__init__.py", pkg / "core" / "__init__.py", pkg / "sweep" / "__init__.py"):
        path.write_text("")
    (pkg / "core" / "pick.py").write_text("from ladder.sweep import loop\n")
    (pkg / "sweep" / "loop.py").write_text("def f():\n    from ladder.core import pick\n")
    edges = graph(pkg)
    assert cycles(edges) == [["ladder.core.pick", "ladder.sweep.loop"]]
    assert list(upward(edges)) == ["ladder.core.pick (core) imports ladder.sweep.loop (sweep)"]


MAX_MODULE_LINES = 500


def test_every_module_is_one_room_of_at_most_500_lines() -> None:
    long = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    assert {n: lines for n, lines in long.items() if lines > MAX_MODULE_LINES} == {}
