"""The house rules of the import graph (issue 12): no library module imports the CLI, and the
module-level imports between lastiterate's modules form no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import lastiterate

SRC = Path(lastiterate.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("lastiterate")}


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


def test_no_library_module_imports_the_cli() -> None:
    offenders = {
        name: sorted(
            m for m in _imports(path, top_level_only=False) if m.startswith("lastiterate.cli")
        )
        for name, path in MODULES.items()
        if not name.startswith("lastiterate.cli")
        and name != "lastiterate.__main__"  # the entry point
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_module_level_imports_have_no_cycle() -> None:
    graph = {
        name: {m for m in _imports(path, top_level_only=True) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                raise AssertionError(
                    "import cycle: " + " -> ".join(stack[stack.index(nxt) :] + [nxt])
                )
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name)
