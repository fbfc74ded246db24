"""Tracing: OpenTelemetry spans exported over OTLP/HTTP, and W3C trace context carried across the system.

One trace follows a change from the API request that causes it: the request's context is stored with each
outbox row (`trace_headers`), put on the Kafka record by the relay, and continued by each consumer
(`context_from_headers`); the Sense→Bell push carries each fact's context in a header of its own.

What this module guarantees, whatever the instrumentation libraries do:

- **Bounded and never in the way.** Spans go to a `BatchSpanProcessor` whose queue holds at most
  `EXPORT_QUEUE_MAX_SPANS`; when the collector is slow or down, new spans are dropped, never waited for, and
  exporting runs on the processor's own thread with a short timeout. Without an endpoint no provider is
  installed at all: every span is the API's no-op.
- **Only valid context is taken in.** `BoundedTraceContext` ignores a ``traceparent`` that is malformed,
  longer than `TRACEPARENT_MAX_CHARS` or repeated, and a ``tracestate`` over `TRACESTATE_MAX_CHARS`: the
  request then starts a new trace; it is never refused for it. What is stored or sent on is always this
  process's own rendering of a parsed context, never the caller's text.
- **No secret leaves in a span.** The exporter keeps only the attributes of `EXPORTED_ATTRIBUTES` (and the
  ``yovision.`` and ``messaging.`` ones this code sets), drops status descriptions and exception messages,
  and passes every string through the log redactor: a URL, header value or token an instrumentation
  records is not exported.
- **Roots are requests, not chatter.** A span with no parent is sampled (by `sampling_ratio`) only when it
  starts an operation: a server request, a consumed message, a worker's own step. A bare database query
  or HTTP call with no operation around it (a poller's SELECT) starts no trace.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import (
    CarrierT,
    DefaultGetter,
    DefaultSetter,
    Getter,
    Setter,
    TextMapPropagator,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from yovision_platform.security._redaction import redact_text

__all__ = [
    "EXPORTED_ATTRIBUTES",
    "TRACEPARENT_HEADER",
    "TRACESTATE_HEADER",
    "TRACE_HEADERS_MAX_BYTES",
    "BoundedTraceContext",
    "Tracing",
    "configure_tracing",
    "context_from_headers",
    "context_of",
    "current_traceparent",
    "current_traceparent_of",
    "instrument_app",
    "record_span",
    "sampled_parent",
    "trace_headers",
    "trace_id_of",
    "tracer",
    "tracing_on",
]

log = logging.getLogger("yovision_platform.tracing")

TRACEPARENT_HEADER = "traceparent"
TRACESTATE_HEADER = "tracestate"
# Version 00 is exactly 55 characters; a later version may append fields, which W3C tells a reader of 00
# to ignore. Anything longer than this is not a trace context worth parsing.
TRACEPARENT_MAX_CHARS = 128
# W3C asks a vendor to propagate at least 512 characters of tracestate, and allows cutting beyond that.
TRACESTATE_MAX_CHARS = 512
# What trace headers can add to an outbox row or Kafka record, names included: outside the row's own size
# limit, and well inside the 48 KiB between that limit and the broker's.
TRACE_HEADERS_MAX_BYTES = len(TRACEPARENT_HEADER) + 55 + len(TRACESTATE_HEADER) + TRACESTATE_MAX_CHARS
EXPORT_QUEUE_MAX_SPANS = 2048
EXPORT_BATCH_MAX_SPANS = 512
EXPORT_DELAY_MILLIS = 1000
EXPORT_TIMEOUT_SECONDS = 5.0
STATEMENT_MAX_CHARS = 1000
SHUTDOWN_FLUSH_SECONDS = 2.0

EXPORTED_ATTRIBUTES = frozenset(
    {
        "http.method",
        "http.request.method",
        "http.status_code",
        "http.response.status_code",
        "http.route",
        "error.type",
        "db.system",
        "db.system.name",
        "db.operation",
        "db.operation.name",
        "db.statement",
        "db.query.text",
    }
)
EXPORTED_ATTRIBUTE_PREFIXES = ("yovision.", "messaging.")
STATEMENT_ATTRIBUTES = frozenset({"db.statement", "db.query.text"})
EXPORTED_EVENT_ATTRIBUTES = frozenset({"exception.type"})


_DEFAULT_GETTER: Getter[Any] = DefaultGetter()
_DEFAULT_SETTER: Setter[Any] = DefaultSetter()


class BoundedTraceContext(TextMapPropagator):
    """W3C trace context (`TraceContextTextMapPropagator`), refusing what a client should not make a server
    parse: an over-long or repeated ``traceparent``, an over-long ``tracestate`` (dropped on its own)."""

    def __init__(self) -> None:
        self._w3c = TraceContextTextMapPropagator()

    def extract(
        self, carrier: CarrierT, context: Context | None = None, getter: Getter[CarrierT] = _DEFAULT_GETTER
    ) -> Context:
        parents = getter.get(carrier, TRACEPARENT_HEADER) or []
        if len(parents) != 1 or len(parents[0]) > TRACEPARENT_MAX_CHARS:
            return context if context is not None else Context()
        states = getter.get(carrier, TRACESTATE_HEADER) or []
        if sum(len(state) for state in states) > TRACESTATE_MAX_CHARS:
            states = []
        bounded = {TRACEPARENT_HEADER: parents[0]}
        if states:
            bounded[TRACESTATE_HEADER] = ",".join(states)
        return self._w3c.extract(bounded, context)

    def inject(
        self, carrier: CarrierT, context: Context | None = None, setter: Setter[CarrierT] = _DEFAULT_SETTER
    ) -> None:
        self._w3c.inject(carrier, context, setter)

    @property
    def fields(self) -> set[str]:
        return self._w3c.fields


_PROPAGATOR = BoundedTraceContext()
_OWN_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


class _OperationRoots(Sampler):
    """The root sampler: operations by ratio, a bare client call (no operation around it) never."""

    def __init__(self, ratio: float) -> None:
        self._ratio = TraceIdRatioBased(ratio)

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        if kind is SpanKind.CLIENT:
            return SamplingResult(Decision.DROP)
        return self._ratio.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"OperationRoots({self._ratio.get_description()})"


class _ScrubbedExporter(SpanExporter):
    """Exports copies of the spans with only `EXPORTED_ATTRIBUTES`, redacted, and no free-text status."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner
        self._shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([scrubbed(span) for span in spans])

    def shutdown(self) -> None:
        if not self._shut:  # `Tracing.shutdown` stops it before the provider does
            self._shut = True
            self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


def scrubbed(span: ReadableSpan) -> ReadableSpan:
    """`span` as it may leave the process (see the module's guarantees)."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=_kept(span.attributes, EXPORTED_ATTRIBUTES, prefixes=True),
        events=[
            Event(event.name, _kept(event.attributes, EXPORTED_EVENT_ATTRIBUTES), event.timestamp)
            for event in span.events
        ],
        links=[Link(link.context) for link in span.links],
        kind=span.kind,
        status=Status(span.status.status_code),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _kept(attributes: Attributes, allowed: frozenset[str], *, prefixes: bool = False) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if key not in allowed and not (prefixes and key.startswith(EXPORTED_ATTRIBUTE_PREFIXES)):
            continue
        if isinstance(value, str) and key in allowed:  # an instrumentation's text; ours holds ids and names
            if key in STATEMENT_ATTRIBUTES:
                value = value[:STATEMENT_MAX_CHARS]
            value = redact_text(value)
        kept[key] = value
    return kept


@dataclass
class Tracing:
    """The installed provider (None: tracing off) and its exporter."""

    provider: TracerProvider | None
    exporter: SpanExporter | None = None

    def shutdown(self) -> None:
        """Export what is queued for at most `SHUTDOWN_FLUSH_SECONDS`, then stop: a collector that is down
        costs a stopping process that long, not an export timeout per queued batch (the SDK's own flush
        takes no bound)."""
        if self.provider is None:
            return
        stopping = threading.Thread(target=self.provider.shutdown, name="tracing-shutdown", daemon=True)
        stopping.start()
        stopping.join(SHUTDOWN_FLUSH_SECONDS)
        if stopping.is_alive() and self.exporter is not None:
            self.exporter.shutdown()  # ends the exporter's retries: what is still queued is dropped
            stopping.join(SHUTDOWN_FLUSH_SECONDS)


def configure_tracing(
    service: str,
    *,
    instance_id: str,
    version: str,
    otlp_endpoint: str | None,
    sampling_ratio: float,
    exporter: SpanExporter | None = None,
) -> Tracing:
    """Install the process's tracer provider: spans of `service` to ``<otlp_endpoint>/v1/traces`` (or to
    `exporter`, for tests), context in and out as `BoundedTraceContext`. With neither, tracing stays off."""
    propagate.set_global_textmap(_PROPAGATOR)
    if exporter is None and otlp_endpoint is None:
        return Tracing(None)
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(
            endpoint=f"{otlp_endpoint.rstrip('/')}/v1/traces" if otlp_endpoint else None,
            timeout=EXPORT_TIMEOUT_SECONDS,
        )
    provider = TracerProvider(
        sampler=ParentBased(root=_OperationRoots(sampling_ratio)),
        resource=Resource.create(
            {"service.name": service, "service.instance.id": instance_id, "service.version": version}
        ),
    )
    scrubbed_exporter = _ScrubbedExporter(exporter)
    provider.add_span_processor(
        BatchSpanProcessor(
            scrubbed_exporter,
            max_queue_size=EXPORT_QUEUE_MAX_SPANS,
            max_export_batch_size=EXPORT_BATCH_MAX_SPANS,
            schedule_delay_millis=EXPORT_DELAY_MILLIS,
            export_timeout_millis=EXPORT_TIMEOUT_SECONDS * 1000,
        )
    )
    trace.set_tracer_provider(provider)
    _instrument_clients(provider)
    return Tracing(provider, scrubbed_exporter)


def _instrument_clients(provider: TracerProvider) -> None:
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    asyncpg_instrumentor = AsyncPGInstrumentor()  # type: ignore[no-untyped-call]
    if not asyncpg_instrumentor.is_instrumented_by_opentelemetry:
        asyncpg_instrumentor.instrument(tracer_provider=provider)
    if not HTTPXClientInstrumentor().is_instrumented_by_opentelemetry:
        HTTPXClientInstrumentor().instrument(tracer_provider=provider)


UNTRACED_PATHS = ("/healthz", "/readyz", "/metrics")


def instrument_app(app: Any, provider: TracerProvider) -> None:
    """A server span per request of `app` (not the health and metrics routes), continuing the caller's
    context; no spans for the ASGI messages inside it."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        excluded_urls=",".join(f"{path}$" for path in UNTRACED_PATHS),
        exclude_spans=["receive", "send"],
    )


def tracing_on() -> bool:
    """Whether this process records spans (a provider is installed)."""
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def record_span(
    tracer_: trace.Tracer,
    name: str,
    *,
    parent: Context,
    kind: SpanKind,
    start_ns: int,
    end_ns: int,
    attributes: Attributes = None,
) -> None:
    """A span that already happened (from `start_ns` to `end_ns`), child of `parent`: for work done for
    many traces at once, such as a batch published in one Kafka transaction."""
    span = tracer_.start_span(name, context=parent, kind=kind, attributes=attributes, start_time=start_ns)
    span.end(end_ns)


def tracer(name: str) -> trace.Tracer:
    """The tracer of module `name` (the API's no-op one while tracing is off)."""
    return trace.get_tracer(name)


def trace_headers(context: Context | None = None) -> tuple[tuple[str, str], ...]:
    """The W3C headers of `context` (default: the current one); empty when there is no valid span."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context)
    return tuple((name, carrier[name]) for name in (TRACEPARENT_HEADER, TRACESTATE_HEADER) if name in carrier)


def current_traceparent() -> str | None:
    """The current span's ``traceparent``, as this process renders it; None without a valid span."""
    return dict(trace_headers()).get(TRACEPARENT_HEADER)


def current_traceparent_of(span: trace.Span) -> str | None:
    """`span`'s ``traceparent`` (for a span that is not the current one)."""
    return dict(trace_headers(trace.set_span_in_context(span))).get(TRACEPARENT_HEADER)


def sampled_parent(headers: Iterable[tuple[str, str]]) -> Context | None:
    """The context of a row's ``traceparent`` when it is sampled, else None: the relay's per-row check,
    cheaper than the propagator (a row's headers are this code's own rendering, version 00)."""
    for name, value in headers:
        if name == TRACEPARENT_HEADER:
            match = _OWN_TRACEPARENT.fullmatch(value)
            if match is None or not int(match[3], 16) & TraceFlags.SAMPLED:
                return None
            trace_id, span_id = int(match[1], 16), int(match[2], 16)
            if not trace_id or not span_id:
                return None
            parent = SpanContext(
                trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
            )
            return trace.set_span_in_context(NonRecordingSpan(parent))
    return None


def context_of(traceparent: str | None) -> Context:
    """The context of one ``traceparent`` kept apart from any headers (a column beside queued work, an item
    of the signed push); an empty context (a new trace) without one or with an invalid one."""
    return context_from_headers([(TRACEPARENT_HEADER, traceparent)] if traceparent else ())


def context_from_headers(headers: Iterable[tuple[str, str | bytes]] | None) -> Context:
    """The trace context carried by message `headers` (Kafka's (name, bytes) pairs, or text pairs); an
    empty context (a new trace) when they carry none or an invalid one."""
    carrier: dict[str, list[str]] = {}
    for name, value in headers or ():
        if name in (TRACEPARENT_HEADER, TRACESTATE_HEADER):
            try:
                text = value.decode("ascii") if isinstance(value, bytes) else value
            except UnicodeDecodeError:
                return Context()
            carrier.setdefault(name, []).append(text)
    if not carrier:
        return Context()
    return _PROPAGATOR.extract(carrier, Context(), getter=_ListGetter())


class _ListGetter(Getter[Mapping[str, list[str]]]):
    def get(self, carrier: Mapping[str, list[str]], key: str) -> list[str] | None:
        return carrier.get(key)

    def keys(self, carrier: Mapping[str, list[str]]) -> list[str]:
        return list(carrier)


def trace_id_of(context: Context | None = None) -> str | None:
    """The 32-hex trace id of `context`'s span (default: the current span); None without a valid one."""
    span_context = trace.get_current_span(context).get_span_context()
    return trace.format_trace_id(span_context.trace_id) if span_context.is_valid else None
