"""The imports of Python source, read with ast (nothing imported): what the shape tests of every tier check
(`tests/unit/test_architecture.py`, `test_test_tiers.py`, the console's import cycles)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def imported_names(
    tree: ast.Module, module: str = "", *, is_package: bool = False
) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import in `tree`, at any depth: `from a import b` yields `a` and `a.b`.
    Relative imports are resolved against `module` (the dotted name of the file; `is_package` for an
    `__init__`); without it they are skipped."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if not module:
                    continue
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def imports_of_file(path: Path) -> Iterator[tuple[int, str]]:
    """The absolute imports of the file at `path`."""
    yield from imported_names(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
