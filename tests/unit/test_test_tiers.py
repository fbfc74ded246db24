"""Each test tier stands alone: what tiers share lives in tests/support; production never imports tests.

Parses every module (ast, nothing imported) and names the file and line of each import that breaks a rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.source_imports import imports_of_file

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS = REPO_ROOT / "tests"
TIERS = ("unit", "ports", "contract", "integration", "e2e", "cluster", "deploy")
SUPPORT = "support"
PRODUCTION = [REPO_ROOT / "libs/platform/src", *sorted(REPO_ROOT.glob("services/*/src"))]


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every absolute import of `path`; `from a import b` yields `a.b` and `a`."""
    return imports_of_file(path)


def place_of(module: str) -> str | None:
    """The tier (or `support`, or `tests` for tests/*.py) of a module under tests, else None."""
    parts = module.split(".")
    if parts[0] != "tests":
        return None
    if len(parts) == 1:
        return "tests"
    return parts[1] if parts[1] in (*TIERS, SUPPORT) else "tests"


def tier_of(path: Path) -> str:
    parts = path.relative_to(TESTS).parts
    return parts[0] if len(parts) > 1 else "tests"


def test_place_of_a_module() -> None:
    assert place_of("tests.integration.bell_receiver.test_contract") == "integration"
    assert place_of("tests.support.stack") == "support"
    assert place_of("tests.scheduling") == "tests"
    assert place_of("yovision_platform.storage") is None


def test_no_tier_imports_another_tiers_modules() -> None:
    """A tier imports tests/support (and itself), never another tier nor a module loose at tests/*.py; and
    tests/support imports no tier."""
    broken: dict[str, str] = {}
    for path in sorted(TESTS.rglob("*.py")):
        own = tier_of(path)
        for line, module in imported_modules(path):
            place = place_of(module)
            if place is None or place in (own, SUPPORT) or module == "tests":
                continue
            if own == "tests" and place == "tests":
                continue  # the root conftest and its plugins (scheduling, suite_report)
            broken.setdefault(f"{path.relative_to(REPO_ROOT)}:{line}", f"{own} imports {module} ({place})")
    if broken:
        pytest.fail("\n".join(f"{where}: {what}" for where, what in broken.items()), pytrace=False)


def test_production_never_imports_tests() -> None:
    broken = [
        f"{path.relative_to(REPO_ROOT)}:{line}: imports {module}"
        for root in PRODUCTION
        for path in sorted(root.rglob("*.py"))
        for line, module in imported_modules(path)
        if module == "tests" or module.startswith("tests.")
    ]
    if broken:
        pytest.fail("\n".join(broken), pytrace=False)
