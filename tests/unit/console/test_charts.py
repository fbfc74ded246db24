"""The check chart: one slot per check (at least a page of them), oldest left, newest at the right edge."""

from __future__ import annotations

from typing import Any

from console.service_layer.charts import MIN_SLOTS, PADDING, WIDTH, check_bars


def _check(duration: int, *, changed: bool = False, error: str | None = None) -> dict[str, Any]:
    return {"checked_at": "2026-12-01T10:00:00+00:00", "duration_ms": duration, "changed": changed,
            "error_code": error}  # fmt: skip


def test_a_single_check_is_a_narrow_bar_at_the_right_edge() -> None:
    [bar] = check_bars([_check(120)])
    slot = (WIDTH - 2 * PADDING) / MIN_SLOTS
    assert bar.width <= slot
    assert bar.x + bar.width <= WIDTH - PADDING and bar.x >= WIDTH - PADDING - slot - 1e-9


def test_bars_run_oldest_left_and_are_coloured_by_outcome() -> None:
    newest_first = [_check(50, error="timeout"), _check(200, changed=True), _check(100)]
    bars = check_bars(newest_first)
    assert [b.outcome for b in bars] == ["ok", "changed", "failed"]
    assert bars[0].x < bars[1].x < bars[2].x
    assert bars[1].height > bars[0].height > bars[2].height  # relative to the slowest shown


def test_more_checks_than_slots_fill_the_width() -> None:
    bars = check_bars([_check(10 + n) for n in range(2 * MIN_SLOTS)])
    assert len(bars) == 2 * MIN_SLOTS
    assert bars[0].x == PADDING and bars[-1].x + bars[-1].width <= WIDTH - PADDING
    assert all(b.height >= 2 for b in bars)
