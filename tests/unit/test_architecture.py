"""The codebase's shape, read from the source (ast, nothing imported): the rules of docs/architecture.md
("One service shape", "Glossary") that a reader relies on to find code by its name.

Each test names the file and line that breaks its rule.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.support import source_imports

ROOT = Path(__file__).resolve().parents[2]
PLATFORM_SRC = ROOT / "libs" / "platform" / "src"
LAYERS = ("domain", "service_layer", "adapters", "entrypoints")
# What a layer may import of its own service (settings and bootstrap sit beside the layers).
ALLOWED_LAYERS: dict[str, frozenset[str]] = {
    "domain": frozenset({"domain"}),
    "service_layer": frozenset({"domain", "service_layer"}),
    "adapters": frozenset({"domain", "service_layer", "adapters"}),
    "entrypoints": frozenset({"domain", "service_layer", "adapters", "entrypoints", "settings", "bootstrap"}),
    "settings": frozenset({"domain", "settings"}),
    "bootstrap": frozenset({"domain", "service_layer", "settings", "bootstrap"}),
}
ROUTE_METHODS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "api_route"})
LOG_METHODS = frozenset({"debug", "info", "warning", "error", "exception", "critical"})


@dataclass(frozen=True)
class Module:
    package: str  # the importable top-level package: yovision_platform, sense_reconciler, ...
    name: str  # dotted module name
    path: Path
    tree: ast.Module

    @property
    def where(self) -> str:
        return str(self.path.relative_to(ROOT))

    @property
    def part(self) -> str | None:
        """The layer (or `settings`/`bootstrap`) of a service module; None for the platform's."""
        if self.package == "yovision_platform":
            return None
        parts = self.name.split(".")
        return parts[1] if len(parts) > 1 else None


def _source_roots() -> list[Path]:
    return [PLATFORM_SRC, *sorted((ROOT / "services").glob("*/src"))]


@cache
def production_modules() -> tuple[Module, ...]:
    modules: list[Module] = []
    for src in _source_roots():
        for path in sorted(src.rglob("*.py")):
            relative = path.relative_to(src).with_suffix("")
            parts = list(relative.parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            modules.append(Module(parts[0], name, path, ast.parse(path.read_text(), str(path))))
    return tuple(modules)


def service_modules() -> Iterator[Module]:
    return (module for module in production_modules() if module.package != "yovision_platform")


def imported_names(module: Module) -> Iterator[tuple[str, int]]:
    """Every module an import statement of `module` names (relative imports resolved), with its line."""
    package = module.path.name == "__init__.py"
    for line, name in source_imports.imported_names(module.tree, module.name, is_package=package):
        yield name, line


def test_no_production_module_imports_a_fake() -> None:
    offenders = [
        f"{module.where}:{line} imports {name}"
        for module in service_modules()
        if not module.name.endswith(".adapters.memory")
        for name, line in imported_names(module)
        if name.split(".")[0] == module.package and ".adapters.memory" in f"{name}."
    ]
    assert offenders == []


def test_layers_import_only_downwards() -> None:
    offenders = []
    for module in service_modules():
        part = module.part
        if part not in ALLOWED_LAYERS:
            continue
        for name, line in imported_names(module):
            parts = name.split(".")
            if parts[0] != module.package or len(parts) < 2 or parts[1] not in ALLOWED_LAYERS:
                continue
            if parts[1] not in ALLOWED_LAYERS[part]:
                offenders.append(f"{module.where}:{line} ({part}) imports {name}")
    assert offenders == []


def test_a_class_name_is_defined_once_across_the_production_packages() -> None:
    """One concept, one name, one place: two classes of one name (even in one package) are renamed to say
    what differs, or become one imported from where it is defined."""
    definitions: dict[str, list[str]] = defaultdict(list)
    for module in production_modules():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                definitions[node.name].append(f"{module.where}:{node.lineno}")
    assert {name: places for name, places in definitions.items() if len(places) > 1} == {}


def test_fakes_are_memory_and_use_cases_carry_no_service_suffix() -> None:
    offenders = []
    for module in production_modules():
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.ClassDef):
                continue
            if node.name.startswith("InMemory"):
                offenders.append(f"{module.where}:{node.lineno} {node.name}: a fake is Memory<Port>")
            if module.part == "service_layer" and node.name.endswith("Service"):
                offenders.append(
                    f"{module.where}:{node.lineno} {node.name}: a use case is named for its work"
                )
    assert offenders == []


def _is_route_decorator(decorator: ast.expr) -> bool:
    return (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr in ROUTE_METHODS
    )


def test_routes_are_module_level_functions() -> None:
    """A route defined inside another function (a closure in a `build_router`) is invisible to a reader
    searching the module and to tools; every route is a module-level function on a module-level router."""
    offenders = []
    for module in service_modules():
        for outer in ast.walk(module.tree):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(outer):
                if inner is outer or not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if any(_is_route_decorator(decorator) for decorator in inner.decorator_list):
                    offenders.append(f"{module.where}:{inner.lineno} {inner.name} (inside {outer.name})")
    assert offenders == []


def _log_calls(module: Module) -> Iterator[ast.Call]:
    for node in ast.walk(module.tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LOG_METHODS
            and isinstance(node.func.value, ast.Name | ast.Attribute)
        ):
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else node.func.value.attr
            if "log" in owner.lower():
                yield node


def test_log_messages_are_literal_strings() -> None:
    """A log line's message is searchable: it is a literal in the code that writes it (values go in
    fields, never into the message)."""
    offenders = []
    calls = 0
    for module in production_modules():
        for call in _log_calls(module):
            calls += 1
            first = call.args[0] if call.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                offenders.append(f"{module.where}:{call.lineno}")
    assert calls > 50, "the scan found too few log calls: it no longer recognises them"
    assert offenders == []


@pytest.mark.parametrize("layer", LAYERS)
def test_every_service_has_the_layer(layer: str) -> None:
    services = sorted(path.parent for path in (ROOT / "services").glob("*/src/*/__init__.py"))
    assert services, "no service found"
    missing = [
        str(path.relative_to(ROOT)) for path in services if not (path / layer / "__init__.py").exists()
    ]
    assert missing == []
