"""`yovision_platform.observability`: what context is taken in, what leaves in a span, which roots are
sampled."""

from __future__ import annotations

import io
import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased
from opentelemetry.trace import SpanKind, Status, StatusCode

from yovision_platform.audit_push import (
    ITEM_TRACEPARENTS_MAX_CHARS,
    MAX_BATCH_ITEMS,
    item_traceparents_header,
    parse_item_traceparents,
)
from yovision_platform.observability import configure_logging
from yovision_platform.observability._tracing import (
    TRACEPARENT_MAX_CHARS,
    TRACESTATE_MAX_CHARS,
    BoundedTraceContext,
    _OperationRoots,
    context_from_headers,
    sampled_parent,
    scrubbed,
    trace_headers,
    trace_id_of,
)
from yovision_platform.security import REDACTED, register_secret

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


def extracted_trace_id(headers: dict[str, str]) -> str | None:
    context = BoundedTraceContext().extract(headers)
    return trace_id_of(context)


def test_a_valid_traceparent_is_continued() -> None:
    assert extracted_trace_id({"traceparent": PARENT}) == TRACE_ID


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        f"00-{TRACE_ID}-b7ad6b7169203331",  # no flags
        f"00-{TRACE_ID}-b7ad6b7169203331-0g",  # a flag that is not hex
        f"00-{TRACE_ID}-b7ad6b7169203331-1",  # a flag of one digit
        f"ff-{TRACE_ID}-b7ad6b7169203331-01",  # the version W3C forbids
        f"00-{'0' * 32}-b7ad6b7169203331-01",  # the all-zero trace id
        f"00-{TRACE_ID}-{'0' * 16}-01",  # the all-zero parent id
        f"00-{TRACE_ID.upper()}-b7ad6b7169203331-01",  # upper case
        f"00-{TRACE_ID}-b7ad6b7169203331-01-extra",  # version 00 with a field after the flags
    ],
)
def test_a_malformed_traceparent_starts_a_new_trace(value: str) -> None:
    assert extracted_trace_id({"traceparent": value}) is None


def future_version(length: int) -> str:
    """A traceparent of a later version (fields after the flags are allowed there) of `length` chars."""
    head = f"01-{TRACE_ID}-b7ad6b7169203331-01-"
    return head + "a" * (length - len(head))


def test_a_traceparent_is_read_up_to_its_bound_and_not_beyond() -> None:
    assert extracted_trace_id({"traceparent": future_version(TRACEPARENT_MAX_CHARS - 1)}) == TRACE_ID
    assert extracted_trace_id({"traceparent": future_version(TRACEPARENT_MAX_CHARS)}) == TRACE_ID
    assert extracted_trace_id({"traceparent": future_version(TRACEPARENT_MAX_CHARS + 1)}) is None


def test_a_repeated_traceparent_starts_a_new_trace() -> None:
    context = context_from_headers([("traceparent", PARENT), ("traceparent", PARENT)])
    assert trace_id_of(context) is None


def tracestate_of(length: int) -> str:
    state = "k=" + "v" * (length - 2)
    assert len(state) == length
    return state


def state_kept(length: int) -> bool:
    context = BoundedTraceContext().extract({"traceparent": PARENT, "tracestate": tracestate_of(length)})
    span_context = trace.get_current_span(context).get_span_context()
    assert span_context.is_valid  # the traceparent stands either way
    return len(span_context.trace_state) == 1


def test_a_tracestate_is_kept_up_to_its_bound_and_dropped_beyond() -> None:
    # W3C caps one member's value at 256 characters: a longer one is the propagator's own refusal.
    assert state_kept(200)
    headers = {"traceparent": PARENT, "tracestate": ",".join(f"k{i}=" + "v" * 60 for i in range(8))}
    assert len(headers["tracestate"]) <= TRACESTATE_MAX_CHARS
    assert len(trace.get_current_span(BoundedTraceContext().extract(headers)).get_span_context().trace_state)
    headers["tracestate"] += ",z=" + "v" * (TRACESTATE_MAX_CHARS - len(headers["tracestate"]))
    assert len(headers["tracestate"]) == TRACESTATE_MAX_CHARS + 3
    over = trace.get_current_span(BoundedTraceContext().extract(headers)).get_span_context()
    assert over.is_valid and len(over.trace_state) == 0


def test_message_headers_round_trip_in_text_and_bytes() -> None:
    context = context_from_headers([("traceparent", PARENT)])
    headers = trace_headers(context)
    assert dict(headers)["traceparent"] == PARENT
    as_bytes = [(name, value.encode()) for name, value in headers]
    assert trace_id_of(context_from_headers(as_bytes)) == TRACE_ID
    assert trace_id_of(context_from_headers([("traceparent", b"\xff" * 55)])) is None
    assert trace_id_of(context_from_headers(None)) is None
    assert trace_headers(Context()) == ()


def recorded(provider_sampler: ParentBased | None = None) -> tuple[trace.Tracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=provider_sampler) if provider_sampler else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def test_only_allowed_attributes_leave_and_strings_are_redacted() -> None:
    secret = "s3cr3t-token-value-for-the-span-test"
    register_secret(secret)
    tracer, exporter = recorded()
    with tracer.start_as_current_span("POST /v1/devices", kind=SpanKind.SERVER) as span:
        span.set_attributes(
            {
                "http.route": "/v1/devices",
                "http.status_code": 201,
                "http.url": "http://127.0.0.1:1/v1/devices?token=abc",
                "url.full": "rtsp://user:pass@camera/stream",
                "http.target": "/v1/devices?token=abc",
                "net.peer.name": "camera.internal",
                "db.user": "sense_app",
                "db.statement.parameters": "('rtsp://user:pass@camera',)",
                "db.statement": f"SELECT 1 -- {secret}",
                "yovision.device_id": "5a1f0c2d-3e4b-4a5c-8d6e-7f8091a2b3c4",
            }
        )
        span.record_exception(ValueError(f"input was {secret}"))
        span.set_status(Status(StatusCode.ERROR, f"failed on {secret}"))
    [finished] = exporter.get_finished_spans()
    out = scrubbed(finished)
    assert dict(out.attributes or {}) == {
        "http.route": "/v1/devices",
        "http.status_code": 201,
        "db.statement": f"SELECT 1 -- {REDACTED}",
        "yovision.device_id": "5a1f0c2d-3e4b-4a5c-8d6e-7f8091a2b3c4",
    }
    [event] = out.events
    assert dict(event.attributes or {}) == {"exception.type": "ValueError"}
    assert out.status.status_code is StatusCode.ERROR and out.status.description is None
    assert (out.name, out.context, out.parent, out.kind) == (
        finished.name,
        finished.context,
        finished.parent,
        finished.kind,
    )


def test_a_statement_is_cut_to_its_bound() -> None:
    tracer, exporter = recorded()
    with tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT) as span:
        span.set_attribute("db.statement", "SELECT " + "x" * 5000)
    [finished] = exporter.get_finished_spans()
    assert len(str((scrubbed(finished).attributes or {})["db.statement"])) == 1000


@pytest.mark.parametrize(
    ("kind", "ratio", "sampled"),
    [
        (SpanKind.SERVER, 1.0, True),
        (SpanKind.CONSUMER, 1.0, True),
        (SpanKind.INTERNAL, 1.0, True),
        (SpanKind.CLIENT, 1.0, False),  # a poller's bare query starts no trace
        (SpanKind.SERVER, 0.0, False),
    ],
)
def test_which_roots_are_sampled(kind: SpanKind, ratio: float, sampled: bool) -> None:
    tracer, _ = recorded(ParentBased(root=_OperationRoots(ratio)))
    with tracer.start_as_current_span("root", kind=kind) as span:
        assert span.get_span_context().trace_flags.sampled is sampled


def test_a_client_call_inside_a_sampled_operation_is_sampled() -> None:
    tracer, _ = recorded(ParentBased(root=_OperationRoots(1.0)))
    with (
        tracer.start_as_current_span("op", kind=SpanKind.SERVER),
        tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT) as child,
    ):
        assert child.get_span_context().trace_flags.sampled


def test_a_continued_trace_follows_its_callers_decision() -> None:
    tracer, _ = recorded(ParentBased(root=_OperationRoots(0.0)))
    with tracer.start_as_current_span("in", context=context_from_headers([("traceparent", PARENT)])) as span:
        assert span.get_span_context().trace_flags.sampled
    unsampled = PARENT[:-2] + "00"
    with tracer.start_as_current_span(
        "in", context=context_from_headers([("traceparent", unsampled)])
    ) as span:
        assert not span.get_span_context().trace_flags.sampled


ITEM_PARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


def test_item_traceparents_round_trip_and_ignore_indexes_beyond_the_batch() -> None:
    header = item_traceparents_header({3: ITEM_PARENT, 0: ITEM_PARENT})
    assert header == f"0={ITEM_PARENT},3={ITEM_PARENT}"
    assert parse_item_traceparents(header, 4) == {0: ITEM_PARENT, 3: ITEM_PARENT}
    assert parse_item_traceparents(header, 3) == {0: ITEM_PARENT}
    assert parse_item_traceparents(None, 4) == {}


@pytest.mark.parametrize(
    "header",
    [
        f"00={ITEM_PARENT}",  # a leading zero
        f"100={ITEM_PARENT}",  # beyond the largest batch
        f"-1={ITEM_PARENT}",
        f"0={ITEM_PARENT},",  # an empty pair
        f"0={ITEM_PARENT};1={ITEM_PARENT}",
        f"0={ITEM_PARENT[:-1]}",
        f"0={ITEM_PARENT},1=garbage",  # one bad pair: none is taken
        f"0= {ITEM_PARENT}",
    ],
)
def test_a_malformed_item_traceparents_header_is_ignored_whole(header: str) -> None:
    assert parse_item_traceparents(header, MAX_BATCH_ITEMS) == {}


def test_the_item_traceparents_header_is_read_up_to_its_bound() -> None:
    # The longest header a batch can need (every item, version 00) is within the bound; a longer one is
    # refused before any pair is read, even when its pairs are well formed (here: index 0 again).
    full = item_traceparents_header(dict.fromkeys(range(MAX_BATCH_ITEMS), ITEM_PARENT))
    assert len(full) <= ITEM_TRACEPARENTS_MAX_CHARS
    assert len(parse_item_traceparents(full, MAX_BATCH_ITEMS)) == MAX_BATCH_ITEMS
    longer = f"{full},0={ITEM_PARENT}"
    assert len(longer) > ITEM_TRACEPARENTS_MAX_CHARS
    assert parse_item_traceparents(longer, MAX_BATCH_ITEMS) == {}


def test_a_log_line_written_inside_a_span_names_its_trace_and_span() -> None:
    stream = io.StringIO()
    configure_logging("sense-reconciler", "test-1", "INFO", stream=stream)
    tracer, _ = recorded()
    logger = logging.getLogger("yovision.test.tracing")
    with tracer.start_as_current_span("op") as span:
        logger.info("inside")
    logger.info("outside")
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    context = span.get_span_context()
    assert (inside["trace_id"], inside["span_id"]) == (
        trace.format_trace_id(context.trace_id),
        trace.format_span_id(context.span_id),
    )
    assert "trace_id" not in outside and "span_id" not in outside


def test_the_relay_reads_a_sampled_rows_parent_and_skips_the_others() -> None:
    parent = sampled_parent([("event_type", "x"), ("traceparent", PARENT)])
    assert parent is not None and trace_id_of(parent) == TRACE_ID
    span_context = trace.get_current_span(parent).get_span_context()
    assert span_context.is_remote and span_context.trace_flags.sampled
    assert span_context.span_id == int("b7ad6b7169203331", 16)
    for headers in (
        [("traceparent", PARENT[:-2] + "00")],  # not sampled: no span to record
        [("traceparent", f"00-{'0' * 32}-b7ad6b7169203331-01")],
        [("traceparent", f"00-{TRACE_ID}-{'0' * 16}-01")],
        [("traceparent", PARENT.upper())],
        [("traceparent", PARENT + "-extra")],
        [("event_type", "x")],
        [],
    ):
        assert sampled_parent(headers) is None, headers
