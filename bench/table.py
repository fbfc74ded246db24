"""Plain-text tables for the console (and CI logs)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Cell", "fmt_float", "fmt_int", "render_table"]

Cell = str | int | float


def fmt_int(value: float) -> str:
    return f"{value:,.0f}"


def fmt_float(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def _text(cell: Cell) -> str:
    if isinstance(cell, float):
        return fmt_float(cell)
    if isinstance(cell, int):
        return fmt_int(cell)
    return cell


def render_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> str:
    """A title, a header row and right-aligned numeric columns (the first column is left-aligned)."""
    texts = [[_text(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in texts:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(cells)]
        return "  ".join(parts).rstrip()

    rule = "-" * len(line(list(headers)))
    body = [line(row) for row in texts]
    return "\n".join([title, rule, line(list(headers)), rule, *body, rule])
