"""Lazy re-exports for the subpackages' ``__init__``: a public name is imported from its private module on
first use.

Each subpackage's ``__init__`` names its exports once, as ``from <private module> import X as X`` under
``if TYPE_CHECKING:`` (what mypy and readers see), and lists them in ``__all__``; at run time
:func:`lazy_exports` reads that block and imports a name from the module it names when it is first asked for.

Why lazy: the private modules of different subpackages import each other (settings reads storage's
``Identifier``, storage's unit of work enqueues messaging's outbox, messaging traces through observability,
which redacts through security, which reads settings). Eager ``__init__``s would turn those one-way module
imports into package cycles.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path


def type_checking_imports(init_file: str) -> dict[str, str]:
    """name -> module of the ``from module import name as name`` lines under ``if TYPE_CHECKING:``."""
    sources: dict[str, str] = {}
    for node in ast.parse(Path(init_file).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    sources.update(
                        {alias.asname or alias.name: statement.module for alias in statement.names}
                    )
    return sources


def lazy_exports(package: str, init_file: str) -> Callable[[str], object]:
    """The module ``__getattr__`` of `package` (whose ``__init__`` is `init_file`)."""
    sources = cache(lambda: type_checking_imports(init_file))

    def __getattr__(name: str) -> object:
        module = sources().get(name)
        if module is None or name not in getattr(sys.modules[package], "__all__", ()):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
