"""A trace's span waterfall, laid out: one row per span, each child under its parent (depth-first, siblings
by start), a bar placed by start offset and duration on the trace's time axis. Pure: spans in, geometry out
(SVG user units); the page only draws it.

Traces are as the collector got them, so the layout takes what a real trace holds:

- an *orphan*, a span whose parent is not in the trace (not exported yet, dropped, or kept by another
  collector), is drawn as a root, marked, at its own start;
- *clock skew*: hosts' clocks differ, so a child may start before its parent (or end after it). Every bar
  stays at its own clock's start; the axis begins at the earliest span of all, so no offset is negative. The
  child is marked `skewed`;
- a span id seen twice is drawn once (the first), and a parent chain that loops is cut where it closes;
- at most `MAX_SPANS_DRAWN` rows: the first ones in drawing order, the rest only counted (`hidden`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

MAX_SPANS_DRAWN = 2000
SERVICE_COLOURS = 8  # CSS classes svc-0..svc-7; more services share them in turn
WIDTH = 1200.0
LABEL_WIDTH = 420.0
BAR_LEFT = LABEL_WIDTH + 10.0
BAR_WIDTH = WIDTH - BAR_LEFT - 10.0
MIN_BAR_WIDTH = 2.0
ROW_HEIGHT = 22.0
AXIS_HEIGHT = 28.0
INDENT = 14.0
MAX_INDENT_DEPTH = 16  # deeper spans are drawn at this indent (the depth is still shown in the title)
LABEL_MAX_CHARS = 56
AXIS_TICKS = 5


@dataclass(frozen=True)
class Span:
    span_id: str
    parent_id: str | None
    service: str
    name: str
    start_us: int  # since the Unix epoch, microseconds
    duration_us: int
    error: bool = False
    attributes: tuple[tuple[str, str], ...] = ()

    @property
    def end_us(self) -> int:
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class Trace:
    """A stored trace: its id and its spans (attributes already cut to the shown ones)."""

    trace_id: str
    spans: tuple[Span, ...]


class TracesUnavailable(Exception):
    """The trace store did not answer, or not with a trace; `reason` is a stable code."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class WaterfallRow:
    span: Span
    depth: int
    offset_us: int  # the span's start, from the trace's first start
    orphan: bool  # its parent is not in the trace
    skewed: bool  # it starts before its parent, or ends after it
    service_colour: int
    y: float
    x: float
    width: float
    label_x: float
    label: str


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Waterfall:
    rows: tuple[WaterfallRow, ...]
    services: tuple[tuple[str, int], ...]  # each service of the trace and its colour, by first row
    start_us: int
    duration_us: int
    span_count: int
    hidden: int  # spans not drawn (over MAX_SPANS_DRAWN)
    ticks: tuple[Tick, ...]
    height: float
    width: float = WIDTH

    @property
    def capped(self) -> bool:
        return self.hidden > 0


def duration_text(microseconds: int) -> str:
    """`850 µs`, `12.3 ms`, `1.24 s`, `2 min 5 s`."""
    if microseconds < 1000:
        return f"{microseconds} µs"
    if microseconds < 1_000_000:
        return f"{microseconds / 1000:.3g} ms"
    if microseconds < 60_000_000:
        return f"{microseconds / 1_000_000:.3g} s"
    minutes, seconds = divmod(microseconds // 1_000_000, 60)
    return f"{minutes} min {seconds} s"


def _drawing_order(spans: Sequence[Span]) -> list[tuple[Span, int, bool]]:
    """(span, depth, orphan) depth-first from each root, roots and siblings by (start, name, id)."""
    by_id: dict[str, Span] = {}
    for span in spans:
        by_id.setdefault(span.span_id, span)
    children: dict[str, list[Span]] = defaultdict(list)
    roots: list[Span] = []
    for span in by_id.values():
        if span.parent_id is not None and span.parent_id in by_id and span.parent_id != span.span_id:
            children[span.parent_id].append(span)
        else:
            roots.append(span)

    def key(span: Span) -> tuple[int, str, str]:
        return (span.start_us, span.name, span.span_id)

    ordered: list[tuple[Span, int, bool]] = []
    placed: set[str] = set()

    def walk(root: Span) -> None:
        stack = [(root, 0)]
        while stack:
            span, depth = stack.pop()
            if span.span_id in placed:
                continue
            placed.add(span.span_id)
            orphan = depth == 0 and span.parent_id is not None
            ordered.append((span, depth, orphan))
            stack.extend(
                (child, depth + 1) for child in sorted(children[span.span_id], key=key, reverse=True)
            )

    for root in sorted(roots, key=key):
        walk(root)
    # Spans only reachable through a loop of parents: the loop is cut at the earliest of them.
    for span in sorted((s for s in by_id.values() if s.span_id not in placed), key=key):
        walk(span)
    return ordered


def _extent(ordered: Sequence[tuple[Span, int, bool]]) -> tuple[int, int]:
    """The earliest start and the latest end of the spans."""
    return min(span.start_us for span, _, _ in ordered), max(span.end_us for span, _, _ in ordered)


def _label(span: Span) -> str:
    text = f"{span.name} · {span.service} · {duration_text(span.duration_us)}"
    return text if len(text) <= LABEL_MAX_CHARS else text[: LABEL_MAX_CHARS - 1] + "…"


def layout(spans: Sequence[Span], *, max_rows: int = MAX_SPANS_DRAWN) -> Waterfall:
    """The waterfall of one trace's spans (any order); empty rows for no spans."""
    ordered = _drawing_order(spans)
    if not ordered:
        return Waterfall((), (), 0, 0, 0, 0, (), AXIS_HEIGHT)
    start, end = _extent(ordered)
    total = max(end - start, 1)
    scale = BAR_WIDTH / total
    by_id = {span.span_id: span for span, _, _ in ordered}
    colours: dict[str, int] = {}
    rows = []
    for index, (span, depth, orphan) in enumerate(ordered[:max_rows]):
        colour = colours.setdefault(span.service, len(colours) % SERVICE_COLOURS)
        parent = None if orphan or depth == 0 else by_id.get(span.parent_id or "")
        skewed = parent is not None and (span.start_us < parent.start_us or span.end_us > parent.end_us)
        offset = span.start_us - start
        rows.append(
            WaterfallRow(
                span=span,
                depth=depth,
                offset_us=offset,
                orphan=orphan,
                skewed=skewed,
                service_colour=colour,
                y=AXIS_HEIGHT + index * ROW_HEIGHT,
                x=BAR_LEFT + offset * scale,
                width=max(MIN_BAR_WIDTH, span.duration_us * scale),
                label_x=4.0 + min(depth, MAX_INDENT_DEPTH) * INDENT,
                label=_label(span),
            )
        )
    ticks = tuple(
        Tick(BAR_LEFT + BAR_WIDTH * i / (AXIS_TICKS - 1), duration_text(total * i // (AXIS_TICKS - 1)))
        for i in range(AXIS_TICKS)
    )
    return Waterfall(
        rows=tuple(rows),
        services=tuple(colours.items()),
        start_us=start,
        duration_us=end - start,
        span_count=len(ordered),
        hidden=len(ordered) - len(rows),
        ticks=ticks,
        height=AXIS_HEIGHT + len(rows) * ROW_HEIGHT + 4.0,
    )


@dataclass(frozen=True)
class TraceSummary:
    """One trace in a list: when it started, how long it took, how many spans, what its first root did."""

    trace_id: str
    start_us: int
    duration_us: int
    span_count: int
    root: str
    error: bool


def summary_of(trace_id: str, spans: Sequence[Span]) -> TraceSummary:
    ordered = _drawing_order(spans)
    if not ordered:
        return TraceSummary(trace_id, 0, 0, 0, "", False)
    start, end = _extent(ordered)
    first = ordered[0][0]
    return TraceSummary(
        trace_id,
        start,
        end - start,
        len(ordered),
        f"{first.service}: {first.name}",
        any(span.error for span, _, _ in ordered),
    )
