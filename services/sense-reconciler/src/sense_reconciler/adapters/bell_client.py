"""Signed HTTP client for Bell's batch endpoint (``POST /internal/v1/audit-events:batch``): the adapter of
the audit push's `BellPort`.

Every request is signed over the exact bytes sent (docs/signing.md) with a fresh nonce and the current
time, so a retried batch is a new request to Bell: its facts come back ``duplicate`` when Bell already
stored them. Each fact's trace context goes in a header of its own, outside the signature
(`yovision_platform.audit_push`). TLS is always verified (httpx default); redirects are not
followed. The whole exchange runs under one deadline. Nothing of the request, the key or the signature is
logged or raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

import httpx
from opentelemetry.trace import Span, SpanKind

from sense_reconciler.domain.audit_facts import OutboxFact, batch_body
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.domain.audit_push_outcome import (
    BatchFailure,
    ItemResults,
    PushFailureCode,
    parse_batch_response,
)
from yovision_platform.audit_push import BATCH_PATH, ITEM_TRACEPARENTS_HEADER, item_traceparents_header
from yovision_platform.observability import context_of, current_traceparent_of, tracer, tracing_on
from yovision_platform.security import sign_request

__all__ = ["BellClient"]

_tracer = tracer(__name__)
MAX_RESPONSE_BYTES = 1024 * 1024  # a 100-item BatchResult is ~15 KiB; anything bigger is malformed


@contextlib.contextmanager
def _push_spans(facts: Sequence[OutboxFact]) -> Iterator[dict[int, str]]:
    """A producer span per fact that carries a trace context, for as long as the push takes; the
    traceparents of those spans by item index, for Bell's spans to continue (outside the signature)."""
    spans: dict[int, Span] = {}
    if tracing_on():
        for index, fact in enumerate(facts):
            if fact.trace_parent:
                spans[index] = _tracer.start_span(
                    "audit push",
                    context=context_of(fact.trace_parent),
                    kind=SpanKind.PRODUCER,
                    attributes={
                        "yovision.event_id": str(fact.event_id),
                        "yovision.device_id": str(fact.device_id),
                    },
                )
    try:
        yield {
            index: parent
            for index, span in spans.items()
            if (parent := current_traceparent_of(span)) is not None
        }
    finally:
        for span in spans.values():
            span.end()


class BellClient:
    """One connection pool to Bell. Use as an async context manager."""

    def __init__(
        self,
        config: AuditPushConfig,
        *,
        clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._config = config
        self._clock = clock
        self._http = httpx.AsyncClient(
            base_url=config.bell_url,
            timeout=httpx.Timeout(config.request_deadline_seconds),
            follow_redirects=False,
            transport=transport,
        )

    async def __aenter__(self) -> BellClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, facts: Sequence[OutboxFact]) -> ItemResults | BatchFailure:
        """Push ``facts`` as one signed batch; never raises for network or protocol trouble."""
        body = batch_body(facts)
        headers = sign_request(
            self._config.keyring, method="POST", path=BATCH_PATH, body=body, now=self._clock()
        )
        headers["content-type"] = "application/json"
        sent: list[uuid.UUID] = [fact.event_id for fact in facts]
        with _push_spans(facts) as traceparents:
            if traceparents:
                headers[ITEM_TRACEPARENTS_HEADER] = item_traceparents_header(traceparents)
            try:
                async with asyncio.timeout(self._config.request_deadline_seconds):
                    status_code, payload = await self._post(body, headers)
            except (TimeoutError, httpx.TimeoutException):
                return BatchFailure(PushFailureCode.TIMEOUT)
            except httpx.HTTPError:
                return BatchFailure(PushFailureCode.NETWORK_ERROR)
            return parse_batch_response(status_code, payload, sent)

    async def _post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        async with self._http.stream("POST", BATCH_PATH, content=body, headers=headers) as response:
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    return response.status_code, b""
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)
