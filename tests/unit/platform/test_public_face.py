"""The platform's public face: services and their benches import only what the platform exports.

A subpackage with an ``__all__`` (``messaging``, ``storage``, ``web``...) is imported by its package name,
and only the names in its ``__all__``; its modules are private (``_relay``, ``_outbox``...). Top-level public
modules (``errors``, ``settings``...) and the command modules of ``tools`` are imported as they are. Tests
may reach private modules; services and benches may not. The services are read as text (ast), never
imported.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import yovision_platform
from yovision_platform._exports import type_checking_imports

REPO_ROOT = Path(__file__).resolve().parents[3]
PLATFORM = yovision_platform.__name__


def _platform_modules() -> tuple[dict[str, ModuleType], set[str]]:
    """The packages that have an ``__all__`` (imported), and the public module paths: the top-level
    modules and the modules of a package not named ``_...`` (the tools' commands)."""
    faces: dict[str, ModuleType] = {}
    public: set[str] = {PLATFORM}
    for info in pkgutil.iter_modules(yovision_platform.__path__):
        if info.name.startswith("_"):
            continue
        name = f"{PLATFORM}.{info.name}"
        module = importlib.import_module(name)
        if info.ispkg and hasattr(module, "__all__"):
            faces[name] = module
        else:
            public.add(name)
        if info.ispkg:  # its public modules (the tools' commands), if any
            public.update(
                f"{name}.{sub.name}"
                for sub in pkgutil.iter_modules(module.__path__)
                if not sub.name.startswith("_")
            )
    return faces, public


FACES, PUBLIC_MODULES = _platform_modules()


def _service_files() -> list[Path]:
    files = [*REPO_ROOT.glob("services/*/src/**/*.py"), *REPO_ROOT.glob("services/*/bench/**/*.py")]
    return sorted(files)


def _violations(path: Path, root: Path = REPO_ROOT) -> list[str]:
    rel = path.relative_to(root)
    tree = ast.parse(path.read_text(), filename=str(rel))
    found: list[str] = []
    namespaces: dict[str, str] = {}  # local name -> face bound by `from yovision_platform import <face>`

    def check_module(module: str, line: int) -> bool:
        if any(part.startswith("_") for part in module.split(".")):
            found.append(f"{rel}:{line}: imports the private module {module}")
            return False
        if module not in FACES and module not in PUBLIC_MODULES:
            found.append(f"{rel}:{line}: imports {module}, not a public platform module")
            return False
        return True

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if module != PLATFORM and not module.startswith(PLATFORM + "."):
                continue
            if not check_module(module, node.lineno):
                continue
            for alias in node.names:
                if module in PUBLIC_MODULES or f"{module}.{alias.name}" in PUBLIC_MODULES:
                    continue
                if module in FACES and alias.name not in FACES[module].__all__:
                    found.append(
                        f"{rel}:{node.lineno}: imports {alias.name} from {module}, not in its __all__"
                    )
                elif module == PLATFORM:
                    check_module(f"{PLATFORM}.{alias.name}", node.lineno)
                    if f"{PLATFORM}.{alias.name}" in FACES:
                        namespaces[alias.asname or alias.name] = f"{PLATFORM}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PLATFORM + "."):
                    check_module(alias.name, node.lineno)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in namespaces
        ):
            face = namespaces[node.value.id]
            if node.attr not in FACES[face].__all__:
                found.append(f"{rel}:{node.lineno}: uses {face}.{node.attr}, not in its __all__")
    return found


def test_services_and_benches_import_only_the_public_face() -> None:
    files = _service_files()
    assert files, "no service sources found"
    violations = [violation for path in files for violation in _violations(path)]
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("face", sorted(FACES))
def test_every_exported_name_exists(face: str) -> None:
    module = FACES[face]
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{face}.__all__ names a name twice"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{face}.__all__ names what it does not have: {missing}"
    declared = type_checking_imports(str(module.__file__))
    if declared:  # a lazy face: its TYPE_CHECKING imports are its exports, one module for each name
        assert sorted(declared) == sorted(exported), f"{face}: __all__ and the TYPE_CHECKING imports differ"
        for name in exported:
            assert getattr(module, name) is getattr(importlib.import_module(declared[name]), name), name


def test_the_check_names_file_and_line(tmp_path: Path) -> None:
    """The check itself: a private module, a non-public module and an unexported name are each caught."""
    face = sorted(FACES)[0]
    fake = tmp_path / "example.py"
    lines = [
        f"from {face}._private import anything",
        f"from {face} import not_exported_anywhere",
        f"import {PLATFORM}.no_such_module as gone",
        f"from {face} import {FACES[face].__all__[0]}",
    ]
    fake.write_text("\n".join(lines) + "\n")
    found = _violations(fake, root=tmp_path)
    assert [violation.split(":")[:2] for violation in found] == [
        ["example.py", "1"],
        ["example.py", "2"],
        ["example.py", "3"],
    ]
