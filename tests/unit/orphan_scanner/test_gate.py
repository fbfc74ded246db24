"""The apply safety gate: integer-only ratio, candidate bounds, report age, subset, reason order."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from orphan_scanner.domain import gate as gate_module
from orphan_scanner.domain import limits
from orphan_scanner.domain.gate import BlockReason, GateInput, check_gate, ratio_allows, report_expired


def names(count: int, prefix: str = "p") -> set[str]:
    return {f"{prefix}{i:04d}" for i in range(count)}


def check(candidates: int, total: int, *, age_ms: int = 0) -> BlockReason | None:
    current = names(candidates)
    return check_gate(
        GateInput(
            report_candidates=current, current_candidates=current, current_total=total, report_age_ms=age_ms
        )
    )


def test_limits_are_the_spec_values_and_integers() -> None:
    assert limits.REPORT_VALIDITY_MS == 900_000
    assert (limits.APPLY_MIN_CANDIDATES, limits.APPLY_MAX_CANDIDATES) == (1, 128)
    assert (limits.DELETE_RATIO_NUMERATOR, limits.DELETE_RATIO_DENOMINATOR) == (10, 100)
    for value in (
        limits.REPORT_VALIDITY_MS,
        limits.APPLY_MIN_CANDIDATES,
        limits.APPLY_MAX_CANDIDATES,
        limits.DELETE_RATIO_NUMERATOR,
        limits.DELETE_RATIO_DENOMINATOR,
    ):
        assert type(value) is int


@pytest.mark.parametrize(
    ("candidates", "total", "expected"),
    [
        (10, 100, None),
        (11, 100, BlockReason.RATIO_EXCEEDED),
        (9, 100, None),
        (1, 10, None),
        (2, 10, BlockReason.RATIO_EXCEEDED),
        (1, 9, BlockReason.RATIO_EXCEEDED),
        (1, 11, None),
        (128, 1280, None),
        (128, 1279, BlockReason.RATIO_EXCEEDED),
        (129, 1290, BlockReason.TOO_MANY_CANDIDATES),
        (127, 1270, None),
        (0, 100, BlockReason.NO_CANDIDATES),
        (0, 1, BlockReason.NO_CANDIDATES),
        (0, 0, BlockReason.NO_PATHS),
        (1, 0, BlockReason.NO_PATHS),
    ],
)
def test_count_and_ratio_boundaries(candidates: int, total: int, expected: BlockReason | None) -> None:
    assert check(candidates, total) is expected


def test_negative_total_counts_as_no_paths() -> None:
    assert check(0, -1) is BlockReason.NO_PATHS


@pytest.mark.parametrize(
    ("age_ms", "expired"),
    [(0, False), (899_999, False), (900_000, False), (900_001, True), (960_000, True)],
)
def test_report_is_valid_for_exactly_15_minutes(age_ms: int, expired: bool) -> None:
    assert report_expired(age_ms) is expired
    assert check(1, 10, age_ms=age_ms) is (BlockReason.REPORT_EXPIRED if expired else None)


def test_current_candidates_must_be_a_subset_of_the_report() -> None:
    report = names(3)

    def against_report(current: set[str]) -> BlockReason | None:
        return check_gate(GateInput(report, current, current_total=100, report_age_ms=0))

    assert against_report(report) is None
    assert against_report(set(sorted(report)[:1])) is None  # the target set may shrink
    assert against_report(report | {"new-path"}) is BlockReason.NOT_SUBSET
    assert against_report({"other"}) is BlockReason.NOT_SUBSET


DOCUMENTED_ORDER = [
    BlockReason.REPORT_EXPIRED,
    BlockReason.NO_PATHS,
    BlockReason.NOT_SUBSET,
    BlockReason.NO_CANDIDATES,
    BlockReason.TOO_MANY_CANDIDATES,
    BlockReason.RATIO_EXCEEDED,
]


def test_module_docstring_lists_the_reasons_in_this_order() -> None:
    doc = gate_module.__doc__ or ""
    listed = re.findall(r"^\s{4}([a-z_]+)\s{2,}", doc, flags=re.MULTILINE)
    assert listed == [reason.value for reason in DOCUMENTED_ORDER]


def test_first_failed_condition_in_documented_order_is_the_reason() -> None:
    # Each step fixes the earliest failing condition of the previous one; the next reason must then show.
    expired_empty_not_subset = GateInput(
        report_candidates=set(), current_candidates=names(129), current_total=0, report_age_ms=900_001
    )
    steps = [
        expired_empty_not_subset,
        GateInput(set(), names(129), current_total=0, report_age_ms=900_000),
        GateInput(set(), names(129), current_total=129, report_age_ms=900_000),
        GateInput(names(129), set(), current_total=129, report_age_ms=900_000),
        GateInput(names(129), names(129), current_total=129, report_age_ms=900_000),
        GateInput(names(128), names(128), current_total=129, report_age_ms=900_000),
        GateInput(names(128), names(128), current_total=1280, report_age_ms=900_000),
    ]
    assert [check_gate(step) for step in steps] == [*DOCUMENTED_ORDER, None]


def test_not_subset_wins_over_count_and_ratio_failures() -> None:
    assert (
        check_gate(GateInput(names(1), names(2), current_total=10, report_age_ms=0)) is BlockReason.NOT_SUBSET
    )
    assert check_gate(GateInput(names(1), names(1), current_total=0, report_age_ms=0)) is BlockReason.NO_PATHS


def test_exhaustive_small_totals_match_the_integer_formula() -> None:
    for total in range(1, 61):
        for candidates in range(total + 1):
            if candidates == 0:
                expected: BlockReason | None = BlockReason.NO_CANDIDATES
            elif candidates * 100 <= total * 10:
                expected = None
            else:
                expected = BlockReason.RATIO_EXCEEDED
            assert check(candidates, total) is expected, (candidates, total)
            assert ratio_allows(candidates, total) is (candidates * 100 <= total * 10)


def test_ratio_uses_exact_integers_for_huge_totals() -> None:
    total = 10**18
    assert ratio_allows(10**17, total) is True
    # As floats, (10**17 + 1) * 100 == 10**18 * 10; only exact integers see the one path too many.
    assert float((10**17 + 1) * 100) == float(total * 10)
    assert ratio_allows(10**17 + 1, total) is False
    assert ratio_allows(2**62, 2**62 * 10) is True
    assert ratio_allows(2**62 + 1, 2**62 * 10) is False


def test_gate_module_has_no_float_arithmetic() -> None:
    tree = ast.parse(inspect.getsource(gate_module))
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Div), "true division in gate.py"
        if isinstance(node, ast.Constant):
            assert not isinstance(node.value, float), "float literal in gate.py"
        if isinstance(node, ast.Name):
            assert node.id not in {"float", "round", "math"}
