"""A small server-rendered SVG chart of a watcher's checks: duration bars, coloured by outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WIDTH = 600
HEIGHT = 120
PADDING = 4


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    outcome: str  # ok | changed | failed
    label: str


def check_bars(checks: list[dict[str, Any]]) -> list[Bar]:
    """Oldest left. Height: duration relative to the slowest check shown (at least 2 px, so each shows)."""
    ordered = list(reversed(checks))
    if not ordered:
        return []
    slowest = max((c.get("duration_ms") or 0) for c in ordered) or 1
    step = (WIDTH - 2 * PADDING) / len(ordered)
    bars = []
    for i, check in enumerate(ordered):
        duration = check.get("duration_ms") or 0
        height = max(2.0, (HEIGHT - 2 * PADDING) * duration / slowest)
        outcome = "failed" if check.get("error_code") else "changed" if check.get("changed") else "ok"
        label = f"{str(check.get('checked_at'))[:19]} {outcome} {duration} ms"
        bars.append(
            Bar(
                x=PADDING + i * step,
                y=HEIGHT - PADDING - height,
                width=max(1.0, step - 1),
                height=height,
                outcome=outcome,
                label=label,
            )
        )
    return bars
