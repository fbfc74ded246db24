"""No import cycle among the console's modules (any `import`, at module level or inside a function): a page
module that imported `web` back while `web` includes its router is the cycle this guards against. (Its
layers and fakes are checked with every service's: tests/unit/test_architecture.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.support.source_imports import imports_of_file

PACKAGE = "console"
SOURCE = Path(__file__).resolve().parents[3] / "services/console/src" / PACKAGE


def module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The console's modules `path` imports (`from a import b` is `a.b` when that is a module)."""
    return {name for _, name in imports_of_file(path) if name in modules}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in SOURCE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) - {name} for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path back to its start) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(cycle_in(graph, set(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path from the component's first module back to itself, through the component."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & component):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no cycle in {component}")


def test_the_consoles_modules_import_no_cycle() -> None:
    graph = import_graph()
    assert "console.entrypoints.web" in graph and "console.bootstrap" in graph
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_a_cycle_is_named() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
