"""The span waterfall's layout: each child under its parent, bars on one time axis from the trace's earliest
start, orphans and clock skew drawn where their own clocks put them, and at most MAX_SPANS_DRAWN rows."""

from __future__ import annotations

import pytest

from console.domain.trace_fields import shown_attributes, trace_id_of
from console.domain.waterfall import (
    BAR_LEFT,
    BAR_WIDTH,
    MAX_SPANS_DRAWN,
    MIN_BAR_WIDTH,
    ROW_HEIGHT,
    Span,
    duration_text,
    layout,
    summary_of,
)

T0 = 1_700_000_000_000_000  # microseconds


def span(
    span_id: str,
    parent: str | None,
    start_ms: float,
    duration_ms: float,
    *,
    service: str = "sense-reconciler",
    error: bool = False,
) -> Span:
    start, duration = T0 + int(start_ms * 1000), int(duration_ms * 1000)
    return Span(span_id, parent, service, f"op-{span_id}", start, duration, error)


def order(spans: list[Span]) -> list[tuple[str, int]]:
    return [(r.span.span_id, r.depth) for r in layout(spans).rows]


def test_children_follow_their_parent_depth_first_and_siblings_by_start() -> None:
    spans = [
        span("c2", "root", 50, 10),
        span("g1", "c1", 12, 3),
        span("root", None, 0, 100),
        span("c1", "root", 10, 30),
        span("r2", None, 120, 5),
    ]
    assert order(spans) == [("root", 0), ("c1", 1), ("g1", 2), ("c2", 1), ("r2", 0)]


def test_bars_sit_at_their_offset_and_duration_on_the_axis() -> None:
    waterfall = layout([span("root", None, 0, 200), span("child", "root", 50, 100)])
    root, child = waterfall.rows
    assert waterfall.duration_us == 200_000 and waterfall.start_us == T0
    assert root.x == BAR_LEFT and root.width == pytest.approx(BAR_WIDTH)
    assert child.offset_us == 50_000
    assert child.x == pytest.approx(BAR_LEFT + BAR_WIDTH / 4) and child.width == pytest.approx(BAR_WIDTH / 2)
    assert child.y - root.y == ROW_HEIGHT
    assert child.label_x > root.label_x  # indented under its parent
    assert waterfall.ticks[0].label == "0 µs" and waterfall.ticks[-1].label == "200 ms"


def test_a_span_whose_parent_is_missing_is_drawn_as_a_marked_root_at_its_own_start() -> None:
    waterfall = layout(
        [span("root", None, 0, 100), span("lost", "not-here", 30, 10), span("kid", "lost", 31, 2)]
    )
    rows = {r.span.span_id: r for r in waterfall.rows}
    assert [(r.span.span_id, r.depth) for r in waterfall.rows] == [("root", 0), ("lost", 0), ("kid", 1)]
    assert rows["lost"].orphan and not rows["root"].orphan and not rows["kid"].orphan
    assert rows["lost"].offset_us == 30_000


def test_a_child_that_starts_before_its_parent_keeps_its_own_start_and_is_marked_skewed() -> None:
    waterfall = layout(
        [span("parent", None, 10, 20), span("early", "parent", 0, 5), span("ok", "parent", 12, 2)]
    )
    rows = {r.span.span_id: r for r in waterfall.rows}
    assert [r.span.span_id for r in waterfall.rows] == ["parent", "early", "ok"]  # still under its parent
    assert waterfall.start_us == T0  # the axis starts at the earliest span, the skewed child
    assert rows["early"].offset_us == 0 and rows["early"].x == BAR_LEFT
    assert rows["parent"].offset_us == 10_000 and rows["parent"].x > rows["early"].x
    assert rows["early"].skewed and not rows["ok"].skewed and not rows["parent"].skewed
    assert all(r.offset_us >= 0 for r in waterfall.rows)


def test_no_more_rows_than_the_cap_and_the_rest_is_counted() -> None:
    spans = [span("root", None, 0, 10_000)] + [
        span(f"s{i}", "root", i, 1) for i in range(MAX_SPANS_DRAWN + 5)
    ]
    waterfall = layout(spans)
    assert len(waterfall.rows) == MAX_SPANS_DRAWN
    assert waterfall.span_count == MAX_SPANS_DRAWN + 6 and waterfall.hidden == 6 and waterfall.capped
    assert waterfall.rows[0].span.span_id == "root"
    assert not layout(spans[:MAX_SPANS_DRAWN]).capped


def test_a_zero_length_span_still_shows_and_a_duplicate_id_is_drawn_once() -> None:
    waterfall = layout([span("a", None, 0, 10), span("b", "a", 5, 0), span("b", "a", 6, 1)])
    assert [r.span.span_id for r in waterfall.rows] == ["a", "b"]
    assert waterfall.rows[1].width == MIN_BAR_WIDTH


def test_a_loop_of_parents_is_cut_and_every_span_is_drawn_once() -> None:
    assert sorted(order([span("x", "y", 0, 5), span("y", "x", 1, 5), span("self", "self", 2, 1)])) == [
        ("self", 0), ("x", 0), ("y", 1),
    ]  # fmt: skip


def test_services_get_colours_in_order_of_appearance() -> None:
    waterfall = layout(
        [
            span("a", None, 0, 9, service="console"),
            span("b", "a", 1, 2, service="bell-receiver"),
            span("c", "a", 2, 2, service="console"),
        ]
    )
    assert waterfall.services == (("console", 0), ("bell-receiver", 1))
    assert [r.service_colour for r in waterfall.rows] == [0, 1, 0]


def test_no_spans_no_rows() -> None:
    assert layout([]).rows == () and layout([]).span_count == 0


def test_a_summary_names_the_first_root_and_any_error() -> None:
    summary = summary_of("t" * 32, [span("b", "a", 5, 50, error=True), span("a", None, 0, 20)])
    assert (summary.root, summary.duration_us, summary.span_count, summary.error) == (
        "sense-reconciler: op-a", 55_000, 2, True,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("microseconds", "text"),
    [(0, "0 µs"), (999, "999 µs"), (1500, "1.5 ms"), (12_345, "12.3 ms"), (1_240_000, "1.24 s"),
     (125_000_000, "2 min 5 s")],
)  # fmt: skip
def test_durations_read_in_their_unit(microseconds: int, text: str) -> None:
    assert duration_text(microseconds) == text


def test_only_32_hex_digits_are_a_trace_id() -> None:
    assert trace_id_of("0AF7651916CD43DD8448EB211C80319C") == "0af7651916cd43dd8448eb211c80319c"
    for refused in ("0" * 32, "a" * 31, "a" * 33, "g" * 32, "<script>" + "a" * 24, "a" * 16, "\uff41" * 32):
        assert trace_id_of(refused) is None


def test_only_allowed_span_attributes_are_shown() -> None:
    shown = shown_attributes([
        ("yovision.device_id", "d-1"), ("http.route", "/v1/devices/{id}"), ("url.full", "http://x/?token=s3"),
        ("db.statement", "SELECT 'secret'"), ("exception.message", "password=p"),
        ("http.response.status_code", 201),
        ("yovision.material_id", "m" * 500),
    ])  # fmt: skip
    assert [k for k, _ in shown] == ["http.response.status_code", "http.route", "yovision.device_id",
                                     "yovision.material_id"]  # fmt: skip
    assert (
        dict(shown)["http.response.status_code"] == "201" and len(dict(shown)["yovision.material_id"]) == 200
    )
