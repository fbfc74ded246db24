"""What of a trace the console accepts and shows: trace ids, and the span attributes an operator may read.

A span attribute is whatever an instrumentation library recorded: a full URL with its query string, a SQL
statement with its literals, an exception's message. Those can hold a token or a password, so the console
shows only attributes of an allow-list (ids, methods, routes, status codes, topics), each value cut to
`ATTRIBUTE_VALUE_MAX_CHARS`; the page escapes them as any text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TRACE_ID = re.compile(r"[0-9a-f]{32}")
NO_TRACE_ID = "0" * 32  # W3C trace context: all zeros is an invalid id
ATTRIBUTE_VALUE_MAX_CHARS = 200
ATTRIBUTES_MAX = 32
SHOWN_ATTRIBUTES = frozenset(
    {
        "span.kind",
        "otel.status_code",
        "error.type",
        "http.request.method",
        "http.method",
        "http.route",
        "http.response.status_code",
        "http.status_code",
        "url.path",
        "server.address",
        "server.port",
        "messaging.system",
        "messaging.operation",
        "messaging.operation.type",
        "messaging.destination.name",
        "messaging.destination.partition.id",
        "messaging.kafka.message.offset",
        "messaging.kafka.consumer.group",
        "messaging.consumer.group.name",
        "db.system",
        "db.system.name",
        "db.operation.name",
        "db.collection.name",
        "rpc.system",
        "rpc.service",
        "rpc.method",
    }
)
SHOWN_PREFIXES = ("yovision.",)


def trace_id_of(text: str) -> str | None:
    """The trace id `text` spells (32 hex digits, any case), lower-case; None for anything else."""
    lowered = text.lower()
    if len(text) != 32 or TRACE_ID.fullmatch(lowered) is None or lowered == NO_TRACE_ID:
        return None
    return lowered


def shown_attributes(attributes: Iterable[tuple[str, object]]) -> tuple[tuple[str, str], ...]:
    """The allowed attributes, sorted by key, values as text (cut), at most ATTRIBUTES_MAX."""
    shown = sorted(
        (key, _text(value))
        for key, value in attributes
        if key in SHOWN_ATTRIBUTES or key.startswith(SHOWN_PREFIXES)
    )
    return tuple(shown[:ATTRIBUTES_MAX])


def _text(value: object) -> str:
    text = str(value)
    return text if len(text) <= ATTRIBUTE_VALUE_MAX_CHARS else text[: ATTRIBUTE_VALUE_MAX_CHARS - 1] + "…"
