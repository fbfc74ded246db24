"""JSON logging with redaction: one JSON object per line.

Each line holds ``ts`` (UTC, RFC 3339 with milliseconds), ``level``, ``logger``, ``msg``, ``service``,
``instance_id``; ``trace_id`` and ``span_id`` when the line is written inside a span (its trace is then
one search away in Jaeger); then ``extra`` (an object with the fields passed via
``logger.info(..., extra={...})``) and ``exc`` (the formatted traceback) when present. Every one of them
goes through :mod:`.redaction`.

Redaction happens twice on purpose: :class:`RedactionFilter` rewrites the record in place (so any other
handler attached later sees redacted data too), and :class:`JsonFormatter` redacts again while rendering.
Neither ever drops a line: on an internal failure the line is still written, with a fixed safe message.

:class:`RepeatFilter` is the one exception, on purpose: a warning or error identical to one written less
than ``REPEAT_WINDOW_SECONDS`` ago (same logger, level, rendered message and extra fields) is counted, not
written; the next identical line after the window carries ``extra.repeated`` = how many were held back.
A dependency outage (aiokafka retries every ``retry_backoff_ms``) then writes a line per window, not 10/s.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from opentelemetry import trace

from yovision_platform.security._redaction import (
    JsonValue,
    SecretRegistry,
    redact_exception,
    redact_field,
    redact_text,
    redact_value,
)

__all__ = [
    "LOG_LEVELS",
    "JsonFormatter",
    "RedactionFilter",
    "RepeatFilter",
    "configure_logging",
    "extra_fields",
]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
REPEAT_WINDOW_SECONDS = 60.0
REPEAT_KEYS_MAX = 1024
REDACTION_FAILED_MSG = "log record redaction failed; original message suppressed"
ARGS_FAILED_SUFFIX = " [log args could not be rendered]"
FORMAT_FAILED_MSG = "log record formatting failed; original message suppressed"
# Loggers of libraries that install their own handlers; we route them through the root handler instead.
THIRD_PARTY_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "aiokafka")

_STANDARD_RECORD_ATTRS = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
    | {"message", "asctime", "taskName", "redaction_failed"}
)


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a caller passed via ``extra=``: everything on the record that LogRecord doesn't define."""
    return {key: value for key, value in vars(record).items() if key not in _STANDARD_RECORD_ATTRS}


class RedactionFilter(logging.Filter):
    """Rewrites a record in place: message (with args merged), every extra field, exception text.

    Always returns True: a record is never dropped, even when redaction itself fails.
    """

    def __init__(self, registry: SecretRegistry | None = None) -> None:
        super().__init__()
        self._registry = registry

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            self._redact(record)
        except Exception:
            _suppress(record)
        return True

    def _redact(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            # Bad %-args: keep the template, never the args.
            message = str(record.msg) + ARGS_FAILED_SUFFIX
        record.msg = redact_text(message, self._registry)
        record.args = None
        for key, value in extra_fields(record).items():
            setattr(record, key, redact_field(key, value, self._registry))
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_exception(record.exc_info[1], self._registry)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text, self._registry)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info, self._registry)


class RepeatFilter(logging.Filter):
    """Holds back warnings and errors identical to one written within `window_seconds`, and counts them."""

    def __init__(
        self,
        window_seconds: float = REPEAT_WINDOW_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = REPEAT_KEYS_MAX,
    ) -> None:
        super().__init__()
        self._window = window_seconds
        self._clock = clock
        self._max_keys = max_keys
        self._seen: OrderedDict[tuple[str, int, str, str], tuple[float, int]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        try:
            key = (
                record.name,
                record.levelno,
                record.getMessage(),
                repr(sorted(extra_fields(record).items())),
            )
        except Exception:
            return True  # the redaction filter deals with a record that cannot be rendered
        now = self._clock()
        first, held = self._seen.get(key, (None, 0))
        if first is not None and now - first < self._window:
            self._seen[key] = (first, held + 1)
            return False
        if held:
            record.repeated = held
        self._seen[key] = (now, 0)
        self._seen.move_to_end(key)
        while len(self._seen) > self._max_keys:
            self._seen.popitem(last=False)
        return True


def _suppress(record: logging.LogRecord) -> None:
    for key in extra_fields(record):
        delattr(record, key)
    record.msg = REDACTION_FAILED_MSG
    record.args = None
    record.exc_info = None
    record.exc_text = None
    record.stack_info = None
    record.redaction_failed = True


class JsonFormatter(logging.Formatter):
    """Renders one redacted JSON object per record (no trailing newline; the handler adds it)."""

    def __init__(self, service: str, instance_id: str, registry: SecretRegistry | None = None) -> None:
        super().__init__()
        self._service = service
        self._instance_id = instance_id
        self._registry = registry

    def format(self, record: logging.LogRecord) -> str:
        try:
            return json.dumps(self._document(record), ensure_ascii=False, separators=(",", ":"))
        except Exception:
            fallback = self._base(record, FORMAT_FAILED_MSG)
            fallback["format_failed"] = True
            return json.dumps(fallback, separators=(",", ":"))

    def _base(self, record: logging.LogRecord, message: str) -> dict[str, JsonValue]:
        timestamp = datetime.fromtimestamp(record.created, tz=UTC)
        return {
            "ts": timestamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": message,
            "service": self._service,
            "instance_id": self._instance_id,
        }

    def _document(self, record: logging.LogRecord) -> dict[str, JsonValue]:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg) + ARGS_FAILED_SUFFIX
        document = self._base(record, redact_text(message, self._registry))
        span = trace.get_current_span().get_span_context()
        if span.is_valid:  # the formatter runs in the logging call's own context
            document["trace_id"] = trace.format_trace_id(span.trace_id)
            document["span_id"] = trace.format_span_id(span.span_id)
        extra = extra_fields(record)
        if extra:
            document["extra"] = redact_value(extra, self._registry)
        if record.exc_info and record.exc_info[1] is not None:
            document["exc"] = redact_exception(record.exc_info[1], self._registry)
        elif record.exc_text:
            document["exc"] = redact_text(record.exc_text, self._registry)
        if record.stack_info:
            document["stack"] = redact_text(record.stack_info, self._registry)
        if getattr(record, "redaction_failed", False):
            document["redaction_failed"] = True
        return document


_HANDLER_MARK = "_yovision_json_handler"


def configure_logging(
    service: str,
    instance_id: str,
    level: str,
    *,
    stream: TextIO | None = None,
    registry: SecretRegistry | None = None,
) -> logging.Handler:
    """Send every log record (root logger and uvicorn/aiokafka) as redacted JSON lines to ``stream``
    (default stdout). Idempotent: a second call replaces the handler installed by the first.
    Call it once from the composition root, after settings are loaded (so secrets are registered)."""
    normalized = level.upper()
    if normalized not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stdout)
    handler.setFormatter(JsonFormatter(service, instance_id, registry))
    handler.addFilter(RepeatFilter())  # first: it keys on the message before redaction rewrites it
    handler.addFilter(RedactionFilter(registry))
    setattr(handler, _HANDLER_MARK, True)

    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, _HANDLER_MARK, False):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(normalized)
    for name in THIRD_PARTY_LOGGERS:
        third_party = logging.getLogger(name)
        third_party.handlers.clear()
        third_party.propagate = True
    return handler
