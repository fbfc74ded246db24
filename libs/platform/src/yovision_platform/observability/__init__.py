"""Observability: logging, Prometheus metrics, OpenTelemetry tracing.

The modules below are private; import the names listed in ``__all__`` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yovision_platform._exports import lazy_exports

if TYPE_CHECKING:
    from yovision_platform.observability._logging import LOG_LEVELS as LOG_LEVELS
    from yovision_platform.observability._logging import JsonFormatter as JsonFormatter
    from yovision_platform.observability._logging import RedactionFilter as RedactionFilter
    from yovision_platform.observability._logging import RepeatFilter as RepeatFilter
    from yovision_platform.observability._logging import configure_logging as configure_logging
    from yovision_platform.observability._logging import extra_fields as extra_fields
    from yovision_platform.observability._metrics import (
        DEFAULT_LATENCY_BUCKETS_SECONDS as DEFAULT_LATENCY_BUCKETS_SECONDS,
    )
    from yovision_platform.observability._metrics import INSTANCE_ID as INSTANCE_ID
    from yovision_platform.observability._metrics import INSTANCE_ID_PATTERN as INSTANCE_ID_PATTERN
    from yovision_platform.observability._metrics import LabeledMetric as LabeledMetric
    from yovision_platform.observability._metrics import LabelSpec as LabelSpec
    from yovision_platform.observability._metrics import build_info as build_info
    from yovision_platform.observability._metrics import create_registry as create_registry
    from yovision_platform.observability._metrics import labeled_counter as labeled_counter
    from yovision_platform.observability._metrics import labeled_gauge as labeled_gauge
    from yovision_platform.observability._metrics import labeled_histogram as labeled_histogram
    from yovision_platform.observability._metrics import render_latest as render_latest
    from yovision_platform.observability._metrics import validate_instance_id as validate_instance_id
    from yovision_platform.observability._tracing import EXPORTED_ATTRIBUTES as EXPORTED_ATTRIBUTES
    from yovision_platform.observability._tracing import TRACE_HEADERS_MAX_BYTES as TRACE_HEADERS_MAX_BYTES
    from yovision_platform.observability._tracing import TRACEPARENT_HEADER as TRACEPARENT_HEADER
    from yovision_platform.observability._tracing import TRACESTATE_HEADER as TRACESTATE_HEADER
    from yovision_platform.observability._tracing import BoundedTraceContext as BoundedTraceContext
    from yovision_platform.observability._tracing import Tracing as Tracing
    from yovision_platform.observability._tracing import configure_tracing as configure_tracing
    from yovision_platform.observability._tracing import context_from_headers as context_from_headers
    from yovision_platform.observability._tracing import context_of as context_of
    from yovision_platform.observability._tracing import current_traceparent as current_traceparent
    from yovision_platform.observability._tracing import current_traceparent_of as current_traceparent_of
    from yovision_platform.observability._tracing import instrument_app as instrument_app
    from yovision_platform.observability._tracing import record_span as record_span
    from yovision_platform.observability._tracing import sampled_parent as sampled_parent
    from yovision_platform.observability._tracing import trace_headers as trace_headers
    from yovision_platform.observability._tracing import trace_id_of as trace_id_of
    from yovision_platform.observability._tracing import tracer as tracer
    from yovision_platform.observability._tracing import tracing_on as tracing_on

__all__ = [
    "DEFAULT_LATENCY_BUCKETS_SECONDS",
    "EXPORTED_ATTRIBUTES",
    "INSTANCE_ID",
    "INSTANCE_ID_PATTERN",
    "LOG_LEVELS",
    "TRACEPARENT_HEADER",
    "TRACESTATE_HEADER",
    "TRACE_HEADERS_MAX_BYTES",
    "BoundedTraceContext",
    "JsonFormatter",
    "LabelSpec",
    "LabeledMetric",
    "RedactionFilter",
    "RepeatFilter",
    "Tracing",
    "build_info",
    "configure_logging",
    "configure_tracing",
    "context_from_headers",
    "context_of",
    "create_registry",
    "current_traceparent",
    "current_traceparent_of",
    "extra_fields",
    "instrument_app",
    "labeled_counter",
    "labeled_gauge",
    "labeled_histogram",
    "record_span",
    "render_latest",
    "sampled_parent",
    "trace_headers",
    "trace_id_of",
    "tracer",
    "tracing_on",
    "validate_instance_id",
]

__getattr__ = lazy_exports(__name__, __file__)
